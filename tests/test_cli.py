"""`python -m course`: solve (JSON summary), bad input (one error line, exit status 2, no
traceback), doctor, and a smoke test of bench."""

from __future__ import annotations

import functools
import json
import os

import pytest

from conftest import ALL_LANGS, COMMON_FIELDS, assert_one_error, run_course
from conftest import solve_json as solve_problem
from course import cli
from course.langs import LANGS

pytestmark = pytest.mark.timeout(300)

FEM1D_FIELDS = COMMON_FIELDS | {"error_l2", "error_max"}
solve_json = functools.partial(solve_problem, "fem1d", timeout=180)


@pytest.mark.parametrize("lang", ALL_LANGS)
def test_solve_json(lang):
    out = solve_json("--n", "64", "--lang", lang)
    assert FEM1D_FIELDS <= set(out), FEM1D_FIELDS - set(out)
    assert out["problem"] == "fem1d" and out["lang"] == lang
    assert out["unknowns"] == 65 and out["nnz"] == 3 * 64 + 1
    assert out["converged"] is True
    assert 0 <= out["relative_residual"] <= 1e-12
    assert 0 < out["iterations"] <= 10 * 65
    assert isinstance(out["threads"], int) and out["threads"] >= 1
    if lang in ("numpy", "numba"):
        assert out["threads"] == 1
    assert set(out["seconds"]) == {"assemble", "solve", "total"}
    assert all(v >= 0 for v in out["seconds"].values())
    assert out["seconds"]["total"] == pytest.approx(
        out["seconds"]["assemble"] + out["seconds"]["solve"], rel=1e-6, abs=1e-9)
    assert out["error_max"] < 1e-10
    # the interpolation error of T = x - x^2/2 on 64 elements: h^2 sqrt(1/120)
    assert out["error_l2"] == pytest.approx((1 / 64) ** 2 / 120 ** 0.5, rel=1e-6)


def test_solve_parameters_and_threads():
    out = solve_json("--n", "10", "--lang", "c", "--cond", "2.0", "--qflux", "0.5",
                     "--length", "3", "--qvol", "0", "--threads", "1")
    assert out["threads"] == 1
    assert (out["cond"], out["qflux"], out["length"], out["qvol"]) == (2.0, 0.5, 3.0, 0.0)
    assert out["error_max"] < 1e-10 and out["unknowns"] == 11


def test_solve_text_output():
    result = run_course("solve", "fem1d", "--n", "8", "--lang", "numpy", timeout=180)
    assert result.returncode == 0
    assert "error_max" in result.stdout and "converged" in result.stdout


# id -> (arguments after `solve fem1d`, text the error line must contain)
BAD_ARGS = {
    "n-zero": (["--n", "0"], "--n"),
    "n-negative": (["--n", "-3"], "--n"),
    "n-abc": (["--n", "abc"], "--n"),
    "n-real": (["--n", "1.5"], "--n"),
    "lang-cobol": (["--lang", "cobol"], "--lang"),
    "tol-zero": (["--tol", "0"], "--tol"),
    "tol-negative": (["--tol", "-1e-8"], "--tol"),
    "threads-zero": (["--threads", "0"], "--threads"),
    "threads-negative": (["--threads", "-2"], "--threads"),
    "cond-zero": (["--cond", "0"], "--cond"),
    "length-negative": (["--length", "-1"], "--length"),
    "unknown-option": (["--bogus"], "--bogus"),
}
# errors found by course itself, not by argparse: exactly one line on stderr
OWN_ERRORS = {"n-zero", "n-negative", "threads-zero", "threads-negative"}


@pytest.mark.parametrize("case", list(BAD_ARGS))
def test_solve_bad_arguments(case):
    args, name = BAD_ARGS[case]
    result = run_course("solve", "fem1d", *args, "--lang", "numpy", timeout=120)
    assert_one_error(result, name, by_course=case in OWN_ERRORS)


def test_main_in_process_reports_value_errors(capsys):
    assert cli.main(["solve", "fem1d", "--n", "0"]) == 2
    captured = capsys.readouterr()
    assert captured.err.strip().splitlines() == [
        "course solve: error: --n must be a positive number of elements, got 0"]


def test_no_verb_is_an_error():
    result = run_course(timeout=120)
    assert result.returncode == 2 and "Traceback" not in result.stderr


def test_doctor_json():
    result = run_course("doctor", "--json", timeout=240)
    assert result.returncode == 0, result.stdout + result.stderr
    info = json.loads(result.stdout)
    assert info["problems"] == []
    assert isinstance(info["cores"], int) and info["cores"] >= 1
    assert isinstance(info["numa_nodes"], int) and info["numa_nodes"] >= 1
    assert info["mpi_family"] in ("Open MPI", "MPICH", "Intel MPI")
    assert info["openmp_c_threads"] == 2 and info["openmp_fortran_threads"] == 2
    assert info["numba_threads"].endswith(", one team")     # the Numba ICCG's threads run at once
    assert info["mpi4py"] and info["mpi4py_library"]


def test_doctor_text():
    result = run_course("doctor", timeout=240)
    assert result.returncode == 0
    assert "all good" in result.stdout and "cores" in result.stdout


def test_doctor_grading_on_this_machine():
    """`make test` sets up what grading needs: every exercise is graded fully here (as root: the
    job of 07 runs on a local Slurm)."""
    result = run_course("doctor", "--grading", "--json", timeout=240)
    assert result.returncode == 0, result.stdout + result.stderr
    found = json.loads(result.stdout)
    assert sorted(found) == ["01_fem1d", "02_fem3d", "03_openmp", "04_iccg", "05_halo",
                             "06_pipecg", "07_cluster", "08_hybrid", "09_petsc"]
    assert all(v["grades"] == "fully" for v in found.values()) or os.geteuid() != 0, found


def test_doctor_grading_names_what_is_missing(monkeypatch, capsys):
    """A grading machine without the race detector (make build alone) cannot grade 03 and 04:
    right answers would lose their race checks' points. doctor says so and exits 1; without a
    local Slurm, 07 is graded partly."""
    from course import grading
    from course.grading import race_check
    from course.cluster import local_slurm

    def no_clang():
        raise race_check.RaceCheckUnavailable("clang is not installed: the race checks need ...")

    monkeypatch.setattr(race_check, "tools", no_clang)
    monkeypatch.setattr(local_slurm, "unavailable", lambda: "a local Slurm needs root")
    assert cli.main(["doctor", "--grading"]) == 1
    out = capsys.readouterr().out
    assert "04_iccg     grades no: clang is not installed" in out
    assert "03_openmp   grades no: clang is not installed" in out
    assert "01_fem1d    grades fully" in out and "05_halo     grades fully" in out
    assert "07_cluster  grades partly: the OpenMP job script is checked by its rules" in out
    assert "make grader" in out
    assert grading.readiness()["02_fem3d"] == ("fully", "")


def test_bench_smoke(tmp_path):
    json_path, plot_path = tmp_path / "bench.json", tmp_path / "bench.png"
    result = run_course("bench", "fem1d", "--sizes", "100", "200", "--repeat", "1",
                        "--json", json_path, "--plot", plot_path, timeout=280)
    assert result.returncode == 0, result.stdout + result.stderr
    data = json.loads(json_path.read_text())
    assert data["suite"] == "fem1d" and data["sizes"] == [100, 200] and data["repeat"] == 1
    keys = sorted((r["n_elem"], r["lang"]) for r in data["runs"])
    expected = sorted((n, lang) for n in (100, 200) for lang in (*LANGS, "scipy"))
    assert keys == expected
    for r in data["runs"]:
        assert r["solve_seconds"] > 0 and r["iterations"] > 0
        assert r["solve_speedup_vs_scipy"] > 0
        if r["lang"] == "scipy":
            assert r["assemble_seconds"] is None
        else:
            assert r["assemble_seconds"] > 0 and r["assemble_speedup_vs_numpy"] > 0
    png = plot_path.read_bytes()
    assert len(png) > 1000 and png.startswith(b"\x89PNG\r\n\x1a\n")
    assert str(json_path) in result.stdout and str(plot_path) in result.stdout
