"""The exercise of lecture 06_pipecg and its checks (course.parallel.pipecg_grading): the solution
notebook's Chronopoulos-Gear (C, Fortran, Python) passes on 2 to 4 ranks; the typical wrong
answers fail, each with the message that says what happened: the PCG it started from (two global
sums per iteration, right answer), the norm in a sum of its own, alpha taken as gamma/delta, x not
updated in place, an endless loop, a segfault, the
untouched stub. The recurrence of task 1 is checked against plain CG."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from conftest import solution_cell, written_file
from course.parallel import pipecg_grading
from course.parallel.grading import Case

pytestmark = [pytest.mark.timeout(300),
              pytest.mark.skipif(shutil.which("mpiexec") is None, reason="no mpiexec")]

CASES = [Case(2, "blocks", (6, 4, 3)), Case(3, "metis", (5, 5, 4), seed=1),
         Case(4, "blocks", (6, 6, 3), dims=(2, 2, 1), seed=2)]
SUFFIX = {"c": ".c", "fortran": ".f90", "python": ".py"}


def solution_file(lang: str) -> str:
    return written_file("06_pipecg", f"chronopoulos_gear_{lang}")


def changed(text: str, old: str, new: str) -> str:
    assert old in text, f"{old!r} is not in the solution"
    return text.replace(old, new)


def check(tmp_path: Path, lang: str, text: str, cases=CASES, **timeouts) -> None:
    path = tmp_path / ("chronopoulos_gear" + SUFFIX[lang])
    path.write_text(text)
    pipecg_grading.check_chronopoulos_gear(path, lang, cases, **timeouts)


def failure(tmp_path, lang: str, text: str, cases=CASES, **timeouts) -> str:
    with pytest.raises(AssertionError) as info:
        check(tmp_path, lang, text, cases, **timeouts)
    return str(info.value)


# --- task 1 --------------------------------------------------------------------------------------

def test_next_alpha_of_the_solution_passes():
    namespace = {}
    exec(solution_cell("06_pipecg", "next_alpha"), namespace)
    pipecg_grading.check_alpha_recurrence(namespace["next_alpha"], sizes=(5, 30), seeds=(3, 4))


@pytest.mark.parametrize("wrong, message", [
    (lambda g1, g0, d, a: g1 / d, "returned"),                               # (p,Ap) ~ (w,u)
    (lambda g1, g0, d, a: g1 / (d - (g0 / g1) * g1 / a), "returned"),        # beta upside down
    (lambda g1, g0, d, a: None, "must return a number"),
])
def test_wrong_next_alpha_fails(wrong, message):
    with pytest.raises(AssertionError, match=message):
        pipecg_grading.check_alpha_recurrence(wrong)


# --- task 2: the solutions -----------------------------------------------------------------------

@pytest.mark.parametrize("lang", ["c", "fortran", "python"])
def test_solution_passes(tmp_path, lang):
    check(tmp_path, lang, solution_file(lang),
          CASES + [Case(4, "metis", (9, 7, 6), seed=3), Case(3, "random", (5, 4, 4), seed=4)])


# --- typical wrong answers -----------------------------------------------------------------------

PCG_PYTHON = '''
import numpy as np


def chronopoulos_gear(matvec, global_sum, dinv, b, x, tol, max_iter):
    r = b - matvec(x)
    u = dinv * r
    p = u.copy()
    sums = np.array([b @ b, r @ u, r @ r])
    global_sum(sums)
    bnorm, gamma, rr = np.sqrt(sums[0]) or 1.0, sums[1], sums[2]
    iterations = 0
    while np.sqrt(rr) > tol * bnorm and iterations < max_iter:
        q = matvec(p)
        delta = np.array([p @ q])
        global_sum(delta)
        alpha = gamma / delta[0]
        x += alpha * p
        r -= alpha * q
        u = dinv * r
        sums = np.array([r @ u, r @ r])
        global_sum(sums)
        gamma_new, rr = sums
        p = u + (gamma_new / gamma) * p
        gamma = gamma_new
        iterations += 1
    return iterations
'''


def test_the_given_pcg_gets_no_points(tmp_path):
    """Right answer, two sums per iteration: not Chronopoulos-Gear."""
    message = failure(tmp_path, "python", PCG_PYTHON)
    assert "called global_sum" in message and "2.0 per iteration" in message, message
    assert "ONE per iteration" in message


def test_norm_in_a_sum_of_its_own_fails(tmp_path):
    text = changed(solution_file("python"),
                   "        sums = np.array([r @ u, w @ u, r @ r])          # ONE sum per iteration\n"
                   "        global_sum(sums)\n"
                   "        gamma_new, delta, rr = sums\n",
                   "        sums = np.array([r @ u, w @ u])\n"
                   "        global_sum(sums)\n"
                   "        gamma_new, delta = sums\n"
                   "        norm = np.array([r @ r])\n"
                   "        global_sum(norm)\n"
                   "        rr = norm[0]\n")
    assert "2.0 per iteration" in failure(tmp_path, "python", text)


def test_c_with_two_sums_per_iteration_fails(tmp_path):
    text = changed(solution_file("c"), "        global_sum(sums, 3);\n",
                   "        global_sum(sums, 2);\n        global_sum(sums + 2, 1);\n")
    assert "per iteration" in failure(tmp_path, "c", text)


@pytest.mark.parametrize("lang, old, new", [
    ("c", "alpha = sums[0] / (sums[1] - beta * sums[0] / alpha);", "alpha = sums[0] / sums[1];"),
    ("fortran", "alpha = sums(1) / (sums(2) - beta * sums(1) / alpha)", "alpha = sums(1) / sums(2)"),
])
def test_alpha_without_the_recurrence_fails(tmp_path, lang, old, new):
    message = failure(tmp_path, lang, changed(solution_file(lang), old, new))
    assert "iterations where" in message or "solution is wrong" in message, message


def test_x_not_updated_in_place_fails(tmp_path):
    text = changed(solution_file("python"), "x += alpha * p", "x = x + alpha * p")
    assert "updated in place" in failure(tmp_path, "python", text)


def test_endless_loop_is_stopped(tmp_path):
    text = changed(solution_file("python"), "        iterations += 1\n", "")
    text = changed(text, "and iterations < max_iter", "")
    text = changed(text, "while np.sqrt(rr) > tol * bnorm", "while True")
    message = failure(tmp_path, "python", text, CASES[:1], solve_timeout=8.0)
    assert "did not finish within 8 s" in message, message


def test_segfault_loses_with_a_message(tmp_path):
    text = changed(solution_file("c"), "    free(work);\n",
                   "    free(work);\n    *(volatile double *)0 = x[0];\n")
    message = failure(tmp_path, "c", text, CASES[:1])
    assert "SIGSEGV" in message, message


def test_untouched_stub_says_where_to_write(tmp_path):
    stub = ("import numpy as np\n\n\ndef chronopoulos_gear(matvec, global_sum, dinv, b, x, tol, "
            "max_iter):\n    raise NotImplementedError()\n")
    message = failure(tmp_path, "python", stub, CASES[:1])
    assert "YOUR CODE HERE" in message and "NotImplementedError" in message


def test_fortran_that_does_not_compile_says_why(tmp_path):
    text = changed(solution_file("fortran"), "iterations = iterations + 1", "iterations = iter + 1")
    message = failure(tmp_path, "fortran", text, CASES[:1])
    assert "iter" in message.lower() and "compile" in message.lower() or "Error" in message


def test_wrong_language_name():
    with pytest.raises(AssertionError, match="LANGUAGE must be one of"):
        pipecg_grading.check_chronopoulos_gear("x.jl", "julia", CASES)
