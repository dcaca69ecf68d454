"""Lecture 01 (1D heat conduction): every kernel in every language against the numpy reference,
the reference against independent computations, and the discretisation against the exact solution.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse.linalg

from conftest import ALL_LANGS, assert_rel_close
from course import problems, solvers, sparse
from course.fem import assembly, mesh
from course.langs import LANGS
from course.sparse import CRS

RTOL = 1e-12


# --- element ---------------------------------------------------------------------------------------

ELEMENT_CASES = [(1.0, 1.0, 1.0), (0.01, 1.0, 1.0), (0.37, 2.5, -3.0), (2.0, 0.1, 0.0),
                 (1e-4, 45.0, 7.5)]


@pytest.mark.parametrize("h, cond, qvol", ELEMENT_CASES)
@pytest.mark.parametrize("lang", ALL_LANGS)
def test_element_matches_reference(lang, h, cond, qvol):
    ke, fe = assembly.fem1d_element(h, cond, qvol, lang)
    ke_ref, fe_ref = assembly.fem1d_element(h, cond, qvol, "numpy")
    assert np.shape(ke) == (2, 2) and np.shape(fe) == (2,)
    assert_rel_close(ke, ke_ref, RTOL, "ke")
    if qvol == 0.0:
        assert np.all(np.asarray(fe) == 0.0)
    else:
        assert_rel_close(fe, fe_ref, RTOL, "fe")


@pytest.mark.parametrize("h, cond, qvol", ELEMENT_CASES)
@pytest.mark.parametrize("lang", ALL_LANGS)
def test_element_identities(lang, h, cond, qvol):
    ke, fe = (np.asarray(v) for v in assembly.fem1d_element(h, cond, qvol, lang))
    k = cond / h
    assert np.array_equal(ke, ke.T), "ke must be symmetric"
    assert np.allclose(ke.sum(axis=1), 0.0, atol=1e-14 * k), "rows of ke must sum to 0"
    assert ke[0, 0] > 0 and ke[1, 1] > 0 and ke[0, 1] < 0
    assert ke[0, 0] == pytest.approx(k, rel=RTOL)            # exact value cond/h
    assert fe.sum() == pytest.approx(qvol * h, rel=RTOL, abs=1e-300)   # total load qvol * h
    assert fe[0] == fe[1]                                      # split equally


# --- pattern ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("n_node", [2, 3, 4, 11, 1000])
@pytest.mark.parametrize("lang", ALL_LANGS)
def test_pattern_matches_reference(lang, n_node):
    row_ptr, col_idx = assembly.fem1d_pattern(n_node, lang)
    ref_ptr, ref_idx = assembly.fem1d_pattern(n_node, "numpy")
    assert row_ptr.dtype == np.int32 and col_idx.dtype == np.int32
    np.testing.assert_array_equal(row_ptr, ref_ptr)
    np.testing.assert_array_equal(col_idx, ref_idx)


@pytest.mark.parametrize("n_node", [2, 3, 7])
def test_pattern_reference_is_tridiagonal(n_node):
    """The numpy reference against the tridiagonal pattern written out by hand."""
    row_ptr, col_idx = assembly.fem1d_pattern(n_node, "numpy")
    expected_cols = [[j for j in (i - 1, i, i + 1) if 0 <= j < n_node] for i in range(n_node)]
    assert row_ptr[0] == 0 and row_ptr[-1] == 3 * n_node - 2 == len(col_idx)
    for i, cols in enumerate(expected_cols):
        assert col_idx[row_ptr[i]:row_ptr[i + 1]].tolist() == cols


# --- assembly --------------------------------------------------------------------------------------

def dense_assembly(x, cond, qvol):
    """Independent reference: the global matrix and load built densely, element by element."""
    n = len(x)
    k, f = np.zeros((n, n)), np.zeros(n)
    for e in range(n - 1):
        h = x[e + 1] - x[e]
        k[e:e + 2, e:e + 2] += cond / h * np.array([[1.0, -1.0], [-1.0, 1.0]])
        f[e:e + 2] += qvol * h / 2
    return k, f


MESHES = {
    "uniform": lambda: mesh.line_mesh(20, 1.5),
    "nonuniform": None,             # filled from the fixture
    "two_nodes": lambda: np.array([0.0, 0.25]),
}


@pytest.fixture(params=list(MESHES))
def a_mesh(request, nonuniform_mesh):
    if request.param == "nonuniform":
        return nonuniform_mesh
    return MESHES[request.param]()


@pytest.mark.parametrize("lang", ALL_LANGS)
def test_assemble_matches_reference(lang, a_mesh):
    a, rhs = assembly.fem1d_assemble(a_mesh, 1.7, -0.6, lang)
    ref, ref_rhs = assembly.fem1d_assemble(a_mesh, 1.7, -0.6, "numpy")
    assert isinstance(a, CRS)
    np.testing.assert_array_equal(a.row_ptr, ref.row_ptr)
    np.testing.assert_array_equal(a.col_idx, ref.col_idx)
    assert_rel_close(a.val, ref.val, RTOL, "val")
    assert_rel_close(rhs, ref_rhs, RTOL, "rhs")


@pytest.mark.parametrize("lang", ALL_LANGS)
def test_assemble_equals_dense_assembly(lang, a_mesh):
    cond, qvol = 2.3, 0.8
    a, rhs = assembly.fem1d_assemble(a_mesh, cond, qvol, lang)
    k, f = dense_assembly(a_mesh, cond, qvol)
    assert a.n == len(a_mesh) and a.nnz == 3 * len(a_mesh) - 2
    assert_rel_close(a.to_dense(), k, RTOL, "matrix")
    assert_rel_close(rhs, f, RTOL, "rhs")
    dense = a.to_dense()
    assert np.allclose(dense, dense.T, rtol=0, atol=1e-12 * np.abs(dense).max())
    assert np.allclose(dense.sum(axis=1), 0.0, atol=1e-10 * np.abs(dense).max())  # no BC yet
    assert rhs.sum() == pytest.approx(qvol * (a_mesh[-1] - a_mesh[0]), rel=1e-12)


@pytest.mark.parametrize("lang", ALL_LANGS)
def test_assemble_does_not_touch_its_input(lang, nonuniform_mesh):
    x = nonuniform_mesh.copy()
    assembly.fem1d_assemble(x, 1.0, 1.0, lang)
    np.testing.assert_array_equal(x, nonuniform_mesh)


# --- boundary conditions ---------------------------------------------------------------------------

@pytest.mark.parametrize("qflux", [0.0, 0.75])
@pytest.mark.parametrize("lang", ALL_LANGS)
def test_boundary_matches_reference(lang, qflux, nonuniform_mesh):
    a, rhs = assembly.fem1d_assemble(nonuniform_mesh, 1.3, 0.9, "numpy")
    ref_val, ref_rhs = a.val.copy(), rhs.copy()
    ref = CRS(a.row_ptr, a.col_idx, ref_val)
    assembly.fem1d_boundary(ref, ref_rhs, qflux, "numpy")
    assembly.fem1d_boundary(a, rhs, qflux, lang)
    assert_rel_close(a.val, ref.val, RTOL, "val")
    assert_rel_close(rhs, ref_rhs, RTOL, "rhs")


@pytest.mark.parametrize("lang", ALL_LANGS)
def test_boundary_effect(lang, nonuniform_mesh):
    """Row and column 0 become the identity's, rhs[0] = 0, the flux lands on the last node only."""
    a, rhs = assembly.fem1d_assemble(nonuniform_mesh, 1.3, 0.9, lang)
    before, rhs_before = a.to_dense(), rhs.copy()
    assembly.fem1d_boundary(a, rhs, 0.75, lang)
    after = a.to_dense()
    expected = before.copy()
    expected[0, :] = 0.0
    expected[:, 0] = 0.0
    expected[0, 0] = 1.0
    np.testing.assert_array_equal(after, expected)
    expected_rhs = rhs_before.copy()
    expected_rhs[0] = 0.0
    expected_rhs[-1] += 0.75
    np.testing.assert_array_equal(rhs, expected_rhs)


# --- sparse matrix-vector product ------------------------------------------------------------------

@pytest.mark.parametrize("lang", ALL_LANGS)
def test_matvec_random_nonsymmetric(lang, random_crs):
    crs, a = random_crs
    rng = np.random.default_rng(3)
    for _ in range(3):
        x = rng.standard_normal(crs.n)
        y = sparse.matvec(crs, x, lang)
        assert y.shape == (crs.n,) and y.dtype == np.float64
        assert_rel_close(y, sparse.matvec(crs, x, "numpy"), RTOL, "y vs numpy")
        assert_rel_close(y, a @ x, RTOL, "y vs scipy")
        assert y[17] == 0.0 and y[-1] == 0.0           # the empty rows


@pytest.mark.parametrize("lang", ALL_LANGS)
def test_matvec_unit_vectors_give_columns(lang, random_crs):
    """A e_j is column j of A: catches a kernel that mixes up rows and columns or index bases."""
    crs, a = random_crs
    dense = a.toarray()
    for j in (0, 5, 17, crs.n - 1):
        e = np.zeros(crs.n)
        e[j] = 1.0
        np.testing.assert_array_equal(sparse.matvec(crs, e, lang), dense[:, j])


# --- CG --------------------------------------------------------------------------------------------

def assembled_system(x, cond=1.7, qvol=0.9, qflux=0.4):
    a, rhs = assembly.fem1d_assemble(x, cond, qvol, "numpy")
    assembly.fem1d_boundary(a, rhs, qflux, "numpy")
    return a, rhs


@pytest.mark.parametrize("lang", ALL_LANGS)
def test_pcg_matches_reference_and_spsolve(lang, nonuniform_mesh):
    a, rhs = assembled_system(nonuniform_mesh)
    result = solvers.pcg_jacobi(a, rhs, lang, tol=1e-13)
    ref = solvers.pcg_jacobi(a, rhs, "numpy", tol=1e-13)
    assert result.converged and result.relative_residual <= 1e-13
    assert 0 < result.iterations <= 10 * a.n
    assert_rel_close(result.x, ref.x, RTOL, "x vs numpy")
    direct = scipy.sparse.linalg.spsolve(a.to_scipy().tocsc(), rhs)
    assert_rel_close(result.x, direct, 1e-11, "x vs spsolve")
    true_res = np.linalg.norm(rhs - a.to_scipy() @ result.x) / np.linalg.norm(rhs)
    assert true_res < 1e-11


@pytest.mark.parametrize("lang", ALL_LANGS)
def test_pcg_respects_max_iter(lang):
    a, rhs = assembled_system(mesh.line_mesh(50))
    result = solvers.pcg_jacobi(a, rhs, lang, tol=1e-14, max_iter=5)
    assert result.iterations == 5 and not result.converged
    assert result.relative_residual > 1e-14


@pytest.mark.parametrize("lang", ALL_LANGS)
def test_pcg_zero_rhs(lang):
    a, _ = assembled_system(mesh.line_mesh(10))
    result = solvers.pcg_jacobi(a, np.zeros(a.n), lang)
    assert result.iterations == 0 and result.converged
    np.testing.assert_array_equal(result.x, np.zeros(a.n))


# --- the whole problem -----------------------------------------------------------------------------

PROBLEM_CASES = [
    pytest.param(dict(), id="default"),
    pytest.param(dict(qflux=0.8, cond=3.5), id="flux-cond"),
    pytest.param(dict(length=2.5, cond=0.4, qvol=-2.0, qflux=-1.25), id="all-params"),
]


@pytest.mark.parametrize("case", PROBLEM_CASES)
@pytest.mark.parametrize("n", [1, 2, 7, 64, 200])
@pytest.mark.parametrize("lang", ALL_LANGS)
def test_nodal_exactness(lang, n, case):
    out = problems.fem1d(n, lang, warm_up=False, keep_solution=True, **case)
    assert out["converged"] and out["unknowns"] == n + 1 and out["nnz"] == 3 * n + 1
    assert out["error_max"] < 1e-10
    # check error_max independently of problems.fem1d
    exact = assembly.fem1d_exact(out["x"], out["length"], out["cond"], out["qvol"], out["qflux"])
    assert np.max(np.abs(out["T"] - exact)) < 1e-10
    assert out["T"][0] == 0.0


def test_exact_solution_satisfies_the_problem():
    """The exact solution used everywhere solves -(cond T')' = qvol, T(0)=0, cond T'(L)=qflux."""
    length, cond, qvol, qflux = 2.0, 3.0, 1.5, 0.7
    t = lambda x: assembly.fem1d_exact(x, length, cond, qvol, qflux)      # noqa: E731
    d = 1e-4
    x = np.array([0.3, 1.1, 1.9])
    second = (t(x + d) - 2 * t(x) + t(x - d)) / d**2
    assert np.allclose(-cond * second, qvol, rtol=1e-6)
    assert t(0.0) == 0.0
    assert cond * (t(length + d) - t(length - d)) / (2 * d) == pytest.approx(qflux, rel=1e-8)


@pytest.mark.parametrize("lang", ALL_LANGS)
def test_l2_error_is_second_order(lang):
    ns = np.array([8, 16, 32, 64, 128])
    errors = np.array([problems.fem1d(int(n), lang, qflux=0.5, cond=2.0, warm_up=False)["error_l2"]
                       for n in ns])
    assert np.all(np.diff(errors) < 0), f"L2 error must fall: {errors}"
    slope = np.polyfit(np.log(1.0 / ns), np.log(errors), 1)[0]     # log e = p log h + c
    assert slope == pytest.approx(2.0, abs=0.05), f"fitted order {slope}"


def test_l2_error_reference_value():
    """error_l2 against the closed form: for qvol constant, the interpolant's L2 error on an
    element of length h is (qvol / cond) h^2 sqrt(h / 120) (the error is (qvol / 2 cond) s (h - s)),
    so ||e|| = (qvol / cond) h^2 sqrt(L / 120) on a uniform mesh."""
    n, length, cond, qvol = 16, 2.0, 1.5, 3.0
    out = problems.fem1d(n, "numpy", length=length, cond=cond, qvol=qvol, warm_up=False)
    h = length / n
    expected = qvol / cond * h**2 * np.sqrt(length / 120.0)
    assert out["error_l2"] == pytest.approx(expected, rel=1e-8)


@pytest.mark.compiled
@pytest.mark.parametrize("case", PROBLEM_CASES)
@pytest.mark.parametrize("n", [8, 64, 100])
def test_cg_iterations_equal_across_langs(n, case):
    iterations = {lang: problems.fem1d(n, lang, warm_up=False, **case)["iterations"]
                  for lang in LANGS}
    assert len(set(iterations.values())) == 1, iterations
