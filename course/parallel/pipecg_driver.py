"""The learner's Chronopoulos-Gear CG under mpiexec (started by course.parallel.pipecg_grading,
never imported by a notebook's kernel):

    mpiexec -n P python -m mpi4py -m course.parallel.pipecg_driver LANG FILE CASE...

LANG is c or fortran (FILE: the shared library compiled from the learner's source) or python
(FILE: the learner's chronopoulos_gear.py). A CASE is written by grading.Case.spec. The cases run
one after the other, each on the first RANKS ranks of the job, in a communicator of their own: the
model problem of 02_fem3d (a heat flux, the fixed face from the case's seed) on that partition.
The learner's function gets the distributed product (halo exchange inside) and a global sum that
counts its calls; the course's krylov(..., "chronopoulos-gear") solves the same system.

Rank 0 reports on stdout, one line per event (course.parallel.mpi_job.report):

    {"event": "start", "case": k}                     the learner's solve of case k begins
    {"event": "result", "case": k, ...}               iterations, sums, differences (rank 0)
    {"event": "error", "case": k, "rank": r, "stage": "load" or "solve", "error": "..."}
"""

from __future__ import annotations

import ctypes
import importlib.util
import sys

import numpy as np
from mpi4py import MPI

from .. import solvers
from ..exercise import references_blocked
from ..solvers.jacobi import pcg_jacobi
from ..mesh import FACES
from .exchange_driver import guarded
from .fem3d import Distributed, model_system
from .grading import Case
from .halo import Halo
from .local import local_data
from .mpi_job import report
from .reductions import MPIReductions

TOL = 1e-10
MAX_ITER = 400

MATVEC = ctypes.CFUNCTYPE(None, ctypes.POINTER(ctypes.c_double), ctypes.POINTER(ctypes.c_double))
GLOBAL_SUM = ctypes.CFUNCTYPE(None, ctypes.POINTER(ctypes.c_double), ctypes.c_int)


class CountedSum:
    """global_sum(values): the sum over the ranks of every entry of values, in place (one
    MPI_Allreduce); counts the calls and the values they carried."""

    def __init__(self, comm):
        self.comm, self.calls, self.values = comm, 0, 0

    def __call__(self, values: np.ndarray) -> None:
        if not isinstance(values, np.ndarray) or values.dtype != np.float64 or values.ndim != 1:
            raise TypeError("global_sum takes a 1-D NumPy array of float64 values (summed in "
                            "place), e.g. np.array([r @ u, w @ u, r @ r])")
        if not values.flags.c_contiguous:
            raise TypeError("global_sum needs a contiguous array (not a strided slice)")
        self.calls += 1
        self.values += values.size
        self.comm.Allreduce(MPI.IN_PLACE, [values, MPI.DOUBLE], op=MPI.SUM)


# what a learner's Python could call instead of writing the solver: every CG of the course
krylov_module = sys.modules["course.solvers.krylov"]      # (course.solvers.krylov is the function)
COURSE_SOLVERS = (krylov_module.krylov, krylov_module.cg, krylov_module._pcg,
                  krylov_module._chronopoulos_gear, krylov_module._gropp,
                  krylov_module._pipelined, pcg_jacobi)


def python_solver(path: str):
    spec = importlib.util.spec_from_file_location("learner_chronopoulos_gear", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    function = module.chronopoulos_gear

    def solve(n, matvec, global_sum, dinv, b, x):
        with references_blocked(*COURSE_SOLVERS):        # the course's own CGs
            return function(matvec, global_sum, dinv.copy(), b.copy(), x, TOL, MAX_ITER)
    return solve


def compiled_solver(path: str, lang: str):
    try:
        function = ctypes.CDLL(path).chronopoulos_gear
    except AttributeError:
        raise AttributeError("the compiled file has no function chronopoulos_gear" + (
            ' (Fortran: bind(C, name="chronopoulos_gear"))' if lang == "fortran" else "")) \
            from None
    function.restype = ctypes.c_int
    function.argtypes = [ctypes.c_int, MATVEC, GLOBAL_SUM, ctypes.c_void_p, ctypes.c_void_p,
                         ctypes.c_void_p, ctypes.c_double, ctypes.c_int]

    def solve(n, matvec, global_sum, dinv, b, x):
        def c_matvec(x_ptr, y_ptr):
            y = np.ctypeslib.as_array(y_ptr, (n,))
            y[:] = matvec(np.ctypeslib.as_array(x_ptr, (n,)).copy())

        def c_sum(values_ptr, count):
            if count < 1:
                raise ValueError(f"global_sum called with count = {count}")
            values = np.ctypeslib.as_array(values_ptr, (count,))
            summed = values.copy()
            global_sum(summed)
            values[:] = summed
        callbacks = (MATVEC(c_matvec), GLOBAL_SUM(c_sum))        # alive during the call
        inputs = (np.ascontiguousarray(dinv), np.ascontiguousarray(b))
        return function(n, *callbacks, *(a.ctypes.data for a in inputs), x.ctypes.data, TOL,
                        MAX_ITER)
    return solve


def solver_factory(lang: str, path: str):
    return python_solver(path) if lang == "python" else compiled_solver(path, lang)


def case_system(case: Case, comm):
    """This rank's LocalMatrix, right-hand side and halo for the case's model problem."""
    mesh = case.mesh()
    owner = comm.bcast(case.owner(mesh) if comm.Get_rank() == 0 else None)
    local = local_data(mesh, owner, comm.Get_rank())
    face = FACES[case.seed % len(FACES)]
    matrix, b, _ = model_system(mesh, local, qflux=0.5 + 0.1 * case.seed, fixed_face=face)
    return matrix, b, Halo(local, comm)


def run_case(world, k: int, case: Case, solve) -> bool:
    """Case k on the first case.ranks ranks of world; True if it went wrong."""
    active = world.Get_rank() < case.ranks
    comm = world.Split(0 if active else MPI.UNDEFINED, world.Get_rank())
    failed = False
    if active:
        matrix, b, halo = case_system(case, comm)
        system = Distributed(matrix, halo, comm, kernel="numpy")
        reference = solvers.krylov(system.matvec, b, system.precond, MPIReductions(comm),
                                   "chronopoulos-gear", tol=TOL, max_iter=MAX_ITER)
        counted = CountedSum(comm)
        x = np.zeros(matrix.n_rows)
        if comm.Get_rank() == 0:
            report(event="start", case=k)
        iterations = guarded(world, k, lambda: solve(matrix.n_rows, system.matvec, counted,
                                                     system.dinv, b, x), "solve")
        difference = np.array([np.max(np.abs(x - reference.x), initial=0.0),
                               np.max(np.abs(reference.x), initial=0.0)])
        comm.Allreduce(MPI.IN_PLACE, [difference, MPI.DOUBLE], op=MPI.MAX)
        r = b - system.matvec(x)
        sums = np.array([r @ r, b @ b])
        comm.Allreduce(MPI.IN_PLACE, [sums, MPI.DOUBLE], op=MPI.SUM)
        calls = comm.allgather(counted.calls)
        if comm.Get_rank() == 0:
            learner_iterations = iterations if isinstance(iterations, (int, np.integer)) \
                else None
            result = {"event": "result", "case": k, "iterations": learner_iterations,
                      "returned": repr(iterations)[:60],
                      "reference_iterations": reference.iterations,
                      "sums": calls[0], "sums_same_on_all_ranks": len(set(calls)) == 1,
                      "values_per_sum": counted.values / max(counted.calls, 1),
                      "difference": float(difference[0] / max(difference[1], 1e-300)),
                      "true_residual": float(np.sqrt(sums[0] / sums[1]))}
            report(**result)
            failed = verdict(result) is not None
        halo.free()
        comm.Free()
    return world.bcast(failed)


SET_UP_SUMS = 3        # ||b||, and the first (r,u), (w,u), (r,r): at most a few before the loop


def verdict(result: dict) -> str | None:
    """What is wrong with one case's result (None: nothing), in words for the learner; the
    messages themselves live in course.parallel.pipecg_grading."""
    if result["iterations"] is None:
        return "not_int"
    if not result["sums_same_on_all_ranks"]:
        return "uneven"
    if result["difference"] > 1e-8 or result["true_residual"] > 1e-8:
        return "wrong"
    if abs(result["iterations"] - result["reference_iterations"]) > 1:
        return "iterations"
    if result["sums"] > result["iterations"] + SET_UP_SUMS:
        return "too_many_sums"
    return None


def main(argv: list[str]) -> None:
    world = MPI.COMM_WORLD
    lang, path, *specs = argv
    solve = guarded(world, 0, lambda: solver_factory(lang, path), "load")
    for k, spec in enumerate(specs):
        if run_case(world, k, Case.parse(spec), solve):
            break


if __name__ == "__main__":
    main(sys.argv[1:])
