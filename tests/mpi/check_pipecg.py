"""Run under `mpiexec -n P python -m mpi4py tests/mpi/check_pipecg.py NX NY NZ PARTITION`
(tests/test_pipecg.py): on every rank, each CG variant of course.solvers.krylov with blocking
(MPI_Allreduce) and non-blocking (MPI_Iallreduce) reductions solves the model problem of 02_fem3d;
rank 0 checks it against the serial solve, the iterations against PCG's, the reductions counted
per iteration against what the variant promises, and blocking against non-blocking; then MPI_Test
calls inside the SpMV (progress) must leave the pipelined iterates bitwise unchanged; and the
Poisson problem of 03_openmp, distributed by rows, equals a direct solve. An assertion
on any rank aborts the whole job (python -m mpi4py). Prints one line per variant from rank 0."""

import os
import sys

os.environ.setdefault("OMP_NUM_THREADS", "1")     # flat MPI: one thread per rank

import numpy as np  # noqa: E402
from mpi4py import MPI  # noqa: E402

from course import problems  # noqa: E402
from course.fem.mesh import box_mesh  # noqa: E402
from course.parallel.fem3d import fem3d_parallel, model_system  # noqa: E402
from course.parallel.halo import Halo  # noqa: E402
from course.parallel.local import local_data  # noqa: E402
from course.parallel.partition import make_partition  # noqa: E402
from course.parallel.poisson import poisson_parallel  # noqa: E402
from course.parallel.solve import Distributed  # noqa: E402
from course.solvers import ALGORITHMS  # noqa: E402

PROMISED = {"pcg": 2, "chronopoulos-gear": 1, "gropp": 2, "pipelined": 1}
comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
nx, ny, nz = (int(v) for v in sys.argv[1:4])
method = sys.argv[4]
model = dict(qflux=0.5, fixed_face="xmin", tol=1e-10)

serial = problems.fem3d(nx, ny, nz, lang="numpy", keep_solution=True, warm_up=False, **model) \
    if rank == 0 else None
pcg_iterations = None
for algorithm in ALGORITHMS:
    runs = [fem3d_parallel(nx, ny, nz, partition=method, lang="numpy", keep_solution=True,
                           algorithm=algorithm, iallreduce=nonblocking, **model)
            for nonblocking in (False, True)]
    if rank != 0:
        continue
    blocking, nonblocking = runs
    for run in runs:
        difference = np.max(np.abs(run["T"] - serial["T"])) / np.max(np.abs(serial["T"]))
        assert run["converged"] and difference <= 1e-8, (algorithm, difference)
        assert run["reductions_per_iteration"] == PROMISED[algorithm], (algorithm, run)
        assert run["true_relative_residual"] <= 1e-9, (algorithm, run["true_relative_residual"])
        assert run["algorithm"] == algorithm
    if algorithm == "pcg":
        pcg_iterations = blocking["iterations"]
        assert abs(pcg_iterations - serial["iterations"]) <= 1, (pcg_iterations, serial)
    assert abs(blocking["iterations"] - pcg_iterations) <= 3, (algorithm, blocking, pcg_iterations)
    # the same iterates whether the sums are blocking or not (a sum of two numbers does not
    # depend on the order; with more ranks the two collectives may add in different orders)
    assert blocking["iterations"] == nonblocking["iterations"], algorithm
    same = np.max(np.abs(blocking["T"] - nonblocking["T"])) / np.max(np.abs(blocking["T"]))
    assert same == 0.0 if size <= 2 else same <= 1e-12, (algorithm, same)
    assert blocking["seconds"]["overlapped"] == 0.0
    if algorithm in ("gropp", "pipelined"):                # work between Iallreduce and Wait
        assert nonblocking["seconds"]["overlapped"] > 0.0, nonblocking["seconds"]
    sys.stdout.write(f"{algorithm} ok: {blocking['iterations']} iterations "
                     f"({blocking['reductions_per_iteration']} reductions each)\n")
    sys.stdout.flush()

# MPI_Test calls between chunks of the SpMV (progress) change nothing in the numbers

mesh = box_mesh(nx, ny, nz)
owner = comm.bcast(make_partition(mesh, method, size) if rank == 0 else None)
local = local_data(mesh, owner, rank)
matrix, b, _ = model_system(mesh, local, qflux=0.5, fixed_face="xmin")
runs = []
for chunks in (1, 4):
    halo = Halo(local, comm)
    system = Distributed(matrix, halo, comm, kernel="numpy", nonblocking=True,
                         progress_chunks=chunks)
    runs.append((system.solve(b, tol=1e-10, algorithm="pipelined"), system.reductions.tests))
    halo.free()
(plain, no_tests), (chunked, tests) = runs
assert no_tests == 0 and tests >= 3 * chunked.iterations, (no_tests, tests)
assert plain.iterations == chunked.iterations and np.array_equal(plain.x, chunked.x), rank
if rank == 0:
    sys.stdout.write(f"progress ok: {tests} MPI_Test calls\n")

# the Poisson problem of 03_openmp by rows: every variant against a direct solve
cells = (nx + 2, ny + 1, nz)
if rank == 0:
    import scipy.sparse
    import scipy.sparse.linalg

    from course.fem import fvm
    problem = fvm.poisson(*cells, lang="numpy", fmt="crs")
    full = problem.full_crs()
    direct = scipy.sparse.linalg.spsolve(
        scipy.sparse.csr_matrix((full.val, full.col_idx, full.row_ptr)).tocsc(), problem.b)
for algorithm in ALGORITHMS:
    run = poisson_parallel(*cells, partition=method, lang="numpy", tol=1e-10,
                           algorithm=algorithm, iallreduce=True, keep_solution=True)
    if rank == 0:
        difference = np.max(np.abs(run["phi"] - direct)) / np.max(np.abs(direct))
        assert run["converged"] and difference <= 1e-8, (algorithm, difference)
        assert run["reductions_per_iteration"] == PROMISED[algorithm], run
        assert run["unknowns"] == direct.size
if rank == 0:
    sys.stdout.write(f"poisson ok: {run['iterations']} iterations\n")
