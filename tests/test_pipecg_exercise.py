"""The exercise of lecture 06_pipecg and its checks (course.grading.pipecg): the solution
notebook's Chronopoulos-Gear (C, Fortran, Python) passes on 2 to 4 ranks, and so do right answers
written differently; on every case of the notebook, every CG variant of the course takes exactly
the iterations the check requires (the stopping test is far from a tie). The typical wrong answers
fail, each with the message that says what happened: the PCG it started from (two global sums per
iteration, right answer), the norm in a sum of its own, a second product per iteration, a stopping
test on a rank's own (r,r) or on an absolute tolerance, mpi4py on MPI_COMM_WORLD, the course's own
solvers called, alpha taken as gamma/delta, x not updated in place, an endless loop, a segfault,
the untouched stub. The recurrence of task 1 is checked against plain CG, in Python, C and Fortran
alike: a right answer passes the notebook's graded cell in each language, typical wrong ones (alpha
without the correction, a sign, single precision) fail it with the same messages as in Python, and
a crash (arguments without `value`), an endless loop or a compiler error is an AssertionError."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from conftest import solution_cell, written_file
from course.grading import pipecg, pipecg_driver
from course.grading.halo import Case
from course.parallel.mpi_job import run_watched

pytestmark = [pytest.mark.timeout(300),
              pytest.mark.skipif(shutil.which("mpiexec") is None, reason="no mpiexec")]

SUFFIX = {"c": ".c", "fortran": ".f90", "python": ".py"}


def notebook_cases() -> list[Case]:
    """The cases of the notebook's graded cell, visible ones first, then the hidden ones."""
    cell = solution_cell("06_pipecg", "test_chronopoulos_gear")
    return [eval(text, {"Case": Case})                     # noqa: S307 - the course's own cell
            for text in re.findall(r"Case\((?:[^()]|\([^()]*\))*\)", cell)]


NOTEBOOK_CASES = notebook_cases()
CASES = NOTEBOOK_CASES[:3]                                # the visible ones


def solution_file(lang: str) -> str:
    return written_file("06_pipecg", f"chronopoulos_gear_{lang}")


def changed(text: str, old: str, new: str) -> str:
    assert old in text, f"{old!r} is not in the solution"
    return text.replace(old, new)


def check(tmp_path: Path, lang: str, text: str, cases=CASES, **timeouts) -> None:
    path = tmp_path / ("chronopoulos_gear" + SUFFIX[lang])
    path.write_text(text)
    pipecg.check_chronopoulos_gear(path, lang, cases, **timeouts)


def failure(tmp_path, lang: str, text: str, cases=CASES, **timeouts) -> str:
    with pytest.raises(AssertionError) as info:
        check(tmp_path, lang, text, cases, **timeouts)
    return str(info.value)


# --- task 1 --------------------------------------------------------------------------------------

def test_next_alpha_of_the_solution_passes():
    namespace = {}
    exec(solution_cell("06_pipecg", "next_alpha"), namespace)
    pipecg.check_alpha_recurrence(namespace["next_alpha"], sizes=(5, 30), seeds=(3, 4))


@pytest.mark.parametrize("wrong, message", [
    (lambda g1, g0, d, a: g1 / d, "returned"),                               # (p,Ap) ~ (w,u)
    (lambda g1, g0, d, a: g1 / (d - (g0 / g1) * g1 / a), "returned"),        # beta upside down
    (lambda g1, g0, d, a: None, "must return a number"),
])
def test_wrong_next_alpha_fails(wrong, message):
    with pytest.raises(AssertionError, match=message):
        pipecg.check_alpha_recurrence(wrong)


def test_next_alpha_in_single_precision_fails():
    """Close to alpha, but not to rounding: the message says so, with the digits that differ."""
    single = lambda g1, g0, d, a: float(np.float32(g1 / (d - (g1 / g0) * g1 / a)))  # noqa: E731
    with pytest.raises(AssertionError, match="single precision") as info:
        pipecg.check_alpha_recurrence(single)
    mine, theirs = re.search(r"returned (\S+), but .* is (\S+) at step", str(info.value)).groups()
    assert mine != theirs and len(mine) > 8, str(info.value)


def test_the_notebook_tells_the_languages_apart():
    """Every language of task 1 has its cell, and the test cell picks by TASK1_LANGUAGE."""
    assert "TASK1_LANGUAGE" in solution_cell("06_pipecg", "test_next_alpha")
    for lang, name in pipecg.NEXT_ALPHA_FILES.items():
        cell = solution_cell("06_pipecg", f"next_alpha_{lang}")
        assert cell.startswith(f"%%writefile {name}\n"), cell[:40]


def graded_next_alpha(tmp_path, monkeypatch, lang: str, text: str) -> None:
    """Run the notebook's graded cell of task 1 (its visible and hidden checks) on `text` in
    `lang`, written where the %%writefile cell writes it."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / pipecg.NEXT_ALPHA_FILES[lang]).write_text(text)
    namespace = {"pipecg": pipecg, "TASK1_LANGUAGE": lang, "next_alpha": None}
    try:
        exec(solution_cell("06_pipecg", "test_next_alpha"), namespace)
    finally:
        if namespace.get("_next_alpha") is not None:
            namespace["_next_alpha"].close()


def next_alpha_file(lang: str) -> str:
    return written_file("06_pipecg", f"next_alpha_{lang}")


@pytest.mark.parametrize("lang", ["c", "fortran"])
def test_compiled_next_alpha_of_the_solution_passes(tmp_path, monkeypatch, lang):
    graded_next_alpha(tmp_path, monkeypatch, lang, next_alpha_file(lang))


C_ALPHA = "alpha_new = gamma_new / (delta - beta * gamma_new / alpha);"
F_ALPHA = "alpha_new = gamma_new / (delta - beta * gamma_new / alpha)"
CHECK_BETA = "Check beta = gamma_new / gamma"


@pytest.mark.parametrize("lang, old, new, message", [
    ("c", C_ALPHA, "alpha_new = gamma_new / delta;", CHECK_BETA),          # plain CG's alpha
    ("fortran", F_ALPHA, "alpha_new = gamma_new / delta", CHECK_BETA),
    ("c", "(delta - beta", "(delta + beta", CHECK_BETA),                    # a sign
    ("fortran", "beta * gamma_new / alpha", "beta * gamma_new * alpha", CHECK_BETA),
    ("c", "double beta", "float beta", "single precision"),
    ("fortran", "real(c_double) :: beta", "real :: beta", "single precision"),
    ("fortran", "real(c_double), value ::", "real(c_double) ::",            # by reference:
     "without `value`"),            # a crash, or a wrong number where the register held an address
    ("c", "    return alpha_new;", "    *(volatile double *)0 = alpha;\n    return alpha_new;",
     "next_alpha crashed with SIGSEGV"),
    ("fortran", "    real(c_double) :: beta\n", "", "does not compile"),   # implicit none
])
def test_wrong_compiled_next_alpha_fails(tmp_path, monkeypatch, lang, old, new, message):
    text = changed(next_alpha_file(lang), old, new)
    with pytest.raises(AssertionError, match=message):
        graded_next_alpha(tmp_path, monkeypatch, lang, text)


@pytest.mark.parametrize("lang", ["c", "fortran"])
def test_untouched_compiled_stub_gets_no_points(tmp_path, monkeypatch, lang):
    stub = re.sub(r"(/\*|!) ### BEGIN SOLUTION.*END SOLUTION( \*/)?", "", next_alpha_file(lang),
                  flags=re.S)
    assert "beta" not in stub
    with pytest.raises(AssertionError, match="returned 0, but"):
        graded_next_alpha(tmp_path, monkeypatch, lang, stub)


def test_compiled_endless_loop_is_stopped(tmp_path):
    path = tmp_path / "next_alpha.c"
    path.write_text(changed(next_alpha_file("c"), "    return alpha_new;",
                            "    for (volatile int i = 0; i >= 0; i = 0)\n        ;\n"
                            "    return alpha_new;"))
    with pipecg.compiled_next_alpha("c", path, timeout=1.0) as next_alpha:
        with pytest.raises(AssertionError, match="did not finish within 1 s"):
            pipecg.check_alpha_recurrence(next_alpha, sizes=(8,), seeds=(1,))


def test_wrong_task1_language():
    with pytest.raises(AssertionError, match="TASK1_LANGUAGE must be"):
        pipecg.compiled_next_alpha("julia")


# --- task 2: the solutions -----------------------------------------------------------------------

def test_the_notebook_has_its_cases():
    assert len(NOTEBOOK_CASES) == 7 and len({c.spec() for c in NOTEBOOK_CASES}) == 7
    assert {c.ranks for c in NOTEBOOK_CASES} == {2, 3, 4}
    assert {c.seed % 2 for c in NOTEBOOK_CASES} == {0, 1}        # ||b|| = 1e+6 and 1e-6


@pytest.mark.parametrize("lang", ["c", "fortran", "python"])
def test_solution_passes(tmp_path, lang):
    check(tmp_path, lang, solution_file(lang), NOTEBOOK_CASES)


def driver_results(tmp_path, lang: str) -> list[dict]:
    """The driver's result of every case of the notebook for `lang` (c, or course:ALGORITHM: the
    course's variant, run on every case whatever its verdict)."""
    path = "-"
    if not lang.startswith("course:"):
        source = tmp_path / ("chronopoulos_gear" + SUFFIX[lang])
        source.write_text(solution_file(lang))
        path = pipecg.prepare_solver(source, lang)
    job = run_watched(["-m", "mpi4py", "-m", "course.grading.pipecg_driver", lang, path,
                       *(case.spec() for case in NOTEBOOK_CASES)], 4, 200, 60)
    results = [e for e in job.events if e["event"] == "result"]
    assert len(results) == len(NOTEBOOK_CASES), job.output[-3000:]
    return results


# what each variant passes to matvec: u_0, ..., u_k after A x0 (offset 1), or other vectors
HISTORY_OFFSET = {"c": 1, "course:chronopoulos-gear": 1, "course:gropp": 1, "course:pcg": None,
                  "course:pipelined": None}


@pytest.mark.parametrize("lang", HISTORY_OFFSET)
def test_every_right_variant_takes_exactly_the_iterations_checked(tmp_path, lang):
    """Why the check may require the exact iteration count: on every case of the notebook the
    solution in C (other rounding than the course's NumPy) and the course's four CG variants
    (other recurrences) stop at Chronopoulos-Gear's iteration; its residual there is at least
    10 % from the threshold, where the rounding moves the residuals by 1e-5 at most (measured:
    2e-7 in C, 1e-5 for Gropp's u / dinv); and their answers agree to 1e-12."""
    tol = pipecg_driver.TOL
    for result in driver_results(tmp_path, lang):
        k, reference = result["iterations"], result["reference_residuals"]
        assert k == result["reference_iterations"] == len(reference) - 1, result["case"]
        assert reference[-2] >= 1.1 * tol and reference[-1] <= 0.9 * tol, reference[-2:]
        assert result["difference"] <= pipecg_driver.DIFFERENCE_TOL / 100, result["difference"]
        offset = HISTORY_OFFSET[lang]
        if offset is not None:
            mine = result["residuals"][offset:offset + k + 1]
            drift = max(abs(a - b) / b for a, b in zip(mine, reference))
            assert drift <= pipecg_driver.HISTORY_RTOL / 100, (result["case"], drift)


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
    assert "your residuals leave Chronopoulos-Gear's at iteration" in message, message


C_LOCAL_NORM = ("c", "global_sum(sums, 3);", "global_sum(sums, 2);")     # (r,r) left local
PYTHON_LOCAL_NORM = ("python", "        sums = np.array([r @ u, w @ u, r @ r])          # ONE sum "
                     "per iteration\n        global_sum(sums)\n"
                     "        gamma_new, delta, rr = sums\n",
                     "        sums = np.array([r @ u, w @ u])\n        global_sum(sums)\n"
                     "        gamma_new, delta = sums\n        rr = r @ r\n")


@pytest.mark.parametrize("edit, cases, expected", [
    (C_LOCAL_NORM, CASES, "your solver stopped after 28 iterations"),   # every rank early
    (PYTHON_LOCAL_NORM, NOTEBOOK_CASES[3:4], "returned on rank"),       # ranks apart: no hang
])
def test_stopping_on_a_ranks_own_norm_fails(tmp_path, edit, cases, expected):
    lang, old, new = edit
    message = failure(tmp_path, lang, changed(solution_file(lang), old, new), cases)
    assert expected in message and "summed over the ranks by global_sum" in message, message
    if expected == "returned on rank":
        assert "still iterating" in message and "same iteration" in message, message


@pytest.mark.parametrize("lang, old, new, case, expected", [
    ("python", "np.sqrt(rr) > tol * bnorm", "np.sqrt(rr) > tol", CASES[0],      # ||b|| = 1e+6
     "took 44 iterations where Chronopoulos-Gear stops after 33"),
    ("fortran", "sqrt(rr) > tol * bnorm", "sqrt(rr) > tol", NOTEBOOK_CASES[3],   # ||b|| = 1e-6
     "stopped after 29 iterations"),
])
def test_absolute_tolerance_fails(tmp_path, lang, old, new, case, expected):
    message = failure(tmp_path, lang, changed(solution_file(lang), old, new), [case])
    assert expected in message and "relative to ||b||" in message, message


def test_second_product_per_iteration_fails(tmp_path):
    """s = A p by a product of its own: right answer, two halo exchanges per iteration."""
    text = changed(solution_file("python"), "s = w + beta * s", "s = matvec(p)")
    message = failure(tmp_path, "python", text)
    assert "called matvec 68 times in 33 iterations, where Chronopoulos-Gear needs 35" in message
    assert "ONE product w = A u per iteration" in message, message


def test_mpi4py_is_refused(tmp_path):
    """Sums on MPI_COMM_WORLD around the counted global_sum: refused before any job starts."""
    text = changed(solution_file("python"), "import numpy as np\n",
                   "import numpy as np\nfrom mpi4py import MPI\n")
    text = changed(text, "        global_sum(sums)\n",
                   "        MPI.COMM_WORLD.Allreduce(MPI.IN_PLACE, sums)\n")
    message = failure(tmp_path, "python", text)
    assert "imports mpi4py (line 3)" in message and "only through global_sum" in message, message


def test_mpi4py_reached_around_the_source_check_fails(tmp_path):
    text = changed(solution_file("python"), "        global_sum(sums)\n",
                   "        M = __import__('importlib').import_module('mpi' + '4py.MPI')\n"
                   "        M.COMM_WORLD.Allreduce(M.IN_PLACE, sums)\n")
    message = failure(tmp_path, "python", text, CASES[:1])
    assert "mpi4py is not available to chronopoulos_gear" in message, message
    assert "only through global_sum" in message


@pytest.mark.parametrize("call", [
    # a private helper of the module behind the blocked public krylov
    "    import importlib\n"
    "    K = importlib.import_module('course.solvers.krylov')\n"
    "    run = K._Run('chronopoulos-gear', matvec, b, K.Reductions(), tol, max_iter, 0, False)\n"
    "    K._chronopoulos_gear(run, matvec, lambda r: dinv * r, np.dot, x)\n"
    "    return len(run.per_iteration)\n",
    # the course's global sums (around the counted global_sum) with the solution's loop
    "    from course.parallel.reductions import MPIReductions\n"
    "    MPIReductions()\n",
])
def test_course_solvers_are_blocked(tmp_path, call):
    text = changed(solution_file("python"), "    ### BEGIN SOLUTION\n",
                   "    ### BEGIN SOLUTION\n" + call)
    message = failure(tmp_path, "python", text, CASES[:1])
    assert "the course's own" in message, message


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
        pipecg.check_chronopoulos_gear("x.jl", "julia", CASES)


# --- right answers written differently -----------------------------------------------------------

C_LOOP = """        for (int i = 0; i < n; i++) {
            p[i] = u[i] + beta * p[i];
            s[i] = w[i] + beta * s[i];
            x[i] += alpha * p[i];
            r[i] -= alpha * s[i];
            u[i] = dinv[i] * r[i];
        }
        matvec(u, w);
        double sums[3] = {0.0, 0.0, 0.0};                /* (r,u), (w,u), (r,r): ONE sum */
        for (int i = 0; i < n; i++) {
            sums[0] += r[i] * u[i];
            sums[1] += w[i] * u[i];
            sums[2] += r[i] * r[i];
        }
        global_sum(sums, 3);
        beta = sums[0] / gamma;
        alpha = sums[0] / (sums[1] - beta * sums[0] / alpha);
        gamma = sums[0];
        rr = sums[2];
        iterations++;
"""
C_FUSED = """        double sums[3] = {0.0, 0.0, 0.0};                /* (r,r), (u,w), (r,u) */
        for (int i = 0; i < n; i++) {
            p[i] = u[i] + beta * p[i];
            s[i] = w[i] + beta * s[i];
            x[i] += alpha * p[i];
            r[i] -= alpha * s[i];
            u[i] = dinv[i] * r[i];
            sums[0] += r[i] * r[i];
            sums[2] += r[i] * u[i];
        }
        matvec(u, w);
        for (int i = 0; i < n; i++)
            sums[1] += u[i] * w[i];
        global_sum(sums, 3);
        double gamma_new = sums[2];
        beta = gamma_new / gamma;
        alpha = gamma_new / (sums[1] - beta * gamma_new / alpha);
        gamma = gamma_new;
        rr = sums[0];
        iterations += 1;
"""
PYTHON_TEST_FIRST = """    bb = np.array([np.dot(b, b)])
    global_sum(bb)
    bnorm = np.sqrt(bb[0]) if bb[0] > 0.0 else 1.0
    r = b.copy()                                    # x = 0: no product A x0
    u = dinv * r
    w = matvec(u)
    p, s = np.zeros_like(b), np.zeros_like(b)
    gamma = alpha = None
    iterations = 0
    while True:
        sums = np.array([np.dot(r, r), np.dot(r, u), np.dot(u, w)])
        global_sum(sums)
        rr, gamma_new, delta = sums
        if np.sqrt(rr) <= tol * bnorm or iterations == max_iter:
            return iterations
        if gamma is None:
            beta, alpha = 0.0, gamma_new / delta
        else:
            beta = gamma_new / gamma
            alpha = gamma_new / (delta - beta * gamma_new / alpha)
        gamma = gamma_new
        p *= beta
        p += u
        s *= beta
        s += w
        x += alpha * p
        r -= alpha * s
        u = dinv * r
        w = matvec(u)
        iterations += 1
"""


def python_solution_body() -> str:
    text = solution_file("python")
    return text[text.index("    r = b - matvec(x)\n"):text.index("    ### END SOLUTION")]


@pytest.mark.parametrize("lang, old, new", [
    ("c", C_LOOP, C_FUSED),                       # dots fused into the update loop, reordered
    ("python", None, PYTHON_TEST_FIRST),          # np.dot, the test at the top, no A x0
])
def test_right_answers_written_differently_pass(tmp_path, lang, old, new):
    text = solution_file(lang)
    check(tmp_path, lang, changed(text, old or python_solution_body(), new), NOTEBOOK_CASES)


# --- the driver's pieces -------------------------------------------------------------------------

def test_cases_run_on_permuted_ranks():
    for size in (2, 3, 4):
        for ranks in range(2, size + 1):
            for k in range(4):
                members = pipecg_driver.case_members(k, ranks, size)
                assert len(set(members)) == ranks and set(members) <= set(range(size))
                assert members != sorted(members), members        # never MPI_COMM_WORLD's order
    assert pipecg_driver.case_members(0, 2, 4) == [2, 1]          # not the first ranks
    assert pipecg_driver.case_members(0, 4, 4) == [3, 2, 1, 0]


def result(iterations=3, products=5, sums=4, history=(0.0, 1.0, 0.5, 0.1, 1e-11),
           reference=(1.0, 0.5, 0.1, 1e-11), **more) -> dict:
    return {"iterations": iterations, "reference_iterations": len(reference) - 1,
            "products": products, "sums": sums, "same_on_all_ranks": True,
            "residuals": list(history), "reference_residuals": list(reference),
            "difference": 0.0, "true_residual": 1e-11, **more}


def test_verdict():
    assert pipecg_driver.verdict(result()) is None
    assert pipecg_driver.verdict(result(products=4, history=(1.0, 0.5, 0.1, 1e-11))) is None
    # a product after the loop (a true residual to report) is fine; one more per iteration not
    assert pipecg_driver.verdict(result(products=6, history=(0.0, 1.0, 0.5, 0.1, 1e-11, 1.0))) \
        is None
    assert pipecg_driver.verdict(result(products=7, history=(0.0,) * 7)) == "too_many_products"
    assert pipecg_driver.verdict(result(sums=7)) == "too_many_sums"
    assert pipecg_driver.verdict(result(history=(0.0, 1.0, 0.5, 0.2, 1e-11))) == "departs"
    assert pipecg_driver.departure(result(history=(0.0, 1.0, 0.5, 0.2, 1e-11))) == 2
    assert pipecg_driver.verdict(result(iterations=2, products=4, sums=3,
                                        history=(0.0, 1.0, 0.5, 0.1))) == "iterations"
    assert pipecg_driver.verdict(result(difference=float("nan"))) == "wrong"
    assert pipecg_driver.verdict(result(iterations=None)) == "not_int"
