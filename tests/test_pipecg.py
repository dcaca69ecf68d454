"""Lecture 06_pipecg in Python: the four CG variants of course.solvers.krylov (PCG,
Chronopoulos-Gear, Gropp, pipelined) agree with a direct solve and with each other, count the
reductions they promise, close the residual gap with residual replacement; under mpiexec with 1 to
4 ranks they equal the serial solve with blocking and non-blocking reductions; the CLI options."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
import scipy.sparse
import scipy.sparse.linalg

from conftest import COMMON_FIELDS, PYTHON, ROOT, assert_one_error, run, run_course
from course import solvers
from course.fem import assembly, fvm
from course.fem.mesh import box_mesh
from course.parallel.local import row_local_data
from course.parallel.poisson import poisson_local
from course.sparse import matvec_numpy

PROMISED = {"pcg": 2, "chronopoulos-gear": 1, "gropp": 2, "pipelined": 1}


def model_system(nx=12, ny=9, nz=7):
    """The 02_fem3d model problem with a heat flux: T fixed on zmax."""
    box = box_mesh(nx, ny, nz)
    exact, _ = assembly.fem3d_model_exact(box, "zmax", 1.0, 1.0, 0.0)
    a, rhs = assembly.fem3d_assemble(box, 1.0, 1.0, "numpy")
    fixed = np.zeros(box.n_node, dtype=bool)
    fixed[box.face_nodes("zmax")] = True
    assembly.dirichlet(a, rhs, fixed, np.where(fixed, exact(box.xyz), 0.0), "numpy")
    return a, rhs


def random_spd(n=300, seed=5):
    """A sparse SPD matrix with a spread spectrum (CG needs tens of iterations)."""
    rng = np.random.default_rng(seed)
    m = scipy.sparse.random(n, n, density=0.02, random_state=rng)
    a = (m @ m.T + scipy.sparse.diags(rng.uniform(0.01, 10.0, n))).tocsr()
    return a, rng.standard_normal(n)


class Recording(solvers.Reductions):
    """Serial sums that also record how many values each reduction carries."""

    def __init__(self):
        super().__init__()
        self.sizes = []

    def start(self, *local_sums):
        self.sizes.append(len(local_sums))
        return super().start(*local_sums)


@pytest.fixture(scope="module")
def spd():
    a, b = random_spd()
    dinv = 1.0 / a.diagonal()
    return a, b, (lambda v: a @ v), (lambda r: dinv * r)


@pytest.mark.parametrize("algorithm", solvers.ALGORITHMS)
def test_variant_solves_like_a_direct_solver(spd, algorithm):
    a, b, matvec, precond = spd
    result = solvers.krylov(matvec, b, precond, algorithm=algorithm, tol=1e-10, max_iter=2000)
    reference = scipy.sparse.linalg.spsolve(a.tocsc(), b)
    pcg = solvers.krylov(matvec, b, precond, algorithm="pcg", tol=1e-10, max_iter=2000)
    assert result.converged and pcg.iterations > 20
    assert abs(result.iterations - pcg.iterations) <= 3, (result.iterations, pcg.iterations)
    assert np.max(np.abs(result.x - reference)) <= 1e-7 * np.max(np.abs(reference))
    assert result.true_relative_residual <= 1e-9
    assert result.algorithm == algorithm


@pytest.mark.parametrize("algorithm", solvers.ALGORITHMS)
def test_reductions_are_counted_as_promised(spd, algorithm):
    _, b, matvec, precond = spd
    reductions = Recording()
    result = solvers.krylov(matvec, b, precond, reductions, algorithm, tol=1e-10,
                            monitor_true_residual=True)
    assert result.reductions_per_iteration == [PROMISED[algorithm]] * result.iterations
    # one reduction carries every dot product of its step: (p,q) | (r,u),(r,r) for the
    # two-reduction variants, (r,u),(w,u),(r,r) at once for the others
    loop = {"pcg": {1, 2}, "gropp": {1, 2}, "chronopoulos-gear": {3}, "pipelined": {3}}
    assert set(reductions.sizes[1:-1]) - {1} <= loop[algorithm], reductions.sizes


def test_pcg_is_the_course_cg():
    a, b = model_system()
    dinv = solvers.jacobi(a)
    matvec = lambda v: matvec_numpy(a.row_ptr, a.col_idx, a.val, v)   # noqa: E731
    plain = solvers.cg(matvec, b, lambda r: dinv * r, tol=1e-12)
    variant = solvers.krylov(matvec, b, lambda r: dinv * r, algorithm="pcg", tol=1e-12)
    assert np.array_equal(plain.x, variant.x) and plain.iterations == variant.iterations
    compiled = solvers.pcg_jacobi(a, b, "c", tol=1e-12)
    assert abs(compiled.iterations - plain.iterations) <= 1


def test_residual_replacement_closes_the_pipelined_gap():
    """Run far past convergence: the true residual of pipelined CG stalls far above PCG's and far
    above its own recursive residual (the solver believes a lie); replacing the recurrences every
    20 iterations keeps the two equal. (How low the true residual then stalls depends on the
    rounding of the BLAS kernels: with OpenBLAS's Haswell kernels on an AMD EPYC, replacement left
    it higher than without, so that is not asserted.)"""
    a, b = model_system(16, 12, 10)
    dinv = solvers.jacobi(a)
    matvec = lambda v: matvec_numpy(a.row_ptr, a.col_idx, a.val, v)   # noqa: E731

    def final(algorithm, every):
        r = solvers.krylov(matvec, b, lambda v: dinv * v, algorithm=algorithm, tol=1e-300,
                           max_iter=300, replace_every=every, monitor_true_residual=True)
        assert len(r.true_residuals) == r.iterations == 300
        return r

    plain, replaced, pcg = final("pipelined", 0), final("pipelined", 20), final("pcg", 0)
    assert pcg.true_residuals[-1] < 1e-12
    assert plain.true_residuals[-1] > 20 * pcg.true_residuals[-1]        # accuracy lost
    assert plain.true_residuals[-1] > 20 * plain.residuals[-1]           # the gap
    gap = np.array(replaced.true_residuals) / np.array(replaced.residuals[1:])
    assert np.all((gap[-100:] > 0.5) & (gap[-100:] < 2)), "replacement: true = recursive"


@pytest.mark.parametrize("call, message", [
    (lambda mv, b: solvers.krylov(mv, b, algorithm="bicgstab"), "cg must be one of"),
    (lambda mv, b: solvers.krylov(mv, b, replace_every=-1), "must be an integer >= 0"),
    (lambda mv, b: solvers.krylov(mv, b, replace_every=2.5), "must be an integer >= 0"),
])
def test_bad_arguments(call, message):
    with pytest.raises(ValueError, match=message):
        call(lambda v: v, np.ones(3))


def test_max_iter_stops_every_variant(spd):
    _, b, matvec, precond = spd
    for algorithm in solvers.ALGORITHMS:
        result = solvers.krylov(matvec, b, precond, algorithm=algorithm, tol=1e-14, max_iter=4)
        assert result.iterations == 4 and not result.converged


def test_row_local_data_tables_match_between_neighbours():
    """The local data of a matrix distributed by rows (Poisson, 03_openmp): what a rank exports
    to a neighbour is what that neighbour imports from it, node for node; every column of an
    internal row is local; a rank's own rows (poisson_local, from its cells alone) have the same
    local data as row_local_data makes from the whole matrix, and are the whole matrix's rows."""
    problem = fvm.poisson(7, 5, 4, lang="numpy", fmt="crs")
    off, full = problem.off_crs(), problem.full_crs()
    owner = np.random.default_rng(4).integers(0, 3, problem.n).astype(np.int32)
    owner[:3] = np.arange(3)
    locals_ = [row_local_data(off.row_ptr, off.col_idx, owner, r) for r in range(3)]
    for loc in locals_:
        assert np.all(owner[loc.global_ids[:loc.n_internal]] == loc.rank)
        own, matrix, b = poisson_local(7, 5, 4, 1.0, 1.0, 1.0, np.flatnonzero(owner == loc.rank),
                                       owner.__getitem__, loc.rank, 3)
        assert own == loc
        assert matrix.col_idx.min() >= 0 and matrix.n_rows == loc.n_internal
        cells = loc.global_ids[:loc.n_internal]
        rows = [full.row_ptr[c] + np.arange(full.row_ptr[c + 1] - full.row_ptr[c]) for c in cells]
        assert np.array_equal(loc.global_ids[matrix.col_idx], full.col_idx[np.concatenate(rows)])
        assert np.array_equal(matrix.val, full.val[np.concatenate(rows)])
        assert np.array_equal(b, problem.b[cells])
        for m, q in enumerate(loc.neighbours):
            back = int(np.flatnonzero(locals_[q].neighbours == loc.rank)[0])
            assert np.array_equal(loc.global_ids[loc.exports_to(m)],
                                  locals_[q].global_ids[locals_[q].imports_from(back)])
    assert sum(loc.n_internal for loc in locals_) == problem.n


# --- under mpiexec -------------------------------------------------------------------------------

needs_mpi = pytest.mark.skipif(shutil.which("mpiexec") is None, reason="no mpiexec")


@needs_mpi
@pytest.mark.timeout(400)
@pytest.mark.parametrize("ranks, method", [(1, "blocks"), (2, "blocks"), (3, "metis"),
                                           (4, "metis")])
def test_variants_under_mpiexec(ranks, method):
    result = run(["mpiexec", "-n", ranks, PYTHON, "-m", "mpi4py",
                  ROOT / "tests" / "mpi" / "check_pipecg.py", 7, 5, 6, method],
                 timeout=300, cwd=ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert [line.split(":")[0] for line in lines] == \
        [f"{a} ok" for a in solvers.ALGORITHMS] + ["progress ok", "poisson ok"]


@needs_mpi
@pytest.mark.timeout(300)
def test_cli_pipelined_with_iallreduce():
    result = run(["mpiexec", "-n", 2, PYTHON, "-m", "course", "solve", "fem3d", "--nx", "6",
                  "--ny", "5", "--nz", "4", "--parallel", "--cg", "pipelined", "--iallreduce",
                  "--residual-replacement", "5", "--json"], timeout=240, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert COMMON_FIELDS <= set(out)
    assert out["algorithm"] == "pipelined" and out["iallreduce"] is True
    assert out["reductions_per_iteration"] == 1 and out["residual_replacement"] == 5
    assert out["true_relative_residual"] <= 1e-7
    assert {"allreduce", "overlapped", "halo"} <= set(out["seconds"])


@pytest.mark.parametrize("options, name", [
    (("--cg", "gropp"), "--cg"),
    (("--iallreduce",), "--iallreduce"),
    (("--residual-replacement", "4"), "--residual-replacement"),
])
def test_cg_options_need_parallel(options, name):
    result = run_course("solve", "fem3d", "--nx", "3", "--ny", "3", "--nz", "3", *options,
                        "--json", timeout=120)
    assert_one_error(result, name, by_course=True)


@pytest.mark.parametrize("options, name", [
    (("--cg", "cgs"), "--cg"),
    (("--residual-replacement", "0"), "--residual-replacement"),
])
def test_bad_cg_options(options, name):
    result = run_course("solve", "fem3d", "--nx", "3", "--ny", "3", "--nz", "3", "--parallel",
                        *options, "--json", timeout=120)
    assert_one_error(result, name, by_course=False)


# --- python -m course bench pipecg (a smoke test: it runs and reports; no timing is asserted) ---

@needs_mpi
@pytest.mark.timeout(600)
def test_bench_pipecg_smoke(tmp_path):
    out, plot = tmp_path / "pipecg.json", tmp_path / "pipecg.png"
    result = run([PYTHON, "-m", "course", "bench", "pipecg", "--sizes", "6", "--ranks", "1", "3",
                  "--repeat", "1", "--json", out, "--plot", plot], cwd=ROOT, timeout=500)
    assert result.returncode == 0, result.stderr
    data = json.loads(out.read_text())
    assert data["suite"] == "pipecg" and data["n"] == 6 and data["mpi"]
    assert [r["ranks"] for r in data["runs"]] == [1, 3]
    for run_ in data["runs"]:
        assert run_["oversubscribed"] == (run_["ranks"] > data["cores"])
        assert [(v["algorithm"], v["iallreduce"]) for v in run_["variants"]] == \
            [(a, i) for a in solvers.ALGORITHMS for i in (False, True)] + [("pipelined", True)]
        assert [v["progress_chunks"] for v in run_["variants"]] == [1] * 8 + [8]
        for v in run_["variants"]:
            assert v["reductions_per_iteration"] == PROMISED[v["algorithm"]]
            assert v["seconds_per_iteration"] > 0 and v["spmv_s"] > 0
            if not v["iallreduce"]:
                assert v["overlapped_s"] == 0.0
            elif v["algorithm"] in ("gropp", "pipelined"):     # work between start and wait
                assert v["overlapped_s"] > 0.0
        assert set(run_["allreduce"]) == {"one_double_s", "three_doubles_s",
                                          "three_single_calls_s"}
        assert (run_["model"] is None) == (run_["ranks"] == 1)
    assert plot.stat().st_size > 10_000
    assert "pcg" in result.stdout and f"wrote {out}" in result.stdout


def test_bench_pipecg_refuses_other_options():
    result = run_course("bench", "pipecg", "--cg-size", "8", timeout=120)
    assert result.returncode == 2 and "--cg-size is for the halo suite" in result.stderr
    result = run_course("bench", "pipecg", "--sizes", "8", "12", timeout=120)
    assert result.returncode != 0 and "one size" in result.stderr


# --- solve poisson --parallel -------------------------------------------------------------------

@needs_mpi
@pytest.mark.timeout(400)
@pytest.mark.parametrize("ranks, options", [
    (1, ("--cg", "pcg")),
    (2, ("--cg", "chronopoulos-gear", "--exchange", "persistent")),
    (3, ("--cg", "gropp", "--iallreduce", "--partition", "metis")),
    (4, ("--cg", "pipelined", "--px", "2", "--py", "2", "--pz", "1", "--exchange", "neighbor")),
], ids=lambda v: "-".join(v) if isinstance(v, tuple) else str(v))
def test_cli_poisson_parallel_equals_the_ladder(ranks, options):
    """The distributed Poisson solve against the serial ladder (diagonal-scaled CG, the same
    iterates): the same sum of the solution, iterations within 3 of it."""
    serial = json.loads(run_course("solve", "poisson", "--nx", "9", "--ny", "8", "--nz", "7",
                                   "--tol", "1e-10", "--json", timeout=120).stdout)
    result = run(["mpiexec", "-n", ranks, PYTHON, "-m", "course", "solve", "poisson", "--nx", "9",
                  "--ny", "8", "--nz", "7", "--tol", "1e-10", "--parallel", *options, "--json"],
                 timeout=300, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert COMMON_FIELDS <= set(out) and out["problem"] == "poisson" and out["ranks"] == ranks
    assert out["unknowns"] == serial["unknowns"] and out["nnz"] == serial["nnz"]
    assert abs(out["checksum"] - serial["checksum"]) <= 1e-8 * abs(serial["checksum"])
    assert abs(out["iterations"] - serial["iterations"]) <= 3, (out, serial["iterations"])
    assert out["reductions_per_iteration"] == PROMISED[out["algorithm"]]


@pytest.mark.parametrize("options, name", [
    (("--parallel", "--version", "v2"), "--version"),
    (("--parallel", "--format", "ell"), "--format"),
    (("--exchange", "p2p"), "--exchange"),
])
def test_poisson_parallel_option_errors(options, name):
    result = run_course("solve", "poisson", "--nx", "4", "--ny", "4", "--nz", "4", *options,
                        "--json", timeout=120)
    assert_one_error(result, name, by_course=True)


@needs_mpi
def test_poisson_parallel_needs_two_cells_per_axis():
    result = run(["mpiexec", "-n", 2, PYTHON, "-m", "course", "solve", "poisson", "--nx", "1",
                  "--ny", "4", "--nz", "4", "--parallel", "--json"], timeout=120, cwd=ROOT)
    assert result.returncode == 2 and "at least 2 cells" in result.stderr
    assert "Traceback" not in result.stderr
