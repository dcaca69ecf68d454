"""IC(0)-preconditioned CG (lecture 04_iccg): the factorisation, the colored substitutions and the
solve, in numpy (the reference), numba, c and fortran.

IC(0) is the Cholesky factorisation with no fill-in: the factor keeps the pattern of A's lower
triangle and drops every entry outside it. In the root-free form used here (as in Nakajima's ICCG
codes) A = L_A + D_A + U_A (strict lower part, diagonal, strict upper part) is approximated by

    M = (D + L) D^-1 (D + L^T),   L with the pattern of L_A,

where, row by row (i = 0, 1, ...; k runs over unknowns coupled to both i and j):

    l_ij = a_ij - sum_{k < j} l_ik l_jk / d_k        for every j < i coupled to i
    d_i  = a_ii - sum_{j < i} l_ij^2 / d_j

so that (D + L) D^-1 (D + L^T) equals A on every entry of A's pattern (tests/test_iccg.py checks
that). When no two lower neighbours j, k of a row are coupled to each other, the sum in l_ij is
empty and L = L_A: only the diagonal changes. That is the case of the 7-point stencil in ANY
numbering, because the grid graph has no triangles (cells (i,j,k) split into "even" and "odd" by
i + j + k, and a coupling always joins an even cell to an odd one): IC(0) of the finite-volume
Poisson matrix is the modified diagonal d alone. The 27-point FEM matrix of 02_fem3d has triangles,
and its L differs from L_A.

M^-1 r is two triangular solves:

    forward   y_i = (r_i - sum_{j < i} l_ij y_j) / d_i           increasing i
    backward  z_i = y_i - (sum_{j > i} l_ji z_j) / d_i           decreasing i

After a colored ordering (course.solvers.ordering) no two unknowns of one color are coupled, so all
rows of a color can be done at once: a loop over the colors, a parallel loop inside each, and a
barrier after each color. The arithmetic of every row is fixed by the ordering, not by the threads:
the substitution gives bitwise the same z for any number of threads. A single color means the plain
sequential sweep (natural ordering).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numba
import numpy as np
import scipy.sparse
import scipy.sparse.linalg

from .. import native
from ..sparse import CRS
from . import team
from .krylov import SolveResult, krylov

ICCG_LANGS = ("numpy", "numba", "c", "fortran")

# Barriers of one iteration of the compiled ICCG (src_c/04_iccg/iccg.c) outside the substitutions:
# p = z + beta p; q = A p; (p, q); x, r update; (r, r) and (r, z) -- each an `omp for` with its
# implied barrier -- and the `omp single` that turns the sums into alpha and beta. The two
# substitutions add one barrier per color each. The Numba team (_iccg_thread) has no omp single,
# and q = A p and (p, q) share their rows: one barrier after each of (r, z), p, (p, q), (r, r).
CG_BARRIERS_PER_ITERATION = {"c": 6, "fortran": 6, "numpy": 6, "numba": 4}


def synchronisations_per_iteration(colors: int, lang: str = "c") -> int:
    """Barriers of one ICCG iteration: one per color in each substitution plus the CG's own
    (CG_BARRIERS_PER_ITERATION: those of C and Fortran, and of numpy, which runs on one thread;
    the Numba team has two fewer)."""
    return 2 * colors + CG_BARRIERS_PER_ITERATION[lang]


@dataclass
class Split:
    """A symmetric matrix as its diagonal and its strict lower and upper parts in CRS (the layout
    of Nakajima's codes: D, indexL/itemL/AL, indexU/itemU/AU), 0-based, columns increasing."""
    diag: np.ndarray
    lower: CRS
    upper: CRS

    @property
    def n(self) -> int:
        return self.diag.shape[0]


def split(a: CRS) -> Split:
    """D, the strict lower and the strict upper part of the CRS matrix a."""
    n = a.n
    rows = np.repeat(np.arange(n, dtype=np.int32), np.diff(a.row_ptr))
    diag = np.zeros(n)
    on = rows == a.col_idx
    diag[rows[on]] = a.val[on]
    parts = []
    for keep in (a.col_idx < rows, a.col_idx > rows):
        ptr = np.zeros(n + 1, dtype=np.int32)
        np.cumsum(np.bincount(rows[keep], minlength=n), out=ptr[1:])
        parts.append(CRS(ptr, a.col_idx[keep].copy(), a.val[keep].copy()))
    return Split(diag, *parts)


@dataclass
class IC0:
    """The IC(0) factor: the modified diagonal d, L's values (pattern of the strict lower part)
    and the same values transposed (pattern of the strict upper part, for the backward sweep)."""
    d: np.ndarray
    lower: CRS
    upper: CRS


# --- numpy / numba: the factorisation (plain loops; Python for numpy, compiled for numba) ------

# [ic0_factor]
def _ic0_factor(n, lower_ptr, lower_col, lower_val, diag, fac_lower, fac_diag):
    """IC(0), row by row (formulas in the module docstring). Returns 0, or -(i + 1) if d_i <= 0
    (the factorisation broke down at row i)."""
    for i in range(n):
        for p in range(lower_ptr[i], lower_ptr[i + 1]):
            j = lower_col[p]
            s = lower_val[p]
            # sum over k < j coupled to both i and j: merge row i (before p) with row j
            q = lower_ptr[j]
            for pk in range(lower_ptr[i], p):
                k = lower_col[pk]
                while q < lower_ptr[j + 1] and lower_col[q] < k:
                    q += 1
                if q < lower_ptr[j + 1] and lower_col[q] == k:
                    s -= fac_lower[pk] * fac_lower[q] / fac_diag[k]
            fac_lower[p] = s
        s = diag[i]
        for p in range(lower_ptr[i], lower_ptr[i + 1]):
            s -= fac_lower[p] * fac_lower[p] / fac_diag[lower_col[p]]
        if not s > 0.0:
            return -(i + 1)
        fac_diag[i] = s
    return 0
# [ic0_factor]


_ic0_factor_numba = numba.njit(cache=True)(_ic0_factor)


def transpose_values(lower: CRS, upper_ptr: np.ndarray, upper_col: np.ndarray,
                     values: np.ndarray) -> np.ndarray:
    """Values on the lower pattern moved to the transposed (upper) pattern."""
    n = lower.n
    t = scipy.sparse.csr_matrix((values, lower.col_idx, lower.row_ptr), shape=(n, n)).T.tocsr()
    t.sort_indices()
    if not (np.array_equal(t.indptr, upper_ptr) and np.array_equal(t.indices, upper_col)):
        raise ValueError("the upper part is not the transpose of the lower part: the matrix is "
                         "not structurally symmetric")
    return t.data.copy()


def ic0(s: Split, lang: str = "numba") -> IC0:
    """The IC(0) factor of the split symmetric matrix s; ValueError if a pivot d_i <= 0."""
    check_lang(lang)
    n = s.n
    if lang in ("c", "fortran"):
        d, low, up = native.ic0_factor(lang, s.diag, s.lower.row_ptr, s.lower.col_idx,
                                       s.lower.val, s.upper.row_ptr, s.upper.col_idx)
    else:
        d, low = np.empty(n), np.empty(s.lower.nnz)
        factor = _ic0_factor if lang == "numpy" else _ic0_factor_numba
        status = factor(n, s.lower.row_ptr, s.lower.col_idx, s.lower.val, s.diag, low, d)
        if status < 0:
            raise ValueError(f"IC(0) broke down: pivot {-status - 1} is not positive (the matrix "
                             f"is not an M-matrix, or not positive definite)")
        up = transpose_values(s.lower, s.upper.row_ptr, s.upper.col_idx, low)
    return IC0(d, CRS(s.lower.row_ptr, s.lower.col_idx, low),
               CRS(s.upper.row_ptr, s.upper.col_idx, up))


def check_lang(lang: str) -> str:
    if lang not in ICCG_LANGS:
        raise ValueError(f"lang must be one of {', '.join(ICCG_LANGS)}; got {lang!r}")
    return lang


# --- the substitutions -------------------------------------------------------------------------

def _scipy(part: CRS, n: int) -> scipy.sparse.csr_matrix:
    return scipy.sparse.csr_matrix((part.val, part.col_idx, part.row_ptr), (n, n))


def _apply_numpy(f: IC0, r: np.ndarray) -> np.ndarray:
    """z = M^-1 r by SciPy's sparse triangular solves (the reference: no colors involved)."""
    n = f.d.shape[0]
    y = scipy.sparse.linalg.spsolve_triangular(
        (scipy.sparse.diags(f.d) + _scipy(f.lower, n)).tocsr(), r, lower=True)
    return scipy.sparse.linalg.spsolve_triangular(
        (scipy.sparse.identity(n) + scipy.sparse.diags(1.0 / f.d) @ _scipy(f.upper, n)).tocsr(),
        y, lower=False)


# [ic0_forward_numba]
@numba.njit(inline="always")
def _forward_row(i, lower_ptr, lower_col, fac_lower, inv_diag, r, z):
    s = r[i]
    for k in range(lower_ptr[i], lower_ptr[i + 1]):
        s -= fac_lower[k] * z[lower_col[k]]
    z[i] = s * inv_diag[i]


@numba.njit(inline="always")
def _forward(thread, nthreads, sync, color_ptr, lower_ptr, lower_col, fac_lower, inv_diag, r, z):
    """z = (D + L)^-1 r by one thread of the team (course.solvers.team), as src_c/04_iccg/ic0.c:
    color by color, the thread's static chunk of the color's rows, a barrier after each color.
    One color: thread 0 alone does the sequential sweep (C's omp single). Times 1/d, not / d."""
    ncolor = color_ptr.shape[0] - 1
    if ncolor == 1:
        if thread == 0:
            for i in range(r.shape[0]):
                _forward_row(i, lower_ptr, lower_col, fac_lower, inv_diag, r, z)
        team.barrier(sync, nthreads)
        return
    for c in range(ncolor):
        first, end = team.chunk(color_ptr[c], color_ptr[c + 1], thread, nthreads)
        for i in range(first, end):
            _forward_row(i, lower_ptr, lower_col, fac_lower, inv_diag, r, z)
        team.barrier(sync, nthreads)             # the color is done
# [ic0_forward_numba]


@numba.njit(inline="always")
def _backward_row(i, upper_ptr, upper_col, fac_upper, inv_diag, z):
    s = 0.0
    first, k = upper_ptr[i], upper_ptr[i + 1]
    while k > first:                     # columns falling, as in C (a while loop: Numba's
        k -= 1                           # range with step -1 ran up to 1.6 times slower)
        s += fac_upper[k] * z[upper_col[k]]
    z[i] -= s * inv_diag[i]


@numba.njit(inline="always")
def _backward(thread, nthreads, sync, color_ptr, upper_ptr, upper_col, fac_upper, inv_diag, z):
    """z = (I + D^-1 L^T)^-1 z, the colors backwards."""
    ncolor = color_ptr.shape[0] - 1
    if ncolor == 1:
        if thread == 0:
            i = np.uint64(z.shape[0])
            while i > 0:
                i -= np.uint64(1)
                _backward_row(i, upper_ptr, upper_col, fac_upper, inv_diag, z)
        team.barrier(sync, nthreads)
        return
    for c in range(ncolor - 1, -1, -1):
        first, end = team.chunk(color_ptr[c], color_ptr[c + 1], thread, nthreads)
        for i in range(first, end):
            _backward_row(i, upper_ptr, upper_col, fac_upper, inv_diag, z)
        team.barrier(sync, nthreads)


@numba.njit(cache=True)
def _apply_thread(thread, nthreads, sync, color_ptr, lower_ptr, lower_col, lower_val, upper_ptr,
                  upper_col, upper_val, d, inv_diag, r, z):
    if not team.roll_call(sync, nthreads):
        return
    first, end = team.chunk(0, r.shape[0], thread, nthreads)
    for i in range(first, end):
        inv_diag[i] = 1.0 / d[i]
    team.barrier(sync, nthreads)
    _forward(thread, nthreads, sync, color_ptr, lower_ptr, lower_col, lower_val, inv_diag, r, z)
    _backward(thread, nthreads, sync, color_ptr, upper_ptr, upper_col, upper_val, inv_diag, z)


@numba.njit(parallel=True, cache=True)
def _apply_numba(nthreads, color_ptr, lower_ptr, lower_col, lower_val, upper_ptr, upper_col,
                 upper_val, d, r, z):
    """ic0_apply by a team of nthreads threads in one parallel region; False if the team could
    not be formed (then nothing was computed)."""
    sync = np.zeros(team.SYNC_SIZE, dtype=np.int64)
    inv_diag = np.empty(r.shape[0])
    for thread in numba.prange(nthreads):
        _apply_thread(thread, nthreads, sync, color_ptr, lower_ptr, lower_col, lower_val,
                      upper_ptr, upper_col, upper_val, d, inv_diag, r, z)
    return (team.formed(sync, nthreads),)


_team_called_off = False


def _as_team(kernel, *args):
    """kernel(nthreads, *args) with Numba's threads as one team, less its first value (whether the
    team was formed). When Numba's threading layer did not run all the threads at once, warn
    once and use one thread from then on (course.solvers.team.roll_call)."""
    global _team_called_off
    nthreads = 1 if _team_called_off else numba.get_num_threads()
    result = kernel(nthreads, *args)
    if not result[0]:
        _team_called_off = True
        warnings.warn(f"Numba's threading layer ({numba.threading_layer()}) did not run "
                      f"{nthreads} threads at once: the Numba ICCG runs on one thread from now "
                      "on (NUMBA_THREADING_LAYER=omp or workqueue runs them together)",
                      RuntimeWarning, stacklevel=3)
        result = kernel(1, *args)
    return result[1:]


def ic0_apply(f: IC0, r: np.ndarray, color_ptr: np.ndarray, lang: str = "numba",
              z: np.ndarray | None = None) -> np.ndarray:
    """z = M^-1 r with the factor f of a matrix numbered color by color (color_ptr: the colors;
    [0, n] for one sequential sweep). numpy ignores the colors (SciPy's triangular solves)."""
    check_lang(lang)
    n = f.d.shape[0]
    native.check_array(r, "r", native.REAL, n)
    if lang == "numpy":
        return _apply_numpy(f, r)
    if lang in ("c", "fortran"):
        return native.ic0_apply(lang, color_ptr, f.lower.row_ptr, f.lower.col_idx, f.lower.val,
                                f.upper.row_ptr, f.upper.col_idx, f.upper.val, f.d, r, z)
    native.check_color_ptr(color_ptr, n)
    z = np.empty(n) if z is None else native.check_array(z, "z", native.REAL, n, writeable=True)
    _as_team(_apply_numba, *_unsigned(color_ptr, f.lower.row_ptr, f.lower.col_idx), f.lower.val,
             *_unsigned(f.upper.row_ptr, f.upper.col_idx), f.upper.val, f.d, r, z)
    return z


def _unsigned(*index_arrays):
    """The int32 index arrays seen as uint32 (the same bytes: no index is negative). Numba, like
    Python, reads x[-1] as the last entry, so an access through a signed index tests its sign
    first; through an unsigned one it does not, and the loops of the sweeps and the SpMV run about
    twice as fast (as fast as C's)."""
    return [a.view(np.uint32) for a in index_arrays]


# --- the solve ---------------------------------------------------------------------------------

def iccg(a: CRS | Split, b: np.ndarray, color_ptr: np.ndarray, lang: str = "c",
         tol: float = 1e-8, max_iter: int | None = None, factor: IC0 | None = None) -> SolveResult:
    """IC(0)-preconditioned CG on A x = b (x0 = 0), A symmetric positive definite, numbered color
    by color (course.solvers.ordering; color_ptr [0, n] for the natural, sequential sweep).

    c, fortran: the compiled ICCG (one parallel region for the whole solve, the substitutions
    color by color); numba: the same loop compiled by Numba (_iccg_numba); numpy:
    course.solvers.krylov (PCG) with SciPy's triangular solves as the preconditioner. The
    iterations stop at ||r|| <= tol ||b||. A split matrix (split(a)) saves the split."""
    check_lang(lang)
    s = a if isinstance(a, Split) else split(a)
    n = s.n
    native.check_array(b, "b", native.REAL, n)
    tol = native.check_real(tol, "tol", positive=True)
    max_iter = native.check_int(10 * n if max_iter is None else max_iter, "max_iter")
    f = ic0(s, lang) if factor is None else factor
    if lang in ("c", "fortran"):
        x, iters, relres = native.iccg(lang, color_ptr, s.diag, s.lower, s.upper, f.d, f.lower.val,
                                       f.upper.val, b, tol, max_iter)
        return SolveResult(x, iters, relres, relres <= tol)
    native.check_color_ptr(color_ptr, n)
    if lang == "numba":
        x = np.zeros(n)
        iters, relres = _as_team(_iccg_numba, *_unsigned(color_ptr), s.diag,
                                 *_unsigned(s.lower.row_ptr, s.lower.col_idx), s.lower.val,
                                 *_unsigned(s.upper.row_ptr, s.upper.col_idx), s.upper.val,
                                 f.d, f.lower.val, f.upper.val, b, x, tol, max_iter)
        return SolveResult(x, iters, relres, relres <= tol)
    a_scipy = (scipy.sparse.diags(s.diag) + _scipy(s.lower, n) + _scipy(s.upper, n)).tocsr()
    return krylov(lambda v: a_scipy @ v, b, lambda r: _apply_numpy(f, r), tol=tol,
                  max_iter=max_iter)


@numba.njit(inline="always")
def _split_matvec(first, end, diag, lower_ptr, lower_col, lower_val, upper_ptr, upper_col,
                  upper_val, x, y):
    """y = A x on the rows [first, end)."""
    for i in range(first, end):
        s = diag[i] * x[i]
        for k in range(lower_ptr[i], lower_ptr[i + 1]):
            s += lower_val[k] * x[lower_col[k]]
        for k in range(upper_ptr[i], upper_ptr[i + 1]):
            s += upper_val[k] * x[upper_col[k]]
        y[i] = s


@numba.njit(cache=True)
def _iccg_thread(thread, nthreads, sync, partial, color_ptr, diag, lower_ptr, lower_col,
                 lower_val, upper_ptr, upper_col, upper_val, fac_diag, fac_lower, fac_upper, b,
                 x, r, z, p, q, inv_diag, eps, max_iter, out):
    """One thread's share of src_c/04_iccg/ic0.c's iccg, operation for operation (so the same
    iterations): its static chunk of every loop, the team's barriers where C has its implied
    ones. The sums (team.team_sum) are added by every thread, where C adds them once in an
    omp single: 2 colors + 4 barriers per iteration, against C's 2 colors + 6."""
    if not team.roll_call(sync, nthreads):
        return
    first, end = team.chunk(0, b.shape[0], thread, nthreads)
    for i in range(first, end):                                # first touch
        r[i] = z[i] = p[i] = q[i] = 0.0
        inv_diag[i] = 1.0 / fac_diag[i]
    _split_matvec(first, end, diag, lower_ptr, lower_col, lower_val, upper_ptr, upper_col,
                  upper_val, x, q)
    bb = 0.0
    rr = 0.0
    for i in range(first, end):                                # r = b - A x
        r[i] = b[i] - q[i]
        bb += b[i] * b[i]
        rr += r[i] * r[i]
    bb = team.team_sum(partial, 0, thread, bb, sync, nthreads)
    rr = team.team_sum(partial, 1, thread, rr, sync, nthreads)
    bnorm = np.sqrt(bb) if bb > 0.0 else 1.0
    res = np.sqrt(rr) / bnorm
    rho_old = 1.0
    iters = 0
    while res > eps and iters < max_iter:
        _forward(thread, nthreads, sync, color_ptr, lower_ptr, lower_col, fac_lower, inv_diag,
                 r, z)
        _backward(thread, nthreads, sync, color_ptr, upper_ptr, upper_col, fac_upper, inv_diag,
                  z)
        rho = 0.0
        for i in range(first, end):
            rho += r[i] * z[i]
        rho = team.team_sum(partial, 2, thread, rho, sync, nthreads)
        beta = 0.0 if iters == 0 else rho / rho_old
        for i in range(first, end):
            p[i] = z[i] + beta * p[i]
        team.barrier(sync, nthreads)                           # q = A p reads all of p
        _split_matvec(first, end, diag, lower_ptr, lower_col, lower_val, upper_ptr, upper_col,
                      upper_val, p, q)
        pq = 0.0
        for i in range(first, end):
            pq += p[i] * q[i]
        alpha = rho / team.team_sum(partial, 3, thread, pq, sync, nthreads)
        rr = 0.0
        for i in range(first, end):
            x[i] += alpha * p[i]
            r[i] -= alpha * q[i]
            rr += r[i] * r[i]
        res = np.sqrt(team.team_sum(partial, 4, thread, rr, sync, nthreads)) / bnorm
        rho_old = rho
        iters += 1
    if thread == 0:
        out[0] = iters
        out[1] = res


@numba.njit(parallel=True, cache=True)
def _iccg_numba(nthreads, color_ptr, diag, lower_ptr, lower_col, lower_val, upper_ptr,
                upper_col, upper_val, fac_diag, fac_lower, fac_upper, b, x, eps, max_iter):
    """ICCG by a team of nthreads threads in ONE parallel region, as C's (one prange over the
    threads; a prange per loop would open 2 colors + 6 regions per iteration). Returns whether
    the team was formed (if not, nothing was computed), the iterations and ||r|| / ||b||."""
    n = b.shape[0]
    r, z, p, q, inv_diag = np.empty(n), np.empty(n), np.empty(n), np.empty(n), np.empty(n)
    sync = np.zeros(team.SYNC_SIZE, dtype=np.int64)
    partial = np.zeros((5, nthreads))
    out = np.zeros(2)
    for thread in numba.prange(nthreads):
        _iccg_thread(thread, nthreads, sync, partial, color_ptr, diag, lower_ptr, lower_col,
                     lower_val, upper_ptr, upper_col, upper_val, fac_diag, fac_lower, fac_upper,
                     b, x, r, z, p, q, inv_diag, eps, max_iter, out)
    return team.formed(sync, nthreads), int(out[0]), out[1]
