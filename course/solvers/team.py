"""A team of Numba threads in ONE parallel region, as `omp parallel` gives C and Fortran.

Numba opens a parallel region for every `prange` loop: the threads are woken, handed their chunks
and waited for, about a microsecond or two each time. An ICCG iteration has 2 colors + 6 loops,
so with many colors Numba spent more time opening regions than computing (lecture 04_iccg). Here
one `prange` over the threads opens a single region for a whole solve, and inside it each thread
does by hand what an orphaned `omp for schedule(static)` does for C:

    first, end = chunk(0, n, thread, nthreads)     # its rows of a loop (schedule(static))
    ...
    barrier(sync, nthreads)                        # the implied barrier at the end of `omp for`

and a reduction is: every thread writes its partial sum, a barrier, and every thread adds the
partial sums in thread order, so all threads hold the same bits and take the same branches.

Numba has no barrier, so this module builds one from atomic operations on a small int64 array
`sync` (SYNC_SIZE zeros), written as LLVM instructions (numba.extending.intrinsic). A waiting thread
spins a little, then yields its core (sched_yield), so an oversubscribed machine still progresses.

A barrier needs every thread of the team running at once. Numba's OpenMP and workqueue threading
layers give each of the `nthreads` iterations of `prange(nthreads)` a thread of its own; a layer
that runs them one after another (TBB on a busy machine, say) would leave the first one waiting
forever. So a team starts with roll_call(): all threads check in, or, after ROLL_CALL_YIELDS
yields, the team is called off, every thread returns False and computes nothing, and the caller
runs again with one thread (course.solvers.iccg does, with a warning).

Numba's cache (cache=True) checks only the file of the function it compiled: the ICCG functions
of course/solvers/iccg.py that inline these are not recompiled when this file changes. After an
edit here, touch iccg.py (or delete course/solvers/__pycache__).
"""

from __future__ import annotations

import numba
import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

# the counters of sync, each on a cache line of its own (8 int64 = 64 bytes)
COUNT, GENERATION, ARRIVED = 0, 8, 16
SYNC_SIZE = 24
SPINS = 2000                 # checks before a waiting thread starts to yield its core
ROLL_CALL_YIELDS = 2_000_000  # yields (a fraction of a second on idle cores) before calling off
CALLED_OFF = 1 << 40         # ARRIVED from then on: the team was not formed


def _pointer(context, builder, signature, args):
    """The address of counters[index] (the first two arguments of an intrinsic)."""
    array_type, index_type = signature.args[:2]
    array = context.make_array(array_type)(context, builder, args[0])
    index = context.cast(builder, args[1], index_type, types.intp)
    return cgutils.get_item_pointer(context, builder, array_type, array, [index])


def _int64_array(counters) -> bool:
    return isinstance(counters, types.Array) and counters.dtype == types.int64


@intrinsic
def atomic_add(typingctx, counters, index, value):
    """counters[index] += value in one indivisible step; returns the value before."""
    if not _int64_array(counters):
        return None

    def codegen(context, builder, signature, args):
        value_ = context.cast(builder, args[2], signature.args[2], types.int64)
        return builder.atomic_rmw("add", _pointer(context, builder, signature, args), value_,
                                  "seq_cst")
    return types.int64(counters, index, value), codegen


@intrinsic
def atomic_load(typingctx, counters, index):
    """counters[index], read from memory every time (a plain read could be kept in a register,
    and a waiting loop would never see another thread's write)."""
    if not _int64_array(counters):
        return None

    def codegen(context, builder, signature, args):
        return builder.load_atomic(_pointer(context, builder, signature, args), "seq_cst", 8)
    return types.int64(counters, index), codegen


@intrinsic
def compare_and_swap(typingctx, counters, index, expected, new):
    """If counters[index] == expected, set it to new; True if it did (one indivisible step)."""
    if not _int64_array(counters):
        return None

    def codegen(context, builder, signature, args):
        expected_ = context.cast(builder, args[2], signature.args[2], types.int64)
        new_ = context.cast(builder, args[3], signature.args[3], types.int64)
        pair = builder.cmpxchg(_pointer(context, builder, signature, args), expected_, new_,
                               "seq_cst", "seq_cst")
        return builder.extract_value(pair, 1)
    return types.boolean(counters, index, expected, new), codegen


@intrinsic
def yield_core(typingctx):
    """sched_yield(): let another thread run on this core."""
    def codegen(context, builder, signature, args):
        function = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(ir.IntType(32), []), "sched_yield")
        builder.call(function, [])
        return context.get_dummy_value()
    return types.none(), codegen


@numba.njit(inline="always")
def chunk(first, end, thread, nthreads):
    """The rows [start, stop) of `thread` in the loop over [first, end): OpenMP's
    schedule(static) (as libgomp deals it: one contiguous block per thread, the first
    (end - first) % nthreads threads one row more). Unsigned, as the index arrays of the solvers
    (course.solvers.iccg._unsigned): no sign test on the array accesses they index."""
    first, end = np.uint64(first), np.uint64(end)
    thread, nthreads = np.uint64(thread), np.uint64(nthreads)
    size, extra = (end - first) // nthreads, (end - first) % nthreads
    start = first + thread * size + min(thread, extra)
    stop = start + size + (np.uint64(1) if thread < extra else np.uint64(0))
    return start, stop


# [team_barrier]
@numba.njit(inline="always")
def barrier(sync, nthreads):
    """Wait until all nthreads threads have reached this barrier. The last one to arrive resets
    the count and opens the next generation, which the others wait for."""
    generation = atomic_load(sync, GENERATION)
    if atomic_add(sync, COUNT, 1) == nthreads - 1:
        atomic_add(sync, COUNT, -nthreads)      # before the release: the next barrier counts anew
        atomic_add(sync, GENERATION, 1)
        return
    checks = 0
    while atomic_load(sync, GENERATION) == generation:
        checks += 1
        if checks > SPINS:
            yield_core()
# [team_barrier]


@numba.njit(inline="always")
def roll_call(sync, nthreads):
    """True when all nthreads threads are running at once (then barrier() cannot hang); False on
    every thread when the team was called off. The decision is one compare-and-swap: once all
    have arrived nobody can call the team off, once called off every late arrival sees it."""
    if atomic_add(sync, ARRIVED, 1) >= CALLED_OFF:
        return False
    waits = 0
    while True:
        arrived = atomic_load(sync, ARRIVED)
        if arrived == nthreads:
            return True
        if arrived >= CALLED_OFF:
            return False
        waits += 1
        if waits > SPINS:
            yield_core()
        if waits > SPINS + ROLL_CALL_YIELDS and compare_and_swap(sync, ARRIVED, arrived,
                                                                 CALLED_OFF):
            return False


@numba.njit(inline="always")
def formed(sync, nthreads):
    """After the team's region: whether its roll call succeeded (else nothing was computed)."""
    return atomic_load(sync, ARRIVED) == nthreads


@numba.njit(inline="always")
def team_sum(partial, slot, thread, value, sync, nthreads):
    """The sum over the team of every thread's `value` (a reduction): written to
    partial[slot, thread], a barrier, then added in thread order by every thread. A slot may be
    written again only after one more barrier (every thread has read it by then)."""
    partial[slot, thread] = value
    barrier(sync, nthreads)
    total = 0.0
    for other in range(nthreads):
        total += partial[slot, other]
    return total


@numba.njit(parallel=True, cache=True)
def _roll_call_only(nthreads):
    sync = np.zeros(SYNC_SIZE, dtype=np.int64)
    for thread in numba.prange(nthreads):
        roll_call(sync, nthreads)
    return formed(sync, nthreads)


def describe() -> str:
    """Numba's threads, its threading layer and whether they form one team (for `doctor`)."""
    nthreads = numba.get_num_threads()
    formed = _roll_call_only(nthreads)
    return (f"{nthreads} threads, {numba.threading_layer()} layer, "
            + ("one team" if formed else "no team: the Numba ICCG runs on one thread"))
