"""Write a BoxMesh and nodal fields for ParaView or VisIt, through meshio, in the format the file
name's extension asks for:

    .vtu    VTK XML unstructured grid, binary (zlib-compressed): the one to use for real meshes
    .vtk    legacy VTK, text (version 4.2: POINTS, CELLS with 8 node numbers per cell, CELL_TYPES,
            POINT_DATA): the layout the standalone programs fem3d_c / fem3d_f write, easy to read

VTK's hexahedron (cell type 12) numbers its corners as our local order does (bottom face 0-3
counter-clockwise, top face 4-7 above it), so the connectivity is written as it is. Values are
written exactly (binary, or the shortest text that reads back to the same double).
"""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import numpy as np

from .mesh import BoxMesh

# extension -> (meshio format, what it is)
FORMATS = {".vtu": ("vtu", "VTK XML, binary"), ".vtk": ("vtk42", "legacy VTK, text")}
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]*$")


def file_format(path) -> str:
    """The meshio format for the extension of `path`; ValueError for any other extension."""
    suffix = Path(path).suffix.lower()
    if suffix not in FORMATS:
        what = f"extension {suffix!r}" if suffix else "no extension"
        choices = " or ".join(f"{ext} ({kind})" for ext, (_, kind) in FORMATS.items())
        raise ValueError(f"{path}: {what}; use {choices}")
    return FORMATS[suffix][0]


def _checked_fields(mesh: BoxMesh, point_data) -> dict[str, np.ndarray]:
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
    return fields


def write_vtk(path, mesh: BoxMesh, point_data: dict[str, np.ndarray] | None = None) -> Path:
    """Write `mesh` and the nodal fields `point_data` ({name: array of n_node values, or
    (n_node, 3) vectors}) to `path` (.vtu or .vtk, see the module's docstring); returns the
    path."""
    import meshio

    if not isinstance(mesh, BoxMesh):
        raise TypeError(f"mesh must be a course.fem.mesh.BoxMesh, got {type(mesh).__name__}")
    fmt = file_format(path)
    data = meshio.Mesh(mesh.xyz, [("hexahedron", mesh.elements)],
                       point_data=_checked_fields(mesh, point_data))
    path = Path(path)
    with contextlib.redirect_stderr(io.StringIO()):     # "ASCII files are only meant for debugging"
        meshio.write(path, data, file_format=fmt, binary=fmt == "vtu")
    return path
