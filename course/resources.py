"""What a run may take of this machine, checked before it starts: the threads of each language's
kernels (OpenMP's for C and Fortran, Numba's), set and bounded by the usable cores, and the memory
a problem needs against what this process can still allocate (the machine or its cgroup)."""

from __future__ import annotations

import os
import resource

import numba

from . import native, toolchain


def threads_for(lang: str) -> int:
    """Threads the kernels of `lang` use: OpenMP's for C/Fortran, 1 for the serial twins."""
    if lang in ("c", "fortran"):
        return int(os.environ.get("OMP_NUM_THREADS", toolchain.usable_cores()))
    return 1


THREADS_PER_CORE_MAX = 16


def check_threads(threads: int, label: str | None = None) -> int:
    """threads, if it is a positive integer and at most THREADS_PER_CORE_MAX per usable core (the
    OpenMP runtime crashes when asked for tens of thousands; beyond the cores threads only take
    turns); ValueError otherwise. `label` names the value in the message (default "threads N").
    The programs solc and solf refuse the same with the same words."""
    label = label or f"threads {threads}"
    threads = native.check_int(threads, label.split()[0], minimum=1)
    cores = toolchain.usable_cores()
    limit = THREADS_PER_CORE_MAX * cores
    if threads > limit:
        raise ValueError(f"{label} is more than {THREADS_PER_CORE_MAX} per core: this process "
                         f"may use {cores} core(s), so at most {limit} threads (more only take "
                         f"turns)")
    return threads


def default_threads(lang: str) -> int:
    """The threads the parallel kernels of `lang` start with: OpenMP's (OMP_NUM_THREADS or the
    cores) for c and fortran, NUMBA_NUM_THREADS for numba."""
    return numba.config.NUMBA_NUM_THREADS if lang == "numba" else threads_for(lang)


def set_threads(lang: str, threads: int) -> None:
    """Threads of the next parallel regions of `lang`: OpenMP (c, fortran: omp_set_num_threads)
    or Numba (at most NUMBA_NUM_THREADS)."""
    threads = check_threads(threads)
    if lang != "numba":
        native.set_threads(lang, threads)
    elif threads > numba.config.NUMBA_NUM_THREADS:
        raise ValueError(f"threads must be at most {numba.config.NUMBA_NUM_THREADS} for numba "
                         f"(NUMBA_NUM_THREADS), got {threads}")
    else:
        numba.set_num_threads(threads)


# --- memory: a problem that cannot fit is refused before anything is allocated --------------------

_MEMINFO = "/proc/meminfo"
_CGROUP = "/sys/fs/cgroup"
_CGROUP_FILES = (("memory.max", "memory.current"),                              # cgroup v2
                 ("memory/memory.limit_in_bytes", "memory/memory.usage_in_bytes"))  # v1


def _first_int(path) -> int | None:
    try:
        return int(open(path).read().split()[0])
    except (OSError, ValueError, IndexError):                # absent, or "max": no limit
        return None


def memory_available(meminfo=_MEMINFO, cgroup=_CGROUP) -> tuple[int | None, str]:
    """The bytes this process can still allocate and where the figure comes from: MemAvailable of
    /proc/meminfo, or the limit of its memory cgroup (a container, a batch job) less the cgroup's
    usage, whichever is less; (None, "unknown") where neither can be read."""
    found = []
    try:
        for line in open(meminfo):
            if line.startswith("MemAvailable:"):
                found.append((int(line.split()[1]) * 1024, f"MemAvailable in {meminfo}"))
    except (OSError, ValueError, IndexError):
        pass
    for limit_file, usage_file in _CGROUP_FILES:
        limit = _first_int(f"{cgroup}/{limit_file}")
        usage = _first_int(f"{cgroup}/{usage_file}")
        if limit is not None and usage is not None and limit < 2**60:   # v1: 2^63 - 4096, none
            found.append((max(limit - usage, 0), f"cgroup limit {limit / 1e9:.1f} GB less "
                                                 f"{usage / 1e9:.1f} GB used"))
    return min(found) if found else (None, "unknown")


def check_memory(needed: float, what: str) -> None:
    """ValueError, one line, when `needed` bytes (an estimate) are more than memory_available()."""
    available, source = memory_available()
    if available is not None and needed > available:
        raise ValueError(f"{what} needs about {needed / 1e9:.1f} GB of memory, but only "
                         f"{available / 1e9:.1f} GB are available ({source}): choose a smaller "
                         f"size")


def peak_memory_mb() -> float:
    """The largest resident set size of this process so far, in MB (Linux reports KB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
