"""Each rank builds its own part of the problem, as GeoFEM and the course's C and Fortran programs
do: no rank holds the global mesh, the global matrix or a global node -> rank map.

A partition is a rule that every rank can evaluate for any node:

    blocks   the PX x PY x PZ boxes of nodes of course.parallel.partition: the owner of a node
             follows from its (i, j, k) alone
    metis    METIS (pymetis) on a coarse lattice: the nodes grouped c x c x c into coarse points,
             joined as the nodes are (each to its 26 neighbours) and weighted by their nodes. Rank 0
             cuts it once and broadcasts the coarse map, which has at most COARSE_POINTS entries
             however large the mesh. Below COARSE_POINTS nodes c = 1: METIS on the node graph
             itself, the map of course.parallel.partition.metis_partition.

From the rule a rank finds its internal nodes, its local elements (those with an internal corner),
its external nodes and the import and export tables: the LocalData of course.parallel.local, equal
to what local_data computes from the whole map (tests/test_subdomain.py checks it). The matrix is
then assembled from the local elements alone, so the 32-bit index limit applies to each rank's
part, and the memory of a rank falls about as 1/P.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from ..fem.mesh import INT32_MAX, BoxMesh, box_mesh
from .local import LocalData, _offsets
from .partition import block_starts, check_blocks, default_blocks, metis_partition

COARSE_POINTS = 2**17         # the most points METIS cuts on rank 0 (a 50^3 lattice)


class BlockRule:
    """The PX x PY x PZ blocks of nodes (course.parallel.partition.block_partition)."""

    def __init__(self, box: BoxMesh, dims):
        self.box, self.dims = box, check_blocks(box, dims)
        self.starts = [block_starts(n + 1, p) for n, p in zip((box.nx, box.ny, box.nz), self.dims)]

    def owner_of(self, nodes) -> np.ndarray:
        px, py, _ = self.dims
        part = [np.searchsorted(starts, index, side="right") - 1
                for starts, index in zip(self.starts, self.box.ijk(nodes))]
        return (part[0] + px * (part[1] + py * part[2])).astype(np.int32)

    def _part(self, rank: int):
        px, py, _ = self.dims
        return rank % px, (rank // px) % py, rank // (px * py)

    def count(self, rank: int) -> int:
        return math.prod(int(s[p + 1] - s[p]) for s, p in zip(self.starts, self._part(rank)))

    def owned(self, rank: int) -> np.ndarray:
        """The nodes of block `rank`, ascending."""
        ranges = [np.arange(s[p], s[p + 1]) for s, p in zip(self.starts, self._part(rank))]
        k, j, i = np.meshgrid(ranges[2], ranges[1], ranges[0], indexing="ij")
        return self.box.node(i.ravel(), j.ravel(), k.ravel()).astype(np.int64)


class CoarseRule:
    """A map of coarse points (course.parallel.partition's METIS on the coarse lattice) read for
    nodes: node (i, j, k) belongs to coarse point (i // c_x, j // c_y, k // c_z)."""

    def __init__(self, box: BoxMesh, factors, coarse_owner: np.ndarray):
        self.box, self.factors = box, tuple(int(f) for f in factors)
        self.points = tuple(math.ceil((n + 1) / f)
                            for n, f in zip((box.nx, box.ny, box.nz), self.factors))
        self.coarse_owner = coarse_owner

    def coarse_of(self, nodes) -> np.ndarray:
        ci, cj, ck = (index // f for index, f in zip(self.box.ijk(nodes), self.factors))
        return ci + self.points[0] * (cj + self.points[1] * ck)

    def owner_of(self, nodes) -> np.ndarray:
        return self.coarse_owner[self.coarse_of(nodes)]

    def count(self, rank: int) -> int:
        coarse = np.flatnonzero(self.coarse_owner == rank)
        cx, cy, _ = self.points
        sizes = [np.minimum(f, n + 1 - c * f) for c, f, n in
                 zip((coarse % cx, (coarse // cx) % cy, coarse // (cx * cy)), self.factors,
                     (self.box.nx, self.box.ny, self.box.nz))]
        return int(np.sum(sizes[0] * sizes[1] * sizes[2]))

    def owned(self, rank: int) -> np.ndarray:
        """The nodes of the coarse points of `rank`, ascending."""
        coarse = np.flatnonzero(self.coarse_owner == rank)
        cx, cy, _ = self.points
        corner = (coarse % cx, (coarse // cx) % cy, coarse // (cx * cy))
        nodes = []
        for di, dj, dk in itertools.product(*(range(f) for f in self.factors)):
            i, j, k = (c * f + d for c, f, d in zip(corner, self.factors, (di, dj, dk)))
            inside = (i <= self.box.nx) & (j <= self.box.ny) & (k <= self.box.nz)
            nodes.append(self.box.node(i[inside], j[inside], k[inside]))
        return np.sort(np.concatenate(nodes)).astype(np.int64)


def coarse_factors(box: BoxMesh, points: int = COARSE_POINTS) -> tuple[int, int, int]:
    """c along each axis: 1 if the nodes are at most `points`, else the smallest c that brings them
    there, capped so that every axis keeps at least 2 coarse points."""
    c = 1 if box.n_node <= points else math.ceil((box.n_node / points) ** (1 / 3))
    while math.prod(math.ceil((n + 1) / min(c, math.ceil((n + 1) / 2)))
                    for n in (box.nx, box.ny, box.nz)) > points:
        c += 1
    return tuple(min(c, math.ceil((n + 1) / 2)) for n in (box.nx, box.ny, box.nz))


def metis_rule(box: BoxMesh, ranks: int, points: int = COARSE_POINTS) -> CoarseRule:
    """METIS on the coarse lattice (run it on one rank, broadcast rule.coarse_owner)."""
    factors = coarse_factors(box, points)
    if factors == (1, 1, 1):
        return CoarseRule(box, factors, metis_partition(box, ranks))
    rule = CoarseRule(box, factors, np.zeros(0, dtype=np.int32))
    coarse = box_mesh(*(p - 1 for p in rule.points))          # its nodes: the coarse points
    counts = [np.minimum(f, n + 1 - f * np.arange(p))
              for n, f, p in zip((box.nx, box.ny, box.nz), factors, rule.points)]
    weights = (counts[0][None, None, :] * counts[1][None, :, None]
               * counts[2][:, None, None]).ravel()           # nodes per coarse point
    rule.coarse_owner = metis_partition(coarse, ranks, weights=weights)
    return rule


def partition_rule(comm, box: BoxMesh, method: str, dims=None):
    """The rule of `method` ("blocks": dims or the most cube-like; "metis") for the ranks of
    comm: METIS runs on rank 0 only; the caller must call it on every rank (a collective)."""
    from .partition import METHODS

    if method not in METHODS:
        raise ValueError(f"partition must be one of {', '.join(METHODS)}; got {method!r}")
    ranks = comm.Get_size()
    if method == "blocks":
        dims = default_blocks(box, ranks) if dims is None else check_blocks(box, dims)
        if dims[0] * dims[1] * dims[2] != ranks:
            raise ValueError(f"PX PY PZ = {dims[0]} {dims[1]} {dims[2]} make "
                             f"{dims[0] * dims[1] * dims[2]} parts, but there are {ranks} ranks")
        return BlockRule(box, dims)
    if dims is not None:
        raise ValueError("PX PY PZ are for the blocks partition, not for metis")
    rule = metis_rule(box, ranks) if comm.Get_rank() == 0 else None
    return comm.bcast(rule, root=0)


def check_part(rule, rank: int, entries_per_row: int, what: str = "nodes") -> int:
    """The nodes (or cells) of `rank`; ValueError, before anything is built, when its rows would
    hold more entries than 32-bit indices allow (the limit of a rank's part, not of the whole)."""
    count = rule.count(rank)
    if count * entries_per_row > INT32_MAX:
        raise ValueError(f"rank {rank}'s part has {count} {what}, about {entries_per_row} matrix "
                         f"entries each: more than the 32-bit indices of the kernels allow "
                         f"(2**31 - 1); use more ranks")
    return count


def tables(rank: int, size: int, internal: np.ndarray, external: np.ndarray,
           external_owner: np.ndarray, exports: list[np.ndarray]) -> dict:
    """The import/export tables of LocalData: external nodes in their order (by owner, then
    number); exports[m] the internal nodes (global, ascending) that neighbour m needs."""
    neighbours, import_counts = np.unique(external_owner, return_counts=True)
    export_index = np.searchsorted(internal, np.concatenate(exports)) if exports else []
    return {"neighbours": neighbours.astype(np.int32), "import_ptr": _offsets(import_counts),
            "import_index": np.arange(internal.size, internal.size + external.size,
                                      dtype=np.int32),
            "export_ptr": _offsets([e.size for e in exports]),
            "export_index": np.asarray(export_index, dtype=np.int32)}


def by_owner(nodes: np.ndarray, owners: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(nodes, owners) sorted by owner, then by node number."""
    order = np.lexsort((nodes, owners))
    return nodes[order], owners[order]


def to_local(local: LocalData, nodes) -> np.ndarray:
    """The local numbers of global nodes that are local on this rank."""
    sorter = np.argsort(local.global_ids, kind="stable")
    return sorter[np.searchsorted(local.global_ids, nodes, sorter=sorter)]


def fem_local_data(box: BoxMesh, rule, rank: int, size: int) -> LocalData:
    """This rank's LocalData of the box (course.parallel.local.local_data with depth 1), built
    from the rule alone."""
    internal = rule.owned(rank)
    if internal.size == 0:
        raise ValueError(f"rank {rank} owns no node")
    i, j, k = box.ijk(internal)
    touching = []                                    # the up to 8 elements around each node
    for di, dj, dk in itertools.product((0, -1), repeat=3):
        ei, ej, ek = i + di, j + dj, k + dk
        ok = (ei >= 0) & (ei < box.nx) & (ej >= 0) & (ej < box.ny) & (ek >= 0) & (ek < box.nz)
        touching.append(ei[ok] + box.nx * (ej[ok] + box.ny * ek[ok]))
    element_ids = np.unique(np.concatenate(touching))
    corners = box.corners(element_ids)
    owners = rule.owner_of(corners)
    others = owners != rank
    external, external_owner = by_owner(*np.unique(
        np.stack([corners[others], owners[others]]), axis=1))
    # neighbour q needs my corners of the elements that have a corner of q (they share an element)
    border = np.any(others, axis=1)
    exports = [np.unique(corners[border][(owners[border] == rank)
                                         & np.any(owners[border] == q, axis=1)[:, None]])
               for q in np.unique(external_owner)]
    local = LocalData(rank, size, int(internal.size), np.concatenate([internal, external]),
                      np.zeros((0, 8), dtype=np.int32), element_ids.astype(np.int64),
                      **tables(rank, size, internal, external, external_owner, exports))
    local.elements = to_local(local, corners).astype(np.int32)
    return local


def row_local_data_of(internal: np.ndarray, columns: np.ndarray, rows: np.ndarray, owner_of,
                      rank: int, size: int) -> LocalData:
    """This rank's LocalData for a matrix distributed by rows (course.parallel.local.
    row_local_data), from its internal rows alone: `columns` the global columns of its rows,
    `rows` the global row of each (the pattern symmetric)."""
    if internal.size == 0:
        raise ValueError(f"rank {rank} owns no row")
    owners = owner_of(columns)
    others = owners != rank
    external, external_owner = by_owner(*np.unique(
        np.stack([columns[others], owners[others]]), axis=1))
    exports = [np.unique(rows[others & (owners == q)]) for q in np.unique(external_owner)]
    return LocalData(rank, size, int(internal.size), np.concatenate([internal, external]),
                     np.zeros((0, 8), dtype=np.int32), np.zeros(0, dtype=np.int64),
                     **tables(rank, size, internal, external, external_owner, exports))
