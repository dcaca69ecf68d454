"""Krylov solvers. One code path (`cg`) with pluggable matrix-vector product, preconditioner and
dot product, so that later lectures reuse it for distributed vectors; plus Numba and compiled twins
of the Jacobi-preconditioned CG for speed."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numba
import numpy as np

from . import native
from .langs import check_lang
from .sparse import CRS, matvec_numpy


@dataclass
class SolveResult:
    x: np.ndarray
    iterations: int
    relative_residual: float
    converged: bool
    residuals: list[float] | None = None   # ||r_k|| / ||b|| per iteration (numpy path only)


def cg(matvec: Callable, b: np.ndarray, precond: Callable = lambda r: r,
       dot: Callable = np.dot, x0: np.ndarray | None = None, tol: float = 1e-10,
       max_iter: int | None = None) -> SolveResult:
    """Preconditioned conjugate gradients for a symmetric positive definite operator.

    Stops when ||r|| <= tol ||b|| (recursive residual). `precond(r)` returns M^-1 r.
    """
    x = np.zeros_like(b) if x0 is None else x0.astype(float, copy=True)
    max_iter = 10 * b.shape[0] if max_iter is None else max_iter
    r = b - matvec(x)
    bnorm = np.sqrt(dot(b, b)) or 1.0
    residuals = [np.sqrt(dot(r, r)) / bnorm]
    p, rho_old = None, 1.0
    while residuals[-1] > tol and len(residuals) <= max_iter:
        z = precond(r)
        rho = dot(r, z)
        p = z.copy() if p is None else z + (rho / rho_old) * p
        q = matvec(p)
        alpha = rho / dot(p, q)
        x += alpha * p
        r -= alpha * q
        rho_old = rho
        residuals.append(np.sqrt(dot(r, r)) / bnorm)
    return SolveResult(x, len(residuals) - 1, residuals[-1], residuals[-1] <= tol, residuals)


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


# --- lecture 04_openmp: the PCG ladder v0 .. v3 --------------------------------------------------
#
# Diagonal-scaled CG on A = D + A_off (course.fvm.Poisson), the steps of the OpenMP lecture:
#   v0  CRS, the work vectors initialised by a serial loop, one parallel loop per operation
#   v1  as v0, the work vectors initialised in parallel (first touch: the pages land where the
#       threads that use them run)
#   v2  ELL (6 per row): the same inner trip count in every row
#   v3  ELL, one parallel region per iteration (C and Fortran only: Numba opens a parallel
#       region for every prange loop and has no way to keep one open across loops)

LADDER = native.LADDER
LADDER_LANGS = {"v0": ("numba", "c", "fortran"), "v1": ("numba", "c", "fortran"),
                "v2": ("numba", "c", "fortran"), "v3": ("c", "fortran")}


@numba.njit(parallel=True, cache=True)
def _dot(a, b):
    s = 0.0
    for i in numba.prange(a.shape[0]):
        s += a[i] * b[i]
    return s


@numba.njit(cache=True)
def _zero_serial(w):
    for i in range(w.shape[0]):
        w[i] = 0.0


@numba.njit(parallel=True, cache=True)
def _zero_parallel(w):
    for i in numba.prange(w.shape[0]):
        w[i] = 0.0


@numba.njit(parallel=True, cache=True)
def _crs_apply(d, index, item, amat, v, out):
    """out = D v + A_off v, A_off in CRS."""
    for i in numba.prange(d.shape[0]):
        s = d[i] * v[i]
        for k in range(np.uint64(index[i]), np.uint64(index[i + 1])):
            s += amat[k] * v[np.uint64(item[k])]
        out[i] = s


@numba.njit(parallel=True, cache=True)
def _ell_apply(d, item, amat, v, out):
    """out = D v + A_off v, A_off in ELL, 6 per row."""
    for i in numba.prange(d.shape[0]):
        s = d[i] * v[i]
        base = np.uint64(i) * np.uint64(6)
        for j in range(np.uint64(6)):
            s += amat[base + j] * v[np.uint64(item[base + j])]
        out[i] = s


@numba.njit(parallel=True, cache=True)
def _cg_loop(ell, d, index, item, amat, b, x, w, eps, max_iter):
    """The CG iterations on the work array w = [r | z | p | q] (4 n, initialised by the caller);
    returns (iterations, relative residual)."""
    n = d.shape[0]
    r, z, p, q = w[:n], w[n:2 * n], w[2 * n:3 * n], w[3 * n:]
    if ell:
        _ell_apply(d, item, amat, x, q)
    else:
        _crs_apply(d, index, item, amat, x, q)
    for i in numba.prange(n):
        r[i] = b[i] - q[i]
    bnorm = np.sqrt(_dot(b, b))
    if bnorm == 0.0:
        bnorm = 1.0
    relres = np.sqrt(_dot(r, r)) / bnorm
    rho_old = 1.0
    it = 0
    while relres > eps and it < max_iter:
        for i in numba.prange(n):
            z[i] = r[i] / d[i]
        rho = _dot(r, z)
        beta = 0.0 if it == 0 else rho / rho_old
        for i in numba.prange(n):
            p[i] = z[i] + beta * p[i]
        if ell:
            _ell_apply(d, item, amat, p, q)
        else:
            _crs_apply(d, index, item, amat, p, q)
        alpha = rho / _dot(p, q)
        for i in numba.prange(n):
            x[i] += alpha * p[i]
            r[i] -= alpha * q[i]
        rho_old = rho
        it += 1
        relres = np.sqrt(_dot(r, r)) / bnorm
    return it, relres


def _pcg_ladder_numba(version, d, off, b, tol, max_iter):
    n = d.shape[0]
    x = np.zeros(n)
    w = np.empty(4 * n)
    (_zero_serial if version == "v0" else _zero_parallel)(w)      # v1, v2: first touch
    if version == "v2":
        item, amat = off
        return x, *_cg_loop(True, d, np.zeros(1, dtype=np.int32), item, amat, b, x, w, tol,
                            max_iter)
    index, item, amat = off
    return x, *_cg_loop(False, d, index, item, amat, b, x, w, tol, max_iter)


def check_ladder(version: str, lang: str) -> None:
    """ValueError unless `version` of the ladder exists in `lang`."""
    native.check_version(version)
    check_lang(lang)
    if lang not in LADDER_LANGS[version]:
        if version == "v3" and lang == "numba":
            raise ValueError("v3 has no Numba twin: Numba opens a parallel region for every "
                             "prange loop and cannot keep one open across an iteration; use "
                             "lang c or fortran, or v0 .. v2")
        raise ValueError(f"the ladder is OpenMP code: lang must be one of "
                         f"{', '.join(LADDER_LANGS[version])} for {version}, got {lang!r}")


def pcg_ladder(problem, version: str = "v3", lang: str = "c", tol: float = 1e-8,
               max_iter: int | None = None) -> SolveResult:
    """Step `version` of the OpenMP PCG ladder on the course.fvm.Poisson `problem` (x0 = 0): v0,
    v1 on its off-diagonal part in CRS, v2, v3 in ELL (converted when `problem` holds the other
    format). c and fortran have v0 .. v3, numba v0 .. v2."""
    check_ladder(version, lang)
    n = problem.n
    native.check_array(problem.d, "d", native.REAL, n)
    native.check_array(problem.b, "b", native.REAL, n)
    tol = native.check_real(tol, "tol", positive=True)
    max_iter = native.check_int(10 * n if max_iter is None else max_iter, "max_iter")
    if version in ("v0", "v1"):
        a = problem.off_crs()
        off = (a.row_ptr, a.col_idx, a.val)
    else:
        a = problem.off_ell()
        off = (a.item, a.val)
    if lang == "numba":
        if np.any(problem.d == 0):
            raise ValueError("d must have no zero entry (the preconditioner divides by it)")
        x, iters, relres = _pcg_ladder_numba(version, problem.d, off, problem.b, tol, max_iter)
    else:
        x, iters, relres = native.pcg_ladder(lang, version, problem.d, off, problem.b, tol=tol,
                                             max_iter=max_iter)
    return SolveResult(x, int(iters), float(relres), relres <= tol)
