"""Finite elements: element matrices, assembly into CRS, boundary conditions, errors.

1D steady heat conduction (lecture 01_fem1d):

    -d/dx (cond dT/dx) = qvol  on [0, L],   T(0) = 0,   cond dT/dx (L) = qflux,

with linear elements.

3D steady heat conduction (lecture 02_fem3d) on the box of a course.fem.mesh.BoxMesh:

    -div(cond grad T) = Q,   T = g on the fixed nodes,   cond dT/dn = qflux on one face (into the
    body), the other faces insulated,

with tri-linear hexahedra (course.fem.element); Q is given by nodal values and interpolated.

Every step exists as `numpy` (the readable reference), `numba`, `c` and `fortran`; the functions
below take `lang` and return the same arrays whichever is chosen.
"""

from __future__ import annotations

import numba
import numpy as np

from .. import native
from .element import GAUSS_2x2x2, gauss_hex, hex8_dshape, hex8_element_into, hex8_shape
from ..langs import check_lang
from .mesh import BoxMesh, check_face
from ..sparse import CRS


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


# =================================================================================================
# 3D: tri-linear hexahedra on a structured box (lecture 02_fem3d)
# =================================================================================================

# Elements handled at once by the vectorised numpy code: bounds its work arrays (about 200 doubles
# per element in the largest one, ~30 MB) whatever the size of the mesh.
CHUNK = 16_384


# --- sparsity pattern ----------------------------------------------------------------------------

def fem3d_pattern_numpy(mesh: BoxMesh):
    """The 27-point pattern: node (i, j, k) shares an element with every node (i+di, j+dj, k+dk),
    di, dj, dk in {-1, 0, 1}, that exists. Visiting the 27 offsets with dk slowest and di fastest
    gives the columns of every row in ascending order."""
    i, j, k = mesh.node_ijk()

    def neighbours(index, count):          # how many of index-1, index, index+1 lie in [0, count]
        return 1 + (index > 0) + (index < count)

    counts = neighbours(i, mesh.nx) * neighbours(j, mesh.ny) * neighbours(k, mesh.nz)
    row_ptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int32)
    col_idx = np.empty(row_ptr[-1], dtype=np.int32)
    next_free = row_ptr[:-1].astype(np.int64)  # where the next column of each row goes
    for dk in (-1, 0, 1):
        for dj in (-1, 0, 1):
            for di in (-1, 0, 1):
                ok = ((0 <= i + di) & (i + di <= mesh.nx) & (0 <= j + dj) & (j + dj <= mesh.ny)
                      & (0 <= k + dk) & (k + dk <= mesh.nz))
                col_idx[next_free[ok]] = mesh.node(i[ok] + di, j[ok] + dj, k[ok] + dk)
                next_free[ok] += 1
    return row_ptr, col_idx


@numba.njit(cache=True)
def fem3d_pattern_numba(nx, ny, nz):
    n_node = (nx + 1) * (ny + 1) * (nz + 1)
    row_ptr = np.empty(n_node + 1, dtype=np.int32)
    col_idx = np.empty((3 * nx + 1) * (3 * ny + 1) * (3 * nz + 1), dtype=np.int32)
    p = 0
    for k in range(nz + 1):
        for j in range(ny + 1):
            for i in range(nx + 1):
                row_ptr[i + (nx + 1) * (j + (ny + 1) * k)] = p
                for kk in range(max(k - 1, 0), min(k + 1, nz) + 1):
                    for jj in range(max(j - 1, 0), min(j + 1, ny) + 1):
                        for ii in range(max(i - 1, 0), min(i + 1, nx) + 1):
                            col_idx[p] = ii + (nx + 1) * (jj + (ny + 1) * kk)
                            p += 1
    row_ptr[n_node] = p
    return row_ptr, col_idx


# --- assembly ------------------------------------------------------------------------------------

def hex8_elements_numpy(xyz_e, cond, q_e, first=0):
    """ke (E, 8, 8) and fe (E, 8) of E elements at once, corners xyz_e (E, 8, 3), nodal sources
    q_e (E, 8): course.fem.element.hex8_element_numpy with its loops over elements and Gauss points
    turned into array axes e and g (a, b: local nodes, d: x/y/z, r: xi/eta/zeta)."""
    points, weights = GAUSS_2x2x2
    n = hex8_shape(*points.T)                                   # (G, 8)      N_a at point g
    dn = hex8_dshape(*points.T)                                 # (G, 8, 3)   dN_a/dxi_r
    jac = np.einsum("ead,gar->egdr", xyz_e, dn)                 # (E, G, 3, 3)
    det = np.linalg.det(jac)                                    # (E, G)
    if np.any(det <= 0):
        bad = first + np.flatnonzero(np.any(det <= 0, axis=1))[0]
        raise ValueError(f"element {bad} is inverted or degenerate (det J <= 0 at a Gauss point)")
    grad = np.einsum("gar,egrd->egad", dn, np.linalg.inv(jac))  # (E, G, 8, 3) grad N_a
    wdet = weights * det                                        # (E, G)
    ke = cond * np.einsum("eg,egad,egbd->eab", wdet, grad, grad, optimize=True)
    fe = np.einsum("eg,ga,gc,ec->ea", wdet, n, n, q_e, optimize=True)   # N_a (N_c q_c) det J
    return ke, fe


def crs_positions(row_ptr, col_idx, rows, cols):
    """Position k in col_idx of each entry (rows[m], cols[m]) of a CRS pattern whose columns are
    sorted within each row, or -1 where the entry is missing.

    Row by row, then column by column, the keys row * n + col of the pattern are sorted, so one
    binary search (np.searchsorted) finds all entries. Only the rows between rows.min() and
    rows.max() are searched, which keeps the work bounded for a chunk of nearby elements."""
    n = row_ptr.shape[0] - 1
    top, bottom = int(rows.min()), int(rows.max())
    lo, hi = int(row_ptr[top]), int(row_ptr[bottom + 1])
    band_rows = np.repeat(np.arange(top, bottom + 1, dtype=np.int64),
                          np.diff(row_ptr[top:bottom + 2]))
    keys = band_rows * n + col_idx[lo:hi]
    wanted = rows.astype(np.int64) * n + cols
    pos = np.minimum(np.searchsorted(keys, wanted), max(hi - lo - 1, 0))
    return np.where(keys[pos] == wanted, lo + pos, -1) if hi > lo else np.full(wanted.shape, -1)


def add_into(target, index, values) -> None:
    """target[index] += values, repeated indices summed (what np.add.at does, much faster):
    np.bincount over just the range of target that the indices touch."""
    lo, hi = int(index.min()), int(index.max()) + 1
    target[lo:hi] += np.bincount(index - lo, weights=values, minlength=hi - lo)


def fem3d_assemble_numpy(elements, xyz, cond, q, row_ptr, col_idx, chunk=CHUNK):
    """Vectorised over the elements, CHUNK at a time: the element matrices of a chunk at once,
    then every one of their 64 entries added into its place in val."""
    val, rhs = np.zeros(col_idx.shape[0]), np.zeros(xyz.shape[0])
    for first in range(0, elements.shape[0], chunk):
        el = elements[first:first + chunk]                       # (E, 8) global nodes
        ke, fe = hex8_elements_numpy(xyz[el], cond, q[el], first)
        rows = np.repeat(el, 8, axis=1).ravel()                  # row of ke[e, a, b]: el[e, a]
        cols = np.tile(el, (1, 8)).ravel()                       # its column: el[e, b]
        pos = crs_positions(row_ptr, col_idx, rows, cols)
        if np.any(pos < 0):
            raise ValueError("row_ptr/col_idx lack entries the elements add into")
        add_into(val, pos, ke.ravel())
        add_into(rhs, el.ravel(), fe.ravel())
    return val, rhs


@numba.njit(cache=True)
def fem3d_assemble_numba(elements, xyz, cond, q, row_ptr, col_idx):
    """Serial loop over elements; returns (val, rhs, -1), or (.., .., e) for the first element e
    with a non-positive Jacobian."""
    val, rhs = np.zeros(col_idx.shape[0]), np.zeros(xyz.shape[0])
    xe, qe = np.empty((8, 3)), np.empty(8)
    ke, fe = np.empty((8, 8)), np.empty(8)
    for e in range(elements.shape[0]):
        for a in range(8):
            xe[a, :] = xyz[elements[e, a], :]
            qe[a] = q[elements[e, a]]
        if not hex8_element_into(xe, cond, qe, ke, fe):
            return val, rhs, e
        for a in range(8):
            row = elements[e, a]
            rhs[row] += fe[a]
            for b in range(8):
                for k in range(row_ptr[row], row_ptr[row + 1]):
                    if col_idx[k] == elements[e, b]:
                        val[k] += ke[a, b]
                        break
    return val, rhs, -1


# --- heat flux through a face --------------------------------------------------------------------

QUAD4_CORNERS = np.array([[-1.0, -1.0], [1.0, -1.0], [1.0, 1.0], [-1.0, 1.0]])
_G = 1.0 / np.sqrt(3.0)
GAUSS_2x2 = np.array([[-_G, -_G], [_G, -_G], [-_G, _G], [_G, _G]])   # t slowest, s fastest


def fem3d_face_flux_numpy(quads, xyz, qflux, rhs):
    """rhs_a += sum_g N_a qflux |dx/ds x dx/dt| over the bilinear quadrilaterals `quads` (F, 4)."""
    s, t = GAUSS_2x2.T
    c = QUAD4_CORNERS
    n = (1 + s[:, None] * c[:, 0]) * (1 + t[:, None] * c[:, 1]) / 4       # (G, 4)
    dn_ds = c[:, 0] * (1 + t[:, None] * c[:, 1]) / 4                        # (G, 4)
    dn_dt = (1 + s[:, None] * c[:, 0]) * c[:, 1] / 4                        # (G, 4)
    x = xyz[quads]                                                          # (F, 4, 3)
    x_s = np.einsum("gc,fcd->fgd", dn_ds, x)                                # tangent dx/ds
    x_t = np.einsum("gc,fcd->fgd", dn_dt, x)                                # tangent dx/dt
    area = np.linalg.norm(np.cross(x_s, x_t), axis=-1)                      # (F, G)
    add_into(rhs, quads.ravel(), (qflux * area @ n).ravel())                # weights are 1


@numba.njit(cache=True)
def fem3d_face_flux_numba(quads, xyz, qflux, rhs):
    g = 1.0 / np.sqrt(3.0)
    for f in range(quads.shape[0]):
        for gt in range(2):
            for gs in range(2):
                s, t = (2 * gs - 1) * g, (2 * gt - 1) * g
                xs, xt = np.zeros(3), np.zeros(3)
                n = np.empty(4)
                for c in range(4):
                    sc, tc = QUAD4_CORNERS[c, 0], QUAD4_CORNERS[c, 1]
                    n[c] = (1 + s * sc) * (1 + t * tc) / 4
                    for d in range(3):
                        xs[d] += sc * (1 + t * tc) / 4 * xyz[quads[f, c], d]
                        xt[d] += (1 + s * sc) * tc / 4 * xyz[quads[f, c], d]
                nx = xs[1] * xt[2] - xs[2] * xt[1]
                ny = xs[2] * xt[0] - xs[0] * xt[2]
                nz = xs[0] * xt[1] - xs[1] * xt[0]
                area = np.sqrt(nx * nx + ny * ny + nz * nz)
                for c in range(4):
                    rhs[quads[f, c]] += n[c] * qflux * area


# --- Dirichlet conditions (any CRS matrix) -------------------------------------------------------

def dirichlet_numpy(fixed, g, row_ptr, col_idx, val, rhs):
    """Fixed rows become identity rows with rhs = g; in free rows the fixed columns move to the
    right-hand side (rhs_i -= a_ij g_j) and are cleared, so the matrix stays symmetric."""
    fixed = fixed.astype(bool)
    rows = np.repeat(np.arange(rhs.shape[0]), np.diff(row_ptr))
    moved = ~fixed[rows] & fixed[col_idx]                   # a_ij, i free, j fixed
    rhs -= np.bincount(rows[moved], weights=val[moved] * g[col_idx[moved]],
                       minlength=rhs.shape[0])
    touched = fixed[rows] | fixed[col_idx]
    val[touched] = np.where(rows[touched] == col_idx[touched], 1.0, 0.0)
    rhs[fixed] = g[fixed]


@numba.njit(cache=True)
def dirichlet_numba(fixed, g, row_ptr, col_idx, val, rhs):
    n = rhs.shape[0]
    for i in range(n):
        for k in range(row_ptr[i], row_ptr[i + 1]):
            j = col_idx[k]
            if fixed[i] != 0:
                val[k] = 1.0 if j == i else 0.0
            elif fixed[j] != 0:
                rhs[i] -= val[k] * g[j]
                val[k] = 0.0
    for i in range(n):
        if fixed[i] != 0:
            rhs[i] = g[i]


# --- one entry point per step, any language ------------------------------------------------------

def _check_mesh(mesh) -> BoxMesh:
    if not isinstance(mesh, BoxMesh):
        raise TypeError(f"mesh must be a course.fem.mesh.BoxMesh, got {type(mesh).__name__}")
    return mesh


def fem3d_pattern(mesh: BoxMesh, lang="numpy"):
    """(row_ptr, col_idx), int32, of the 27-point pattern of the mesh: row n lists, ascending, the
    nodes sharing an element with node n."""
    _check_mesh(mesh)
    if check_lang(lang) in native.COMPILED_LANGS:
        return native.fem3d_pattern(lang, mesh.nx, mesh.ny, mesh.nz)
    if native.fem3d_nnz(mesh.nx, mesh.ny, mesh.nz) > np.iinfo(np.int32).max:
        raise ValueError(f"the {mesh.nx} x {mesh.ny} x {mesh.nz} mesh has more nonzeros than "
                         f"32-bit indices allow")
    if lang == "numpy":
        return fem3d_pattern_numpy(mesh)
    return fem3d_pattern_numba(mesh.nx, mesh.ny, mesh.nz)


# --- the heat generation of Nakajima's FEM course code --------------------------------------------

SOURCES = ("constant", "nakajima")


def check_source(source: str) -> str:
    if source not in SOURCES:
        raise ValueError(f"source must be one of {', '.join(SOURCES)}; got {source!r}")
    return source


def nakajima_source(elements, xyz, qvol: float) -> np.ndarray:
    """The volumetric heat generation of each element in Nakajima's FEM course code (heat3D):
    QVOL |x_c + y_c|, (x_c, y_c, z_c) the element's centroid (the mean of its 8 corners), constant
    over the element."""
    centroid = xyz[elements].mean(axis=1)
    return native.check_real(qvol, "qvol") * np.abs(centroid[:, 0] + centroid[:, 1])


def element_source_load_numpy(elements, xyz, q_elem, chunk=CHUNK):
    """The load f_a = Q_e integral of N_a over element e, summed into the nodes: the element
    kernel with the constant Q_e at its 8 corners (the N_b sum to 1)."""
    rhs = np.zeros(xyz.shape[0])
    for first in range(0, elements.shape[0], chunk):
        el = elements[first:first + chunk]
        q_e = np.repeat(q_elem[first:first + chunk, None], 8, axis=1)
        _, fe = hex8_elements_numpy(xyz[el], 0.0, q_e, first)
        add_into(rhs, el.ravel(), fe.ravel())
    return rhs


@numba.njit(cache=True)
def element_source_load_numba(elements, xyz, q_elem):
    """element_source_load_numpy, a loop over the elements; (rhs, -1), or (rhs, e) for the first
    element e with a non-positive Jacobian."""
    rhs = np.zeros(xyz.shape[0])
    xe, qe = np.empty((8, 3)), np.empty(8)
    ke, fe = np.empty((8, 8)), np.empty(8)
    for e in range(elements.shape[0]):
        for a in range(8):
            xe[a, :] = xyz[elements[e, a], :]
            qe[a] = q_elem[e]
        if not hex8_element_into(xe, 0.0, qe, ke, fe):
            return rhs, e
        for a in range(8):
            rhs[elements[e, a]] += fe[a]
    return rhs, -1


def element_source_load(elements, xyz, q_elem, lang="numpy") -> np.ndarray:
    """The nodal load of a source constant on each element, q_elem[e] on element e: numpy, numba,
    or the kernel fem3d_element_source_load of C or Fortran."""
    if check_lang(lang) in native.COMPILED_LANGS:
        return native.fem3d_element_source_load(lang, elements, xyz, q_elem)
    if lang == "numpy":
        return element_source_load_numpy(elements, xyz, q_elem)
    rhs, bad = element_source_load_numba(elements, xyz, q_elem)
    if bad >= 0:
        raise ValueError(f"element {bad} is inverted or degenerate (det J <= 0)")
    return rhs


def nodal_source(mesh: BoxMesh, q_node) -> np.ndarray:
    """q_node as nodal values: a number becomes a constant array, an array is checked."""
    if np.ndim(q_node) == 0:
        return np.full(mesh.n_node, native.check_real(q_node, "q_node"))
    native.check_array(q_node, "q_node", native.REAL, mesh.n_node)
    if not np.all(np.isfinite(q_node)):
        raise ValueError("q_node must hold finite numbers only")
    return q_node


def fem3d_assemble(mesh: BoxMesh, cond: float, q_node, lang="numpy") -> tuple[CRS, np.ndarray]:
    """The global conductivity matrix (CRS, 27-point pattern) and load vector of the mesh, for the
    conductivity cond and the heat source given by its nodal values q_node (or one number)."""
    _check_mesh(mesh)
    check_lang(lang)
    cond = native.check_real(cond, "cond", positive=True)
    q = nodal_source(mesh, q_node)
    row_ptr, col_idx = fem3d_pattern(mesh, lang)
    if lang == "numpy":
        val, rhs = fem3d_assemble_numpy(mesh.elements, mesh.xyz, cond, q, row_ptr, col_idx)
    elif lang == "numba":
        val, rhs, bad = fem3d_assemble_numba(mesh.elements, mesh.xyz, cond, q, row_ptr, col_idx)
        if bad >= 0:
            raise ValueError(f"element {bad} is inverted or degenerate (det J <= 0)")
    else:
        val, rhs = native.fem3d_assemble(lang, mesh.elements, mesh.xyz, cond, q, row_ptr, col_idx)
    return CRS(row_ptr, col_idx, val), rhs


def fem3d_face_flux(mesh: BoxMesh, face: str, qflux: float, rhs: np.ndarray, lang="numpy") -> None:
    """Add the load of the heat flux qflux flowing into the body through `face` to rhs, in place."""
    _check_mesh(mesh)
    check_face(face)
    if check_lang(lang) in native.COMPILED_LANGS:
        native.fem3d_face_flux(lang, mesh.face_quads(face), mesh.xyz, qflux, rhs)
        return
    qflux = native.check_real(qflux, "qflux")
    native.check_array(rhs, "rhs", native.REAL, mesh.n_node, writeable=True)
    if lang == "numpy":
        fem3d_face_flux_numpy(mesh.face_quads(face), mesh.xyz, qflux, rhs)
    else:
        fem3d_face_flux_numba(mesh.face_quads(face), mesh.xyz, qflux, rhs)


def dirichlet(a: CRS, rhs: np.ndarray, fixed_mask, g, lang="numpy") -> None:
    """Prescribe T_i = g_i wherever fixed_mask[i] (bool, or 0/1 flags), in place: fixed rows become
    identity rows, the fixed columns of the other rows move to the right-hand side."""
    check_lang(lang)
    fixed_mask = np.asarray(fixed_mask)
    if fixed_mask.shape != (a.n,) or not (fixed_mask.dtype == bool or np.all(
            (fixed_mask == 0) | (fixed_mask == 1))):
        raise ValueError(f"fixed_mask must be {a.n} booleans or 0/1 flags")
    fixed = np.ascontiguousarray(fixed_mask, dtype=np.int32)   # the kernels take int flags
    g = np.full(a.n, native.check_real(g, "g")) if np.ndim(g) == 0 else g
    if lang in native.COMPILED_LANGS:
        native.crs_dirichlet(lang, fixed, g, a.row_ptr, a.col_idx, a.val, rhs)
        return
    native.check_array(g, "g", native.REAL, a.n)
    native.check_array(rhs, "rhs", native.REAL, a.n, writeable=True)
    native.check_dirichlet_rows(fixed, a.row_ptr, a.col_idx)
    if lang == "numpy":
        dirichlet_numpy(fixed, g, a.row_ptr, a.col_idx, a.val, rhs)
    else:
        dirichlet_numba(fixed, g, a.row_ptr, a.col_idx, a.val, rhs)


# --- exact solutions and errors ------------------------------------------------------------------

def manufactured(cond: float = 1.0, lengths=(1.0, 1.0, 1.0)):
    """(T, grad T, Q) of the manufactured solution T = sin(pi x) sin(pi y) sin(pi z) on the unit
    cube (scaled to a box of edge lengths `lengths`: sin(pi x / Lx) ...), with the source
    Q = -div(cond grad T) = cond pi^2 (1/Lx^2 + 1/Ly^2 + 1/Lz^2) T (3 pi^2 cond T on the cube) and
    T = 0 on every face. Each takes points p of shape (..., 3)."""
    k = np.pi / np.asarray(lengths, dtype=float)

    def temperature(p):
        s = np.sin(k * p)
        return s[..., 0] * s[..., 1] * s[..., 2]

    def gradient(p):
        s, c = np.sin(k * p), np.cos(k * p)
        return np.stack([k[0] * c[..., 0] * s[..., 1] * s[..., 2],
                         k[1] * s[..., 0] * c[..., 1] * s[..., 2],
                         k[2] * s[..., 0] * s[..., 1] * c[..., 2]], axis=-1)

    def source(p):
        return cond * np.sum(k**2) * temperature(p)

    return temperature, gradient, source


def fem3d_model_exact(mesh: BoxMesh, fixed_face: str = "zmax", cond: float = 1.0,
                      qvol: float = 1.0, qflux: float = 0.0):
    """(T, grad T) of the model problem: T = 0 on fixed_face, heat flux qflux into the body on the
    opposite face, other faces insulated, constant source qvol. T depends only on the distance s
    from the opposite face: T = qvol (Z^2 - s^2) / (2 cond) + qflux (Z - s) / cond, Z the
    thickness of the box across the two faces. Each takes points p of shape (..., 3)."""
    axis = "xyz".index(check_face(fixed_face)[0])
    thickness = mesh.lengths[axis]
    sign = 1.0 if fixed_face.endswith("max") else -1.0      # ds/dx_axis

    def distance(p):
        return p[..., axis] if sign > 0 else thickness - p[..., axis]

    def temperature(p):
        s = distance(p)
        return (qvol * (thickness**2 - s**2) / 2 + qflux * (thickness - s)) / cond

    def gradient(p):
        dt_ds = -(qvol * distance(p) + qflux) / cond
        out = np.zeros(np.shape(p))
        out[..., axis] = sign * dt_ds
        return out

    return temperature, gradient


def fem3d_errors(mesh: BoxMesh, t, exact, grad_exact, n_gauss: int = 2, chunk: int = CHUNK):
    """(||T_h - T||_L2, |T_h - T|_H1) for the tri-linear T_h through the nodal values t, by the
    n_gauss^3-point Gauss rule on every element (vectorised over CHUNK elements at a time)."""
    _check_mesh(mesh)
    native.check_array(t, "t", native.REAL, mesh.n_node)
    l2, h1 = fem3d_error_sums(mesh.elements, mesh.xyz, t, exact, grad_exact, n_gauss, chunk)
    return float(np.sqrt(l2)), float(np.sqrt(h1))


def fem3d_error_sums(elements, xyz, t, exact, grad_exact, n_gauss: int = 2, chunk: int = CHUNK):
    """The squares of the two errors of fem3d_errors summed over the given elements (corners
    indexing xyz and t): a distributed solve adds them over its ranks."""
    points, weights = gauss_hex(n_gauss)
    n = hex8_shape(*points.T)                                   # (G, 8)
    dn = hex8_dshape(*points.T)                                 # (G, 8, 3)
    l2, h1 = 0.0, 0.0
    for first in range(0, elements.shape[0], chunk):
        el = elements[first:first + chunk]
        x_e, t_e = xyz[el], t[el]                               # (E, 8, 3), (E, 8)
        jac = np.einsum("ead,gar->egdr", x_e, dn)
        grad_n = np.einsum("gar,egrd->egad", dn, np.linalg.inv(jac))
        wdet = weights * np.linalg.det(jac)                     # (E, G)
        x_g = np.einsum("ga,ead->egd", n, x_e)                  # the Gauss points, physical
        t_h = np.einsum("ga,ea->eg", n, t_e)                    # T_h there ...
        grad_t_h = np.einsum("egad,ea->egd", grad_n, t_e)       # ... and its gradient
        l2 += np.sum(wdet * (t_h - exact(x_g)) ** 2)
        h1 += np.sum(wdet * np.sum((grad_t_h - grad_exact(x_g)) ** 2, axis=-1))
    return float(l2), float(h1)
