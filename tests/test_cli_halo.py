"""`mpiexec -n P python -m course solve fem3d --parallel ...`: one JSON object from rank 0, the
serial answer (iterations within 1, the same nodal error), for 1 to 4 ranks (3 and 4
oversubscribed on 2 cores), both partitioners, every exchange, sizes not divisible by P; bad
command lines stop every rank with one error line."""

from __future__ import annotations

import json
import shutil

import pytest

from conftest import COMMON_FIELDS, PYTHON, ROOT, run, solve_json

pytestmark = [pytest.mark.timeout(300),
              pytest.mark.skipif(shutil.which("mpiexec") is None, reason="no mpiexec")]

HALO_FIELDS = {"ranks", "partition", "exchange", "load_imbalance", "neighbours_max",
               "halo_nodes_total", "halo_bytes_per_exchange"}
MESH = ("--nx", "9", "--ny", "7", "--nz", "10")
MODEL = ("--qflux", "0.3", "--fixed-face", "ymin", "--tol", "1e-10")


def mpiexec_course(ranks, *args, timeout=180):
    return run(["mpiexec", "-n", ranks, PYTHON, "-m", "course", *args], timeout=timeout,
               cwd=ROOT)


@pytest.fixture(scope="module")
def serial():
    return solve_json("fem3d", *MESH, *MODEL, "--lang", "c")


@pytest.mark.parametrize("ranks, options", [
    (1, ()),
    (2, ("--exchange", "persistent")),
    (3, ("--px", "3", "--py", "1", "--pz", "1")),
    (4, ("--px", "1", "--py", "2", "--pz", "2", "--exchange", "neighbor")),
    (2, ("--partition", "metis", "--exchange", "allgather", "--lang", "fortran")),
    (3, ("--partition", "metis", "--lang", "numpy")),
    (4, ("--partition", "metis", "--exchange", "persistent", "--lang", "numba")),
], ids=lambda v: "-".join(v) if isinstance(v, tuple) else str(v))
def test_parallel_solve_equals_serial(serial, ranks, options):
    result = mpiexec_course(ranks, "solve", "fem3d", *MESH, *MODEL, "--parallel", *options,
                            "--json")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.strip().splitlines()
    assert len(lines) == 1, "one JSON object, from rank 0 only"
    out = json.loads(lines[0])
    assert COMMON_FIELDS | HALO_FIELDS <= set(out), COMMON_FIELDS | HALO_FIELDS - set(out)
    assert {"halo", "allreduce"} <= set(out["seconds"])
    assert out["ranks"] == ranks
    assert out["unknowns"] == serial["unknowns"] and out["nnz"] == serial["nnz"]
    assert out["converged"]
    assert abs(out["iterations"] - serial["iterations"]) <= 1, (out["iterations"],
                                                                serial["iterations"])
    assert out["error_max"] <= 1e-9, out["error_max"]
    assert out["load_imbalance"] >= 1.0
    if ranks == 1:
        assert out["halo_nodes_total"] == 0 and out["halo_bytes_per_exchange"] == 0
    else:
        assert out["neighbours_max"] >= 1 and out["halo_nodes_total"] > 0
        assert out["halo_bytes_per_exchange"] > 0
    if "--px" in options:
        assert out["blocks"] == [int(v) for v in options[1:6:2]]


def error_lines(result):
    return [line for line in result.stderr.splitlines() if "error:" in line]


@pytest.mark.parametrize("ranks, options, message", [
    (3, ("--px", "2", "--py", "2", "--pz", "1"), "make 4 parts, but there are 3 ranks"),
    (2, ("--px", "11", "--py", "1", "--pz", "1"), "PX = 11 parts but only 10 nodes along x"),
    (2, ("--px", "2"), "--px, --py and --pz go together"),
    (2, ("--partition", "metis", "--px", "1", "--py", "1", "--pz", "2"), "not metis"),
    (2, ("--manufactured", "--qflux", "1"), "--qflux cannot be used with --manufactured"),
    (2, ("--exchange", "smoke-signals"), "invalid choice"),
])
def test_bad_parallel_command_lines_stop_every_rank(ranks, options, message):
    result = mpiexec_course(ranks, "solve", "fem3d", *MESH, "--parallel", *options, "--json",
                            timeout=120)
    assert result.returncode != 0
    assert result.stdout == ""
    assert "Traceback" not in result.stderr
    lines = error_lines(result)
    assert len(lines) == 1, result.stderr                     # rank 0 only
    assert message in lines[0], lines[0]


@pytest.mark.timeout(200)
def test_manufactured_in_parallel_has_the_serial_errors():
    """Each rank sums the L2 and H1 errors over the elements whose corner 0 it owns."""
    serial = solve_json("fem3d", "--manufactured", "--nx", "7", "--ny", "6", "--nz", "5",
                        "--lang", "numba")
    result = mpiexec_course(3, "solve", "fem3d", "--manufactured", "--nx", "7", "--ny", "6",
                            "--nz", "5", "--lang", "numba", "--parallel", "--partition",
                            "metis", "--json", timeout=150)
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert out["manufactured"] and out["ranks"] == 3 and len(out["peak_memory_mb"]) == 3
    for name in ("error_l2", "error_h1", "error_max"):
        assert out[name] == pytest.approx(serial[name], rel=1e-9), name


@pytest.mark.timeout(200)
def test_nakajima_source_in_parallel_is_the_serial_solution():
    """Nakajima's heat generation (QVOL |x_c + y_c| per element) assembled rank by rank over the
    local elements: the temperature of the serial solve."""
    words = ("--nx", "7", "--ny", "6", "--nz", "5", "--source", "nakajima", "--tol", "1e-12",
             "--lang", "c")
    serial = solve_json("fem3d", *words)
    result = mpiexec_course(2, "solve", "fem3d", *words, "--parallel", "--partition", "metis",
                            "--precond", "asdd-ic0", "--json", timeout=150)
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert out["source"] == serial["source"] == "nakajima" and out["error_max"] is None
    assert out["t_max"] == pytest.approx(serial["t_max"], rel=1e-10)


def test_halo_options_need_parallel():
    result = run([PYTHON, "-m", "course", "solve", "fem3d", "--exchange", "neighbor"],
                 cwd=ROOT)
    assert result.returncode == 2
    assert result.stderr.strip() == "course solve: error: --exchange needs --parallel"


# --- python -m course partition: the local data files, once, for every language ----------------

def test_partition_writes_files_that_read_back(tmp_path):
    from course.fem.mesh import box_mesh
    from course.parallel.local import local_data, read_local
    from course.parallel.partition import metis_partition, quality

    result = run([PYTHON, "-m", "course", "partition", "--nx", "7", "--ny", "5", "--nz", "6",
                  "--ranks", "3", "--out", tmp_path / "part", "--json"], cwd=ROOT)
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    mesh = box_mesh(7, 5, 6)
    owner = metis_partition(mesh, 3)
    assert out["files"] == [str(tmp_path / f"part.{r}") for r in range(3)]
    assert {k: out[k] for k in quality(mesh, owner).as_dict()} == quality(mesh, owner).as_dict()
    for rank in range(3):
        back_mesh, back = read_local(tmp_path / f"part.{rank}")
        assert back_mesh == mesh and back == local_data(mesh, owner, rank)


@pytest.mark.parametrize("options, message", [
    (("--ranks", "4", "--partition", "blocks", "--px", "3", "--py", "1", "--pz", "1"),
     "make 3 parts, but there are 4 ranks"),
    (("--ranks", "2", "--px", "2"), "--px, --py and --pz go together"),
    (("--ranks", "400"), "more than the 336 nodes"),
])
def test_partition_errors(tmp_path, options, message):
    result = run([PYTHON, "-m", "course", "partition", "--nx", "7", "--ny", "5", "--nz", "6",
                  *options, "--out", tmp_path / "part"], cwd=ROOT)
    assert result.returncode == 2
    assert result.stderr.startswith("course partition: error:")
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_partition_needs_an_existing_folder(tmp_path):
    result = run([PYTHON, "-m", "course", "partition", "--ranks", "2", "--out",
                  tmp_path / "missing" / "part"], cwd=ROOT)
    assert result.returncode == 2 and "does not exist" in result.stderr


# --- python -m course bench halo (a smoke test: the benchmark runs and reports; no timing is
# --- asserted) -----------------------------------------------------------------------------------

def test_bench_halo_smoke(tmp_path):
    out, plot = tmp_path / "halo.json", tmp_path / "halo.png"
    result = run([PYTHON, "-m", "course", "bench", "halo", "--sizes", "6", "--cg-size", "8",
                  "--ranks", "1", "2", "3", "--repeat", "1", "--json", out, "--plot", plot], cwd=ROOT, timeout=600)
    assert result.returncode == 0, result.stderr
    data = json.loads(out.read_text())
    assert [r["ranks"] for r in data["runs"]] == [1, 2, 3]
    assert data["n"] == 6 and data["cg_n"] == 8 and data["mpi"]
    cores = data["cores"]
    for run_ in data["runs"]:
        assert run_["oversubscribed"] == (run_["ranks"] > cores)
        # the four Python exchanges, and the C halo_exchange of the programs (built here)
        assert set(run_["halo"]) == {"p2p", "persistent", "neighbor", "allgather", "c"}
        p = run_["ranks"]
        assert run_["sizes"]["table"]["metadata_bytes_per_rank"] == 8 * p * p
        assert run_["sizes"]["neighbours"]["metadata_bytes_per_rank"] == 0
        assert [d["depth"] for d in run_["deep_halo"]] == [1, 2, 3]
        assert [d["exchanges"] for d in run_["deep_halo"]] == [24, 12, 8]
        cg = run_["cg"]
        assert cg["seconds_per_iteration"] > 0 and cg["bytes_per_iteration_max_rank"] > 0
        assert (run_["model"] is None) == (p == 1)
        assert (run_["ratios"]["c_halo_vs_pingpong"] is None) == (p == 1)
    assert data["runs"][0]["halo"]["p2p"]["bytes_max"] == 0        # one rank: nothing to send
    assert plot.stat().st_size > 10_000
    assert "oversubscribed" in result.stdout or max(r["ranks"] for r in data["runs"]) <= cores
    assert f"wrote {out}" in result.stdout


def test_bench_halo_refuses_other_options():
    result = run([PYTHON, "-m", "course", "bench", "halo", "--threads", "2"], cwd=ROOT)
    assert result.returncode == 2 and "--threads is for the openmp and iccg suites" in result.stderr
