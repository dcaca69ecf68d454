"""Lecture 02 (3D heat conduction, tri-linear hexahedra): the mesh numbering, the element against
closed forms, every kernel in every language against the numpy reference, the reference against
independent computations (scipy), the discretisation against exact solutions (convergence orders),
the VTK output, and the checked ctypes boundary of the new kernels.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse
import scipy.sparse.linalg

from conftest import ALL_LANGS, COMPILED_LANGS, assert_refused, assert_rel_close
from course import native, problems, solvers
from course.fem import assembly, element, mesh, vtk
from course.langs import LANGS
from course.sparse import CRS

RTOL = 1e-10        # all languages agree to this (relative, max norm)


def box_element(dx=0.3, dy=0.2, dz=0.5, origin=(0.0, 0.0, 0.0)):
    """Corners of a dx x dy x dz brick in local order."""
    return np.asarray(origin) + (element.HEX8_CORNERS + 1) / 2 * np.array([dx, dy, dz])


def distorted_element():
    """A clearly non-affine hexahedron (warped faces), rotated, still with det J > 0."""
    rng = np.random.default_rng(11)
    xyz = (element.HEX8_CORNERS + 1) / 2 + rng.uniform(-0.15, 0.15, (8, 3))
    angle = 0.7
    rot = np.array([[np.cos(angle), -np.sin(angle), 0], [np.sin(angle), np.cos(angle), 0],
                    [0, 0, 1]])
    return np.ascontiguousarray(xyz @ rot.T * [1.0, 2.0, 0.5] + [3.0, -1.0, 2.0])


def volume(xyz8, n_points=5):
    """int det J over the reference cube by an n^3-point Gauss rule (exact for n >= 2)."""
    points, weights = element.gauss_hex(n_points)
    return sum(w * np.linalg.det(element.hex8_jacobian(xyz8, *p)) for p, w in zip(points, weights))


ELEMENTS = {"box": box_element(), "unit-cube": box_element(1.0, 1.0, 1.0),
            "thin-box": box_element(1.0, 0.01, 3.0), "distorted": distorted_element()}


# --- mesh ------------------------------------------------------------------------------------------

def test_box_mesh_numbering():
    m = mesh.box_mesh(3, 4, 2, 0.5, 0.25, 2.0)
    assert (m.n_node, m.n_elem) == (4 * 5 * 3, 3 * 4 * 2)
    assert m.lengths == (1.5, 1.0, 4.0)
    xyz, el = m.xyz, m.elements
    assert xyz.shape == (60, 3) and xyz.dtype == np.float64 and xyz.flags.c_contiguous
    assert el.shape == (24, 8) and el.dtype == np.int32 and el.flags.c_contiguous
    i, j, k = 2, 3, 1
    n = i + 4 * (j + 5 * k)
    assert m.node(i, j, k) == n
    np.testing.assert_array_equal(xyz[n], [i * 0.5, j * 0.25, k * 2.0])
    assert [a[n] for a in m.node_ijk()] == [i, j, k]
    e = 1 + 3 * (2 + 4 * 1)                                  # element (1, 2, 1)
    expected = [m.node(1 + di, 2 + dj, 1 + dk) for di, dj, dk in
                [(0, 0, 0), (1, 0, 0), (1, 1, 0), (0, 1, 0), (0, 0, 1), (1, 0, 1), (1, 1, 1),
                 (0, 1, 1)]]
    assert el[e].tolist() == expected
    # every element is the brick dx x dy x dz in local order
    offsets = xyz[el] - xyz[el[:, :1]]
    np.testing.assert_allclose(offsets, np.broadcast_to(box_element(0.5, 0.25, 2.0), offsets.shape),
                               atol=1e-14)
    assert np.bincount(el.ravel(), minlength=m.n_node).max() == 8


def test_box_mesh_defaults_and_immutability():
    m = mesh.box_mesh(4, 5, 8)
    assert (m.dx, m.dy, m.dz) == (0.25, 0.2, 0.125)
    np.testing.assert_allclose(m.xyz.max(axis=0), [1.0, 1.0, 1.0], rtol=1e-15)
    with pytest.raises(ValueError):
        m.xyz[0, 0] = 1.0                           # read-only
    with pytest.raises(AttributeError):
        m.nx = 3                                     # frozen
    assert m == mesh.BoxMesh(4, 5, 8, 0.25, 0.2, 0.125)


@pytest.mark.parametrize("args, name", [((0, 1, 1), "nx"), ((1, -2, 1), "ny"), ((1, 1, 2.5), "nz"),
                                        ((True, 1, 1), "nx"), (("3", 1, 1), "nx"),
                                        ((2, 2, 2, 0.0), "dx"), ((2, 2, 2, 1, -1.0), "dy"),
                                        ((2, 2, 2, 1, 1, float("inf")), "dz"),
                                        ((2, 2, 2, float("nan")), "dx"),
                                        ((2, 2, 2, "big"), "dx"),
                                        ((2000, 2000, 2000), "32-bit"),
                                        ((1000, 1000, 1000), "entries")])
def test_box_mesh_validation(args, name):
    with pytest.raises(ValueError, match=name):
        mesh.box_mesh(*args)


@pytest.mark.parametrize("face", mesh.FACES)
def test_faces(face):
    m = mesh.box_mesh(3, 4, 2, 0.5, 0.25, 2.0)
    axis, at_max = "xyz".index(face[0]), face.endswith("max")
    nodes = m.face_nodes(face)
    assert nodes.dtype == np.int32 and np.all(np.diff(nodes) > 0)
    expected = np.flatnonzero(np.isclose(m.xyz[:, axis], m.lengths[axis] if at_max else 0.0))
    np.testing.assert_array_equal(nodes, expected)
    quads = m.face_quads(face)
    counts = [3, 4, 2]
    assert quads.shape == (counts[axis - 1] * counts[axis - 2], 4) and quads.dtype == np.int32
    assert set(quads.ravel()) == set(nodes.tolist())
    p = m.xyz[quads]
    normal = np.cross(p[:, 1] - p[:, 0], p[:, 3] - p[:, 0])
    outward = np.zeros(3)
    outward[axis] = 1.0 if at_max else -1.0
    np.testing.assert_allclose(normal / np.linalg.norm(normal, axis=1)[:, None],
                               np.broadcast_to(outward, normal.shape), atol=1e-14)
    # cyclic: consecutive corners are edge neighbours, 0 and 2 are diagonal
    sizes = np.array([0.5, 0.25, 2.0])
    edge = np.linalg.norm(p[:, [1, 2, 3, 0]] - p, axis=2)
    assert np.all(np.isclose(edge, sizes[(axis + 1) % 3]) | np.isclose(edge, sizes[(axis + 2) % 3]))
    assert mesh.OPPOSITE_FACE[mesh.OPPOSITE_FACE[face]] == face


def test_boundary_nodes_and_bad_face():
    m = mesh.box_mesh(3, 4, 2)
    union = np.unique(np.concatenate([m.face_nodes(f) for f in mesh.FACES]))
    np.testing.assert_array_equal(m.boundary_nodes(), union)
    assert m.n_node - union.size == 2 * 3 * 1                # interior (nx-1)(ny-1)(nz-1)
    with pytest.raises(ValueError, match="face"):
        m.face_nodes("top")
    with pytest.raises(ValueError, match="face"):
        m.face_quads("x")


# --- reference element -----------------------------------------------------------------------------

def test_gauss_rule_and_shape_functions():
    points, weights = element.GAUSS_2x2x2
    g = 1 / np.sqrt(3)
    expected = [(x, y, z) for z in (-g, g) for y in (-g, g) for x in (-g, g)]   # zeta slowest
    np.testing.assert_allclose(points, expected, rtol=1e-15)
    np.testing.assert_array_equal(weights, np.ones(8))
    n = element.hex8_shape(*element.HEX8_CORNERS.T)             # N_a at corner b
    np.testing.assert_allclose(n, np.eye(8), atol=1e-15)
    rng = np.random.default_rng(1)
    p = rng.uniform(-1, 1, (20, 3))
    np.testing.assert_allclose(element.hex8_shape(*p.T).sum(axis=1), 1.0, rtol=1e-14)
    dn = element.hex8_dshape(*p.T)
    assert dn.shape == (20, 8, 3)
    np.testing.assert_allclose(dn.sum(axis=1), 0.0, atol=1e-14)
    d = 1e-6
    for r in range(3):
        step = np.zeros(3)
        step[r] = d
        fd = (element.hex8_shape(*(p + step).T) - element.hex8_shape(*(p - step).T)) / (2 * d)
        np.testing.assert_allclose(dn[:, :, r], fd, atol=1e-9)


def test_box_jacobian_is_diagonal():
    dx, dy, dz = 0.3, 0.2, 0.5
    for p in [(0, 0, 0), (0.3, -0.7, 0.9), (-1, 1, -1)]:
        jac = element.hex8_jacobian(box_element(dx, dy, dz, origin=(1.0, 2.0, -3.0)), *p)
        np.testing.assert_allclose(jac, np.diag([dx / 2, dy / 2, dz / 2]), atol=1e-15)


def brick_matrix(dx, dy, dz, cond):
    """The brick's exact matrix as a sum of tensor products of the 1D linear element's stiffness
    k = [1 -1; -1 1] / h and mass m = h [2 1; 1 2] / 6 (local node a = (i_a, j_a, k_a))."""
    def k1(h):
        return np.array([[1.0, -1.0], [-1.0, 1.0]]) / h

    def m1(h):
        return h * np.array([[2.0, 1.0], [1.0, 2.0]]) / 6

    bits = ((element.HEX8_CORNERS + 1) / 2).astype(int)     # (i_a, j_a, k_a) in {0, 1}
    i, j, k = bits[:, 0], bits[:, 1], bits[:, 2]
    ii, jj, kk = np.ix_(i, i), np.ix_(j, j), np.ix_(k, k)
    return cond * (k1(dx)[ii] * m1(dy)[jj] * m1(dz)[kk] + m1(dx)[ii] * k1(dy)[jj] * m1(dz)[kk]
                   + m1(dx)[ii] * m1(dy)[jj] * k1(dz)[kk])


@pytest.mark.parametrize("lang", ALL_LANGS)
def test_box_element_closed_form(lang):
    dx, dy, dz, cond = 0.3, 0.2, 0.5, 1.7
    ke, fe = element.hex8_element(box_element(dx, dy, dz), cond, np.full(8, 2.0), lang)
    assert_rel_close(ke, brick_matrix(dx, dy, dz, cond), 1e-13, "ke")
    np.testing.assert_allclose(np.diag(ke), cond / 9 * (dy * dz / dx + dx * dz / dy + dx * dy / dz),
                               rtol=1e-13)
    np.testing.assert_allclose(fe, 2.0 * dx * dy * dz / 8, rtol=1e-13)


@pytest.mark.parametrize("name", list(ELEMENTS))
@pytest.mark.parametrize("lang", ALL_LANGS)
def test_element_identities(lang, name):
    xyz8, cond, qvol = ELEMENTS[name], 2.5, -1.5
    ke, fe = element.hex8_element(xyz8, cond, np.full(8, qvol), lang)
    assert ke.shape == (8, 8) and fe.shape == (8,)
    scale = np.abs(ke).max()
    assert np.allclose(ke, ke.T, rtol=0, atol=1e-14 * scale), "ke must be symmetric"
    assert np.allclose(ke.sum(axis=1), 0.0, atol=1e-13 * scale), "rows of ke must sum to 0"
    eig = np.linalg.eigvalsh(ke)
    assert abs(eig[0]) < 1e-13 * eig[-1], f"one zero eigenvalue (constants): {eig}"
    assert eig[1] > 1e-6 * eig[-1], f"only one zero eigenvalue: {eig}"
    assert fe.sum() == pytest.approx(qvol * volume(xyz8), rel=1e-12)
    ref_ke, ref_fe = element.hex8_element(xyz8, cond, np.full(8, qvol), "numpy")
    assert_rel_close(ke, ref_ke, RTOL, "ke vs numpy")
    assert_rel_close(fe, ref_fe, RTOL, "fe vs numpy")


@pytest.mark.parametrize("lang", ALL_LANGS)
def test_element_linear_source(lang):
    """A linear source is interpolated exactly: the total load is Q(centre) * volume; a linear T
    has zero net flux: sum_a (ke T)_a = 0."""
    xyz8 = box_element(0.4, 0.3, 0.2, origin=(1.0, 0.5, 0.0))
    q = 1.0 + xyz8 @ [2.0, -1.0, 3.0]
    ke, fe = element.hex8_element(xyz8, 1.0, q, lang)
    centre = xyz8.mean(axis=0)
    assert fe.sum() == pytest.approx((1.0 + centre @ [2.0, -1.0, 3.0]) * 0.4 * 0.3 * 0.2, rel=1e-12)
    assert abs((ke @ q).sum()) < 1e-12 * np.abs(ke @ q).max()


@pytest.mark.parametrize("lang", ALL_LANGS)
def test_inverted_element_is_refused(lang):
    good = box_element()
    flipped = np.ascontiguousarray(good[[4, 5, 6, 7, 0, 1, 2, 3]])     # top and bottom swapped
    flat = good.copy()
    flat[4:, 2] = 0.0                                                 # zero height
    for bad in (flipped, flat):
        with pytest.raises(ValueError, match="det J"):
            element.hex8_element(bad, 1.0, np.ones(8), lang)


# --- pattern ---------------------------------------------------------------------------------------

MESHES = {
    "1x1x1": lambda: mesh.box_mesh(1, 1, 1),
    "3x4x2": lambda: mesh.box_mesh(3, 4, 2, 0.3, 0.2, 0.5),
    "5x1x3": lambda: mesh.box_mesh(5, 1, 3),
    "2x6x1": lambda: mesh.box_mesh(2, 6, 1, 1.0, 0.1, 2.0),
}


@pytest.fixture(params=list(MESHES))
def a_mesh(request):
    return MESHES[request.param]()


def scipy_pattern(m):
    """Independent pattern: scipy's CSR of a 1 in every (node, node) pair of every element."""
    rows = np.repeat(m.elements, 8, axis=1).ravel()
    cols = np.tile(m.elements, (1, 8)).ravel()
    a = scipy.sparse.coo_matrix((np.ones(rows.size), (rows, cols)),
                                shape=(m.n_node, m.n_node)).tocsr()
    a.sort_indices()
    return a


@pytest.mark.parametrize("lang", ALL_LANGS)
def test_pattern(lang, a_mesh):
    row_ptr, col_idx = assembly.fem3d_pattern(a_mesh, lang)
    assert row_ptr.dtype == np.int32 and col_idx.dtype == np.int32
    nx, ny, nz = a_mesh.nx, a_mesh.ny, a_mesh.nz
    nnz = (3 * (nx + 1) - 2) * (3 * (ny + 1) - 2) * (3 * (nz + 1) - 2)
    assert row_ptr[-1] == len(col_idx) == nnz
    ref = scipy_pattern(a_mesh)
    np.testing.assert_array_equal(row_ptr, ref.indptr)
    np.testing.assert_array_equal(col_idx, ref.indices)
    ref_ptr, ref_idx = assembly.fem3d_pattern(a_mesh, "numpy")
    np.testing.assert_array_equal(row_ptr, ref_ptr)
    np.testing.assert_array_equal(col_idx, ref_idx)


def test_pattern_interior_row_has_27_entries():
    m = mesh.box_mesh(4, 4, 4)
    row_ptr, col_idx = assembly.fem3d_pattern(m, "numpy")
    counts = np.diff(row_ptr)
    assert counts[m.node(2, 2, 2)] == 27 and counts[m.node(0, 0, 0)] == 8
    assert counts[m.node(0, 2, 2)] == 18 and counts[m.node(0, 0, 2)] == 12
    n = m.node(1, 2, 3)
    cols = col_idx[row_ptr[n]:row_ptr[n + 1]]
    assert cols.tolist() == sorted(m.node(1 + di, 2 + dj, 3 + dk) for dk in (-1, 0, 1)
                                   for dj in (-1, 0, 1) for di in (-1, 0, 1))


# --- assembly --------------------------------------------------------------------------------------

def nodal_source(m):
    """A smooth, non-constant nodal source."""
    x, y, z = m.xyz.T
    return 1.0 + np.sin(2 * x) * np.cos(y) + z**2


def scipy_assembly(m, cond, q):
    """Independent reference: element by element, summed by scipy's COO -> CSR conversion."""
    data, f = [], np.zeros(m.n_node)
    for nodes in m.elements:
        ke, fe = element.hex8_element_numpy(m.xyz[nodes], cond, q[nodes])
        data.append(ke.ravel())
        f[nodes] += fe
    rows = np.repeat(m.elements, 8, axis=1).ravel()
    cols = np.tile(m.elements, (1, 8)).ravel()
    a = scipy.sparse.coo_matrix((np.concatenate(data), (rows, cols)),
                                shape=(m.n_node, m.n_node)).tocsr()
    a.sort_indices()
    return a, f


@pytest.mark.parametrize("lang", ALL_LANGS)
def test_assemble(lang, a_mesh):
    cond, q = 1.7, nodal_source(a_mesh)
    a, rhs = assembly.fem3d_assemble(a_mesh, cond, q, lang)
    assert isinstance(a, CRS) and a.n == a_mesh.n_node
    ref, ref_rhs = assembly.fem3d_assemble(a_mesh, cond, q, "numpy")
    np.testing.assert_array_equal(a.row_ptr, ref.row_ptr)
    np.testing.assert_array_equal(a.col_idx, ref.col_idx)
    assert_rel_close(a.val, ref.val, RTOL, "val vs numpy")
    assert_rel_close(rhs, ref_rhs, RTOL, "rhs vs numpy")
    sp, f = scipy_assembly(a_mesh, cond, q)
    np.testing.assert_array_equal(a.row_ptr, sp.indptr)
    np.testing.assert_array_equal(a.col_idx, sp.indices)
    assert_rel_close(a.val, sp.data, RTOL, "val vs scipy")
    assert_rel_close(rhs, f, RTOL, "rhs vs element loop")
    dense = a.to_dense()
    scale = np.abs(dense).max()
    assert np.allclose(dense, dense.T, rtol=0, atol=1e-14 * scale)
    assert np.allclose(dense.sum(axis=1), 0.0, atol=1e-12 * scale)     # no BC yet


@pytest.mark.parametrize("lang", ALL_LANGS)
def test_assemble_constant_source_total(lang, a_mesh):
    a, rhs = assembly.fem3d_assemble(a_mesh, 1.0, 2.5, lang)
    assert rhs.sum() == pytest.approx(2.5 * np.prod(a_mesh.lengths), rel=1e-12)
    np.testing.assert_array_equal(rhs > 0, np.ones(a_mesh.n_node, bool))


def test_numpy_assembly_chunks_agree():
    """The chunked vectorised reference gives the same matrix whatever the chunk size."""
    m = mesh.box_mesh(5, 4, 3, 0.2, 0.3, 0.1)
    q = nodal_source(m)
    row_ptr, col_idx = assembly.fem3d_pattern(m)
    whole = assembly.fem3d_assemble_numpy(m.elements, m.xyz, 1.3, q, row_ptr, col_idx, chunk=10**6)
    for chunk in (1, 7, 16):
        part = assembly.fem3d_assemble_numpy(m.elements, m.xyz, 1.3, q, row_ptr, col_idx,
                                             chunk=chunk)
        assert_rel_close(part[0], whole[0], 1e-13, f"val, chunk {chunk}")
        assert_rel_close(part[1], whole[1], 1e-13, f"rhs, chunk {chunk}")


def test_crs_positions():
    m = mesh.box_mesh(2, 2, 2)
    row_ptr, col_idx = assembly.fem3d_pattern(m)
    rows = np.repeat(np.arange(m.n_node), np.diff(row_ptr))
    k = np.array([0, 5, 100, len(col_idx) - 1])
    np.testing.assert_array_equal(assembly.crs_positions(row_ptr, col_idx, rows[k], col_idx[k]), k)
    far = assembly.crs_positions(row_ptr, col_idx, np.array([0, 26]), np.array([26, 0]))
    np.testing.assert_array_equal(far, [-1, -1])             # opposite corners: no entry


# --- face flux -------------------------------------------------------------------------------------

@pytest.mark.parametrize("face", mesh.FACES)
@pytest.mark.parametrize("lang", ALL_LANGS)
def test_face_flux(lang, face, a_mesh):
    qflux = -0.8
    rhs = np.full(a_mesh.n_node, 0.25)
    assembly.fem3d_face_flux(a_mesh, face, qflux, rhs, lang)
    ref = np.full(a_mesh.n_node, 0.25)
    assembly.fem3d_face_flux(a_mesh, face, qflux, ref, "numpy")
    assert_rel_close(rhs, ref, RTOL, "rhs vs numpy")
    # closed form: each quad gives a quarter of qflux * its area to each of its corners
    expected = np.full(a_mesh.n_node, 0.25)
    sizes = np.array([a_mesh.dx, a_mesh.dy, a_mesh.dz])
    axis = "xyz".index(face[0])
    quad_area = np.prod(np.delete(sizes, axis))
    np.add.at(expected, a_mesh.face_quads(face).ravel(), qflux * quad_area / 4)
    assert_rel_close(rhs, expected, 1e-13, "rhs vs closed form")
    lengths = np.array(a_mesh.lengths)
    assert (rhs - 0.25).sum() == pytest.approx(qflux * np.prod(np.delete(lengths, axis)), rel=1e-12)
    off_face = np.setdiff1d(np.arange(a_mesh.n_node), a_mesh.face_nodes(face))
    np.testing.assert_array_equal(rhs[off_face], 0.25)


# --- Dirichlet conditions --------------------------------------------------------------------------

def dirichlet_case(m):
    a, rhs = assembly.fem3d_assemble(m, 1.3, nodal_source(m), "numpy")
    fixed = np.zeros(m.n_node, bool)
    fixed[m.face_nodes("zmin")] = True
    fixed[m.face_nodes("xmax")] = True
    g = np.cos(m.xyz @ [1.0, 2.0, 3.0])
    return a, rhs, fixed, g


@pytest.mark.parametrize("lang", ALL_LANGS)
def test_dirichlet(lang, a_mesh):
    a, rhs, fixed, g = dirichlet_case(a_mesh)
    before, rhs_before = a.to_dense(), rhs.copy()
    ref = CRS(a.row_ptr, a.col_idx, a.val.copy())
    ref_rhs = rhs.copy()
    assembly.dirichlet(ref, ref_rhs, fixed, g, "numpy")
    assembly.dirichlet(a, rhs, fixed.astype(np.int32) if lang == "c" else fixed, g, lang)
    assert_rel_close(a.val, ref.val, RTOL, "val vs numpy")
    assert_rel_close(rhs, ref_rhs, RTOL, "rhs vs numpy")
    # against the dense elimination written out
    free = ~fixed
    expected = before.copy()
    expected[fixed, :] = 0.0
    expected[:, fixed] = 0.0
    expected[fixed, fixed] = 1.0
    np.testing.assert_array_equal(a.to_dense(), expected)
    expected_rhs = np.where(fixed, g, rhs_before - before[:, fixed] @ g[fixed])
    assert_rel_close(rhs, expected_rhs, 1e-12, "rhs vs dense")
    # and the solution is that of the full system with the values prescribed
    t = scipy.sparse.linalg.spsolve(a.to_scipy().tocsc(), rhs)
    np.testing.assert_allclose(t[fixed], g[fixed], rtol=1e-12, atol=1e-14)
    residual = before[free] @ t - rhs_before[free]
    assert np.abs(residual).max() < 1e-10 * np.abs(rhs_before).max()


@pytest.mark.parametrize("lang", ALL_LANGS)
def test_dirichlet_refuses_bad_masks(lang):
    m = mesh.box_mesh(2, 2, 2)
    a, rhs, fixed, g = dirichlet_case(m)
    with pytest.raises(ValueError, match="fixed_mask"):
        assembly.dirichlet(a, rhs, fixed[:-1], g, lang)
    with pytest.raises(ValueError, match="fixed_mask"):
        assembly.dirichlet(a, rhs, np.where(fixed, 2, 0), g, lang)
    with pytest.raises(ValueError, match="g"):
        assembly.dirichlet(a, rhs, fixed, g[:-1].copy(), lang)


# --- the whole solve -------------------------------------------------------------------------------

def general_system(lang):
    """Non-uniform element sizes, a varying source, a flux through one face and non-zero
    prescribed values on two others: a system whose CG needs many iterations."""
    m = mesh.box_mesh(5, 4, 6, 0.2, 0.3, 0.1)
    a, rhs = assembly.fem3d_assemble(m, 2.3, nodal_source(m), lang)
    assembly.fem3d_face_flux(m, "ymax", 0.9, rhs, lang)
    fixed = np.zeros(m.n_node, bool)
    fixed[m.face_nodes("xmin")] = True
    fixed[m.face_nodes("zmax")] = True
    assembly.dirichlet(a, rhs, fixed, np.sin(m.xyz[:, 1] * 3), lang)
    return m, a, rhs


@pytest.mark.parametrize("lang", ALL_LANGS)
def test_solve_matches_reference_and_spsolve(lang):
    m, a, rhs = general_system(lang)
    _, ref_a, ref_rhs = general_system("numpy")
    assert_rel_close(a.val, ref_a.val, RTOL, "val vs numpy")
    assert_rel_close(rhs, ref_rhs, RTOL, "rhs vs numpy")
    result = solvers.pcg_jacobi(a, rhs, lang, tol=1e-13)
    assert result.converged and result.iterations > 10
    ref = solvers.pcg_jacobi(ref_a, ref_rhs, "numpy", tol=1e-13)
    assert_rel_close(result.x, ref.x, RTOL, "T vs numpy")
    direct = scipy.sparse.linalg.spsolve(ref_a.to_scipy().tocsc(), ref_rhs)
    assert_rel_close(result.x, direct, 1e-10, "T vs spsolve")


@pytest.mark.compiled
def test_cg_iterations_equal_across_langs():
    iterations = {lang: solvers.pcg_jacobi(*general_system(lang)[1:], lang, tol=1e-10).iterations
                  for lang in LANGS}
    assert len(set(iterations.values())) == 1, iterations


MODEL_CASES = [
    pytest.param(dict(), id="default"),
    pytest.param(dict(qflux=0.8, cond=3.5, fixed_face="xmin"), id="flux-xmin"),
    pytest.param(dict(qvol=-2.0, qflux=1.25, fixed_face="ymax", dx=0.1, dy=0.05, dz=0.3),
                 id="all-params"),
    pytest.param(dict(qvol=0.0, qflux=1.0, fixed_face="zmin"), id="flux-only"),
]


@pytest.mark.parametrize("case", MODEL_CASES)
@pytest.mark.parametrize("lang", ALL_LANGS)
def test_model_problem_nodally_exact(lang, case):
    """The model problem's exact T depends on one coordinate; tri-linear elements reproduce it at
    the nodes (the 3D problem reduces to the 1D linear-element problem, nodally exact), so the
    nodal error is round-off and the CG tolerance."""
    out = problems.fem3d(6, 5, 7, lang, tol=1e-12, warm_up=False, keep_solution=True, **case)
    assert out["converged"] and out["unknowns"] == 7 * 6 * 8
    assert out["nnz"] == 19 * 16 * 22
    exact, _ = assembly.fem3d_model_exact(out["mesh"], out["fixed_face"], out["cond"], out["qvol"],
                                     out["qflux"])
    t_exact = exact(out["mesh"].xyz)
    scale = np.abs(t_exact).max()
    assert out["error_max"] < 1e-10 * scale
    assert np.abs(out["T"] - t_exact).max() == pytest.approx(out["error_max"], abs=1e-300)
    np.testing.assert_array_equal(out["T"][out["mesh"].face_nodes(out["fixed_face"])], 0.0)


def test_model_exact_solves_the_problem():
    """-cond T'' = qvol, T = 0 on the fixed face, cond dT/dn = qflux into the body opposite."""
    m = mesh.box_mesh(2, 3, 4, 0.5, 0.25, 0.75)              # thickness in y: 0.75
    cond, qvol, qflux = 2.0, 1.5, 0.7
    t, grad = assembly.fem3d_model_exact(m, "ymin", cond, qvol, qflux)
    p = np.array([[0.3, 0.2, 1.1], [0.9, 0.6, 0.1]])
    d = 1e-4
    e = np.array([0.0, d, 0.0])
    second = (t(p + e) - 2 * t(p) + t(p - e)) / d**2
    np.testing.assert_allclose(-cond * second, qvol, rtol=1e-6)
    np.testing.assert_allclose(grad(p), np.stack([np.zeros(2), (t(p + e) - t(p - e)) / (2 * d),
                                                  np.zeros(2)], axis=1), rtol=1e-8, atol=1e-12)
    assert t(np.array([0.4, 0.0, 0.3])) == 0.0                # the fixed face y = 0
    top = np.array([0.4, 0.75, 0.3])                          # the opposite face: flux in
    assert cond * grad(top)[1] == pytest.approx(qflux, rel=1e-12)   # = cond dT/dn, n = +y


def test_model_problem_reported_errors():
    """A measured reference: 8^3 elements, default model problem (the numbers in the report)."""
    out = problems.fem3d(8, 8, 8, "numpy", tol=1e-12, warm_up=False)
    assert out["iterations"] <= 9               # the solution lives in 9 distinct nodal values
    assert out["error_max"] < 1e-13
    # the error of the nodally exact T_h is that of the interpolant of T = (1 - z^2)/2, on each
    # element (t (h - t))/2: its exact L2 norm is h^2 / sqrt(120) on the unit cube, what the
    # 2-point Gauss rule (exact to degree 3, not 4) makes of it h^2 / sqrt(144)
    h = 1 / 8
    assert out["error_l2"] == pytest.approx(h**2 / 12, rel=1e-9)
    exact, grad = assembly.fem3d_model_exact(mesh.box_mesh(8, 8, 8))
    out = problems.fem3d(8, 8, 8, "numpy", tol=1e-12, warm_up=False, keep_solution=True)
    l2, h1 = assembly.fem3d_errors(out["mesh"], out["T"], exact, grad, n_gauss=3)
    assert l2 == pytest.approx(h**2 / np.sqrt(120), rel=1e-9)
    assert h1 == pytest.approx(h / np.sqrt(12), rel=1e-9)


def test_manufactured_solution():
    t, grad, q = assembly.manufactured(cond=2.0)
    p = np.array([[0.2, 0.3, 0.7], [0.5, 0.5, 0.5]])
    assert t(p)[1] == pytest.approx(1.0)
    d = 1e-4
    lap = sum((t(p + d * e) - 2 * t(p) + t(p - d * e)) / d**2 for e in np.eye(3))
    np.testing.assert_allclose(-2.0 * lap, q(p), rtol=1e-6)
    np.testing.assert_allclose(q(p), 3 * np.pi**2 * 2.0 * t(p), rtol=1e-14)
    fd = np.stack([(t(p + d * e) - t(p - d * e)) / (2 * d) for e in np.eye(3)], axis=1)
    np.testing.assert_allclose(grad(p), fd, rtol=1e-7, atol=1e-10)
    faces = np.array([[0.0, 0.3, 0.4], [1.0, 0.3, 0.4], [0.3, 1.0, 0.4], [0.3, 0.4, 0.0]])
    np.testing.assert_allclose(t(faces), 0.0, atol=1e-15)


def test_errors_of_the_interpolant():
    """fem3d_errors against closed forms: the interpolant of a tri-linear function has no error;
    that of T = x^2 on elements of width h errs by t (h - t) (t = x - x_left), so its L2 error is
    h^2 sqrt(V / 30) and its H1 error h sqrt(V / 3) over a volume V (rules of 3 or more points
    integrate these squares exactly)."""
    m = mesh.box_mesh(4, 3, 2, 0.25, 0.5, 0.5)
    def bilinear(p):
        return 1 + p[..., 0] * p[..., 1] - 2 * p[..., 2] + p[..., 0] * p[..., 1] * p[..., 2]

    def bilinear_grad(p):
        x, y, z = p[..., 0], p[..., 1], p[..., 2]
        return np.stack([y + y * z, x + x * z, -2 + x * y], axis=-1)

    l2, h1 = assembly.fem3d_errors(m, bilinear(m.xyz), bilinear, bilinear_grad)
    assert l2 < 1e-14 and h1 < 1e-13
    square, square_grad = (lambda p: p[..., 0] ** 2), (lambda p: np.stack(
        [2 * p[..., 0], 0 * p[..., 0], 0 * p[..., 0]], axis=-1))
    h, vol = 0.25, 1.0 * 1.5 * 1.0
    for n_gauss in (3, 4):          # exact for these polynomial degrees
        l2, h1 = assembly.fem3d_errors(m, square(m.xyz), square, square_grad, n_gauss=n_gauss)
        assert l2 == pytest.approx(h**2 * np.sqrt(vol / 30), rel=1e-12)
        assert h1 == pytest.approx(h * np.sqrt(vol / 3), rel=1e-12)


# the manufactured solution on the unit cube, four refinements
CONVERGENCE_NS = (6, 12, 24, 48)


@pytest.mark.parametrize("lang", ALL_LANGS)
def test_manufactured_convergence(lang):
    """L2 error ~ h^2, H1-seminorm error ~ h (slopes fitted with polyfit over four meshes).
    Measured (any language): L2 3.09e-2, 7.99e-3, 2.01e-3, 5.04e-4 -> slope 1.98;
    H1 0.316, 0.149, 0.0731, 0.0364 -> slope 1.04."""
    ns = np.array(CONVERGENCE_NS)
    runs = [problems.fem3d(int(n), int(n), int(n), lang, manufactured=True, tol=1e-10,
                           warm_up=False) for n in ns]
    assert all(r["converged"] for r in runs)
    l2 = np.array([r["error_l2"] for r in runs])
    h1 = np.array([r["error_h1"] for r in runs])
    assert np.all(np.diff(l2) < 0) and np.all(np.diff(h1) < 0), (l2, h1)
    log_h = np.log(1.0 / ns)
    slope_l2 = np.polyfit(log_h, np.log(l2), 1)[0]
    slope_h1 = np.polyfit(log_h, np.log(h1), 1)[0]
    assert 1.9 <= slope_l2 <= 2.1, f"L2 order {slope_l2}: {l2}"
    assert 0.95 <= slope_h1 <= 1.05, f"H1 order {slope_h1}: {h1}"
    # the last halving is closest to the asymptotic orders
    assert np.log2(l2[-2] / l2[-1]) == pytest.approx(2.0, abs=0.02)
    assert np.log2(h1[-2] / h1[-1]) == pytest.approx(1.0, abs=0.02)
    assert runs[-1]["error_max"] < 1e-3


def test_problem_fields():
    out = problems.fem3d(3, 2, 4, "numpy", manufactured=True, warm_up=False)
    for key in ("problem", "lang", "unknowns", "nnz", "iterations", "converged",
                "relative_residual", "threads", "seconds", "error_max", "error_l2", "error_h1",
                "peak_memory_mb", "nx", "ny", "nz"):
        assert key in out, key
    assert out["problem"] == "fem3d" and out["unknowns"] == 4 * 3 * 5
    assert out["peak_memory_mb"] > 10
    assert "fem3d" in problems.PROBLEMS
    with pytest.raises(ValueError, match="face"):
        problems.fem3d(2, 2, 2, "numpy", fixed_face="top")
    with pytest.raises(ValueError, match="lang"):
        problems.fem3d(2, 2, 2, "cobol")
    with pytest.raises(ValueError, match="nx"):
        problems.fem3d(0, 2, 2, "numpy", warm_up=False)


# --- VTK -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("suffix", [".vtu", ".vtk"])
def test_vtk_read_by_meshio(tmp_path, suffix):
    meshio = pytest.importorskip("meshio")
    m = mesh.box_mesh(3, 4, 2, 0.5, 0.25, 2.0)
    t = np.sin(m.xyz[:, 0]) + m.xyz[:, 2] / 3
    path = vtk.write_vtk(tmp_path / f"out{suffix}", m, {"temperature": t, "flux": m.xyz * 2})
    data = meshio.read(path)                     # by the extension, as ParaView does
    np.testing.assert_array_equal(data.points, m.xyz)
    assert len(data.cells) == 1 and data.cells[0].type == "hexahedron"
    np.testing.assert_array_equal(data.cells[0].data, m.elements)
    np.testing.assert_array_equal(np.ravel(data.point_data["temperature"]), t)   # exact
    np.testing.assert_array_equal(data.point_data["flux"], m.xyz * 2)


def test_vtu_is_vtk_xml_binary(tmp_path):
    """A .vtu file is VTK XML with binary data arrays (not legacy text under another name, which
    meshio and ParaView reject)."""
    m = mesh.box_mesh(2, 2, 2)
    head = vtk.write_vtk(tmp_path / "t.vtu", m, {"temperature": m.xyz[:, 0]}).read_bytes()[:400]
    assert head.startswith(b"<?xml") and b'<VTKFile type="UnstructuredGrid"' in head
    assert b'format="binary"' in head and b"# vtk DataFile" not in head


def test_vtk_legacy_text_shows_its_sections(tmp_path):
    """.vtk is the legacy text format (the lecture prints its section headers), no blank lines."""
    m = mesh.box_mesh(3, 4, 2)
    text = vtk.write_vtk(tmp_path / "t.vtk", m, {"temperature": m.xyz[:, 2]}).read_text()
    lines = text.splitlines()
    assert lines[0].startswith("# vtk DataFile Version") and lines[2] == "ASCII"
    assert "CELL_TYPES 24" in lines and "POINT_DATA 60" in lines
    assert all(line.split() for line in lines)


@pytest.mark.parametrize("name", ["t.txt", "t.VTKX", "t", "t.vtu.gz"])
def test_vtk_refuses_unknown_extensions(tmp_path, name):
    m = mesh.box_mesh(2, 2, 2)
    with pytest.raises(ValueError, match=r"\.vtu.*\.vtk") as info:
        vtk.write_vtk(tmp_path / name, m, {})
    assert "\n" not in str(info.value)
    assert not (tmp_path / name).exists()


def test_vtk_refuses_bad_fields(tmp_path):
    m = mesh.box_mesh(2, 2, 2)
    with pytest.raises(ValueError, match="temperature"):
        vtk.write_vtk(tmp_path / "a.vtk", m, {"temperature": np.zeros(5)})
    with pytest.raises(ValueError, match="name"):
        vtk.write_vtk(tmp_path / "a.vtk", m, {"two words": np.zeros(m.n_node)})
    with pytest.raises(ValueError, match="finite"):
        vtk.write_vtk(tmp_path / "a.vtk", m, {"t": np.full(m.n_node, np.nan)})
    with pytest.raises(TypeError, match="mesh"):
        vtk.write_vtk(tmp_path / "a.vtk", "mesh", {})


# --- the public API refuses bad arguments (every language) -----------------------------------------

@pytest.mark.parametrize("lang", ALL_LANGS)
def test_public_api_refuses_bad_arguments(lang):
    m = mesh.box_mesh(2, 2, 2)
    with pytest.raises(ValueError, match="cond"):
        assembly.fem3d_assemble(m, 0.0, 1.0, lang)
    with pytest.raises(ValueError, match="q_node"):
        assembly.fem3d_assemble(m, 1.0, np.ones(m.n_node - 1), lang)
    with pytest.raises(TypeError, match="q_node"):
        assembly.fem3d_assemble(m, 1.0, np.ones(m.n_node, np.float32), lang)
    with pytest.raises(ValueError, match="q_node"):
        assembly.fem3d_assemble(m, 1.0, float("nan"), lang)
    with pytest.raises(TypeError, match="mesh"):
        assembly.fem3d_assemble((2, 2, 2), 1.0, 1.0, lang)
    with pytest.raises(ValueError, match="face"):
        assembly.fem3d_face_flux(m, "top", 1.0, np.zeros(m.n_node), lang)
    with pytest.raises(ValueError, match="rhs"):
        assembly.fem3d_face_flux(m, "xmin", 1.0, np.zeros(3), lang)
    with pytest.raises(ValueError, match="qflux"):
        assembly.fem3d_face_flux(m, "xmin", float("inf"), np.zeros(m.n_node), lang)
    with pytest.raises(ValueError):
        element.hex8_element(np.zeros((8, 2)), 1.0, np.ones(8), lang)


@pytest.mark.parametrize("lang", ["cobol", "C", ""])
def test_public_api_refuses_unknown_langs(lang):
    m = mesh.box_mesh(2, 2, 2)
    for call in (lambda: assembly.fem3d_pattern(m, lang),
                 lambda: assembly.fem3d_assemble(m, 1.0, 1.0, lang),
                 lambda: assembly.fem3d_face_flux(m, "xmin", 1.0, np.zeros(m.n_node), lang),
                 lambda: element.hex8_element(box_element(), 1.0, np.ones(8), lang)):
        with pytest.raises(ValueError, match="lang"):
            call()


# --- the checked ctypes boundary of the new kernels ------------------------------------------------
# As in test_native.py: every case runs in this one process; a bad call let through to a kernel
# would crash the run (or, under tests/test_sanitize.py, make AddressSanitizer report it).

M = mesh.box_mesh(3, 2, 2, 0.5, 0.5, 0.25)
XYZ, EL = np.ascontiguousarray(M.xyz), np.ascontiguousarray(M.elements)
NN = M.n_node
RP, CI = assembly.fem3d_pattern(M, "numpy")
Q = np.ones(NN)
X8, Q8 = np.ascontiguousarray(XYZ[EL[0]]), np.ones(8)
FACES = np.ascontiguousarray(M.face_quads("xmax"))
FIXED = np.zeros(NN, np.int32)
FIXED[M.face_nodes("zmin")] = 1


def with_(arr, index, value):
    out = arr.copy()
    out[index] = value
    return out


def readonly(arr):
    out = arr.copy()
    out.flags.writeable = False
    return out


def fortran_order(arr):
    return np.asfortranarray(arr)


def _pattern_without(row, col):
    rows = np.repeat(np.arange(NN), np.diff(RP))
    keep = ~((rows == row) & (CI == col))
    row_ptr = np.concatenate([[0], np.cumsum(np.bincount(rows[keep], minlength=NN))])
    return row_ptr.astype(np.int32), CI[keep].copy()


def _element(lang, xyz8=X8, cond=1.0, q8=Q8):
    return native.fem3d_element(lang, xyz8, cond, q8)


def _assemble(lang, elements=EL, xyz=XYZ, cond=1.0, q=Q, row_ptr=RP, col_idx=CI, **kw):
    return native.fem3d_assemble(lang, elements, xyz, cond, q, row_ptr, col_idx, **kw)


def _flux(lang, faces=FACES, xyz=XYZ, qflux=1.0, rhs=None):
    rhs = np.zeros(NN) if rhs is None else rhs
    return native.fem3d_face_flux(lang, faces, xyz, qflux, rhs)


def _source_load(lang, elements=EL, xyz=XYZ, q_elem=None, rhs=None):
    q_elem = np.ones(len(elements)) if q_elem is None else q_elem
    return native.fem3d_element_source_load(lang, elements, xyz, q_elem, rhs)


def _dirichlet(lang, fixed=FIXED, g=None, row_ptr=RP, col_idx=CI, val=None, rhs=None):
    g = np.zeros(NN) if g is None else g
    val = np.ones(len(col_idx)) if val is None else val
    rhs = np.zeros(NN) if rhs is None else rhs
    return native.crs_dirichlet(lang, fixed, g, row_ptr, col_idx, val, rhs)


MIRRORED = XYZ * [-1.0, 1.0, 1.0]           # x -> -x: every element inside out
NO_DIAG = _pattern_without(int(M.face_nodes("zmin")[2]), int(M.face_nodes("zmin")[2]))
V4 = np.ones(4)

CASES = {
    # fem3d_element
    "element-xyz8-float32": (lambda L: _element(L, xyz8=X8.astype(np.float32)), TypeError, "xyz8"),
    "element-xyz8-list": (lambda L: _element(L, xyz8=X8.tolist()), TypeError, "xyz8"),
    "element-xyz8-flat": (lambda L: _element(L, xyz8=X8.ravel().copy()), ValueError, "xyz8"),
    "element-xyz8-7-rows": (lambda L: _element(L, xyz8=X8[:7].copy()), ValueError, "xyz8"),
    "element-xyz8-2-columns": (lambda L: _element(L, xyz8=X8[:, :2].copy()), ValueError, "xyz8"),
    "element-xyz8-fortran-order": (lambda L: _element(L, xyz8=fortran_order(X8)), ValueError,
                                   "xyz8"),
    "element-xyz8-nan": (lambda L: _element(L, xyz8=with_(X8, (3, 1), np.nan)), ValueError, "xyz8"),
    "element-xyz8-inverted": (lambda L: _element(L, xyz8=np.ascontiguousarray(X8[[4, 5, 6, 7, 0, 1,
                                                                                  2, 3]])),
                              ValueError, "xyz8"),
    "element-xyz8-degenerate": (lambda L: _element(L, xyz8=np.zeros((8, 3))), ValueError, "xyz8"),
    "element-q8-short": (lambda L: _element(L, q8=np.ones(7)), ValueError, "q8"),
    "element-q8-int": (lambda L: _element(L, q8=np.ones(8, np.int32)), TypeError, "q8"),
    "element-q8-inf": (lambda L: _element(L, q8=with_(Q8, 0, np.inf)), ValueError, "q8"),
    "element-cond-zero": (lambda L: _element(L, cond=0.0), ValueError, "cond"),
    "element-cond-nan": (lambda L: _element(L, cond=float("nan")), ValueError, "cond"),
    "element-cond-text": (lambda L: _element(L, cond="one"), TypeError, "cond"),
    # fem3d_pattern
    "pattern-nx-zero": (lambda L: native.fem3d_pattern(L, 0, 2, 2), ValueError, "nx"),
    "pattern-ny-negative": (lambda L: native.fem3d_pattern(L, 2, -1, 2), ValueError, "ny"),
    "pattern-nz-float": (lambda L: native.fem3d_pattern(L, 2, 2, 2.0), TypeError, "nz"),
    "pattern-nx-bool": (lambda L: native.fem3d_pattern(L, True, 2, 2), TypeError, "nx"),
    "pattern-nx-too-big": (lambda L: native.fem3d_pattern(L, 2**31, 1, 1), ValueError, "nx"),
    "pattern-nnz-too-big": (lambda L: native.fem3d_pattern(L, 1000, 1000, 1000), ValueError,
                            "nonzeros"),
    # fem3d_assemble
    "assemble-elements-int64": (lambda L: _assemble(L, elements=EL.astype(np.int64)), TypeError,
                                "elements"),
    "assemble-elements-flat": (lambda L: _assemble(L, elements=EL.ravel().copy()), ValueError,
                               "elements"),
    "assemble-elements-4-columns": (lambda L: _assemble(L, elements=EL[:, :4].copy()), ValueError,
                                    "elements"),
    "assemble-elements-fortran-order": (lambda L: _assemble(L, elements=fortran_order(EL)),
                                        ValueError, "elements"),
    "assemble-elements-too-big": (lambda L: _assemble(L, elements=with_(EL, (5, 6), NN)),
                                  ValueError, "elements"),
    "assemble-elements-negative": (lambda L: _assemble(L, elements=with_(EL, (0, 0), -1)),
                                   ValueError, "elements"),
    "assemble-elements-empty": (lambda L: _assemble(L, elements=EL[:0].copy()), ValueError,
                                "elements"),
    "assemble-elements-inverted": (lambda L: _assemble(L, xyz=MIRRORED), ValueError, "elements"),
    "assemble-xyz-float32": (lambda L: _assemble(L, xyz=XYZ.astype(np.float32)), TypeError, "xyz"),
    "assemble-xyz-2-columns": (lambda L: _assemble(L, xyz=XYZ[:, :2].copy()), ValueError, "xyz"),
    "assemble-xyz-inf": (lambda L: _assemble(L, xyz=with_(XYZ, (4, 2), np.inf)), ValueError, "xyz"),
    "assemble-xyz-noncontiguous": (lambda L: _assemble(L, xyz=np.repeat(XYZ, 2, axis=0)[::2]),
                                   ValueError, "xyz"),
    "assemble-q-short": (lambda L: _assemble(L, q=Q[:-1].copy()), ValueError, "q"),
    "assemble-q-float32": (lambda L: _assemble(L, q=Q.astype(np.float32)), TypeError, "q"),
    "assemble-q-nan": (lambda L: _assemble(L, q=with_(Q, 3, np.nan)), ValueError, "q"),
    "assemble-cond-negative": (lambda L: _assemble(L, cond=-1.0), ValueError, "cond"),
    "assemble-rowptr-int64": (lambda L: _assemble(L, row_ptr=RP.astype(np.int64)), TypeError,
                              "row_ptr"),
    "assemble-rowptr-other-mesh": (lambda L: _assemble(L, row_ptr=RP[:-3].copy()), ValueError,
                                   "row_ptr"),
    "assemble-colidx-out-of-range": (lambda L: _assemble(L, col_idx=with_(CI, 7, NN)), ValueError,
                                     "col_idx"),
    "assemble-pattern-missing-diagonal": (lambda L: _assemble(L, row_ptr=_pattern_without(7, 7)[0],
                                                              col_idx=_pattern_without(7, 7)[1]),
                                          ValueError, "row_ptr/col_idx"),
    "assemble-pattern-missing-corner": (
        lambda L: _assemble(L, row_ptr=_pattern_without(NN - 1, EL[-1, 0])[0],
                            col_idx=_pattern_without(NN - 1, EL[-1, 0])[1]),
        ValueError, "row_ptr/col_idx"),
    "assemble-pattern-diagonal-only": (
        lambda L: _assemble(L, row_ptr=np.arange(NN + 1, dtype=np.int32),
                            col_idx=np.arange(NN, dtype=np.int32)),
        ValueError, "row_ptr/col_idx"),
    "assemble-val-short": (lambda L: _assemble(L, val=np.zeros(len(CI) - 1)), ValueError, "val"),
    "assemble-val-readonly": (lambda L: _assemble(L, val=readonly(np.zeros(len(CI)))), ValueError,
                              "val"),
    "assemble-rhs-short": (lambda L: _assemble(L, rhs=np.zeros(NN - 1)), ValueError, "rhs"),
    "assemble-rhs-readonly": (lambda L: _assemble(L, rhs=readonly(np.zeros(NN))), ValueError,
                              "rhs"),
    # fem3d_face_flux
    "flux-faces-int64": (lambda L: _flux(L, faces=FACES.astype(np.int64)), TypeError, "faces"),
    "flux-faces-3-columns": (lambda L: _flux(L, faces=FACES[:, :3].copy()), ValueError, "faces"),
    "flux-faces-too-big": (lambda L: _flux(L, faces=with_(FACES, (1, 2), NN)), ValueError,
                           "faces"),
    "flux-faces-negative": (lambda L: _flux(L, faces=with_(FACES, (0, 0), -5)), ValueError,
                            "faces"),
    "flux-xyz-short-faces-outside": (lambda L: _flux(L, xyz=XYZ[:-1].copy()), ValueError,
                                     "faces"),
    "flux-xyz-short": (lambda L: _flux(L, faces=np.ascontiguousarray(M.face_quads("xmin")),
                                       xyz=XYZ[:-1].copy()), ValueError, "rhs"),
    "flux-xyz-nan": (lambda L: _flux(L, xyz=with_(XYZ, (0, 0), np.nan)), ValueError, "xyz"),
    "flux-qflux-nan": (lambda L: _flux(L, qflux=float("nan")), ValueError, "qflux"),
    "flux-qflux-text": (lambda L: _flux(L, qflux="lots"), TypeError, "qflux"),
    "flux-rhs-short": (lambda L: _flux(L, rhs=np.zeros(NN - 1)), ValueError, "rhs"),
    "flux-rhs-float32": (lambda L: _flux(L, rhs=np.zeros(NN, np.float32)), TypeError, "rhs"),
    "flux-rhs-readonly": (lambda L: _flux(L, rhs=readonly(np.zeros(NN))), ValueError, "rhs"),
    # fem3d_nakajima_source, fem3d_element_source_load
    "nakajima-qvol-nan": (lambda L: native.fem3d_nakajima_source(L, EL, XYZ, float("nan")),
                          ValueError, "qvol"),
    "nakajima-elements-too-big": (lambda L: native.fem3d_nakajima_source(
        L, with_(EL, (2, 3), NN), XYZ, 1.0), ValueError, "elements"),
    "source-load-q-elem-short": (lambda L: _source_load(L, q_elem=np.ones(len(EL) - 1)),
                                 ValueError, "q_elem"),
    "source-load-q-elem-nan": (lambda L: _source_load(L, q_elem=with_(np.ones(len(EL)), 1,
                                                                      np.nan)),
                               ValueError, "q_elem"),
    "source-load-elements-negative": (lambda L: _source_load(L, elements=with_(EL, (0, 0), -1)),
                                      ValueError, "elements"),
    "source-load-elements-inverted": (lambda L: _source_load(L, xyz=MIRRORED), ValueError,
                                      "elements"),
    "source-load-rhs-readonly": (lambda L: _source_load(L, rhs=readonly(np.zeros(NN))),
                                 ValueError, "rhs"),
    # crs_dirichlet
    "dirichlet-fixed-bool": (lambda L: _dirichlet(L, fixed=FIXED.astype(bool)), TypeError, "fixed"),
    "dirichlet-fixed-int64": (lambda L: _dirichlet(L, fixed=FIXED.astype(np.int64)), TypeError,
                              "fixed"),
    "dirichlet-fixed-short": (lambda L: _dirichlet(L, fixed=FIXED[:-1].copy()), ValueError,
                              "fixed"),
    "dirichlet-fixed-two": (lambda L: _dirichlet(L, fixed=with_(FIXED, 4, 2)), ValueError, "fixed"),
    "dirichlet-fixed-negative": (lambda L: _dirichlet(L, fixed=with_(FIXED, 4, -1)), ValueError,
                                 "fixed"),
    "dirichlet-g-short": (lambda L: _dirichlet(L, g=np.zeros(NN - 1)), ValueError, "g"),
    "dirichlet-g-float32": (lambda L: _dirichlet(L, g=np.zeros(NN, np.float32)), TypeError, "g"),
    "dirichlet-g-nan": (lambda L: _dirichlet(L, g=with_(np.zeros(NN), 0, np.nan)), ValueError,
                        "g"),
    "dirichlet-val-readonly": (lambda L: _dirichlet(L, val=readonly(np.ones(len(CI)))), ValueError,
                               "val"),
    "dirichlet-val-short": (lambda L: _dirichlet(L, val=np.ones(len(CI) - 1)), ValueError, "val"),
    "dirichlet-rhs-readonly": (lambda L: _dirichlet(L, rhs=readonly(np.zeros(NN))), ValueError,
                               "rhs"),
    "dirichlet-rhs-long": (lambda L: _dirichlet(L, rhs=np.zeros(NN + 1)), ValueError, "rhs"),
    "dirichlet-colidx-out-of-range": (lambda L: _dirichlet(L, col_idx=with_(CI, -1, NN + 3)),
                                      ValueError, "col_idx"),
    "dirichlet-rowptr-decreasing": (lambda L: _dirichlet(L, row_ptr=with_(RP, 3, 0)), ValueError,
                                    "row_ptr"),
    "dirichlet-fixed-row-without-diagonal": (
        lambda L: _dirichlet(L, row_ptr=NO_DIAG[0], col_idx=NO_DIAG[1],
                             val=np.ones(len(NO_DIAG[1]))),
        ValueError, "row_ptr/col_idx"),
    # stream
    "stream-init-float32": (lambda L: native.stream_init(L, V4.astype(np.float32), V4.copy(),
                                                         V4.copy()), TypeError, "a"),
    "stream-init-c-short": (lambda L: native.stream_init(L, V4.copy(), V4.copy(), np.ones(3)),
                            ValueError, "c"),
    "stream-init-readonly": (lambda L: native.stream_init(L, V4.copy(), readonly(V4), V4.copy()),
                             ValueError, "b"),
    "stream-copy-a-short": (lambda L: native.stream_copy(L, V4, np.ones(3)), ValueError, "a"),
    "stream-copy-a-readonly": (lambda L: native.stream_copy(L, V4, readonly(V4)), ValueError, "a"),
    "stream-copy-b-noncontiguous": (lambda L: native.stream_copy(L, np.ones(8)[::2], V4.copy()),
                                    ValueError, "b"),
    "stream-triad-c-long": (lambda L: native.stream_triad(L, 3.0, V4, np.ones(5), V4.copy()),
                            ValueError, "c"),
    "stream-triad-scalar-nan": (lambda L: native.stream_triad(L, float("nan"), V4, V4, V4.copy()),
                                ValueError, "scalar"),
    "stream-triad-a-int": (lambda L: native.stream_triad(L, 3.0, V4, V4, np.ones(4, np.int32)),
                           TypeError, "a"),
}


def _check_case(lang, case_id):
    assert_refused(CASES[case_id], lang, case_id)


@pytest.mark.parametrize("case_id", list(CASES))
@pytest.mark.parametrize("lang", COMPILED_LANGS)
def test_bad_argument_is_refused(lang, case_id):
    _check_case(lang, case_id)


@pytest.mark.parametrize("lang", COMPILED_LANGS)
def test_good_calls_still_work_after_refusals(lang):
    for case_id in CASES:
        _check_case(lang, case_id)
    ke, fe = native.fem3d_element(lang, X8, 2.0, Q8)
    assert_rel_close(ke, brick_matrix(0.5, 0.5, 0.25, 2.0), 1e-13, "ke")
    val, rhs = native.fem3d_assemble(lang, EL, XYZ, 1.0, Q, RP, CI)
    assert rhs.sum() == pytest.approx(np.prod(M.lengths))
    val2, rhs2 = native.fem3d_assemble(lang, EL, XYZ, 1.0, Q, RP, CI, val=val.copy(),
                                       rhs=rhs.copy())
    assert_rel_close(val2, 2 * val, 1e-15, "val added twice")   # adds into what it is given
    a, b, c = np.empty(1000), np.empty(1000), np.empty(1000)
    native.stream_init(lang, a, b, c)
    assert np.all(a == 1.0) and np.all(b == 2.0) and np.all(c == 0.5)
    native.stream_triad(lang, 3.0, b, c, a)
    assert np.all(a == 3.5)
    native.stream_copy(lang, c, a)
    assert np.all(a == 0.5)


@pytest.mark.parametrize("lang", COMPILED_LANGS)
def test_inputs_are_not_modified_by_index_shift(lang):
    """The Fortran wrappers add 1 to the index arrays: the caller's arrays must stay 0-based."""
    el, rp, ci, faces, fixed = EL.copy(), RP.copy(), CI.copy(), FACES.copy(), FIXED.copy()
    val, rhs = native.fem3d_assemble(lang, el, XYZ, 1.0, Q, rp, ci)
    native.fem3d_face_flux(lang, faces, XYZ, 0.5, rhs)
    native.crs_dirichlet(lang, fixed, np.ones(NN), rp, ci, val, rhs)
    row_ptr, col_idx = native.fem3d_pattern(lang, 3, 2, 2)
    for got, want in ((el, EL), (rp, RP), (ci, CI), (faces, FACES), (fixed, FIXED),
                      (row_ptr, RP), (col_idx, CI)):
        np.testing.assert_array_equal(got, want)
    assert np.all(rhs[FIXED == 1] == 1.0)


@pytest.mark.parametrize("lang", ["numpy", "python", "Fortran"])
def test_kernel_wrappers_refuse_other_langs(lang):
    with pytest.raises(ValueError, match="lang"):
        native.fem3d_element(lang, X8, 1.0, Q8)
    with pytest.raises(ValueError, match="lang"):
        native.fem3d_pattern(lang, 2, 2, 2)
    with pytest.raises(ValueError, match="lang"):
        _assemble(lang)
    with pytest.raises(ValueError, match="lang"):
        _dirichlet(lang)


# --- the heat generation of Nakajima's FEM course code: QVOL |x_c + y_c| on each element --------

def test_nakajima_source_is_constant_on_each_element_at_its_centroid():
    box = mesh.box_mesh(3, 2, 2, 0.5, 1.0, 0.25)
    q = assembly.nakajima_source(box.elements, box.xyz, 2.0)
    centroid = box.xyz[box.elements].mean(axis=1)
    assert np.allclose(q, 2.0 * np.abs(centroid[:, 0] + centroid[:, 1]), rtol=0, atol=1e-15)
    assert q[0] == pytest.approx(2.0 * (0.25 + 0.5))           # element (0, 0, 0)
    # every element is a box of volume dx dy dz: each corner takes an eighth of Q_e V_e
    for lang in ("numpy", "numba"):
        load = assembly.element_source_load(box.elements, box.xyz, q, lang)
        volume = box.dx * box.dy * box.dz
        expected = np.zeros(box.n_node)
        np.add.at(expected, box.elements, np.repeat(q[:, None] * volume / 8, 8, axis=1))
        assert np.allclose(load, expected, rtol=1e-13, atol=0), lang


@pytest.mark.compiled
def test_nakajima_kernels_of_c_and_fortran_are_the_numpy_ones():
    """fem3d_nakajima_source and fem3d_element_source_load of C and Fortran against numpy's
    nakajima_source and element_source_load (and each other) to 1e-12, on an odd box whose
    interior nodes are moved (non-affine elements) and whose origin is shifted so that x + y
    changes sign inside it (the |.| matters); the load adds to what rhs holds."""
    box = mesh.box_mesh(3, 2, 4, 0.3, 0.5, 0.2)
    rng = np.random.default_rng(7)
    i, j, k = box.node_ijk()
    interior = (i > 0) & (i < 3) & (j > 0) & (j < 2) & (k > 0) & (k < 4)
    xyz = box.xyz + [-0.55, -0.3, 0.1]
    xyz[interior] += rng.uniform(-0.25, 0.25, (interior.sum(), 3)) * [0.3, 0.5, 0.2]
    xyz = np.ascontiguousarray(xyz)
    q = assembly.nakajima_source(box.elements, xyz, 1.7)
    centroid = xyz[box.elements].mean(axis=1)
    x_plus_y = centroid[:, 0] + centroid[:, 1]
    assert np.any(x_plus_y < 0) and np.any(x_plus_y > 0)
    expected = assembly.element_source_load(box.elements, xyz, q, "numpy")
    start = np.linspace(-1.0, 1.0, box.n_node)
    results = {}
    for lang in ("c", "fortran"):
        assert_rel_close(native.fem3d_nakajima_source(lang, box.elements, xyz, 1.7), q,
                         what=f"{lang} source")
        results[lang] = assembly.element_source_load(box.elements, xyz, q, lang)
        assert_rel_close(results[lang], expected, what=f"{lang} load")
        added = native.fem3d_element_source_load(lang, box.elements, xyz, q, start.copy())
        assert_rel_close(added, start + expected, what=f"{lang} load added to rhs")
    assert_rel_close(results["fortran"], results["c"], what="load, Fortran vs C")


def test_nakajima_source_solution_is_symmetric_and_the_same_in_every_language():
    """|x + y| and the boundary conditions (T = 0 on zmax) do not change when x and y swap on a
    square box: nor must the temperature."""
    runs = {lang: problems.fem3d(6, 6, 4, lang, source="nakajima", tol=1e-12,
                                 keep_solution=True, warm_up=False)
            for lang in ("numpy", "numba", "c", "fortran")}
    box, t = runs["numpy"]["mesh"], runs["numpy"]["T"]
    i, j, k = box.node_ijk()
    assert np.max(np.abs(t - t[box.node(j, i, k)])) <= 1e-12 * t.max()
    for lang, run in runs.items():
        assert run["source"] == "nakajima" and run["error_max"] is None
        assert run["t_max"] == pytest.approx(runs["numpy"]["t_max"], rel=1e-10), lang
    constant = problems.fem3d(6, 6, 4, "numpy", tol=1e-12, warm_up=False)
    assert constant["t_max"] != pytest.approx(runs["numpy"]["t_max"], rel=1e-3)
    with pytest.raises(ValueError, match="source must be one of"):
        problems.fem3d(2, 2, 2, "numpy", source="gaussian")
