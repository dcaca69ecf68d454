"""The learner's additive Schwarz sweeps (asdd_apply) under mpiexec (started by
course.grading.hybrid, never imported by a notebook's kernel):

    mpiexec -n P python -m mpi4py -m course.grading.hybrid_driver LANG FILE [LANG FILE..] -- CASE..

LANG is c or fortran (FILE: the shared library compiled from the learner's source), python (FILE:
the learner's asdd_apply.py) or, for the tests, course (FILE: -): the sweeps of
course.parallel.precond behind the learner's interface. A CASE is written by grading.Case.spec,
followed by the sweeps K to check on it: CASE/K,K,.. (e.g. 3:metis:5x5x4:-:1/1,2,3). Several
(LANG, FILE) pairs, variants, run one after the other on the same cases (the tests check several
answers in one job); each variant stops at its first case that goes wrong (but course: it runs
them all).

The cases run one after the other, each in a communicator of its own, on case.ranks ranks of the
job in descending world order (pipecg_driver.case_members). The problem: pipecg_driver's heat
equation on the case's mesh (a random source, T = 0 on one face). On each rank, the course's
localized IC(0) of the internal block (LocalizedIC0, natural order) is B; the learner's
asdd_apply gets

    local_solve(t) = B t       (no communication; counted)
    matvec(x) = A x            (the halo exchange inside; counted)

and, for every K, a random r of this rank; its z is compared with the course's asdd-ic0 with K
sweeps, its calls counted, r compared with what it was. Then one PCG solve with the learner's
sweeps (the last K of the case) as the preconditioner must take the iterations of the course's.

Rank 0 of the case reports on stdout, one line per event (course.parallel.mpi_job.report):

    {"event": "start", "variant": j, "case": k}       the learner's code runs on case k
    {"event": "result", "variant": j, "case": k, "applications": [...], "iterations": ...}
    {"event": "error", "case": k, "rank": r, "stage": "load" or "apply", "error": "..."}
"""

from __future__ import annotations

import ctypes
import importlib.util
import sys

import numpy as np
from mpi4py import MPI

from .. import solvers
from ..parallel import precond as precond_module
from ..parallel.mpi_job import report
from ..parallel.precond import LocalizedIC0
from ..parallel.reductions import MPIReductions
from ..parallel.solve import Distributed
from .exercise import reference, references_blocked
from .halo import Case
from .halo_driver import guarded
from .pipecg_driver import (MATVEC, case_system, compiled_function, mpi4py_hidden,
                            on_case_ranks)

TOL = 1e-8                 # the PCG solve with the learner's preconditioner
MAX_ITER = 300
# z against the course's asdd-ic0, max |z - z_course| / max |z_course| over the ranks: the
# solutions in C, Fortran and Python agree with it to 1e-15 (tests/test_hybrid_exercise.py)
Z_RTOL = 1e-12
# the course's B (solve_block), for the learner's local_solve: an unblocked copy, so that it works
# while the course's precond module is blocked
_SOLVE_BLOCK = reference(LocalizedIC0.solve_block)
LOCAL_SOLVE = MATVEC               # void (*)(const double *in, double *out), as matvec


# --- what the learner's function gets ------------------------------------------------------------

class Counted:
    """A callback y = f(x) on this rank's n values that counts its calls."""

    def __init__(self, function, n: int, name: str):
        self.function, self.n, self.name, self.calls = function, n, name, 0

    def __call__(self, x) -> np.ndarray:
        x = np.asarray(x, dtype=float)
        if x.shape != (self.n,):
            raise ValueError(f"{self.name} takes a vector of this rank's {self.n} values, got "
                             f"one of shape {x.shape}")
        self.calls += 1
        return np.array(self.function(x.copy()), dtype=float)


def python_apply(path: str):
    spec = importlib.util.spec_from_file_location("learner_asdd_apply", path)
    module = importlib.util.module_from_spec(spec)
    with mpi4py_hidden():
        spec.loader.exec_module(module)
    function = module.asdd_apply

    def apply(n, local_solve, matvec, sweeps, r):
        with references_blocked(precond_module), mpi4py_hidden():
            z = function(local_solve, matvec, sweeps, r)
        try:
            z = np.array(z, dtype=float)
        except (TypeError, ValueError):
            raise TypeError(f"asdd_apply must return z, an array of this rank's {n} values, "
                            f"not {type(z).__name__}") from None
        if z.shape != (n,):
            raise ValueError(f"asdd_apply returned z of shape {z.shape}: it must have this "
                             f"rank's {n} values")
        return z
    return apply


def compiled_apply(path: str, lang: str):
    function = compiled_function(path, "asdd_apply", lang)
    function.restype = None
    function.argtypes = [ctypes.c_int, LOCAL_SOLVE, MATVEC, ctypes.c_int, ctypes.c_void_p,
                         ctypes.c_void_p]

    def apply(n, local_solve, matvec, sweeps, r):
        def callback(f):
            def c_function(x_ptr, y_ptr):
                y = np.ctypeslib.as_array(y_ptr, (n,))
                y[:] = f(np.ctypeslib.as_array(x_ptr, (n,)).copy())
            return c_function
        callbacks = (LOCAL_SOLVE(callback(local_solve)), MATVEC(callback(matvec)))   # alive
        z = np.full(n, np.nan)          # garbage on entry: z is output only
        function(n, *callbacks, sweeps, r.ctypes.data, z.ctypes.data)
        return z
    return apply


def course_apply(n, local_solve, matvec, sweeps, r):
    """The course's sweeps behind the learner's interface (for the tests)."""
    z = local_solve(r)
    for _ in range(sweeps - 1):
        z = z + local_solve(r - matvec(z))
    return z


def apply_factory(lang: str, path: str):
    if lang == "course":
        return course_apply
    return python_apply(path) if lang == "python" else compiled_apply(path, lang)


# --- the cases -----------------------------------------------------------------------------------

def parse(word: str) -> tuple[Case, list[int]]:
    """CASESPEC/K,K,... -> (Case, [K, ...])."""
    spec, sweeps = word.split("/")
    return Case.parse(spec), [int(k) for k in sweeps.split(",")]


def run_case(world, k: int, case: Case, sweeps: list[int], apply, variant: int = 0) -> bool:
    """Case k on the ranks case_members(k, ...) of world; True if it went wrong."""
    return on_case_ranks(world, k, case.ranks,
                         lambda comm: check_case(world, comm, k, case, sweeps, apply, variant))


def check_case(world, comm, k: int, case: Case, sweeps: list[int], apply,
               variant: int = 0) -> bool:
    rank = comm.Get_rank()
    matrix, b, halo = case_system(case, comm)
    n = matrix.n_rows
    system = Distributed(matrix, halo, comm, kernel="numpy")
    course = LocalizedIC0(matrix, system.matvec, 1, lang="numpy")

    def local_solve(t):
        return _SOLVE_BLOCK(course, t)

    rng = np.random.default_rng(1000 * case.seed + 17 * rank + 5)
    applications = []
    if rank == 0:
        report(event="start", variant=variant, case=k)
    for sweep_count in sweeps:
        r = rng.standard_normal(n)
        course.sweeps = sweep_count
        expected = course(r.copy())
        solves, products = Counted(local_solve, n, "local_solve"), Counted(system.matvec, n,
                                                                           "matvec")
        given = r.copy()
        z = guarded(world, k, lambda: apply(n, solves, products, sweep_count, given), "apply",
                    rank=rank)
        gap = np.array([np.max(np.abs(z - expected), initial=0.0) if np.all(np.isfinite(z))
                        else np.inf, np.max(np.abs(expected), initial=0.0),
                        float(not np.array_equal(given, r))])
        comm.Allreduce(MPI.IN_PLACE, [gap, MPI.DOUBLE], op=MPI.MAX)
        calls = comm.allgather((solves.calls, products.calls))
        worst = int(np.argmax(np.abs(z - expected))) if n else 0
        where = comm.gather((float(np.abs(z - expected)[worst]) if n else 0.0, rank, worst,
                             float(z[worst]) if n else 0.0, float(expected[worst]) if n else 0.0))
        applications.append({"sweeps": sweep_count, "solves": calls[0][0],
                             "products": calls[0][1], "same_on_all_ranks": len(set(calls)) == 1,
                             "r_changed": bool(gap[2]),
                             "difference": float(gap[0] / max(gap[1], 1e-300)),
                             "worst": max(where, key=lambda w: (np.isnan(w[0]), w[0]))
                             if rank == 0 else None})
    result = {"event": "result", "variant": variant, "case": k, "applications": applications}
    failed = any(verdict(a) for a in applications)
    if not failed:                     # a short PCG with the learner's sweeps as preconditioner
        last = sweeps[-1]
        course.sweeps = last
        wanted = solvers.krylov(system.matvec, b, course, MPIReductions(comm), "pcg", tol=TOL,
                                max_iter=MAX_ITER)

        def learner(r):
            return apply(n, Counted(local_solve, n, "local_solve"),
                         Counted(system.matvec, n, "matvec"), last, r.copy())
        got = guarded(world, k, lambda: solvers.krylov(system.matvec, b, learner,
                                                       MPIReductions(comm), "pcg", tol=TOL,
                                                       max_iter=MAX_ITER), "pcg", rank=rank)
        result.update(pcg_sweeps=last, iterations=got.iterations,
                      reference_iterations=wanted.iterations)
        failed = got.iterations != wanted.iterations
    if rank == 0:
        report(**result)
    halo.free()
    return failed


# --- the verdict ---------------------------------------------------------------------------------

def verdict(application: dict) -> str | None:
    """What is wrong with one application (None: nothing); the messages live in
    course.grading.hybrid."""
    k = application["sweeps"]
    if not application["same_on_all_ranks"]:
        return "uneven"
    if application["r_changed"]:
        return "r_changed"
    if application["solves"] != k:
        return "solves"
    if application["products"] != k - 1:
        return "products"
    if not application["difference"] <= Z_RTOL:
        return "values"
    return None


def main(argv: list[str]) -> None:
    world = MPI.COMM_WORLD
    split = argv.index("--")
    pairs, words = argv[:split], argv[split + 1:]
    for variant, (lang, path) in enumerate(zip(pairs[0::2], pairs[1::2])):
        apply = guarded(world, 0, lambda: apply_factory(lang, path), "load")
        for k, word in enumerate(words):
            case, sweeps = parse(word)
            if run_case(world, k, case, sweeps, apply, variant) and lang != "course":
                break


if __name__ == "__main__":
    main(sys.argv[1:])
