"""Lecture 04_iccg: orderings (valid colorings, the same in every language, RCM against SciPy),
IC(0) against its definition and against Cholesky, the colored substitution (every language,
bitwise the same for 1 and 2 threads), ICCG iterations across languages, threads and orderings,
wrong arrays refused before the kernels, the CLI fields and `bench iccg`."""

from __future__ import annotations

import json

import numpy as np
import pytest
import scipy.sparse
import scipy.sparse.csgraph

from conftest import COMMON_FIELDS, run_course, solve_json
from course import native
from course.fem import fvm
from course.solvers import ordering
from course.solvers import iccg as ic
from course.sparse import CRS

COMPILED = [pytest.param(lang, id=lang, marks=pytest.mark.compiled) for lang in ("c", "fortran")]
LANGS = [pytest.param("numpy", id="numpy"), pytest.param("numba", id="numba"), *COMPILED]
CASES = [("natural", None), ("cm", None), ("rcm", None), ("mc", 2), ("mc", 3), ("mc", 7),
         ("cm-rcm", 2), ("cm-rcm", 3), ("cm-rcm", 5)]


def poisson_matrix(n=8, m=None):
    p = fvm.poisson(n, m or n, n - 1, 1.0, 0.7, 1.3, lang="numpy")
    return p.full_crs(), p.b


def fem_like_matrix(nx=4, ny=3, nz=3):
    """A 27-point SPD M-matrix (the graph of tri-linear hexahedra on a box of nodes): it has
    triangles, so IC(0) changes its off-diagonal entries too."""
    idx = np.arange(nx * ny * nz).reshape(nz, ny, nx)
    rows, cols = [], []
    for dz in (-1, 0, 1):
        for dy in (-1, 0, 1):
            for dx in (-1, 0, 1):
                if (dx, dy, dz) == (0, 0, 0):
                    continue
                a = idx[max(0, -dz):nz - max(0, dz), max(0, -dy):ny - max(0, dy),
                        max(0, -dx):nx - max(0, dx)]
                b = idx[max(0, dz):nz - max(0, -dz) or None, max(0, dy):ny - max(0, -dy) or None,
                        max(0, dx):nx - max(0, -dx) or None]
                rows.append(a.ravel())
                cols.append(b.ravel())
    rows, cols = np.concatenate(rows), np.concatenate(cols)
    n = nx * ny * nz
    off = scipy.sparse.csr_matrix((-np.ones(rows.size), (rows, cols)), (n, n))
    a = off + scipy.sparse.diags(np.full(n, 27.0))          # diagonally dominant
    return CRS.from_scipy(a)


def dense_ic0(a: np.ndarray):
    """IC(0) by its definition, densely, with the pattern mask: (d, L strictly lower)."""
    n = a.shape[0]
    mask = a != 0
    lo, d = np.zeros_like(a), np.zeros(n)
    for i in range(n):
        for j in range(i):
            if mask[i, j]:
                lo[i, j] = a[i, j] - np.sum(lo[i, :j] * lo[j, :j] / np.where(d[:j] > 0, d[:j], 1))
        d[i] = a[i, i] - np.sum(lo[i, :i] ** 2 / np.where(d[:i] > 0, d[:i], 1))
    return d, lo


# --- orderings -----------------------------------------------------------------------------------

@pytest.mark.parametrize("name, k", CASES)
def test_orderings_valid_and_equal_in_every_language(name, k):
    a, _ = poisson_matrix(7, 6)
    ptr, adj = ordering.adjacency(a)
    reference = ordering.order(a, name, k, lang="numpy")
    if name != "natural":
        assert ordering.is_valid_coloring(ptr, adj, reference.perm, reference.color_ptr)
    if k is not None:
        assert reference.colors >= k
    for lang in ("numba", "c", "fortran"):
        other = ordering.order(a, name, k, lang=lang)
        np.testing.assert_array_equal(other.perm, reference.perm, err_msg=lang)
        np.testing.assert_array_equal(other.color_ptr, reference.color_ptr, err_msg=lang)


@pytest.mark.parametrize("lang", ["numba", "c", "fortran"])
def test_orderings_of_a_27_point_graph_are_valid(lang):
    a = fem_like_matrix(5, 4, 3)
    ptr, adj = ordering.adjacency(a)
    for name, k in CASES[1:]:
        o = ordering.order(a, name, k, lang=lang)
        assert ordering.is_valid_coloring(ptr, adj, o.perm, o.color_ptr), (name, k)
    # a coloring that is not one is detected
    bad = ordering.order(a, "mc", 3, lang=lang)
    assert not ordering.is_valid_coloring(ptr, adj, bad.perm, np.array([0, a.n], np.int32))


def test_known_colorings_of_the_grid():
    """MC(2) and CM-RCM(2) are red-black on the grid; RCM's wavefronts are its nx+ny+nz-2
    diagonal planes; incompatible nodes: 1 for natural and RCM, every node of the first color
    for MC."""
    a, _ = poisson_matrix(6)                         # 6 x 6 x 5 cells
    ptr, adj = ordering.adjacency(a)
    for name in ("mc", "cm-rcm"):
        o = ordering.order(a, name, 2)
        assert o.colors == 2 and list(np.diff(o.color_ptr)) == [90, 90]
        assert ordering.incompatible_nodes(ptr, adj, o.perm) == 90
    rcm = ordering.order(a, "rcm")
    assert rcm.colors == 6 + 6 + 5 - 2
    assert ordering.incompatible_nodes(ptr, adj, rcm.perm) == 1
    assert ordering.incompatible_nodes(ptr, adj, np.arange(a.n, dtype=np.int32)) == 1


def test_rcm_bandwidth_as_scipy():
    """Same start rule (least degree) and neighbour order (by degree) as SciPy; SciPy breaks
    ties between start candidates differently, so compare the bandwidth, not the permutation."""
    for a in (poisson_matrix(9)[0], fem_like_matrix(6, 5, 4)):
        ptr, adj = ordering.adjacency(a)
        ours = ordering.bandwidth(ptr, adj, ordering.order(a, "rcm").perm)
        theirs = ordering.bandwidth(ptr, adj, scipy.sparse.csgraph.reverse_cuthill_mckee(
            a.to_scipy(), symmetric_mode=True).astype(np.int32))
        assert ours <= 1.25 * theirs
        assert ours < ordering.bandwidth(ptr, adj, np.random.default_rng(1).permutation(a.n)
                                         .astype(np.int32))


def test_permute_and_back():
    a, b = poisson_matrix(5)
    o = ordering.order(a, "cm-rcm", 3)
    ap = ordering.permute(a, o.perm)
    x = np.random.default_rng(0).random(a.n)
    y = ap.to_scipy() @ ordering.permute_vector(x, o.perm)
    np.testing.assert_allclose(ordering.unpermute_vector(y, o.perm), a.to_scipy() @ x)


def test_ncolortot_convention():
    assert ordering.from_ncolortot(5) == ("mc", 5)
    assert ordering.from_ncolortot(1) == ("natural", None)
    assert ordering.from_ncolortot(0) == ("cm", None)
    assert ordering.from_ncolortot(-1) == ("rcm", None)
    assert ordering.from_ncolortot(-4) == ("cm-rcm", 4)


# --- IC(0) ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("lang", LANGS)
def test_ic0_against_dense_definition(lang):
    for a in (poisson_matrix(4)[0], fem_like_matrix(4, 3, 3)):
        s = ic.split(a)
        f = ic.ic0(s, lang)
        d_ref, lo_ref = dense_ic0(a.to_dense())
        np.testing.assert_allclose(f.d, d_ref, rtol=1e-12)
        lo = scipy.sparse.csr_matrix((f.lower.val, f.lower.col_idx, f.lower.row_ptr),
                                     (a.n, a.n)).toarray()
        np.testing.assert_allclose(lo, lo_ref, rtol=1e-12, atol=1e-14)
        # the defining property: M = (D + L) D^-1 (D + L^T) equals A on A's pattern
        m = (np.diag(f.d) + lo) @ np.diag(1 / f.d) @ (np.diag(f.d) + lo.T)
        dense = a.to_dense()
        np.testing.assert_allclose(m[dense != 0], dense[dense != 0], rtol=1e-12)
        up = scipy.sparse.csr_matrix((f.upper.val, f.upper.col_idx, f.upper.row_ptr),
                                     (a.n, a.n)).toarray()
        np.testing.assert_array_equal(up, lo.T)


def test_ic0_is_modified_diagonal_for_7_point_but_not_27_point():
    a, _ = poisson_matrix(5)
    o = ordering.order(a, "mc", 3)
    s = ic.split(ordering.permute(a, o.perm))
    np.testing.assert_array_equal(ic.ic0(s).lower.val, s.lower.val)
    s = ic.split(fem_like_matrix(4, 3, 3))
    assert not np.allclose(ic.ic0(s).lower.val, s.lower.val)


@pytest.mark.parametrize("lang", LANGS)
def test_ic0_of_tridiagonal_is_cholesky(lang):
    n = 12
    t = scipy.sparse.diags([-1.0, 2.5, -1.0], [-1, 0, 1], (n, n))
    a = CRS.from_scipy(t)
    f = ic.ic0(ic.split(a), lang)
    lo = scipy.sparse.csr_matrix((f.lower.val, f.lower.col_idx, f.lower.row_ptr), (n, n))
    chol = (scipy.sparse.diags(f.d) + lo).toarray() @ np.diag(f.d ** -0.5)
    np.testing.assert_allclose(chol, np.linalg.cholesky(t.toarray()), rtol=1e-13)


@pytest.mark.parametrize("lang", LANGS)
def test_ic0_breakdown_is_an_exception(lang):
    a = CRS.from_scipy(scipy.sparse.csr_matrix(np.array([[1.0, 2.0], [2.0, 1.0]])))
    with pytest.raises(ValueError, match="broke down"):
        ic.ic0(ic.split(a), lang)


# --- substitution and ICCG -----------------------------------------------------------------------

@pytest.mark.parametrize("name, k", [("natural", None), ("rcm", None), ("mc", 3), ("cm-rcm", 4)])
def test_substitution_all_languages_and_threads(name, k):
    from course import resources
    a = fem_like_matrix(6, 5, 4)
    o = ordering.order(a, name, k)
    f = ic.ic0(ic.split(ordering.permute(a, o.perm)))
    r = np.random.default_rng(3).random(a.n)
    ref = ic.ic0_apply(f, r, o.color_ptr, "numpy")
    for lang in ("numba", "c", "fortran"):
        outs = []
        for t in (1, 2):
            resources.set_threads(lang, t)
            outs.append(ic.ic0_apply(f, r, o.color_ptr, lang))
        resources.set_threads(lang, resources.default_threads(lang))
        np.testing.assert_allclose(outs[0], ref, rtol=1e-12, err_msg=lang)
        np.testing.assert_array_equal(outs[0], outs[1], err_msg=lang)   # bitwise


@pytest.fixture(scope="module")
def poisson16():
    p = fvm.poisson(16, 16, 16, lang="numba")
    return p.full_crs(), p.b


def iterations(a, b, name, k, lang="c"):
    o = ordering.order(a, name, k)
    return ic.iccg(ordering.permute(a, o.perm), b[o.perm], o.color_ptr, lang, 1e-8).iterations


@pytest.mark.parametrize("name, k", [("natural", None), ("rcm", None), ("mc", 3), ("cm-rcm", 4)])
def test_iccg_iterations_same_in_every_language_and_thread_count(poisson16, name, k):
    from course import resources
    a, b = poisson16
    counts = {}
    for lang in ("numpy", "numba", "c", "fortran"):
        for t in (1, 2) if lang != "numpy" else (1,):
            if lang != "numpy":
                resources.set_threads(lang, t)
            counts[lang, t] = iterations(a, b, name, k, lang)
        if lang != "numpy":
            resources.set_threads(lang, resources.default_threads(lang))
    assert len(set(counts.values())) == 1, counts


def test_iteration_counts_follow_the_orderings(poisson16):
    """Measured on 16^3 (and 32^3: natural 75, RCM 73, MC(2) 115, CM-RCM(2/3/5/10) 115/103/94/
    86, diagonal PCG 208): IC(0) beats the diagonal; natural and RCM are the fewest; red-black
    (2 colors) the most; CM-RCM improves as the colors grow."""
    a, b = poisson16
    from course import solvers
    diagonal = solvers.pcg_jacobi(a, b, "c", tol=1e-8).iterations
    natural = iterations(a, b, "natural", None)
    rcm = iterations(a, b, "rcm", None)
    red_black = iterations(a, b, "mc", 2)
    cm_rcm = [iterations(a, b, "cm-rcm", k) for k in (2, 4, 8, 16)]
    assert natural < diagonal and red_black < diagonal
    assert abs(rcm - natural) <= 2
    assert red_black > natural + 10
    assert cm_rcm[0] == red_black
    assert cm_rcm[-1] < cm_rcm[0] and all(x >= y for x, y in zip(cm_rcm, cm_rcm[1:]))


@pytest.mark.compiled
@pytest.mark.parametrize("lang", ["c", "fortran"])
def test_compiled_kernels_refuse_wrong_arrays(lang):
    a = fem_like_matrix(4, 3, 3)
    o = ordering.order(a, "mc", 3, lang=lang)
    s = ic.split(ordering.permute(a, o.perm))
    f = ic.ic0(s, lang)
    r = np.ones(a.n)
    with pytest.raises(ValueError, match="share a color"):       # not a coloring: would race
        ic.ic0_apply(f, r, np.array([0, 5, a.n], np.int32), lang)
    with pytest.raises(ValueError, match="color_ptr"):
        ic.ic0_apply(f, r, np.array([0, a.n + 3], np.int32), lang)
    with pytest.raises(ValueError, match="length"):
        ic.ic0_apply(f, np.ones(a.n - 1), o.color_ptr, lang)
    with pytest.raises(TypeError, match="dtype"):
        ic.ic0_apply(f, r, o.color_ptr.astype(np.int64), lang)
    with pytest.raises(ValueError, match="transpose"):
        native.ic0_factor(lang, s.diag, s.lower.row_ptr, s.lower.col_idx, s.lower.val,
                          s.lower.row_ptr, s.lower.col_idx)
    with pytest.raises(ValueError, match="permutation"):
        native.wavefronts(lang, *ordering.adjacency(a), np.zeros(a.n, np.int32),
                          np.empty(a.n, np.int32))
    with pytest.raises(ValueError):
        native.multicolor(lang, np.array([0, 1], np.int32), np.array([5], np.int32), 2,
                          np.empty(1, np.int32))


# --- the command line ----------------------------------------------------------------------------

def test_cli_fields():
    out = solve_json("poisson", "--nx", "12", "--ny", "12", "--nz", "12", "--precond", "ic0",
                     "--ordering", "cm-rcm", "--colors", "3", "--lang", "fortran",
                     "--threads", "2")
    assert COMMON_FIELDS <= out.keys()
    assert out["precond"] == "ic0" and out["ordering"] == "cm-rcm" and out["colors"] >= 3
    assert out["synchronisations_per_iteration"] == 2 * out["colors"] + 6
    assert out["incompatible_nodes"] > 0 and out["converged"] and out["threads"] == 2
    fem = solve_json("fem3d", "--nx", "5", "--ny", "5", "--nz", "5", "--precond", "ic0",
                     "--ordering", "mc", "--colors", "4")
    assert fem["precond"] == "ic0" and fem["colors"] >= 4 and fem["error_max"] < 1e-6
    diagonal = solve_json("poisson", "--nx", "12", "--ny", "12", "--nz", "12", "--precond",
                          "diagonal")
    assert diagonal["precond"] == "diagonal" and diagonal["converged"]
    assert diagonal["iterations"] > out["iterations"]



def test_bench_iccg_smoke(tmp_path):
    """`bench iccg` end to end on a tiny mesh: every ordering x language x thread count, the same
    iterations in every language (each the same loop), synchronisations 2 colors + 6 (Numba 4),
    Numba against C, the bandwidth entries and the plot (a smoke test: no timing is asserted)."""
    from course.bench import iccg

    json_path, plot_path = tmp_path / "iccg.json", tmp_path / "iccg.png"
    result = run_course("bench", "iccg", "--sizes", "8", "--threads", "1", "2", "--repeat", "1",
                        "--json", json_path, "--plot", plot_path, timeout=280)
    assert result.returncode == 0, result.stdout + result.stderr
    data = json.loads(json_path.read_text())
    assert data["suite"] == "iccg" and data["sizes"] == [8] and data["threads"] == [1, 2]
    assert [s["threads"] for s in data["stream"]] == [1, 2]
    runs = data["runs"]
    assert sorted((r["threads"], r["lang"], r["ordering"], r["colors_requested"]) for r in runs) \
        == sorted((t, lang, name, k) for t in (1, 2) for lang in ("c", "fortran", "numba")
                  for name, k in iccg.BENCH_ORDERINGS)
    for r in runs:
        same = [q["iterations"] for q in runs if (q["ordering"], q["colors_requested"],
                                                   q["threads"]) == (r["ordering"],
                                                                      r["colors_requested"],
                                                                      r["threads"])]
        assert max(same) - min(same) <= 1, r                 # rounding of the sums at most
        assert r["synchronisations_per_iteration"] == \
            2 * r["colors"] + (4 if r["lang"] == "numba" else 6)      # the team: no omp single
        assert r["seconds_per_iteration"] > 0 and r["bandwidth_gbs"] > 0
        assert r["time_vs_c"] > 0 and (r["lang"] != "c" or r["time_vs_c"] == 1.0)
    bound = data["bandwidth_bound"]
    assert bound["natural_1_thread"]["threads"] == 1 and bound["natural_1_thread"]["lang"] == "c"
    assert bound["cm_rcm_all_threads"]["threads"] == 2
    assert bound["cm_rcm_all_threads"]["colors"] == max(r["colors"] for r in runs
                                                        if r["ordering"] == "cm-rcm")
    assert plot_path.read_bytes().startswith(b"\x89PNG")
    assert "numba/C" in result.stdout and "of STREAM triad" in result.stdout
