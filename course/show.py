"""What the lecture notebooks show, and how: kernels, diffs, long text and figures.

A region is marked in the source file by a line containing ``[name]`` before it and another after it
(``/* [crs_matvec] */`` in C, ``! [crs_matvec]`` in Fortran). The book prints what the compiler
compiled, never a pasted copy: `source` shows one file's region, `source_tabs` the C and the Fortran
twin as two tabs (sphinx-design, synchronised across the page), `diff_tabs` what changes between two
versions of a kernel in both languages. A signature too long for the book's column is re-broken at
its commas for display (whitespace, and Fortran's ``&``, only: the tokens are those of the file).

Every lecture calls `setup()` in its first code cell: SVG figures and fonts that stay readable at the
width the book shows them; `wrap` folds long prose printed by a cell; `count` writes "1 thread"
and "2 threads" where a run knows the number.
"""

from __future__ import annotations

import difflib
import re
import textwrap
from pathlib import Path

from .native import ROOT

_LANGUAGE = {".c": "c", ".h": "c", ".f90": "fortran", ".F90": "fortran", ".py": "python", ".txt": "cmake"}

#: characters of code that fit the book's column (688 px at 1280 px, 0.875 em monospace) unscrolled
WIDTH = 78

#: matplotlib settings of every lecture: figures are drawn about 7-12 inches wide and shown at the
#: column's 688 px (7.2 inches at 96 px per inch), so text is set large enough to stay >= 9 pt
FIGURE_STYLE = {
    "font.size": 13,
    "axes.titlesize": 14,
    "axes.labelsize": 13,
    "xtick.labelsize": 12,
    "ytick.labelsize": 12,
    "legend.fontsize": 12,
    "legend.title_fontsize": 12,
    "figure.titlesize": 15,
    "lines.linewidth": 1.8,
    "svg.fonttype": "path",      # text as outlines: the same glyphs in every browser, offline
}


def setup() -> None:
    """Figures as SVG (sharp at any zoom, no 100-dpi PNGs scaled down) with readable fonts.

    Call it in a notebook's first code cell, after importing matplotlib.pyplot.
    """
    import matplotlib.pyplot as plt
    from matplotlib_inline.backend_inline import set_matplotlib_formats

    set_matplotlib_formats("svg")
    plt.rcParams.update(FIGURE_STYLE)


def count(number, noun: str, plural: str | None = None) -> str:
    """A count and its noun agreeing with it, for sentences a run writes: count(1, "thread") is
    "1 thread", count(2, "thread") "2 threads", count(3, "matrix", "matrices") "3 matrices"."""
    return f"{number:g} {noun if number == 1 else plural or noun + 's'}"


_SENTENCE_END = (".", ",", ":", ";", ")")


def wrap(text: str, width: int = WIDTH) -> str:
    """Long prose lines of `text` folded to `width` characters, for printing in a notebook.

    A line is folded when it is longer than `width` and ends like prose (., ,, :, ; or a closing
    parenthesis) or is a ``#`` comment; other lines (shell commands, table rows) are kept whole so
    that they can be copied. Folded comment lines keep their ``# `` on every line.
    """
    out = []
    for line in text.splitlines():
        stripped = line.rstrip()
        comment = stripped.lstrip().startswith("# ")
        if len(stripped) <= width or not (comment or stripped.endswith(_SENTENCE_END)):
            out.append(stripped)
            continue
        indent = stripped[:len(stripped) - len(stripped.lstrip())]
        prefix = indent + ("# " if comment else "")
        body = stripped.lstrip()[2:] if comment else stripped.lstrip()
        out.extend(textwrap.wrap(body, width, initial_indent=prefix, subsequent_indent=prefix,
                                 break_long_words=False, break_on_hyphens=False))
    return "\n".join(out)


def region(path: str | Path, name: str | None = None) -> str:
    """The lines between the two lines that contain ``[name]`` (the whole file if name is None)."""
    path = ROOT / path
    lines = path.read_text().splitlines()
    if name is None:
        return "\n".join(lines)
    marks = [i for i, line in enumerate(lines) if f"[{name}]" in line]
    if len(marks) != 2:
        raise ValueError(f"{path.relative_to(ROOT)}: expected 2 lines marked [{name}], "
                         f"found {len(marks)}")
    body = lines[marks[0] + 1:marks[1]]
    # a marker line may also open a comment that explains the region: keep that comment
    first = lines[marks[0]]
    if first.lstrip().startswith("/*") and "*/" not in first:
        body = ["/*" + first.split(f"[{name}]", 1)[1]] + body
    return "\n".join(body)


def _breaks(line: str, fortran: bool) -> list[int]:
    """Where a signature line may be broken: after ", " (outside strings), before " bind(" and
    " result(" in Fortran."""
    spots, quote = [], None
    clauses = [m.start() for m in re.finditer(r" (?:bind|result)\(", line, re.IGNORECASE)]
    for i, ch in enumerate(line):
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "," and line[i + 1:i + 2] == " " and not (fortran and clauses
                                                            and i > clauses[0]):
            spots.append(i + 1)                      # (not inside bind(C, name=...))
    return sorted(spots + (clauses if fortran else []))


def _fold(line: str, indent: int, fortran: bool, width: int) -> list[str]:
    """One signature line folded to `width` at its commas; continuations start at column `indent`."""
    out = []
    while len(line) > width:
        room = width - (2 if fortran else 0)         # Fortran needs " &" at the end
        spots = [i for i in _breaks(line, fortran) if line[:i].strip() and i <= room]
        if not spots:
            break
        cut = spots[-1]
        out.append(line[:cut].rstrip() + (" &" if fortran else ""))
        line = " " * indent + line[cut:].lstrip()
    return out + [line]


_SIGNATURE = {
    "c": re.compile(r"^(?:static\s+)?(?:inline\s+)?(?:void|int|double|float|long|size_t|"
                    r"PetscErrorCode)\s*\*?\s*(\w+)\s*\("),
    "fortran": re.compile(r"^\s*(?:(?:pure|elemental|recursive|integer|real|double precision|"
                          r"integer\([^)]*\)|real\([^)]*\))\s+)*(?:subroutine|function)\s+(\w+)\s*\(",
                          re.IGNORECASE),
}


def format_signatures(text: str, lang: str, width: int = WIDTH) -> str:
    """`text` with the lines of its function signatures folded to `width` characters.

    Only whitespace changes (and Fortran's continuation ``&``): a C parameter list is broken after
    a comma and continued under the first parameter, a Fortran one gets ``&`` continuations.
    Lines other than signatures are left as they are.
    """
    pattern = _SIGNATURE.get(lang)
    if pattern is None:
        return text
    fortran = lang == "fortran"
    lines, out, i = text.splitlines(), [], 0
    while i < len(lines):
        match = pattern.match(lines[i])
        if not match:
            out.append(lines[i])
            i += 1
            continue
        indent = match.end()                         # just after the "("
        first = i
        while True:                                  # the signature's lines
            line = lines[i]
            i += 1
            code = line.split("!", 1)[0] if fortran else line.split("/*", 1)[0]
            done = not code.rstrip().endswith("&") if fortran else ")" in code
            if done or i >= len(lines):
                break
        signature = lines[first:i]
        if all(len(line) <= width for line in signature):
            out.extend(signature)
        elif any(("!" if fortran else "/*") in line for line in signature):
            for line in signature:                   # comments inside: fold line by line
                out.extend(_fold(line, indent, fortran, width))
        else:                                        # one line again, then folded at commas
            joined = " ".join(line.strip().removesuffix("&").strip() if k else
                              line.rstrip().removesuffix("&").rstrip()
                              for k, line in enumerate(signature))
            out.extend(_fold(joined, indent, fortran, width))
    return "\n".join(out)


def _block(path: str | Path, name: str | None, title: bool = True) -> str:
    lang = _LANGUAGE.get(Path(path).suffix, "")
    text = format_signatures(region(path, name), lang)
    head = (f"`{path}`" + (f" — `{name}`" if name else "") + "\n\n") if title else ""
    return f"{head}```{lang}\n{text}\n```"


def source(path: str | Path, name: str | None = None):
    """Display a marked region of a source file with syntax highlighting (in a notebook)."""
    from IPython.display import Markdown

    return Markdown(_block(path, name))


def _tabs(items: list[tuple[str, str]]) -> str:
    """MyST markup of a sphinx-design tab set; the tabs of one language are synchronised."""
    parts = ["::::{tab-set}"]
    for label, body in items:
        parts += [f":::{{tab-item}} {label}", f":sync: {label.lower()}", "", body, ":::"]
    parts.append("::::")
    return "\n".join(parts)


def source_tabs(c_path: str | Path, f_path: str | Path, name: str | None = None,
                f_name: str | None = None):
    """The C and the Fortran twin of a kernel as two tabs, C first (in the book; in Jupyter the
    two listings one under the other)."""
    from IPython.display import Markdown

    return Markdown(_tabs([("C", _block(c_path, name)), ("Fortran", _block(f_path, f_name or name))]))


def text_tabs(items: list[tuple[str, str, str]]):
    """Texts that are not files of the course, e.g. the same job script for Slurm and for PJM, as
    tabs: (label, text, language of the highlighting)."""
    from IPython.display import Markdown

    return Markdown(_tabs([(label, f"```{lang}\n{text.rstrip()}\n```")
                           for label, text, lang in items]))


def diff(path: str | Path, old: str, new: str, context: int = 1) -> str:
    """The unified diff of the regions `old` and `new` of one file, the kernel's own name masked."""
    a = region(path, old).replace(old, "NAME").splitlines()
    b = region(path, new).replace(new, "NAME").splitlines()
    return "\n".join(difflib.unified_diff(a, b, old, new, n=context, lineterm=""))


def diff_tabs(c_path: str | Path, f_path: str | Path, old: str, new: str, context: int = 1):
    """What changes from kernel `old` to kernel `new`, in C and in Fortran, as two tabs."""
    from IPython.display import Markdown

    items = [(label, f"`{path}`: `{old}` → `{new}`\n\n```diff\n{diff(path, old, new, context)}\n```")
             for label, path in (("C", c_path), ("Fortran", f_path))]
    return Markdown(_tabs(items))
