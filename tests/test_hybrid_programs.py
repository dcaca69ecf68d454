"""Lecture 08_hybrid, compiled side: the parallel preconditioners of fem3d_mpi_c and fem3d_mpi_f
(src_c/08_hybrid/precond_mpi.c, src_fortran/08_hybrid/precond_mpi.f90), chosen by the optional
lines 8 and 9 of the input,

    line 8   PRECOND SWEEPS     diagonal 1 | bjacobi-ic0 1 | asdd-ic0 K
    line 9   ORDERING COLORS    natural 0 | cm 0 | rcm 0 | mc K | cm-rcm K

on a small mesh (8 x 7 x 6 elements) under mpiexec with 1, 2 and 4 ranks, blocks and METIS parts
(`local PREFIX` files written by `python -m course partition`). Asserted: a file without lines 8-9
runs as before (diagonal, one halo exchange per iteration); on one rank bjacobi-ic0 is the serial
ICCG of lecture 04 (course.solvers.iccg, the Numba kernels: not the program's code) on the same
matrix and ordering, the same iterations and colors; on 2 and 4 ranks the localized IC(0) loses to
the cut couplings (more iterations than on one rank) and the additive Schwarz sweeps win some of
them back (asdd-ic0 K = 2, 3: fewer iterations than bjacobi-ic0 on the same partition) at K halo
exchanges per iteration, counted by the solver, in each of the four CG variants, which converge to
pcg's solution; bad lines 8-9 give one error line and exit status 2 on every rank; the MPI thread
level is at least FUNNELED.

The same runs through `python -m course solve fem3d --parallel` (course.parallel.precond, the
reference) take the same iterations (within 1), colors and counted exchanges.

Hybrid MPI + OpenMP (OMP_NUM_THREADS threads per rank: the assembly by element colors, the solve
in one parallel region, MPI from the master thread): 1 rank x 2 threads and 2 ranks x 2 threads
take the iterations and residuals of one thread per rank; every CG variant converges there to the
same solution; runs with 2 threads give the same bits every time; C, Fortran and Python agree at
2 threads; the thread line names the threads; and ThreadSanitizer with Archer (the tools of
course.grading.race_check) finds no data race in the C and the Fortran program's sources on 2
ranks x 2 threads, where it does find the one of a barrier removed on purpose.

Every mpiexec call has a timeout (the helpers of test_halo_programs)."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
from functools import cache
from pathlib import Path

import numpy as np
import pytest

from conftest import PYTHON, ROOT, env_with, run, run_course
from course import native, toolchain
from course.fem import assembly, mesh
from course.grading import race_check
from course.problems import solve_ordered
from test_fem3d_programs import parse_summary
from test_halo_programs import (LABELS, PROGRAMS, SUMMARY_LINES, assert_default_solver,
                                assert_one_error, mpi_input, mpiexec, solver_lines, untimed)

pytestmark = [pytest.mark.timeout(600), pytest.mark.compiled,
              pytest.mark.skipif(shutil.which("mpiexec") is None, reason="no mpiexec")]

# the model problem: T = 0 on xmin, a flux into xmax, a source; max T = 2.08
NEL, SIZE, COND, QVOL, QFLUX, FACE, EPS = (8, 7, 6), (0.2, 0.1, 0.35), 1.0, 1.0, 0.5, "xmin", 1e-10
# line 7 of every partition: blocks, or the METIS parts of `course partition` (fixture workdir)
PARTITIONS = {"1": "1 1 1", "2-blocks": "2 1 1", "2-metis": "local metis2", "4-blocks": "2 2 1",
              "4-metis": "local metis4"}
RANKS = {"1": 1, "2-blocks": 2, "2-metis": 2, "4-blocks": 4, "4-metis": 4}
ALGORITHMS = ("pcg", "chronopoulos-gear", "gropp", "pipelined")
PROMISED = {"pcg": 2, "chronopoulos-gear": 1, "gropp": 2, "pipelined": 1}


def input_text(partition: str, precond: str | None = None, ordering: str | None = None) -> str:
    """fem3d_mpi's input: the model problem, line 7 of `partition`, lines 8 and 9 if given."""
    text = mpi_input(" ".join(map(str, NEL)), "1 1 1", size=" ".join(map(str, SIZE)),
                     material=f"{COND} {QVOL}", qflux=str(QFLUX), face=FACE, eps=str(EPS))[0]
    text += f"{PARTITIONS[partition]}   PX PY PZ or local PREFIX\n"
    for value, comment in ((precond, "PRECOND SWEEPS: diagonal 1, bjacobi-ic0 1 or asdd-ic0 K"),
                           (ordering, "ORDERING COLORS: natural 0, cm 0, rcm 0, mc K, cm-rcm K")):
        if value is not None:       # a value missing its number: no comment (read as the number)
            text += f"{value}   {comment}\n" if len(value.split()) == 2 else f"{value}\n"
    return text


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    """One folder with the METIS local data files metis2.*, metis4.* for all the runs."""
    folder = tmp_path_factory.mktemp("hybrid_programs")
    for ranks in (2, 4):
        result = run_course("partition", "--nx", NEL[0], "--ny", NEL[1], "--nz", NEL[2],
                            "--dx", SIZE[0], "--dy", SIZE[1], "--dz", SIZE[2], "--ranks", ranks,
                            "--partition", "metis", "--out", folder / f"metis{ranks}",
                            timeout=120)
        assert result.returncode == 0, result.stderr
    return folder


def run_case(workdir: Path, name: str, partition: str, precond=None, ordering=None,
             algorithm: str = "pcg", *words, threads: int = 1):
    """One run (`words`: more words on the command line; `threads`: OpenMP threads per rank);
    checked: exit 0, nothing from the program on stderr, rank 0's summary once."""
    path = workdir / f"{name}-{partition}-{precond}-{ordering}.dat".replace(" ", "_")
    path.write_text(input_text(partition, precond, ordering))
    result = mpiexec(RANKS[partition], name, path.name, algorithm, *words, cwd=workdir,
                     threads=threads)
    assert result.returncode == 0, result.stdout + result.stderr
    assert not [line for line in result.stderr.splitlines() if line.startswith(name)]
    lines = result.stdout.splitlines()
    assert len(lines) == SUMMARY_LINES, lines
    assert lines[0].startswith(f"fem3d_mpi ({LABELS[name]}): "), lines[0]
    return result


@cache
def summary(workdir: Path, name: str, partition: str, precond=None, ordering=None,
            algorithm: str = "pcg", *words, threads: int = 1) -> dict:
    """The summary of one run, parsed: fem3d's numbers and the four lines on the solver."""
    result = run_case(workdir, name, partition, precond, ordering, algorithm, *words,
                      threads=threads)
    s = parse_summary(result.stdout)
    s.update(solver_lines(result.stdout.splitlines()))
    assert s["status"] == "converged" and s["relres"] <= EPS, s
    assert s["algorithm"] == algorithm
    return s


@cache
def serial_iccg(ordering: str, colors: int | None) -> dict:
    """The serial ICCG of lecture 04 (course.problems.solve_ordered: course.solvers.ordering and
    course.solvers.iccg, Numba kernels) on the matrix the program assembles on one rank: the
    same box, model problem, Dirichlet rows and tolerance."""
    box = mesh.box_mesh(*NEL, *SIZE)
    exact, _ = assembly.fem3d_model_exact(box, FACE, COND, QVOL, QFLUX)
    a, rhs = assembly.fem3d_assemble(box, COND, QVOL, "numba")
    assembly.fem3d_face_flux(box, mesh.OPPOSITE_FACE[FACE], QFLUX, rhs, "numba")
    fixed = np.zeros(box.n_node, dtype=bool)
    fixed[box.face_nodes(FACE)] = True
    assembly.dirichlet(a, rhs, fixed, np.where(fixed, exact(box.xyz), 0.0), "numba")
    solved = solve_ordered(a, rhs, ordering, colors, lang="numba", tol=EPS)
    assert solved["result"].converged
    return {"iterations": solved["result"].iterations, "colors": solved["ordering"].colors,
            "error": float(np.max(np.abs(solved["x"] - exact(box.xyz))))}


# --- no lines 8-9: as before ----------------------------------------------------------------------

@pytest.mark.parametrize("partition", ["1", "2-metis", "4-blocks"])
@pytest.mark.parametrize("name", PROGRAMS)
def test_without_lines_8_and_9_as_before(name, partition, workdir):
    """A 7-line file is the diagonal (Jacobi) preconditioner, one halo exchange per iteration
    (A p), the same output, character for character (but the time of the solve), as the explicit
    `diagonal 1` + `natural 0`."""
    plain = run_case(workdir, name, partition)
    lines = plain.stdout.splitlines()
    assert_default_solver(lines, EPS)
    explicit = run_case(workdir, name, partition, "diagonal 1", "natural 0")
    assert untimed(explicit.stdout) == untimed(plain.stdout)
    line_8_only = run_case(workdir, name, partition, "diagonal 1")
    assert untimed(line_8_only.stdout) == untimed(plain.stdout)


# --- one rank: the serial ICCG --------------------------------------------------------------------

@pytest.mark.parametrize("ordering, colors", [("natural", None), ("cm-rcm", 3), ("mc", 3),
                                              ("rcm", None)])
@pytest.mark.parametrize("name", PROGRAMS)
def test_one_rank_is_the_serial_iccg(name, ordering, colors, workdir):
    """On one rank the internal block is the whole matrix: bjacobi-ic0 is ICCG, the same ordering
    (colors) and the same iterations (the same operations up to the order of the dot products'
    sums; on this mesh the counts are equal)."""
    s = summary(workdir, name, "1", "bjacobi-ic0 1", f"{ordering} {colors or 0}")
    ref = serial_iccg(ordering, colors)
    assert (s["precond"], s["sweeps"], s["ordering"]) == ("bjacobi-ic0", 1, ordering)
    assert s["colors"] == (ref["colors"], ref["colors"])
    assert s["iterations"] == ref["iterations"], (s["iterations"], ref["iterations"])
    assert s["halo_exchanges_per_iteration"] == 1
    assert s["error"] <= 1e-8 * max(1.0, abs(s["t_max_exact"]))


# --- 2 and 4 ranks: the localized IC(0) and the additive Schwarz sweeps ---------------------------

@pytest.mark.parametrize("partition", ["2-blocks", "2-metis", "4-blocks", "4-metis"])
@pytest.mark.parametrize("name", PROGRAMS)
def test_sweeps_win_back_the_cut_couplings(name, partition, workdir):
    """bjacobi-ic0 drops the couplings between the ranks: more iterations than on one rank.
    asdd-ic0 K corrects with the residual of the whole local rows (K-1 halo exchanges in M^-1):
    fewer iterations than bjacobi-ic0 on the same partition, K exchanges per pcg iteration."""
    one = summary(workdir, name, "1", "bjacobi-ic0 1")
    block = summary(workdir, name, partition, "bjacobi-ic0 1")
    assert block["iterations"] > one["iterations"], (block["iterations"], one["iterations"])
    assert block["halo_exchanges_per_iteration"] == 1
    assert block["colors"] == (1, 1)
    for k in (2, 3):
        asdd = summary(workdir, name, partition, f"asdd-ic0 {k}")
        assert (asdd["precond"], asdd["sweeps"], asdd["ordering"]) == ("asdd-ic0", k, "natural")
        assert asdd["iterations"] < block["iterations"], (k, asdd["iterations"],
                                                          block["iterations"])
        assert asdd["halo_exchanges_per_iteration"] == k
        assert asdd["reductions_per_iteration"] == 2
        assert asdd["t_max"] == pytest.approx(block["t_max"], rel=1e-9)


@pytest.mark.parametrize("partition", ["2-metis", "4-blocks"])
@pytest.mark.parametrize("name", PROGRAMS)
def test_asdd_one_sweep_is_bjacobi(name, partition, workdir):
    """asdd-ic0 1 makes no sweep after z = B r: bjacobi-ic0 exactly, with a colored ordering too;
    the colors MIN..MAX are those of the ranks' blocks."""
    one_sweep = summary(workdir, name, partition, "asdd-ic0 1", "cm-rcm 3")
    block = summary(workdir, name, partition, "bjacobi-ic0 1", "cm-rcm 3")
    assert one_sweep["iterations"] == block["iterations"]
    assert one_sweep["relres"] == block["relres"]
    assert one_sweep["halo_exchanges_per_iteration"] == block["halo_exchanges_per_iteration"] == 1
    low, high = block["colors"]
    assert 3 <= low <= high, block["colors"]


# every variant applies M^-1 once per iteration and A once (pcg: M^-1 r and A p;
# chronopoulos-gear: M^-1 r and A u; gropp: M^-1 s and A u; pipelined: M^-1 w and A m): the K-1
# exchanges of asdd-ic0 K plus the one of A, K in every variant
# (one partition: the variants with 2 threads per rank run below, on another)
@pytest.mark.parametrize("partition, precond, ordering", [("4-blocks", "asdd-ic0 3", "cm-rcm 3")])
@pytest.mark.parametrize("algorithm", ALGORITHMS)
@pytest.mark.parametrize("name", PROGRAMS)
def test_every_variant_takes_the_preconditioner(name, algorithm, partition, precond, ordering,
                                                workdir):
    s = summary(workdir, name, partition, precond, ordering, algorithm)
    pcg = summary(workdir, name, partition, precond, ordering, "pcg")
    k = int(precond.split()[1])
    assert s["halo_exchanges_per_iteration"] == k
    assert s["reductions_per_iteration"] == PROMISED[algorithm]
    assert (s["precond"], s["sweeps"]) == ("asdd-ic0", k)
    assert abs(s["iterations"] - pcg["iterations"]) <= 3, (s["iterations"], pcg["iterations"])
    assert s["true_relres"] <= 10 * EPS
    assert s["t_max"] == pytest.approx(pcg["t_max"], rel=1e-9)
    scale = max(1.0, abs(s["t_max_exact"]))
    assert s["error"] <= 1e-8 * scale
    assert abs(s["error"] - pcg["error"]) <= 1e-9 * scale, (s["error"], pcg["error"])


# --- bad lines 8 and 9 ----------------------------------------------------------------------------

# id -> (partition, line 8, line 9, line number of the message, texts in the message)
BAD_LINES = {
    "unknown-precond": ("2-blocks", "ilu0 1", None, 8, ("unknown preconditioner 'ilu0'",)),
    "sweeps-zero": ("2-metis", "asdd-ic0 0", None, 8, ("SWEEPS", "0")),
    "sweeps-with-bjacobi": ("2-blocks", "bjacobi-ic0 2", None, 8,
                            ("sweeps are for asdd-ic0",)),
    "sweeps-with-diagonal": ("1", "diagonal 3", None, 8, ("sweeps are for asdd-ic0",)),
    "sweeps-missing": ("1", "asdd-ic0", None, 8, ("SWEEPS",)),
    "unknown-ordering": ("2-blocks", "asdd-ic0 2", "metis 0", 9, ("unknown ordering 'metis'",)),
    "mc-colors-zero": ("4-blocks", "bjacobi-ic0 1", "mc 0", 9, ("COLORS", "0", "mc")),
    "cm-rcm-colors-one": ("2-blocks", "asdd-ic0 2", "cm-rcm 1", 9, ("COLORS", "1", "cm-rcm")),
    "natural-with-colors": ("2-blocks", "asdd-ic0 2", "natural 4", 9, ("COLORS", "4")),
    "ordering-with-diagonal": ("2-metis", "diagonal 1", "rcm 0", 9,
                               ("the ordering is for the IC(0) preconditioners",)),
    # blocks 2 x 2 x 1 of 9 x 8 x 7 nodes: ranks 0 and 2 own 112 nodes, 1 and 3 own 140; the
    # lowest failing rank speaks
    "colors-exceed-internal-nodes": ("4-blocks", "asdd-ic0 2", "mc 113", 9,
                                     ("colors 113 exceed the 112 internal nodes of rank 0",)),
}


@pytest.mark.parametrize("case_id", list(BAD_LINES))
@pytest.mark.parametrize("name", PROGRAMS)
def test_bad_lines_8_and_9(name, case_id, workdir):
    """One line from one rank, naming the file and the line, exit status 2, nothing printed."""
    partition, precond, ordering, line, texts = BAD_LINES[case_id]
    path = workdir / f"bad-{name}-{case_id}.dat"
    path.write_text(input_text(partition, precond, ordering))
    result = mpiexec(RANKS[partition], name, path.name, cwd=workdir)
    assert_one_error(result, name, f"{name}: {path.name}:{line}: ", *texts)
    assert result.stdout == ""


# --- threads per rank: hybrid MPI + OpenMP --------------------------------------------------------

# (line 8, line 9) of the thread cases: Jacobi, the localized IC(0) with colored sweeps (an
# `omp for` per color), the additive Schwarz sweeps (halo exchanges of the master inside M^-1)
THREAD_CASES = [("diagonal 1", None), ("bjacobi-ic0 1", "cm-rcm 3"), ("asdd-ic0 2", "mc 3")]


def scale(s: dict) -> float:
    return max(1.0, abs(s["t_max_exact"]))


@pytest.mark.parametrize("partition", ["1", "2-blocks"])
@pytest.mark.parametrize("precond, ordering", THREAD_CASES)
@pytest.mark.parametrize("name", PROGRAMS)
def test_two_threads_take_the_iterations_of_one(name, precond, ordering, partition, workdir):
    """1 rank x 2 threads and 2 ranks x 2 threads against the same layouts with one thread: the
    matrix has the same bits (every entry gets its elements color by color, whatever thread adds
    them), the preconditioner computes every row alike (colored sweeps), only the dot products'
    sums are split into other shares: the same iterations and the same residuals (printed to 4
    digits: equal, which is tighter than 1e-12 relative). Not so with diagonal: on this model
    problem Jacobi-CG ends in 11 iterations with a residual at the rounding level (3e-11 of
    ||b||), which any other order of the sums changes by a few percent: one thread on 1 and on 2
    ranks gives 3.124e-11 and 3.209e-11, 2 threads 3.143e-11 and 3.100e-11. There the residuals
    agree to 10 % only (the iterations are still equal)."""
    one = summary(workdir, name, partition, precond, ordering, threads=1)
    two = summary(workdir, name, partition, precond, ordering, threads=2)
    assert (one["threads"], two["threads"]) == (1, 2)
    assert two["iterations"] == one["iterations"], (two["iterations"], one["iterations"])
    rel = 0.1 if precond == "diagonal 1" else 1e-12
    assert two["relres"] == pytest.approx(one["relres"], rel=rel)
    assert two["true_relres"] == pytest.approx(one["true_relres"], rel=rel)
    assert two["colors"] == one["colors"]
    assert two["halo_exchanges_per_iteration"] == one["halo_exchanges_per_iteration"]
    assert two["t_max"] == pytest.approx(one["t_max"], rel=1e-9)


@pytest.mark.parametrize("algorithm", ALGORITHMS)
@pytest.mark.parametrize("name", PROGRAMS)
def test_every_variant_with_two_threads(name, algorithm, workdir):
    """Each variant with asdd-ic0 on 2 ranks x 2 threads, non-blocking sums (in gropp and
    pipelined the master holds the MPI_Iallreduce while the team applies M^-1 and A, halo
    exchanges included): the solution of one thread per rank, the counts of every iteration."""
    s = summary(workdir, name, "2-blocks", "asdd-ic0 2", "mc 3", algorithm, "iallreduce",
                threads=2)
    ref = summary(workdir, name, "2-blocks", "asdd-ic0 2", "mc 3", threads=1)
    assert s["threads"] == 2 and s["reductions"] == "iallreduce"
    assert s["reductions_per_iteration"] == PROMISED[algorithm]
    assert s["halo_exchanges_per_iteration"] == 2
    assert abs(s["iterations"] - ref["iterations"]) <= 3, (s["iterations"], ref["iterations"])
    assert s["true_relres"] <= 10 * EPS
    assert s["error"] <= 1e-8 * scale(s)
    assert s["t_max"] == pytest.approx(ref["t_max"], rel=1e-9)


@pytest.mark.parametrize("name", PROGRAMS)
def test_two_threads_twice_the_same_bits(name, workdir):
    """The dot products are summed share by share in thread order over static shares of the rows
    (not in whatever order or shares the threads happen to take): three runs of 2 ranks x 2
    threads give the same summary (but the time of the solve) and the same temperatures to the
    last printed digit (%.15g) at every node of every piece of the .pvtu output. The ranks are not bound to a core each (Open
    MPI's default for 2 ranks), so that the 4 threads run at once on the 2 cores and their
    timing varies from run to run (they spin only briefly at a barrier before they sleep:
    GOMP_SPINCOUNT, 4 threads on 2 cores). With two threads the order of the two shares cannot
    matter (a + b == b + a); what this catches is shares that depend on the timing: with the
    dot products' loop on schedule(dynamic, 4) it failed in 4 runs of 4."""
    path = workdir / f"twice-{name}.dat"
    path.write_text(input_text("2-blocks", "asdd-ic0 2", "cm-rcm 3"))
    runs = []
    for run_id in (1, 2, 3):
        folder = workdir / f"twice-{name}-{run_id}"
        folder.mkdir(exist_ok=True)
        result = mpiexec(2, name, f"../{path.name}", "pipelined", "iallreduce", "out.pvtu",
                         cwd=folder, threads=2,
                         extra_env={"OMPI_MCA_hwloc_base_binding_policy": "none",
                                    "GOMP_SPINCOUNT": "1000"})
        assert result.returncode == 0, result.stdout + result.stderr
        assert solver_lines(result.stdout.splitlines())["threads"] == 2
        pieces = [(folder / f"out_{rank}.vtu").read_text() for rank in range(2)]
        runs.append((untimed(result.stdout), pieces))
    assert runs[1] == runs[0]
    assert runs[2] == runs[0]


@pytest.mark.parametrize("precond, ordering", THREAD_CASES[1:])
def test_c_and_fortran_agree_with_two_threads(precond, ordering, workdir):
    """The twins on 2 ranks x 2 threads: iterations within 1, the same colors and exchanges."""
    c, f = (summary(workdir, name, "2-blocks", precond, ordering, threads=2) for name in PROGRAMS)
    assert (c["threads"], f["threads"]) == (2, 2)
    assert abs(c["iterations"] - f["iterations"]) <= 1, (c["iterations"], f["iterations"])
    assert c["colors"] == f["colors"]
    assert c["halo_exchanges_per_iteration"] == f["halo_exchanges_per_iteration"]
    assert c["t_max"] == pytest.approx(f["t_max"], rel=1e-9)


# --- the MPI thread level -------------------------------------------------------------------------

@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("name", PROGRAMS)
def test_thread_level_is_at_least_funneled(name, threads, workdir):
    """MPI_Init_thread asks for FUNNELED; the library provides it or more (else the program stops
    with status 2): the line before the time of the solve says which, and the OpenMP threads of every
    rank (OMP_NUM_THREADS)."""
    result = run_case(workdir, name, "2-blocks", "asdd-ic0 2", threads=threads)
    last = result.stdout.splitlines()[SUMMARY_LINES - 2]
    assert last in {f"  MPI thread level asked FUNNELED, provided {level}; OpenMP threads per "
                    f"rank {threads}" for level in ("FUNNELED", "SERIALIZED", "MULTIPLE")}, last


# --- Python: the same preconditioners through `python -m course solve fem3d --parallel` ---------

PYTHON_PARTITION = {"2-blocks": ("--partition", "blocks", "--px", "2", "--py", "1", "--pz", "1"),
                    "4-metis": ("--partition", "metis")}


@cache
def python_summary(partition: str, precond: str, sweeps: int, ordering: str, colors: int,
                   threads: int = 1):
    words = ["--ordering", ordering] + (["--colors", str(colors)] if colors else [])
    words += ["--threads", str(threads)]
    result = run(["mpiexec", "-n", RANKS[partition], PYTHON, "-m", "course", "solve", "fem3d",
                  "--nx", NEL[0], "--ny", NEL[1], "--nz", NEL[2], "--dx", SIZE[0], "--dy",
                  SIZE[1], "--dz", SIZE[2], "--cond", COND, "--qvol", QVOL, "--qflux", QFLUX,
                  "--fixed-face", FACE, "--tol", EPS, "--lang", "c", "--parallel",
                  *PYTHON_PARTITION[partition], "--precond", precond, *words, "--json"]
                 + (["--asdd-sweeps", str(sweeps)] if precond == "asdd-ic0" else []),
                 timeout=200, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


@pytest.mark.parametrize("partition, precond, sweeps, ordering, colors, threads", [
    ("2-blocks", "bjacobi-ic0", 1, "natural", 0, 1), ("2-blocks", "asdd-ic0", 3, "cm-rcm", 3, 1),
    ("4-metis", "asdd-ic0", 2, "mc", 3, 1), ("2-blocks", "bjacobi-ic0", 1, "natural", 0, 2),
    ("2-blocks", "asdd-ic0", 3, "cm-rcm", 3, 2)])
@pytest.mark.parametrize("name", PROGRAMS)
def test_python_agrees(name, partition, precond, sweeps, ordering, colors, threads, workdir):
    """The programs and course.parallel.precond (the reference) take the same iterations (within
    1), colors and counted exchanges; METIS's parts are the same (course partition's files and
    the Python solve's rule both cut the node graph). With 2 threads per rank too (the Python
    solve's --threads: its local products on the OpenMP kernels of --lang c)."""
    s = summary(workdir, name, partition, f"{precond} {sweeps}", f"{ordering} {colors}",
                threads=threads)
    py = python_summary(partition, precond, sweeps, ordering, colors, threads)
    assert s["threads"] == py["threads_per_rank"] == threads
    assert abs(s["iterations"] - py["iterations"]) <= 1, (s["iterations"], py["iterations"])
    assert s["colors"] == (min(py["colors_per_rank"]), max(py["colors_per_rank"]))
    assert s["halo_exchanges_per_iteration"] == py["halo_exchanges_per_iteration"] == sweeps
    assert max(s["error"], py["error_max"]) <= 1e-8 * max(1.0, abs(s["t_max_exact"]))


# --- data races: the whole program under ThreadSanitizer with Archer ------------------------------

# fem3d_mpi_c's sources (src_c/CMakeLists.txt: the program, the library course_halo_c and the
# kernels of libcourse_c that it calls), compiled into one executable under ThreadSanitizer
TSAN_SOURCES = ("05_halo/fem3d_mpi_main.c", "05_halo/local_data.c", "05_halo/halo.c",
                "06_pipecg/cg_mpi.c", "08_hybrid/precond_mpi.c", "04_iccg/ic0.c",
                "04_iccg/ordering.c", "common/crs.c", "common/cg.c", "02_fem3d/fem3d.c",
                "02_fem3d/fem3d_problem.c", "common/input.c")
TSAN_INCLUDES = ("include", "common", "02_fem3d", "04_iccg", "05_halo", "06_pipecg", "08_hybrid")
TSAN_FRAME = re.compile(r"^\s+#\d+ \S+ (\S+?):(\d+)(?::\d+)? \(")
# fem3d_mpi_f's sources (src_fortran/CMakeLists.txt: the program, course_halo_fortran, the kernels
# of libcourse_fortran that it calls, the input libraries), each after the modules it uses
TSAN_FORTRAN_SOURCES = ("common/cformat.f90", "common/input.f90", "common/crs.f90",
                        "common/cg.f90", "02_fem3d/fem3d.f90", "02_fem3d/fem3d_problem.f90",
                        "04_iccg/ordering.f90", "04_iccg/ic0.f90", "05_halo/halo.f90",
                        "08_hybrid/precond_mpi.f90", "06_pipecg/cg_mpi.f90",
                        "05_halo/local_data.f90", "05_halo/fem3d_mpi_main.f90")
# the barrier after the master's halo exchange in A v (cg_mpi.c's and cg_mpi.f90's exchange):
# program -> (source, the text that ends with the barrier, the barrier's line)
EXCHANGE_BARRIER = {
    "fem3d_mpi_c": ("06_pipecg/cg_mpi.c",
                    "        c->team->exchanges++;\n    }\n#pragma omp barrier\n",
                    "#pragma omp barrier\n"),
    "fem3d_mpi_f": ("06_pipecg/cg_mpi.f90",
                    "        exchanges = exchanges + 1\n        !$omp end master\n"
                    "        !$omp barrier\n    end subroutine exchange\n",
                    "        !$omp barrier\n"),
}


def tsan_tools() -> race_check.Tools:
    """The tools of course.grading.race_check (clang, LLVM's libomp with Archer, TSan's runtime,
    proven there to work together) and an mpicc, or skip, naming what is missing."""
    if native.default_variant() == "sanitize":
        pytest.skip("the sanitizer rerun preloads ASan, which TSan cannot run beside")
    if shutil.which("mpicc") is None:
        pytest.skip("no mpicc")
    try:
        return race_check.tools()
    except race_check.RaceCheckUnavailable as err:
        pytest.skip(str(err).splitlines()[0])


def build_tsan(folder: Path, name: str,
               replace: dict[str, str] | None = None) -> tuple[Path, set[Path]]:
    """The program `name` under ThreadSanitizer (build_tsan_c, build_tsan_fortran)."""
    build = build_tsan_c if name == "fem3d_mpi_c" else build_tsan_fortran
    return build(folder, replace)


def tsan_sources(folder: Path, lang_folder: str, names, replace: dict[str, str] | None):
    """The paths of the sources `names` under src_c or src_fortran (lang_folder); replace: {source:
    text} writes that text into folder instead, and that copy takes the source's place."""
    paths = []
    for name in names:
        path = ROOT / lang_folder / name
        if replace and name in replace:
            path = folder / Path(name).name
            path.write_text(replace[name])
        paths.append(path.resolve())
    return paths


def build_tsan_c(folder: Path, replace: dict[str, str] | None = None) -> tuple[Path, set[Path]]:
    """fem3d_mpi_c built by clang through the MPI library's mpicc (OMPI_CC, MPICH_CC) with
    -fsanitize=thread -g and -fopenmp, which with clang links LLVM's libomp (the rpath makes it
    the one of race_check's folder, where Archer is: TSan alone does not know OpenMP's barriers,
    and GCC's libgomp would show races that are not there). replace: {source: text} compiles
    that text in place of the file (a broken copy). Returns the program and its sources."""
    t = tsan_tools()
    sources = set(tsan_sources(folder, "src_c", TSAN_SOURCES, replace))
    exe = folder / "fem3d_mpi_tsan"
    command = (["mpicc", "-std=c99", "-g", "-O1", "-fno-omit-frame-pointer", "-fsanitize=thread",
                "-fopenmp"] + [f"-I{ROOT / 'src_c' / d}" for d in TSAN_INCLUDES]
               + sorted(map(str, sources))
               + ["-o", str(exe), f"-L{t.libdir}", f"-Wl,-rpath,{t.libdir}", "-lm"])
    built = run(command, env=env_with(OMPI_CC=t.clang, MPICH_CC=t.clang), timeout=300)
    assert built.returncode == 0, built.stdout + built.stderr
    return exe, sources


def mpif90_flags(kind: str) -> list[str]:
    """What Open MPI's mpif90 adds to gfortran's command line to compile (kind "compile": the
    folder of the mpi_f08 module) or to link (kind "link": the MPI libraries), or skip."""
    if shutil.which("mpif90") is None or shutil.which("gfortran") is None:
        pytest.skip("no mpif90 or gfortran")
    shown = run(["mpif90", f"--showme:{kind}"])
    if shown.returncode != 0:
        pytest.skip("mpif90 has no --showme (Open MPI's): the flags of the MPI library unknown")
    return shlex.split(shown.stdout)


def build_tsan_fortran(folder: Path,
                       replace: dict[str, str] | None = None) -> tuple[Path, set[Path]]:
    """fem3d_mpi_f with ThreadSanitizer: every source compiled by gfortran with -fsanitize=thread
    -g and -fopenmp and the MPI library's flags (mpif90 --showme:compile), after the modules it
    uses (their .mod files in folder), then linked by clang with -fsanitize=thread and -fopenmp:
    LLVM's libomp of race_check's folder, where Archer is (its GOMP_ entry points take the calls
    that gfortran makes), the MPI library's Fortran libraries (mpif90 --showme:link) and
    libgfortran. replace as in build_tsan_c. Returns the program and its sources."""
    t = tsan_tools()
    compile_flags, link_flags = mpif90_flags("compile"), mpif90_flags("link")
    sources = tsan_sources(folder, "src_fortran", TSAN_FORTRAN_SOURCES, replace)
    objects = []
    for source in sources:
        objects.append(folder / f"{source.stem}.o")
        built = run(["gfortran", "-g", "-O1", "-fno-omit-frame-pointer", "-fsanitize=thread",
                     "-fopenmp", *compile_flags, "-J", folder, "-c", source, "-o", objects[-1]],
                    cwd=folder, timeout=300)
        assert built.returncode == 0, built.stdout + built.stderr
    exe = folder / "fem3d_mpi_tsan"
    built = run([t.clang, "-fsanitize=thread", "-fopenmp", *objects, "-o", exe, f"-L{t.libdir}",
                 f"-Wl,-rpath,{t.libdir}", *link_flags, "-lgfortran", "-lm"], timeout=300)
    assert built.returncode == 0, built.stdout + built.stderr
    return exe, set(sources)


def run_tsan(exe: Path, folder: Path, *words, halt: bool = False) -> subprocess.CompletedProcess:
    """2 ranks x 2 threads on the model problem, asdd-ic0 2 with cm-rcm 3, under TSan + Archer
    (race_check's environment: Archer as the OpenMP tool, TSan's exit status 66 on a report;
    halt: stop at the first report). Open MPI is not instrumented:
    ignore_noninstrumented_modules=1 (in that environment) keeps TSan from reporting accesses
    inside it, so no suppressions file is needed."""
    tsan_tools()
    (folder / "input.dat").write_text(input_text("2-blocks", "asdd-ic0 2", "cm-rcm 3"))
    env = {**race_check._tsan_env(race_check.tools(), 2), **toolchain.mpi_env(),
           "MPIEXEC_TIMEOUT": "200"}
    if halt:
        env["TSAN_OPTIONS"] += " halt_on_error=1"
    return race_check._run_tsan(["mpiexec", "-n", "2", str(exe), "input.dat", *words], env,
                                timeout=240, cwd=folder)


def races_in(stderr: str, sources: set[Path]) -> list[str]:
    """TSan's reports with a stack frame in one of `sources`: each as its warning and those
    frames (file:line)."""
    races = []
    for block in re.split(r"^==================\s*$", stderr, flags=re.M):
        lines = block.strip().splitlines()
        if not lines or "WARNING: ThreadSanitizer" not in lines[0]:
            continue
        frames = [f"{Path(m[1]).name}:{m[2]}" for m in map(TSAN_FRAME.match, lines)
                  if m and Path(m[1]).resolve() in sources]
        if frames:
            races.append(f"{lines[0]} at {', '.join(dict.fromkeys(frames))}")
    return races


@pytest.fixture(scope="module")
def tsan_programs(tmp_path_factory):
    """program name -> (its TSan build, its sources), each built once, when a test first asks."""
    built = {}

    def program(name: str) -> tuple[Path, set[Path]]:
        if name not in built:
            built[name] = build_tsan(tmp_path_factory.mktemp(f"tsan-{name}"), name)
        return built[name]
    return program


@pytest.mark.parametrize("words", [("pcg", "blocking"), ("gropp", "iallreduce"),
                                   ("pipelined", "iallreduce")], ids=" ".join)
@pytest.mark.parametrize("name", PROGRAMS)
def test_no_data_race_with_two_threads(tsan_programs, name, words, tmp_path):
    """ThreadSanitizer (happens-before: two unordered accesses, one a write, are reported in
    every run, whatever the timing) sees no race in the course's sources: the assembly by element
    colors, the team's solve, the halo exchanges and global sums of the master thread, the
    colored IC(0) sweeps and the Schwarz sweeps."""
    exe, sources = tsan_programs(name)
    result = run_tsan(exe, tmp_path, *words)
    output = result.stdout + result.stderr
    assert "Archer detected OpenMP application with TSan" in output, output[-3000:]
    assert not races_in(result.stderr, sources), "\n".join(races_in(result.stderr, sources))
    assert result.returncode == 0, output[-3000:]
    lines = [line for line in result.stdout.splitlines() if not line.startswith("Archer")]
    assert len(lines) == SUMMARY_LINES, lines
    assert lines[2].endswith("(converged)"), lines[2]
    assert solver_lines(lines)["threads"] == 2


@pytest.mark.parametrize("name", PROGRAMS)
def test_race_check_sees_a_missing_barrier(name, tmp_path):
    """The check can fail: without the barrier after the master's halo exchange in A v, the other
    threads read the external entries of v while the master unpacks them (halo.c, halo.f90) into
    them."""
    source, text, barrier = EXCHANGE_BARRIER[name]
    lang_folder = "src_c" if source.endswith(".c") else "src_fortran"
    original = (ROOT / lang_folder / source).read_text()
    assert original.count(text) == 1
    broken = original.replace(text, text.replace(barrier, ""))
    exe, sources = build_tsan(tmp_path, name, {source: broken})
    result = run_tsan(exe, tmp_path, "pcg", halt=True)
    races = races_in(result.stderr, sources)
    halo, cg = (f"halo{Path(source).suffix}:", f"cg_mpi{Path(source).suffix}:")
    assert any(halo in race and cg in race for race in races), result.stderr[-3000:]
    assert result.returncode != 0


# --- course.parallel.mpi_job.run_fem3d_mpi: the runner of bench hybrid (and of bench petsc) ---

@pytest.mark.parametrize("lang", ["c", "fortran"])
def test_run_fem3d_mpi_reads_the_programs_summary(lang):
    """One run with 2 ranks x 2 threads, the colored IC(0) and 2 sweeps: the dict holds what the
    program printed (the same iterations as a second run with one thread: the colored ordering,
    not the threads, sets them), and a bad input is one RuntimeError with the program's line."""
    from course.parallel.mpi_job import run_fem3d_mpi
    out = run_fem3d_mpi(lang, 8, 2, "asdd-ic0", 2, threads=2, ordering="cm-rcm", colors=3,
                        timeout=120)
    assert out["program"] == f"fem3d_mpi_{lang[0]}" and out["converged"]
    assert out["unknowns"] == 9 ** 3 and out["nnz"] > 20 * out["unknowns"]
    assert out["halo_exchanges_per_iteration"] == 2 and out["reductions_per_iteration"] == 2
    assert out["threads_per_rank"] == 2 and out["mpi_thread_level"] in ("FUNNELED", "SERIALIZED",
                                                                       "MULTIPLE")
    assert 3 <= out["colors_per_rank"][0] <= out["colors_per_rank"][1]
    assert out["seconds"] > 0 and out["us_per_iteration"] == pytest.approx(
        1e6 * out["seconds"] / out["iterations"], rel=1e-3, abs=0.01)
    one = run_fem3d_mpi(lang, 8, 2, "asdd-ic0", 2, threads=1, ordering="cm-rcm", colors=3,
                        timeout=120)
    assert one["iterations"] == out["iterations"] and one["threads_per_rank"] == 1
    with pytest.raises(RuntimeError, match="SWEEPS = 2 with diagonal"):
        run_fem3d_mpi(lang, 8, 2, "diagonal", 2, timeout=120)
    with pytest.raises(ValueError, match="lang must be c or fortran"):
        run_fem3d_mpi("python", 8, 2, "diagonal")
