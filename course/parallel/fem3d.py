"""The 3D heat-conduction problem of 02_fem3d on P MPI ranks (lecture 05_halo).

Every rank assembles the overlapping elements of its local data with the serial kernels of
course.fem, keeps the rows of its internal nodes (complete there, equal to the serial rows) and
solves with course.solvers.krylov, the same code path as the serial solver, plugged with

    SpMV  = halo exchange of p + local CRS product (internal rows x internal and external columns)
    dot   = local dot product + MPI_Allreduce (or MPI_Iallreduce: lecture 06_pipecg)
    M^-1  = Jacobi (the diagonal of the internal rows: no communication), or IC(0) localized per
            rank, with additive Schwarz sweeps (lecture 08_hybrid: course.parallel.precond).
"""

from __future__ import annotations

import os
import time
import warnings
from dataclasses import dataclass

import numpy as np
from mpi4py import MPI

from .. import native, resources, solvers, toolchain
from ..fem import assembly
from ..langs import check_lang
from ..fem.mesh import OPPOSITE_FACE, BoxMesh, box_mesh, check_face
from ..sparse import CRS, matvec_numba, matvec_numpy
from .halo import Halo, check_style
from .local import LocalData
from .precond import check_precond, preconditioner
from .reductions import MPIReductions
from .subdomain import BlockRule, check_part, fem_local_data, partition_rule, to_local


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


def local_pattern(local: LocalData) -> tuple[np.ndarray, np.ndarray]:
    """(row_ptr, col_idx) over all n_local local nodes: row a lists, ascending, the local nodes that
    share a local element with a. Internal rows are complete; external rows are partial (their
    other elements live on other ranks) and only serve to let the serial assembly kernel add
    every corner of an element."""
    e = local.elements.astype(np.int64)
    keys = np.unique(np.repeat(e, 8, axis=1).ravel() * local.n_local + np.tile(e, (1, 8)).ravel())
    rows = keys // local.n_local
    row_ptr = np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=local.n_local))])
    return row_ptr.astype(np.int32), (keys % local.n_local).astype(np.int32)


def local_source(mesh: BoxMesh, local: LocalData, xyz: np.ndarray, q_node) -> np.ndarray:
    """The source at the local nodes: q_node a number, a function of the coordinates, or the
    nodal values of the whole mesh."""
    if callable(q_node):
        return np.ascontiguousarray(q_node(xyz), dtype=float)
    if np.ndim(q_node) == 0:
        return np.full(local.n_local, native.check_real(q_node, "q_node"))
    return np.ascontiguousarray(assembly.nodal_source(mesh, q_node)[local.global_ids])


def assemble_local(mesh: BoxMesh, local: LocalData, cond: float, q_node, lang: str = "numpy"):
    """(square CRS over the n_local nodes, rhs over the n_local nodes) of the local elements with
    the serial assembly of `lang`: internal rows complete, external rows partial. Only the rank's
    nodes and elements are used (no array of the whole mesh)."""
    check_lang(lang)
    xyz = np.ascontiguousarray(mesh.coordinates(local.global_ids))
    q = local_source(mesh, local, xyz, q_node)
    row_ptr, col_idx = local_pattern(local)
    if lang == "numpy":
        val, rhs = assembly.fem3d_assemble_numpy(local.elements, xyz, cond, q, row_ptr, col_idx)
    elif lang == "numba":
        val, rhs, bad = assembly.fem3d_assemble_numba(local.elements, xyz, cond, q, row_ptr,
                                                      col_idx)
        if bad >= 0:
            raise ValueError(f"element {local.element_ids[bad]} is inverted or degenerate")
    else:
        val, rhs = native.fem3d_assemble(lang, local.elements, xyz, cond, q, row_ptr, col_idx)
    return CRS(row_ptr, col_idx, val), rhs


def internal_rows(a: CRS, local: LocalData) -> LocalMatrix:
    end = a.row_ptr[local.n_internal]
    return LocalMatrix(a.row_ptr[:local.n_internal + 1].copy(), a.col_idx[:end].copy(),
                       a.val[:end].copy(), local.n_local)


def local_face_quads(mesh: BoxMesh, local: LocalData, face: str) -> np.ndarray:
    """The quadrilaterals of `face` with at least one internal node, in local numbers (all their
    corners are local: they are faces of local elements)."""
    quads = to_local(local, mesh.face_quads_of(face, local.element_ids))
    mine = np.any(quads < local.n_internal, axis=1)
    return np.ascontiguousarray(quads[mine], dtype=np.int32)


def model_system(mesh: BoxMesh, local: LocalData, cond=1.0, qvol=1.0, qflux=0.0,
                 fixed_face="zmax", lang="numpy", source="constant"):
    """The local system of the model problem of 02_fem3d (problems.fem3d without --manufactured):
    T = exact on fixed_face, heat flux qflux through the opposite face, source qvol (or, with
    source="nakajima", qvol |x_c + y_c| on each element, whose T is not known: T = 0 there).
    Returns (LocalMatrix, rhs of the internal nodes, exact temperature at the internal nodes)."""
    check_face(fixed_face)
    assembly.check_source(source)
    exact, _ = assembly.fem3d_model_exact(mesh, fixed_face, cond, qvol, qflux)
    xyz = np.ascontiguousarray(mesh.coordinates(local.global_ids))
    a, rhs = assemble_local(mesh, local, cond, qvol if source == "constant" else 0.0, lang)
    if source == "nakajima":                           # the local elements' share, all of it
        rhs += assembly.element_source_load(
            local.elements, xyz, assembly.nakajima_source(local.elements, xyz, qvol), lang)
    if qflux != 0.0:
        quads = local_face_quads(mesh, local, OPPOSITE_FACE[fixed_face])
        if quads.shape[0]:
            if lang in native.COMPILED_LANGS:
                native.fem3d_face_flux(lang, quads, xyz, qflux, rhs)
            else:
                assembly.fem3d_face_flux_numpy(quads, xyz, qflux, rhs)
    return _fixed(mesh, local, a, rhs, mesh.on_face(local.global_ids, fixed_face), exact(xyz),
                  lang)


def manufactured_system(mesh: BoxMesh, local: LocalData, cond=1.0, lang="numpy"):
    """The local system of the manufactured problem of problems.fem3d (T = sin sin sin, zero on
    every face): (LocalMatrix, rhs and exact T of the internal nodes)."""
    exact, _, source = assembly.manufactured(cond, mesh.lengths)
    a, rhs = assemble_local(mesh, local, cond, source, lang)
    xyz = mesh.coordinates(local.global_ids)
    return _fixed(mesh, local, a, rhs, mesh.on_face(local.global_ids), exact(xyz), lang)


def _fixed(mesh, local, a, rhs, fixed, t_exact, lang):
    assembly.dirichlet(a, rhs, fixed, np.where(fixed, t_exact, 0.0), lang)
    n = local.n_internal
    return internal_rows(a, local), rhs[:n].copy(), t_exact[:n]


def local_errors(comm, mesh: BoxMesh, local: LocalData, halo: Halo, x: np.ndarray, exact,
                 grad_exact) -> tuple[float, float]:
    """(||T_h - T||_L2, |T_h - T|_H1) over the whole mesh: each rank sums the elements whose
    corner 0 it owns (every element once), with the external values of x from the halo."""
    t = np.zeros(local.n_local)
    t[:local.n_internal] = x
    halo.update(t)
    mine = local.elements[:, 0] < local.n_internal
    sums = np.array(assembly.fem3d_error_sums(local.elements[mine],
                                              mesh.coordinates(local.global_ids), t, exact,
                                              grad_exact))
    comm.Allreduce(MPI.IN_PLACE, [sums, MPI.DOUBLE], op=MPI.SUM)
    return float(np.sqrt(sums[0])), float(np.sqrt(sums[1]))


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


def own_part(comm, box: BoxMesh, partition: str, dims, bytes_per_node: float):
    """(this rank's LocalData, the partition rule): every rank evaluates the rule for its own nodes
    (course.parallel.subdomain; METIS once, on rank 0, on a bounded coarse lattice) and checks
    that its part fits in memory."""
    rule = agree(comm, lambda: partition_rule(comm, box, partition, dims))

    def build():
        nodes = check_part(rule, comm.Get_rank(), 27)
        resources.check_memory(bytes_per_node * nodes,
                               f"rank {comm.Get_rank()}'s part ({nodes} nodes)")
        return fem_local_data(box, rule, comm.Get_rank(), comm.Get_size())

    return agree(comm, build), rule


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
                      colors: int | None = None, threads: int | None = None):
    """Solve with the CG variant `algorithm` and the preconditioner `precond` (its sweeps,
    ordering and colors: course.parallel.precond) on the rows of every rank; returns (this
    rank's SolveResult, the summary fields every distributed problem shares: the common fields of
    `course solve` less problem and unknowns, the seconds of set-up, solve, SpMV, preconditioner,
    halo exchanges and reductions (the slowest rank's), the counts of exchanges and reductions)."""
    halo = Halo(local, comm, exchange)
    thread_level = agree(comm, check_thread_level)
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
        "threads_per_rank": threads_used, "mpi_thread_level": thread_level,
    }


def fem3d_parallel(nx=8, ny=8, nz=8, partition="blocks", dims=None, exchange="p2p",
                   lang="numpy", dx=None, dy=None, dz=None, cond=1.0, qvol=1.0, qflux=0.0,
                   fixed_face="zmax", tol=1e-8, comm=MPI.COMM_WORLD,
                   keep_solution=False, algorithm="pcg", iallreduce=False,
                   replace_every=0, precond="diagonal", sweeps=None, ordering_name="natural",
                   colors=None, threads=None, manufactured=False, source="constant") -> dict:
    """Solve the model problem of problems.fem3d (or, with manufactured, its manufactured problem)
    on the ranks of `comm`, each rank building its own part (course.parallel.subdomain: no rank
    holds the whole mesh); returns the same summary on every rank (the common fields of `course
    solve` plus the partition and halo figures, the peak memory of every rank; with
    keep_solution, "T" the global solution on rank 0 and "mesh"). precond, sweeps, ordering_name,
    colors: the preconditioner (course.parallel.precond); threads: per rank (None: 1); source:
    the heat source of problems.fem3d (constant, or nakajima: no exact T, t_max reported)."""
    from ..problems import FEM3D_BYTES_PER_NODE

    t0 = time.perf_counter()

    def setup():
        tol_ = check_solve_options(lang, exchange, algorithm, tol)
        check_precond(precond, sweeps, ordering_name, colors)
        check_face(fixed_face)
        assembly.check_source(source)
        if manufactured and source != "constant":
            raise ValueError("the manufactured problem has its own source")
        return box_mesh(nx, ny, nz, dx, dy, dz, distributed=True), tol_

    box, tol = agree(comm, setup)
    local, rule = own_part(comm, box, partition, dims, FEM3D_BYTES_PER_NODE)
    if manufactured:
        exact, grad_exact, _ = assembly.manufactured(cond, box.lengths)
        system = agree(comm, lambda: manufactured_system(box, local, cond, lang))
    else:
        system = agree(comm, lambda: model_system(box, local, cond, qvol, qflux, fixed_face,
                                                  lang, source))
    matrix, b, t_exact = system
    result, out = solve_distributed(comm, local, matrix, b, lang, exchange, tol, algorithm,
                                    iallreduce, replace_every, t0, precond, sweeps, ordering_name,
                                    colors, threads)
    largest = np.array([np.max(np.abs(result.x - t_exact), initial=0.0),
                        np.max(result.x, initial=-np.inf)])
    comm.Allreduce(MPI.IN_PLACE, [largest, MPI.DOUBLE], op=MPI.MAX)
    known = source == "constant"                       # an exact solution to compare with
    out = {"problem": "fem3d", "unknowns": box.n_node, **out,
           "error_max": float(largest[0]) if known else None, "t_max": float(largest[1]),
           "source": source,
           "partition": partition,
           "blocks": list(rule.dims) if isinstance(rule, BlockRule) else None,
           **partition_figures(comm, local, matrix), "manufactured": bool(manufactured),
           "nx": box.nx, "ny": box.ny, "nz": box.nz, "dx": box.dx, "dy": box.dy, "dz": box.dz,
           "cond": cond, "tol": tol}
    if manufactured:
        halo = Halo(local, comm, exchange)
        out["error_l2"], out["error_h1"] = local_errors(comm, box, local, halo, result.x, exact,
                                                        grad_exact)
        halo.free()
    else:
        out.update({"qvol": qvol, "qflux": qflux, "fixed_face": fixed_face})
    if keep_solution:
        out["mesh"], out["T"] = box, gather_vector(comm, local, result.x, box.n_node)
    return out
