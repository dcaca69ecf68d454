"""Finite elements: element matrices, assembly into CRS, boundary conditions, errors.

1D steady heat conduction (lecture 01_fem1d):

    -d/dx (cond dT/dx) = qvol  on [0, L],   T(0) = 0,   cond dT/dx (L) = qflux,

with linear elements. Every step exists as `numpy` (the readable reference), `numba`, `c` and
`fortran`; the functions below take `lang` and return the same arrays whichever is chosen.
"""

from __future__ import annotations

import numba
import numpy as np

from . import native
from .langs import check_lang
from .sparse import CRS


# --- element matrix ------------------------------------------------------------------------------

def fem1d_element_numpy(h: float, cond: float, qvol: float):
    """ke = cond/h [[1, -1], [-1, 1]] and fe = qvol h/2 [1, 1] for a linear element of length h.

    From the shape functions N1 = (x2 - x)/h, N2 = (x - x1)/h: ke_ab = int cond N_a' N_b' dx,
    fe_a = int qvol N_a dx.
    """
    ke = cond / h * np.array([[1.0, -1.0], [-1.0, 1.0]])
    fe = 0.5 * qvol * h * np.ones(2)
    return ke, fe


@numba.njit(cache=True)
def fem1d_element_numba(h, cond, qvol):
    k = cond / h
    ke = np.array([[k, -k], [-k, k]])
    fe = np.array([0.5 * qvol * h, 0.5 * qvol * h])
    return ke, fe


# --- sparsity pattern ----------------------------------------------------------------------------

def fem1d_pattern_numpy(n_node: int):
    """CRS pattern of the tridiagonal matrix: node i couples with i-1, i, i+1."""
    counts = np.full(n_node, 3)
    counts[[0, -1]] = 2
    row_ptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int32)
    rows = np.repeat(np.arange(n_node), counts)
    offsets = np.arange(row_ptr[-1]) - row_ptr[rows]          # 0, 1, (2) within each row
    col_idx = (rows + offsets - (rows > 0)).astype(np.int32)  # row 0 starts at column 0
    return row_ptr, col_idx


@numba.njit(cache=True)
def fem1d_pattern_numba(n_node):
    row_ptr = np.empty(n_node + 1, dtype=np.int32)
    col_idx = np.empty(3 * n_node - 2, dtype=np.int32)
    k = 0
    for i in range(n_node):
        row_ptr[i] = k
        for j in range(max(i - 1, 0), min(i + 2, n_node)):
            col_idx[k] = j
            k += 1
    row_ptr[n_node] = k
    return row_ptr, col_idx


# --- assembly ------------------------------------------------------------------------------------

def fem1d_assemble_numpy(x, cond, qvol, row_ptr, col_idx):
    """Add every element matrix into the CRS values and every element load into the rhs."""
    n = x.shape[0]
    val, rhs = np.zeros(col_idx.shape[0]), np.zeros(n)
    for e in range(n - 1):
        ke, fe = fem1d_element_numpy(x[e + 1] - x[e], cond, qvol)
        nodes = (e, e + 1)
        for a in range(2):
            rhs[nodes[a]] += fe[a]
            for b in range(2):
                row = slice(row_ptr[nodes[a]], row_ptr[nodes[a] + 1])
                k = row.start + np.flatnonzero(col_idx[row] == nodes[b])[0]
                val[k] += ke[a, b]
    return val, rhs


@numba.njit(cache=True)
def fem1d_assemble_numba(x, cond, qvol, row_ptr, col_idx):
    n = x.shape[0]
    val, rhs = np.zeros(col_idx.shape[0]), np.zeros(n)
    for e in range(n - 1):
        ke, fe = fem1d_element_numba(x[e + 1] - x[e], cond, qvol)
        for a in range(2):
            rhs[e + a] += fe[a]
            for b in range(2):
                for k in range(row_ptr[e + a], row_ptr[e + a + 1]):
                    if col_idx[k] == e + b:
                        val[k] += ke[a, b]
    return val, rhs


# --- boundary conditions -------------------------------------------------------------------------

def fem1d_boundary_numpy(qflux, row_ptr, col_idx, val, rhs):
    """T = 0 at node 0 (row and column of the identity, rhs 0), flux added at the last node."""
    rows = np.repeat(np.arange(rhs.shape[0]), np.diff(row_ptr))
    touches_node0 = (rows == 0) | (col_idx == 0)
    val[touches_node0] = np.where(rows[touches_node0] == col_idx[touches_node0], 1.0, 0.0)
    rhs[0] = 0.0
    rhs[-1] += qflux


@numba.njit(cache=True)
def fem1d_boundary_numba(qflux, row_ptr, col_idx, val, rhs):
    n = rhs.shape[0]
    for i in range(n):
        for k in range(row_ptr[i], row_ptr[i + 1]):
            if i == 0 or col_idx[k] == 0:
                val[k] = 1.0 if col_idx[k] == i else 0.0
    rhs[0] = 0.0
    rhs[n - 1] += qflux


# --- one entry point per step, any language ------------------------------------------------------

def fem1d_element(h, cond, qvol, lang="numpy"):
    if check_lang(lang) == "numpy":
        return fem1d_element_numpy(h, cond, qvol)
    if lang == "numba":
        return fem1d_element_numba(float(h), float(cond), float(qvol))
    return native.fem1d_element(lang, h, cond, qvol)


def fem1d_pattern(n_node, lang="numpy"):
    native.check_int(n_node, "n_node", minimum=2)
    if check_lang(lang) == "numpy":
        return fem1d_pattern_numpy(n_node)
    if lang == "numba":
        return fem1d_pattern_numba(n_node)
    return native.fem1d_pattern(lang, n_node)


def fem1d_assemble(x, cond, qvol, lang="numpy") -> tuple[CRS, np.ndarray]:
    """The global matrix (CRS) and load vector of the mesh with node coordinates x."""
    check_lang(lang)
    row_ptr, col_idx = fem1d_pattern(x.shape[0], lang)
    if lang == "numpy":
        val, rhs = fem1d_assemble_numpy(x, cond, qvol, row_ptr, col_idx)
    elif lang == "numba":
        val, rhs = fem1d_assemble_numba(x, float(cond), float(qvol), row_ptr, col_idx)
    else:
        val, rhs = native.fem1d_assemble(lang, x, cond, qvol, row_ptr, col_idx)
    return CRS(row_ptr, col_idx, val), rhs


def fem1d_boundary(a: CRS, rhs: np.ndarray, qflux: float, lang="numpy") -> None:
    """Apply the boundary conditions to `a` and `rhs` in place."""
    if check_lang(lang) == "numpy":
        fem1d_boundary_numpy(qflux, a.row_ptr, a.col_idx, a.val, rhs)
    elif lang == "numba":
        fem1d_boundary_numba(float(qflux), a.row_ptr, a.col_idx, a.val, rhs)
    else:
        native.fem1d_boundary(lang, qflux, a.row_ptr, a.col_idx, a.val, rhs)


# --- exact solution and errors -------------------------------------------------------------------

def fem1d_exact(x, length=1.0, cond=1.0, qvol=1.0, qflux=0.0):
    """T(x) = -qvol x^2 / (2 cond) + (qflux + qvol L) x / cond."""
    x = np.asarray(x, dtype=float)
    return (-0.5 * qvol * x**2 + (qflux + qvol * length) * x) / cond


def gauss_legendre(n_points: int):
    """Points and weights of the n-point Gauss-Legendre rule on [-1, 1]."""
    return np.polynomial.legendre.leggauss(n_points)


def fem1d_error_l2(x, t, exact, n_points=3) -> float:
    """||T_h - T||_L2 over the mesh, T_h piecewise linear through the nodal values t.

    Each element is integrated with an n_points Gauss rule (3 points integrate the square of a
    quadratic error exactly)."""
    xi, w = gauss_legendre(n_points)
    x0, x1 = x[:-1, None], x[1:, None]
    t0, t1 = t[:-1, None], t[1:, None]
    xq = 0.5 * (x0 + x1) + 0.5 * (x1 - x0) * xi       # quadrature points, per element
    tq = t0 + (t1 - t0) * (xq - x0) / (x1 - x0)        # the FE solution there
    err2 = (0.5 * (x1 - x0) * w * (tq - exact(xq)) ** 2).sum()
    return float(np.sqrt(err2))
