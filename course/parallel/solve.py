"""The distributed CG of any problem whose rows are spread over P MPI ranks (lectures 05_halo,
06_pipecg, 08_hybrid): each rank holds the rows of its internal nodes (LocalMatrix: columns over
its internal and external nodes) and solves with course.solvers.krylov, the serial solver's code
path, plugged with

    SpMV  = halo exchange of p + local CRS product (numpy, numba, or the OpenMP kernel of c and
            fortran: a threaded rank)
    dot   = local dot product + MPI_Allreduce (or MPI_Iallreduce: lecture 06_pipecg)
    M^-1  = Jacobi, or IC(0) localized per rank with ASDD sweeps (course.parallel.
            precond: lecture 08_hybrid)

and the pieces every distributed problem shares: a set-up step that fails on every rank together
(agree), the threads of a rank and the thread level MPI provides, the partition's figures summed
from the ranks' parts, the solution gathered on one rank. The problems themselves live in
course.parallel.fem3d and course.parallel.poisson.
"""

from __future__ import annotations

import os
import time
import warnings
from dataclasses import dataclass

import numpy as np
from mpi4py import MPI

from .. import native, resources, solvers, toolchain
from ..langs import check_lang
from ..sparse import matvec_numba, matvec_numpy
from .halo import Halo, check_style
from .local import LocalData
from .precond import check_precond, preconditioner
from .reductions import MPIReductions


@dataclass
class LocalMatrix:
    """The rows of the internal nodes: n_internal rows, columns over all n_local nodes."""
    row_ptr: np.ndarray
    col_idx: np.ndarray
    val: np.ndarray
    n_cols: int

    @property
    def n_rows(self) -> int:
        return self.row_ptr.shape[0] - 1

    @property
    def nnz(self) -> int:
        return int(self.row_ptr[-1])

    def diagonal(self) -> np.ndarray:
        rows = np.repeat(np.arange(self.n_rows), np.diff(self.row_ptr))
        on_diagonal = rows == self.col_idx
        d = np.zeros(self.n_rows)
        d[rows[on_diagonal]] = self.val[on_diagonal]
        return d


class Distributed:
    """The pluggable pieces of course.solvers.krylov for one rank: matvec (halo exchange + local
    product by the kernel of numpy, numba, or c and fortran with their OpenMP threads), the global
    sums (MPI_Allreduce, or MPI_Iallreduce when nonblocking) and the
    preconditioner `precond` of course.parallel.precond (Jacobi by default; sweeps, ordering_name,
    colors and precond_lang are its options). halo.seconds and reductions.seconds time the
    communication, product_seconds the local products (product_calls of them),
    precond_seconds the preconditioner less its halo exchanges (its local products included:
    precond_product_seconds of product_seconds)."""

    def __init__(self, matrix: LocalMatrix, halo: Halo, comm=MPI.COMM_WORLD,
                 kernel: str = "numba", nonblocking: bool = False, progress_chunks: int = 1,
                 precond: str = "diagonal", sweeps: int | None = None,
                 ordering_name: str = "natural", colors: int | None = None,
                 precond_lang: str = "numba"):
        self.matrix, self.halo, self.comm = matrix, halo, comm
        # the local product in this many chunks of rows, with an MPI_Test on the reductions in
        # flight between two chunks (1: one piece, no test)
        self.chunks = np.linspace(0, matrix.n_rows, max(int(progress_chunks), 1) + 1).astype(int)
        self.work = np.zeros(matrix.n_cols)            # p on internal + external nodes
        self.product = self._compiled_product(kernel) if kernel in native.COMPILED_LANGS \
            else matvec_numpy if kernel == "numpy" else matvec_numba
        self.preconditioner = preconditioner(matrix, precond, self.matvec, sweeps, ordering_name,
                                             colors, precond_lang)
        self.reductions = MPIReductions(comm, nonblocking)
        self.product_seconds = 0.0                     # in the local CRS products
        self.product_calls = 0
        self.precond_seconds = 0.0
        self.precond_product_seconds = 0.0

    @property
    def dinv(self) -> np.ndarray:
        return 1.0 / self.matrix.diagonal()

    # [distributed_matvec]
    def matvec(self, p: np.ndarray) -> np.ndarray:
        n = self.matrix.n_rows
        self.work[:n] = p
        self.halo.update(self.work)                    # external entries from their owners
        start = time.perf_counter()
        q = self._product(self.work)
        self.product_seconds += time.perf_counter() - start
        self.product_calls += 1
        return q
    # [distributed_matvec]

    def _compiled_product(self, lang: str):
        """The local product by the OpenMP kernel of `lang` (threaded: a hybrid rank), checked
        once: x is self.work, y a buffer of its own, copied out at each call."""
        if self.chunks.size != 2:
            raise ValueError("progress chunks are for the numba and numpy products")
        y = np.empty(self.matrix.n_rows)
        run = native.crs_matvec_prepared(lang, self.matrix.row_ptr, self.matrix.col_idx,
                                         self.matrix.val, self.work, y)

        def product(row_ptr, col_idx, val, x):
            run()
            return y.copy()
        return product

    # [progress_in_spmv]
    def _product(self, x: np.ndarray) -> np.ndarray:
        m = self.matrix
        if self.chunks.size == 2:
            return self.product(m.row_ptr, m.col_idx, m.val, x)
        q = np.empty(m.n_rows)
        for first, end in zip(self.chunks[:-1], self.chunks[1:]):
            if first > 0:
                self.reductions.progress()             # MPI_Test: the library gets a turn
            lo, hi = m.row_ptr[first], m.row_ptr[end]  # rows first .. end-1 as a CRS of their own
            q[first:end] = self.product(m.row_ptr[first:end + 1] - lo, m.col_idx[lo:hi],
                                        m.val[lo:hi], x)
        return q
    # [progress_in_spmv]

    def precond(self, r: np.ndarray) -> np.ndarray:
        start, halo, products = time.perf_counter(), self.halo.seconds, self.product_seconds
        z = self.preconditioner(r)
        self.precond_seconds += time.perf_counter() - start - (self.halo.seconds - halo)
        self.precond_product_seconds += self.product_seconds - products
        return z

    def solve(self, b: np.ndarray, tol: float = 1e-8, max_iter: int | None = None,
              algorithm: str = "pcg", replace_every: int = 0):
        """The CG variant `algorithm` of course.solvers.krylov on this rank's rows; a dot product
        there is the local np.dot of the internal entries, summed by self.reductions."""
        return solvers.krylov(self.matvec, b, self.precond, self.reductions, algorithm,
                              tol=tol, max_iter=max_iter, replace_every=replace_every,
                              exchanges=lambda: self.halo.exchanges)


def gather_vector(comm, local: LocalData, values: np.ndarray, n_node: int, root: int = 0):
    """The global vector (on `root`; None elsewhere) of the internal values of every rank."""
    n = local.n_internal
    counts = np.array(comm.allgather(n))
    displs = np.concatenate([[0], np.cumsum(counts)[:-1]])
    ids = np.empty(counts.sum(), dtype=np.int64) if comm.Get_rank() == root else None
    vals = np.empty(counts.sum()) if comm.Get_rank() == root else None
    comm.Gatherv(np.ascontiguousarray(local.global_ids[:n]), [ids, counts, displs, MPI.INT64_T],
                 root=root)
    comm.Gatherv(np.ascontiguousarray(values[:n]), [vals, counts, displs, MPI.DOUBLE], root=root)
    if comm.Get_rank() != root:
        return None
    out = np.full(n_node, np.nan)
    out[ids] = vals
    return out


class CollectiveError(RuntimeError):
    """An error found on some rank(s), raised on every rank with the first rank's message."""


def agree(comm, step):
    """Run step() on every rank; if it raises a usage error on any rank, raise it on every rank
    (the message of the lowest failing rank), so that all ranks stop together instead of some
    waiting forever in the next collective call."""
    try:
        result, message = step(), None
    except (ValueError, TypeError, FileNotFoundError, RuntimeError) as err:
        result, message = None, str(err).splitlines()[0] if str(err) else repr(err)
    messages = comm.allgather(message)                 # small control data: pickled is fine
    failed = [m for m in messages if m is not None]
    if failed:
        raise CollectiveError(failed[0])
    return result


def check_solve_options(lang: str, exchange: str, algorithm: str, tol) -> float:
    """ValueError for a bad language, exchange style, CG variant or tolerance; the tolerance."""
    check_lang(lang)
    check_style(exchange)
    solvers.check_algorithm(algorithm)
    return native.check_real(tol, "tol", positive=True)


def partition_figures(comm, local: LocalData, matrix: LocalMatrix) -> dict:
    """Load balance, edge cut, neighbours and halo of the partition, summed from the ranks' parts
    (course.parallel.partition.quality computes the same from the whole map): an edge is cut
    when an internal row couples to an external column, and each cut edge is seen by both ends."""
    owned = np.array(comm.allgather(local.n_internal))
    cut = comm.allreduce(int(np.count_nonzero(matrix.col_idx >= matrix.n_rows)))
    return {"load_imbalance": float(owned.max() / owned.mean()), "edge_cut": cut // 2,
            "neighbours_max": comm.allreduce(local.n_neighbours, op=MPI.MAX),
            "halo_nodes_total": comm.allreduce(local.n_external),
            "peak_memory_mb": comm.allgather(resources.peak_memory_mb())}


THREAD_LEVELS = {MPI.THREAD_SINGLE: "single", MPI.THREAD_FUNNELED: "funneled",
                 MPI.THREAD_SERIALIZED: "serialized", MPI.THREAD_MULTIPLE: "multiple"}


def check_thread_level() -> str:
    """The thread support MPI provided (course.parallel asks for FUNNELED: only the thread that
    called MPI_Init_thread calls MPI, between the threaded loops); RuntimeError below FUNNELED."""
    provided = MPI.Query_thread()
    if provided < MPI.THREAD_FUNNELED:
        raise RuntimeError(f"the MPI library provides thread level "
                           f"{THREAD_LEVELS[provided].upper()}, the threaded solve needs FUNNELED")
    return THREAD_LEVELS[provided]


def cores_per_rank(comm) -> float:
    """This rank's share of its node's cores: the cores it may run on (its affinity, as bound by
    mpiexec), at most the node's cores (those of all its ranks together) over its ranks."""
    node = comm.Split_type(MPI.COMM_TYPE_SHARED)
    mine = set(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else set()
    everyone = set().union(*node.allgather(mine))
    ranks_here = node.Get_size()
    node.Free()
    if not mine:                                      # not Linux: the CPUs of the machine
        return (os.cpu_count() or 1) / ranks_here
    return min(min(len(mine), toolchain.usable_cores()), len(everyone) / ranks_here)


def threads_per_rank(comm, lang: str, threads: int | None) -> int:
    """Set the threads of this rank's kernels (None: 1, flat MPI) and return them; warn (rank 0)
    when there are several and they exceed the rank's share of the cores."""
    share = cores_per_rank(comm)
    if lang == "numpy":
        return 1
    threads = 1 if threads is None else resources.check_threads(threads)
    resources.set_threads(lang, threads)
    if comm.Get_rank() == 0 and threads > max(share, 1):     # (more ranks than cores is
                                                             # mpiexec's to refuse, or allow)
        warnings.warn(f"{threads} threads per rank on {share:g} core(s) per rank: "
                      f"{threads / share:.1f} times oversubscribed (threads take turns, and spin "
                      f"at barriers)", RuntimeWarning, stacklevel=2)
    return threads


def solve_distributed(comm, local: LocalData, matrix: LocalMatrix, b: np.ndarray, lang: str,
                      exchange: str, tol: float, algorithm: str, iallreduce: bool,
                      replace_every: int, t0: float, precond: str = "diagonal",
                      sweeps: int | None = None, ordering_name: str = "natural",
                      colors: int | None = None, threads: int | None = None,
                      engine: str = "course"):
    """Solve with the CG variant `algorithm` and the preconditioner `precond` (its sweeps,
    ordering and colors: course.parallel.precond) on the rows of every rank; returns (this
    rank's SolveResult, the summary fields every distributed problem shares: the common fields of
    `course solve` less problem and unknowns, the seconds of set-up, solve, SpMV, preconditioner,
    halo exchanges and reductions (the slowest rank's), the counts of exchanges and reductions).
    engine="petsc": the same matrix solved by PETSc's twin of the choice (solve_petsc)."""
    halo = Halo(local, comm, exchange)
    thread_level = agree(comm, check_thread_level)
    if engine == "petsc":
        return solve_petsc(comm, local, matrix, b, halo, tol, algorithm, precond, sweeps, t0,
                           thread_level)
    threads_used = agree(comm, lambda: threads_per_rank(comm, lang, threads))

    def set_up():
        try:
            return Distributed(matrix, halo, comm, kernel=lang, nonblocking=iallreduce,
                               precond=precond, sweeps=sweeps, ordering_name=ordering_name,
                               colors=colors, precond_lang=lang)
        except ValueError as err:                      # colors, IC(0) breakdown: say where
            raise ValueError(f"rank {comm.Get_rank()}: {err}") from None

    system = agree(comm, set_up)
    t1 = time.perf_counter()
    n_total = comm.allreduce(local.n_internal)
    result = agree(comm, lambda: system.solve(b, tol=tol, max_iter=10 * n_total,
                                              algorithm=algorithm, replace_every=replace_every))
    t2 = time.perf_counter()
    halo.free()
    reductions = system.reductions
    timings = np.array([t1 - t0, t2 - t1, t2 - t0, halo.seconds, reductions.seconds,
                        reductions.overlapped_seconds,
                        system.product_seconds - system.precond_product_seconds,
                        system.precond_seconds])
    comm.Allreduce(MPI.IN_PLACE, [timings, MPI.DOUBLE], op=MPI.MAX)
    p = system.preconditioner
    colors_per_rank = comm.allgather(p.colors)
    exchanges = result.exchanges_per_iteration
    return result, {
        "lang": lang, "nnz": comm.allreduce(matrix.nnz), "iterations": result.iterations,
        "converged": bool(result.converged), "relative_residual": result.relative_residual,
        "threads": threads_used,
        "seconds": {"assemble": timings[0], "solve": timings[1], "total": timings[2],
                    "halo": timings[3], "allreduce": timings[4], "overlapped": timings[5],
                    "spmv": timings[6], "precond": timings[7]},
        "ranks": comm.Get_size(), "exchange": exchange,
        "halo_bytes_per_exchange": comm.allreduce(halo.bytes_sent),
        "halo_exchanges": halo.exchanges, "allreduces": reductions.count,
        "algorithm": algorithm, "iallreduce": bool(iallreduce),
        "reductions_per_iteration": max(result.reductions_per_iteration, default=0),
        "halo_exchanges_per_iteration": max(exchanges, default=0)
        if len(set(exchanges)) <= 1 else -1,
        "residual_replacement": replace_every,
        "true_relative_residual": result.true_relative_residual,
        "precond": p.name, "asdd_sweeps": p.sweeps,
        "ordering": p.ordering, "colors_per_rank": colors_per_rank,
        "threads_per_rank": threads_used, "mpi_thread_level": thread_level, "engine": "course",
    }


def solve_petsc(comm, local: LocalData, matrix: LocalMatrix, b: np.ndarray, halo: Halo,
                tol: float, algorithm: str, precond: str, sweeps: int | None, t0: float,
                thread_level: str):
    """solve_distributed's engine="petsc": this rank's rows handed to PETSc (course.parallel.petsc)
    and solved by PETSc's twin of `algorithm` and `precond` with the course's stopping rule; the
    same summary, with the reductions counted by PETSc's log, what it does not report here (the
    exchanges per iteration, the split of the seconds) as None, and the options it ran with."""
    from . import petsc

    def set_up():
        petsc.options(algorithm, precond, sweeps, tol)             # a choice without a twin
        columns = petsc.global_columns(local.n_internal, matrix.n_cols, halo, comm)
        return petsc.local_mat(matrix, columns, comm)

    mat = agree(comm, set_up)
    t1 = time.perf_counter()
    n_total = comm.allreduce(local.n_internal)
    out = agree(comm, lambda: petsc.solve(mat, b, algorithm=algorithm, precond=precond,
                                          sweeps=sweeps, tol=tol, max_iter=10 * n_total))
    t2 = time.perf_counter()
    mat.destroy()
    halo.free()
    timings = np.array([t1 - t0, t2 - t1, t2 - t0])
    comm.Allreduce(MPI.IN_PLACE, [timings, MPI.DOUBLE], op=MPI.MAX)
    result = solvers.SolveResult(out["x"], out["iterations"], out["relative_residual"],
                                 out["converged"], algorithm=algorithm)
    return result, {
        "lang": "petsc", "nnz": comm.allreduce(matrix.nnz), "iterations": out["iterations"],
        "converged": out["converged"], "relative_residual": out["relative_residual"],
        "threads": 1,
        "seconds": {"assemble": timings[0], "solve": timings[1], "total": timings[2],
                    "halo": None, "allreduce": None, "overlapped": None, "spmv": None,
                    "precond": None},
        "ranks": comm.Get_size(), "exchange": None, "halo_bytes_per_exchange": None,
        "halo_exchanges": None, "allreduces": out["reductions"], "algorithm": algorithm,
        "iallreduce": None,
        # counted by PETSc's log over the whole solve (a few before the loop): per iteration,
        # rounded
        "reductions_per_iteration": round(out["reductions"] / max(out["iterations"], 1)),
        "halo_exchanges_per_iteration": None,
        "residual_replacement": 0, "true_relative_residual": None,
        "precond": precond, "asdd_sweeps": sweeps if precond in petsc.LIBRARY_PRECONDS
        else check_precond(precond, sweeps),
        "ordering": "natural", "colors_per_rank": None, "threads_per_rank": 1,
        "mpi_thread_level": thread_level, "engine": "petsc",
        "petsc_options": " ".join(f"-{key} {value}" for key, value in out["options"].items()),
    }
