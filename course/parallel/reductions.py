"""Global sums over MPI for the CG variants of course.solvers.krylov (lecture 06_pipecg).

`MPIReductions(comm, nonblocking)` has the interface of course.solvers.Reductions: start(a, b, ...)
begins the sum of every rank's local partial sums a, b, ... (one message of that many doubles) and
returns a pending reduction whose wait() gives the global sums.

    blocking     MPI_Allreduce inside start(): the caller waits there, nothing can overlap
    nonblocking  MPI_Iallreduce inside start(), MPI_Wait inside wait(): the work done between
                 the two can hide the reduction, if the MPI library progresses it meanwhile

Times: `seconds` is the time spent blocked in reductions (in MPI_Allreduce, or in MPI_Iallreduce
plus MPI_Wait), `overlapped_seconds` the time between MPI_Iallreduce and MPI_Wait (work that the
reduction could hide behind). `count` counts the reductions started.

Progress: MPI moves a non-blocking reduction forward only while the process is inside an MPI call
(unless the library has a progress thread). progress() makes such a call (MPI_Test on every
reduction in flight); course.parallel.solve.Distributed calls it between chunks of its SpMV when
asked to, so the reduction can advance while the product runs.
"""

from __future__ import annotations

import time

import numpy as np
from mpi4py import MPI


class _Pending:
    def __init__(self, owner: MPIReductions, sums: np.ndarray, request):
        self.owner, self.sums, self.request = owner, sums, request
        self.started = time.perf_counter()

    def wait(self) -> np.ndarray:
        if self.request is not None:
            start = time.perf_counter()
            self.owner.overlapped_seconds += start - self.started
            self.request.Wait()
            self.owner.seconds += time.perf_counter() - start
            self.owner.in_flight.remove(self)
            self.request = None
        return self.sums


class MPIReductions:
    def __init__(self, comm=MPI.COMM_WORLD, nonblocking: bool = False):
        self.comm, self.nonblocking = comm, nonblocking
        self.count = 0
        self.seconds = 0.0
        self.overlapped_seconds = 0.0
        self.in_flight: list[_Pending] = []
        self.tests = 0

    def progress(self) -> None:
        """One MPI_Test on each reduction in flight: lets the library move them forward."""
        for pending in self.in_flight:
            pending.request.Test()
            self.tests += 1

    def start(self, *local_sums: float) -> _Pending:
        sums = np.array(local_sums, dtype=float)     # its own buffer: alive until wait()
        self.count += 1
        start = time.perf_counter()
        if self.nonblocking:
            request = self.comm.Iallreduce(MPI.IN_PLACE, [sums, MPI.DOUBLE], op=MPI.SUM)
        else:
            self.comm.Allreduce(MPI.IN_PLACE, [sums, MPI.DOUBLE], op=MPI.SUM)
            request = None
        self.seconds += time.perf_counter() - start
        pending = _Pending(self, sums, request)
        if request is not None:
            self.in_flight.append(pending)
        return pending
