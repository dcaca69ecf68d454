"""course.solvers.team: Numba's threads as one team in one parallel region (the rows of a loop
dealt out as OpenMP's schedule(static), a barrier, sums added in thread order), and a team that
cannot be formed is called off on every thread, never a hang; the Numba ICCG then warns and runs
on one thread with the same iterations."""

from __future__ import annotations

import json

import numba
import numpy as np
import pytest

from conftest import PYTHON, ROOT, env_with, run
from course.fem import fvm
from course.solvers import ordering
from course.solvers import iccg as ic
from course.solvers import team


@pytest.mark.parametrize("first, end", [(0, 10), (5, 5), (3, 4), (7, 100), (0, 1000)])
@pytest.mark.parametrize("nthreads", [1, 2, 3, 4, 7])
def test_chunks_deal_the_rows_as_openmp_static(first, end, nthreads):
    chunks = [tuple(int(v) for v in team.chunk(first, end, t, nthreads)) for t in range(nthreads)]
    assert chunks[0][0] == first and chunks[-1][1] == end
    assert all(a[1] == b[0] for a, b in zip(chunks, chunks[1:]))      # contiguous, in order
    sizes = [stop - start for start, stop in chunks]
    assert sizes == sorted(sizes, reverse=True) and max(sizes) - min(sizes) <= 1


@numba.njit(parallel=True)
def _rounds(nthreads, rounds):
    """Every thread writes the round number on a board, waits, and counts the entries of the
    board that are not this round's (a barrier that lets a thread through early shows up there);
    then the team sums thread + round."""
    sync = np.zeros(team.SYNC_SIZE, dtype=np.int64)
    board = np.full(nthreads, -1)
    stale = np.zeros(nthreads, dtype=np.int64)
    partial = np.zeros((2, nthreads))
    sums = np.zeros((rounds, nthreads))
    for thread in numba.prange(nthreads):
        if team.roll_call(sync, nthreads):
            for k in range(rounds):
                board[thread] = k
                team.barrier(sync, nthreads)
                for other in range(nthreads):
                    stale[thread] += board[other] != k
                team.barrier(sync, nthreads)
                sums[k, thread] = team.team_sum(partial, k % 2, thread, float(thread + k), sync,
                                                nthreads)
    return team.formed(sync, nthreads), stale.sum(), sums


@pytest.mark.timeout(120)
@pytest.mark.parametrize("nthreads", [1, numba.config.NUMBA_NUM_THREADS])
def test_the_barrier_holds_every_thread_and_the_sums_agree(nthreads):
    formed, stale, sums = _rounds(nthreads, 2000)
    assert formed and stale == 0
    expected = np.array([[sum(t + k for t in range(nthreads))] * nthreads for k in range(2000)])
    np.testing.assert_array_equal(sums, expected)


@pytest.mark.timeout(120)
def test_a_team_larger_than_the_threads_is_called_off_not_hung():
    # prange(threads + 1) on `threads` threads: one of them gets two iterations one after the
    # other, so the first one can never see the whole team arrive
    formed, stale, sums = _rounds(numba.config.NUMBA_NUM_THREADS + 1, 3)
    assert not formed and stale == 0 and not sums.any()               # nothing was computed


@pytest.mark.timeout(120)
def test_iccg_warns_and_runs_on_one_thread_when_the_team_is_called_off(monkeypatch):
    p = fvm.poisson(8, 8, 8, lang="numpy")
    a = p.full_crs()
    o = ordering.order(a, "cm-rcm", 3)
    ap, bp = ordering.permute(a, o.perm), p.b[o.perm]
    expected = ic.iccg(ap, bp, o.color_ptr, "numba", 1e-8)
    threads = numba.get_num_threads()
    monkeypatch.setattr(ic, "_team_called_off", False)
    monkeypatch.setattr(ic.numba, "get_num_threads", lambda: threads + 1)  # more than there are
    with pytest.warns(RuntimeWarning, match="did not run .* threads at once"):
        result = ic.iccg(ap, bp, o.color_ptr, "numba", 1e-8)
    assert result.iterations == expected.iterations
    np.testing.assert_allclose(result.x, expected.x, rtol=1e-10)
    z = ic.ic0_apply(ic.ic0(ic.split(ap)), bp, o.color_ptr, "numba")   # one thread, no retry
    np.testing.assert_allclose(z, ic.ic0_apply(ic.ic0(ic.split(ap)), bp, o.color_ptr, "numpy"),
                               rtol=1e-12)


OVERSUBSCRIBED = """
import json
import numba
from course import resources
from course.fem import fvm
from course.solvers import ordering
from course.solvers import iccg as ic
p = fvm.poisson(12, 12, 12, lang="numpy")
a = p.full_crs()
o = ordering.order(a, "cm-rcm", 5)
ap, bp = ordering.permute(a, o.perm), p.b[o.perm]
f = ic.ic0(ic.split(ap))
out = {}
for t in (1, 4):
    resources.set_threads("numba", t)
    out[t] = {"z": ic.ic0_apply(f, bp, o.color_ptr, "numba").tolist(),
              "iterations": ic.iccg(ap, bp, o.color_ptr, "numba", 1e-8).iterations}
out["c"] = ic.iccg(ap, bp, o.color_ptr, "c", 1e-8).iterations
print(json.dumps(out))
"""


@pytest.mark.timeout(300)
def test_four_threads_on_fewer_cores():
    """NUMBA_NUM_THREADS=4 on a 2-core machine: threads lose their core while the others wait
    at a barrier. The substitution is bitwise the one of one thread, ICCG takes C's iterations
    (to one: the sums are added in another order), and nothing warns (the team was formed)."""
    result = run([PYTHON, "-W", "error::RuntimeWarning", "-c", OVERSUBSCRIBED], timeout=280,
                 env=env_with(NUMBA_NUM_THREADS="4"), cwd=ROOT)
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert out["4"]["z"] == out["1"]["z"]
    counts = (out["4"]["iterations"], out["1"]["iterations"], out["c"])
    assert max(counts) - min(counts) <= 1, counts       # the sums' rounding may move one
