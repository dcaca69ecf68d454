"""Measuring, for the benchmarks and the problems alike: best-of-N wall-clock timing, the machine
a result was measured on (versions, cores, the batch job), STREAM copy, triad and a read-only sum
(once per build, shared by every page), the SpMV in each storage format, the memory traffic it must
move, and the least time that traffic allows (the memory-bandwidth bound, the course's roofline).

How the bound is measured, and why. STREAM counts 24 bytes per triad element a = b + s c (two
loads, one store) and divides by the time. But a cache that allocates on write first reads the
line of `a` that the store will overwrite, and later writes it back: 32 bytes cross the memory bus
per element, of which 8 are a write. A read-dominated kernel (the SpMV loads about 12 bytes per
nonzero and stores 8 per row) therefore streams faster than the triad's 24-byte figure, and its
least traffic divided by the triad bandwidth can exceed 100 % out of cache -- the ELL SpMV of
lecture 03 did. So the course measures two kernels beside each other, interleaved:

- the read-only sum s = a_0 + ... + a_(n-1) (stream_sum, 8 bytes loaded per element, read as
  four streams, its quarters, as the SpMV reads several arrays: one stream alone leaves a core's
  prefetchers idle and measured less than the triad on the course's test machine): the load
  rate B_read = read_gbs;
- the triad, whose time t_triad = 24 n / triad_gbs is its 16 n loaded bytes and the 8 n bytes of
  write-allocate at B_read, plus the 8 n write-back bytes at a write rate B_write:
  t_triad = 24 n / B_read + 8 n / B_write, which is solved for B_write.

least_seconds(read_bytes, written_bytes, reference) then charges every byte a kernel's loads name
1/B_read and every byte its stores name 1/B_read + 1/B_write (the line read first, then written
back). The bound fits the kernel's mix: a read-only kernel is bounded by the sum, the triad by its
own time (fraction exactly 1), the SpMV by something in between. A fraction of this bound above
100 % is a mistake -- the data came from a cache (the problem is too small), or the traffic is
miscounted -- and format_fraction marks it. When the fit fails (the sum no faster than the triad,
or a write rate absurdly far from the read rate: a disturbed or in-cache measurement), stored
bytes are charged at the triad rate and loaded bytes at the faster of the sum and the triad, which
is never tighter than STREAM's own bound.

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


def spread(values) -> dict:
    """The median, min and max of repeated measurements (and the values, in the order taken): what
    a benchmark reports of its repeats, so that a verdict can be worded beyond the spread."""
    values = [float(v) for v in values]
    if not values:
        raise ValueError("no measurements to summarise")
    return {"median": float(np.median(values)), "min": min(values), "max": max(values),
            "runs": values}


def _stream_runs(n: int, repeat: int, lang: str) -> dict:
    """`repeat` runs each of STREAM copy, triad and the read-only sum, interleaved (a disturbance
    hits all three alike), as lists of GB/s."""
    a, b, c = np.empty(n), np.empty(n), np.empty(n)
    native.stream_init(lang, a, b, c)
    copy, triad, read = [], [], []
    for _ in range(repeat):
        copy.append(16 * n / best_of(lambda: native.stream_copy(lang, b, a), 1) / 1e9)
        triad.append(24 * n / best_of(lambda: native.stream_triad(lang, 3.0, b, c, a), 1) / 1e9)
        read.append(8 * n / best_of(lambda: native.stream_sum(lang, b), 1) / 1e9)
    return {"copy": copy, "triad": triad, "read": read}


def stream(n: int = 2**24, repeat: int = 5, lang: str = "c") -> dict:
    """STREAM copy (a = b) and triad (a = b + s c) and the read-only sum (s = sum of a) in GB/s,
    best of `repeat` interleaved runs, with the compiled kernels of `lang` on all OpenMP threads.
    The arrays (8 n bytes each, 128 MiB for the default n) are first touched in parallel by
    stream_init. Bytes counted as STREAM does: 16 per element for copy, 24 for triad
    (write-allocate traffic not counted: least_seconds adds it), 8 for the sum (read_gbs)."""
    runs = _stream_runs(n, repeat, lang)
    return {"n": n, "lang": lang, "threads": resources.threads_for(lang),
            "copy_gbs": max(runs["copy"]), "triad_gbs": max(runs["triad"]),
            "read_gbs": max(runs["read"])}


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


def _beaten(entry: dict, n: int, lang: str, repeat: int = 3) -> bool:
    """Whether a short check (the best of `repeat` triads) beats the stored triad by more than
    STREAM_QUIET_SPREAD: then the stored reference was taken while other work ran throughout (its
    runs agreed, all of them slow), and a bound from it would be too low for every page."""
    a, b, c = np.empty(n), np.empty(n), np.empty(n)
    native.stream_init(lang, a, b, c)
    seconds = best_of(lambda: native.stream_triad(lang, 3.0, b, c, a), repeat)
    return 24 * n / seconds / 1e9 > STREAM_QUIET_SPREAD * entry["triad_gbs"]


def stream_reference(threads: int, n: int = STREAM_REFERENCE_N, repeat: int = 10,
                     lang: str = "c", max_age: float = STREAM_MAX_AGE,
                     path: str | Path | None = None) -> dict:
    """The STREAM copy, triad and read-only sum of `threads` OpenMP threads, measured once per
    build and reused: the reference of least_seconds and fraction_of_bound.

    The first call on a machine measures `repeat` runs of each kernel and stores them in
    STREAM_CACHE (build/stream-reference.json, or $COURSE_STREAM_CACHE); later calls, from any
    page of the same book build, return the stored result while it is younger than `max_age`
    seconds. Keys as stream() (copy_gbs, triad_gbs and read_gbs are the best run), plus
    triad_runs_gbs and read_runs_gbs (every run), spread (best over slowest triad run), quiet
    (spread at most STREAM_QUIET_SPREAD), measured_at (Unix time) and cached (True when reused).
    Only a quiet measurement is stored: one taken beside other work is used by its page alone,
    and the next page measures again. A stored entry is measured again when it lacks read_gbs
    (from before the sum was measured), or when a short check of the triad beats it by more than
    the quiet spread (it was taken while other work ran throughout). Leaves the kernels of `lang`
    at `threads` threads."""
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
    if (isinstance(entry, dict) and "read_gbs" in entry
            and time.time() - entry.get("measured_at", 0) < max_age
            and not _beaten(entry, n, lang)):
        return {**entry, "cached": True}
    runs = _stream_runs(n, repeat, lang)
    triad = runs["triad"]
    spread = max(triad) / min(triad)
    entry = {"n": n, "lang": lang, "threads": threads, "repeat": repeat,
             "copy_gbs": max(runs["copy"]), "triad_gbs": max(triad), "read_gbs": max(runs["read"]),
             "triad_runs_gbs": triad, "read_runs_gbs": runs["read"], "spread": spread,
             "quiet": spread <= STREAM_QUIET_SPREAD, "measured_at": time.time()}
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


# The fit of the bound: a write rate further than this factor from the read rate is taken as a
# failed fit (a disturbed triad, or a sum that ran from a cache), and the fallback is used.
WRITE_RATE_LIMIT = 10.0
ABOVE_BOUND_NOTE = ("! above the measured bound: the data came from a cache, "
                    "or the traffic is miscounted")


def _positive_bytes(value, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{name} must be a number of bytes, got {type(value).__name__}")
    if not np.isfinite(value) or value < 0:
        raise ValueError(f"{name} must be a finite number of bytes >= 0, got {value}")
    return float(value)


def bound_rates(reference: dict) -> dict:
    """The two rates of the bound from a stream()/stream_reference() result: load_gbs (what a
    loaded byte costs: 1/load_gbs seconds per GB) and store_gbs (a stored byte: its write-allocate
    read and its write-back together), write_gbs (the write-back alone, None for the fallback)
    and fit ("two-rate", or "fallback" where the solve failed; see the module docstring)."""
    try:
        read, triad = float(reference["read_gbs"]), float(reference["triad_gbs"])
    except KeyError as missing:
        raise ValueError(f"the STREAM reference has no {missing.args[0]}: measure it again "
                         "with timing.stream_reference or timing.stream") from None
    if not (np.isfinite(read) and np.isfinite(triad) and read > 0 and triad > 0):
        raise ValueError(f"the STREAM reference needs positive rates, got read_gbs {read}, "
                         f"triad_gbs {triad}")
    # t_triad = 24 n / triad = 24 n / read + 8 n / write  =>  1 / write = 3 / triad - 3 / read
    inverse_write = 3.0 / triad - 3.0 / read
    write = 1.0 / inverse_write if inverse_write > 0 else None
    if write is not None and read / WRITE_RATE_LIMIT <= write <= WRITE_RATE_LIMIT * read:
        return {"load_gbs": read, "store_gbs": 1.0 / (1.0 / read + inverse_write),
                "write_gbs": write, "fit": "two-rate"}
    return {"load_gbs": max(read, triad), "store_gbs": triad, "write_gbs": None,
            "fit": "fallback"}


def least_seconds(read_bytes, written_bytes, reference: dict) -> float:
    """The least time of a kernel whose loads name `read_bytes` and whose stores name
    `written_bytes` (the kernel's own count: the write-allocate read of each stored line is added
    here), on the memory measured by `reference` (stream_reference or stream, with read_gbs):
    read_bytes / B_read + written_bytes (1 / B_read + 1 / B_write), the rates fitted as the module
    docstring explains."""
    read_bytes = _positive_bytes(read_bytes, "read_bytes")
    written_bytes = _positive_bytes(written_bytes, "written_bytes")
    rates = bound_rates(reference)
    return (read_bytes / rates["load_gbs"] + written_bytes / rates["store_gbs"]) / 1e9


def fraction_of_bound(read_bytes, written_bytes, seconds, reference: dict) -> float:
    """least_seconds(read_bytes, written_bytes, reference) / seconds: the fraction of the measured
    memory-bandwidth bound that a kernel run of `seconds` reached. Above 1 is a mistake (a cache,
    or a miscount); format_fraction marks it."""
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float, np.integer, np.floating)):
        raise TypeError(f"seconds must be a number, got {type(seconds).__name__}")
    if not np.isfinite(seconds) or seconds <= 0:
        raise ValueError(f"seconds must be a finite time > 0, got {seconds}")
    return least_seconds(read_bytes, written_bytes, reference) / float(seconds)


def above_bound(fraction: float) -> bool:
    """Whether a fraction of the bound is above 1 (beyond the rounding of the fit: 1e-9)."""
    return fraction > 1.0 + 1e-9


def format_fraction(fraction: float) -> str:
    """A fraction of the bound as a table shows it: "87%", or, above 1, marked "119%!" (a summary
    that prints a mark prints ABOVE_BOUND_NOTE once under its table)."""
    return f"{fraction:.0%}" + ("!" if above_bound(fraction) else "")


def disturbed_note(reference: dict) -> str | None:
    """None for a quiet stream_reference() (its triad runs within STREAM_QUIET_SPREAD); else the
    clause a page gives a figure above the bound: the bound itself was measured beside other
    work, so it is too low to judge by."""
    if reference.get("quiet", True) or not reference.get("triad_runs_gbs"):
        return None
    runs = reference["triad_runs_gbs"]
    return (f"the bound was measured beside other work (its triad runs spread from "
            f"{min(runs):.1f} to {max(runs):.1f} GB/s, more than the "
            f"{STREAM_QUIET_SPREAD - 1:.0%} a quiet machine stays within), so it is too low to "
            "judge by")


def spmv_traffic(n: int, nnz: int) -> tuple[int, int]:
    """spmv_bytes split into (read_bytes, written_bytes): the kernel loads the values, columns,
    row_ptr and x, and stores y (8 n)."""
    return 12 * nnz + 4 * (n + 1) + 8 * n, 8 * n


def spmv_bytes(n: int, nnz: int) -> int:
    """The least memory traffic of one CRS matrix-vector product y = A x: every value (8 bytes)
    and column index (4) once, row_ptr (4 (n + 1)), x read once (8 n, if the cache keeps the
    entries that neighbouring rows share) and y written once (8 n). The sum of spmv_traffic."""
    return sum(spmv_traffic(n, nnz))


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
    diagonal included), GB/s (fvm.spmv_bytes, padding included) and that traffic split into
    read_bytes and written_bytes (y, 8 n) for fraction_of_bound."""
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
    traffic = fvm.spmv_bytes(fmt, n, a.nnz, n_slices)
    return {"spmv_seconds": seconds, "gflops": 2 * problem.nnz / seconds / 1e9,
            "bandwidth_gbs": traffic / seconds / 1e9, "stored_entries": int(a.nnz),
            "read_bytes": traffic - 8 * n, "written_bytes": 8 * n}


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


# A bandwidth measurement sees the memory when its working set is at least this many times the
# last-level cache (the benchmarks' rule: STREAM's own is 4 times the caches).
OUT_OF_CACHE_FACTOR = 4


def cache_note(working_bytes, llc_bytes: int | None = None) -> str | None:
    """None when `working_bytes` (the arrays a timed kernel streams through) is at least
    OUT_OF_CACHE_FACTOR times the last-level cache (last_level_cache_bytes() unless `llc_bytes`
    is given); otherwise the sentence a summary prints: its fractions of the bound are not a
    memory measurement. None too where the system tells no cache size."""
    working_bytes = _positive_bytes(working_bytes, "working_bytes")
    llc = last_level_cache_bytes() if llc_bytes is None else llc_bytes
    if not llc or working_bytes >= OUT_OF_CACHE_FACTOR * llc:
        return None
    return (f"in cache: the working set ({working_bytes / 2**20:.1f} MiB) is less than "
            f"{OUT_OF_CACHE_FACTOR} x the last-level cache ({llc / 2**20:.0f} MiB), so its "
            "fractions of the memory bound measure the cache, not the memory; a larger size "
            "measures the memory")


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
