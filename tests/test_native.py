"""The checked ctypes boundary (course.native): every wrong argument raises TypeError or ValueError
naming the argument, before the C or Fortran kernel could read or write out of bounds.

All cases run in this one process, one after the other: had a check let a bad call through to a
kernel that then crashed, the whole test run would die here (and under tests/test_sanitize.py,
AddressSanitizer would report the out-of-bounds access).
"""

from __future__ import annotations

import numpy as np
import pytest

from conftest import COMPILED_LANGS, assert_refused
from course import native, solvers, sparse
from course.fem import assembly
from course.sparse import CRS

pytestmark = pytest.mark.compiled


def good_matrix():
    """A small valid CRS matrix (4 x 4, one empty row) and vectors."""
    row_ptr = np.array([0, 2, 3, 3, 5], dtype=np.int32)
    col_idx = np.array([0, 3, 1, 0, 2], dtype=np.int32)
    val = np.array([2.0, -1.0, 3.0, 0.5, 4.0])
    x = np.array([1.0, 2.0, 3.0, 4.0])
    return row_ptr, col_idx, val, x


def fem_system(n_node=6):
    x = np.linspace(0.0, 1.0, n_node)
    row_ptr, col_idx = assembly.fem1d_pattern(n_node, "numpy")
    return x, row_ptr, col_idx


def with_(arr, index, value):
    out = arr.copy()
    out[index] = value
    return out


def readonly(arr):
    out = arr.copy()
    out.flags.writeable = False
    return out


# Each case: id -> (call(lang), exception type, name the message must contain).
R, C, V, X = good_matrix()
XM, RP, CI = fem_system()
N = len(XM)


def _assemble(lang, x=XM, cond=1.0, qvol=1.0, row_ptr=RP, col_idx=CI):
    return native.fem1d_assemble(lang, x, cond, qvol, row_ptr, col_idx)


def _boundary(lang, qflux=0.0, row_ptr=RP, col_idx=CI, val=None, rhs=None):
    val = np.ones(len(col_idx)) if val is None else val
    rhs = np.ones(N) if rhs is None else rhs
    return native.fem1d_boundary(lang, qflux, row_ptr, col_idx, val, rhs)


def _pcg(lang, **kw):
    args = dict(row_ptr=R, col_idx=C, val=V, b=X)
    args.update(kw)
    return native.pcg_jacobi(lang, args.pop("row_ptr"), args.pop("col_idx"), args.pop("val"),
                             args.pop("b"), **args)


def _missing_entry_pattern(drop):
    """The 1D pattern with one entry (row, col) removed."""
    rows = np.repeat(np.arange(N), np.diff(RP))
    keep = ~((rows == drop[0]) & (CI == drop[1]))
    counts = np.bincount(rows[keep], minlength=N)
    row_ptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int32)
    return row_ptr, CI[keep].copy()


def _full_pattern_but_diagonal_swapped():
    """Right number of entries per row, but row 2 lists column 0 instead of column 1."""
    return RP.copy(), with_(CI, RP[2], 0)


CASES = {
    # crs_matvec: vector x
    "matvec-x-float32": (lambda L: native.crs_matvec(L, R, C, V, X.astype(np.float32)),
                         TypeError, "x"),
    "matvec-x-int": (lambda L: native.crs_matvec(L, R, C, V, np.arange(4)), TypeError, "x"),
    "matvec-x-list": (lambda L: native.crs_matvec(L, R, C, V, [1.0, 2.0, 3.0, 4.0]),
                      TypeError, "x"),
    "matvec-x-noncontiguous": (lambda L: native.crs_matvec(L, R, C, V, np.arange(8.0)[::2]),
                               ValueError, "x"),
    "matvec-x-2d": (lambda L: native.crs_matvec(L, R, C, V, X.reshape(2, 2)), ValueError, "x"),
    "matvec-x-short": (lambda L: native.crs_matvec(L, R, C, V, X[:3].copy()), ValueError, "x"),
    "matvec-x-long": (lambda L: native.crs_matvec(L, R, C, V, np.ones(5)), ValueError, "x"),
    "matvec-y-short": (lambda L: native.crs_matvec(L, R, C, V, X, y=np.empty(3)), ValueError, "y"),
    "matvec-y-readonly": (lambda L: native.crs_matvec(L, R, C, V, X, y=readonly(np.empty(4))),
                          ValueError, "y"),
    # crs_matvec: matrix arrays
    "matvec-rowptr-int64": (lambda L: native.crs_matvec(L, R.astype(np.int64), C, V, X),
                            TypeError, "row_ptr"),
    "matvec-colidx-int64": (lambda L: native.crs_matvec(L, R, C.astype(np.int64), V, X),
                            TypeError, "col_idx"),
    "matvec-val-float32": (lambda L: native.crs_matvec(L, R, C, V.astype(np.float32), X),
                           TypeError, "val"),
    "matvec-val-short": (lambda L: native.crs_matvec(L, R, C, V[:4].copy(), X), ValueError, "val"),
    "matvec-colidx-noncontiguous": (
        lambda L: native.crs_matvec(L, R, np.repeat(C, 2)[::2], V, X), ValueError, "col_idx"),
    "matvec-colidx-too-big": (lambda L: native.crs_matvec(L, R, with_(C, 1, 4), V, X),
                              ValueError, "col_idx"),
    "matvec-colidx-huge": (lambda L: native.crs_matvec(L, R, with_(C, 4, 2**31 - 1), V, X),
                           ValueError, "col_idx"),
    "matvec-colidx-negative": (lambda L: native.crs_matvec(L, R, with_(C, 0, -1), V, X),
                               ValueError, "col_idx"),
    "matvec-rowptr-not-from-0": (lambda L: native.crs_matvec(L, with_(R, 0, 1), C, V, X),
                                 ValueError, "row_ptr"),
    "matvec-rowptr-decreasing": (lambda L: native.crs_matvec(L, with_(R, 2, 1), C, V, X),
                                 ValueError, "row_ptr"),
    "matvec-rowptr-decreasing-past-nnz": (lambda L: native.crs_matvec(L, with_(R, 2, 9), C, V, X),
                                          ValueError, "row_ptr"),
    "matvec-rowptr-end-short": (lambda L: native.crs_matvec(L, with_(R, 4, 4), C, V, X),
                                ValueError, "row_ptr"),
    "matvec-rowptr-end-long": (lambda L: native.crs_matvec(L, with_(R, 4, 6), C, V, X),
                               ValueError, "row_ptr"),
    "matvec-rowptr-too-short": (lambda L: native.crs_matvec(L, R[:1].copy(), C[:0].copy(),
                                                            V[:0].copy(), X[:0].copy()),
                                ValueError, "row_ptr"),
    # pcg_jacobi
    "pcg-b-float32": (lambda L: _pcg(L, b=X.astype(np.float32)), TypeError, "b"),
    "pcg-b-short": (lambda L: _pcg(L, b=X[:2].copy()), ValueError, "b"),
    "pcg-b-noncontiguous": (lambda L: _pcg(L, b=np.arange(8.0)[::2]), ValueError, "b"),
    "pcg-x0-short": (lambda L: _pcg(L, x0=np.zeros(3)), ValueError, "x0"),
    "pcg-x0-int": (lambda L: _pcg(L, x0=np.zeros(4, dtype=np.int32)), TypeError, "x0"),
    "pcg-tol-zero": (lambda L: _pcg(L, tol=0.0), ValueError, "tol"),
    "pcg-tol-negative": (lambda L: _pcg(L, tol=-1e-8), ValueError, "tol"),
    "pcg-tol-nan": (lambda L: _pcg(L, tol=float("nan")), ValueError, "tol"),
    "pcg-tol-inf": (lambda L: _pcg(L, tol=float("inf")), ValueError, "tol"),
    "pcg-tol-text": (lambda L: _pcg(L, tol="small"), TypeError, "tol"),
    "pcg-max-iter-negative": (lambda L: _pcg(L, max_iter=-1), ValueError, "max_iter"),
    "pcg-max-iter-float": (lambda L: _pcg(L, max_iter=10.0), TypeError, "max_iter"),
    "pcg-max-iter-too-big": (lambda L: _pcg(L, max_iter=2**31), ValueError, "max_iter"),
    "pcg-colidx-too-big": (lambda L: _pcg(L, col_idx=with_(C, 3, 7)), ValueError, "col_idx"),
    "pcg-rowptr-decreasing": (lambda L: _pcg(L, row_ptr=with_(R, 1, 4)), ValueError, "row_ptr"),
    # fem1d_element: scalars
    "element-h-zero": (lambda L: native.fem1d_element(L, 0.0, 1.0, 1.0), ValueError, "h"),
    "element-h-negative": (lambda L: native.fem1d_element(L, -0.5, 1.0, 1.0), ValueError, "h"),
    "element-h-nan": (lambda L: native.fem1d_element(L, float("nan"), 1.0, 1.0), ValueError, "h"),
    "element-h-inf": (lambda L: native.fem1d_element(L, float("inf"), 1.0, 1.0), ValueError, "h"),
    "element-h-text": (lambda L: native.fem1d_element(L, "abc", 1.0, 1.0), TypeError, "h"),
    "element-h-none": (lambda L: native.fem1d_element(L, None, 1.0, 1.0), TypeError, "h"),
    "element-cond-zero": (lambda L: native.fem1d_element(L, 1.0, 0.0, 1.0), ValueError, "cond"),
    "element-cond-negative": (lambda L: native.fem1d_element(L, 1.0, -1.0, 1.0),
                              ValueError, "cond"),
    "element-cond-inf": (lambda L: native.fem1d_element(L, 1.0, float("inf"), 1.0),
                         ValueError, "cond"),
    "element-qvol-nan": (lambda L: native.fem1d_element(L, 1.0, 1.0, float("nan")),
                         ValueError, "qvol"),
    "element-qvol-minus-inf": (lambda L: native.fem1d_element(L, 1.0, 1.0, float("-inf")),
                               ValueError, "qvol"),
    # fem1d_pattern
    "pattern-n-node-1": (lambda L: native.fem1d_pattern(L, 1), ValueError, "n_node"),
    "pattern-n-node-0": (lambda L: native.fem1d_pattern(L, 0), ValueError, "n_node"),
    "pattern-n-node-negative": (lambda L: native.fem1d_pattern(L, -4), ValueError, "n_node"),
    "pattern-n-node-float": (lambda L: native.fem1d_pattern(L, 5.0), TypeError, "n_node"),
    "pattern-n-node-bool": (lambda L: native.fem1d_pattern(L, True), TypeError, "n_node"),
    "pattern-n-node-too-big": (lambda L: native.fem1d_pattern(L, 2**31), ValueError, "n_node"),
    # fem1d_assemble
    "assemble-x-float32": (lambda L: _assemble(L, x=XM.astype(np.float32)), TypeError, "x"),
    "assemble-x-short": (lambda L: _assemble(L, x=XM[:-1].copy()), ValueError, "x"),
    "assemble-x-noncontiguous": (lambda L: _assemble(L, x=np.linspace(0, 1, 2 * N)[::2]),
                                 ValueError, "x"),
    "assemble-x-decreasing": (lambda L: _assemble(L, x=XM[::-1].copy()), ValueError, "x"),
    "assemble-x-repeated-node": (lambda L: _assemble(L, x=with_(XM, 2, XM[1])), ValueError, "x"),
    "assemble-x-nan": (lambda L: _assemble(L, x=with_(XM, 3, np.nan)), ValueError, "x"),
    "assemble-x-inf": (lambda L: _assemble(L, x=with_(XM, N - 1, np.inf)), ValueError, "x"),
    "assemble-cond-zero": (lambda L: _assemble(L, cond=0.0), ValueError, "cond"),
    "assemble-cond-negative": (lambda L: _assemble(L, cond=-2.0), ValueError, "cond"),
    "assemble-cond-nan": (lambda L: _assemble(L, cond=float("nan")), ValueError, "cond"),
    "assemble-qvol-inf": (lambda L: _assemble(L, qvol=float("inf")), ValueError, "qvol"),
    "assemble-one-node": (lambda L: _assemble(L, x=np.zeros(1), row_ptr=np.array([0, 1], np.int32),
                                              col_idx=np.array([0], np.int32)),
                          ValueError, "x"),
    "assemble-pattern-missing-diagonal": (
        lambda L: _assemble(L, row_ptr=_missing_entry_pattern((2, 2))[0],
                            col_idx=_missing_entry_pattern((2, 2))[1]),
        ValueError, "row_ptr/col_idx"),
    "assemble-pattern-missing-upper": (
        lambda L: _assemble(L, row_ptr=_missing_entry_pattern((0, 1))[0],
                            col_idx=_missing_entry_pattern((0, 1))[1]),
        ValueError, "row_ptr/col_idx"),
    "assemble-pattern-missing-lower-last": (
        lambda L: _assemble(L, row_ptr=_missing_entry_pattern((N - 1, N - 2))[0],
                            col_idx=_missing_entry_pattern((N - 1, N - 2))[1]),
        ValueError, "row_ptr/col_idx"),
    "assemble-pattern-wrong-column": (
        lambda L: _assemble(L, row_ptr=_full_pattern_but_diagonal_swapped()[0],
                            col_idx=_full_pattern_but_diagonal_swapped()[1]),
        ValueError, "row_ptr/col_idx"),
    "assemble-pattern-diagonal-only": (
        lambda L: _assemble(L, row_ptr=np.arange(N + 1, dtype=np.int32),
                            col_idx=np.arange(N, dtype=np.int32)),
        ValueError, "row_ptr/col_idx"),
    "assemble-rowptr-int64": (lambda L: _assemble(L, row_ptr=RP.astype(np.int64)),
                              TypeError, "row_ptr"),
    "assemble-colidx-out-of-range": (lambda L: _assemble(L, col_idx=with_(CI, -1, N)),
                                     ValueError, "col_idx"),
    # fem1d_boundary
    "boundary-qflux-nan": (lambda L: _boundary(L, qflux=float("nan")), ValueError, "qflux"),
    "boundary-qflux-text": (lambda L: _boundary(L, qflux="1,5"), TypeError, "qflux"),
    "boundary-rhs-short": (lambda L: _boundary(L, rhs=np.ones(N - 1)), ValueError, "rhs"),
    "boundary-rhs-float32": (lambda L: _boundary(L, rhs=np.ones(N, np.float32)), TypeError, "rhs"),
    "boundary-rhs-readonly": (lambda L: _boundary(L, rhs=readonly(np.ones(N))), ValueError, "rhs"),
    "boundary-val-readonly": (lambda L: _boundary(L, val=readonly(np.ones(len(CI)))),
                              ValueError, "val"),
    "boundary-val-short": (lambda L: _boundary(L, val=np.ones(len(CI) - 1)), ValueError, "val"),
    "boundary-colidx-out-of-range": (lambda L: _boundary(L, col_idx=with_(CI, 3, 99)),
                                     ValueError, "col_idx"),
    "boundary-rowptr-not-ending-at-nnz": (lambda L: _boundary(L, row_ptr=with_(RP, -1, RP[-1] - 1)),
                                          ValueError, "row_ptr"),
}


def _check_case(lang, case_id):
    assert_refused(CASES[case_id], lang, case_id)


@pytest.mark.parametrize("case_id", list(CASES))
@pytest.mark.parametrize("lang", COMPILED_LANGS)
def test_bad_argument_is_refused(lang, case_id):
    _check_case(lang, case_id)


@pytest.mark.parametrize("lang", COMPILED_LANGS)
def test_good_calls_still_work_after_refusals(lang):
    """After all the refused calls (same process), the kernels still give right answers."""
    for case_id in CASES:
        _check_case(lang, case_id)
    y = native.crs_matvec(lang, R, C, V, X)
    np.testing.assert_allclose(y, [2.0 - 4.0, 6.0, 0.0, 0.5 + 12.0], rtol=1e-15)
    ke, fe = native.fem1d_element(lang, 0.5, 2.0, 3.0)
    np.testing.assert_allclose(ke, [[4.0, -4.0], [-4.0, 4.0]], rtol=1e-15)
    np.testing.assert_allclose(fe, [0.75, 0.75], rtol=1e-15)
    val, rhs = native.fem1d_assemble(lang, XM, 1.0, 1.0, RP, CI)
    assert np.all(np.isfinite(val)) and rhs.sum() == pytest.approx(1.0)


@pytest.mark.parametrize("lang", COMPILED_LANGS)
def test_inputs_are_not_modified_by_index_shift(lang):
    """The Fortran wrappers shift indices by one: the caller's arrays must stay 0-based."""
    r, c, v, x = (a.copy() for a in good_matrix())
    native.crs_matvec(lang, r, c, v, x)
    native.pcg_jacobi(lang, *fem_system_matrix())
    np.testing.assert_array_equal(r, R)
    np.testing.assert_array_equal(c, C)
    rp, ci = RP.copy(), CI.copy()
    val, rhs = native.fem1d_assemble(lang, XM, 1.0, 1.0, rp, ci)
    native.fem1d_boundary(lang, 0.5, rp, ci, val, rhs)
    np.testing.assert_array_equal(rp, RP)
    np.testing.assert_array_equal(ci, CI)


def fem_system_matrix():
    val, rhs = native.fem1d_assemble("c", XM, 1.0, 1.0, RP, CI)
    native.fem1d_boundary("c", 0.0, RP, CI, val, rhs)
    return RP, CI, val, rhs


# --- the public API checks too -------------------------------------------------------------------

@pytest.mark.parametrize("lang", COMPILED_LANGS)
def test_public_api_refuses_bad_arguments(lang):
    crs = CRS(R, C, V)
    with pytest.raises(TypeError, match="x"):
        sparse.matvec(crs, X.astype(np.float32), lang)
    with pytest.raises(ValueError, match="x"):
        sparse.matvec(crs, np.ones(7), lang)
    with pytest.raises(ValueError, match="b"):
        solvers.pcg_jacobi(crs, np.ones(3), lang)
    with pytest.raises(ValueError, match="n_node"):
        assembly.fem1d_pattern(1, lang)
    with pytest.raises(ValueError, match="h"):
        assembly.fem1d_element(-1.0, 1.0, 1.0, lang)
    with pytest.raises(ValueError, match="cond"):
        assembly.fem1d_assemble(XM, 0.0, 1.0, lang)


def test_crs_constructor_checks():
    with pytest.raises(ValueError, match="col_idx"):
        CRS(R, with_(C, 2, 4), V)
    with pytest.raises(ValueError, match="row_ptr"):
        CRS(with_(R, 0, 1), C, V)
    with pytest.raises(TypeError, match="row_ptr"):
        CRS(R.astype(np.int64), C, V)
    with pytest.raises(ValueError, match="val"):
        CRS(R, C, V[:3].copy())


# --- lang outside ("c", "fortran") -----------------------------------------------------------------

@pytest.mark.parametrize("lang", ["numpy", "numba", "cobol", "C", "", None])
def test_load_refuses_other_langs(lang):
    with pytest.raises(ValueError, match="lang"):
        native.load(lang)


@pytest.mark.parametrize("lang", ["numpy", "python", "Fortran"])
def test_kernel_wrappers_refuse_other_langs(lang):
    with pytest.raises(ValueError, match="lang"):
        native.crs_matvec(lang, R, C, V, X)
    with pytest.raises(ValueError, match="lang"):
        native.fem1d_element(lang, 1.0, 1.0, 1.0)
    with pytest.raises(ValueError, match="lang"):
        native.fem1d_pattern(lang, 4)


@pytest.mark.parametrize("lang", ["cobol", "C", "rust"])
def test_public_api_refuses_unknown_langs(lang):
    crs = CRS(R, C, V)
    for call in (lambda: sparse.matvec(crs, X, lang), lambda: solvers.pcg_jacobi(crs, X, lang),
                 lambda: assembly.fem1d_element(1.0, 1.0, 1.0, lang),
                 lambda: assembly.fem1d_pattern(4, lang),
                 lambda: assembly.fem1d_assemble(XM, 1.0, 1.0, lang)):
        with pytest.raises(ValueError, match="lang"):
            call()


def test_variant_env_is_checked(monkeypatch):
    monkeypatch.setenv("COURSE_NATIVE_VARIANT", "debug")
    with pytest.raises(ValueError, match="COURSE_NATIVE_VARIANT"):
        native.default_variant()
    with pytest.raises(ValueError, match="variant"):
        native.build("debug")
