"""Explicit time stepping of the heat equation with deep halos (lecture 05_halo, seed 001).

    M dT/dt = f - K T,   T = 0 on the fixed face,   T(0) = 0,

with the lumped mass M (m_a = the integral of N_a: the load of a unit source) and forward Euler:

    T_new = T + dt M^-1 (f - K T)       on every free node.

One step needs, at every node, the values of its neighbours of the previous step: with the usual
halo a rank exchanges before every step. With a halo `depth` h wide (course.parallel.local,
depth=h) it exchanges once every h steps: after an exchange it knows T on everything up to h steps
out, so it can compute the next step on the nodes up to h - 1 steps out, the one after that up to
h - 2, ..., and after h steps its own nodes are right again. The data moved stays about the same
(h layers every h steps), the number of messages drops h times, and the price is the redundant
work on the halo layers: the exchange of seed 001's model t = alpha x + beta saves about
N (1 - 1/h) beta over N steps.
"""

from __future__ import annotations

import time

import numpy as np
from mpi4py import MPI

from ..fem.mesh import BoxMesh, check_face
from .fem3d import assemble_local
from .halo import Halo
from .local import local_data


class ExplicitHeat:
    """The local operator of one rank and its time loop."""

    def __init__(self, mesh: BoxMesh, owner, depth: int = 1, cond: float = 1.0,
                 qvol: float = 1.0, fixed_face: str = "zmax", comm=MPI.COMM_WORLD,
                 exchange: str = "p2p"):
        check_face(fixed_face)
        self.comm, self.depth = comm, depth
        self.local = loc = local_data(mesh, owner, comm.Get_rank(), depth)
        a, self.f = assemble_local(mesh, loc, cond, qvol)
        _, self.mass = assemble_local(mesh, loc, 1.0, 1.0)       # m_a = integral of N_a
        self.k = a.to_scipy()
        fixed = np.isin(loc.global_ids, mesh.face_nodes(fixed_face))
        # the rows computed s steps after an exchange: free nodes up to depth - 1 - s steps out
        self.rows = [np.flatnonzero((loc.level <= depth - 1 - s) & ~fixed) for s in range(depth)]
        self.row_blocks = [self.k[rows] for rows in self.rows]
        self.halo = Halo(loc, comm, exchange)
        self.rows_computed = 0

    def stable_dt(self, safety: float = 0.9) -> float:
        """safety * 2 / (a bound of the largest eigenvalue of M^-1 K): Gershgorin's bound, the
        largest absolute row sum of M^-1 K over every rank's internal free rows."""
        mine = self.rows[-1]                                     # internal free nodes
        sums = np.abs(self.k[mine]).sum(axis=1).A1 / self.mass[mine]
        bound = np.array([sums.max(initial=0.0)])
        self.comm.Allreduce(MPI.IN_PLACE, [bound, MPI.DOUBLE], op=MPI.MAX)
        return safety * 2.0 / bound[0]

    def run(self, steps: int, dt: float) -> np.ndarray:
        """T on the local nodes after `steps` steps from T = 0 (internal entries: the answer)."""
        t = np.zeros(self.local.n_local)
        for step in range(steps):
            since = step % self.depth                            # steps since the exchange
            if since == 0:
                self.halo.update(t)
            rows = self.rows[since]
            t[rows] += dt * (self.f[rows] - self.row_blocks[since] @ t) / self.mass[rows]
            self.rows_computed += rows.shape[0]
        return t

    def free(self):
        self.halo.free()


def heat_steps(mesh: BoxMesh, owner, depth: int, steps: int, dt: float | None = None,
               comm=MPI.COMM_WORLD, exchange: str = "p2p", **model) -> dict:
    """Run `steps` explicit steps with a halo `depth` wide on the ranks of comm; returns this
    rank's internal values ("T", "global_ids") and what it cost: exchanges, messages and bytes
    sent by this rank, rows computed (internal and redundant), seconds in total and in exchanges."""
    solver = ExplicitHeat(mesh, owner, depth, comm=comm, exchange=exchange, **model)
    dt = solver.stable_dt() if dt is None else dt
    comm.Barrier()
    start = time.perf_counter()
    t = solver.run(steps, dt)
    seconds = time.perf_counter() - start
    loc, halo = solver.local, solver.halo
    solver.free()
    internal_free = solver.rows[-1].shape[0]
    return {"depth": depth, "steps": steps, "dt": dt, "T": t[:loc.n_internal].copy(),
            "global_ids": loc.global_ids[:loc.n_internal].copy(),
            "exchanges": halo.exchanges, "messages": halo.exchanges * loc.n_neighbours,
            "bytes": halo.exchanges * halo.bytes_sent, "rows_computed": solver.rows_computed,
            "rows_redundant": solver.rows_computed - steps * internal_free,
            "seconds": seconds, "seconds_exchange": halo.seconds}
