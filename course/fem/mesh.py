"""Structured meshes and their node and element numbering.

1D (lecture 01_fem1d): `line_mesh`, nodes on [0, length].

3D (lecture 02_fem3d, partitioned later in 05_halo): `BoxMesh`, NX x NY x NZ tri-linear hexahedra of
size DX x DY x DZ with one corner at the origin. Numbering, i fastest, then j, then k:

    node    (i, j, k), 0 <= i <= NX, ...:  n = i + (NX+1) (j + (NY+1) k),  at (i DX, j DY, k DZ)
    element (i, j, k), 0 <= i <  NX, ...:  e = i + NX (j + NY k)

The 8 corners of element (i, j, k) in local order (the order of the reference element in
course.fem.element):

    0:(i,j,k)    1:(i+1,j,k)    2:(i+1,j+1,k)    3:(i,j+1,k)          bottom face, counter-clockwise
    4:(i,j,k+1)  5:(i+1,j,k+1)  6:(i+1,j+1,k+1)  7:(i,j+1,k+1)        top face, above 0..3
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

INT32_MAX = np.iinfo(np.int32).max

FACES = ("xmin", "xmax", "ymin", "ymax", "zmin", "zmax")
OPPOSITE_FACE = {"xmin": "xmax", "xmax": "xmin", "ymin": "ymax", "ymax": "ymin",
                 "zmin": "zmax", "zmax": "zmin"}


def line_mesh(n_elem: int, length: float = 1.0) -> np.ndarray:
    """Node coordinates of [0, length] cut into n_elem equal linear elements.

    Node i sits at x_i = i * length / n_elem; element e joins nodes e and e + 1.
    """
    if int(n_elem) != n_elem or n_elem < 1:
        raise ValueError(f"n_elem must be a positive integer, got {n_elem!r}")
    if not length > 0:
        raise ValueError(f"length must be positive, got {length!r}")
    return np.linspace(0.0, float(length), int(n_elem) + 1)


def check_face(face: str) -> str:
    if face not in FACES:
        raise ValueError(f"face must be one of {', '.join(FACES)}; got {face!r}")
    return face


def _readonly(a: np.ndarray) -> np.ndarray:
    a.flags.writeable = False
    return a


@dataclass(frozen=True)
class BoxMesh:
    """The structured hexahedral mesh of the box [0, NX DX] x [0, NY DY] x [0, NZ DZ].

    `xyz` and `elements` are computed once, on first use, and read-only (the mesh is immutable):
    copy them before changing them. A distributed mesh (course.parallel builds each rank's part
    from `ijk`, `coordinates`, `corners` and `face_quads_of`, never from those arrays) need not
    fit the 32-bit indices as a whole: each rank's part must."""

    nx: int
    ny: int
    nz: int
    dx: float
    dy: float
    dz: float
    distributed: bool = field(default=False, repr=False, compare=False)

    def __post_init__(self):
        for name in ("nx", "ny", "nz"):
            value = getattr(self, name)
            if (isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer))
                    or value < 1):
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
            object.__setattr__(self, name, int(value))
        for name in ("dx", "dy", "dz"):
            value = getattr(self, name)
            try:
                size = float(value)
            except (TypeError, ValueError):
                raise ValueError(f"{name} must be a positive number, got {value!r}") from None
            if not (math.isfinite(size) and size > 0):
                raise ValueError(f"{name} must be positive and finite, got {value!r}")
            object.__setattr__(self, name, size)
        nnz = (3 * self.nx + 1) * (3 * self.ny + 1) * (3 * self.nz + 1)   # 27-point pattern
        if nnz > INT32_MAX and not self.distributed:
            raise ValueError(f"a {self.nx} x {self.ny} x {self.nz} mesh has {self.n_node} nodes "
                             f"and {nnz} matrix entries, more than the 32-bit indices of the "
                             f"kernels allow (2**31 - 1)")

    # --- sizes ------------------------------------------------------------------------------------

    @property
    def n_node(self) -> int:
        return (self.nx + 1) * (self.ny + 1) * (self.nz + 1)

    @property
    def n_elem(self) -> int:
        return self.nx * self.ny * self.nz

    @property
    def lengths(self) -> tuple[float, float, float]:
        """The edge lengths of the box (NX DX, NY DY, NZ DZ)."""
        return (self.nx * self.dx, self.ny * self.dy, self.nz * self.dz)

    # --- numbering --------------------------------------------------------------------------------

    def node(self, i, j, k):
        """Node number(s) of the grid point(s) (i, j, k)."""
        return i + (self.nx + 1) * (j + (self.ny + 1) * k)

    def node_ijk(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Grid indices (i, j, k) of every node, three int arrays of length n_node."""
        k, j, i = np.meshgrid(np.arange(self.nz + 1), np.arange(self.ny + 1),
                              np.arange(self.nx + 1), indexing="ij")
        return i.ravel(), j.ravel(), k.ravel()

    @cached_property
    def xyz(self) -> np.ndarray:
        """Node coordinates, shape (n_node, 3), float64, C-contiguous: xyz[n] = (x, y, z)."""
        i, j, k = self.node_ijk()
        return _readonly(np.stack([i * self.dx, j * self.dy, k * self.dz], axis=1))

    @cached_property
    def elements(self) -> np.ndarray:
        """Connectivity, shape (n_elem, 8), int32, C-contiguous: elements[e, a] = global node of
        local node a of element e."""
        k, j, i = np.meshgrid(np.arange(self.nz), np.arange(self.ny), np.arange(self.nx),
                              indexing="ij")
        first = self.node(i.ravel(), j.ravel(), k.ravel())       # local node 0 of each element
        row, layer = self.nx + 1, (self.nx + 1) * (self.ny + 1)  # steps in j and in k
        local = np.array([0, 1, 1 + row, row, layer, layer + 1, layer + 1 + row, layer + row])
        return _readonly((first[:, None] + local[None, :]).astype(np.int32))

    # --- boundary ---------------------------------------------------------------------------------

    def face_nodes(self, face: str) -> np.ndarray:
        """Sorted node numbers (int32) on one face: "xmin" (i = 0), "xmax" (i = NX), "ymin", ..."""
        axis, at_max = "xyz".index(check_face(face)[0]), face.endswith("max")
        index = self.node_ijk()[axis]
        end = (self.nx, self.ny, self.nz)[axis] if at_max else 0
        return np.flatnonzero(index == end).astype(np.int32)

    def boundary_nodes(self) -> np.ndarray:
        """Sorted node numbers (int32) on any face of the box."""
        i, j, k = self.node_ijk()
        on = ((i == 0) | (i == self.nx) | (j == 0) | (j == self.ny) | (k == 0) | (k == self.nz))
        return np.flatnonzero(on).astype(np.int32)

    def face_quads(self, face: str) -> np.ndarray:
        """The quadrilaterals of one face, shape (n_face, 4), int32: the 4 nodes of each in cyclic
        order, counter-clockwise seen from outside (so the normal (p1 - p0) x (p3 - p0) points out
        of the box)."""
        axis = "xyz".index(check_face(face)[0])
        u_axis, v_axis = (axis + 1) % 3, (axis + 2) % 3         # (u, v, normal) right-handed
        counts = (self.nx, self.ny, self.nz)
        v, u = np.meshgrid(np.arange(counts[v_axis]), np.arange(counts[u_axis]), indexing="ij")
        return self._quads(face, u.ravel(), v.ravel()).astype(np.int32)

    def _quads(self, face: str, u: np.ndarray, v: np.ndarray) -> np.ndarray:
        """The quadrilaterals of `face` at the element positions (u, v) along its two axes."""
        axis, at_max = "xyz".index(face[0]), face.endswith("max")
        u_axis, v_axis = (axis + 1) % 3, (axis + 2) % 3
        corners = [(u, v), (u + 1, v), (u + 1, v + 1), (u, v + 1)]   # normal +e_axis
        if not at_max:
            corners = [corners[0], corners[3], corners[2], corners[1]]   # normal -e_axis
        quads = np.empty((np.size(u), 4), dtype=np.int64)
        for c, (uc, vc) in enumerate(corners):
            ijk = [None, None, None]
            ijk[axis] = np.full_like(uc, (self.nx, self.ny, self.nz)[axis] if at_max else 0)
            ijk[u_axis], ijk[v_axis] = uc, vc
            quads[:, c] = self.node(*ijk)
        return quads

    # --- parts of the mesh (a rank's nodes and elements, without the whole arrays) ---------------

    def ijk(self, nodes) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Grid indices (i, j, k) of the given node numbers."""
        nodes = np.asarray(nodes, dtype=np.int64)
        row, layer = self.nx + 1, (self.nx + 1) * (self.ny + 1)
        return nodes % row, (nodes // row) % (self.ny + 1), nodes // layer

    def coordinates(self, nodes) -> np.ndarray:
        """Coordinates (n, 3) of the given node numbers: the rows `nodes` of xyz."""
        i, j, k = self.ijk(nodes)
        return np.stack([i * self.dx, j * self.dy, k * self.dz], axis=1)

    def element_ijk(self, elements) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Grid indices (i, j, k) of the given element numbers."""
        elements = np.asarray(elements, dtype=np.int64)
        return elements % self.nx, (elements // self.nx) % self.ny, elements // (self.nx * self.ny)

    def corners(self, elements) -> np.ndarray:
        """The 8 corner nodes (int64, shape (n, 8)) of the given elements: their rows of
        `elements`."""
        first = self.node(*self.element_ijk(elements))
        row, layer = self.nx + 1, (self.nx + 1) * (self.ny + 1)
        local = np.array([0, 1, 1 + row, row, layer, layer + 1, layer + 1 + row, layer + row])
        return first[:, None] + local[None, :]

    def on_face(self, nodes, face: str | None = None) -> np.ndarray:
        """Whether each of the given nodes lies on `face` (None: on any face of the box)."""
        ijk, ends = self.ijk(nodes), (self.nx, self.ny, self.nz)
        if face is None:
            return np.any([(index == 0) | (index == end) for index, end in zip(ijk, ends)], axis=0)
        axis = "xyz".index(check_face(face)[0])
        return ijk[axis] == (ends[axis] if face.endswith("max") else 0)

    def face_quads_of(self, face: str, elements) -> np.ndarray:
        """The quadrilaterals of `face` (as face_quads: int64, orientation out of the box) that
        belong to the given elements, in their order."""
        axis = "xyz".index(check_face(face)[0])
        ijk = self.element_ijk(elements)
        last = (self.nx, self.ny, self.nz)[axis] - 1
        on = ijk[axis] == (last if face.endswith("max") else 0)
        return self._quads(face, ijk[(axis + 1) % 3][on], ijk[(axis + 2) % 3][on])


def box_mesh(nx: int, ny: int, nz: int, dx: float | None = None, dy: float | None = None,
             dz: float | None = None, distributed: bool = False) -> BoxMesh:
    """NX x NY x NZ hexahedra; element sizes default to those of the unit cube (dx = 1/nx, ...).
    distributed: for course.parallel, whose ranks each build their part (BoxMesh)."""
    sizes = []
    for count, name, size in ((nx, "nx", dx), (ny, "ny", dy), (nz, "nz", dz)):
        if size is None:
            if (isinstance(count, (bool, np.bool_)) or not isinstance(count, (int, np.integer))
                    or count < 1):
                raise ValueError(f"{name} must be a positive integer, got {count!r}")
            size = 1.0 / count
        sizes.append(size)
    return BoxMesh(nx, ny, nz, *sizes, distributed=distributed)
