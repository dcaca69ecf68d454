"""Lecture 08_hybrid in Python: the parallel preconditioners of course.parallel.precond (Jacobi,
IC(0) localized per rank, additive Schwarz sweeps around it) in the distributed CG, under mpiexec
with 1 to 4 ranks (tests/mpi/check_hybrid.py), through `python -m course solve --parallel`, and
their bad input."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from conftest import PYTHON, ROOT, assert_one_error, env_with, run, run_course
from course import problems
from course.fem import fvm
from course.parallel import precond
from course.solvers import iccg, ordering

needs_mpi = pytest.mark.skipif(shutil.which("mpiexec") is None, reason="no mpiexec")


def test_the_internal_block_drops_the_external_columns():
    class Rows:                                        # 2 internal rows, 3 local nodes
        row_ptr = np.array([0, 3, 5], dtype=np.int32)
        col_idx = np.array([0, 1, 2, 0, 1], dtype=np.int32)
        val = np.array([4.0, -1.0, -2.0, -1.0, 4.0])
        n_rows = 2
    block = precond.internal_block(Rows)
    assert block.row_ptr.tolist() == [0, 2, 4]
    assert block.col_idx.tolist() == [0, 1, 0, 1] and block.val.tolist() == [4, -1, -1, 4]


def test_sweeps_make_a_symmetric_positive_definite_preconditioner():
    """On one rank A z needs no exchange: M^-1 = (I - (I - B A)^K) A^-1 is symmetric for every K,
    and K sweeps approach A^-1 (the error of (I - B A)^K shrinks)."""
    problem = fvm.poisson(5, 4, 3, lang="numpy", fmt="crs")
    a = problem.full_crs()
    dense = np.zeros((a.n, a.n))
    dense[np.repeat(np.arange(a.n), np.diff(a.row_ptr)), a.col_idx] = a.val

    class Rows:
        row_ptr, col_idx, val, n_rows = a.row_ptr, a.col_idx, a.val, a.n
    errors = []
    for sweeps in (1, 2, 3):
        m = precond.LocalizedIC0(Rows, lambda z: dense @ z, sweeps, "cm-rcm", 3, "numba")
        inverse = np.column_stack([m(e) for e in np.eye(a.n)])
        assert np.allclose(inverse, inverse.T, rtol=0, atol=1e-13 * np.abs(inverse).max())
        assert np.linalg.eigvalsh((inverse + inverse.T) / 2).min() > 0
        errors.append(np.linalg.norm(inverse @ dense - np.eye(a.n), 2))
    assert errors[0] > errors[1] > errors[2], errors


def test_one_sweep_is_the_serial_ic0():
    problem = fvm.poisson(6, 5, 4, lang="numpy", fmt="crs")
    a = problem.full_crs()

    class Rows:
        row_ptr, col_idx, val, n_rows = a.row_ptr, a.col_idx, a.val, a.n
    m = precond.preconditioner(Rows, "bjacobi-ic0", ordering_name="mc", colors=4)
    order = ordering.order(a, "mc", 4)
    factor = iccg.ic0(iccg.split(ordering.permute(a, order.perm)), "numba")
    r = np.random.default_rng(1).standard_normal(a.n)
    z = iccg.ic0_apply(factor, r[order.perm], order.color_ptr, "numba")
    assert np.array_equal(m(r), ordering.unpermute_vector(z, order.perm))
    assert m.colors == order.colors and m.name == "bjacobi-ic0" and m.sweeps == 1


@pytest.mark.compiled
@pytest.mark.parametrize("lang", ["c", "fortran"])
def test_compiled_substitutions_checked_once_give_the_same_z(lang):
    """C and Fortran check the factor once (native.ic0_apply_prepared) and reuse its buffers: every
    application gives the Numba kernels' z, a new array each time."""
    a = fvm.poisson(6, 5, 4, lang="numpy", fmt="crs").full_crs()

    class Rows:
        row_ptr, col_idx, val, n_rows = a.row_ptr, a.col_idx, a.val, a.n
    options = dict(ordering_name="cm-rcm", colors=3)
    reference = precond.preconditioner(Rows, "bjacobi-ic0", **options)
    compiled = precond.preconditioner(Rows, "bjacobi-ic0", lang=lang, **options)
    rng = np.random.default_rng(2)
    first, second = rng.standard_normal(a.n), rng.standard_normal(a.n)
    z_first = compiled(first)
    z_second = compiled(second)
    np.testing.assert_allclose(z_first, reference(first), rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(z_second, reference(second), rtol=1e-13, atol=1e-15)


BLAS_THREADS = """
import ctypes, runpy, sys
sys.argv = ["course", "--help"]
try:
    runpy.run_module("course", run_name="__main__")
except SystemExit:
    pass
import numpy
libs = sorted({line.split()[-1] for line in open("/proc/self/maps")
               if "openblas" in line.lower() and "/" in line})
names = ("scipy_openblas_get_num_threads64_", "openblas_get_num_threads64_",
         "openblas_get_num_threads")
counts = [getattr(ctypes.CDLL(lib), name)() for lib in libs for name in names
          if hasattr(ctypes.CDLL(lib), name)]
print(counts[0] if counts else "none")
"""


@pytest.mark.parametrize("user, expected", [({}, "1"), ({"OPENBLAS_NUM_THREADS": "2"}, "2")])
def test_the_course_command_keeps_blas_to_one_thread(user, expected):
    """`python -m course` starts NumPy's OpenBLAS with one thread (its pool, as large as
    OMP_NUM_THREADS, spun against the OpenMP team of a hybrid rank); a user's setting stays."""
    env = env_with(OMP_NUM_THREADS=2, **user)
    if not user:
        env.pop("OPENBLAS_NUM_THREADS", None)
    result = run([PYTHON, "-c", BLAS_THREADS], env=env, cwd=ROOT, check=True)
    threads = result.stdout.strip().splitlines()[-1]
    if threads == "none":
        pytest.skip("this NumPy does not use OpenBLAS")
    assert threads == expected, result.stdout[-300:]


@pytest.mark.parametrize("arguments, message", [
    (("bogus",), "precond must be one of"),
    (("asdd-ic0", 0), "asdd sweeps must be between 1"),
    (("bjacobi-ic0", 2), "sweeps are for asdd-ic0"),
    (("diagonal", None, "rcm"), "is for the IC(0) preconditioners"),
    (("asdd-ic0", 2, "mc"), "needs a number of colors"),
])
def test_check_precond_refuses(arguments, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        precond.check_precond(*arguments)


@needs_mpi
@pytest.mark.timeout(300)
@pytest.mark.parametrize("ranks", [1, 2, 4])
def test_preconditioners_under_mpiexec(ranks):
    result = run(["mpiexec", "-n", ranks, PYTHON, "-m", "mpi4py",
                  ROOT / "tests" / "mpi" / "check_hybrid.py"], timeout=240, cwd=ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    checks = [line.split(":")[0] for line in result.stdout.splitlines()]
    assert checks == ["bjacobi-ic0 natural ok", "bjacobi-ic0 cm-rcm ok"] + \
        (["history ok"] if ranks == 1 else []) + \
        [f"asdd-ic0 {a} ok" for a in ("pcg", "chronopoulos-gear", "gropp", "pipelined")] + \
        ["fem3d c ok"], result.stdout


@needs_mpi
@pytest.mark.timeout(300)
def test_cli_reports_the_preconditioner():
    result = run(["mpiexec", "-n", 2, PYTHON, "-m", "course", "solve", "fem3d", "--nx", "6",
                  "--ny", "5", "--nz", "4", "--parallel", "--partition", "metis", "--precond",
                  "asdd-ic0", "--asdd-sweeps", "3", "--ordering", "cm-rcm", "--colors", "3",
                  "--cg", "pipelined", "--iallreduce", "--json"], timeout=240, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert out["precond"] == "asdd-ic0" and out["asdd_sweeps"] == 3
    assert out["halo_exchanges_per_iteration"] == 3 and out["reductions_per_iteration"] == 1
    assert out["ordering"] == "cm-rcm" and len(out["colors_per_rank"]) == 2
    assert min(out["colors_per_rank"]) >= 3 and out["threads_per_rank"] == 1
    assert out["mpi_thread_level"] in ("funneled", "serialized", "multiple")
    assert {"spmv", "precond", "halo", "allreduce"} <= set(out["seconds"])
    assert out["converged"] and out["error_max"] <= 1e-6


def test_cli_one_rank_equals_the_serial_iccg():
    """`--parallel` without mpiexec (one rank) with bjacobi-ic0 is `--precond ic0`."""
    parallel = json.loads(run_course("solve", "poisson", "--nx", "9", "--ny", "8", "--nz", "7",
                                     "--parallel", "--precond", "bjacobi-ic0", "--ordering",
                                     "mc", "--colors", "5", "--lang", "c", "--json").stdout)
    serial = problems.poisson_iccg(9, 8, 7, ordering_name="mc", colors=5, lang="c")
    assert parallel["iterations"] == serial["iterations"]
    assert parallel["colors_per_rank"] == [serial["colors"]]
    assert abs(parallel["checksum"] - serial["checksum"]) <= 1e-8 * abs(serial["checksum"])


@pytest.mark.parametrize("options, name, by_course", [
    (("--parallel", "--precond", "asdd-ic0", "--asdd-sweeps", "0"), "--asdd-sweeps", False),
    (("--parallel", "--precond", "bjacobi-ic0", "--asdd-sweeps", "2"), "--asdd-sweeps", True),
    (("--parallel", "--precond", "ic0"), "bjacobi-ic0", True),
    (("--precond", "asdd-ic0"), "needs --parallel", True),
    (("--parallel", "--ordering", "rcm"), "--ordering", True),
    (("--parallel", "--precond", "asdd-ic0", "--ordering", "mc", "--colors", "500"),
     "rank 0: colors 500 exceed its 448 internal nodes", True),
])
def test_cli_bad_preconditioner_options(options, name, by_course):
    result = run([PYTHON, "-m", "course", "solve", "fem3d", "--nx", "6", "--ny", "7", "--nz", "7",
                  *options], timeout=120, cwd=ROOT)
    assert_one_error(result, name, by_course)


# --- python -m course bench hybrid (a smoke test: it runs and reports; no timing is asserted) ---

@needs_mpi
@pytest.mark.timeout(300)
def test_bench_hybrid_smoke(tmp_path):
    out, plot = tmp_path / "hybrid.json", tmp_path / "hybrid.png"
    result = run([PYTHON, "-m", "course", "bench", "hybrid", "--sizes", "8", "--layouts", "1x2",
                  "3x1", "--repeat", "2", "--json", out, "--plot", plot], cwd=ROOT, timeout=250)
    assert result.returncode == 0, result.stderr
    data = json.loads(out.read_text())
    assert data["suite"] == "hybrid" and data["lang"] == "c" and data["stream"]["triad_gbs"] > 0
    assert data["repeat"] == 2 and data["driver"] == []
    assert [(r["layout"], r["precond"]) for r in data["runs"]] == [
        (layout, p) for layout in ("1x2", "3x1")
        for p in ("diagonal", "bjacobi-ic0", "asdd-ic0")]
    for r in data["runs"]:
        assert r["program"] == "fem3d_mpi_c" and r["unknowns"] == 9 ** 3
        assert r["converged"] and r["same_iterations"] and len(r["us_runs"]) == 2
        assert r["us_min"] <= r["us_per_iteration"] <= r["us_max"]
        assert r["us_min"] == min(r["us_runs"]) and r["us_max"] == max(r["us_runs"])
        assert r["oversubscribed"] == (r["ranks"] * r["threads"] > data["cores"])
        assert r["ordering"] == ("cm-rcm" if r["threads"] > 1 and r["precond"] != "diagonal"
                                 else "natural")
        assert r["halo_exchanges_per_iteration"] == (2 if r["precond"] == "asdd-ic0" else 1)
        assert r["bytes_per_iteration"] == r["read_bytes"] + r["written_bytes"]
        assert 0 < r["fraction_of_bandwidth_bound"]
    assert plot.stat().st_size > 10_000
    assert "bjacobi-ic0" in result.stdout and f"wrote {out}" in result.stdout
    assert "8^3: diagonal:" in result.stdout


def _case(layout, us, precond="diagonal", oversubscribed=False):
    return {"n": 8, "layout": layout, "precond": precond, "oversubscribed": oversubscribed,
            "us_per_iteration": us[1], "us_min": us[0], "us_max": us[2]}


def test_fastest_layout_names_a_winner_only_beyond_the_spread():
    from course.bench import hybrid
    apart = {"sizes": [8], "runs": [_case("2x1", (90, 100, 110)), _case("1x2", (120, 130, 140)),
                                     _case("4x1", (10, 20, 30), oversubscribed=True)]}
    verdict = hybrid.fastest_layout(apart, "diagonal")
    assert verdict["fastest"] == "2x1" and verdict["tied"] == ["2x1"]
    assert verdict["text"].startswith("diagonal: fastest 2 × 1, 100 µs (90–110), beyond the "
                                      "spread of 1 × 2, 130 µs (120–140)")
    assert "4 × 1" not in verdict["text"]
    close = {"sizes": [8], "runs": [_case("2x1", (90, 100, 125)), _case("1x2", (120, 121, 140))]}
    verdict = hybrid.fastest_layout(close, "diagonal")
    assert verdict["fastest"] is None and verdict["tied"] == ["2x1", "1x2"]
    assert "a tie within the spread" in verdict["text"]
    with pytest.raises(ValueError, match="no run of asdd-ic0"):
        hybrid.fastest_layout(close, "asdd-ic0")


def test_traffic_splits_reads_and_writes_and_keeps_the_total():
    """bytes_per_iteration (bench petsc imports it) keeps its total: the SpMV, 15 vectors, and
    M^-1 (Jacobi 3 vectors; IC(0) its triangles and 9 vectors; each extra sweep a product and 4
    vectors); traffic_per_iteration splits it."""
    from course import timing
    from course.bench import hybrid
    n, nnz = 1000, 27_000
    spmv = timing.spmv_bytes(n, nnz)
    ic0 = 12 * (nnz - n) + 9 * 8 * n
    assert hybrid.bytes_per_iteration(n, nnz, "diagonal", 1) == spmv + 15 * 8 * n + 3 * 8 * n
    assert hybrid.bytes_per_iteration(n, nnz, "bjacobi-ic0", 1) == spmv + 15 * 8 * n + ic0
    assert hybrid.bytes_per_iteration(n, nnz, "asdd-ic0", 2) == \
        spmv + 15 * 8 * n + 2 * ic0 + spmv + 4 * 8 * n
    read, written = hybrid.traffic_per_iteration(n, nnz, "diagonal", 1)
    assert written == 8 * n + 3 * 8 * n + 8 * n               # y, three updates, z
    assert read + written == hybrid.bytes_per_iteration(n, nnz, "diagonal", 1)
    one, two = (hybrid.traffic_per_iteration(n, nnz, "asdd-ic0", k) for k in (1, 2))
    spmv_read, spmv_written = timing.spmv_traffic(n, nnz)
    assert two[1] - one[1] == 2 * 8 * n + spmv_written + 8 * n    # IC(0)'s 2, t, z
    assert two[0] - one[0] == 12 * (nnz - n) + 7 * 8 * n + spmv_read + 3 * 8 * n


def test_default_size_exceeds_four_times_the_cache():
    from course.bench import hybrid
    for cache in (2**20, 32 * 2**20, 256 * 2**20):
        n = hybrid.default_size(cache)
        assert hybrid.working_set_bytes(n) >= 4 * cache or n == hybrid.SIZE_CAP
        assert hybrid.working_set_bytes(n - 8) < 4 * cache
    assert hybrid.default_size(0) == 48


@pytest.mark.parametrize("words, message", [
    (("--layouts", "2by1"), "a layout is RANKSxTHREADS"),
    (("--layouts", "0x2"), "at least 1 rank"),
    (("--langs", "c", "fortran"), "one language"),
])
def test_bench_hybrid_refuses(words, message):
    result = run_course("bench", "hybrid", "--sizes", "8", *words, timeout=120)
    assert result.returncode == 2 and message in result.stderr, result.stderr
    assert "Traceback" not in result.stderr


def _driver_out(solve, parts):
    return {"iterations": 10, "converged": True, "precond": "diagonal", "asdd_sweeps": 1,
            "ordering": "natural", "colors_per_rank": [1, 1],
            "seconds": {"solve": solve, **dict(zip(("spmv", "precond", "halo", "allreduce"),
                                                    parts))}}


def test_driver_rest_is_not_resolved_when_the_parts_pass_the_total():
    """The parts are each the slowest rank's: when they add up to more than the total, the rest
    is flagged unresolved (summary prints n/r, not a clipped 0), and the table says how many runs
    it took the best of."""
    from course.bench import hybrid
    resolved = hybrid.summarise_driver(_driver_out(1.0, (0.2, 0.1, 0.1, 0.1)), 8, 2, 1, 2)
    assert resolved["rest_resolved"] and resolved["rest_s"] == pytest.approx(0.05)
    clipped = hybrid.summarise_driver(_driver_out(1.0, (0.5, 0.1, 0.3, 0.3)), 8, 2, 1, 2)
    assert not clipped["rest_resolved"] and clipped["rest_s"] == 0.0
    results = {"cores": 2, "lang": "c", "repeat": 3, "runs": [], "sizes": [8], "warning": None,
               "stream": {"read_gbs": 1.0, "triad_gbs": 1.0}, "driver": [resolved, clipped],
               "driver_repeat": 1}
    lines = hybrid.summary_hybrid(results).splitlines()
    assert "one run" in lines[2] and "best run" not in lines[2]
    assert lines[-2].split()[-1] == "50000.0" and lines[-1].split()[-1] == "n/r"
    assert "best of 4 runs" in hybrid.summary_hybrid({**results, "driver_repeat": 4})
