"""Show the real source of a kernel in a notebook: the region between two marker lines.

A region is marked in the source file by a line containing ``[name]`` before it and another after it
(``/* [crs_matvec] */`` in C, ``! [crs_matvec]`` in Fortran). The book prints what the compiler
compiled, never a pasted copy.
"""

from __future__ import annotations

from pathlib import Path

from .native import ROOT

_LANGUAGE = {".c": "c", ".h": "c", ".f90": "fortran", ".py": "python", ".txt": "cmake"}


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


def source(path: str | Path, name: str | None = None):
    """Display a marked region of a source file with syntax highlighting (in a notebook)."""
    from IPython.display import Markdown

    lang = _LANGUAGE.get(Path(path).suffix, "")
    title = f"`{path}`" + (f" — `{name}`" if name else "")
    return Markdown(f"{title}\n\n```{lang}\n{region(path, name)}\n```")
