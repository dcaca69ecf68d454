"""Write a BoxMesh and nodal fields as a legacy ASCII VTK file (ParaView, VisIt, meshio read it).

The format, the same the standalone programs fem3d_c / fem3d_f write:

    # vtk DataFile Version 3.0
    <title>
    ASCII
    DATASET UNSTRUCTURED_GRID
    POINTS <n_node> double
    x y z                           one line per node
    CELLS <n_elem> <9 n_elem>
    8 n0 n1 ... n7                  one line per element, 0-based node numbers
    CELL_TYPES <n_elem>
    12                              VTK_HEXAHEDRON, one line per element
    POINT_DATA <n_node>
    SCALARS <name> double 1         per scalar field (VECTORS <name> double for (n_node, 3) fields)
    LOOKUP_TABLE default
    value                           one line per node

VTK's hexahedron numbers its corners as our local order does (bottom face 0-3 counter-clockwise,
top face 4-7 above it), so the connectivity is written as it is.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from .mesh import BoxMesh

VTK_HEXAHEDRON = 12
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]*$")


def write_vtk(path, mesh: BoxMesh, point_data: dict[str, np.ndarray] | None = None,
              title: str = "course fem3d") -> Path:
    """Write `mesh` and the nodal fields `point_data` ({name: array of n_node values, or
    (n_node, 3) vectors}) to `path`; returns the path."""
    if not isinstance(mesh, BoxMesh):
        raise TypeError(f"mesh must be a course.mesh.BoxMesh, got {type(mesh).__name__}")
    fields = {}
    for name, values in (point_data or {}).items():
        if not isinstance(name, str) or not _NAME.match(name):
            raise ValueError(f"point_data name {name!r}: use letters, digits, _ . - (no spaces)")
        values = np.asarray(values, dtype=float)
        if values.shape not in ((mesh.n_node,), (mesh.n_node, 3)):
            raise ValueError(f"point_data {name!r} must have shape ({mesh.n_node},) or "
                             f"({mesh.n_node}, 3), got {values.shape}")
        if not np.all(np.isfinite(values)):
            raise ValueError(f"point_data {name!r} must hold finite numbers only")
        fields[name] = values
    if "\n" in title:
        raise ValueError("title must be one line")
    path = Path(path)
    with open(path, "w") as f:
        f.write(f"# vtk DataFile Version 3.0\n{title}\nASCII\nDATASET UNSTRUCTURED_GRID\n")
        f.write(f"POINTS {mesh.n_node} double\n")
        np.savetxt(f, mesh.xyz, fmt="%.17g")
        f.write(f"CELLS {mesh.n_elem} {9 * mesh.n_elem}\n")
        cells = np.column_stack([np.full(mesh.n_elem, 8), mesh.elements])
        np.savetxt(f, cells, fmt="%d")
        f.write(f"CELL_TYPES {mesh.n_elem}\n")
        np.savetxt(f, np.full(mesh.n_elem, VTK_HEXAHEDRON), fmt="%d")
        if fields:
            f.write(f"POINT_DATA {mesh.n_node}\n")
        for name, values in fields.items():
            if values.ndim == 1:
                f.write(f"SCALARS {name} double 1\nLOOKUP_TABLE default\n")
            else:
                f.write(f"VECTORS {name} double\n")
            np.savetxt(f, values, fmt="%.17g")
    return path
