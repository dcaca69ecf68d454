"""course.show.region: the notebooks show kernels by the `[name]` marker lines around them."""

from __future__ import annotations

import re

import pytest

from conftest import ROOT
from course import show

# A marker is a comment line whose first word is [name]: "/* [name]", "/* [name] */", "! [name]".
# (Matching `\[(\w+)\]` anywhere would also catch array subscripts such as val[k] in C.)
MARKER = re.compile(r"^\s*(?:/\*|!)\s*\[(\w+)\]")
SOURCES = sorted([*ROOT.glob("src_c/**/*.c"), *ROOT.glob("src_c/**/*.h"),
                  *ROOT.glob("src_fortran/**/*.f90")])


def markers(path):
    """{name: [line numbers]} of the marker lines of a file."""
    found = {}
    for number, line in enumerate(path.read_text().splitlines()):
        m = MARKER.match(line)
        if m:
            found.setdefault(m[1], []).append(number)
    return found


ALL_MARKERS = [(path.relative_to(ROOT).as_posix(), name)
               for path in SOURCES for name in markers(path)]


def test_sources_have_markers():
    files = {path for path, _ in ALL_MARKERS}
    assert any(f.startswith("src_c/") for f in files)
    assert any(f.startswith("src_fortran/") for f in files), "no markers in the Fortran sources"


@pytest.mark.parametrize("path", [p.relative_to(ROOT).as_posix() for p in SOURCES])
def test_markers_come_in_pairs(path):
    for name, lines in markers(ROOT / path).items():
        assert len(lines) == 2, f"{path}: [{name}] on lines {[n + 1 for n in lines]}"


@pytest.mark.parametrize("path, name", ALL_MARKERS, ids=[f"{p}:{n}" for p, n in ALL_MARKERS])
def test_region_is_the_text_between_markers(path, name):
    lines = (ROOT / path).read_text().splitlines()
    first, last = markers(ROOT / path)[name]
    text = show.region(path, name)
    body = text.splitlines()
    assert f"[{name}]" not in text, "the marker lines themselves must not be shown"
    # the lines between the markers, in order (a C region may start with the marker's comment)
    expected = lines[first + 1:last]
    assert body[len(body) - len(expected):] == expected
    extra = body[:len(body) - len(expected)]
    if path.endswith((".c", ".h")) and "*/" not in lines[first]:
        assert extra == ["/*" + lines[first].split(f"[{name}]", 1)[1]]
    else:
        assert extra == []
    # the region is the kernel of that name, complete
    assert re.search(rf"\b{name}\s*\(", text), f"{name} is not defined in its region"
    code = [line.strip() for line in body if line.strip()]
    if path.endswith(".f90"):
        assert re.fullmatch(rf"end (subroutine|function) {name}", code[-1], re.IGNORECASE), code[-1]
    else:
        assert code[-1] == "}", code[-1]


def test_c_and_fortran_mark_the_same_kernels():
    c = {name for path, name in ALL_MARKERS if path.startswith("src_c/")}
    f = {name for path, name in ALL_MARKERS if path.startswith("src_fortran/")}
    header = (ROOT / "src_c/include/course.h").read_text()
    kernels = set(re.findall(r"^(?:void|int|double)\s+(\w+)\(", header, re.MULTILINE))
    assert kernels, "no kernels found in course.h"
    assert kernels <= c, f"C kernels without markers: {kernels - c}"
    assert c == f, f"only in C: {c - f}, only in Fortran: {f - c}"


@pytest.mark.parametrize("path", ["src_c/common/crs.c", "src_fortran/common/crs.f90"])
def test_missing_marker_raises(path):
    with pytest.raises(ValueError, match=r"no_such_marker.*found 0"):
        show.region(path, "no_such_marker")


def test_whole_file_without_name():
    path = "src_c/common/crs.c"
    assert show.region(path) == (ROOT / path).read_text().rstrip("\n")


def test_missing_file_raises():
    with pytest.raises(FileNotFoundError):
        show.region("src_c/no_such_file.c", "crs_matvec")
