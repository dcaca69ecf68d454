"""Lecture 03_openmp, part c: the race-demonstration kernels. dot_reduction is right with any number
of threads (and bit for bit repeatable with two); dot_racy and scalar_race are right with one
thread. That the racy kernels go wrong with more threads is NOT asserted: a race is not guaranteed
to show (the notebook counts how often it did)."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import COMPILED, assert_refused, lang_params
from course import native, resources

RNG = np.random.default_rng(4)
A, B = RNG.random(100_003), RNG.random(100_003)   # odd length: the chunks differ in size


@pytest.fixture
def threads_restored():
    yield
    for lang in COMPILED:
        native.set_threads(lang, resources.threads_for(lang))


def relative_error(value: float) -> float:
    exact = np.dot(A, B)
    return abs(value - exact) / abs(exact)


@pytest.mark.parametrize("lang", lang_params(COMPILED))
def test_dot_reduction_is_right_with_any_threads(lang, threads_restored):
    for threads in (1, 2, 3, 4):
        native.set_threads(lang, threads)
        assert relative_error(native.dot_reduction(lang, A, B)) <= 1e-12, f"{threads} threads"


@pytest.mark.parametrize("lang", lang_params(COMPILED))
def test_dot_reduction_is_bitwise_repeatable_with_two_threads(lang, threads_restored):
    native.set_threads(lang, 2)
    values = {native.dot_reduction(lang, A, B) for _ in range(20)}
    assert len(values) == 1, f"20 calls gave {len(values)} different results"


@pytest.mark.parametrize("lang", lang_params(COMPILED))
def test_racy_kernels_are_right_with_one_thread(lang, threads_restored):
    native.set_threads(lang, 1)
    assert relative_error(native.dot_racy(lang, A, B)) <= 1e-12
    out = native.scalar_race(lang, A, B, 5)
    assert out.shape == (5,)
    assert max(relative_error(v) for v in out) <= 1e-12


@pytest.mark.parametrize("lang", lang_params(COMPILED))
def test_empty_and_short_vectors(lang, threads_restored):
    native.set_threads(lang, 2)
    empty = np.empty(0)
    assert native.dot_reduction(lang, empty, empty) == 0.0
    assert native.dot_racy(lang, empty, empty) == 0.0
    one = np.array([3.0])
    assert native.dot_reduction(lang, one, one) == 9.0
    native.set_threads(lang, 1)
    assert native.dot_racy(lang, one, one) == 9.0
    assert np.array_equal(native.scalar_race(lang, one, one, 3), [9.0, 9.0, 9.0])


@pytest.mark.parametrize("lang", lang_params(COMPILED))
def test_racy_kernels_run_with_several_threads(lang, threads_restored):
    """With 2 threads the racy kernels may be wrong, but they return finite sums no larger than
    the right one (the terms are positive: a race loses terms, it does not invent them)."""
    native.set_threads(lang, 2)
    exact = np.dot(A, B)
    for value in [native.dot_racy(lang, A, B), *native.scalar_race(lang, A, B, 20)]:
        assert np.isfinite(value) and 0.0 <= value <= exact * (1 + 1e-12)


REFUSED = {
    "a-list": (lambda lang: native.dot_racy(lang, [1.0, 2.0], B[:2]), TypeError, "a"),
    "a-float32": (lambda lang: native.dot_reduction(lang, A.astype(np.float32), B), TypeError,
                  "a"),
    "a-2d": (lambda lang: native.dot_reduction(lang, A[:6].reshape(2, 3), B[:6]), ValueError,
             "a"),
    "b-short": (lambda lang: native.dot_racy(lang, A, B[:-1]), ValueError, "b"),
    "b-strided": (lambda lang: native.dot_reduction(lang, A[:10], B[:20:2]), ValueError, "b"),
    "b-int": (lambda lang: native.dot_reduction(lang, A[:3], np.ones(3, dtype=np.int64)),
              TypeError, "b"),
    "rounds-zero": (lambda lang: native.scalar_race(lang, A, B, 0), ValueError, "rounds"),
    "rounds-float": (lambda lang: native.scalar_race(lang, A, B, 2.5), TypeError, "rounds"),
    "scalar-b-short": (lambda lang: native.scalar_race(lang, A, B[:-2], 3), ValueError, "b"),
    "lang": (lambda lang: native.dot_reduction("numba", A, B), ValueError, "lang"),
}


@pytest.mark.parametrize("lang", lang_params(COMPILED))
@pytest.mark.parametrize("case_id", list(REFUSED))
def test_wrappers_refuse(lang, case_id):
    assert_refused(REFUSED[case_id], lang, case_id)
