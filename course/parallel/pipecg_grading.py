"""Checks for the exercise of lecture 06_pipecg.

    check_alpha_recurrence(next_alpha)                         task 1, in this process
    check_chronopoulos_gear("cg.c", "c", [Case(3, "metis", (6, 5, 4))])   task 2, under mpiexec

Each raises AssertionError with a message for the learner when something is wrong. The learner's
solver never runs in the calling process (a notebook's kernel): it runs under `mpiexec` in a
subprocess (course.parallel.pipecg_driver), stopped when a solve takes too long or a rank crashes.
The solver gets the distributed product and a global sum that counts its calls: a solve that
needs more than one global sum per iteration (plus a few before the loop) is not
Chronopoulos-Gear, however right its answer.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from . import exchange_messages
from .grading import Case, check_python_source
from .mpi_job import run_watched
from .pipecg_driver import MAX_ITER, SET_UP_SUMS, TOL, verdict

LANGUAGES = ("c", "fortran", "python")


# --- task 1: the recurrence for alpha ------------------------------------------------------------

def check_alpha_recurrence(next_alpha, sizes=(12, 40), seeds=(1, 2), steps: int = 6) -> None:
    """Run plain CG on random SPD systems; at every step compare next_alpha(gamma_new, gamma,
    delta, alpha) (with gamma = (r, u), delta = (A u, u)) with alpha = (r, u) / (p, A p)."""
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
                        ok = bool(np.isclose(float(got), expected, rtol=1e-9))
                    except (TypeError, ValueError):
                        raise AssertionError(f"next_alpha must return a number, got "
                                             f"{type(got).__name__} {str(got)[:60]}")
                    if not ok:
                        raise AssertionError(
                            f"next_alpha({gamma:.6g}, {gamma_old:.6g}, {r @ (a @ r):.6g}, "
                            f"{alpha:.6g}) returned {float(got):.6g}, but CG's alpha = "
                            f"(r,u)/(p,Ap) is {expected:.6g} at step {step} of a CG on a "
                            f"{n} x {n} system (no preconditioner: u = r). Check beta = "
                            "gamma_new / gamma and which earlier scalars the recurrence uses.")
                alpha = expected
                r = r - alpha * q
                gamma_old, gamma = gamma, r @ r
                p = r + (gamma / gamma_old) * p


# --- task 2: the solver, compiled and run under mpiexec ------------------------------------------

def prepare_solver(source, lang: str) -> Path:
    """The file the driver loads: a shared library compiled (without MPI: the solver talks to the
    other ranks only through its arguments) from a C or Fortran source, or the Python file
    itself once it is known to define chronopoulos_gear."""
    from ..exercise import compile_kernel

    if lang not in LANGUAGES:
        raise AssertionError(f"LANGUAGE must be one of {', '.join(map(repr, LANGUAGES))}, "
                             f"not {lang!r}")
    if lang != "python":
        return compile_kernel(source, lang)
    return check_python_source(source, "chronopoulos_gear", ("matvec", "global_sum", "dinv", "b",
                                                             "x", "tol", "max_iter"))


def check_chronopoulos_gear(source, lang: str, cases, solve_timeout: float = 30.0,
                            timeout: float = 120.0) -> None:
    """Run the learner's chronopoulos_gear on every case (all in one mpiexec job of max(ranks)
    processes): it must converge to the course's solution, in about as many iterations, with
    one global sum per iteration. AssertionError that says what happened."""
    path = prepare_solver(source, lang)
    cases = list(cases)
    job = run_watched(["-m", "mpi4py", "-m", "course.parallel.pipecg_driver", lang, path,
                       *(case.spec() for case in cases)],
                      max(case.ranks for case in cases), timeout, solve_timeout)
    errors = [e for e in job.events if e["event"] == "error"]
    if errors:
        e = errors[0]
        where = _where(cases, e["case"])
        if e["stage"] == "load":
            raise AssertionError(f"your chronopoulos_gear could not be loaded: {e['error']}")
        hint = (" Write your code where it says YOUR CODE HERE and delete the raise line."
                if "NotImplementedError" in e["error"] else "")
        raise AssertionError(f"chronopoulos_gear raised an exception on rank {e['rank']} "
                             f"{where}: {e['error']}.{hint}")
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
    if job.returncode != 0 or len(results) != len(cases):
        rank, name = exchange_messages._signal(job.output)
        crashed = f" with {name}" + (f" on rank {rank}" if rank else "") if name else ""
        words = exchange_messages._own_words(job.output)
        raise AssertionError(f"the MPI job running chronopoulos_gear "
                             f"{_where(cases, running) if running is not None else ''} ended"
                             f"{crashed or f' with exit status {job.returncode}'} before it "
                             f"reported every check." + (f" It wrote: {words}." if words else ""))


def _where(cases: list, k: int) -> str:
    case = cases[k] if k is not None and k < len(cases) else None
    return f"on {case.describe()} ({case.ranks} ranks)" if case is not None else ""


def message(result: dict, case: Case) -> str:
    where = f"on {case.describe()} ({case.ranks} ranks)"
    what = verdict(result)
    if what == "not_int":
        return (f"chronopoulos_gear must return the number of iterations (an int); {where} it "
                f"returned {result['returned']}")
    if what == "uneven":
        return (f"{where} the ranks called global_sum different numbers of times: every rank "
                "must make the same calls in the same order (a global sum is a collective "
                "operation), so no rank may leave the loop on a test of its own values only")
    if what == "wrong":
        return (f"{where} the solution is wrong: it differs from the course's by "
                f"{result['difference']:.1e} (relative), and ||b - Ax|| / ||b|| = "
                f"{result['true_residual']:.1e} (tol = {TOL:g}). Check the recurrences "
                "p = u + beta p, s = w + beta s, x += alpha p, r -= alpha s, and that x is "
                "updated in place.")
    if what == "iterations":
        return (f"{where} your solver took {result['iterations']} iterations where "
                f"Chronopoulos-Gear takes {result['reference_iterations']}: stop as soon as "
                "sqrt((r,r)) <= tol * ||b||, testing the (r,r) of the same global sum, and "
                "count one iteration per update of x")
    per = (result["sums"] - 1) / max(result["iterations"], 1)
    return (f"{where} your solver called global_sum {result['sums']} times in "
            f"{result['iterations']} iterations: about {per:.1f} per iteration (and one before "
            "the loop). "
            "Chronopoulos-Gear makes ONE per iteration: compute w = A u first, then sum "
            "(r,u), (w,u) and (r,r) together in one call, and get alpha from the recurrence "
            "of task 1 instead of from (p, A p). "
            f"(Before the loop, up to {SET_UP_SUMS} more calls are fine.)")
