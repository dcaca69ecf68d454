"""Lecture 03_openmp: the OpenMP PCG ladder v0 .. v3 (diagonal-scaled CG on course.fem.fvm's
Poisson)."""

from __future__ import annotations

import numba
import numpy as np

from .. import native
from ..langs import check_lang
from .krylov import SolveResult

# Diagonal-scaled CG on A = D + A_off (course.fem.fvm.Poisson), the steps of the OpenMP lecture:
#   v0  CRS, the work vectors initialised by a serial loop, one parallel loop per operation
#   v1  as v0, the work vectors initialised in parallel (first touch: the pages land where the
#       threads that use them run)
#   v2  ELL (6 per row): the same inner trip count in every row
#   v3  ELL, one parallel region per iteration (C and Fortran only: Numba opens a parallel
#       region for every prange loop and has no construct to keep one open across loops; lecture
#       04's ICCG builds one by hand, course.solvers.team)

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
                             "prange loop and has no construct to keep one open across an "
                             "iteration; use lang c or fortran, or v0 .. v2")
        raise ValueError(f"the ladder is OpenMP code: lang must be one of "
                         f"{', '.join(LADDER_LANGS[version])} for {version}, got {lang!r}")


def pcg_ladder(problem, version: str = "v3", lang: str = "c", tol: float = 1e-8,
               max_iter: int | None = None) -> SolveResult:
    """Step `version` of the OpenMP PCG ladder on the course.fem.fvm.Poisson `problem` (x0 = 0): v0,
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
