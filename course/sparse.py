"""Sparse matrices in CRS (compressed row storage) and the matrix-vector product.

Row i of a CRS matrix keeps its nonzeros in val[row_ptr[i]:row_ptr[i+1]], their columns in
col_idx[same range]. Indices are 0-based int32, values float64: exactly what the C kernels take.
"""

from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np
import scipy.sparse

from . import native
from .langs import check_lang


@dataclass
class CRS:
    row_ptr: np.ndarray   # int32, n + 1
    col_idx: np.ndarray   # int32, nnz
    val: np.ndarray       # float64, nnz

    def __post_init__(self):
        native.check_crs(self.row_ptr, self.col_idx, self.val)

    @property
    def n(self) -> int:
        return self.row_ptr.shape[0] - 1

    @property
    def nnz(self) -> int:
        return self.col_idx.shape[0]

    def to_scipy(self) -> scipy.sparse.csr_matrix:
        return scipy.sparse.csr_matrix((self.val, self.col_idx, self.row_ptr), shape=(self.n,) * 2)

    @classmethod
    def from_scipy(cls, a) -> "CRS":
        a = scipy.sparse.csr_matrix(a)
        a.sort_indices()
        return cls(a.indptr.astype(np.int32), a.indices.astype(np.int32),
                   a.data.astype(np.float64))

    def to_dense(self) -> np.ndarray:
        return self.to_scipy().toarray()


def matvec_numpy(row_ptr, col_idx, val, x):
    """y = A x, the readable reference: products of all nonzeros, summed row by row."""
    products = val * x[col_idx]
    row_of = np.repeat(np.arange(row_ptr.shape[0] - 1), np.diff(row_ptr))
    return np.bincount(row_of, weights=products, minlength=row_ptr.shape[0] - 1)


@numba.njit(cache=True)
def matvec_numba(row_ptr, col_idx, val, x):
    """The loop of the C kernel. The indices are made unsigned: with signed ones Numba must allow
    for negative (wrap-around) indices on every access, which made this loop about 1.6 times
    slower than the C kernel on a 48^3 mesh."""
    n = row_ptr.shape[0] - 1
    y = np.empty(n)
    for i in range(n):
        s = 0.0
        for k in range(np.uint64(row_ptr[i]), np.uint64(row_ptr[i + 1])):
            s += val[k] * x[np.uint64(col_idx[k])]
        y[i] = s
    return y


def matvec(a: CRS, x: np.ndarray, lang: str = "numpy") -> np.ndarray:
    """y = A x in the implementation `lang`."""
    check_lang(lang)
    native.check_array(x, "x", native.REAL, a.n)
    if lang == "numpy":
        return matvec_numpy(a.row_ptr, a.col_idx, a.val, x)
    if lang == "numba":
        return matvec_numba(a.row_ptr, a.col_idx, a.val, x)
    return native.crs_matvec(lang, a.row_ptr, a.col_idx, a.val, x)
