"""The measurements of `python -m course bench halo` and `bench pipecg` on one communicator, run
by the benchmark under `mpiexec -n P python -m course.bench.rank [--suite pipecg] ARGS`;
rank 0 prints one JSON object.

Everything is timed on all ranks at once, after a barrier, as the best of `repeat` rounds; a
round's time is the slowest rank's (what the next collective operation would wait for).
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

from .. import native, timing  # noqa: E402
from ..fem.mesh import box_mesh  # noqa: E402
from ..solvers import ALGORITHMS  # noqa: E402
from ..parallel.explicit import heat_steps  # noqa: E402
from ..parallel.fem3d import model_system  # noqa: E402
from ..parallel.solve import Distributed  # noqa: E402
from ..parallel.halo import (STYLES, CompiledExchange, Halo, load_halo_exchange,
                             message_sizes)  # noqa: E402
from ..parallel.local import local_data  # noqa: E402
from ..parallel.partition import make_partition, quality  # noqa: E402

COMM = MPI.COMM_WORLD
PINGPONG_BYTES = [8 * 4**k for k in range(11)]        # 8 B .. 8 MiB


def timed(fn, repeat: int, calls: int = 1) -> float:
    """Seconds per call of fn: best over `repeat` rounds of `calls` calls, each round timed by
    its slowest rank."""
    best = np.inf
    for _ in range(repeat):
        COMM.Barrier()
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        elapsed = np.array([time.perf_counter() - start])
        COMM.Allreduce(MPI.IN_PLACE, [elapsed, MPI.DOUBLE], op=MPI.MAX)
        best = min(best, elapsed[0] / calls)
    return float(best)


# [pingpong]
def pingpong(n_bytes: int, repeat: int) -> float | None:
    """One-way time of a message of n_bytes between ranks 0 and 1 (half a round trip)."""
    if COMM.Get_size() < 2:
        return None
    buf = np.zeros(max(n_bytes // 8, 1))
    rank = COMM.Get_rank()
    calls = max(2, min(200, 2**22 // n_bytes))

    def round_trip():
        if rank == 0:
            COMM.Send([buf, MPI.DOUBLE], dest=1)
            COMM.Recv([buf, MPI.DOUBLE], source=1)
        elif rank == 1:
            COMM.Recv([buf, MPI.DOUBLE], source=0)
            COMM.Send([buf, MPI.DOUBLE], dest=0)
    round_trip()                                    # the first message sets up the connection
    return timed(round_trip, repeat, calls) / 2
# [pingpong]


def fit_latency_bandwidth(sizes, times) -> dict:
    """Hockney's t = alpha + beta x (x in bytes) through the ping-pong: alpha, the latency, from
    the small messages (the fastest up to 512 bytes); beta, seconds per byte, from the largest."""
    sizes, times = np.asarray(sizes, float), np.asarray(times)
    latency = times[sizes <= 512].min()
    per_byte = max((times[-1] - latency) / sizes[-1], 0.0)
    return {"latency_s": float(latency), "s_per_byte": float(per_byte),
            "bandwidth_gbs": float(1e-9 / per_byte) if per_byte > 0 else None}


def allreduce_latency(repeat: int) -> dict:
    """Seconds per MPI_Allreduce (sum) of 1 double, of 3 doubles, and of three 1-double calls."""
    one, three = np.ones(1), np.ones(3)

    def single():
        COMM.Allreduce(MPI.IN_PLACE, [one, MPI.DOUBLE], op=MPI.SUM)

    def triple():
        COMM.Allreduce(MPI.IN_PLACE, [three, MPI.DOUBLE], op=MPI.SUM)

    def three_singles():
        for _ in range(3):
            single()
    return {"one_double_s": timed(single, repeat, 200), "three_doubles_s": timed(triple, repeat,
                                                                                  200),
            "three_single_calls_s": timed(three_singles, repeat, 200)}


def halo_times(local, repeat: int) -> dict:
    """Seconds per halo exchange of every style, and of the C halo_exchange of the programs
    (src_c/05_halo/halo.c, the same messages as p2p without Python around them) when its library
    is built; bytes each rank sends."""
    out = {}
    x = np.zeros(local.n_local)
    for style in STYLES:
        halo = Halo(local, COMM, style)
        out[style] = {"seconds": timed(lambda: halo.update(x), repeat, 50),
                      "bytes_max": COMM.allreduce(halo.bytes_sent, op=MPI.MAX)}
        halo.free()
    library = native.build_dir("release") / "lib" / "libcourse_halo_c.so"
    if library.exists():
        c_exchange = CompiledExchange(load_halo_exchange(str(library)), False, local, COMM)
        out["c"] = {"seconds": timed(lambda: c_exchange.update(x), repeat, 50),
                    "bytes_max": out["p2p"]["bytes_max"]}
    return out


def size_exchange(local, repeat: int) -> dict:
    """How each rank learns the sizes it will receive: the P x P table (Allgather) or nothing."""
    out = {}
    for how in ("table", "neighbours"):
        _, metadata = message_sizes(local, COMM, how)
        out[how] = {"metadata_bytes_per_rank": metadata,
                    "seconds": timed(lambda: message_sizes(local, COMM, how), repeat, 20)}
    return out


def cg_split(mesh, local, iterations: int, repeat: int, algorithm: str = "pcg",
             nonblocking: bool = False, progress_chunks: int = 1) -> dict:
    """Distributed CG (the variant `algorithm`) seconds per iteration and their split, averaged
    over the ranks: halo exchanges, reductions (the time blocked in them, waits included), the
    local SpMV and the rest (vector updates, preconditioner, dot products); the time between
    MPI_Iallreduce and MPI_Wait (overlapped); the least memory traffic of one PCG iteration on
    the largest rank. progress_chunks > 1: the SpMV in that many chunks with MPI_Test between."""
    matrix, b, _ = model_system(mesh, local, lang="numba")

    def seconds(system, max_iter):
        """Total, halo, reductions, local SpMV, overlapped seconds of one solve (rank mean) and
        the calls of halo exchanges, reductions and local products."""
        system.halo.seconds = system.reductions.seconds = system.product_seconds = 0.0
        system.reductions.overlapped_seconds = 0.0
        system.halo.exchanges = system.reductions.count = system.product_calls = 0
        COMM.Barrier()
        start = time.perf_counter()
        result = system.solve(b, tol=1e-300, max_iter=max_iter, algorithm=algorithm)
        reductions = system.reductions
        parts = np.array([time.perf_counter() - start, system.halo.seconds, reductions.seconds,
                          system.product_seconds, reductions.overlapped_seconds])
        COMM.Allreduce(MPI.IN_PLACE, [parts, MPI.DOUBLE], op=MPI.SUM)
        calls = np.array([system.halo.exchanges, reductions.count, system.product_calls])
        return parts / COMM.Get_size(), calls, result

    best = None
    for _ in range(repeat):
        halo = Halo(local, COMM, "p2p")
        system = Distributed(matrix, halo, COMM, nonblocking=nonblocking,
                             progress_chunks=progress_chunks)
        seconds(system, 2)                                       # compile and warm up
        # the calls of the set-up (initial residual, final true residual): a solve with no
        # iteration
        _, set_up_calls, _ = seconds(system, 0)
        parts, calls, result = seconds(system, iterations)
        halo.free()
        if best is None or parts[0] < best[0]:
            best, best_calls = parts, calls
    # per iteration, all from the fastest solve: each part (halo, reductions, SpMV) its share
    # that the calls made in the iterations had, the total less the set-up's calls of those parts
    # (the set-up's few vector operations, less than one iteration's, stay in). The difference of
    # two solves can be zero or negative where a part takes microseconds (a small mesh,
    # oversubscribed ranks: a time slice lost in one solve is more than the part itself).
    in_iterations = np.divide(best_calls - set_up_calls, best_calls,
                              out=np.zeros(3), where=best_calls > 0)
    per = np.empty(5)
    per[1:4] = best[1:4] * in_iterations / iterations
    per[0] = (best[0] - np.sum(best[1:4] * (1.0 - in_iterations))) / iterations
    per[4] = best[4] / iterations              # the set-up waits for its sums at once: no overlap
    n_rows = COMM.allreduce(matrix.n_rows, op=MPI.MAX)
    nnz = COMM.allreduce(matrix.nnz, op=MPI.MAX)
    # SpMV (values, indices, x read; y written) + 3 dot products (2 vectors read) + 3 updates
    # (2 vectors read, 1 written) + z = D r (2 read, 1 written)
    spmv_read, spmv_written = timing.spmv_traffic(n_rows, nnz)
    read = spmv_read + 8 * n_rows * (3 * 2 + 3 * 2 + 2)
    written = spmv_written + 8 * n_rows * (3 + 1)
    return {"algorithm": algorithm, "iallreduce": nonblocking, "progress_chunks": progress_chunks,
            "seconds_per_iteration": float(per[0]), "halo_s": float(per[1]),
            "allreduce_s": float(per[2]), "spmv_s": float(per[3]),
            "compute_s": float(per[0] - per[1] - per[2]),
            "rest_s": float(per[0] - per[1] - per[2] - per[3]), "overlapped_s": float(per[4]),
            "reductions_per_iteration": max(result.reductions_per_iteration, default=0),
            "halo_exchanges_per_iteration": float(best_calls[0] - set_up_calls[0]) / iterations,
            "rows_max_rank": int(n_rows), "nnz_max_rank": int(nnz),
            "bytes_per_iteration_max_rank": int(read + written),
            "read_bytes_per_iteration_max_rank": int(read),
            "written_bytes_per_iteration_max_rank": int(written)}


def stream_together(repeat: int, n: int = 2**23) -> dict:
    """STREAM triad and the read-only sum of all ranks at once (one thread each), interleaved:
    the sums of their GB/s (triad_gbs: 24 bytes per element, as STREAM counts; read_gbs: 8), the
    memory bandwidth P processes get together, the reference of timing.least_seconds. Each rank's
    arrays (3 x 64 MiB for the default n) are beyond 4 x a 32 MiB last-level cache even alone."""
    a, b, c = np.empty(n), np.empty(n), np.empty(n)
    native.stream_init("c", a, b, c)
    triad = read = np.inf
    for _ in range(repeat):
        triad = min(triad, timed(lambda: native.stream_triad("c", 3.0, b, c, a), 1))
        read = min(read, timed(lambda: native.stream_sum("c", b), 1))
    size = COMM.Get_size()
    return {"triad_gbs": 24 * n * size / triad / 1e9, "read_gbs": 8 * n * size / read / 1e9}


def deep_halos(mesh, owner, steps: int, repeat: int, depths=(1, 2, 3)) -> list[dict]:
    """Explicit heat steps with halos 1, 2, 3 wide: time, exchanges, messages, bytes and
    redundant rows (summed over ranks), the best of `repeat` runs."""
    out = []
    for depth in depths:
        best = None
        for _ in range(repeat):
            run = heat_steps(mesh, owner, depth, steps)
            figures = np.array([run["seconds"], run["seconds_exchange"]])
            COMM.Allreduce(MPI.IN_PLACE, [figures, MPI.DOUBLE], op=MPI.MAX)
            if best is None or figures[0] < best[0]:
                best = figures
        out.append({"depth": depth, "steps": steps, "seconds": float(best[0]),
                    "seconds_exchange": float(best[1]), "exchanges": run["exchanges"],
                    "messages": COMM.allreduce(run["messages"]),
                    "bytes": COMM.allreduce(run["bytes"]),
                    "rows_redundant": COMM.allreduce(run["rows_redundant"]),
                    "rows_computed": COMM.allreduce(run["rows_computed"])})
    return out


def partitioned(n: int, partition: str):
    """(mesh, owner, this rank's local data) of the n^3 box (the partition made on rank 0)."""
    mesh = box_mesh(n, n, n)
    size = COMM.Get_size()
    owner = COMM.bcast(make_partition(mesh, partition, size) if COMM.Get_rank() == 0 else None)
    return mesh, owner, local_data(mesh, owner, COMM.Get_rank())


def measure(n: int, cg_n: int, partition: str, repeat: int, iterations: int, steps: int) -> dict:
    size = COMM.Get_size()
    mesh, owner, local = partitioned(n, partition)
    cg_mesh, _, cg_local = partitioned(cg_n, partition) if cg_n != n else (mesh, owner, local)
    times = [pingpong(b, repeat) for b in PINGPONG_BYTES]
    out = {"ranks": size, "n": n, "cg_n": cg_n, "partition": partition,
           "quality": quality(mesh, owner).as_dict(),
           "pingpong": {"bytes": PINGPONG_BYTES, "seconds": times},
           "model": fit_latency_bandwidth(PINGPONG_BYTES, times) if size > 1 else None,
           "allreduce": allreduce_latency(repeat),
           "halo": halo_times(local, repeat), "sizes": size_exchange(local, repeat),
           "cg": cg_split(cg_mesh, cg_local, iterations, repeat),
           "stream": stream_together(repeat),
           "deep_halo": deep_halos(mesh, owner, steps, repeat)}
    # the exchange against the ping-pong of the same message sizes, one after the other (the
    # busiest rank's messages)
    out["stream_triad_gbs"] = out["stream"]["triad_gbs"]
    if out["model"]:
        counts = np.diff(local.export_ptr) * 8
        sequential = sum(np.interp(c, PINGPONG_BYTES, times) for c in counts)
        out["halo_pingpong_model_s"] = COMM.allreduce(float(sequential), op=MPI.MAX)
    return out


PROGRESS_CHUNKS = 8


def measure_pipecg(cg_n: int, partition: str, repeat: int, iterations: int) -> dict:
    """The four CG variants, blocking and with MPI_Iallreduce, on the cg_n^3 mesh, and pipelined
    with MPI_Test calls in its SpMV; Allreduce latencies (1 double, 3 doubles, three calls of 1);
    the ping-pong and its fit t = alpha + beta x (the constants of course.parallel.model)."""
    mesh, _, local = partitioned(cg_n, partition)
    variants = [cg_split(mesh, local, iterations, repeat, algorithm, nonblocking)
                for algorithm in ALGORITHMS for nonblocking in (False, True)]
    # progress: the same pipelined CG with MPI_Test calls inside its SpMV
    variants.append(cg_split(mesh, local, iterations, repeat, "pipelined", True,
                             PROGRESS_CHUNKS))
    times = [pingpong(b, repeat) for b in PINGPONG_BYTES]
    return {"ranks": COMM.Get_size(), "cg_n": cg_n, "partition": partition,
            "allreduce": allreduce_latency(repeat), "variants": variants,
            "pingpong": {"bytes": PINGPONG_BYTES, "seconds": times},
            "model": fit_latency_bandwidth(PINGPONG_BYTES, times) if COMM.Get_size() > 1 else None}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m course.bench.rank")
    p.add_argument("--suite", choices=("halo", "pipecg"), default="halo")
    p.add_argument("--n", type=int, default=24)
    p.add_argument("--cg-n", type=int, default=72)
    p.add_argument("--partition", default="metis")
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--iterations", type=int, default=30)
    p.add_argument("--steps", type=int, default=12)
    args = p.parse_args(argv)
    if args.suite == "pipecg":
        result = measure_pipecg(args.cg_n, args.partition, args.repeat, args.iterations)
    else:
        result = measure(args.n, args.cg_n, args.partition, args.repeat, args.iterations,
                         args.steps)
    if COMM.Get_rank() == 0:
        sys.stdout.write(json.dumps(result) + "\n")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
