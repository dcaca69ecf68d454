"""`python -m course solve fem3d` and `bench fem3d`: the JSON summary (common fields, errors, memory, timings), the
VTK output, and bad arguments (one error line, exit status 2, no traceback)."""

from __future__ import annotations

import functools
import json

import numpy as np
import pytest

from conftest import ALL_LANGS, COMMON_FIELDS, assert_one_error, run_course
from conftest import solve_json as solve_problem
from course import cli, problems

pytestmark = pytest.mark.timeout(300)

FEM3D_FIELDS = {"error_max", "error_l2", "error_h1", "peak_memory_mb", "nx", "ny", "nz"}

solve_json = functools.partial(solve_problem, "fem3d")


@pytest.mark.parametrize("lang", ALL_LANGS)
def test_solve_json_manufactured(lang):
    out = solve_json("--nx", "8", "--ny", "6", "--nz", "7", "--manufactured", "--lang", lang)
    assert COMMON_FIELDS | FEM3D_FIELDS <= set(out), (COMMON_FIELDS | FEM3D_FIELDS) - set(out)
    assert out["problem"] == "fem3d" and out["lang"] == lang and out["manufactured"] is True
    assert (out["nx"], out["ny"], out["nz"]) == (8, 6, 7)
    assert out["unknowns"] == 9 * 7 * 8 and out["nnz"] == 25 * 19 * 22
    assert out["converged"] is True and 0 <= out["relative_residual"] <= 1e-8
    assert isinstance(out["threads"], int) and out["threads"] >= 1
    if lang in ("numpy", "numba"):
        assert out["threads"] == 1
    assert set(out["seconds"]) == {"assemble", "solve", "total"}
    assert all(v >= 0 for v in out["seconds"].values())
    assert out["seconds"]["total"] == pytest.approx(
        out["seconds"]["assemble"] + out["seconds"]["solve"], rel=1e-6, abs=1e-9)
    assert out["peak_memory_mb"] > 10
    ref = problems.fem3d(8, 6, 7, "numpy", manufactured=True, warm_up=False)
    for key in ("error_l2", "error_h1", "error_max"):
        assert out[key] == pytest.approx(ref[key], rel=1e-6), key
    assert 0 < out["error_l2"] < 0.03 and 0 < out["error_h1"] < 0.3


def test_solve_json_model_problem_parameters():
    out = solve_json("--nx", "4", "--ny", "5", "--nz", "6", "--lang", "c", "--cond", "2.5",
                     "--qvol", "-1.5", "--qflux", "0.75", "--fixed-face", "ymin", "--dx", "0.1",
                     "--dy", "0.2", "--dz", "0.05", "--tol", "1e-12", "--threads", "1")
    assert out["threads"] == 1 and out["manufactured"] is False
    assert (out["cond"], out["qvol"], out["qflux"], out["fixed_face"]) == (2.5, -1.5, 0.75, "ymin")
    assert (out["dx"], out["dy"], out["dz"], out["tol"]) == (0.1, 0.2, 0.05, 1e-12)
    assert out["unknowns"] == 5 * 6 * 7
    assert out["error_max"] < 1e-12          # nodally exact
    assert out["error_l2"] > 0 and out["error_h1"] > 0


def test_solve_text_output():
    result = run_course("solve", "fem3d", "--nx", "3", "--lang", "numpy", timeout=180)
    assert result.returncode == 0, result.stderr
    assert "error_h1" in result.stdout and "peak_memory_mb" in result.stdout


@pytest.mark.parametrize("suffix", [".vtu", ".vtk"])
def test_solve_vtk(tmp_path, suffix):
    meshio = pytest.importorskip("meshio")
    path = tmp_path / f"t{suffix}"
    out = solve_json("--nx", "4", "--ny", "3", "--nz", "5", "--lang", "numba", "--qflux", "2",
                     "--vtk", str(path))
    assert out["vtk"] == str(path)
    data = meshio.read(path)
    assert data.points.shape == (5 * 4 * 6, 3)
    assert data.cells[0].type == "hexahedron" and data.cells[0].data.shape == (60, 8)
    t = np.ravel(data.point_data["temperature"])
    z = data.points[:, 2]
    np.testing.assert_allclose(t, (1 - z**2) / 2 + 2 * (1 - z), atol=1e-10)   # the exact T


# id -> (arguments after `solve fem3d`, text the error line must contain)
BAD_ARGS = {
    "nx-zero": (["--nx", "0"], "--nx"),
    "ny-negative": (["--ny", "-3"], "--ny"),
    "nz-zero": (["--nz", "0"], "--nz"),
    "nx-abc": (["--nx", "abc"], "--nx"),
    "nz-real": (["--nz", "1.5"], "--nz"),
    "lang-cobol": (["--lang", "cobol"], "--lang"),
    "tol-zero": (["--tol", "0"], "--tol"),
    "tol-nan": (["--tol", "nan"], "--tol"),
    "threads-zero": (["--threads", "0"], "--threads"),
    "cond-negative": (["--cond", "-1"], "--cond"),
    "dx-zero": (["--dx", "0"], "--dx"),
    "dy-inf": (["--dy", "inf"], "--dy"),
    "qvol-nan": (["--qvol", "nan"], "--qvol"),
    "qflux-text": (["--qflux", "much"], "--qflux"),
    "fixed-face-top": (["--fixed-face", "top"], "--fixed-face"),
    "manufactured-with-qflux": (["--manufactured", "--qflux", "1"], "--qflux"),
    "manufactured-with-fixed-face": (["--manufactured", "--fixed-face", "xmin"], "--fixed-face"),
    "vtk-missing-folder": (["--vtk", "/nonexistent/folder/t.vtk"], "--vtk"),
    "vtk-unknown-extension": (["--vtk", "t.txt"], "--vtk"),
    "vtk-no-extension": (["--vtk", "t"], "--vtk"),
    "vtk-a-folder": (["--vtk", "."], "--vtk"),
    "fem1d-option": (["--n", "10"], "--n"),
    "unknown-option": (["--bogus"], "--bogus"),
}
# errors found by course itself, not by argparse: exactly one line on stderr
OWN_ERRORS = {"nx-zero", "ny-negative", "nz-zero", "threads-zero", "manufactured-with-qflux",
              "manufactured-with-fixed-face", "vtk-missing-folder", "vtk-unknown-extension",
              "vtk-no-extension", "vtk-a-folder"}


@pytest.mark.parametrize("case", list(BAD_ARGS))
def test_solve_bad_arguments(case):
    args, name = BAD_ARGS[case]
    result = run_course("solve", "fem3d", *args, "--lang", "numpy", timeout=120)
    assert_one_error(result, name, by_course=case in OWN_ERRORS)


def test_vtk_extension_is_refused_before_solving(tmp_path):
    """200^3 elements take minutes to solve: the error must come first, and no file be written."""
    result = run_course("solve", "fem3d", "--nx", "200", "--ny", "200", "--nz", "200",
                        "--lang", "numpy", "--vtk", "T.txt", cwd=tmp_path, timeout=60)
    assert_one_error(result, "--vtk", by_course=True)
    assert ".vtu" in result.stderr and ".vtk" in result.stderr
    assert list(tmp_path.iterdir()) == []


def test_main_in_process_reports_value_errors(capsys):
    assert cli.main(["solve", "fem3d", "--nx", "4", "--ny", "0"]) == 2
    captured = capsys.readouterr()
    assert captured.err.strip().splitlines() == [
        "course solve: error: --ny must be a positive number of elements, got 0"]
    assert captured.out == ""


def test_too_big_mesh_is_one_error_line():
    result = run_course("solve", "fem3d", "--nx", "2000", "--ny", "2000", "--nz", "2000",
                        "--lang", "numpy", timeout=120)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines() == [result.stderr.strip()]
    assert "32-bit" in result.stderr


def test_cli_faces_are_the_mesh_faces():
    from course.fem import mesh

    assert cli.FACES == mesh.FACES


def test_bench_fem3d_smoke(tmp_path):
    """The benchmark runs end to end on tiny meshes and reports what it promises (a smoke test:
    no timing is asserted)."""
    json_path, plot_path = tmp_path / "bench.json", tmp_path / "bench.png"
    result = run_course("bench", "fem3d", "--sizes", "4", "6", "--repeat", "1",
                        "--json", json_path, "--plot", plot_path, timeout=280)
    assert result.returncode == 0, result.stdout + result.stderr
    data = json.loads(json_path.read_text())
    assert data["suite"] == "fem3d" and data["sizes"] == [4, 6]
    assert data["stream"]["triad_gbs"] > 0 and data["stream"]["copy_gbs"] > 0
    keys = sorted((r["n"], r["lang"]) for r in data["runs"])
    assert keys == sorted((n, lang) for n in (4, 6) for lang in ("numpy", "numba", "c",
                                                                  "fortran", "scipy"))
    for r in data["runs"]:
        assert r["nnz"] == (3 * r["n"] + 1) ** 3 and r["unknowns"] == (r["n"] + 1) ** 3
        assert r["spmv_gbs"] > 0 and r["spmv_fraction_of_stream"] > 0
        assert (r["assemble_seconds"] is None) == (r["lang"] == "scipy")
    assert plot_path.read_bytes().startswith(b"\x89PNG")
    assert "STREAM" in result.stdout and "of STREAM" in result.stdout
