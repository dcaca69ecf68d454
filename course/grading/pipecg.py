"""Checks for the exercise of lecture 06_pipecg.

    check_alpha_recurrence(next_alpha)                         task 1 in Python, in this process
    check_alpha_recurrence(compiled_next_alpha("c"))           task 1 in C or Fortran, in a child
    check_chronopoulos_gear("cg.c", "c", [Case(3, "metis", (6, 5, 4))])   task 2, under mpiexec

Each raises AssertionError with a message for the learner when something is wrong. The learner's
solver never runs in the calling process (a notebook's kernel): it runs under `mpiexec` in a
subprocess (course.grading.pipecg_driver), stopped when a solve takes too long or a rank crashes.
The solver gets the distributed product and a global sum, and the driver counts the calls of
both: a solve that needs more than one global sum or more than one product per iteration (plus a
few before the loop) is not Chronopoulos-Gear, however right its answer. The check problems need
dozens of iterations, and their ||b|| ranges from 1e-6 to 1e+6: the learner's residuals (read
from the vectors it passes to matvec) must follow Chronopoulos-Gear's, and its iterations be
exactly as many (the tests prove that every right variant takes exactly as many on every case of
the notebook), so a stopping test on a rank's own (r,r), or on an absolute tolerance, fails. A
Python solver may not use mpi4py: its only way to the other ranks is global_sum.
"""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np

from ..parallel.mpi_job import run_watched
from . import halo_messages
from .halo import Case, check_python_source
from .pipecg_driver import (MAX_ITER, NORM_B, RETURN_WAIT, SET_UP_PRODUCTS, SET_UP_SUMS, TOL,
                            departure, verdict)

LANGUAGES = ("c", "fortran", "python")


# --- task 1: the recurrence for alpha ------------------------------------------------------------

# how close next_alpha must come to (r,u)/(p,Ap), relative: the recurrence written in any of the
# ways that are right agrees to 3e-15 on every case of the notebook, one number of it in single
# precision (a C float, a Fortran real) puts it 1e-10 to 1e-7 off
ALPHA_RTOL = 1e-12
SINGLE_PRECISION = ("That is close, but farther than rounding takes a right answer (1e-12): is a "
                    "number in single precision (a C float, a Fortran real without the kind "
                    "c_double, a literal such as 0.5 without _c_double, an np.float32)?")

# a Fortran argument declared without `value` is read as an address: the call crashes, or, where
# the register it reads happens to hold a valid address, returns whatever lies there
BY_VALUE = ("; in Fortran, also that each argument is declared with `value` (without `value` "
            "it is read as an address).")


def check_alpha_recurrence(next_alpha, sizes=(12, 40), seeds=(1, 2), steps: int = 6) -> None:
    """Run plain CG on random SPD systems; at every step compare next_alpha(gamma_new, gamma,
    delta, alpha) (with gamma = (r, u), delta = (A u, u)) with alpha = (r, u) / (p, A p), to a
    relative ALPHA_RTOL."""
    for n in sizes:
        for seed in seeds:
            rng = np.random.default_rng(seed * 100 + n)
            m = rng.standard_normal((n, n))
            a = m @ m.T + n * np.eye(n)
            r = rng.standard_normal(n)
            p = r.copy()
            gamma, gamma_old, alpha = r @ r, None, None
            for step in range(steps):
                q = a @ p
                expected = gamma / (p @ q)
                if step > 0:
                    got = next_alpha(float(gamma), float(gamma_old), float(r @ (a @ r)),
                                     float(alpha))
                    try:
                        ok = bool(np.isclose(float(got), expected, rtol=ALPHA_RTOL, atol=0.0))
                    except (TypeError, ValueError):
                        raise AssertionError(f"next_alpha must return a number, got "
                                             f"{type(got).__name__} {str(got)[:60]}")
                    if not ok:
                        close = abs(float(got) - expected) <= 1e-5 * abs(expected)
                        mine, theirs = _told_apart(float(got), expected)
                        raise AssertionError(
                            f"next_alpha({gamma:.6g}, {gamma_old:.6g}, {r @ (a @ r):.6g}, "
                            f"{alpha:.6g}) returned {mine}, but CG's alpha = (r,u)/(p,Ap) is "
                            f"{theirs} at step {step} of a CG on a {n} x {n} system (no "
                            "preconditioner: u = r). " + (SINGLE_PRECISION if close else
                                                          "Check beta = gamma_new / gamma and "
                                                          "which earlier scalars the recurrence "
                                                          "uses" + BY_VALUE))
                alpha = expected
                r = r - alpha * q
                gamma_old, gamma = gamma, r @ r
                p = r + (gamma / gamma_old) * p


def _told_apart(x: float, y: float) -> tuple[str, str]:
    """x and y with 6 significant digits, or as many more as it takes to tell them apart."""
    for digits in range(6, 18):
        if f"{x:.{digits}g}" != f"{y:.{digits}g}":
            break
    return f"{x:.{digits}g}", f"{y:.{digits}g}"


NEXT_ALPHA_FILES = {"c": "next_alpha.c", "fortran": "next_alpha.f90"}   # the notebook's


def compiled_next_alpha(lang: str, source=None, timeout: float = 10.0):
    """The learner's next_alpha in C (`double next_alpha(double gamma_new, double gamma, double
    delta, double alpha)`) or Fortran (the same with bind(C) and real(c_double), value
    arguments), from `source` (default: next_alpha.c or next_alpha.f90, what the notebook's
    %%writefile cell writes), compiled, as a callable with the Python answer's signature for
    check_alpha_recurrence: every call runs in one child process (exercise.ServedFunction), so
    that a crash or an endless loop fails the check instead of killing the notebook's kernel."""
    from .exercise import ServedFunction, compile_kernel, compiled_language

    compiled_language(lang)
    lib = compile_kernel(source or NEXT_ALPHA_FILES[lang], lang)
    return ServedFunction(lib, "next_alpha", "dddd", "double", timeout)


# --- task 2: the solver, compiled and run under mpiexec ------------------------------------------

def prepare_solver(source, lang: str) -> Path:
    """The file the driver loads: a shared library compiled (without MPI: the solver talks to the
    other ranks only through its arguments) from a C or Fortran source, or the Python file
    itself once it is known to define chronopoulos_gear and not to use mpi4py."""
    from .exercise import compile_kernel

    if lang not in LANGUAGES:
        raise AssertionError(f"LANGUAGE must be one of {', '.join(map(repr, LANGUAGES))}, "
                             f"not {lang!r}")
    if lang != "python":
        return compile_kernel(source, lang)
    path = check_python_source(source, "chronopoulos_gear", ("matvec", "global_sum", "dinv", "b",
                                                             "x", "tol", "max_iter"))
    line = mpi4py_import(path.read_text())
    if line is not None:
        raise AssertionError(
            f"{Path(source).name} imports mpi4py (line {line}): chronopoulos_gear must talk to "
            "the other ranks only through global_sum, the reduction the check counts (and "
            "matvec, which does the halo exchange): the check runs it on a communicator of its "
            "own, not on MPI_COMM_WORLD, and mpi4py is not available to it. Put every scalar an "
            "iteration needs into one global_sum call and remove the MPI calls.")
    return path


def mpi4py_import(text: str) -> int | None:
    """The line of the first import of mpi4py in a Python source (also by name, as
    __import__("mpi4py") or importlib.import_module("mpi4py.MPI") would), None if there is none."""
    for node in ast.walk(ast.parse(text)):
        names = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = [node.module or ""]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            names = [node.value]
        if any(name == "mpi4py" or name.startswith("mpi4py.") for name in names):
            return node.lineno
    return None


def check_chronopoulos_gear(source, lang: str, cases, solve_timeout: float = 30.0,
                            timeout: float = 120.0) -> None:
    """Run the learner's chronopoulos_gear on every case (all in one mpiexec job of max(ranks)
    processes): it must converge to the course's solution along the same residuals, in exactly
    as many iterations, with one global sum and one product per iteration. AssertionError that
    says what happened."""
    path = prepare_solver(source, lang)
    cases = list(cases)
    job = run_watched(["-m", "mpi4py", "-m", "course.grading.pipecg_driver", lang, path,
                       *(case.spec() for case in cases)],
                      max(case.ranks for case in cases), timeout, solve_timeout)
    raise_first_error(job, "chronopoulos_gear", lambda k: _where(cases, k))
    uneven = [e for e in job.events if e["event"] == "uneven"]
    if uneven:
        raise AssertionError(left_alone(uneven[0], cases[uneven[0]["case"]]))
    results = {e["case"]: e for e in job.events if e["event"] == "result"}
    for k, case in enumerate(cases):
        if k in results and verdict(results[k]) is not None:
            raise AssertionError(message(results[k], case))
    started = [e for e in job.events if e["event"] == "start"]
    running = started[-1]["case"] if started and started[-1]["case"] not in results else None
    if job.stopped:
        where = _where(cases, running) if running is not None else "(before any solve began)"
        raise AssertionError(f"chronopoulos_gear did not finish within {solve_timeout:g} s "
                             f"{where}, and the job was stopped: an endless loop? The loop must "
                             f"end after at most max_iter = {MAX_ITER} iterations.")
    raise_if_cut_short(job, "chronopoulos_gear", _where(cases, running), len(results) == len(cases))


def raise_if_cut_short(job, function: str, where: str, complete: bool) -> None:
    """AssertionError when the MPI job running the learner's `function` ended with an error
    status or before it reported every check (complete: it did): how it ended (a signal, on
    which rank) and what it wrote itself; `where`: the case that was running, in words."""
    if job.returncode == 0 and complete:
        return
    rank, name = halo_messages._signal(job.output)
    crashed = f" with {name}" + (f" on rank {rank}" if rank else "") if name else ""
    words = halo_messages._own_words(job.output)
    raise AssertionError(f"the MPI job running {function} {where} ended"
                         f"{crashed or f' with exit status {job.returncode}'} before it "
                         f"reported every check." + (f" It wrote: {words}." if words else ""))


def raise_first_error(job, function: str, where, during=lambda stage: "") -> None:
    """AssertionError for the first error a driver reported in `job` (the learner's `function`
    did not load, or raised on some rank), if any. where(case index): the case, in words;
    during(stage): what was running, in words ("" for the function itself)."""
    errors = [e for e in job.events if e["event"] == "error"]
    if not errors:
        return
    e = errors[0]
    if e["stage"] == "load":
        raise AssertionError(f"your {function} could not be loaded: {e['error']}")
    hint = (" Write your code where it says YOUR CODE HERE and delete the raise line."
            if "NotImplementedError" in e["error"] else "")
    raise AssertionError(f"{function} raised an exception on rank {e['rank']} "
                         f"{where(e['case'])}{during(e['stage'])}: {e['error']}.{hint}")


def _where(cases: list, k: int) -> str:
    case = cases[k] if k is not None and k < len(cases) else None
    return f"on {case.describe()} ({case.ranks} ranks)" if case is not None else ""


STOPPING_TEST = (f"Stop as soon as sqrt((r,r)) <= tol * ||b||: relative to ||b|| (the checks' "
                 f"||b|| range from {min(NORM_B):g} to {max(NORM_B):g}), with (r,r) and (b,b) "
                 "summed over the ranks by global_sum (a rank's own part of (r,r) is smaller, "
                 "and differs from rank to rank), and count one iteration per update of x.")


def left_alone(event: dict, case: Case) -> str:
    """The message for a rank that returned while the others went on iterating."""
    return (f"on {case.describe()} ({case.ranks} ranks), chronopoulos_gear returned on rank "
            f"{event['rank']} (after {event['sums']} calls of global_sum, returning "
            f"{event['returned']}) while the other ranks had not returned {RETURN_WAIT:g} s "
            "later: they were still iterating, waiting in matvec or global_sum for this rank, and "
            "the job was stopped. Every rank must leave the loop in the same iteration, on the "
            "same values. " + STOPPING_TEST)


def message(result: dict, case: Case) -> str:
    where = f"on {case.describe()} ({case.ranks} ranks)"
    what = verdict(result)
    k, reference_k = result["iterations"], result["reference_iterations"]
    if what == "not_int":
        return (f"chronopoulos_gear must return the number of iterations (an int); {where} it "
                f"returned {result['returned']}")
    if what == "uneven":
        return (f"{where} the ranks called global_sum or matvec different numbers of times: "
                "every rank must make the same calls in the same order (a global sum and a halo "
                "exchange are collective operations), so no rank may leave the loop on a test "
                "of its own values only")
    if what == "too_many_sums":
        per = (result["sums"] - 1) / max(k, 1)
        return (f"{where} your solver called global_sum {result['sums']} times in {k} "
                f"iterations: about {per:.1f} per iteration (and one before the loop). "
                "Chronopoulos-Gear makes ONE per iteration: compute w = A u first, then sum "
                "(r,u), (w,u) and (r,r) together in one call, and get alpha from the recurrence "
                "of task 1 instead of from (p, A p). "
                f"(Before the loop, up to {SET_UP_SUMS} more calls are fine.)")
    if what == "too_many_products":
        return (f"{where} your solver called matvec {result['products']} times in {k} "
                f"iterations, where Chronopoulos-Gear needs {k + SET_UP_PRODUCTS}: A x0 and "
                "A u0 before the loop, then ONE product w = A u per iteration. Every product "
                "is a halo exchange: get s = A p from its recurrence s = w + beta s, not from "
                "a product of its own, and do not recompute A x or A r inside the loop (one "
                "product after it, for a true residual, is fine).")
    if what == "departs":
        j = departure(result)
        mine = result["residuals"][len(result["residuals"]) - (k + 1) + j]
        theirs = result["reference_residuals"][j]
        if j == 0:
            return (f"{where} your first residual is off: ||r_0|| / ||b|| = {mine:.6e} where "
                    f"Chronopoulos-Gear has {theirs:.6e} (the check reads r = u / dinv from the "
                    "u you pass to matvec). Before the loop: r = b - A x, u = dinv * r, w = A u.")
        return (f"{where} your residuals leave Chronopoulos-Gear's at iteration {j}: "
                f"||r_{j}|| / ||b|| = {mine:.6e} where Chronopoulos-Gear has {theirs:.6e} (the "
                "check reads r = u / dinv from the u you pass to matvec, one per iteration). "
                "Check alpha and beta (the recurrence of task 1, from the sums of this "
                "iteration), the updates p = u + beta p, s = w + beta s, r -= alpha s, and that "
                "w = A u is the product of the new u.")
    if what == "iterations":
        history = result["residuals"]
        if k < reference_k:
            at = history[-1] if history else float("nan")
            return (f"{where} your solver stopped after {k} iterations, at ||r|| / ||b|| = "
                    f"{at:.2e}, above tol = {TOL:g}: Chronopoulos-Gear goes on to iteration "
                    f"{reference_k}. " + STOPPING_TEST)
        return (f"{where} your solver took {k} iterations where Chronopoulos-Gear stops after "
                f"{reference_k}, as soon as ||r|| / ||b|| = "
                f"{result['reference_residuals'][-1]:.2e} <= tol = {TOL:g}. " + STOPPING_TEST)
    return (f"{where} the solution is wrong, though your residuals are Chronopoulos-Gear's: x "
            f"differs from the course's by {result['difference']:.1e} (relative), and "
            f"||b - Ax|| / ||b|| = {result['true_residual']:.1e} (tol = {TOL:g}). Check "
            "x += alpha p (with the p of this iteration), and that x is updated in place.")
