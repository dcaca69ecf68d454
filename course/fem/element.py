"""The tri-linear hexahedron (8 nodes) and its 2x2x2 Gauss rule (lecture 02_fem3d).

Reference element [-1, 1]^3, local node a at the corner (xi_a, eta_a, zeta_a) = HEX8_CORNERS[a]:

    N_a(xi, eta, zeta) = (1 + xi xi_a) (1 + eta eta_a) (1 + zeta zeta_a) / 8.

The map x(xi) = sum_a N_a(xi) x_a takes it onto the element with corners x_a. Its Jacobian is
J[d, r] = dx_d / dxi_r = sum_a x_a[d] dN_a/dxi_r, and the chain rule gives the physical gradients
grad N_a = J^-T (dN_a/dxi, dN_a/deta, dN_a/dzeta), i.e. row-wise dN/dx = dN/dxi @ inv(J).

Element matrices of steady heat conduction, with the source Q_h = sum_c N_c q_c interpolated from
its nodal values, by Gauss quadrature (points xi_g, weights w_g):

    ke_ab = int cond grad N_a . grad N_b dV  ~  sum_g w_g cond (grad N_a . grad N_b) det J  at xi_g
    fe_a  = int N_a Q_h dV                   ~  sum_g w_g N_a Q_h det J                     at xi_g
"""

from __future__ import annotations

from typing import NamedTuple

import numba
import numpy as np

from .. import native
from ..langs import check_lang

HEX8_CORNERS = np.array([[-1.0, -1.0, -1.0], [1.0, -1.0, -1.0], [1.0, 1.0, -1.0],
                         [-1.0, 1.0, -1.0], [-1.0, -1.0, 1.0], [1.0, -1.0, 1.0],
                         [1.0, 1.0, 1.0], [-1.0, 1.0, 1.0]])


class Quadrature(NamedTuple):
    points: np.ndarray    # (n, 3) reference coordinates (xi, eta, zeta)
    weights: np.ndarray   # (n,)


def gauss_hex(n_points: int = 2) -> Quadrature:
    """The n x n x n Gauss-Legendre rule on [-1, 1]^3; zeta varies slowest, xi fastest."""
    x, w = np.polynomial.legendre.leggauss(n_points)
    zeta, eta, xi = np.meshgrid(x, x, x, indexing="ij")
    wz, wy, wx = np.meshgrid(w, w, w, indexing="ij")
    points = np.stack([xi.ravel(), eta.ravel(), zeta.ravel()], axis=1)
    return Quadrature(points, (wx * wy * wz).ravel())


# 8 points (+-1/sqrt(3) in each direction), weights 1: integrates tri-cubic polynomials exactly.
GAUSS_2x2x2 = gauss_hex(2)


def hex8_shape(xi, eta, zeta) -> np.ndarray:
    """N_a at the point(s) (xi, eta, zeta); shape (..., 8) for inputs of shape (...)."""
    xi, eta, zeta = (np.asarray(c, dtype=float)[..., None] for c in (xi, eta, zeta))
    c = HEX8_CORNERS
    return (1 + xi * c[:, 0]) * (1 + eta * c[:, 1]) * (1 + zeta * c[:, 2]) / 8


def hex8_dshape(xi, eta, zeta) -> np.ndarray:
    """dN_a/dxi_r at the point(s): shape (..., 8, 3), column r = derivative in xi, eta, zeta."""
    xi, eta, zeta = (np.asarray(c, dtype=float)[..., None] for c in (xi, eta, zeta))
    c = HEX8_CORNERS
    fx, fy, fz = 1 + xi * c[:, 0], 1 + eta * c[:, 1], 1 + zeta * c[:, 2]
    return np.stack([c[:, 0] * fy * fz, fx * c[:, 1] * fz, fx * fy * c[:, 2]], axis=-1) / 8


def hex8_jacobian(xyz8, xi, eta, zeta) -> np.ndarray:
    """J[d, r] = dx_d/dxi_r at one reference point, for the corners xyz8 (8 x 3)."""
    return np.asarray(xyz8, dtype=float).T @ hex8_dshape(xi, eta, zeta)


# --- element matrix and load ---------------------------------------------------------------------

def hex8_element_numpy(xyz8, cond, q8):
    """(ke 8x8, fe 8), a loop over the 8 Gauss points with small matrix operations."""
    ke, fe = np.zeros((8, 8)), np.zeros(8)
    for (xi, eta, zeta), w in zip(*GAUSS_2x2x2):
        n = hex8_shape(xi, eta, zeta)                # (8,)
        dn = hex8_dshape(xi, eta, zeta)              # (8, 3), reference derivatives
        jac = xyz8.T @ dn                            # (3, 3)
        det = np.linalg.det(jac)
        if det <= 0:
            raise ValueError(f"element is inverted or degenerate: det J = {det:.3g} <= 0 at the "
                             f"Gauss point ({xi:.3f}, {eta:.3f}, {zeta:.3f})")
        grad = dn @ np.linalg.inv(jac)               # (8, 3), row a = grad N_a
        ke += w * det * cond * grad @ grad.T
        fe += w * det * n * (n @ q8)                 # N_a Q_h
    return ke, fe


_G = 1.0 / np.sqrt(3.0)


@numba.njit(cache=True)
def hex8_element_into(xyz8, cond, q8, ke, fe):
    """The element matrix and load written into ke (8x8) and fe (8); returns False (ke, fe
    undefined) where det J <= 0 at a Gauss point."""
    dn = np.empty((8, 3))
    n = np.empty(8)
    grad = np.empty((8, 3))
    ke[:, :] = 0.0
    fe[:] = 0.0
    for gz in range(2):
        for gy in range(2):
            for gx in range(2):
                xi, eta, zeta = (2 * gx - 1) * _G, (2 * gy - 1) * _G, (2 * gz - 1) * _G
                for a in range(8):
                    fx = 1.0 + xi * HEX8_CORNERS[a, 0]
                    fy = 1.0 + eta * HEX8_CORNERS[a, 1]
                    fz = 1.0 + zeta * HEX8_CORNERS[a, 2]
                    n[a] = fx * fy * fz / 8.0
                    dn[a, 0] = HEX8_CORNERS[a, 0] * fy * fz / 8.0
                    dn[a, 1] = fx * HEX8_CORNERS[a, 1] * fz / 8.0
                    dn[a, 2] = fx * fy * HEX8_CORNERS[a, 2] / 8.0
                j = np.zeros((3, 3))
                for a in range(8):
                    for d in range(3):
                        for r in range(3):
                            j[d, r] += xyz8[a, d] * dn[a, r]
                # inverse by cofactors: inv[r, d] = cof[d, r] / det
                c00 = j[1, 1] * j[2, 2] - j[1, 2] * j[2, 1]
                c01 = j[1, 2] * j[2, 0] - j[1, 0] * j[2, 2]
                c02 = j[1, 0] * j[2, 1] - j[1, 1] * j[2, 0]
                det = j[0, 0] * c00 + j[0, 1] * c01 + j[0, 2] * c02
                if not det > 0.0:
                    return False
                inv = np.empty((3, 3))
                inv[0, 0], inv[1, 0], inv[2, 0] = c00 / det, c01 / det, c02 / det
                inv[0, 1] = (j[0, 2] * j[2, 1] - j[0, 1] * j[2, 2]) / det
                inv[1, 1] = (j[0, 0] * j[2, 2] - j[0, 2] * j[2, 0]) / det
                inv[2, 1] = (j[0, 1] * j[2, 0] - j[0, 0] * j[2, 1]) / det
                inv[0, 2] = (j[0, 1] * j[1, 2] - j[0, 2] * j[1, 1]) / det
                inv[1, 2] = (j[0, 2] * j[1, 0] - j[0, 0] * j[1, 2]) / det
                inv[2, 2] = (j[0, 0] * j[1, 1] - j[0, 1] * j[1, 0]) / det
                qg = 0.0
                for a in range(8):
                    qg += n[a] * q8[a]
                    for d in range(3):
                        grad[a, d] = dn[a, 0] * inv[0, d] + dn[a, 1] * inv[1, d] \
                            + dn[a, 2] * inv[2, d]
                for a in range(8):
                    fe[a] += n[a] * qg * det
                    for b in range(8):
                        ke[a, b] += cond * det * (grad[a, 0] * grad[b, 0] + grad[a, 1] * grad[b, 1]
                                                  + grad[a, 2] * grad[b, 2])
    return True


@numba.njit(cache=True)
def hex8_element_numba(xyz8, cond, q8):
    ke, fe = np.empty((8, 8)), np.empty(8)
    ok = hex8_element_into(xyz8, cond, q8, ke, fe)
    return ke, fe, ok


def hex8_element(xyz8, cond, q8, lang="numpy"):
    """Element conductivity matrix ke (8x8) and load fe (8) of the hexahedron with corners xyz8
    (8x3, local order) and nodal source values q8 (8) in the implementation `lang`.

    Raises ValueError if the Jacobian is not positive at a Gauss point (an inverted or degenerate
    element, e.g. corners numbered in the wrong order)."""
    if check_lang(lang) in native.COMPILED_LANGS:
        return native.fem3d_element(lang, xyz8, cond, q8)
    xyz8, q8 = np.asarray(xyz8, dtype=float), np.asarray(q8, dtype=float)
    if xyz8.shape != (8, 3) or q8.shape != (8,):
        raise ValueError(f"xyz8 must have shape (8, 3) and q8 shape (8,), got {xyz8.shape} "
                         f"and {q8.shape}")
    cond = native.check_real(cond, "cond", positive=True)
    if not (np.all(np.isfinite(xyz8)) and np.all(np.isfinite(q8))):
        raise ValueError("xyz8 and q8 must be finite")
    if lang == "numpy":
        return hex8_element_numpy(xyz8, cond, q8)
    ke, fe, ok = hex8_element_numba(np.ascontiguousarray(xyz8), cond, np.ascontiguousarray(q8))
    if not ok:
        raise ValueError("element is inverted or degenerate: det J <= 0 at a Gauss point")
    return ke, fe
