"""The halo exchange: after it, the external entries x[n_internal:] of a local vector hold the
values their owners have. The same operation four ways (all must give bitwise the same values):

    p2p         pack, MPI_Irecv + MPI_Isend per neighbour, MPI_Waitall, unpack
    persistent  the same messages set up once (MPI_Recv_init / MPI_Send_init), then
                MPI_Startall + MPI_Waitall in every exchange
    neighbor    one MPI-3 neighbourhood collective (MPI_Neighbor_alltoallv) on a
                distributed-graph communicator whose edges are the neighbours
    allgather   the naive baseline: every rank gathers the WHOLE vector (MPI_Allgatherv) and
                picks its external values; P times the data of the whole problem moves

mpi4py: only the upper-case, buffer-based calls on contiguous NumPy arrays (no pickling). Every
message goes into (or out of) a contiguous buffer that is then scattered (gathered) with fancy
indexing: `Irecv(x[idx])` with an index array would receive into a temporary copy and lose the data.
"""

from __future__ import annotations

import ctypes
import time

import numpy as np
from mpi4py import MPI

from .local import LocalData

STYLES = ("p2p", "persistent", "neighbor", "allgather")
TAG = 5


def check_style(style: str) -> str:
    if style not in STYLES:
        raise ValueError(f"exchange must be one of {', '.join(STYLES)}; got {style!r}")
    return style


class Halo:
    """The halo exchange of one rank's local data on `comm` (its size must be the partition's).

    halo.update(x) fills x[n_internal:] in place; halo.seconds adds up the time spent in it and
    halo.exchanges counts the calls. Call halo.free() when done (persistent requests, the graph
    communicator)."""

    def __init__(self, local: LocalData, comm=MPI.COMM_WORLD, style: str = "p2p"):
        self.style = check_style(style)
        if comm.Get_size() != local.size or comm.Get_rank() != local.rank:
            raise ValueError(f"the local data is for rank {local.rank} of {local.size}, but "
                             f"this is rank {comm.Get_rank()} of {comm.Get_size()}")
        self.local, self.comm = local, comm
        self.send = np.empty(local.export_index.shape[0])
        self.recv = np.empty(local.import_index.shape[0])
        self.seconds, self.exchanges = 0.0, 0
        self._requests, self._graph = [], None
        if hasattr(self, f"_setup_{style}"):     # p2p needs no set-up
            getattr(self, f"_setup_{style}")()

    # --- sizes -----------------------------------------------------------------------------------

    @property
    def bytes_sent(self) -> int:
        """Bytes this rank sends in one exchange (8 per value)."""
        if self.style == "allgather":
            return 8 * self.local.n_internal * (self.local.size - 1)
        return 8 * int(self.send.shape[0])

    # --- one exchange ----------------------------------------------------------------------------

    def update(self, x: np.ndarray) -> None:
        """Fill the external entries x[n_internal:] of the local vector x (length n_local)."""
        if x.shape != (self.local.n_local,) or x.dtype != np.float64:
            raise ValueError(f"x must be {self.local.n_local} float64 values, got shape "
                             f"{x.shape} of {x.dtype}")
        start = time.perf_counter()
        getattr(self, f"_update_{self.style}")(x)
        self.seconds += time.perf_counter() - start
        self.exchanges += 1

    def _pack(self, x):
        np.take(x, self.local.export_index, out=self.send)

    def _unpack(self, x):
        x[self.local.import_index] = self.recv

    # [halo_p2p]
    def _update_p2p(self, x):
        loc = self.local
        self._pack(x)
        requests = []
        for m, rank in enumerate(loc.neighbours):       # post the receives first
            part = self.recv[loc.import_ptr[m]:loc.import_ptr[m + 1]]
            requests.append(self.comm.Irecv([part, MPI.DOUBLE], source=rank, tag=TAG))
        for m, rank in enumerate(loc.neighbours):
            part = self.send[loc.export_ptr[m]:loc.export_ptr[m + 1]]
            requests.append(self.comm.Isend([part, MPI.DOUBLE], dest=rank, tag=TAG))
        MPI.Request.Waitall(requests)
        self._unpack(x)
    # [halo_p2p]

    # [halo_persistent]
    def _setup_persistent(self):
        loc = self.local
        for m, rank in enumerate(loc.neighbours):       # the same buffers in every exchange
            part = self.recv[loc.import_ptr[m]:loc.import_ptr[m + 1]]
            self._requests.append(self.comm.Recv_init([part, MPI.DOUBLE], source=rank, tag=TAG))
        for m, rank in enumerate(loc.neighbours):
            part = self.send[loc.export_ptr[m]:loc.export_ptr[m + 1]]
            self._requests.append(self.comm.Send_init([part, MPI.DOUBLE], dest=rank, tag=TAG))

    def _update_persistent(self, x):
        self._pack(x)
        MPI.Prequest.Startall(self._requests)
        MPI.Request.Waitall(self._requests)
        self._unpack(x)
    # [halo_persistent]

    # [halo_neighbor]
    def _setup_neighbor(self):
        loc = self.local
        ranks = loc.neighbours.tolist()
        # a communicator whose topology is the neighbour graph; reorder=False keeps the ranks
        self._graph = self.comm.Create_dist_graph_adjacent(ranks, ranks, reorder=False)
        self._sendspec = [self.send, (np.diff(loc.export_ptr), loc.export_ptr[:-1]), MPI.DOUBLE]
        self._recvspec = [self.recv, (np.diff(loc.import_ptr), loc.import_ptr[:-1]), MPI.DOUBLE]

    def _update_neighbor(self, x):
        self._pack(x)
        self._graph.Neighbor_alltoallv(self._sendspec, self._recvspec)
        self._unpack(x)
    # [halo_neighbor]

    # [halo_allgather]
    def _setup_allgather(self):
        loc = self.local
        counts = np.array(self.comm.allgather(loc.n_internal))     # once, at set-up
        self._counts, self._displs = counts, np.concatenate([[0], np.cumsum(counts)[:-1]])
        ids = np.empty(counts.sum(), dtype=np.int64)                 # global ids, rank by rank
        self.comm.Allgatherv(loc.global_ids[:loc.n_internal],
                             [ids, counts, self._displs, MPI.INT64_T])
        position = np.empty(ids.shape[0], dtype=np.int64)            # global id -> position
        position[ids] = np.arange(ids.shape[0])
        self._where = position[loc.global_ids[loc.n_internal:]]
        self._everything = np.empty(ids.shape[0])

    def _update_allgather(self, x):
        n = self.local.n_internal
        self.comm.Allgatherv(x[:n], [self._everything, self._counts, self._displs, MPI.DOUBLE])
        x[n:] = self._everything[self._where]
    # [halo_allgather]

    def free(self) -> None:
        for request in self._requests:
            request.Free()
        self._requests = []
        if self._graph is not None:
            self._graph.Free()
            self._graph = None


# --- how a rank learns the sizes of the messages it will receive ----------------------------------

SIZE_EXCHANGES = ("table", "neighbours")


def message_sizes(local: LocalData, comm=MPI.COMM_WORLD, how: str = "neighbours"):
    """(values to receive from each neighbour, metadata bytes this rank received to know it).

    table: as OpenFOAM's PstreamBuffers (seed 000): every rank contributes its row of the P x P
    table of send sizes and every rank gets the whole table (MPI_Allgather): P^2 numbers per rank,
    whatever the neighbours. neighbours: the sizes follow from the fixed local data (each rank
    imports exactly what its neighbour exports), so nothing is sent at all."""
    if how not in SIZE_EXCHANGES:
        raise ValueError(f"how must be one of {', '.join(SIZE_EXCHANGES)}; got {how!r}")
    if how == "neighbours":
        return np.diff(local.import_ptr).astype(np.int64), 0
    size = comm.Get_size()
    row = np.zeros(size, dtype=np.int64)
    row[local.neighbours] = np.diff(local.export_ptr)
    table = np.empty((size, size), dtype=np.int64)
    comm.Allgather([row, MPI.INT64_T], [table, MPI.INT64_T])
    return table[local.neighbours, comm.Get_rank()], table.nbytes


# --- the halo_exchange of a compiled library (C, or Fortran with bind(C)) behind update(x) ------

def load_halo_exchange(path: str):
    """The function halo_exchange of the shared library at `path`, for CompiledExchange
    (AttributeError if the library has none)."""
    function = ctypes.CDLL(path).halo_exchange
    function.restype = None
    return function


class CompiledExchange:
    """halo_exchange of a C or Fortran shared library. Fortran: tables 1-based, every argument by
    reference, comm as the integer handle of mpi_f08's type(MPI_Comm). Counts and times its
    exchanges as Halo does (seconds, exchanges)."""

    def __init__(self, function, fortran: bool, local: LocalData, comm):
        base = 1 if fortran else 0
        self.seconds, self.exchanges = 0.0, 0
        self.function, self.fortran, self.local = function, fortran, local
        self.tables = [np.ascontiguousarray(local.neighbours, dtype=np.int32)] + [
            np.ascontiguousarray(table + base, dtype=np.int32)
            for table in (local.import_ptr, local.import_index, local.export_ptr,
                          local.export_index)]
        self.send = np.full(max(local.export_index.size, 1), np.nan)
        self.recv = np.full(max(local.import_index.size, 1), np.nan)
        if fortran:
            self.n = ctypes.c_int(local.n_neighbours)
            self.handle = ctypes.c_int(comm.py2f())
            self.comm = ctypes.byref(self.handle)
        else:
            self.n = local.n_neighbours
            c_comm = ctypes.c_int if MPI._sizeof(MPI.Comm) == ctypes.sizeof(ctypes.c_int) \
                else ctypes.c_void_p
            self.comm = c_comm(MPI._handleof(comm))
        # the arguments before and after x, made once: the call then costs one ctypes call
        n = ctypes.byref(self.n) if fortran else ctypes.c_int(self.n)
        self.before = (n, *map(_pointer, self.tables))
        self.after = (_pointer(self.send), _pointer(self.recv), self.comm)

    def update(self, x: np.ndarray) -> None:
        start = time.perf_counter()
        self.function(*self.before, ctypes.c_void_p(x.ctypes.data), *self.after)
        self.seconds += time.perf_counter() - start
        self.exchanges += 1


def _pointer(array: np.ndarray):
    return array.ctypes.data_as(ctypes.c_void_p)
