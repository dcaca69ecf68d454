"""PETSc as the course hands its matrices to it (course.parallel.petsc, lecture 09_petsc): the
serial CRS and, under mpiexec, each rank's own rows of the distributed matrix, solved by PETSc's
twin of every course choice with the course's stopping rule, take exactly the course's iterations
and reach its solution: the four CG variants with Jacobi, localized IC(0) (bjacobi + icc) and
additive Schwarz sweeps (a Richardson inner solve), on 1, 2 and 3 ranks. The options of each twin;
a missing petsc4py says how to install it; more rows than 32-bit indices are refused.
`solve --parallel --engine petsc` reports the course's fields from PETSc's solve: the same
iterations and checksum as the course's engine on 2 ranks; options without a twin, the engine
without --parallel, and a missing petsc4py are one line and exit 2.

The C and Fortran programs petsc_solve_c and petsc_solve_f read the system the course saves and
take the same options on their command line: the course's iterations with Jacobi and IC(0) on 1
rank, C's on 2 ranks, and one line and exit 2 on every rank for a missing file, a file of another
kind, an option PETSc does not know or a misspelt one.

`make setup-test` installs PETSc and petsc4py (scripts/setup.sh): these tests do not skip without
them."""

from __future__ import annotations

import json
import shutil
import sys

import numpy as np
import pytest
import scipy.sparse

from conftest import PYTHON, ROOT, assert_one_error, env_with, run
from course.fem import fvm
from course.parallel import petsc
from course.solvers import ALGORITHMS, iccg, krylov

TOL = 1e-8


@pytest.fixture(scope="module")
def poisson():
    """The 03_openmp Poisson matrix on 12 x 10 x 8 cells, a random right-hand side, PETSc's copy."""
    a = fvm.poisson(12, 10, 8, lang="numpy", fmt="crs").full_crs()
    b = np.random.default_rng(1).standard_normal(a.n)
    return a, b, petsc.crs_mat(a)


def course_preconditioner(a, name: str, sweeps: int):
    """The course's M^-1 on one process: Jacobi, IC(0) (natural order), or K sweeps around it."""
    matrix = scipy.sparse.csr_matrix((a.val, a.col_idx, a.row_ptr), shape=(a.n, a.n))
    if name == "diagonal":
        return lambda r: r / matrix.diagonal()
    factor = iccg.ic0(iccg.split(a), "numba")
    colors = np.array([0, a.n], dtype=np.int32)

    def sweep(r):
        z = iccg.ic0_apply(factor, r, colors, "numba")
        for _ in range(sweeps - 1):
            z = z + iccg.ic0_apply(factor, r - matrix @ z, colors, "numba")
        return z
    return sweep


@pytest.mark.parametrize("algorithm, precond, sweeps",
                         [(a, "diagonal", 1) for a in ALGORITHMS] +
                         [("pcg", "bjacobi-ic0", 1), ("pipelined", "bjacobi-ic0", 1),
                          ("pcg", "asdd-ic0", 2), ("pcg", "asdd-ic0", 3)])
def test_the_serial_twin_takes_the_course_iterations(poisson, algorithm, precond, sweeps):
    a, b, mat = poisson
    matrix = scipy.sparse.csr_matrix((a.val, a.col_idx, a.row_ptr), shape=(a.n, a.n))
    ours = krylov(lambda v: matrix @ v, b, course_preconditioner(a, precond, sweeps),
                  algorithm=algorithm, tol=TOL)
    theirs = petsc.solve(mat, b, algorithm=algorithm, precond=precond,
                         sweeps=sweeps if precond == "asdd-ic0" else None, tol=TOL)
    assert theirs["converged"] and theirs["iterations"] == ours.iterations, \
        (theirs["iterations"], ours.iterations, theirs["options"])
    assert theirs["relative_residual"] <= TOL
    np.testing.assert_allclose(theirs["x"], ours.x, rtol=0, atol=1e-9 * np.abs(ours.x).max())


# reductions per iteration, counted in PETSc's log: its cg computes the unpreconditioned norm in
# a reduction of its own (the course's pcg fuses it with (r, z)), so cg needs 3 and cg with a
# single reduction 2; Gropp's two and the pipelined one carry the norm along
PETSC_REDUCTIONS = {"pcg": 3, "chronopoulos-gear": 2, "gropp": 2, "pipelined": 1}


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_petsc_log_counts_the_reductions(poisson, algorithm):
    a, b, mat = poisson
    out = petsc.solve(mat, b, algorithm=algorithm, precond="bjacobi-ic0", tol=TOL)
    before_the_loop = out["reductions"] - PETSC_REDUCTIONS[algorithm] * out["iterations"]
    assert 0 <= before_the_loop <= 4, (out["reductions"], out["iterations"])


@pytest.mark.parametrize("precond", ["gamg", "boomeramg"])
def test_algebraic_multigrid_needs_a_few_iterations(poisson, precond):
    """What comes next: PETSc's and hypre's AMG solve the problem in a small fraction of the
    iterations of the course's preconditioners (lecture 09 measures how the counts grow)."""
    a, b, mat = poisson
    amg = petsc.solve(mat, b, precond=precond, tol=TOL)
    ic0 = petsc.solve(mat, b, precond="bjacobi-ic0", tol=TOL)
    assert amg["converged"] and amg["iterations"] * 2 < ic0["iterations"], (amg, ic0)
    assert amg["relative_residual"] <= TOL


def test_petsc_watches_the_preconditioned_norm_unless_told(poisson):
    """The trap the lecture shows: PETSc's CG stops on ||M^-1 r|| by default, so the same rtol
    stops at another iteration than the course's rule."""
    a, b, mat = poisson
    chosen = petsc.options(precond="bjacobi-ic0", tol=TOL)
    assert chosen["ksp_norm_type"] == "unpreconditioned" and chosen["ksp_atol"] == "0"
    PETSc = petsc.petsc()
    ksp = PETSc.KSP().create(comm=PETSc.COMM_SELF)
    ksp.setOperators(mat)
    ksp.setType("cg")
    ksp.getPC().setType("icc")
    ksp.setTolerances(rtol=TOL)
    x, rhs = mat.createVecRight(), mat.createVecLeft()
    rhs.getArray()[:] = b
    ksp.solve(rhs, x)
    default = ksp.getIterationNumber()
    ksp.destroy()
    assert default != petsc.solve(mat, b, precond="bjacobi-ic0", tol=TOL)["iterations"]


def test_the_options_of_each_twin():
    assert petsc.options("pcg", "diagonal", tol=1e-6, max_iter=50) == {
        "ksp_type": "cg", "ksp_norm_type": "unpreconditioned", "ksp_rtol": "9.9999999999999995e-07",
        "ksp_atol": "0", "ksp_max_it": "50", "pc_type": "jacobi"}
    assert petsc.options("chronopoulos-gear")["ksp_cg_single_reduction"] == "1"
    assert petsc.options("gropp")["ksp_type"] == "groppcg"
    assert petsc.options("pipelined")["ksp_type"] == "pipecg"
    assert petsc.options(precond="bjacobi-ic0")["sub_pc_type"] == "icc"
    swept = petsc.options(precond="asdd-ic0", sweeps=3)
    assert (swept["pc_type"], swept["ksp_ksp_type"], swept["ksp_ksp_max_it"],
            swept["ksp_sub_pc_type"]) == ("ksp", "richardson", "3", "icc")
    assert petsc.options(precond="gamg")["pc_type"] == "gamg"
    assert (petsc.options(precond="boomeramg")["pc_type"],
            petsc.options(precond="boomeramg")["pc_hypre_type"]) == ("hypre", "boomeramg")
    with pytest.raises(ValueError, match="sweeps are for asdd-ic0, not for gamg"):
        petsc.options(precond="gamg", sweeps=2)
    with pytest.raises(ValueError, match="cg must be one of"):
        petsc.options("bicgstab")
    with pytest.raises(ValueError, match="sweeps are for asdd-ic0"):
        petsc.options(precond="diagonal", sweeps=2)
    grown = petsc.overlap_options(2)
    assert (grown["pc_type"], grown["pc_asm_type"], grown["pc_asm_overlap"],
            grown["sub_pc_type"]) == ("asm", "basic", "2", "icc")
    assert petsc.overlap_options(0, exact=True)["sub_pc_type"] == "cholesky"
    for bad in (-1, 1.5, True, "2"):
        with pytest.raises(ValueError, match="overlap must be a whole number"):
            petsc.overlap_options(bad)


def test_a_missing_petsc4py_says_how_to_install_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "petsc4py", None)          # import petsc4py fails
    with pytest.raises(petsc.PETScMissing, match="make setup.*conda-forge petsc4py"):
        petsc.petsc()


def test_more_rows_than_32_bit_indices_are_refused():
    class Rows:
        n_rows, row_ptr, col_idx, val = 3, np.array([0, 1, 2, 3]), np.arange(3), np.ones(3)

    class ManyRanks:
        def allreduce(self, n):
            return 2**31
    with pytest.raises(ValueError, match="32-bit indices"):
        petsc.local_mat(Rows, np.arange(3, dtype=np.int32), ManyRanks())


@pytest.mark.skipif(shutil.which("mpiexec") is None, reason="no mpiexec")
@pytest.mark.timeout(300)
@pytest.mark.parametrize("ranks", [1, 3])
def test_the_distributed_twins_under_mpiexec(ranks):
    result = run(["mpiexec", "-n", ranks, PYTHON, "-m", "mpi4py",
                  ROOT / "tests" / "mpi" / "check_petsc.py"], timeout=240, cwd=ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    checks = [line.split(":")[0] for line in result.stdout.splitlines()]
    assert checks == [f"{a} diagonal ok" for a in ALGORITHMS] + \
        ["pcg bjacobi-ic0 ok", "pcg asdd-ic0 ok", "asm overlap ok"], result.stdout


# --- the C and Fortran programs against PETSc ----------------------------------------------------

PETSC_PROGRAMS = [pytest.param(name, marks=pytest.mark.compiled, id=name[-1:])
                  for name in petsc.PROGRAMS]
needs_mpiexec = pytest.mark.skipif(shutil.which("mpiexec") is None, reason="no mpiexec")


@pytest.fixture(scope="module")
def saved_system(tmp_path_factory, poisson):
    a, b, _ = poisson
    path = tmp_path_factory.mktemp("petsc") / "poisson.petsc"
    petsc.save_system(path, a, b)
    return path


@needs_mpiexec
@pytest.mark.timeout(300)
@pytest.mark.parametrize("name", PETSC_PROGRAMS)
def test_the_programs_take_the_course_iterations(poisson, saved_system, name):
    """On one rank, the twin of pcg with Jacobi and with IC(0) (bjacobi of one block) takes the
    course's iterations, to the course's true residual; on 2 ranks (PETSc's own split of the
    rows in halves) the C program's count, and Jacobi's is the same as on one rank."""
    a, b, mat = poisson
    matrix = scipy.sparse.csr_matrix((a.val, a.col_idx, a.row_ptr), shape=(a.n, a.n))
    for precond in ("diagonal", "bjacobi-ic0"):
        ours = krylov(lambda v: matrix @ v, b, course_preconditioner(a, precond, 1), tol=TOL)
        chosen = petsc.options("pcg", precond, tol=TOL)
        one = petsc.run_program(name, saved_system, 1, chosen)
        assert (one["rows"], one["ranks"], one["ksp"], one["norm"]) == (
            a.n, 1, "cg", "UNPRECONDITIONED")
        assert one["converged"] and one["iterations"] == ours.iterations, (precond, one)
        assert one["true_residual"] <= 1.01 * TOL and one["us_per_iteration"] > 0
        two = petsc.run_program(name, saved_system, 2, chosen)
        c_two = petsc.run_program("petsc_solve_c", saved_system, 2, chosen)
        assert two["ranks"] == 2 and two["iterations"] == c_two["iterations"], (two, c_two)
        if precond == "diagonal":
            assert two["iterations"] == ours.iterations


@needs_mpiexec
@pytest.mark.timeout(300)
@pytest.mark.parametrize("name", PETSC_PROGRAMS)
def test_the_programs_take_each_rank_s_rows_from_the_rows_file(poisson, tmp_path, name):
    """With FILE.rows, rank r owns the rows its line says: block Jacobi with a 100-row second
    block takes another count than PETSc's halves, the same in C and Fortran; a file without one
    count per rank is one line and exit 2."""
    a, b, _ = poisson
    chosen = petsc.options("pcg", "bjacobi-ic0", tol=TOL)
    path = tmp_path / "split.petsc"
    petsc.save_system(path, a, b)
    halves = petsc.run_program(name, path, 2, chosen)["iterations"]
    petsc.save_system(path, a, b, rows=[a.n - 100, 100])
    uneven = petsc.run_program(name, path, 2, chosen)["iterations"]
    assert uneven == petsc.run_program("petsc_solve_c", path, 2, chosen)["iterations"]
    assert uneven != halves, (uneven, halves)
    petsc.save_system(path, a, b)                       # no rows: the file is gone
    assert not (tmp_path / "split.petsc.rows").exists()
    (tmp_path / "split.petsc.rows").write_text(f"{a.n}\n0\n0\n")
    with pytest.raises(RuntimeError, match="does not hold one count of rows per rank"):
        petsc.run_program(name, path, 2, chosen)
    with pytest.raises(ValueError, match="one count >= 0 per rank"):
        petsc.save_system(path, a, b, rows=[a.n, 1])


@needs_mpiexec
@pytest.mark.timeout(120)
@pytest.mark.parametrize("name", PETSC_PROGRAMS)
@pytest.mark.parametrize("arguments, text", [
    (("missing.petsc",), "cannot read the system file missing.petsc"),
    (("SYSTEM.info",), "not a PETSc binary file with a matrix and a vector"),
    (("SYSTEM", "-ksp_type", "cgx"), "PETSc refused the options"),
    (("SYSTEM", "-ksp_typo", "cg"), "did not use"),
    ((), "usage: mpiexec -n P petsc_solve_")],
    ids=["missing", "not-petsc", "unknown-type", "misspelt", "usage"])
def test_the_programs_refuse_bad_input(saved_system, name, arguments, text):
    words = [str(saved_system) + w[len("SYSTEM"):] if w.startswith("SYSTEM") else w
             for w in arguments]
    result = run(["mpiexec", "-n", 2, petsc_binary(name), *words], timeout=100,
                 cwd=saved_system.parent, env=env_with(MPIEXEC_TIMEOUT=90))
    assert result.returncode == 2 and result.stdout == "", (result.returncode, result.stdout)
    said = [line for line in result.stderr.splitlines() if line.startswith(f"{name}:")]
    assert len(said) == 1 and text in said[0], result.stderr
    assert "Traceback" not in result.stderr and "[0]PETSC ERROR" not in result.stderr


def petsc_binary(name: str):
    from course import native
    return native.binary(name)


def _solve_json(engine: str, problem: str, *options: str) -> dict:
    result = run(["mpiexec", "-n", 2, PYTHON, "-m", "course", "solve", problem, "--nx", "8",
                  "--ny", "7", "--nz", "6", "--parallel", "--partition", "metis", "--engine",
                  engine, *options, "--json"], timeout=240, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(shutil.which("mpiexec") is None, reason="no mpiexec")
@pytest.mark.timeout(300)
@pytest.mark.parametrize("problem, options", [
    ("poisson", ("--cg", "pipelined", "--precond", "asdd-ic0", "--asdd-sweeps", "2")),
    ("fem3d", ("--cg", "chronopoulos-gear", "--precond", "bjacobi-ic0"))])
def test_the_petsc_engine_on_the_command_line(problem, options):
    ours, theirs = (_solve_json(engine, problem, *options) for engine in ("course", "petsc"))
    assert (ours["engine"], theirs["engine"]) == ("course", "petsc")
    assert theirs["iterations"] == ours["iterations"] and theirs["converged"]
    assert theirs["precond"] == ours["precond"] and theirs["algorithm"] == ours["algorithm"]
    assert theirs["reductions_per_iteration"] == PETSC_REDUCTIONS[theirs["algorithm"]]
    if problem == "poisson":
        assert abs(theirs["checksum"] - ours["checksum"]) <= 1e-7 * abs(ours["checksum"])
        assert "-ksp_type pipecg" in theirs["petsc_options"]
    else:
        assert abs(theirs["t_max"] - ours["t_max"]) <= 1e-7 * abs(ours["t_max"])
        assert "-ksp_cg_single_reduction 1" in theirs["petsc_options"]


@pytest.mark.parametrize("options, name, by_course", [
    (("--engine", "petsc"), "--engine needs --parallel", True),
    (("--parallel", "--engine", "petsc", "--iallreduce"), "no twin for --iallreduce", True),
    (("--parallel", "--engine", "petsc", "--precond", "bjacobi-ic0", "--ordering", "rcm"),
     "no twin for --ordering", True),
    (("--parallel", "--engine", "fenics"), "--engine", False),
    (("--parallel", "--precond", "gamg"), "needs --parallel --engine petsc", True),
    (("--precond", "boomeramg"), "needs --parallel --engine petsc", True),
])
def test_the_petsc_engine_refuses(options, name, by_course):
    result = run([PYTHON, "-m", "course", "solve", "poisson", "--nx", "6", "--ny", "5", "--nz",
                  "4", *options], timeout=120, cwd=ROOT)
    assert_one_error(result, name, by_course)


def test_the_petsc_engine_without_petsc4py(tmp_path):
    """A petsc4py that does not import (here: one that raises, first on the path) is one line
    that says how to install it."""
    (tmp_path / "petsc4py").mkdir()
    (tmp_path / "petsc4py" / "__init__.py").write_text("raise ImportError('not built here')\n")
    result = run([PYTHON, "-m", "course", "solve", "poisson", "--nx", "6", "--ny", "5", "--nz",
                  "4", "--parallel", "--engine", "petsc"], timeout=120, cwd=ROOT,
                 env=env_with(PYTHONPATH=tmp_path))
    assert_one_error(result, "petsc4py is not installed", True)


@pytest.mark.parametrize("name", ["09_petsc_a_same_iterations", "09_petsc_b_log_view_and_multigrid"])
def test_the_lecture_runs_without_petsc4py(tmp_path, name):
    """Where petsc4py is missing, lecture 09's notebooks say so in their cells and still run to
    the end (every figure their text quotes is glued, as "no PETSc here")."""
    (tmp_path / "shadow" / "petsc4py").mkdir(parents=True)
    (tmp_path / "shadow" / "petsc4py" / "__init__.py").write_text("raise ImportError('no')\n")
    notebook = ROOT / "notebooks" / f"{name}.ipynb"
    result = run([PYTHON, "-m", "jupyter", "nbconvert", "--to", "notebook", "--execute",
                  notebook, "--output-dir", tmp_path, "--ExecutePreprocessor.timeout=300"],
                 timeout=400, cwd=ROOT, env=env_with(PYTHONPATH=tmp_path / "shadow"))
    assert result.returncode == 0, result.stderr[-2000:]
    executed = json.loads((tmp_path / notebook.name).read_text())
    text = "".join("".join(o.get("text", "")) for c in executed["cells"]
                   for o in c.get("outputs", []))
    assert "petsc4py is not installed" in text and "The cells that need PETSc skip" in text
    if name.startswith("09_petsc_b"):                  # one set-up cell decides, the rest skip
        assert "(skipped: no PETSc here)" in text


def test_a_notebook_without_petsc4py_skips_its_later_cells(monkeypatch):
    """skip_later_cells: every later cell's code becomes one print of the message (an IPython
    input transformer); outside IPython it does nothing."""
    import types

    import IPython
    shell = types.SimpleNamespace(input_transformers_cleanup=[])
    monkeypatch.setattr(IPython, "get_ipython", lambda: shell)
    assert petsc.skip_later_cells("(skipped: no PETSc here)")
    [transform] = shell.input_transformers_cleanup
    code = "".join(transform(["ksp = PETSc.KSP().create()\n", "ksp.solve(b, x)\n"]))
    assert code == "print('(skipped: no PETSc here)')\n"
    monkeypatch.setattr(IPython, "get_ipython", lambda: None)
    assert not petsc.skip_later_cells("(skipped)")


LOG_LINES = """\
Event                Count      Time (sec)     Flop                              --- Global ---  --- Stage ----  Total
                   Max Ratio  Max     Ratio   Max  Ratio  Mess   AvgLen  Reduct  %T %F %M %L %R  %T %F %M %L %R Mflop/s
------------------------------------------------------------------------------------------------------------------------

--- Event Stage 0: Main Stage

VecTDot              194 1.0 4.0639e-02 1.2 6.36e+06 1.0 0.0e+00 0.0e+00 1.9e+02  8 11  0  0 58   8 11  0  0 61   313
MatMult               97 1.0 4.1960e-02 1.0 2.01e+07 1.0 2.0e+02 8.1e+03 1.0e+00  8 34 100 100  0   8 34 100 100  0   956
KSPSolve               1 1.0 1.1298e-01 1.0 5.90e+07 1.0 2.0e+02 8.1e+03 2.9e+02 23 100 100 100 87  23 100 100 100 93  1044

--- Event Stage 1: Unknown

------------------------------------------------------------------------------------------------------------------------

Object Type          Creations   Destructions. Reports information only for process 0.
"""


def test_read_log_view():
    """The event table of a real report (2 ranks, cg with bjacobi + icc): calls, the slowest
    rank's seconds, their ratio over the ranks, messages and reductions."""
    events = petsc.read_log_view(LOG_LINES)
    assert set(events) == {"VecTDot", "MatMult", "KSPSolve"}
    assert events["VecTDot"] == {"count": 194, "seconds": 4.0639e-02, "time_ratio": 1.2,
                                 "messages": 0.0, "message_bytes": 0.0, "reductions": 190.0}
    assert events["MatMult"]["messages"] == 200.0 and events["KSPSolve"]["count"] == 1
    assert events["MatMult"]["time_ratio"] == 1.0
    with pytest.raises(ValueError, match="-log_view"):
        petsc.read_log_view("PETSc: nothing logged")


REPORT = """\
---------------------------------------------- PETSc Performance Summary: ----------------------------------------------

/home/someone/.venv/bin/python on a  named box with 2 processors, by someone Sat Nov 28 10:00:00 2026
Using Petsc Release Version 3.18.5, unknown

                         Max       Max/Min     Avg       Total
Time (sec):           1.480e+00     1.000   1.480e+00
Objects:              5.100e+01     1.000   5.100e+01
Flops:                5.899e+07     1.000   5.899e+07  1.180e+08
Flops/sec:            3.986e+07     1.000   3.986e+07  7.972e+07
MPI Msg Count:        2.060e+02     1.000   2.060e+02  4.120e+02
MPI Msg Len (bytes):  1.600e+06     1.000   7.767e+03  3.200e+06
MPI Reductions:       3.170e+02     1.000

Flop counting convention: 1 flop = 1 real number operation of type (multiply/divide/add/subtract)

Summary of Stages:   ----- Time ------  ----- Flop ------  --- Messages ---  -- Message Lengths --  -- Reductions --
                        Avg     %Total     Avg     %Total    Count   %Total     Avg         %Total    Count   %Total
 0:      Main Stage: 1.4800e+00 100.0%  1.1798e+08 100.0%  4.120e+02 100.0%  7.767e+03      100.0%  2.990e+02  94.3%

------------------------------------------------------------------------------------------------------------------------
See the 'Profiling' chapter of the users' manual for details on interpreting output.
Phase summary info:
   Count: number of times phase was executed
""" + LOG_LINES


def test_log_view_excerpt():
    """The excerpt keeps PETSc's own lines: the summary table (not the line naming the program,
    machine and user), the stages, the event table's header and the events asked for, in the
    report's order, under their stage; what it leaves out is marked."""
    text = petsc.log_view_excerpt(REPORT, ["KSPSolve", "VecTDot"])
    lines = text.splitlines()
    assert lines[0].split() == ["Max", "Max/Min", "Avg", "Total"]
    assert lines[1].startswith("Time (sec):") and lines[7].startswith("MPI Reductions:")
    assert "/home/someone" not in text and "Flop counting" not in text and "Phase" not in text
    assert "Summary of Stages:" in text and " 0:      Main Stage: 1.4800e+00" in text
    assert text.count("\n...\n") == 2
    table = text[text.index("Event "):].splitlines()
    assert table[1].split()[:2] == ["Max", "Ratio"] and set(table[2]) == {"-"}
    assert table[4] == "--- Event Stage 0: Main Stage"
    assert [line.split()[0] for line in table[6:]] == ["VecTDot", "KSPSolve"]
    assert "MatMult" not in text and "Stage 1" not in text
    assert table[6] == LOG_LINES.splitlines()[6]             # the line as PETSc printed it
    with pytest.raises(ValueError, match="-log_view"):
        petsc.log_view_excerpt("PETSc: nothing logged", ["KSPSolve"])


def test_bench_petsc_sizes_beyond_the_cache():
    from course.bench.petsc import (BYTES_PER_ROW, FEM3D_BYTES_PER_ROW, SIZE_CAP, default_size,
                                    slab_rows, working_set_mib)

    n = default_size(32 * 2**20)
    assert n ** 3 * BYTES_PER_ROW >= 4 * 32 * 2**20 > (n - 8) ** 3 * BYTES_PER_ROW
    assert default_size(0) == 64 and default_size(2**40) == SIZE_CAP
    # the compiled programs' fem3d: (m + 1)^3 nodes of a 27-point matrix
    m = default_size(32 * 2**20, fem3d=True)
    assert (m + 1) ** 3 * FEM3D_BYTES_PER_ROW >= 4 * 32 * 2**20 > \
        (m - 7) ** 3 * FEM3D_BYTES_PER_ROW
    assert working_set_mib(m, fem3d=True) * 2**20 == (m + 1) ** 3 * FEM3D_BYTES_PER_ROW
    assert working_set_mib(n) * 2**20 == n ** 3 * BYTES_PER_ROW
    # fem3d_mpi's blocks along z: planes p (n + 1) / P, (n + 1)^2 nodes each
    assert slab_rows(4, 2) == [25 * 2, 25 * 3] and slab_rows(6, 3) == [49 * 2, 49 * 2, 49 * 3]


def test_bench_petsc_names_a_winner_only_beyond_the_spread():
    from course.bench.petsc import compare, spread

    assert spread([3.0, 1.0, 2.0, 10.0]) == {"median": 2.5, "min": 1.0, "max": 10.0,
                                             "runs": [3.0, 1.0, 2.0, 10.0]}
    with pytest.raises(ValueError, match="no measurements"):
        spread([])
    fast, slow = spread([1.0, 1.1, 1.2]), spread([1.3, 1.5, 1.4])
    assert compare(fast, slow) == "the course faster" and compare(slow, fast) == "PETSc faster"
    # ranges that overlap (even by one run) name no winner, whatever the medians say
    assert compare(spread([1.0, 1.1, 1.35]), slow) == "within the spread"
    assert compare(spread([1.0, 2.0, 3.0]), spread([1.9, 2.1, 2.2]), ("C", "F")) == \
        "within the spread"
    assert compare(fast, slow, ("fem3d_mpi_c", "PETSc")) == "fem3d_mpi_c faster"


def test_bench_petsc_summary_shows_the_spread_and_marks_the_bound():
    from course import timing
    from course.bench.petsc import compare, spread, summary_petsc

    def run(engine, us, fraction):
        return {"n": 16, "ranks": 1, "engine": engine, "precond": "diagonal", "asdd_sweeps": None,
                "iterations": 40, "seconds_per_iteration": 1e-6 * spread(us)["median"],
                "us_spread": spread(us), "reductions_per_iteration": 2 if engine == "course"
                else 3, "fraction_of_bandwidth_bound": fraction}
    course, theirs = run("course", [300, 310, 320], 0.5), run("petsc", [100, 90, 95], 1.2)
    results = {"cores": 2, "repeat": 3, "runs": [course, theirs], "warning": None,
               "ratios": [{"same_iterations": True, "course_over_petsc": 310 / 95,
                           "verdict": compare(course["us_spread"], theirs["us_spread"])}],
               "compiled": []}
    text = summary_petsc(results)
    row = text.splitlines()[2]
    assert "310 (300-320)" in row and "95 (90-100)" in row and "3.26" in row
    assert "PETSc faster" in row and "50%/120%!" in row
    assert text.splitlines()[-1] == timing.ABOVE_BOUND_NOTE
    theirs["fraction_of_bandwidth_bound"] = 0.9
    assert timing.ABOVE_BOUND_NOTE not in summary_petsc(results)
    # a size below four times the cache says that its bound figures measure the cache
    results.update(sizes=[16], compiled_sizes=[72], llc_bytes=32 * 2**20)
    notes = summary_petsc(results).splitlines()[3:]
    assert len(notes) == 1 and notes[0].startswith("n = 16: in cache")


@pytest.mark.skipif(shutil.which("mpiexec") is None, reason="no mpiexec")
@pytest.mark.timeout(300)
def test_bench_petsc_smoke(tmp_path):
    from course.bench.petsc import PRECONDITIONERS

    """It runs and reports both engines for every preconditioner (no timing is asserted): the
    same iterations, the reductions each counted, a ratio, a plot; and the compiled programs
    beside PETSc's."""
    out, plot = tmp_path / "petsc.json", tmp_path / "petsc.png"
    result = run([PYTHON, "-m", "course", "bench", "petsc", "--sizes", "8", "--ranks", "2",
                  "--repeat", "2", "--json", out, "--plot", plot], timeout=280, cwd=ROOT)
    assert result.returncode == 0, result.stderr[-2000:]
    results = json.loads(out.read_text())
    assert [(r["engine"], r["precond"]) for r in results["runs"]] == [
        (engine, precond) for precond in ("diagonal", "bjacobi-ic0", "asdd-ic0")
        for engine in ("course", "petsc")]
    assert all(r["same_iterations"] and r["course_over_petsc"] > 0 for r in results["ratios"])
    assert [r["reductions_per_iteration"] for r in results["runs"][:2]] == [2, 3]
    assert plot.stat().st_size > 1000 and "bjacobi-ic0" in result.stdout
    # the compiled programs against petsc_solve_c on the same fem3d matrix and slabs: the same
    # iterations in C and Fortran for every preconditioner (the same matrix, rows and blocks)
    compiled = results["compiled"]
    assert [(r["program"], r["precond"]) for r in compiled] == [
        (program, precond) for precond, _ in PRECONDITIONERS
        for program in ("fem3d_mpi_c", "fem3d_mpi_f")]
    assert all(r["iterations"] == r["petsc_iterations"] > 0 and r["compiled_over_petsc"] > 0
               for r in compiled), compiled
    assert "fem3d_mpi_f" in result.stdout
    # every side repeated: the median within its range, a verdict worded by the ranges; PETSc's
    # series shared by the C and the Fortran row of a case
    for r in results["runs"]:
        us = r["us_spread"]
        assert len(us["runs"]) == 2 and us["min"] <= us["median"] <= us["max"]
    assert all(r["verdict"] in ("the course faster", "PETSc faster", "within the spread")
               for r in results["ratios"])
    assert all(len(r["us_spread"]["runs"]) == len(r["petsc_us_spread"]["runs"]) == 2 and
               0 < r["fraction_of_bound"] for r in compiled)
    assert all(c["petsc_us_spread"] == f["petsc_us_spread"]
               for c, f in zip(compiled[::2], compiled[1::2]))
