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
    (2, ("--manufactured",), "--manufactured is not available with --parallel"),
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


def test_halo_options_need_parallel():
    result = run([PYTHON, "-m", "course", "solve", "fem3d", "--exchange", "neighbor"],
                 cwd=ROOT)
    assert result.returncode == 2
    assert result.stderr.strip() == "course solve: error: --exchange needs --parallel"
