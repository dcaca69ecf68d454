"""Tasks 1 to 3 of the exercise of lecture 02_fem3d (course.grading.fem3d) in Python, C and Fortran:
the notebook's graded cells, visible and hidden checks, run on the solution's answer in each
language pass; typical wrong answers fail them with a message in the learner's language (a factor
xi_a missing, 1/4 for 1/8, J transposed, no inverse of J, no det J, Gauss points at +-1/2, the
Fortran arrays declared the Python way round); the untouched stubs fail; a crash, an endless loop,
a write past an array, a compiler error or a wrong language name is an AssertionError."""

from __future__ import annotations

import re

import numpy as np
import pytest

from conftest import solution_cell, written_file
from course.grading import exercise, fem3d

pytestmark = pytest.mark.timeout(300)

TASKS = {1: "shape_derivatives", 2: "jacobian_and_gradients", 3: "element_matrix"}
KEY = "02_fem3d"


def solution_file(task: int, lang: str) -> str:
    return written_file(KEY, f"{TASKS[task]}_{lang}")


def changed(text: str, old: str, new: str) -> str:
    assert old in text, f"{old!r} is not in the solution"
    return text.replace(old, new)


def python_answers() -> dict:
    """The solution notebook's Python functions of tasks 1 to 3."""
    namespace = {"np": np, "CORNERS": fem3d.CORNERS}
    for name in TASKS.values():
        exec(solution_cell(KEY, name), namespace)
    return namespace


def graded(tmp_path, monkeypatch, task: int, lang: str, text: str | None = None,
           namespace: dict | None = None) -> None:
    """Run the notebook's graded cell of `task` (visible and hidden checks) with its
    TASKn_LANGUAGE = lang, on `text` written where the %%writefile cell writes it (C, Fortran),
    or on the functions of `namespace` (Python)."""
    monkeypatch.chdir(tmp_path)
    namespace = {} if namespace is None else namespace     # the globals of the Python answer
    namespace.update({"np": np, "exercise": exercise, "fem3d": fem3d,
                      f"TASK{task}_LANGUAGE": lang})
    if text is not None:
        (tmp_path / fem3d.FILES[TASKS[task]][lang]).write_text(text)
    try:
        exec(solution_cell(KEY, f"test_{TASKS[task]}"), namespace)
    finally:
        answer = namespace.get(f"_{TASKS[task]}")
        if hasattr(answer, "close"):
            answer.close()


def test_the_notebook_tells_the_languages_apart():
    """Every task has its cell per language, and its graded cell picks by TASKn_LANGUAGE."""
    for task, name in TASKS.items():
        assert f"TASK{task}_LANGUAGE" in solution_cell(KEY, f"test_{name}")
        for lang, file in fem3d.FILES[name].items():
            assert solution_cell(KEY, f"{name}_{lang}").startswith(f"%%writefile {file}\n")


@pytest.mark.parametrize("task", TASKS)
@pytest.mark.parametrize("lang", ["python", "c", "fortran"])
def test_the_solution_passes(tmp_path, monkeypatch, task, lang):
    if lang == "python":
        graded(tmp_path, monkeypatch, task, lang, namespace=python_answers())
    else:
        graded(tmp_path, monkeypatch, task, lang, solution_file(task, lang))


C_DN = "dN[3 * a + 0] = corner[a][0] * fy * fz / 8.0;"
F_DN = "dN(:, a) = corner(:, a) * [f(2) * f(3), f(1) * f(3), f(1) * f(2)] / 8"
C_JAC = "jac[d][r] += xyz8[3 * a + d] * dN[a][r];"
F_JAC = "jac = matmul(xyz8, transpose(dN))"
CENTRE_C = re.escape("dN[3*6 .. 3*6 + 2], are all 1/8")
CENTRE_F = re.escape("dN(:, 7), are all 1/8")
DISTORTED = "grad of a distorted element at .*: grad"


@pytest.mark.parametrize("task, lang, old, new, message", [
    # a factor xi_a missing
    (1, "c", C_DN, "dN[3 * a + 0] = fy * fz / 8.0;", "derivatives add up to 0"),
    (1, "fortran", F_DN, "dN(:, a) = [f(2) * f(3), f(1) * f(3), f(1) * f(2)] / 8",
     "derivatives add up to 0"),
    # 1/4 for 1/8
    (1, "c", "/ 8.0;", "/ 4.0;", CENTRE_C + ".* 0.25, 0.25, 0.25"),
    (1, "fortran", "] / 8", "] / 4", CENTRE_F),
    # dN declared the Python way round, dN(8, 3), and filled row by row: the check reads dN(3, 8)
    (1, "fortran", "intent(out) :: dN(3, 8)", "intent(out) :: dN(8, 3)",
     re.escape("the right numbers in the wrong places: you wrote dN as dN(8, 3), dN(a, r)")),
    # dN filled column by column in C
    (1, "c", "dN[3 * a + 0] = corner[a][0] * fy * fz / 8.0;\n"
     "        dN[3 * a + 1] = fx * corner[a][1] * fz / 8.0;\n"
     "        dN[3 * a + 2] = fx * fy * corner[a][2] / 8.0;",
     "dN[a + 0] = corner[a][0] * fy * fz / 8.0;\n"
     "        dN[a + 8] = fx * corner[a][1] * fz / 8.0;\n"
     "        dN[a + 16] = fx * fy * corner[a][2] / 8.0;",
     re.escape("you wrote dN column by column, dN[a + 8*r]; it is dN[3*a + r]")),
    # J transposed: right on the box (J diagonal), wrong on the hidden distorted elements
    (2, "c", C_JAC, "jac[r][d] += xyz8[3 * a + d] * dN[a][r];", DISTORTED + r"\[3\*\d \+ \d\]"),
    (2, "fortran", F_JAC, "jac = matmul(dN, transpose(xyz8))", DISTORTED + r"\(\d, \d\)"),
    # no inverse of J: grad = dN J
    (2, "c", "dN[a][0] * inv[0][d] + dN[a][1] * inv[1][d] + dN[a][2] * inv[2][d]",
     "dN[a][0] * jac[0][d] + dN[a][1] * jac[1][d] + dN[a][2] * jac[2][d]", "is the identity"),
    (2, "fortran", "grad = matmul(transpose(inv), dN)", "grad = matmul(transpose(jac), dN)",
     "is the identity"),
    # xyz8 declared the Python way round, xyz8(8, 3): the corners read from the wrong places
    (2, "fortran", "intent(in) :: xyz8(3, 8)", "intent(in) :: xyz8(8, 3)",
     re.escape("(corner a is xyz8(:, a), in xyz8(3, 8)), J = diag(2/2, 3/2, 4/2) and det J = 3")),
    # Gauss points at +-1/2
    (3, "c", "{-1.0 / sqrt(3.0), 1.0 / sqrt(3.0)}", "{-0.5, 0.5}",
     re.escape("k_00 = lambda / 3: ke[8*0 + 0] =")),
    (3, "fortran", "g = [-1, 1] / sqrt(3.0_c_double)", "g = [-0.5_c_double, 0.5_c_double]",
     re.escape("k_00 = lambda / 3: ke(1, 1) =")),
    # det J forgotten; J transposed in the gradients (only the distorted elements show it)
    (3, "c", "cond * det_J * (", "cond * (", re.escape("ke[8*0 + 0] = 2.6")),
    (3, "fortran", F_JAC, "jac = matmul(dN, transpose(xyz8))",
     r"element_matrix of distorted element 1 of 10 .*: ke\(\d, \d\) is"),
])
def test_a_wrong_compiled_answer_fails(tmp_path, monkeypatch, task, lang, old, new, message):
    text = changed(solution_file(task, lang), old, new)
    if "dN(8, 3)" in new:                   # filled as the learner thinks of it: dN(a, r)
        text = changed(text, "dN(:, a) = ", "dN(a, :) = ")
    if "xyz8(8, 3)" in new:                 # and J computed as the learner thinks of it
        text = changed(text, "matmul(xyz8, transpose(dN))",
                       "matmul(transpose(xyz8), transpose(dN))")
    with pytest.raises(AssertionError, match=message):
        graded(tmp_path, monkeypatch, task, lang, text)


@pytest.mark.parametrize("task, old, new, message", [
    (1, "np.stack([c[:, 0] * fy * fz,", "np.stack([fy * fz,", "derivatives add up to 0"),
    (1, "axis=1) / 8", "axis=1) / 4", re.escape("dN[6], are all 1/8")),
    (1, "    c = CORNERS\n", "    return element.hex8_dshape(xi, eta, zeta)\n", "course's own"),
    (2, "jac = xyz8.T @ dN", "jac = dN.T @ xyz8", re.escape("grad of a distorted element")),
    (2, "dN @ np.linalg.inv(jac)", "dN @ jac", "is the identity"),
    (3, "g = 1.0 / np.sqrt(3.0)", "g = 0.5", re.escape("ke[0, 0] =")),
])
def test_a_wrong_python_answer_fails(tmp_path, monkeypatch, task, old, new, message):
    from course.fem import element

    namespace = {"np": np, "CORNERS": fem3d.CORNERS, "element": element}
    exec(changed(solution_cell(KEY, TASKS[task]), old, new), namespace)
    with pytest.raises(AssertionError, match=message):
        graded(tmp_path, monkeypatch, task, "python", namespace=namespace)


def stub(text: str) -> str:
    """What the release holds in place of the solution regions."""
    return re.sub(r"(/\*|!) ### BEGIN SOLUTION.*?END SOLUTION( \*/)?", "", text, flags=re.S)


@pytest.mark.parametrize("task, message", [
    (1, re.escape("add up to 0 (NaN: entries never written?)")),
    (2, "det J = 3, not 0.0"),
    (3, "k_00 = lambda / 3: .* = 0.0, expected 1/3"),
])
@pytest.mark.parametrize("lang", ["c", "fortran"])
def test_the_untouched_stub_fails(tmp_path, monkeypatch, task, lang, message):
    with pytest.raises(AssertionError, match=message):
        graded(tmp_path, monkeypatch, task, lang, stub(solution_file(task, lang)))


@pytest.mark.parametrize("task, lang, old, new, message", [
    (1, "c", "    /* ### END SOLUTION */", "    *(volatile double *)0 = xi;\n",
     "shape_derivatives crashed with SIGSEGV"),
    (2, "fortran", "value, intent(in) :: xi, eta, zeta", "intent(in) :: xi, eta, zeta",
     "jacobian_and_gradients crashed with SIGSEGV"),
    (3, "c", "    /* ### END SOLUTION */\n}", "    ke[64] = 1.0;\n}",
     "element_matrix wrote past the end of ke, which has 64 entries"),
    (3, "fortran", "    integer :: i, j, k\n", "", "does not compile"),        # implicit none
])
def test_a_broken_compiled_answer_is_an_assertion(tmp_path, monkeypatch, task, lang, old, new,
                                                  message):
    with pytest.raises(AssertionError, match=message):
        graded(tmp_path, monkeypatch, task, lang, changed(solution_file(task, lang), old, new))


def test_an_endless_loop_is_stopped(tmp_path):
    path = tmp_path / "shape_derivatives.c"
    path.write_text(changed(solution_file(1, "c"), "    /* ### END SOLUTION */",
                            "    for (volatile int i = 0; i >= 0; i = 0)\n        ;\n"))
    with fem3d.compiled_shape_derivatives("c", path, timeout=1.0) as shape_derivatives:
        with pytest.raises(AssertionError, match="did not finish within 1 s"):
            fem3d.check_shape_derivatives(shape_derivatives, "c")


def test_a_wrong_language_name():
    with pytest.raises(AssertionError, match="TASK2_LANGUAGE must be 'python', 'c' or 'fortran'"):
        fem3d.compiled_jacobian_and_gradients("julia")
