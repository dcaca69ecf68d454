"""The rank side of lecture 07_cluster's pencil FFT, under `mpiexec -n P python -m
course.parallel.fft_rank ...`; rank 0 prints one JSON object.

    check N [P1 P2]                  the pencil FFT of course.parallel.fft.field against
                                     numpy.fft.fftn of the whole field (gathered on rank 0) and
                                     against the exact spectrum of its modes
    bench --message-bytes B ... --sizes N ... --repeat R
                                     MPI_Alltoall on all ranks for every message size B (bytes
                                     per message), and the pencil FFT of every N that the
                                     squarest grid divides, split into its phases

A bad N (not divisible by P1 or P2, not a number) raises the same ValueError on every rank
before any communication: rank 0 prints it as one line, every rank exits with status 2.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")        # flat MPI: one thread per rank

import numpy as np  # noqa: E402
from mpi4py import MPI  # noqa: E402

from . import fft  # noqa: E402

COMM = MPI.COMM_WORLD
PROG = "fft_rank"


def alltoall_seconds(n_bytes: int, repeat: int, comm=COMM) -> float:
    """Seconds per MPI_Alltoall with n_bytes per message (every rank sends one message to every
    rank, itself included): best of `repeat` rounds of several calls, each round timed by its
    slowest rank."""
    size = comm.Get_size()
    count = max(n_bytes // 8, 1)
    send, recv = np.ones(size * count), np.empty(size * count)
    calls = max(2, min(100, 2**22 // (size * count * 8)))
    comm.Alltoall([send, MPI.DOUBLE], [recv, MPI.DOUBLE])        # set-up outside the timing
    best = np.inf
    for _ in range(repeat):
        comm.Barrier()
        start = time.perf_counter()
        for _ in range(calls):
            comm.Alltoall([send, MPI.DOUBLE], [recv, MPI.DOUBLE])
        elapsed = np.array([time.perf_counter() - start])
        comm.Allreduce(MPI.IN_PLACE, [elapsed, MPI.DOUBLE], op=MPI.MAX)
        best = min(best, elapsed[0] / calls)
    return float(best)


def measure(message_bytes, sizes, repeat: int) -> dict:
    """Alltoall times and throughputs np m / t (seed 003's definition), and the pencil FFT's
    phases for every n the squarest grid divides (the others are listed as skipped)."""
    size = COMM.Get_size()
    seconds = [alltoall_seconds(b, repeat) for b in message_bytes]
    p1, p2 = fft.process_grid(size)
    ffts, skipped = [], []
    for n in sizes:
        if n % p1 or n % p2:
            skipped.append(n)
            continue
        ffts.append(fft.time_forward(COMM, n, repeat))
    return {"ranks": size, "p1": p1, "p2": p2,
            "alltoall": {"bytes": list(message_bytes), "seconds": seconds,
                         "throughput_gbs": [size * b / t / 1e9 for b, t in zip(message_bytes,
                                                                               seconds)]},
            "fft": ffts, "fft_skipped": skipped}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m course.parallel.fft_rank")
    sub = p.add_subparsers(dest="what", required=True)
    c = sub.add_parser("check")
    c.add_argument("n")
    c.add_argument("grid", nargs="*")
    b = sub.add_parser("bench")
    b.add_argument("--message-bytes", type=int, nargs="+", required=True)
    b.add_argument("--sizes", type=int, nargs="*", default=[])
    b.add_argument("--repeat", type=int, default=5)
    args = p.parse_args(argv)
    try:
        if args.what == "check":
            numbers = [args.n, *args.grid]
            if len(args.grid) not in (0, 2) or not all(w.lstrip("+").isdigit() for w in numbers):
                raise ValueError(f"expected N [P1 P2] as positive integers, got "
                                 f"{' '.join(numbers)!r}")
            n, *grid = (int(w) for w in numbers)
            result = fft.run_check(COMM, n, *grid)
        else:
            result = measure(args.message_bytes, args.sizes, args.repeat)
    except ValueError as err:          # raised alike on every rank, before any communication
        if COMM.Get_rank() == 0:
            sys.stderr.write(f"{PROG}: {err}\n")
        return 2
    if COMM.Get_rank() == 0:
        sys.stdout.write(json.dumps(result) + "\n")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
