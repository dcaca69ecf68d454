"""GeoFEM-style local data of one rank, built from any node -> rank map (course.parallel.partition).

Node-based partitioning with overlapping elements:

- internal nodes: the nodes the rank owns, ascending global number -> local 0 .. n_internal-1;
- local elements: every element with at least one internal node (so that every internal row of
  the matrix can be assembled completely on the rank; elements on a part boundary are computed by
  several ranks: they overlap);
- external (halo) nodes: the other corners of the local elements, grouped by owner (ranks
  ascending), ascending global number within an owner -> local n_internal .. n_local-1;
- import table: the neighbours (owners of external nodes, ascending), import_ptr (offsets into the
  external nodes per neighbour) and import_index (the local index of each external node);
- export table: per neighbour q, the internal nodes that are external on q (export_ptr,
  export_index), in the order in which q imports them, so that packing export_index on this rank
  and unpacking into import_index on q lines up without sending any index.

A halo exchange then sends x[export_index[export_ptr[m]:export_ptr[m+1]]] to neighbours[m] and
receives x[import_index[import_ptr[m]:import_ptr[m+1]]] from it.

Local data files (one per rank, text, one group of values per line as in the Nakajima codes) are
written by `write_local` and read by `read_local`; `FILE_FORMAT` documents them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..fem.mesh import BoxMesh
from .partition import check_owner


@dataclass
class LocalData:
    rank: int
    size: int                   # ranks in the partition
    n_internal: int
    global_ids: np.ndarray      # int64 (n_local): global node of each local node
    elements: np.ndarray        # int32 (n_elem, 8): local elements, corners in LOCAL numbers
    element_ids: np.ndarray     # int64 (n_elem): global number of each local element
    neighbours: np.ndarray      # int32 (n_nb): ranks this one exchanges with, ascending
    import_ptr: np.ndarray      # int32 (n_nb + 1)
    import_index: np.ndarray    # int32: local indices of the external nodes, per neighbour
    export_ptr: np.ndarray      # int32 (n_nb + 1)
    export_index: np.ndarray    # int32: local indices of the internal nodes each neighbour needs
    depth: int = 1              # halo width in element-sharing steps (1: the usual halo)
    level: np.ndarray | None = None   # int32 (n_local): steps from the internal nodes (0 inside)

    @property
    def n_local(self) -> int:
        return int(self.global_ids.shape[0])

    @property
    def n_external(self) -> int:
        return self.n_local - self.n_internal

    @property
    def n_neighbours(self) -> int:
        return int(self.neighbours.shape[0])

    def imports_from(self, m: int) -> np.ndarray:
        """Local indices of the external nodes received from neighbours[m]."""
        return self.import_index[self.import_ptr[m]:self.import_ptr[m + 1]]

    def exports_to(self, m: int) -> np.ndarray:
        """Local indices of the internal nodes sent to neighbours[m]."""
        return self.export_index[self.export_ptr[m]:self.export_ptr[m + 1]]

    def __post_init__(self):
        if self.level is None:                      # the usual halo: internal 0, external 1
            self.level = np.where(np.arange(self.n_local) < self.n_internal, 0, 1).astype(np.int32)

    def __eq__(self, other) -> bool:
        if not isinstance(other, LocalData):
            return NotImplemented
        return all(np.array_equal(getattr(self, f), getattr(other, f))
                   for f in self.__dataclass_fields__)


def _offsets(counts) -> np.ndarray:
    return np.concatenate([[0], np.cumsum(counts)]).astype(np.int32)


def halo_levels(mesh: BoxMesh, start, depth: int) -> np.ndarray:
    """Graph distance of every node from the nodes in `start` (a boolean mask), counted in steps
    between nodes that share an element, up to `depth`; depth + 1 for every node farther away."""
    import scipy.sparse

    from .partition import node_graph

    xadj, adjncy = node_graph(mesh)
    graph = scipy.sparse.csr_matrix((np.ones(adjncy.shape[0], dtype=np.int8), adjncy, xadj),
                                    shape=(mesh.n_node, mesh.n_node))
    level = np.where(start, 0, depth + 1)
    reached = np.asarray(start, dtype=bool).copy()
    for step in range(1, depth + 1):
        reached_next = reached | (graph @ reached.astype(np.int8) > 0)
        level[reached_next & ~reached] = step
        reached = reached_next
    return level


def local_data(mesh: BoxMesh, owner, rank: int, depth: int = 1) -> LocalData:
    """The local data of `rank` for the node -> rank map `owner` (see the module docstring).

    depth > 1 gives a deep halo (lecture 05_halo, seed 001): the external nodes are every node
    within `depth` element-sharing steps of an internal node, and the local elements every element
    with a node within depth - 1 steps, so that the rows of all nodes up to depth - 1 steps out are
    complete and a rank can take `depth` explicit time steps between two exchanges."""
    owner = check_owner(mesh, owner)
    size = int(owner.max()) + 1
    if not 0 <= rank < size:
        raise ValueError(f"rank must be in 0 .. {size - 1}, got {rank}")
    if isinstance(depth, bool) or int(depth) != depth or depth < 1:
        raise ValueError(f"depth must be a positive integer, got {depth!r}")
    elements = mesh.elements
    level = halo_levels(mesh, owner == rank, depth)
    element_ids = np.flatnonzero(np.any(level[elements] < depth, axis=1))
    local_elements = elements[element_ids]
    internal = np.flatnonzero(owner == rank)
    touched = np.unique(local_elements)
    external = touched[owner[touched] != rank]
    external = external[np.lexsort((external, owner[external]))]     # by owner, then number
    global_ids = np.concatenate([internal, external]).astype(np.int64)

    to_local = np.full(mesh.n_node, -1, dtype=np.int64)
    to_local[global_ids] = np.arange(global_ids.shape[0])
    neighbours, import_counts = np.unique(owner[external], return_counts=True)
    import_index = np.arange(internal.shape[0], global_ids.shape[0], dtype=np.int32)

    # what neighbour q needs from this rank: the nodes of this rank within `depth` steps of q's
    # internal nodes, in the order q numbers them (ascending)
    mine = owner == rank
    exports = [to_local[np.flatnonzero(mine & (halo_levels(mesh, owner == q, depth) <= depth))]
               for q in neighbours]
    export_index = (np.concatenate(exports) if exports else np.empty(0)).astype(np.int32)
    return LocalData(rank, size, int(internal.shape[0]), global_ids,
                     to_local[local_elements].astype(np.int32), element_ids.astype(np.int64),
                     neighbours.astype(np.int32), _offsets(import_counts), import_index,
                     _offsets([e.shape[0] for e in exports]), export_index,
                     depth=int(depth), level=level[global_ids].astype(np.int32))


def row_local_data(row_ptr, col_idx, owner, rank: int) -> LocalData:
    """The local data of `rank` for a matrix distributed by rows (no elements: the rows come
    assembled, e.g. the finite-volume Poisson problem of 03_openmp): the external nodes are the
    columns of the internal rows that other ranks own, grouped by owner and ascending, and rank q
    needs the internal nodes that are columns of its rows (the pattern must be symmetric), in
    ascending order. The same tables as local_data for a mesh, with empty element lists."""
    owner = np.asarray(owner, dtype=np.int32)
    size = int(owner.max()) + 1
    if not 0 <= rank < size:
        raise ValueError(f"rank must be in 0 .. {size - 1}, got {rank}")
    rows = np.repeat(np.arange(owner.size), np.diff(row_ptr))
    mine = owner == rank
    internal = np.flatnonzero(mine)
    coupled = np.asarray(col_idx)[mine[rows]]                  # columns of the internal rows
    external = np.unique(coupled[~mine[coupled]])
    external = external[np.lexsort((external, owner[external]))]     # by owner, then number
    global_ids = np.concatenate([internal, external]).astype(np.int64)
    to_local = np.full(owner.size, -1, dtype=np.int64)
    to_local[global_ids] = np.arange(global_ids.size)
    neighbours, import_counts = np.unique(owner[external], return_counts=True)
    # rank q needs my nodes that are columns of its rows = my rows with a column that q owns
    exports = [to_local[np.unique(rows[mine[rows] & (owner[col_idx] == q)])] for q in neighbours]
    return LocalData(rank, size, int(internal.size), global_ids,
                     np.zeros((0, 8), dtype=np.int32), np.zeros(0, dtype=np.int64),
                     neighbours.astype(np.int32), _offsets(import_counts),
                     np.arange(internal.size, global_ids.size, dtype=np.int32),
                     _offsets([e.size for e in exports]),
                     (np.concatenate(exports) if exports else np.empty(0)).astype(np.int32))


def all_local_data(mesh: BoxMesh, owner) -> list[LocalData]:
    """The local data of every rank (in one process: to draw them, or to write their files)."""
    owner = check_owner(mesh, owner)
    return [local_data(mesh, owner, rank) for rank in range(int(owner.max()) + 1)]


# --- files -----------------------------------------------------------------------------------------

FILE_FORMAT = """\
Local data file of one rank (text; local indices are 0-based). A line with one group of values
(RANK SIZE, the box, the counts) may carry a comment after them; a block of N numbers is written 10
to a line, numbers only, and an empty block (N = 0) has no line at all:
  RANK SIZE
  NX NY NZ DX DY DZ             the global box (course.fem.mesh.BoxMesh)
  N_INTERNAL N_EXTERNAL
  global node number of each of the N_INTERNAL + N_EXTERNAL local nodes
  N_ELEMENTS
  global element number of each local element
  the 8 local corner numbers of each local element, one element per line
  N_NEIGHBOURS
  the neighbour ranks
  import_ptr (N_NEIGHBOURS + 1 offsets), then import_index
  export_ptr (N_NEIGHBOURS + 1 offsets), then export_index
"""

MAGIC = "# course local data (05_halo)"


def local_path(prefix, rank: int) -> Path:
    """PREFIX.RANK, e.g. part.0, part.1, ... (as the GeoFEM local mesh files)."""
    return Path(f"{prefix}.{rank}")


def _block(values) -> list[str]:
    values = [str(int(v)) for v in values]
    return [" ".join(values[i:i + 10]) for i in range(0, len(values), 10)]


def write_local(path, mesh: BoxMesh, local: LocalData) -> None:
    if local.depth != 1:
        raise ValueError("local data files hold the usual halo (depth 1) only")
    lines = [MAGIC,
             f"{local.rank} {local.size}    RANK SIZE",
             f"{mesh.nx} {mesh.ny} {mesh.nz} {mesh.dx!r} {mesh.dy!r} {mesh.dz!r}    "
             f"NX NY NZ DX DY DZ",
             f"{local.n_internal} {local.n_external}    N_INTERNAL N_EXTERNAL",
             *_block(local.global_ids),
             f"{local.element_ids.shape[0]}    N_ELEMENTS",
             *_block(local.element_ids),
             *(" ".join(map(str, corners)) for corners in local.elements),
             f"{local.n_neighbours}    N_NEIGHBOURS",
             *_block(local.neighbours),
             *_block(local.import_ptr), *_block(local.import_index),
             *_block(local.export_ptr), *_block(local.export_index)]
    Path(path).write_text("\n".join(line for line in lines if line is not None) + "\n")


class _Reader:
    """Numbers from a local data file, with errors that name the file and the line."""

    def __init__(self, path):
        self.path = str(path)
        try:
            text = Path(path).read_text()
        except OSError as err:
            raise FileNotFoundError(f"{path}: cannot read local data: {err.strerror}") from None
        self.lines = text.splitlines()
        if not self.lines or self.lines[0] != MAGIC:
            raise ValueError(f"{path}:1: not a local data file (the first line must be "
                             f"{MAGIC!r})")
        self.line = 1

    def fail(self, what: str):
        raise ValueError(f"{self.path}:{self.line}: {what}")

    def _next_tokens(self, what: str) -> list[str]:
        self.line += 1
        if self.line > len(self.lines):
            self.fail(f"the file ends; expected {what}")      # names the missing line
        return self.lines[self.line - 1].split()

    def values(self, count: int, what: str, kind=int, comment: bool = True) -> list:
        tokens = self._next_tokens(what)
        if len(tokens) < count or (not comment and len(tokens) != count):
            self.fail(f"expected {count} value(s): {what}")
        try:
            return [kind(t) for t in tokens[:count]]
        except ValueError:
            self.fail(f"expected numbers: {what}")

    def block(self, count: int, what: str, low: int = 0, high: int | None = None) -> np.ndarray:
        out = []
        while len(out) < count:
            out += self.values(min(10, count - len(out)), what, comment=False)
        out = np.array(out, dtype=np.int64)
        if out.size and (out.min() < low or (high is not None and out.max() >= high)):
            self.fail(f"{what}: a value outside {low} .. {high - 1 if high else 'inf'}")
        return out


def read_local(path) -> tuple[BoxMesh, LocalData]:
    """(mesh, local data) from a file of write_local; ValueError naming the file and line if bad."""
    r = _Reader(path)
    rank, size = r.values(2, "RANK SIZE")
    if not 0 <= rank < size:
        r.fail(f"RANK {rank} must be in 0 .. SIZE-1 = {size - 1}")
    box = r.values(6, "NX NY NZ DX DY DZ", kind=str)
    try:
        mesh = BoxMesh(*(int(v) for v in box[:3]), *(float(v) for v in box[3:]))
    except ValueError as err:
        r.fail(f"NX NY NZ must be integers, DX DY DZ numbers: {err}")
    n_internal, n_external = r.values(2, "N_INTERNAL N_EXTERNAL")
    n_local = n_internal + n_external
    if n_internal < 1 or n_external < 0:
        r.fail("N_INTERNAL must be positive and N_EXTERNAL not negative")
    global_ids = r.block(n_local, "global node numbers", 0, mesh.n_node)
    (n_elem,) = r.values(1, "N_ELEMENTS")
    element_ids = r.block(n_elem, "global element numbers", 0, mesh.n_elem)
    elements = np.array([r.values(8, "8 local corners", comment=False) for _ in range(n_elem)],
                        dtype=np.int32).reshape(n_elem, 8)
    if elements.size and (elements.min() < 0 or elements.max() >= n_local):
        r.fail(f"a local corner outside 0 .. {n_local - 1}")
    (n_nb,) = r.values(1, "N_NEIGHBOURS")
    neighbours = r.block(n_nb, "neighbour ranks", 0, size)
    tables = []
    for name, limit in (("import", n_local), ("export", n_internal)):
        ptr = r.block(n_nb + 1, f"{name}_ptr", 0)
        if ptr[0] != 0 or np.any(np.diff(ptr) < 0):
            r.fail(f"{name}_ptr must start at 0 and never decrease")
        tables += [ptr, r.block(int(ptr[-1]), f"{name}_index", 0, limit)]
    if tables[0][-1] != n_external or not np.array_equal(tables[1], np.arange(n_internal,
                                                                               n_local)):
        r.fail("import_index must list the external nodes in order: N_INTERNAL .. N_LOCAL-1")
    if np.any(np.diff(neighbours) <= 0) or np.any(neighbours == rank):
        r.fail("the neighbour ranks must be ascending and not include RANK")
    local = LocalData(rank, size, n_internal, global_ids, elements, element_ids,
                      neighbours.astype(np.int32), *(t.astype(np.int32) for t in tables))
    return mesh, local
