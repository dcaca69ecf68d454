"""The learner's Chronopoulos-Gear CG under mpiexec (started by course.grading.pipecg,
never imported by a notebook's kernel):

    mpiexec -n P python -m mpi4py -m course.grading.pipecg_driver LANG FILE CASE...

LANG is c or fortran (FILE: the shared library compiled from the learner's source), python (FILE:
the learner's chronopoulos_gear.py) or, for the tests, course:ALGORITHM (FILE: -), the course's
own CG variant ALGORITHM behind the learner's interface. A CASE is written by grading.Case.spec.

The cases run one after the other, each in a communicator of its own, on case.ranks ranks of the
job in descending world order (case_members: neither the first ranks of the job nor in its order).
The problem: the heat equation of 02_fem3d on the case's mesh, T = 0 on one face and a random
source at every node (both from the case's seed), so that the solution is genuinely 3-D and the
solve needs dozens of iterations with a slowly falling residual; b is scaled to ||b|| = 1e+6 or
1e-6 (by the seed), so that only a tolerance relative to ||b|| stops where it should. On every
case of the notebook, every right solver the tests try (the solutions in C, Fortran and Python,
the course's four CG variants) stops at Chronopoulos-Gear's iteration, whose residual is at least
10 % from the threshold: the check requires the iteration count exactly.

The learner's function gets the distributed product (halo exchange inside) and a global sum, and
the driver counts the calls of both. The product also keeps the residual history: the solver
passes it u = D^-1 r, so r = u / dinv. The course's krylov(..., "chronopoulos-gear") solves the
same system first.

Rank 0 of the case reports on stdout, one line per event (course.parallel.mpi_job.report):

    {"event": "start", "case": k}                     the learner's solve of case k begins
    {"event": "result", "case": k, ...}               iterations, calls, residuals, differences
    {"event": "error", "case": k, "rank": r, "stage": "load" or "solve", "error": "..."}
    {"event": "uneven", "case": k, "rank": r, ...}    rank r returned, the others did not (any
                                                      rank of the case may report it)
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib.util
import sys
import time
import types

import numpy as np
from mpi4py import MPI

from .. import solvers
from ..fem import assembly
from ..fem.mesh import FACES
from ..parallel.fem3d import assemble_local, internal_rows
from ..parallel.solve import Distributed
from ..parallel.halo import Halo
from ..parallel.local import local_data
from ..parallel.mpi_job import report
from ..parallel.reductions import MPIReductions
from .exercise import references_blocked
from .halo import Case
from .halo_driver import guarded

TOL = 1e-10
MAX_ITER = 400
NORM_B = (1e+6, 1e-6)      # ||b|| of a case, by its seed's parity: an absolute tolerance fails
SET_UP_SUMS = 3            # ||b||, and the first (r,u), (w,u), (r,r): at most a few before the loop
SET_UP_PRODUCTS = 2        # A x0 and A u0 before the loop (then one A u per iteration)
FINAL_PRODUCTS = 1         # one after the loop is fine: a true residual b - A x to report
RETURN_WAIT = 5.0          # seconds a rank that returned waits for the others (they return at once)
HISTORY_LIMIT = 4 * MAX_ITER       # products whose residual is kept (the others are only counted)
# how far a right solver's numbers may be from the course's: measured on every case of the
# notebook, the solutions in C and Fortran (other rounding) differ by at most 2e-7 in the
# residuals (Gropp's CG of the course: 1e-5) and 2e-15 in x (the pipelined CG: 3e-13);
# tests/test_pipecg_exercise.py keeps them 100 times below these bounds
HISTORY_RTOL = 1e-3        # ||r_j|| / ||b|| of every iteration j, relative
DIFFERENCE_TOL = 1e-10     # max |x - x_course| / max |x_course|
RESIDUAL_TOL = 10 * TOL    # ||b - A x|| / ||b||

MATVEC = ctypes.CFUNCTYPE(None, ctypes.POINTER(ctypes.c_double), ctypes.POINTER(ctypes.c_double))
GLOBAL_SUM = ctypes.CFUNCTYPE(None, ctypes.POINTER(ctypes.c_double), ctypes.c_int)


# --- what the learner's solver gets --------------------------------------------------------------

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


class CountedProduct:
    """matvec(v) = A v on this rank's rows (a halo exchange inside); counts the calls and keeps,
    for each, this rank's part of (r, r) with r = v / dinv: the solver passes u = dinv * r, so
    these add up to its residuals (the history, summed over the ranks after the solve)."""

    def __init__(self, system: Distributed):
        self.system, self.calls, self.rr = system, 0, []
        self.diagonal = system.matrix.diagonal()                      # 1 / dinv

    def __call__(self, v) -> np.ndarray:
        v = np.asarray(v, dtype=float)
        if v.shape != self.diagonal.shape:
            raise ValueError(f"matvec takes a vector of this rank's {self.diagonal.size} values, "
                             f"got one of shape {v.shape}")
        self.calls += 1
        if len(self.rr) < HISTORY_LIMIT:
            r = v * self.diagonal
            self.rr.append(float(r @ r))
        return self.system.matvec(v)


class MPIHidden(types.ModuleType):
    """What `import mpi4py` gives the learner's Python while it is loaded and while it solves: a
    module whose every attribute refuses (the solver must talk to the other ranks through
    global_sum, which the check counts, not through MPI_COMM_WORLD)."""

    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)             # what the import machinery looks up
        raise ImportError("mpi4py is not available to chronopoulos_gear: talk to the other ranks "
                          "only through global_sum (the check counts its calls) and matvec")


@contextlib.contextmanager
def mpi4py_hidden():
    """sys.modules["mpi4py"] and its submodules are MPIHidden while the learner's code runs (the
    driver's own modules have bound MPI at their import and are not affected)."""
    saved = {name: module for name, module in sys.modules.items()
             if name.split(".")[0] == "mpi4py"}
    sys.modules.update({name: MPIHidden(name) for name in {"mpi4py", "mpi4py.MPI", *saved}})
    try:
        yield
    finally:
        for name in [name for name in sys.modules if name.split(".")[0] == "mpi4py"]:
            del sys.modules[name]
        sys.modules.update(saved)


# what a learner's Python could call instead of writing the solver: every CG of the course (the
# modules stand for all their functions, private ones included), and the course's global sums
# (MPIReductions: around the counted global_sum). Not what the check hands to the solver: the
# product (Distributed.matvec, the Halo behind it) and global_sum stay usable.
COURSE_SOLVERS = (sys.modules["course.solvers.krylov"],      # (course.solvers.krylov: a function)
                  sys.modules["course.solvers.jacobi"], Distributed.solve,
                  sys.modules["course.parallel.reductions"])


def python_solver(path: str):
    spec = importlib.util.spec_from_file_location("learner_chronopoulos_gear", path)
    module = importlib.util.module_from_spec(spec)
    with mpi4py_hidden():
        spec.loader.exec_module(module)
    function = module.chronopoulos_gear

    def solve(n, matvec, global_sum, dinv, b, x):
        with references_blocked(*COURSE_SOLVERS), mpi4py_hidden():
            return function(matvec, global_sum, dinv.copy(), b.copy(), x, TOL, MAX_ITER)
    return solve


def compiled_function(path: str, name: str, lang: str):
    """The learner's function `name` of the shared library at `path`; AttributeError that says
    how Fortran names it when it is missing."""
    try:
        return getattr(ctypes.CDLL(path), name)
    except AttributeError:
        raise AttributeError(f"the compiled file has no function {name}" + (
            f' (Fortran: bind(C, name="{name}"))' if lang == "fortran" else "")) from None


def compiled_solver(path: str, lang: str):
    function = compiled_function(path, "chronopoulos_gear", lang)
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


class _Sums:
    """course.solvers' reductions interface on a global_sum."""

    def __init__(self, global_sum):
        self.global_sum, self.count = global_sum, 0

    def start(self, *values):
        self.count += 1
        self.sums = np.array(values, dtype=float)
        self.global_sum(self.sums)
        return self

    def wait(self):
        return self.sums


def course_solver(algorithm: str):
    """The course's CG variant `algorithm` behind the learner's interface (for the tests: every
    variant must take the number of iterations the check requires, on every case)."""
    def solve(n, matvec, global_sum, dinv, b, x):
        result = solvers.krylov(matvec, b, lambda r: dinv * r, _Sums(global_sum), algorithm,
                                x0=x.copy(), tol=TOL, max_iter=MAX_ITER)
        x[:] = result.x
        return result.iterations
    return solve


def solver_factory(lang: str, path: str):
    if lang.startswith("course:"):
        return course_solver(lang.split(":", 1)[1])
    return python_solver(path) if lang == "python" else compiled_solver(path, lang)


# --- the cases -----------------------------------------------------------------------------------

def case_members(k: int, ranks: int, size: int) -> list[int]:
    """The world ranks that run case k, listed in the order of their ranks in the case's
    communicator: `ranks` consecutive world ranks in descending order, from one that moves with k
    (when ranks < size, the set is not the first ranks of the job, in the first case); so that
    neither the set nor the order is MPI_COMM_WORLD's."""
    first = ranks - 1 + (k + 1) % (size - ranks + 1)
    return [first - i for i in range(ranks)]


def case_system(case: Case, comm):
    """This rank's LocalMatrix, right-hand side and halo for the case's problem: the heat equation
    on the case's mesh (conductivity 1), T = 0 on one face and a standard-normal source at every
    node (both from the seed), b scaled to ||b|| = NORM_B[seed % 2]."""
    mesh = case.mesh()
    owner = comm.bcast(case.owner(mesh) if comm.Get_rank() == 0 else None)
    local = local_data(mesh, owner, comm.Get_rank())
    source = np.random.default_rng(case.seed).standard_normal(mesh.n_node)
    a, rhs = assemble_local(mesh, local, 1.0, source)
    fixed = np.isin(local.global_ids, mesh.face_nodes(FACES[case.seed % len(FACES)]))
    assembly.dirichlet(a, rhs, fixed, 0.0)
    b = rhs[:local.n_internal].copy()
    bb = np.array([b @ b])
    comm.Allreduce(MPI.IN_PLACE, [bb, MPI.DOUBLE], op=MPI.SUM)
    b *= NORM_B[case.seed % 2] / np.sqrt(bb[0])
    return internal_rows(a, local), b, Halo(local, comm)


def all_returned(control) -> bool:
    """Whether every rank of the case returns from the solve within RETURN_WAIT seconds of this
    one (a non-blocking barrier on `control`, a communicator the learner's code never sees). The
    ranks leave the last global sum together: one that waits longer waits for ranks still
    iterating (blocked in a product or a sum that this rank will never join)."""
    request = control.Ibarrier()
    deadline = time.monotonic() + RETURN_WAIT
    while not request.Test():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.001)
    return True


def residual_history(comm, product: CountedProduct, bnorm: float) -> list | None:
    """||r|| / ||b|| of every vector the solver passed to matvec, r = v / dinv summed over the
    ranks; None if the ranks made different numbers of products."""
    lengths = comm.allgather(len(product.rr))
    if len(set(lengths)) != 1:
        return None
    rr = np.array(product.rr, dtype=float)
    comm.Allreduce(MPI.IN_PLACE, [rr, MPI.DOUBLE], op=MPI.SUM)
    return [float(v) for v in np.sqrt(rr) / bnorm]


def on_case_ranks(world, k: int, ranks: int, check) -> bool:
    """check(comm) on the ranks case_members(k, ranks, ...) of world, in a communicator of their
    own (freed afterwards); its answer (True: the case went wrong) on every rank of world."""
    members = case_members(k, ranks, world.Get_size())
    me = world.Get_rank()
    comm = world.Split(0 if me in members else MPI.UNDEFINED,
                       members.index(me) if me in members else 0)
    failed = False
    if comm != MPI.COMM_NULL:
        failed = check(comm)
        comm.Free()
    return world.bcast(failed, root=members[0])


def run_case(world, k: int, case: Case, solve) -> bool:
    """Case k on the ranks case_members(k, ...) of world; True if it went wrong."""
    return on_case_ranks(world, k, case.ranks, lambda comm: solve_case(world, comm, k, case, solve))


def solve_case(world, comm, k: int, case: Case, solve) -> bool:
    rank = comm.Get_rank()
    matrix, b, halo = case_system(case, comm)
    system = Distributed(matrix, halo, comm, kernel="numpy")
    reference = solvers.krylov(system.matvec, b, system.precond, MPIReductions(comm),
                               "chronopoulos-gear", tol=TOL, max_iter=MAX_ITER)
    product, counted, control = CountedProduct(system), CountedSum(comm), comm.Dup()
    x = np.zeros(matrix.n_rows)
    if rank == 0:
        report(event="start", case=k)
    iterations = guarded(world, k, lambda: solve(matrix.n_rows, product, counted, system.dinv, b,
                                                 x), "solve", rank=rank)
    if not all_returned(control):
        report(event="uneven", case=k, rank=rank, returned=repr(iterations)[:60],
               sums=counted.calls)
        world.Abort(1)
    control.Free()
    difference = np.array([np.max(np.abs(x - reference.x), initial=0.0),
                           np.max(np.abs(reference.x), initial=0.0)])
    comm.Allreduce(MPI.IN_PLACE, [difference, MPI.DOUBLE], op=MPI.MAX)
    r = b - system.matvec(x)
    sums = np.array([r @ r, b @ b])
    comm.Allreduce(MPI.IN_PLACE, [sums, MPI.DOUBLE], op=MPI.SUM)
    calls = comm.allgather((counted.calls, product.calls))
    history = residual_history(comm, product, np.sqrt(sums[1]))
    failed = False
    if rank == 0:
        is_int = isinstance(iterations, (int, np.integer)) and not isinstance(iterations, bool)
        result = {"event": "result", "case": k,
                  "iterations": int(iterations) if is_int else None,
                  "returned": repr(iterations)[:60],
                  "reference_iterations": reference.iterations,
                  "sums": calls[0][0], "products": calls[0][1],
                  "same_on_all_ranks": len(set(calls)) == 1 and history is not None,
                  "residuals": history, "reference_residuals": reference.residuals,
                  "difference": float(difference[0] / max(difference[1], 1e-300)),
                  "true_residual": float(np.sqrt(sums[0] / sums[1]))}
        report(**result)
        failed = verdict(result) is not None
    halo.free()
    return failed


# --- the verdict ---------------------------------------------------------------------------------

def departure(result: dict) -> int | None:
    """The first iteration j at which the learner's ||r_j|| / ||b|| differs from Chronopoulos-
    Gear's by more than rounding can explain (None: none does). The learner's r_j come from the
    last iterations + 1 vectors passed to matvec (u_0, ..., u_k; before them at most A x0);
    None too if its products do not line up so (other verdicts judge those)."""
    history, reference = result["residuals"], result["reference_residuals"]
    k = result["iterations"]
    extra = len(history) - (k + 1) if history is not None and k >= 0 else -1
    if not 0 <= extra <= SET_UP_PRODUCTS - 1 or result["products"] != len(history):
        return None
    for j, (mine, theirs) in enumerate(zip(history[extra:], reference)):
        if not abs(mine - theirs) <= HISTORY_RTOL * theirs:
            return j
    return None


def verdict(result: dict) -> str | None:
    """What is wrong with one case's result (None: nothing), in words for the learner; the
    messages themselves live in course.grading.pipecg."""
    k = result["iterations"]
    if k is None:
        return "not_int"
    if not result["same_on_all_ranks"]:
        return "uneven"
    if result["sums"] > k + SET_UP_SUMS:
        return "too_many_sums"
    if result["products"] > k + SET_UP_PRODUCTS + FINAL_PRODUCTS:
        return "too_many_products"
    if departure(result) is not None:
        return "departs"
    if k != result["reference_iterations"]:
        return "iterations"
    if not (result["difference"] <= DIFFERENCE_TOL and result["true_residual"] <= RESIDUAL_TOL):
        return "wrong"
    return None


def main(argv: list[str]) -> None:
    world = MPI.COMM_WORLD
    lang, path, *specs = argv
    solve = guarded(world, 0, lambda: solver_factory(lang, path), "load")
    for k, spec in enumerate(specs):      # (the course's variants: every case, for the tests)
        if run_case(world, k, Case.parse(spec), solve) and not lang.startswith("course:"):
            break


if __name__ == "__main__":
    main(sys.argv[1:])
