"""Run under `mpiexec -n P python -m mpi4py tests/mpi/check_hybrid.py` (tests/test_hybrid.py): the
parallel preconditioners of course.parallel.precond on the Poisson problem of 03_openmp (a
genuinely 3-D solution) and the heat problem of 02_fem3d. Rank 0 checks:

- on one rank, bjacobi-ic0 is the serial ICCG of 04_iccg: the same iterations for each ordering,
  and the same residual history to rounding;
- on P > 1 ranks it needs more iterations than on one (couplings between ranks dropped), and
  additive Schwarz sweeps (asdd-ic0, K = 2, 3) win part of it back, with K halo exchanges per
  iteration counted for every CG variant (one for A p or A m, K - 1 in the sweeps);
- every variant converges to the same solution; numba and C substitutions take the same
  iterations.

An assertion on any rank aborts the whole job (python -m mpi4py). Prints one line per check."""

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")     # flat MPI: one thread per rank

import numpy as np  # noqa: E402
from mpi4py import MPI  # noqa: E402

from course import problems  # noqa: E402
from course.fem import fvm  # noqa: E402
from course.parallel.fem3d import fem3d_parallel  # noqa: E402
from course.parallel.halo import Halo  # noqa: E402
from course.parallel.poisson import poisson_local, poisson_parallel  # noqa: E402
from course.parallel.solve import Distributed  # noqa: E402
from course.solvers import ALGORITHMS  # noqa: E402

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
CELLS = {"nx": 12, "ny": 10, "nz": 8}
TOL = 1e-10
ORDERINGS = [("natural", None), ("cm-rcm", 3)]
# the iterations of each preconditioner on one rank (the 1-rank run of the test prints them)
ONE_RANK = {"natural": 30, "cm-rcm": 40}


def poisson(**options):
    return poisson_parallel(**CELLS, lang="numba", tol=TOL, keep_solution=True, **options)


def say(line):
    if rank == 0:
        print(line, flush=True)


# --- one rank: the serial ICCG, residual history included --------------------------------------
for name, colors in ORDERINGS:
    run = poisson(precond="bjacobi-ic0", ordering_name=name, colors=colors)
    if rank == 0:
        serial = problems.poisson_iccg(**CELLS, ordering_name=name, colors=colors, lang="numba",
                                       tol=TOL)
        if size == 1:
            assert run["iterations"] == serial["iterations"] == ONE_RANK[name], \
                (name, run["iterations"], serial["iterations"])
            assert run["colors_per_rank"] == [serial["colors"]]
        else:
            assert run["iterations"] > serial["iterations"], (name, run, serial)
        assert run["halo_exchanges_per_iteration"] == 1 and run["precond"] == "bjacobi-ic0"
    say(f"bjacobi-ic0 {name} ok: {run['iterations']} iterations on {size} rank(s)")

if size == 1:                                         # the residual history, with SciPy's solves
    problem = fvm.poisson(**CELLS, lang="numpy", fmt="crs")
    local, matrix, b = poisson_local(*CELLS.values(), 1.0, 1.0, 1.0, np.arange(problem.n),
                                     np.zeros_like, 0, 1)
    system = Distributed(matrix, Halo(local, comm), comm, kernel="numpy",
                         precond="bjacobi-ic0", ordering_name="cm-rcm", colors=3,
                         precond_lang="numpy")
    history = system.solve(b, tol=TOL).residuals
    serial = problems.solve_ordered(problem.full_crs(), problem.b, "cm-rcm", 3, "numpy", TOL)
    reference = serial["result"].residuals
    assert len(history) == len(reference), (len(history), len(reference))
    # the same factor and the same solves; the dot products add in another order (the serial
    # solve works in the colored numbering): 1e-16 at first, grown by CG to 1e-13 in three
    # quarters of the run, to 1e-9 in its last iterations, near the attainable accuracy
    gaps = np.abs(np.array(history) - reference) / np.array(reference)
    early = gaps[:3 * len(gaps) // 4].max()
    assert early <= 1e-12 and gaps.max() <= 1e-7, (early, gaps.max())
    gap = gaps.max()
    say(f"history ok: {len(history)} residuals within {gap:.1e}")

# --- additive Schwarz sweeps: fewer iterations, K exchanges per iteration, every variant --------
block = poisson(precond="bjacobi-ic0")
reference = None
for algorithm in ALGORITHMS:
    previous = block["iterations"] if algorithm == "pcg" else None
    for sweeps in (2, 3):
        run = poisson(precond="asdd-ic0", sweeps=sweeps, algorithm=algorithm)
        if rank != 0:
            continue
        assert run["converged"] and run["halo_exchanges_per_iteration"] == sweeps, \
            (algorithm, sweeps, run)
        assert run["asdd_sweeps"] == sweeps and run["precond"] == "asdd-ic0"
        if reference is None:
            reference = run
        gap = np.max(np.abs(run["phi"] - reference["phi"])) / np.max(np.abs(reference["phi"]))
        assert gap <= 1e-7, (algorithm, sweeps, gap)
        assert abs(run["iterations"] - reference["iterations"]) <= 3 + abs(sweeps - 2) * 20
        if previous is not None:                      # pcg: each sweep saves iterations
            assert run["iterations"] < previous, (sweeps, run["iterations"], previous)
            previous = run["iterations"]
    say(f"asdd-ic0 {algorithm} ok")

# --- the substitutions in C: the same iterations, on fem3d with METIS -------------------------
runs = [fem3d_parallel(8, 7, 6, partition="metis", lang=lang, qflux=0.5, fixed_face="xmin",
                       tol=TOL, precond="asdd-ic0", sweeps=2, ordering_name="mc", colors=4)
        for lang in ("numba", "c")]
if rank == 0:
    assert runs[0]["iterations"] == runs[1]["iterations"], [r["iterations"] for r in runs]
    assert max(r["error_max"] for r in runs) <= 1e-7, [r["error_max"] for r in runs]
say(f"fem3d c ok: {runs[1]['iterations']} iterations")
