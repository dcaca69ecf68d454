// The course book: a code line too long for the column wraps, and its continuation starts under
// the line's own indentation (plus four columns), not at the left margin, so that the shape of a
// loop stays readable. Each line of a code block becomes a block of its own with a hanging
// indent; the text, and so what the copy button copies, is unchanged.
"use strict";

function splitIntoLines(pre) {
  const lines = [[]];
  for (const node of Array.from(pre.childNodes)) {
    const parts = node.textContent.split("\n");
    parts.forEach((part, k) => {
      if (k > 0) {
        lines[lines.length - 1].push(document.createTextNode("\n"));
        lines.push([]);
      }
      if (part === "") return;
      if (node.nodeType === Node.ELEMENT_NODE) {
        const piece = node.cloneNode(false);
        piece.textContent = part;
        lines[lines.length - 1].push(piece);
      } else {
        lines[lines.length - 1].push(document.createTextNode(part));
      }
    });
  }
  return lines.filter((nodes) => nodes.length > 0);
}

function hangWrappedLines(pre) {
  // pygments writes flat spans; a block with nested markup (highlighted lines) is left alone
  if (pre.querySelector("span span") || pre.dataset.hanging) return;
  const lines = splitIntoLines(pre);
  pre.textContent = "";
  for (const nodes of lines) {
    const line = document.createElement("span");
    line.className = "course-line";
    nodes.forEach((node) => line.appendChild(node));
    const indent = line.textContent.match(/^ */)[0].length + 4;
    line.style.paddingLeft = `${indent}ch`;
    line.style.textIndent = `-${indent}ch`;
    pre.appendChild(line);
  }
  pre.dataset.hanging = "1";
}

document.addEventListener("DOMContentLoaded", () => {
  document.querySelectorAll("div.highlight pre").forEach(hangWrappedLines);
});
