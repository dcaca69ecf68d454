"""Lecture 07_cluster, case study: the pencil-decomposed 3-D FFT (course.parallel.fft, the
programs pencil_fft_c and pencil_fft_f on FFTW) under mpiexec with 1 to 4 ranks (more ranks than
cores: oversubscribed), against numpy.fft.fftn and the known spectrum of a few Fourier modes; the
seed's message sizes and its prediction model; bad inputs (one line, exit status 2 on every rank,
never a hang); `bench alltoall` on a tiny case. Every mpiexec call has a timeout and
MPIEXEC_TIMEOUT."""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import numpy as np
import pytest

from conftest import PYTHON, ROOT, env_with, run, run_course
from course import native
from course.parallel import fft

MPI_TIMEOUT = 60
needs_mpi = pytest.mark.skipif(shutil.which("mpiexec") is None, reason="no mpiexec")


def mpiexec(n, *args):
    env = env_with(OMP_NUM_THREADS=1, MPIEXEC_TIMEOUT=MPI_TIMEOUT - 10)
    return run(["mpiexec", "-n", n, *args], timeout=MPI_TIMEOUT, cwd=ROOT, env=env)


def program_lines(result, name: str) -> list[str]:
    """stderr lines of the program itself (mpiexec adds its own notice on a non-zero status)."""
    return [line for line in result.stderr.splitlines() if line.startswith(f"{name}:")]


def assert_one_error(result, name: str, *texts: str) -> None:
    assert result.returncode == 2, (result.returncode, result.stdout, result.stderr)
    for crash in ("Traceback", "Segmentation", "exited on signal", "MPI_ABORT"):
        assert crash not in result.stderr, result.stderr
    lines = program_lines(result, name)
    assert len(lines) == 1, f"expected one line from {name}, got {result.stderr!r}"
    for text in texts:
        assert text in lines[0], lines[0]


# --- no MPI: the grid, the transposes, the seed's numbers ----------------------------------------

@pytest.mark.parametrize("size, grid", [(1, (1, 1)), (2, (2, 1)), (4, (2, 2)), (6, (3, 2)),
                                        (7, (7, 1)), (8, (4, 2)), (16, (4, 4)),
                                        (131_072, (512, 256))])
def test_process_grid_is_the_squarest(size, grid):
    assert fft.process_grid(size) == grid


@pytest.mark.parametrize("n, p1, p2, size, message", [
    (10, 4, 1, 4, "n = 10 is not divisible by p1 = 4"),
    (12, 2, 5, 10, "n = 12 is not divisible by p2 = 5"),
    (12, 2, 2, 3, "p1 x p2 = 2 x 2 = 4, but there are 3 ranks"),
    (0, 1, 1, 1, "must be positive")])
def test_check_sizes_refuses(n, p1, p2, size, message):
    with pytest.raises(ValueError, match=re.escape(message)) as info:
        fft.check_sizes(n, p1, p2, size)
    assert "\n" not in str(info.value)


def test_pack_and_unpack_follow_their_index_formulas():
    rng = np.random.default_rng(1)
    a = rng.standard_normal((2, 3, 12)) + 1j * rng.standard_normal((2, 3, 12))
    send = fft.pack(a, 4)                                     # send[d, A, B, l] = a[A, B, 3d + l]
    assert send.shape == (4, 2, 3, 3) and send.flags.c_contiguous
    for d, o, b, line in np.ndindex(send.shape):
        assert send[d, o, b, line] == a[o, b, 3 * d + line]
    recv = rng.standard_normal((4, 2, 5, 3))                  # out[l, A, 5s + i] = recv[s, A, i, l]
    out = fft.unpack(recv)
    assert out.shape == (3, 2, 20) and out.flags.c_contiguous
    for s, o, i, line in np.ndindex(recv.shape):
        assert out[line, o, 5 * s + i] == recv[s, o, i, line]


def test_message_sizes_and_the_seeds_prediction():
    assert fft.message_elements(16, 4, 2) == (16**3 / 32, 16**3 / 16)
    s = fft.SEED003
    m1, m2 = fft.message_elements(s["n"], s["p1"], s["p2"])
    assert s["p1"] * m1 == s["p2"] * m2            # t1 = t2: every rank sends its whole pencil
    p = fft.seed_prediction()
    assert p["memory_total_gib"] == s["memory_gib_times_np"]            # eq. 14 in 2^30 bytes
    assert p["memory_per_core_gib"] == pytest.approx(6.763, abs=1e-3) and not p["fits"]
    assert p["fewest_cores"] == 147_744 and p["next_power_of_two"] == 262_144
    assert p["t1_s"] == pytest.approx(s["t_per_fft_s"], abs=0.005) and p["t2_s"] == p["t1_s"]
    assert p["step_s_as_seed"] == pytest.approx(s["seconds_per_step"], rel=0.01)


def test_the_field_has_the_known_spectrum():
    for n in (4, 8):
        assert np.abs(np.fft.fftn(fft.field(n)) - fft.exact_spectrum(n)).max() < 1e-10 * n**3


# --- under mpiexec: Python ---------------------------------------------------------------------

@needs_mpi
@pytest.mark.parametrize("ranks, grid", [(1, ()), (2, ()), (3, ()), (4, ()), (4, (1, 4))],
                         ids=["1", "2", "3", "4", "4-1x4"])
def test_python_pencil_fft_equals_fftn(ranks, grid):
    result = mpiexec(ranks, PYTHON, "-m", "course.parallel.fft_rank", "check", 12, *grid)
    assert result.returncode == 0, result.stdout + result.stderr
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert out["ranks"] == ranks and out["p1"] * out["p2"] == ranks
    if grid:
        assert (out["p1"], out["p2"]) == grid
    assert out["error_vs_fftn"] < 1e-13 and out["error_vs_modes"] < 1e-13, out
    assert (out["m1"], out["m2"]) == fft.message_elements(12, out["p1"], out["p2"])


@needs_mpi
@pytest.mark.parametrize("ranks, args, text", [(4, ("9",), "n = 9 is not divisible by p1 = 2"),
                                               (2, ("abc",), "positive integers"),
                                               (4, ("8", "3", "1"), "but there are 4 ranks")],
                         ids=["not-divisible", "not-a-number", "grid"])
def test_python_bad_input(ranks, args, text):
    result = mpiexec(ranks, PYTHON, "-m", "course.parallel.fft_rank", "check", *args)
    assert_one_error(result, "fft_rank", text)


# --- under mpiexec: the programs -----------------------------------------------------------------

PROGRAMS = [pytest.param("pencil_fft_c", marks=pytest.mark.compiled, id="c"),
            pytest.param("pencil_fft_f", marks=pytest.mark.compiled, id="fortran")]
TIMES = re.compile(r"best of 2: total (\S+) s, fft (\S+) s, transpose (\S+) s, alltoall (\S+) s")


def built(name: str):
    """The program (built if stale); skipped only where FFTW is missing (CMake skips it then)."""
    try:
        return native.binary(name)
    except FileNotFoundError:
        no_fftw = subprocess.run(["pkg-config", "--exists", "fftw3"]).returncode != 0 \
            if shutil.which("pkg-config") else True
        if no_fftw:
            pytest.skip("FFTW 3 not installed: the pencil FFT programs are not built")
        raise


@needs_mpi
@pytest.mark.parametrize("name", PROGRAMS)
@pytest.mark.parametrize("ranks, args, grid", [(1, ("8",), (1, 1)), (2, ("12",), (2, 1)),
                                               (4, ("8",), (2, 2)), (4, ("8", "1", "4"), (1, 4))],
                         ids=["1", "2", "4", "4-1x4"])
def test_program_gives_the_known_spectrum(name, ranks, args, grid):
    result = mpiexec(ranks, built(name), *args, 2)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    n = int(args[0])
    m1, m2 = fft.message_elements(n, *grid)
    assert lines[0].endswith(f"n = {n}, {ranks} ranks as p1 x p2 = {grid[0]} x {grid[1]}, "
                             f"m1 = {m1:.0f}, m2 = {m2:.0f} elements per message"), lines
    error = float(re.search(r"max error (\S+)", lines[1]).group(1))
    assert error < 1e-10, lines
    times = [float(v) for v in TIMES.search(lines[2]).groups()]
    assert all(t >= 0 for t in times) and times[0] >= max(times[1:]), lines


@needs_mpi
@pytest.mark.parametrize("name", PROGRAMS)
@pytest.mark.parametrize("ranks, args, text", [
    (4, ("9",), "N = 9 is not divisible by P1 = 2 (P1 x P2 = 2 x 2)"),
    (2, ("abc",), "argument 'abc': N must be a positive integer"),
    (2, ("8", "2", "2"), "P1 x P2 = 2 x 2 = 4, but the job has 2 ranks"),
    (2, ("8", "0"), "argument '0': REPEAT must be a positive integer")],
    ids=["not-divisible", "not-a-number", "grid", "repeat"])
def test_program_bad_input(name, ranks, args, text):
    assert_one_error(mpiexec(ranks, built(name), *args), name, text)


# --- the benchmark ---------------------------------------------------------------------------------

@needs_mpi
def test_bench_alltoall_writes_its_json(tmp_path):
    path = tmp_path / "a.json"
    result = run_course("bench", "alltoall", "--sizes", "8", "--ranks", "1", "2", "--repeat", "1",
                        "--json", path, timeout=120, env=env_with(MPIEXEC_TIMEOUT=100))
    assert result.returncode == 0, result.stderr
    data = json.loads(path.read_text())
    assert {"suite", "sizes", "message_bytes", "cores", "runs", "seed_plateau_gbs",
            "warning"} <= set(data)
    assert data["suite"] == "alltoall" and [r["ranks"] for r in data["runs"]] == [1, 2]
    for r in data["runs"]:
        a = r["alltoall"]
        assert len(a["seconds"]) == len(a["throughput_gbs"]) == len(data["message_bytes"])
        assert all(t > 0 for t in a["seconds"])
        assert r["oversubscribed"] == (r["ranks"] > data["cores"])
        assert [f["n"] for f in r["fft"]] == [8]
        if data["c_built"]:
            assert r["fft_c"][0]["max_error"] < 1e-10
    assert "MPI_Alltoall throughput" in result.stdout
