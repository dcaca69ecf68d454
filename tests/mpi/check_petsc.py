"""Run under `mpiexec -n P python -m mpi4py tests/mpi/check_petsc.py` (tests/test_petsc.py): the
Poisson problem of 03_openmp, each rank's rows built by the course (its own part, METIS), handed to
PETSc as that rank's rows of one distributed matrix (course.parallel.petsc), and solved by PETSc's
twin of the course's choices. Rank 0 checks, for every CG variant with Jacobi and for pcg with
localized IC(0) and with two additive Schwarz sweeps, that PETSc takes exactly the iterations of
the course's distributed CG and reaches its solution; then that PETSc's additive Schwarz without
overlap is localized IC(0), and that overlap helps exact block solves. An assertion on any rank aborts the whole
job (python -m mpi4py). Prints one line per check."""

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")     # flat MPI: one thread per rank

import numpy as np  # noqa: E402
from mpi4py import MPI  # noqa: E402

from course.fem.mesh import box_mesh  # noqa: E402
from course.parallel import petsc  # noqa: E402
from course.parallel.halo import Halo  # noqa: E402
from course.parallel.poisson import poisson_local  # noqa: E402
from course.parallel.solve import Distributed  # noqa: E402
from course.parallel.subdomain import partition_rule  # noqa: E402
from course.solvers import ALGORITHMS  # noqa: E402

comm = MPI.COMM_WORLD
rank = comm.Get_rank()
CELLS = (12, 10, 8)
TOL = 1e-8

rule = partition_rule(comm, box_mesh(*(n - 1 for n in CELLS), distributed=True), "metis")
local, matrix, b = poisson_local(*CELLS, 1.0, 1.0, 1.0, rule.owned(rank), rule.owner_of, rank,
                                 comm.Get_size())
halo = Halo(local, comm)
columns = petsc.global_columns(local.n_internal, matrix.n_cols, halo, comm)
mat = petsc.local_mat(matrix, columns, comm)

# PETSc's numbers: rank by rank, each rank's internal nodes in their local order, and the
# external ones as their owners number them
first = comm.exscan(local.n_internal) or 0
assert np.array_equal(columns[:local.n_internal], first + np.arange(local.n_internal))
assert mat.getOwnershipRange() == (first, first + local.n_internal)

cases = [(algorithm, "diagonal", None) for algorithm in ALGORITHMS] + \
    [("pcg", "bjacobi-ic0", None), ("pcg", "asdd-ic0", 2)]
for algorithm, precond, sweeps in cases:
    course = Distributed(matrix, halo, comm, kernel="numpy", precond=precond, sweeps=sweeps,
                         precond_lang="numpy").solve(b, tol=TOL, algorithm=algorithm)
    theirs = petsc.solve(mat, b, algorithm=algorithm, precond=precond, sweeps=sweeps, tol=TOL)
    gap = comm.allreduce(float(np.sum((course.x - theirs["x"]) ** 2)))
    norm = comm.allreduce(float(np.sum(course.x ** 2)))
    assert theirs["converged"] and theirs["iterations"] == course.iterations, \
        (algorithm, precond, theirs["iterations"], course.iterations)
    assert np.sqrt(gap / norm) < 1e-6, (algorithm, precond, np.sqrt(gap / norm))
    if rank == 0:
        print(f"{algorithm} {precond} ok: {course.iterations} iterations", flush=True)

# overlap, which the course does not build: with none, additive Schwarz is block Jacobi, the
# course's localized IC(0); with exact block solves, two layers of overlap couple the blocks more
localized = Distributed(matrix, halo, comm, kernel="numpy", precond="bjacobi-ic0",
                        precond_lang="numpy").solve(b, tol=TOL).iterations
schwarz = {(k, exact): petsc.solve_with(mat, b, petsc.overlap_options(k, exact, tol=TOL))
           for k in (0, 2) for exact in (False, True)}
assert all(out["converged"] for out in schwarz.values())
assert schwarz[0, False]["iterations"] == localized, (schwarz[0, False]["iterations"], localized)
if comm.Get_size() > 1:
    assert schwarz[2, True]["iterations"] < schwarz[0, True]["iterations"], \
        {key: out["iterations"] for key, out in schwarz.items()}
if rank == 0:
    print(f"asm overlap ok: {localized} iterations without overlap", flush=True)
mat.destroy()
halo.free()
petsc.petsc().garbage_cleanup()
