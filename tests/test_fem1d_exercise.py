"""Tasks 1 and 2 of the exercise of lecture 01_fem1d (the element, the assembly) and their checks
(course.grading.fem1d), in Python, C and Fortran alike: the notebook's graded cells, run on the
solution of each language, pass; on the typical wrong answers in C and in Fortran (k = cond * h,
the whole load on each node, the last element left out, elements written over instead of added,
scalars without `value`) they fail with a message in the learner's language; a crash is an
AssertionError; the untouched stubs get no points; a wrong task 1 costs nothing in task 2."""

from __future__ import annotations

import re

import numpy as np
import pytest

from conftest import solution_cell, written_file
from course.grading import exercise, fem1d

KEY = "01_fem1d"
SUFFIX = {"c": ".c", "fortran": ".f90"}


def changed(text: str, old: str, new: str) -> str:
    assert old in text, f"{old!r} is not in the solution"
    return text.replace(old, new)


def stub(text: str) -> str:
    """The file as the release has it: the solution region gone."""
    return re.sub(r"(/\*|!) ### BEGIN SOLUTION.*END SOLUTION( \*/)?", "", text, flags=re.S)


def graded(tmp_path, monkeypatch, task: int, lang: str, text: str | None = None,
           python: tuple[str, str, str] | None = None) -> None:
    """Run the notebook's graded cell of `task` (1: test_element, 2: test_assemble; its visible
    and hidden checks) on `text` in `lang` (C or Fortran, written where the %%writefile cell
    writes it), or on the Python solution (lang "python") changed by python = (its cell, text,
    replacement)."""
    monkeypatch.chdir(tmp_path)
    namespace = {"np": np, "exercise": exercise, "fem1d": fem1d, f"TASK{task}_LANGUAGE": lang}
    for cell in ("element", "assemble"):
        source = solution_cell(KEY, cell)
        if python is not None and python[0] == cell:
            source = changed(source, *python[1:])
        exec(source, namespace)
    if lang in SUFFIX:
        files = fem1d.ELEMENT_FILES if task == 1 else fem1d.ASSEMBLE_FILES
        (tmp_path / files[lang]).write_text(text)
    exec(solution_cell(KEY, "test_element" if task == 1 else "test_assemble"), namespace)


def element_file(lang: str) -> str:
    return written_file(KEY, f"element_{lang}")


def assemble_file(lang: str) -> str:
    return written_file(KEY, f"assemble_{lang}")


def test_the_cells_write_the_files_the_checks_compile():
    for files, task in ((fem1d.ELEMENT_FILES, "element"), (fem1d.ASSEMBLE_FILES, "assemble")):
        for lang, name in files.items():
            assert solution_cell(KEY, f"{task}_{lang}").startswith(f"%%writefile {name}\n")


@pytest.mark.parametrize("task", [1, 2])
@pytest.mark.parametrize("lang", ["python", "c", "fortran"])
def test_the_solution_passes(tmp_path, monkeypatch, task, lang):
    text = None if lang == "python" else (element_file if task == 1 else assemble_file)(lang)
    graded(tmp_path, monkeypatch, task, lang, text)


@pytest.mark.parametrize("lang, old, new, message", [
    ("c", "double k = cond / h;", "double k = cond * h;", r"ke: k_11 is .*expected cond / h"),
    ("fortran", "ke = cond / h *", "ke = cond * h *", r"ke: k_11 is .*expected cond / h"),
    ("c", "0.5 * qvol * h;", "qvol * h;", r"fe: the load adds up to .*expected qvol \* h"),
    ("fortran", "fe = 0.5_c_double * qvol * h", "fe = qvol * h", "fe: the load adds up to"),
    ("c", "ke[2] = -k;", "ke[2] = k;", "must be symmetric"),
    ("fortran", "fe = 0.5_c_double * qvol * h",
     "fe = [0.25_c_double, 0.75_c_double] * qvol * h", r"fe: entry \(1\) is"),    # 1-based
    ("fortran", "real(c_double), value, intent(in) :: h", "real(c_double), intent(in) :: h",
     "fem1d_element crashed with SIGSEGV|k_11 is"),            # scalars taken as addresses
    ("c", "    /* ### END SOLUTION */",
     "    *(volatile double *)0 = k;\n    /* ### END SOLUTION */",
     "fem1d_element crashed with SIGSEGV"),
    ("fortran", "ke = cond / h *", "ke = cnd / h *", "fem1d_element.f90 does not compile"),
])
def test_a_wrong_compiled_element_fails(tmp_path, monkeypatch, lang, old, new, message):
    text = changed(element_file(lang), old, new)
    with pytest.raises(AssertionError, match=message):
        graded(tmp_path, monkeypatch, 1, lang, text)


@pytest.mark.parametrize("task, python, message", [
    (1, ("element", "cond / h", "cond * h"), r"element_matrix\(h=0.5, cond=2\): k_11 is 1.0"),
    (1, ("element", "0.5 * qvol", "qvol"), r"element_load\(h=0.5, qvol=3\): the load adds up"),
    (2, ("assemble", "range(n - 1)", "range(n - 2)"), r"assemble\(x, .*K: entry \[2, 2\] .*left"),
    (2, ("assemble", "] += element_matrix", "] = element_matrix"), "written over"),
    (2, ("element", "cond / h", "cond * h"), None),          # task 1 wrong: task 2 keeps its points
])
def test_python_answers_get_the_same_checks(tmp_path, monkeypatch, task, python, message):
    if message is None:
        graded(tmp_path, monkeypatch, task, "python", python=python)
        return
    with pytest.raises(AssertionError, match=message):
        graded(tmp_path, monkeypatch, task, "python", python=python)


C_ADD = "K[n * (e + a) + e + b] += ke[2 * a + b];"
F_ADD = "K(e:e + 1, e:e + 1) = K(e:e + 1, e:e + 1) + ke"
LEFT_OUT = "the last element is left out"
WRITTEN_OVER = "written over those of the element before"


@pytest.mark.parametrize("lang, old, new, message", [
    ("c", "e < n - 1;", "e < n - 2;", r"K: entry \[2, 2\] is 1.0, expected 2.0 .*" + LEFT_OUT),
    ("fortran", "do e = 1, n - 1", "do e = 1, n - 2",
     r"K: entry \(3, 3\) is 1.0, expected 2.0 .*" + LEFT_OUT),        # 1-based, in Fortran
    ("c", C_ADD, C_ADD.replace("+=", "="),
     r"K: entry \[1, 1\] is 1.0, expected 2.0 .*" + WRITTEN_OVER),
    ("fortran", F_ADD, "K(e:e + 1, e:e + 1) = ke", r"K: entry \(2, 2\) is 1.0, .*" + WRITTEN_OVER),
    ("fortran", "f(e:e + 1) = f(e:e + 1) + fe", "f(e:e + 1) = fe",
     r"f: entry \(2\) is 0.5, .*" + WRITTEN_OVER),
    ("c", "fem1d_element(x[e + 1] - x[e],", "fem1d_element(x[e] - x[e + 1],",
     r"K: entry \[0, 0\] is -1.0, expected 1.0$"),                   # h < 0: no hint
])
def test_a_wrong_compiled_assembly_fails(tmp_path, monkeypatch, lang, old, new, message):
    with pytest.raises(AssertionError, match=message):
        graded(tmp_path, monkeypatch, 2, lang, changed(assemble_file(lang), old, new))


def test_a_crashing_assembly_is_an_assertion(tmp_path, monkeypatch):
    text = changed(assemble_file("c"), "    /* ### END SOLUTION */",
                   "    *(volatile double *)0 = x[0];\n    /* ### END SOLUTION */")
    with pytest.raises(AssertionError, match="fem1d_assemble crashed with SIGSEGV"):
        graded(tmp_path, monkeypatch, 2, "c", text)


@pytest.mark.parametrize("task", [1, 2])
@pytest.mark.parametrize("lang", ["c", "fortran"])
def test_the_untouched_stub_gets_no_points(tmp_path, monkeypatch, task, lang):
    text = stub((element_file if task == 1 else assemble_file)(lang))
    assert "0.5" not in text and "+ fe" not in text and "+= f" not in text
    with pytest.raises(AssertionError,
                       match=r"k_11 is 0.0, expected|is 0.0, expected .*nothing was added"):
        graded(tmp_path, monkeypatch, task, lang, text)


def test_a_wrong_task1_costs_nothing_in_task2(tmp_path, monkeypatch):
    """The compiled assembly calls the course's fem1d_element, not the learner's of task 1."""
    (tmp_path / "fem1d_element.c").write_text(changed(element_file("c"), "cond / h", "cond * h"))
    graded(tmp_path, monkeypatch, 2, "c", assemble_file("c"))


def test_a_wrong_language_is_one_line():
    for task, compiled in ((1, fem1d.compiled_element), (2, fem1d.compiled_assemble)):
        with pytest.raises(AssertionError, match=f"^TASK{task}_LANGUAGE must be 'python', 'c' "
                                                 "or 'fortran', not 'julia'$"):
            compiled("julia")
