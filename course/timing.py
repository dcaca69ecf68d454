"""Measuring, for the benchmarks and the problems alike: best-of-N wall-clock timing, the machine
a result was measured on (versions, cores, the batch job), STREAM copy and triad (once per build,
shared by every page), the SpMV in each storage format and the memory traffic it must move.

Below the problems and the benchmark suites, above the formats and kernels it times: it imports no
problem and no suite."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Callable

import numpy as np

from . import native, resources, sparse, toolchain
from .fem import fvm


SPMV_FORMATS = ("crs", "ell", "sell")   # the storage formats of the SpMV timings (03_openmp)
SELL_CHUNK, SELL_SIGMA = 8, 64          # SELL-C-sigma of the benchmark: C = 8, sigma = 64


def machine() -> dict:
    """toolchain.report() without its list of problems: what a benchmark result records."""
    return {k: v for k, v in toolchain.report().items() if k != "problems"}


def best_of(fn: Callable[[], object], repeat: int = 5) -> float:
    """The shortest of `repeat` wall-clock timings of fn() (the least disturbed run)."""
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def stream(n: int = 2**24, repeat: int = 5, lang: str = "c") -> dict:
    """STREAM copy (a = b) and triad (a = b + s c) bandwidth in GB/s, best of `repeat`, with the
    compiled kernels of `lang` on all OpenMP threads. The arrays (8 n bytes each, 128 MiB for the
    default n) are first touched in parallel by stream_init. Bytes counted as STREAM does: 16 per
    element for copy, 24 for triad (write-allocate traffic not counted)."""
    a, b, c = np.empty(n), np.empty(n), np.empty(n)
    native.stream_init(lang, a, b, c)
    copy = best_of(lambda: native.stream_copy(lang, b, a), repeat)
    triad = best_of(lambda: native.stream_triad(lang, 3.0, b, c, a), repeat)
    return {"n": n, "lang": lang, "threads": resources.threads_for(lang),
            "copy_gbs": 16 * n / copy / 1e9, "triad_gbs": 24 * n / triad / 1e9}


# STREAM once per build: every lecture page compares with the same measurement, not with one of
# its own (separate short measurements on a shared machine differ by tens of percent).
STREAM_CACHE = Path(os.environ.get("COURSE_STREAM_CACHE",
                                   native.ROOT / "build" / "stream-reference.json"))
STREAM_MAX_AGE = 6 * 3600          # seconds: an older measurement is taken again
STREAM_REFERENCE_N = 2**24         # 3 arrays of 128 MiB: beyond the caches of laptops and nodes
# A quiet machine: the best triad run at most 25 % above the slowest. A measurement with more
# spread (other programs were running: a test suite, a second build) is returned, never stored.
STREAM_QUIET_SPREAD = 1.25


def _stream_machine() -> str:
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return f"{os.uname().nodename} {os.cpu_count()} cpus, {cpus} usable"


def stream_reference(threads: int, n: int = STREAM_REFERENCE_N, repeat: int = 10,
                     lang: str = "c", max_age: float = STREAM_MAX_AGE,
                     path: str | Path | None = None) -> dict:
    """The STREAM copy and triad of `threads` OpenMP threads, measured once per build and reused.

    The first call on a machine measures `repeat` runs of each kernel and stores them in
    STREAM_CACHE (build/stream-reference.json, or $COURSE_STREAM_CACHE); later calls, from any
    page of the same book build, return the stored result while it is younger than `max_age`
    seconds. Keys as stream() (copy_gbs and triad_gbs are the best run), plus triad_runs_gbs
    (every run), spread (best over slowest triad run), quiet (spread at most
    STREAM_QUIET_SPREAD), measured_at (Unix time) and cached (True when reused). Only a quiet
    measurement is stored: one taken beside other work is used by its page alone, and the next
    page measures again. Leaves the kernels of `lang` at `threads` threads."""
    threads = native.check_int(threads, "threads", minimum=1)
    path = Path(path or STREAM_CACHE)
    key = f"{lang}, {threads} threads, n = {n}, best of {repeat}"
    resources.set_threads(lang, threads)

    def load() -> dict:
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) and data.get("machine") == _stream_machine() else {}

    entry = load().get(key)
    if entry and time.time() - entry.get("measured_at", 0) < max_age:
        return {**entry, "cached": True}
    a, b, c = np.empty(n), np.empty(n), np.empty(n)
    native.stream_init(lang, a, b, c)
    copy, triad = [], []
    for _ in range(repeat):                     # interleaved: a disturbance hits both alike
        copy.append(16 * n / best_of(lambda: native.stream_copy(lang, b, a), 1) / 1e9)
        triad.append(24 * n / best_of(lambda: native.stream_triad(lang, 3.0, b, c, a), 1) / 1e9)
    spread = max(triad) / min(triad)
    entry = {"n": n, "lang": lang, "threads": threads, "repeat": repeat,
             "copy_gbs": max(copy), "triad_gbs": max(triad), "triad_runs_gbs": triad,
             "spread": spread, "quiet": spread <= STREAM_QUIET_SPREAD, "measured_at": time.time()}
    if not entry["quiet"]:
        return {**entry, "cached": False}
    data = load()                               # another page may have written meanwhile
    data.update(machine=_stream_machine(), **{key: entry})
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(data, indent=1))
        os.replace(tmp, path)
    except OSError:                             # a read-only checkout: measured, not kept
        pass
    return {**entry, "cached": False}


def spmv_bytes(n: int, nnz: int) -> int:
    """The least memory traffic of one CRS matrix-vector product y = A x: every value (8 bytes)
    and column index (4) once, row_ptr (4 (n + 1)), x read once (8 n, if the cache keeps the
    entries that neighbouring rows share) and y written once (8 n)."""
    return 12 * nnz + 4 * (n + 1) + 16 * n


def spmv_kernel(a, x: np.ndarray, lang: str) -> Callable[[], object]:
    """y = A x as a function of no arguments. For C and Fortran the kernel alone: the arguments
    are checked, and shifted to 1-based for Fortran, once beforehand, not in every timed call."""
    if lang in native.COMPILED_LANGS:
        return native.crs_matvec_prepared(lang, a.row_ptr, a.col_idx, a.val, x, np.empty(a.n))
    return lambda: sparse.matvec(a, x, lang)


def spmv_timing(problem, fmt: str, lang: str, repeat: int = 5) -> dict:
    """Best of `repeat` of one y = D x + A_off x of the course.fvm Poisson `problem`, its
    off-diagonal part in `fmt` (crs, ell, sell), the arguments checked once beforehand (the
    compiled kernel alone, or the Numba function called directly): GFLOP/s (2 per nonzero,
    diagonal included) and GB/s (fvm.spmv_bytes, padding included)."""
    n, d = problem.n, problem.d
    x = np.random.default_rng(n).standard_normal(n)
    y = np.empty(n)
    n_slices = 0
    if fmt == "crs":
        a = problem.off_crs()
        if lang == "numba":
            run = lambda: sparse.offdiag_matvec_numba(d, a.row_ptr, a.col_idx, a.val, x)  # noqa
        else:
            run = native.offdiag_crs_matvec_prepared(lang, d, a.row_ptr, a.col_idx, a.val, x, y)
    elif fmt == "ell":
        a = problem.off_ell()
        if lang == "numba":
            run = lambda: sparse.ell_matvec_numba(d, a.width, a.item, a.val, x)  # noqa: E731
        else:
            run = native.ell_matvec_prepared(lang, d, a.item, a.val, x, y)
    else:
        a = sparse.SELL.from_crs(problem.off_crs(), SELL_CHUNK, SELL_SIGMA)
        n_slices = a.n_slices
        if lang == "numba":
            run = lambda: sparse.sell_matvec_numba(d, a.chunk, a.perm, a.slice_ptr,  # noqa
                                                   a.col, a.val, x)
        else:
            run = native.sell_matvec_prepared(lang, a.chunk, d, a.perm, a.slice_ptr, a.col,
                                              a.val, x, y)
    run()                                                  # warm-up (JIT, pages)
    seconds = best_of(run, repeat)
    return {"spmv_seconds": seconds, "gflops": 2 * problem.nnz / seconds / 1e9,
            "bandwidth_gbs": fvm.spmv_bytes(fmt, n, a.nnz, n_slices) / seconds / 1e9,
            "stored_entries": int(a.nnz)}


def last_level_cache_bytes(cpu_caches: str | Path = "/sys/devices/system/cpu/cpu0/cache"
                            ) -> int | None:
    """The largest cache Linux reports for CPU 0 in bytes (the last level, shared by the cores of
    a socket), or None where the system tells none: what a working set must exceed, well beyond,
    before a bandwidth measurement sees the memory rather than the cache."""
    sizes = []
    for entry in Path(cpu_caches).glob("index*"):
        try:
            text = (entry / "size").read_text().strip()
            factor = {"K": 2**10, "M": 2**20, "G": 2**30}.get(text[-1], 1)
            sizes.append(int(text.rstrip("KMG")) * factor)
        except (OSError, ValueError, IndexError):
            continue
    return max(sizes, default=None)


def topology() -> dict:
    """What the thread sweep ran on: cores, sockets, NUMA nodes, CPU model and L3 (lscpu), and the
    OpenMP placement variables."""
    info = {"cores": toolchain.usable_cores(), "sockets": toolchain.sockets(),
            "numa_nodes": toolchain.numa_nodes(), "model": None, "l3_cache": None,
            "OMP_PLACES": os.environ.get("OMP_PLACES"),
            "OMP_PROC_BIND": os.environ.get("OMP_PROC_BIND")}
    try:
        text = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.TimeoutExpired):
        return info
    for line in text.splitlines():
        key, _, value = (part.strip() for part in line.partition(":"))
        if key == "Model name":
            info["model"] = value
        elif key == "L3 cache":
            info["l3_cache"] = value
    return info
