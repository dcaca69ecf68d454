"""`python -m course solve poisson`: the JSON summary of every step of the OpenMP PCG ladder in
every language (common fields, version, SpMV format, GFLOP/s and GB/s), the thread options,
INPUT.DAT through --input (the same iterations as the programs solc and solf), and bad arguments
(one error line, exit status 2, no traceback).

The runs of the ladder are in-process calls of course.cli.main (one Python, Numba compiles once),
the end-to-end ones and the errors are subprocesses; every mesh has at most 16^3 cells."""

from __future__ import annotations

import json
import math
import os

import numba
import pytest

from conftest import COMMON_FIELDS, ROOT, assert_one_error, run_course, run_program, solve_json
from course import cli, native, resources, solvers
from course.fem import fvm
from test_openmp_programs import parse_summary          # the summary solc and solf print

pytestmark = pytest.mark.timeout(300)

POISSON_FIELDS = {"version", "format", "gflops", "bandwidth_gbs"}
EXAMPLE = ROOT / "examples" / "03_openmp" / "INPUT.DAT"
LADDER = [pytest.param(lang, v, id=f"{lang}-{v}")
          for lang in ("c", "fortran", "numba") for v in ("v0", "v1", "v2", "v3")
          if (lang, v) != ("numba", "v3")]
MESH = ["--nx", "8", "--ny", "6", "--nz", "5", "--dx", "0.5", "--dz", "2", "--tol", "1e-10"]


@pytest.fixture(scope="module")
def reference():
    """The MESH problem solved by the Numba v0 of course.solvers."""
    p = fvm.poisson(8, 6, 5, 0.5, 1.0, 2.0)
    result = solvers.pcg_ladder(p, "v0", "numba", tol=1e-10)
    return {"iterations": result.iterations, "checksum": float(result.x.sum())}


@pytest.fixture
def restore_threads(monkeypatch):
    """`--threads` in-process sets the threads of the libraries for the rest of the process, and
    OMP_NUM_THREADS in os.environ (for the libraries not loaded yet): both put back afterwards."""
    before = numba.get_num_threads()
    defaults = {lang: resources.threads_for(lang) for lang in native.COMPILED_LANGS}
    # setenv records the value before (or its absence), and its undo puts that back
    monkeypatch.setenv("OMP_NUM_THREADS", os.environ.get("OMP_NUM_THREADS", "1"))
    yield
    numba.set_num_threads(before)
    for lang, threads in defaults.items():
        native.set_threads(lang, threads)


def solve_in_process(capsys, *args) -> dict:
    assert cli.main(["solve", "poisson", *args, "--json"]) == 0
    captured = capsys.readouterr()
    assert captured.err == ""
    lines = captured.out.strip().splitlines()
    assert len(lines) == 1, f"expected one JSON line, got {captured.out!r}"
    return json.loads(lines[0])


def positive_finite(value) -> bool:
    return isinstance(value, float) and math.isfinite(value) and value > 0


@pytest.mark.parametrize("lang,version", LADDER)
def test_solve_json(lang, version, capsys, reference):
    out = solve_in_process(capsys, *MESH, "--lang", lang, "--version", version)
    assert COMMON_FIELDS | POISSON_FIELDS <= set(out), (COMMON_FIELDS | POISSON_FIELDS) - set(out)
    assert (out["problem"], out["lang"], out["version"]) == ("poisson", lang, version)
    assert out["format"] == ("crs" if version in ("v0", "v1") else "ell")
    assert out["unknowns"] == 240 and out["nnz"] == 240 + fvm.offdiag_nnz(8, 6, 5)
    assert (out["nx"], out["ny"], out["nz"], out["dx"], out["dy"], out["dz"]) == \
        (8, 6, 5, 0.5, 1.0, 2.0)
    assert out["converged"] is True and 0 <= out["relative_residual"] <= 1e-10
    assert out["iterations"] == reference["iterations"]
    assert out["checksum"] == pytest.approx(reference["checksum"], rel=1e-10)
    assert isinstance(out["threads"], int) and out["threads"] >= 1
    assert set(out["seconds"]) == {"assemble", "solve", "total"}
    assert all(v >= 0 for v in out["seconds"].values())
    assert out["seconds"]["total"] == pytest.approx(
        out["seconds"]["assemble"] + out["seconds"]["solve"], rel=1e-6, abs=1e-9)
    assert positive_finite(out["gflops"]) and positive_finite(out["bandwidth_gbs"]), out


@pytest.mark.parametrize("fmt", ["crs", "ell", "sell"])
@pytest.mark.parametrize("lang", ["c", "fortran", "numba"])
def test_solve_format(lang, fmt, capsys, reference):
    """--format picks the SpMV that is timed alone; the solve is the version's."""
    out = solve_in_process(capsys, *MESH, "--lang", lang, "--version", "v2", "--format", fmt)
    assert out["format"] == fmt and out["version"] == "v2"
    assert out["iterations"] == reference["iterations"]
    assert positive_finite(out["gflops"]) and positive_finite(out["bandwidth_gbs"]), out


@pytest.mark.parametrize("lang,version", [("c", "v3"), ("fortran", "v1"), ("numba", "v2")])
def test_threads_option(lang, version, capsys, restore_threads):
    runs = {t: solve_in_process(capsys, "--nx", "16", "--ny", "12", "--nz", "10", "--lang", lang,
                                "--version", version, "--threads", str(t)) for t in (1, 2)}
    assert (runs[1]["threads"], runs[2]["threads"]) == (1, 2)
    assert runs[1]["iterations"] == runs[2]["iterations"]
    assert runs[1]["checksum"] == pytest.approx(runs[2]["checksum"], rel=1e-10)


def test_end_to_end_with_threads():
    """One real `python -m course` run per compiled language: --threads reaches the library."""
    for lang in ("c", "fortran"):
        out = solve_json("poisson", *MESH, "--lang", lang, "--threads", "2")
        assert out["threads"] == 2 and out["converged"] is True and out["version"] == "v3"


def test_input_file_gives_the_iterations_of_the_programs(tmp_path):
    """--input examples/03_openmp/INPUT.DAT (32^3 cells: the one larger run here) and a small
    anisotropic file: the same problem, iterations and checksum as solc and solf."""
    small = tmp_path / "INPUT.DAT"
    small.write_text("8 6 5   NX NY NZ\n0.5 1.0 2.0   DX DY DZ\n1.0d-10   EPSICCG\n")
    for path in (EXAMPLE, small):
        params = fvm.read_input(path)
        out = solve_json("poisson", "--input", path, "--lang", "c", "--version", "v3")
        assert out["input"] == str(path)
        assert (out["nx"], out["ny"], out["nz"]) == (params["nx"], params["ny"], params["nz"])
        assert (out["dx"], out["dy"], out["dz"], out["tol"]) == \
            (params["dx"], params["dy"], params["dz"], params["eps"])
        for name in ("solc", "solf"):
            result = run_program(native.binary(name), path, "v3", cwd=tmp_path, check=True)
            s = parse_summary(result.stdout)
            assert out["iterations"] == s["iterations"], (path, name)
            assert out["checksum"] == pytest.approx(s["checksum"], rel=1e-10), (path, name)
            assert out["phi_max"] == pytest.approx(s["phi_max"], rel=1e-10), (path, name)


# id -> (arguments after `solve poisson`, text the error line must contain)
BAD_ARGS = {
    "numba-v3": (["--lang", "numba", "--version", "v3"], "v3 has no Numba twin"),
    "nx-zero": (["--nx", "0"], "--nx"),
    "nz-negative": (["--nz", "-4"], "--nz"),
    "input-with-nx": (["--input", str(EXAMPLE), "--nx", "4"], "--input cannot be used with --nx"),
    "input-with-tol": (["--input", str(EXAMPLE), "--tol", "1e-6"], "--tol"),
    "input-missing": (["--input", "/nonexistent/INPUT.DAT"], "/nonexistent/INPUT.DAT"),
    "threads-zero": (["--threads", "0"], "--threads"),
    "mesh-too-large": (["--nx", "2000", "--ny", "2000", "--nz", "2000"], "32-bit"),
    "version-v4": (["--version", "v4"], "--version"),
    "format-csr": (["--format", "csr"], "--format"),
    "lang-numpy": (["--lang", "numpy"], "--lang"),
    "dx-zero": (["--dx", "0"], "--dx"),
    "tol-nan": (["--tol", "nan"], "--tol"),
    "nx-real": (["--nx", "1.5"], "--nx"),
    "fem3d-option": (["--manufactured"], "--manufactured"),
}
# errors found by course itself, not by argparse: exactly one line on stderr
OWN_ERRORS = {"numba-v3", "nx-zero", "nz-negative", "input-with-nx", "input-with-tol",
              "input-missing", "threads-zero", "mesh-too-large"}


@pytest.mark.parametrize("case", list(BAD_ARGS))
def test_solve_bad_arguments(case):
    args, name = BAD_ARGS[case]
    result = run_course("solve", "poisson", *args, "--json", timeout=120)
    assert_one_error(result, name, by_course=case in OWN_ERRORS)


@pytest.mark.parametrize("text,line,words", [
    ("8 6\n1 1 1\n1e-8\n", 1, "expected 3 integer(s)"),
    ("8 6 0\n1 1 1\n1e-8\n", 1, "NZ must be positive"),
    ("8 6 5\n1 inf 1\n1e-8\n", 2, "expected a real number"),
    ("8 6 5\n1 1 1\n", 3, "missing line"),
    ("8 6 5\n1 1 1\n0\n", 3, "EPSICCG must be positive"),
], ids=["two-cells", "nz-zero", "dy-inf", "missing-eps-line", "eps-zero"])
def test_bad_input_file(tmp_path, text, line, words):
    """The message of the programs' reader, FILE:LINE: first, after `course solve: error:`."""
    path = tmp_path / "INPUT.DAT"
    path.write_text(text)
    result = run_course("solve", "poisson", "--input", path, "--lang", "c", timeout=120)
    assert_one_error(result, f"{path}:{line}: ", by_course=True)
    assert words in result.stderr


def test_main_in_process_reports_value_errors(capsys):
    assert cli.main(["solve", "poisson", "--lang", "numba", "--version", "v3"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert len(captured.err.strip().splitlines()) == 1
    assert captured.err.startswith("course solve: error: v3 has no Numba twin")


def test_bench_openmp_smoke(tmp_path):
    """The thread sweep runs end to end on a tiny problem and reports what it promises (a smoke
    test: no timing is asserted)."""
    json_path, plot_path = tmp_path / "omp.json", tmp_path / "omp.png"
    result = run_course("bench", "openmp", "--sizes", "6", "--threads", "1", "2", "--repeat",
                        "1", "--json", json_path, "--plot", plot_path, timeout=280)
    assert result.returncode == 0, result.stdout + result.stderr
    data = json.loads(json_path.read_text())
    assert data["suite"] == "openmp" and data["sizes"] == [6] and data["threads"] == [1, 2]
    assert data["topology"]["cores"] >= 1 and data["topology"]["numa_nodes"] >= 1
    assert [s["threads"] for s in data["stream"]] == [1, 2]
    assert all(s["triad_gbs"] > 0 and s["copy_gbs"] > 0 for s in data["stream"])
    ladder = sorted((r["threads"], r["lang"], r["version"]) for r in data["ladder"])
    assert ladder == sorted((t, lang, v) for t in (1, 2) for lang in ("c", "fortran", "numba")
                            for v in ("v0", "v1", "v2", "v3") if (lang, v) != ("numba", "v3"))
    for r in data["ladder"]:
        assert r["seconds_per_iteration"] > 0 and r["unknowns"] == 216
        assert r["speedup"] == 1.0 or r["threads"] == 2
    spmv = sorted((r["threads"], r["lang"], r["format"]) for r in data["spmv"])
    assert spmv == sorted((t, lang, f) for t in (1, 2) for lang in ("c", "fortran", "numba")
                          for f in ("crs", "ell", "sell"))
    assert all(r["bandwidth_gbs"] > 0 and r["fraction_of_stream"] > 0 for r in data["spmv"])
    assert plot_path.read_bytes().startswith(b"\x89PNG")
    assert "NUMA" in result.stdout and "of STREAM" in result.stdout


@pytest.mark.parametrize("args,words", [
    (["--sizes", "8", "16"], "one size"),
    (["--langs", "numpy"], "not numpy"),
    (["--threads", "0"], "must be positive"),
])
def test_bench_openmp_refuses(args, words):
    result = run_course("bench", "openmp", *args, "--repeat", "1", timeout=60)
    assert result.returncode == 2
    assert words in result.stderr.strip().splitlines()[-1]


def test_bench_threads_only_for_openmp():
    result = run_course("bench", "fem3d", "--threads", "2", timeout=60)
    assert result.returncode == 2 and "openmp and iccg suites" in result.stderr
