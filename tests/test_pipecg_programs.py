"""Lecture 06_pipecg, compiled side: the CG variants of cg_variant_mpi (src_c/06_pipecg/cg_mpi.c,
src_fortran/06_pipecg/cg_mpi.f90) through the programs fem3d_mpi_c and fem3d_mpi_f,

    mpiexec -n P fem3d_mpi_c INPUT [OUTPUT.pvtu] [pcg|chronopoulos-gear|gropp|pipelined]
                                  [blocking|iallreduce] [replace=N]

under mpiexec with 1 to 4 ranks (more ranks than cores: oversubscribed). Every variant converges
to the solution of PCG with the reductions per iteration it promises (counted by the solver, not
declared), iterations within 3 of PCG's, blocking and non-blocking reductions give the same
iterates, C and Fortran agree with each other and with `python -m course solve fem3d --parallel
--cg ALG [--iallreduce] [--residual-replacement N]` on the same mesh (course.solvers.krylov, the
reference), no variant word is exactly `pcg blocking`, residual replacement (replace=N) closes the
gap between the recursive and the true residual, and a bad word on the command line gives one
error line and exit status 2 on every rank.

Every mpiexec call has a timeout (and MPIEXEC_TIMEOUT), so that a deadlock (a reduction started on
some ranks only, a wait that never comes) fails the test instead of hanging the run."""

from __future__ import annotations

import json
import shutil
from functools import cache
from pathlib import Path

import pytest

from conftest import PYTHON, ROOT, env_with, run
from course import native
from test_halo_programs import (LABELS, MPI_TIMEOUT, PROGRAMS, SUMMARY_LINES, assert_one_error,
                                mpi_input, mpiexec, program, solver_lines, untimed)
from test_fem3d_programs import parse_summary

pytestmark = [pytest.mark.timeout(600), pytest.mark.compiled,
              pytest.mark.skipif(shutil.which("mpiexec") is None, reason="no mpiexec")]

ALGORITHMS = ("pcg", "chronopoulos-gear", "gropp", "pipelined")
REDUCTIONS = ("blocking", "iallreduce")
PROMISED = {"pcg": 2, "chronopoulos-gear": 1, "gropp": 2, "pipelined": 1}

# the model problem: uneven elements, a source, a flux; 15 iterations of PCG to 1e-10
NEL, SIZE, COND, QVOL, QFLUX, FACE, EPS = "12 10 9", "0.05 0.1 0.35", 0.6, -2.0, 1.5, "ymin", 1e-10
PARTS = {1: "1 1 1", 2: "2 1 1", 3: "1 3 1", 4: "2 2 1"}     # blocks per rank count
# the same to a tolerance near the attainable accuracy: pipelined's recursive residual gets there,
# its true residual stays about 4 times above it (files t2.dat, ... instead of p2.dat, ...)
TIGHT_EPS = 1e-13

# (ranks, algorithm, reductions) run by both programs: all 8 variants at 2 ranks; at 3 every
# algorithm with iallreduce; a few at 1 and 4; pcg blocking (the reference) at every rank count
CASES = [(2, alg, red) for alg in ALGORITHMS for red in REDUCTIONS] + [
    (3, "pcg", "blocking"), (3, "gropp", "iallreduce"), (3, "chronopoulos-gear", "iallreduce"),
    (1, "pcg", "blocking"), (1, "pipelined", "iallreduce"),
    (4, "pcg", "blocking"), (4, "pipelined", "iallreduce")]

# the same runs through the Python path (mpi4py), a sample: every algorithm, both reductions
PYTHON_CASES = [(2, "pcg", "blocking"), (2, "chronopoulos-gear", "blocking"),
                (2, "gropp", "iallreduce"), (2, "pipelined", "iallreduce"),
                (4, "pcg", "iallreduce"), (4, "pipelined", "iallreduce")]

def case_id(case) -> str:
    return "-".join(map(str, case))


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    """One folder with the input files, for all the runs of this module."""
    folder = tmp_path_factory.mktemp("pipecg_programs")
    for ranks, parts in PARTS.items():
        for prefix, eps in (("p", EPS), ("t", TIGHT_EPS)):
            _, text = mpi_input(NEL, parts, size=SIZE, material=f"{COND} {QVOL}",
                                qflux=str(QFLUX), face=FACE, eps=str(eps))
            (folder / f"{prefix}{ranks}.dat").write_text(text)
    return folder


@cache
def summary(workdir: Path, name: str, ranks: int, algorithm: str, reductions: str,
            replace: int = 0, data: str = "p") -> dict:
    """The summary of one run on the input DATA{ranks}.dat, with replace=N if `replace` (checked:
    exit 0, nothing from the program on stderr, the 05_halo lines and the two lines of the
    variant), parsed."""
    words = (algorithm, reductions) + ((f"replace={replace}",) if replace else ())
    result = mpiexec(ranks, name, f"{data}{ranks}.dat", *words, cwd=workdir)
    assert result.returncode == 0, result.stdout + result.stderr
    assert not [line for line in result.stderr.splitlines() if line.startswith(name)]
    lines = result.stdout.splitlines()
    assert len(lines) == SUMMARY_LINES, lines            # rank 0 alone prints, once
    assert lines[0].startswith(f"fem3d_mpi ({LABELS[name]}): "), lines[0]
    s, solver = parse_summary(result.stdout), solver_lines(lines)
    assert (solver["algorithm"], solver["reductions"]) == (algorithm, reductions)
    s["reductions_per_iteration"] = solver["reductions_per_iteration"]
    s["halo_exchanges_per_iteration"] = solver["halo_exchanges_per_iteration"]
    s["true_relres"] = solver["true_relres"]
    assert (solver["precond"], solver["sweeps"]) == ("diagonal", 1)     # no line 8 in the input
    return s


@cache
def python_summary(ranks: int, algorithm: str, reductions: str, replace: int = 0) -> dict:
    """`mpiexec -n P python -m course solve fem3d --parallel --cg ALG [--iallreduce]
    [--residual-replacement N] --json` on the same mesh, blocks and model problem."""
    px, py, pz = PARTS[ranks].split()
    nx, ny, nz = NEL.split()
    dx, dy, dz = SIZE.split()
    cmd = ["mpiexec", "-n", ranks, PYTHON, "-m", "course", "solve", "fem3d", "--parallel",
           "--nx", nx, "--ny", ny, "--nz", nz, "--dx", dx, "--dy", dy, "--dz", dz,
           "--cond", COND, "--qvol", QVOL, "--qflux", QFLUX, "--fixed-face", FACE, "--tol", EPS,
           "--px", px, "--py", py, "--pz", pz, "--cg", algorithm, "--json"]
    if reductions == "iallreduce":
        cmd.append("--iallreduce")
    if replace:
        cmd += ["--residual-replacement", replace]
    env = env_with(OMP_NUM_THREADS=1, MPIEXEC_TIMEOUT=2 * MPI_TIMEOUT - 20)
    result = run(cmd, cwd=ROOT, env=env, timeout=2 * MPI_TIMEOUT)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.strip().splitlines()
    assert len(lines) == 1, result.stdout
    return json.loads(lines[0])


def scale(s: dict) -> float:
    return max(1.0, abs(s["t_max_exact"]))


# --- every variant: converged, the promised reductions, PCG's solution ----------------------------

@pytest.mark.parametrize("case", CASES, ids=case_id)
@pytest.mark.parametrize("name", PROGRAMS)
def test_variant_converges_to_pcg_solution(name, case, workdir):
    ranks, algorithm, reductions = case
    s = summary(workdir, name, ranks, algorithm, reductions)
    assert s["status"] == "converged" and s["relres"] <= EPS
    assert s["true_relres"] <= 10 * EPS                   # the recursive residual did not drift
    assert s["reductions_per_iteration"] == PROMISED[algorithm]
    assert s["halo_exchanges_per_iteration"] == 1         # A v once; Jacobi exchanges nothing
    pcg = summary(workdir, name, ranks, "pcg", "blocking")
    assert abs(s["iterations"] - pcg["iterations"]) <= 3, (s["iterations"], pcg["iterations"])
    assert (s["unknowns"], s["nnz"]) == (pcg["unknowns"], pcg["nnz"])
    assert s["t_max"] == pytest.approx(pcg["t_max"], rel=1e-9)
    assert s["error"] <= 1e-8 * scale(s)
    assert abs(s["error"] - pcg["error"]) <= 1e-9 * scale(s), (s["error"], pcg["error"])


@pytest.mark.parametrize("case", [(ranks, alg) for ranks, alg, red in CASES if red == "iallreduce"
                                  and (ranks, alg, "blocking") in CASES], ids=case_id)
@pytest.mark.parametrize("name", PROGRAMS)
def test_iallreduce_gives_the_blocking_iterates(name, case, workdir):
    """MPI_Iallreduce + MPI_Wait computes the same sums as MPI_Allreduce: the same iterations, the
    same residuals up to rounding."""
    ranks, algorithm = case
    nonblocking = summary(workdir, name, ranks, algorithm, "iallreduce")
    blocking = summary(workdir, name, ranks, algorithm, "blocking")
    assert nonblocking["iterations"] == blocking["iterations"]
    assert nonblocking["relres"] == pytest.approx(blocking["relres"], rel=1e-3)
    assert nonblocking["error"] == pytest.approx(blocking["error"], rel=1e-2, abs=1e-13)


# --- the languages agree --------------------------------------------------------------------------

@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_c_and_fortran_agree(case, workdir):
    c, f = (summary(workdir, name, *case) for name in PROGRAMS)
    assert abs(c["iterations"] - f["iterations"]) <= 1, (c["iterations"], f["iterations"])
    assert c["reductions_per_iteration"] == f["reductions_per_iteration"]
    assert c["relres"] == pytest.approx(f["relres"], rel=1e-2)
    assert abs(c["error"] - f["error"]) <= 1e-10 * scale(c)


@pytest.mark.skipif(native.default_variant() == "sanitize",
                    reason="the Python reference runs no sanitized code (and is slow under the "
                           "preloaded sanitizers): compared in the release run")
@pytest.mark.parametrize("case", PYTHON_CASES, ids=case_id)
@pytest.mark.parametrize("name", PROGRAMS)
def test_agrees_with_the_python_path(name, case, workdir):
    """course.solvers.krylov on mpi4py is the reference: the same problem (unknowns, nonzeros), the
    same counted reductions, iterations within 1, the same solution error (near round-off)."""
    s, py = summary(workdir, name, *case), python_summary(*case)
    assert py["converged"] and py["algorithm"] == case[1]
    assert py["iallreduce"] == (case[2] == "iallreduce")
    assert (s["unknowns"], s["nnz"]) == (py["unknowns"], py["nnz"])
    assert s["reductions_per_iteration"] == py["reductions_per_iteration"] == PROMISED[case[1]]
    assert abs(s["iterations"] - py["iterations"]) <= 1, (s["iterations"], py["iterations"])
    assert abs(s["error"] - py["error_max"]) <= 1e-10 * scale(s), (s["error"], py["error_max"])
    assert s["true_relres"] <= 10 * EPS and py["true_relative_residual"] <= 10 * EPS


# --- the command line -----------------------------------------------------------------------------

@pytest.mark.parametrize("ranks", [1, 3])
@pytest.mark.parametrize("name", PROGRAMS)
def test_no_word_is_pcg_blocking(name, ranks, workdir):
    """No variant word: cg_variant_mpi's pcg with blocking reductions, the whole summary (its two
    lines on the solver included, but the time of the solve) the same, character for character, as
    with `pcg blocking`."""
    plain = mpiexec(ranks, name, f"p{ranks}.dat", cwd=workdir)
    named = mpiexec(ranks, name, f"p{ranks}.dat", "pcg", "blocking", cwd=workdir)
    assert plain.returncode == named.returncode == 0, plain.stdout + plain.stderr
    lines = plain.stdout.splitlines()
    assert len(lines) == SUMMARY_LINES, lines
    assert lines[6] == "  algorithm pcg (blocking), reductions per iteration 2", lines[6]
    assert untimed(plain.stdout) == untimed(named.stdout)
    s = summary(workdir, name, ranks, "pcg", "blocking")
    assert s["status"] == "converged" and s["true_relres"] <= 10 * EPS


@pytest.mark.parametrize("name", PROGRAMS)
def test_one_word_defaults_the_other(name, workdir):
    """`iallreduce` alone is pcg with iallreduce; the words and OUTPUT.pvtu in any order."""
    folder = workdir
    (folder / f"out_{name}").mkdir(exist_ok=True)
    result = mpiexec(2, name, "p2.dat", "iallreduce", f"out_{name}/T.pvtu", cwd=folder)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "  algorithm pcg (iallreduce), reductions per iteration 2" in result.stdout.splitlines()
    assert (folder / f"out_{name}" / "T.pvtu").is_file()
    result = mpiexec(2, name, "p2.dat", "gropp", cwd=folder)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "  algorithm gropp (blocking), reductions per iteration 2" in result.stdout.splitlines()
    result = mpiexec(2, name, "p2.dat", "replace=3", cwd=folder)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "  algorithm pcg (blocking), reductions per iteration 2" in result.stdout.splitlines()


# --- residual replacement: replace=N ---------------------------------------------------------------

@pytest.mark.skipif(native.default_variant() == "sanitize",
                    reason="the Python reference runs no sanitized code (and is slow under the "
                           "preloaded sanitizers): compared in the release run")
@pytest.mark.parametrize("name", PROGRAMS)
def test_replacement_agrees_with_the_python_path(name, workdir):
    """`pipelined replace=4` and `--cg pipelined --residual-replacement 4` on the same mesh: the
    same counted reductions, iterations within 1, the same solution error."""
    s, py = summary(workdir, name, 2, "pipelined", "blocking", replace=4), \
        python_summary(2, "pipelined", "blocking", replace=4)
    assert py["converged"] and py["algorithm"] == "pipelined" and py["residual_replacement"] == 4
    assert s["status"] == "converged" and s["relres"] <= EPS
    assert (s["unknowns"], s["nnz"]) == (py["unknowns"], py["nnz"])
    assert s["reductions_per_iteration"] == py["reductions_per_iteration"] == 1
    assert abs(s["iterations"] - py["iterations"]) <= 1, (s["iterations"], py["iterations"])
    assert abs(s["error"] - py["error_max"]) <= 1e-10 * scale(s), (s["error"], py["error_max"])
    assert s["true_relres"] <= 10 * EPS and py["true_relative_residual"] <= 10 * EPS


@pytest.mark.parametrize("name", PROGRAMS)
def test_replacement_closes_the_gap(name, workdir):
    """Near the attainable accuracy (EPS = 1e-13) pipelined's true residual stays well above its
    recursive one; replace=1 recomputes r = b - A x in every iteration, so that every variant stops
    on the true residual: the two printed residuals are the same (the gap is closed)."""
    plain = summary(workdir, name, 2, "pipelined", "blocking", data="t")
    assert plain["status"] == "converged"
    assert plain["true_relres"] > 2 * plain["relres"], plain          # the gap
    for algorithm in ALGORITHMS:
        s = summary(workdir, name, 2, algorithm, "blocking", replace=1, data="t")
        assert s["status"] == "converged" and s["relres"] <= TIGHT_EPS, (algorithm, s)
        assert s["true_relres"] == s["relres"], (algorithm, s)
        assert s["reductions_per_iteration"] == PROMISED[algorithm]  # the replacement sums none
        assert abs(s["iterations"] - plain["iterations"]) <= 3, (algorithm, s["iterations"])
    replaced = summary(workdir, name, 2, "pipelined", "iallreduce", replace=1, data="t")
    assert replaced["true_relres"] == replaced["relres"] < plain["true_relres"] / 2


# word(s) -> the text of the one error line after "PROG: "
BAD_WORDS = {
    ("pipelind",): "unknown argument 'pipelind': expected OUTPUT.pvtu, an algorithm (pcg, "
                   "chronopoulos-gear, gropp, pipelined) or the reductions (blocking, iallreduce)",
    ("gropp", "iallreduce", "pcg"): "argument 'pcg': the algorithm is given twice",
    ("blocking", "iallreduce"): "argument 'iallreduce': the reduction mode is given twice",
    ("replace=0",): "argument 'replace=0': N must be a positive integer (replace=N: residual "
                    "replacement every N iterations)",
    ("replace=4x", "gropp"): "argument 'replace=4x': N must be a positive integer",
    ("replace=2147483648",): "argument 'replace=2147483648': N must be a positive integer",
    ("replace=3", "gropp", "replace=3"): "argument 'replace=3': the residual replacement is "
                                         "given twice",
}


@pytest.mark.parametrize("words", list(BAD_WORDS), ids="-".join)
@pytest.mark.parametrize("name", PROGRAMS)
def test_bad_word(name, words, workdir):
    """One line from rank 0, the same in C and Fortran, exit status 2, nothing computed."""
    result = mpiexec(2, name, "p2.dat", *words, cwd=workdir)
    line = assert_one_error(result, name, f"{name}: {BAD_WORDS[words]}")
    assert line.startswith(f"{name}: {BAD_WORDS[words]}")
    assert result.stdout == ""


@pytest.mark.parametrize("words, message", [
    (("gropp", "nonblocking"), "unknown argument 'nonblocking'"),
    (("pipelined", "replace=0"), "argument 'replace=0': N must be a positive integer"),
    (("replace=x2", "iallreduce"), "argument 'replace=x2': N must be a positive integer"),
], ids=lambda v: "-".join(v) if isinstance(v, tuple) else None)
@pytest.mark.parametrize("name", PROGRAMS)
def test_bad_word_stops_every_rank(name, words, message, workdir):
    """Every rank (not only the one mpiexec reports) exits with status 2: a shell around each
    rank prints its status and exits 0, so that mpiexec lets all of them finish."""
    exe = program(name)
    env = env_with(OMP_NUM_THREADS=1, MPIEXEC_TIMEOUT=MPI_TIMEOUT - 20)
    result = run(["mpiexec", "-n", 3, "sh", "-c", '"$0" "$@"; echo "rank exit $?" >&2', exe,
                  "p3.dat", *words], cwd=workdir, env=env, timeout=MPI_TIMEOUT)
    assert result.returncode == 0, result.stderr
    assert result.stderr.count("rank exit 2") == 3, result.stderr
    assert result.stderr.count(f"{name}: {message}") == 1, result.stderr
    assert len([line for line in result.stderr.splitlines() if line.startswith(name)]) == 1
    assert result.stdout == ""


@pytest.mark.parametrize("name", PROGRAMS)
def test_usage_names_the_variants(name, workdir):
    result = mpiexec(2, name, "p2.dat", "a.pvtu", "pcg", "blocking", "replace=2", "extra",
                     cwd=workdir)
    assert result.returncode == 2 and result.stdout == ""
    usage = [line for line in result.stderr.splitlines() if line.startswith("usage:")]
    assert len(usage) == 1, result.stderr
    assert usage[0].endswith(" INPUT [OUTPUT.pvtu] [pcg|chronopoulos-gear|gropp|pipelined] "
                             "[blocking|iallreduce] [replace=N]"), usage[0]
