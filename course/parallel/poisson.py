"""The finite-volume Poisson problem of 03_openmp on P MPI ranks (lecture 06_pipecg).

The nx x ny x nz cells are partitioned like the nodes of 05_halo: the cell centres form a lattice
of nx x ny x nz points, the nodes of a box of (nx-1) x (ny-1) x (nz-1) elements, so that blocks
and METIS cut them with the same code (course.parallel.partition). The matrix comes assembled
(course.fem.fvm generates it; every rank makes the whole, cheap, problem and keeps its rows), so the
local data come from its rows (course.parallel.local.row_local_data): internal cells first, then
the neighbouring cells of other ranks. The solve is the same as for fem3d:
course.parallel.fem3d.solve_distributed with the CG variant asked for.
"""

from __future__ import annotations

import time

import numpy as np
from mpi4py import MPI

from ..fem import fvm
from ..fem.mesh import box_mesh
from .fem3d import (LocalMatrix, agree, check_solve_options, gather_vector, partition_on_rank_0,
                    solve_distributed)
from .precond import check_precond
from .local import LocalData, row_local_data


def local_rows(problem: fvm.Poisson, local: LocalData) -> tuple[LocalMatrix, np.ndarray]:
    """The rows of the internal cells of D + A_off, columns in local numbers, and their b."""
    a = problem.full_crs()
    to_local = np.full(problem.n, -1, dtype=np.int64)
    to_local[local.global_ids] = np.arange(local.n_local)
    cells = local.global_ids[:local.n_internal]
    starts, ends = a.row_ptr[cells], a.row_ptr[cells + 1]
    take = np.concatenate([np.arange(s, e) for s, e in zip(starts, ends)]) if cells.size \
        else np.zeros(0, dtype=np.int64)
    row_ptr = np.concatenate([[0], np.cumsum(ends - starts)]).astype(np.int32)
    return (LocalMatrix(row_ptr, to_local[a.col_idx[take]].astype(np.int32), a.val[take].copy(),
                        local.n_local), problem.b[cells].copy())


def poisson_parallel(nx=16, ny=16, nz=16, dx=1.0, dy=1.0, dz=1.0, partition="blocks",
                     dims=None, exchange="p2p", lang="numba", tol=1e-8, comm=MPI.COMM_WORLD,
                     algorithm="pcg", iallreduce=False, replace_every=0,
                     keep_solution=False, precond="diagonal", sweeps=None,
                     ordering_name="natural", colors=None, threads=None) -> dict:
    """Solve the Poisson problem of problems.poisson on the ranks of `comm` with the CG variant
    `algorithm` and the preconditioner `precond` (course.parallel.precond; Jacobi by default, as
    the ladder's diagonal scaling); returns the same summary on every rank (with keep_solution,
    "phi" the global solution on rank 0); threads: per rank (None: 1)."""
    t0 = time.perf_counter()

    def setup():
        tol_ = check_solve_options(lang, exchange, algorithm, tol)
        check_precond(precond, sweeps, ordering_name, colors)
        sizes = fvm._check_box(nx, ny, nz, dx, dy, dz)
        if min(sizes[:3]) < 2:
            raise ValueError("--parallel needs at least 2 cells along every axis")
        lattice = box_mesh(sizes[0] - 1, sizes[1] - 1, sizes[2] - 1)
        return (tol_, lattice, *partition_on_rank_0(comm, lattice, partition, dims))

    tol, lattice, blocks, owner = agree(comm, setup)
    owner = comm.bcast(owner, root=0)
    problem = fvm.poisson(nx, ny, nz, dx, dy, dz, lang="numpy", fmt="crs")
    off = problem.off_crs()
    local = row_local_data(off.row_ptr, off.col_idx, owner, comm.Get_rank())
    matrix, b = local_rows(problem, local)
    result, out = solve_distributed(comm, local, matrix, b, lang, exchange, tol, algorithm,
                                    iallreduce, replace_every, t0, precond, sweeps, ordering_name,
                                    colors, threads)
    owned = np.bincount(owner, minlength=comm.Get_size())
    sums = np.array([result.x.sum()])
    comm.Allreduce(MPI.IN_PLACE, [sums, MPI.DOUBLE], op=MPI.SUM)
    out = {"problem": "poisson", "unknowns": problem.n, **out, "checksum": float(sums[0]),
           "partition": partition, "blocks": list(blocks) if blocks is not None else None,
           "load_imbalance": float(owned.max() / owned.mean()),
           "neighbours_max": comm.allreduce(local.n_neighbours, op=MPI.MAX),
           "halo_nodes_total": comm.allreduce(local.n_external),
           "nx": nx, "ny": ny, "nz": nz, "dx": dx, "dy": dy, "dz": dz, "tol": tol}
    if keep_solution:
        out["phi"] = gather_vector(comm, local, result.x, problem.n)
    return out
