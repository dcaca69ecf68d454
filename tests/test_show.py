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
                  *ROOT.glob("src_fortran/**/*.f90"), *ROOT.glob("src_fortran/**/*.F90")])


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
    if path.lower().endswith(".f90"):
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


# ---- what the book shows: signatures, C | Fortran tabs, diffs, wrapped text, figures ----------

import importlib.util  # noqa: E402
import json  # noqa: E402

LANGS = {".c": "c", ".h": "c", ".f90": "fortran", ".F90": "fortran"}


def _tokens(text, fortran):
    """The text without whitespace (and without Fortran's continuation marks)."""
    return re.sub(r"[\s&]" if fortran else r"\s", "", text)


@pytest.mark.parametrize("path, name", ALL_MARKERS, ids=[f"{p}:{n}" for p, n in ALL_MARKERS])
def test_signatures_fit_the_column_and_keep_their_tokens(path, name):
    lang = LANGS[path[path.rfind("."):]]
    original = show.region(path, name)
    shown = show.format_signatures(original, lang)
    assert _tokens(shown, lang == "fortran") == _tokens(original, lang == "fortran")
    pattern = show._SIGNATURE[lang]
    lines = shown.splitlines()
    start = next(i for i, line in enumerate(lines) if pattern.match(line))
    end = start
    if lang == "fortran":
        while lines[end].split("!")[0].rstrip().endswith("&"):
            end += 1
    else:
        while ")" not in lines[end]:
            end += 1
    too_long = [line for line in lines[start:end + 1] if len(line) > show.WIDTH]
    assert not too_long, f"signature lines longer than {show.WIDTH}: {too_long}"


def test_fortran_continuation_is_valid():
    shown = show.format_signatures(show.region("src_fortran/01_fem1d/fem1d.f90", "fem1d_boundary"),
                                   "fortran")
    first, second = shown.splitlines()[3:5]
    assert first.endswith(") &") and second.lstrip().startswith('bind(C, name="fem1d_boundary")')


def test_source_tabs_show_both_languages():
    md = show.source_tabs("src_c/03_openmp/spmv.c", "src_fortran/03_openmp/spmv.f90",
                          "sell_matvec").data
    assert md.startswith("::::{tab-set}") and md.rstrip().endswith("::::")
    assert ":::{tab-item} C\n:sync: c" in md and ":::{tab-item} Fortran\n:sync: fortran" in md
    assert "```c\n" in md and "```fortran\n" in md
    assert "subroutine sell_matvec" in md and "void sell_matvec" in md


def test_diff_tabs_show_what_changes_in_both_languages():
    md = show.diff_tabs("src_c/03_openmp/pcg.c", "src_fortran/03_openmp/pcg.f90",
                        "pcg_v0", "pcg_v1").data
    assert md.count("```diff\n") == 2
    assert re.search(r"^\+ *#pragma omp parallel for", md, re.M) and "+    !$omp parallel do" in md


def test_wrap_folds_prose_and_keeps_commands():
    from course import bench
    note = bench.openmp.numa_note({"numa_nodes": 1})
    assert max(map(len, note.splitlines())) > show.WIDTH      # the note itself is one long line
    wrapped = show.wrap(note)
    words = lambda text: [w for w in text.split() if w != "#"]      # noqa: E731
    assert words(wrapped) == words(note), "wrapping changed the words"
    for line in wrapped.splitlines():
        assert len(line) <= show.WIDTH or not line.endswith(show._SENTENCE_END), line
    commands = [line for line in note.splitlines() if line.startswith(("numactl", "OMP_"))]
    assert commands and all(line in wrapped.splitlines() for line in commands)


def test_setup_makes_figures_svg_with_readable_fonts():
    import matplotlib
    matplotlib.use("Agg")
    from IPython.core.interactiveshell import InteractiveShell
    shell = InteractiveShell.instance()
    try:
        show.setup()
        import matplotlib.pyplot as plt
        assert plt.rcParams["font.size"] >= 12 and plt.rcParams["xtick.labelsize"] >= 12
        formatters = shell.display_formatter.formatters
        fig = plt.figure()
        assert formatters["image/svg+xml"].lookup(fig) is not None
        assert formatters["image/png"].lookup_by_type(type(fig)) is None \
            if type(fig) in formatters["image/png"].type_printers else True
        plt.close(fig)
    finally:
        InteractiveShell.clear_instance()


# ---- every lecture notebook calls these helpers --------------------------------------------------

SHOWN_LECTURES = sorted((ROOT / "notebooks").glob("0[0-9]_*.ipynb"))
CALL = re.compile(r'show\.source\(\s*"(src_(?:c|fortran)/[^"]+)",\s*"(\w+)"\)')
TABS = re.compile(r'show\.source_tabs\(\s*"(src_c/[^"]+)",\s*"(src_fortran/[^"]+)",\s*"(\w+)"')


def _code(path):
    cells = json.loads(path.read_text())["cells"]
    return [("".join(c["source"]), c.get("metadata", {})) for c in cells if c["cell_type"] == "code"]


@pytest.mark.parametrize("path", SHOWN_LECTURES, ids=[p.stem for p in SHOWN_LECTURES])
def test_lecture_sets_up_its_figures(path):
    code = _code(path)
    setup = next(i for i, (src, _) in enumerate(code) if "show.setup()" in src)
    assert setup <= 2, "show.setup() belongs in the setup cell"
    assert not any("InlineBackend.figure_formats" in src for src, _ in code), \
        "figure formats are set by show.setup() only"


@pytest.mark.parametrize("path", SHOWN_LECTURES, ids=[p.stem for p in SHOWN_LECTURES])
def test_every_kernel_shown_is_shown_in_c_and_fortran(path):
    """A kernel shown with show.source in one language is shown in the other one too (or as
    tabs); the Fortran twin has the same name."""
    text = "\n".join(src for src, _ in _code(path))
    shown = {(p.split("/")[0], name) for p, name in CALL.findall(text)}
    for c_path, f_path, name in TABS.findall(text):
        shown |= {("src_c", name), ("src_fortran", name)}
        show.region(c_path, name), show.region(f_path, name)     # both exist
    only_c = {name for lang, name in shown if lang == "src_c"} - \
        {name for lang, name in shown if lang == "src_fortran"}
    only_f = {name for lang, name in shown if lang == "src_fortran"} - \
        {name for lang, name in shown if lang == "src_c"}
    assert not only_c and not only_f, f"C only: {only_c}, Fortran only: {only_f}"
    assert "difflib.unified_diff" not in text, "diffs of kernels: show.diff_tabs (C and Fortran)"


# ---- the book's %%writefile highlighting (book/_ext/writefile_lexer.py) ----------------------------

def _lexer_module():
    spec = importlib.util.spec_from_file_location(
        "writefile_lexer", ROOT / "book" / "_ext" / "writefile_lexer.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_writefile_cells_get_their_language():
    lexer = _lexer_module()
    assert lexer.language_of_cell("%%writefile cg_racy.c\n#include <omp.h>") == "c-writefile"
    assert lexer.language_of_cell("%%writefile -a k.f90\nend") == "fortran-writefile"
    assert lexer.language_of_cell("%%writefile halo.py\nimport numpy") is None
    assert lexer.language_of_cell("import numpy as np") is None


def test_writefile_lexer_draws_pragmas_as_preprocessor_lines():
    from pygments import highlight
    from pygments.formatters import HtmlFormatter
    from pygments.token import Error
    lexer = _lexer_module()
    text = "%%writefile x.c\n#pragma omp parallel for\nfor (int i = 0; i < n; i++) s += 1.0;\n"
    tokens = list(lexer.CWritefileLexer().get_tokens(text))
    assert not [t for t in tokens if t[0] in Error], tokens
    assert "".join(v for _, v in tokens) == text
    html = highlight(text, lexer.CWritefileLexer(), HtmlFormatter())
    assert '<span class="cp">#pragma omp parallel for' in html
    fortran = "%%writefile x.f90\n!$omp parallel do\ndo i = 1, n\nend do\n"
    tokens = list(lexer.FortranWritefileLexer().get_tokens(fortran))
    assert not [t for t in tokens if t[0] in Error] and "".join(v for _, v in tokens) == fortran
