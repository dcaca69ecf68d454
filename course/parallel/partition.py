"""Node-based partitions of the structured box (GeoFEM style): a map owner[node] -> rank.

Two ways to make one:
- blocks: PX x PY x PZ boxes of nodes. Along x the NX + 1 node indices are cut into PX parts,
  part p holding i in [start(p), start(p+1)), start(p) = floor(p (NX+1) / PX) (uneven sizes allowed);
  rank = px + PX (py + PY pz). The C and Fortran programs (fem3d_mpi_c/_f) use the same rule.
- METIS: k-way partitioning of the node graph (two nodes are joined when they share an element),
  through pymetis, which bundles the METIS library, run in a process of its own (metis_part_graph).

Any map works for the rest of the track (course.parallel.local): the partition decides only how
much each rank computes (load balance) and how much it talks (halo size, neighbours).
"""

from __future__ import annotations

import io
import subprocess
import sys
from dataclasses import dataclass

import numpy as np

from ..fem.mesh import BoxMesh

METHODS = ("blocks", "metis")


def block_starts(n_points: int, parts: int) -> np.ndarray:
    """The first index of each of `parts` near-equal blocks of range(n_points), plus n_points."""
    return (np.arange(parts + 1, dtype=np.int64) * n_points) // parts


def check_blocks(mesh: BoxMesh, dims) -> tuple[int, int, int]:
    """(PX, PY, PZ) as ints, or ValueError when a count is not positive or exceeds the nodes."""
    if len(dims) != 3:
        raise ValueError(f"blocks need three counts PX PY PZ, got {dims!r}")
    out = []
    for name, parts, nodes in zip(("PX", "PY", "PZ"), dims, (mesh.nx + 1, mesh.ny + 1,
                                                               mesh.nz + 1)):
        if isinstance(parts, bool) or int(parts) != parts or parts < 1:
            raise ValueError(f"{name} must be a positive integer, got {parts!r}")
        if parts > nodes:
            raise ValueError(f"{name} = {parts} parts but only {nodes} nodes along "
                             f"{'xyz'[len(out)]}")
        out.append(int(parts))
    return tuple(out)


def block_partition(mesh: BoxMesh, px: int, py: int, pz: int) -> np.ndarray:
    """owner[node] (int32) of the PX x PY x PZ blocks of nodes."""
    px, py, pz = check_blocks(mesh, (px, py, pz))
    i, j, k = mesh.node_ijk()
    part = [np.searchsorted(block_starts(n + 1, p), index, side="right") - 1
            for index, n, p in ((i, mesh.nx, px), (j, mesh.ny, py), (k, mesh.nz, pz))]
    return (part[0] + px * (part[1] + py * part[2])).astype(np.int32)


def default_blocks(mesh: BoxMesh, ranks: int) -> tuple[int, int, int]:
    """The factorisation PX PY PZ = ranks whose blocks are closest to cubes (fewest halo nodes,
    roughly), each count at most the nodes along its axis; among equals, more parts along x
    (then y): x is the axis the node numbers run along fastest."""
    nodes = np.array([mesh.nx + 1, mesh.ny + 1, mesh.nz + 1], dtype=float)
    best, best_surface = None, np.inf
    for px in range(ranks, 0, -1):
        if ranks % px:
            continue
        for py in range(ranks // px, 0, -1):
            if (ranks // px) % py:
                continue
            dims = np.array([px, py, ranks // (px * py)])
            if np.any(dims > nodes):
                continue
            side = nodes / dims
            surface = side[0] * side[1] + side[1] * side[2] + side[0] * side[2]
            if surface < best_surface - 1e-9:
                best, best_surface = tuple(int(d) for d in dims), surface
    if best is None:
        raise ValueError(f"{ranks} ranks are more parts than the {mesh.n_node} nodes of the mesh "
                         f"allow")
    return best


def node_graph(mesh: BoxMesh) -> tuple[np.ndarray, np.ndarray]:
    """(xadj, adjncy) of the node graph in METIS's CSR form: the 27-point pattern of the FEM
    matrix without its diagonal (node n is joined to the nodes it shares an element with)."""
    from ..fem.assembly import fem3d_pattern_numpy

    row_ptr, col_idx = fem3d_pattern_numpy(mesh)
    rows = np.repeat(np.arange(mesh.n_node), np.diff(row_ptr))
    off = rows != col_idx
    xadj = np.concatenate([[0], np.cumsum(np.bincount(rows[off], minlength=mesh.n_node))])
    return xadj.astype(np.int64), col_idx[off].astype(np.int64)


def metis_partition(mesh: BoxMesh, parts: int, seed: int = 1, weights=None) -> np.ndarray:
    """owner[node] (int32) from METIS k-way partitioning of the node graph (pymetis); weights:
    the work of each node (None: 1 each; course.parallel.subdomain cuts a coarse lattice whose
    points weigh the nodes they stand for)."""
    if isinstance(parts, bool) or int(parts) != parts or parts < 1:
        raise ValueError(f"parts must be a positive integer, got {parts!r}")
    if parts > mesh.n_node:
        raise ValueError(f"{parts} parts are more than the {mesh.n_node} nodes of the mesh")
    if parts == 1:
        return np.zeros(mesh.n_node, dtype=np.int32)
    owner = metis_part_graph(int(parts), *node_graph(mesh), weights, seed)
    if np.unique(owner).size != parts:
        raise ValueError(f"METIS left a part empty: {parts} parts of {mesh.n_node} nodes")
    return numbered_by_first_node(owner)


# The child: the graph arrives as an .npz on stdin, the parts leave as int32 bytes on stdout.
_METIS_CHILD = """
import io, sys
import numpy as np
import pymetis
graph = np.load(io.BytesIO(sys.stdin.buffer.read()))
adjacency = pymetis.CSRAdjacency(graph["xadj"], graph["adjncy"])
weights = graph["weights"].tolist() if graph["weights"].size else None
_, owner = pymetis.part_graph(int(graph["parts"]), adjacency, vweights=weights,
                              options=pymetis.Options(seed=int(graph["seed"])))
sys.stdout.buffer.write(np.asarray(owner, dtype=np.int32).tobytes())
"""


def metis_part_graph(parts: int, xadj, adjncy, weights=None, seed: int = 1) -> np.ndarray:
    """METIS's parts of the graph (CSR: xadj, adjncy; weights per vertex or None), from a fresh
    Python process. METIS draws its random numbers from C's rand(), whose state every thread of a
    process shares, and a seed makes it repeat only if nothing else draws meanwhile: in a Jupyter
    kernel, an ipyparallel engine or a test worker, ZeroMQ's threads call rand() too, and one draw
    in the middle of a partition changes it (seen in the test suite). A process of its own costs
    about 0.1 s and gives the same parts for the same graph, everywhere."""
    graph = io.BytesIO()
    np.savez(graph, parts=parts, seed=seed, xadj=np.asarray(xadj, dtype=np.int64),
             adjncy=np.asarray(adjncy, dtype=np.int64),
             weights=np.asarray([] if weights is None else weights, dtype=np.int64))
    done = subprocess.run([sys.executable, "-c", _METIS_CHILD], input=graph.getvalue(),
                          capture_output=True, timeout=600)
    if done.returncode != 0:
        last = done.stderr.decode(errors="replace").strip().splitlines()[-1:] or ["no message"]
        raise RuntimeError(f"METIS failed on a graph of {len(xadj) - 1} vertices: {last[0]}")
    return np.frombuffer(done.stdout, dtype=np.int32).copy()


def numbered_by_first_node(owner: np.ndarray) -> np.ndarray:
    """The same parts renumbered in the order of their lowest node: part 0 holds node 0, so that
    the map depends on the cut alone, not on METIS's labels."""
    labels, first = np.unique(owner, return_index=True)
    rank_of_label = np.empty(labels.max() + 1, dtype=np.int32)
    rank_of_label[labels[np.argsort(first)]] = np.arange(labels.size, dtype=np.int32)
    return rank_of_label[owner]


def make_partition(mesh: BoxMesh, method: str, ranks: int, dims=None) -> np.ndarray:
    """owner[node] for `ranks` parts by `method` ("blocks": dims = (PX, PY, PZ), default
    default_blocks; "metis")."""
    if method not in METHODS:
        raise ValueError(f"partition must be one of {', '.join(METHODS)}; got {method!r}")
    if method == "metis":
        if dims is not None:
            raise ValueError("PX PY PZ are for the blocks partition, not for metis")
        return metis_partition(mesh, ranks)
    dims = default_blocks(mesh, ranks) if dims is None else check_blocks(mesh, dims)
    if dims[0] * dims[1] * dims[2] != ranks:
        raise ValueError(f"PX PY PZ = {dims[0]} {dims[1]} {dims[2]} make "
                         f"{dims[0] * dims[1] * dims[2]} parts, but there are {ranks} ranks")
    return block_partition(mesh, *dims)


@dataclass
class Quality:
    """How good a partition is for the solver: balance (work) and halo (communication)."""
    ranks: int
    owned: np.ndarray           # internal nodes per rank
    halo: np.ndarray            # external nodes per rank (the values it receives per exchange)
    neighbours: np.ndarray      # ranks each rank exchanges with
    edge_cut: int               # node-graph edges whose two ends have different owners

    @property
    def load_imbalance(self) -> float:
        """max / mean of the internal nodes per rank: 1 is perfect balance."""
        return float(self.owned.max() / self.owned.mean())

    def as_dict(self) -> dict:
        return {"ranks": self.ranks, "load_imbalance": self.load_imbalance,
                "edge_cut": self.edge_cut, "owned_min": int(self.owned.min()),
                "owned_max": int(self.owned.max()), "halo_nodes_total": int(self.halo.sum()),
                "halo_nodes_max": int(self.halo.max()),
                "neighbours_max": int(self.neighbours.max())}


def quality(mesh: BoxMesh, owner: np.ndarray) -> Quality:
    """Load balance, halo sizes, neighbour counts and edge cut of the map owner[node]."""
    owner = check_owner(mesh, owner)
    ranks = int(owner.max()) + 1
    xadj, adjncy = node_graph(mesh)
    rows = np.repeat(np.arange(mesh.n_node), np.diff(xadj))
    cut = owner[rows] != owner[adjncy]
    # external nodes of rank r: nodes of other ranks joined to a node of r (sharing an element)
    pairs = np.unique(owner[rows[cut]].astype(np.int64) * mesh.n_node + adjncy[cut])
    halo = np.bincount(pairs // mesh.n_node, minlength=ranks)
    links = np.unique(owner[rows[cut]].astype(np.int64) * ranks + owner[adjncy[cut]])
    neighbours = np.bincount(links // ranks, minlength=ranks)
    return Quality(ranks, np.bincount(owner, minlength=ranks), halo, neighbours,
                   int(cut.sum()) // 2)


def check_owner(mesh: BoxMesh, owner) -> np.ndarray:
    """owner as an int32 array of n_node ranks 0 .. P-1, each rank owning at least one node."""
    owner = np.asarray(owner)
    if owner.shape != (mesh.n_node,) or not np.issubdtype(owner.dtype, np.integer):
        raise ValueError(f"owner must hold one integer rank per node ({mesh.n_node}), got "
                         f"shape {owner.shape} of {owner.dtype}")
    if owner.size and owner.min() < 0:
        raise ValueError("owner holds a negative rank")
    counts = np.bincount(owner)
    if np.any(counts == 0):
        raise ValueError(f"rank {int(np.flatnonzero(counts == 0)[0])} owns no node")
    return owner.astype(np.int32, copy=False)
