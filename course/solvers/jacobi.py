"""Jacobi-preconditioned CG on a CRS matrix in NumPy (the one code path of course.solvers.krylov),
Numba and the compiled C and Fortran kernels (lectures 01_fem1d, 02_fem3d)."""

from __future__ import annotations

import numba
import numpy as np

from .. import native
from ..langs import check_lang
from ..sparse import CRS, matvec_numpy
from .krylov import SolveResult, cg


def jacobi(a: CRS) -> np.ndarray:
    """Inverse of the diagonal of A (1 where a row has no diagonal entry)."""
    rows = np.repeat(np.arange(a.n), np.diff(a.row_ptr))
    diag = np.ones(a.n)
    on_diag = rows == a.col_idx
    diag[rows[on_diag]] = a.val[on_diag]
    return 1.0 / diag


@numba.njit(cache=True)
def _pcg_jacobi_numba(row_ptr, col_idx, val, b, x, tol, max_iter):
    n = b.shape[0]
    dinv = np.ones(n)
    for i in range(n):
        for k in range(row_ptr[i], row_ptr[i + 1]):
            if col_idx[k] == i:
                dinv[i] = 1.0 / val[k]
    r = np.empty(n)
    p = np.empty(n)
    q = np.empty(n)
    for i in range(n):
        s = 0.0
        for k in range(row_ptr[i], row_ptr[i + 1]):
            s += val[k] * x[col_idx[k]]
        r[i] = b[i] - s
    bnorm = np.sqrt(np.dot(b, b))
    if bnorm == 0.0:
        bnorm = 1.0
    relres = np.sqrt(np.dot(r, r)) / bnorm
    rho_old, it = 1.0, 0
    while relres > tol and it < max_iter:
        z = dinv * r
        rho = np.dot(r, z)
        if it == 0:
            p[:] = z
        else:
            p[:] = z + (rho / rho_old) * p
        for i in range(n):              # q = A p (unsigned indices: see sparse.matvec_numba)
            s = 0.0
            for k in range(np.uint64(row_ptr[i]), np.uint64(row_ptr[i + 1])):
                s += val[k] * p[np.uint64(col_idx[k])]
            q[i] = s
        alpha = rho / np.dot(p, q)
        x += alpha * p
        r -= alpha * q
        rho_old = rho
        it += 1
        relres = np.sqrt(np.dot(r, r)) / bnorm
    return it, relres


def pcg_jacobi(a: CRS, b: np.ndarray, lang: str = "numpy", tol: float = 1e-10,
               max_iter: int | None = None) -> SolveResult:
    """Jacobi-preconditioned CG on the CRS matrix `a` in the implementation `lang`."""
    check_lang(lang)
    native.check_array(b, "b", native.REAL, a.n)
    max_iter = 10 * a.n if max_iter is None else max_iter
    if lang == "numpy":
        dinv = jacobi(a)
        return cg(lambda v: matvec_numpy(a.row_ptr, a.col_idx, a.val, v), b,
                  precond=lambda r: dinv * r, tol=tol, max_iter=max_iter)
    if lang == "numba":
        x = np.zeros(a.n)
        iters, relres = _pcg_jacobi_numba(a.row_ptr, a.col_idx, a.val, b, x, tol, max_iter)
    else:
        x, iters, relres = native.pcg_jacobi(lang, a.row_ptr, a.col_idx, a.val, b, tol=tol,
                                             max_iter=max_iter)
    return SolveResult(x, int(iters), float(relres), relres <= tol)


