"""A lecture page shows its subject and reads as sentences (HOW-TO-REVIEW items 8 and 10 that a
program can see; the outside reads found each of these on new pages, three reviews running).

- A code cell that mostly builds glue sentences is folded (`hide-input`): the learner reads the
  calls the lecture is about, not the scaffolding around its verdicts.
- No plural stub ("1 thread(s)") in the prose or in a string a cell prints or glues: the run knows
  its counts, so the sentence can agree with them.
- A name from the parameters cell is not used in a sentence as if it were its value ("on
  `TIMED_RANKS` ranks"): the page glues the value; the name appears only where the text talks
  about the parameter itself.

Fast: reads the notebooks, runs nothing."""

import ast
import io
import json
import re
import tokenize
from pathlib import Path

import pytest

from test_prose import prose, sentences

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
FOLDED = {"hide-input", "remove-input", "hide-cell", "remove-cell"}
GLUE_SHARE = 0.4                     # a cell with this share of its lines inside glue() is folded
PLURAL_STUB = re.compile(r"[A-Za-z]\(s\)")


def cells(path: Path, kind: str):
    return [c for c in json.loads(path.read_text())["cells"] if c["cell_type"] == kind]


def python_of(source: str) -> str:
    """A cell's code with IPython's magics and shell lines commented out, so `ast` reads it."""
    return "\n".join("#" + line if line.lstrip().startswith(("%", "!")) else line
                     for line in source.splitlines())


def glue_share(source: str) -> float:
    """The share of a cell's code lines (not blank, not comments) that lie inside a glue() call."""
    code = python_of(source)
    lines = {n for n, line in enumerate(code.splitlines(), 1)
             if line.strip() and not line.lstrip().startswith("#")}
    glued = set()
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Call) and \
                getattr(node.func, "id", getattr(node.func, "attr", None)) == "glue":
            glued.update(range(node.lineno, node.end_lineno + 1))
    return len(glued & lines) / max(len(lines), 1)


def strings_of(source: str) -> list[str]:
    """The string literals of a cell (f-strings' literal parts included)."""
    found = []
    for token in tokenize.generate_tokens(io.StringIO(python_of(source)).readline):
        if token.type == tokenize.STRING or token.type == getattr(tokenize, "FSTRING_MIDDLE", -1):
            found.append(token.string)
    return found


def parameter_names(path: Path) -> set[str]:
    names = set()
    for cell in cells(path, "code"):
        if "parameters" in cell.get("metadata", {}).get("tags", []):
            for node in ast.parse(python_of("".join(cell["source"]))).body:
                if isinstance(node, ast.Assign):
                    names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    return names


def unfolded_glue_cells(path: Path) -> list[str]:
    bad = []
    for number, cell in enumerate(cells(path, "code")):
        tags = set(cell.get("metadata", {}).get("tags", []))
        share = glue_share("".join(cell["source"]))
        if share >= GLUE_SHARE and not tags & FOLDED:
            bad.append(f"code cell {number} ({share:.0%} of its lines are glue)")
    return bad


def plural_stubs(path: Path) -> list[str]:
    found = [s for c in cells(path, "markdown") for s in PLURAL_STUB.findall("".join(c["source"]))]
    for cell in cells(path, "code"):
        found += [s for text in strings_of("".join(cell["source"])) for s in
                  PLURAL_STUB.findall(text)]
    return found


def parameters_in_prose(path: Path) -> list[str]:
    names = parameter_names(path)
    bad = []
    for cell in cells(path, "markdown"):
        for sentence in sentences("".join(cell["source"])):
            used = {n for n in names if re.search(rf"`\$?{n}`", sentence)}
            if used and "parameter" not in sentence.lower():
                bad.append(f"{sorted(used)} in: {' '.join(sentence.split())[:120]}")
    return bad


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_cells_that_build_sentences_are_folded(path):
    assert not unfolded_glue_cells(path), \
        f"{path.name}: tag these cells hide-input (they build the page's sentences): " \
        f"{unfolded_glue_cells(path)}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_no_plural_stubs(path):
    assert not plural_stubs(path), \
        f"{path.name}: word the count by the run instead of {plural_stubs(path)}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_parameter_names_are_not_used_as_values(path):
    assert not parameters_in_prose(path), \
        f"{path.name}: glue the value, or say it is the parameter: {parameters_in_prose(path)}"


def _notebook(tmp_path, markdown: str, code: str, tags=(), parameters="RANKS = 4\n") -> Path:
    nb = {"cells": [{"cell_type": "code", "source": parameters, "outputs": [],
                     "metadata": {"tags": ["parameters"]}, "execution_count": None},
                    {"cell_type": "markdown", "source": markdown, "metadata": {}},
                    {"cell_type": "code", "source": code, "outputs": [],
                     "metadata": {"tags": list(tags)}, "execution_count": None}],
          "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    path = tmp_path / "page.ipynb"
    path.write_text(json.dumps(nb))
    return path


GLUE_CELL = ('%%px\nverdict = "fast" if t < 1 else "slow"\n'
             'glue("verdict", verdict,\n     display=False)\nglue("t", t, display=False)\n')


def test_the_checks_find_what_they_look_for(tmp_path):
    bad = _notebook(tmp_path, "Solved on `RANKS` ranks: 3 thread(s).", GLUE_CELL + 'print(f"{n} rank(s)")')
    assert unfolded_glue_cells(bad) and len(plural_stubs(bad)) == 2 and parameters_in_prose(bad)
    good = _notebook(tmp_path, "Set the parameter `RANKS` to change the ranks.", GLUE_CELL,
                     tags=["hide-input"])
    assert not unfolded_glue_cells(good) and not plural_stubs(good) \
        and not parameters_in_prose(good)
