"""The finite-volume Poisson problem of 03_openmp on P MPI ranks (lecture 06_pipecg).

The nx x ny x nz cells are partitioned like the nodes of 05_halo: the cell centres form a lattice
of nx x ny x nz points, the nodes of a box of (nx-1) x (ny-1) x (nz-1) elements, so that blocks
and METIS cut them with the same rules (course.parallel.subdomain). Each rank generates the rows of
its own cells (course.fem.fvm.rows_of: no rank makes the whole matrix) and their local data
(internal cells first, then the neighbouring cells of other ranks, the tables of
course.parallel.local.row_local_data). The solve is the same as for fem3d:
course.parallel.solve.solve_distributed with the CG variant and preconditioner asked for.
"""

from __future__ import annotations

import time

import numpy as np
from mpi4py import MPI

from ..fem import fvm
from ..fem.mesh import box_mesh
from .solve import (LocalMatrix, agree, check_solve_options, gather_vector, partition_figures,
                    solve_distributed)
from .local import LocalData
from .precond import check_precond
from .subdomain import BlockRule, check_part, partition_rule, row_local_data_of, to_local

# bytes per cell of a rank's part: 7 entries (value 8 + column 4 bytes), the vectors of the solve
BYTES_PER_CELL = 7 * 12 + 16 * 8


def poisson_local(nx, ny, nz, dx, dy, dz, cells, owner_of, rank: int,
                  size: int) -> tuple[LocalData, LocalMatrix, np.ndarray]:
    """The local data, the rows (D + A_off, columns in local numbers, increasing global columns in
    each row) and b of the given cells (this rank's, ascending); owner_of(cells) gives the rank of
    any cell."""
    cells = np.asarray(cells, dtype=np.int64)
    cols, exists, amat, d, b = fvm.rows_of(nx, ny, nz, dx, dy, dz, cells)
    # the row with its diagonal in the middle: k-1, j-1, i-1, the cell, i+1, j+1, k+1
    cols = np.insert(cols, 3, cells, axis=1)
    exists = np.insert(exists, 3, True, axis=1)
    values = np.insert(np.asarray(amat), 3, d, axis=1)
    rows = np.repeat(cells, exists.sum(axis=1))
    local = row_local_data_of(cells, cols[exists], rows, owner_of, rank, size)
    row_ptr = np.concatenate([[0], np.cumsum(exists.sum(axis=1))]).astype(np.int32)
    matrix = LocalMatrix(row_ptr, to_local(local, cols[exists]).astype(np.int32),
                         values[exists].copy(), local.n_local)
    return local, matrix, b


def poisson_parallel(nx=16, ny=16, nz=16, dx=1.0, dy=1.0, dz=1.0, partition="blocks",
                     dims=None, exchange="p2p", lang="numba", tol=1e-8, comm=MPI.COMM_WORLD,
                     algorithm="pcg", iallreduce=False, replace_every=0,
                     keep_solution=False, precond="diagonal", sweeps=None,
                     ordering_name="natural", colors=None, threads=None,
                     engine="course") -> dict:
    """Solve the Poisson problem of problems.poisson on the ranks of `comm` with the CG variant
    `algorithm` and the preconditioner `precond` (course.parallel.precond; Jacobi by default, as
    the ladder's diagonal scaling); returns the same summary on every rank (with keep_solution,
    "phi" the global solution on rank 0); threads: per rank (None: 1); engine: the course's
    distributed CG, or "petsc" for PETSc's twin (solve_distributed)."""
    from ..resources import check_memory

    t0 = time.perf_counter()

    def setup():
        tol_ = check_solve_options(lang, exchange, algorithm, tol)
        if engine != "petsc":             # (petsc.options checks PETSc's choices)
            check_precond(precond, sweeps, ordering_name, colors)
        sizes = fvm._check_box(nx, ny, nz, dx, dy, dz)
        if min(sizes[:3]) < 2:
            raise ValueError("--parallel needs at least 2 cells along every axis")
        lattice = box_mesh(sizes[0] - 1, sizes[1] - 1, sizes[2] - 1, distributed=True)
        return tol_, lattice, partition_rule(comm, lattice, partition, dims)

    tol, lattice, rule = agree(comm, setup)

    def build():
        count = check_part(rule, comm.Get_rank(), 7, "cells")
        check_memory(BYTES_PER_CELL * count, f"rank {comm.Get_rank()}'s part ({count} cells)")
        cells = rule.owned(comm.Get_rank())
        return poisson_local(nx, ny, nz, dx, dy, dz, cells, rule.owner_of, comm.Get_rank(),
                             comm.Get_size())

    local, matrix, b = agree(comm, build)
    result, out = solve_distributed(comm, local, matrix, b, lang, exchange, tol, algorithm,
                                    iallreduce, replace_every, t0, precond, sweeps, ordering_name,
                                    colors, threads, engine)
    sums = np.array([result.x.sum()])
    comm.Allreduce(MPI.IN_PLACE, [sums, MPI.DOUBLE], op=MPI.SUM)
    out = {"problem": "poisson", "unknowns": nx * ny * nz, **out, "checksum": float(sums[0]),
           "partition": partition,
           "blocks": list(rule.dims) if isinstance(rule, BlockRule) else None,
           **partition_figures(comm, local, matrix),
           "nx": nx, "ny": ny, "nz": nz, "dx": dx, "dy": dy, "dz": dz, "tol": tol}
    if keep_solution:
        out["phi"] = gather_vector(comm, local, result.x, nx * ny * nz)
    return out
