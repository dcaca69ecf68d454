"""The measured memory-bandwidth bound (course.timing: the read-only sum beside the STREAM triad,
the two-rate model, the marked figures above 100 %) and the read-only kernel stream_sum in C and
Fortran."""

import json

import numpy as np
import pytest

from course import native, resources, timing

# a reference as stream_reference gives it: the sum streams faster than the triad's 24-byte count
REF = {"read_gbs": 40.0, "triad_gbs": 30.0, "copy_gbs": 28.0}


def triad_seconds(n, ref=REF):
    return 24 * n / ref["triad_gbs"] / 1e9


def test_read_only_kernel_is_bounded_by_the_sum():
    n = 10**7
    assert timing.least_seconds(8 * n, 0, REF) == pytest.approx(8 * n / 40e9, rel=1e-14)
    # at the sum's own time the sum is at 100 %
    assert timing.fraction_of_bound(8 * n, 0, 8 * n / 40e9, REF) == pytest.approx(1.0, rel=1e-14)


def test_triad_at_the_measured_triad_time_is_exactly_the_bound():
    for ref in (REF, {"read_gbs": 33.0, "triad_gbs": 25.0}, {"read_gbs": 90.0, "triad_gbs": 40.0}):
        n = 2**24
        f = timing.fraction_of_bound(16 * n, 8 * n, triad_seconds(n, ref), ref)
        assert f == pytest.approx(1.0, rel=1e-12)
        assert timing.bound_rates(ref)["fit"] == "two-rate"
        assert not timing.above_bound(f) and timing.format_fraction(f) == "100%"


def test_two_rate_model_solves_the_write_rate_from_the_triad():
    rates = timing.bound_rates(REF)
    # 24 n / triad = 24 n / read + 8 n / write
    write = rates["write_gbs"]
    assert 24 / 30 == pytest.approx(24 / 40 + 8 / write, rel=1e-12)
    # a stored byte costs its write-allocate read and its write-back
    assert 1 / rates["store_gbs"] == pytest.approx(1 / 40 + 1 / write, rel=1e-12)
    assert rates["load_gbs"] == 40.0


def test_read_dominated_kernel_bound_is_tighter_than_the_triad_count():
    """The SpMV loads most of its bytes: its least time is less than its bytes at the triad rate,
    so a run at the triad rate is above the STREAM count's 100 % but below this bound's."""
    n, nnz = 2_000_000, 14_000_000
    read, written = timing.spmv_traffic(n, nnz)
    assert read + written == timing.spmv_bytes(n, nnz)
    assert written == 8 * n and read > 10 * written
    old_bound = (read + written) / 30e9
    assert timing.least_seconds(read, written, REF) < old_bound
    # a run at 110 % of the STREAM-count bound is under the measured bound
    seconds = old_bound / 1.1
    assert timing.fraction_of_bound(read, written, seconds, REF) < 1.0
    # and a kernel faster than its bandwidth bound is above 1 and marked
    fast = timing.least_seconds(read, written, REF) / 1.19
    f = timing.fraction_of_bound(read, written, fast, REF)
    assert f == pytest.approx(1.19) and timing.format_fraction(f) == "119%!"


def test_fallback_when_the_fit_fails():
    # the sum no faster than the triad (a disturbed sum): B_write would be negative
    slow_sum = {"read_gbs": 20.0, "triad_gbs": 30.0}
    rates = timing.bound_rates(slow_sum)
    assert rates["fit"] == "fallback" and rates["write_gbs"] is None
    # stored and loaded bytes at the triad rate: STREAM's own bound
    assert timing.least_seconds(16, 8, slow_sum) == pytest.approx(24 / 30e9)
    # the sum barely faster than the triad: write-back nearly free, beyond the limit
    close = {"read_gbs": 30.3, "triad_gbs": 30.0}
    rates = timing.bound_rates(close)
    assert rates["fit"] == "fallback"
    assert rates["load_gbs"] == 30.3 and rates["store_gbs"] == 30.0
    # never tighter than STREAM's count: the triad at its own time is at most 100 %
    for ref in (slow_sum, close, {"read_gbs": 1000.0, "triad_gbs": 30.0}):
        assert timing.fraction_of_bound(16, 8, 24 / ref["triad_gbs"] / 1e9, ref) <= 1.0 + 1e-12


def test_format_fraction_marks_figures_above_the_bound():
    assert timing.format_fraction(0.87) == "87%"
    assert timing.format_fraction(1.0) == "100%"
    assert timing.format_fraction(1.19) == "119%!"
    assert timing.format_fraction(1.004) == "100%!"
    assert timing.ABOVE_BOUND_NOTE.startswith("!")


@pytest.mark.parametrize("args, error, text", [
    ((-1, 0, REF), ValueError, "read_bytes"),
    ((8, float("nan"), REF), ValueError, "written_bytes"),
    ((8, "8", REF), TypeError, "written_bytes"),
    ((8, 0, {"triad_gbs": 30.0}), ValueError, "read_gbs"),
    ((8, 0, {"read_gbs": 0.0, "triad_gbs": 30.0}), ValueError, "positive"),
])
def test_least_seconds_rejects_bad_input(args, error, text):
    with pytest.raises(error, match=text):
        timing.least_seconds(*args)


@pytest.mark.parametrize("seconds", [0, -1.0, float("inf")])
def test_fraction_of_bound_rejects_bad_seconds(seconds):
    with pytest.raises(ValueError, match="seconds"):
        timing.fraction_of_bound(8, 8, seconds, REF)


def test_cache_note():
    llc = 32 * 2**20
    assert timing.cache_note(4 * llc, llc) is None
    note = timing.cache_note(llc, llc)
    assert note.startswith("in cache") and "32 MiB" in note
    assert timing.cache_note(1, 0) is None                 # no cache size known: nothing to say


# --- the read-only kernel in C and Fortran --------------------------------------------------------

@pytest.mark.parametrize("lang", native.COMPILED_LANGS)
def test_stream_sum_kernel(lang):
    a = np.random.default_rng(3).standard_normal(100_003)
    assert native.stream_sum(lang, a) == pytest.approx(a.sum(), rel=1e-12, abs=1e-9)
    assert native.stream_sum(lang, np.empty(0)) == 0.0
    assert native.stream_sum(lang, np.full(7, 0.5)) == 3.5


def test_stream_sum_c_equals_fortran():
    a = np.random.default_rng(4).random(50_000)
    assert native.stream_sum("c", a) == pytest.approx(native.stream_sum("fortran", a), rel=1e-13)


@pytest.mark.parametrize("lang", native.COMPILED_LANGS)
@pytest.mark.parametrize("a, error, text", [
    (np.ones(4, np.float32), TypeError, "a must have dtype"),
    (np.ones(8)[::2], ValueError, "a must be contiguous"),
    (np.ones((2, 2)), ValueError, "a must be one-dimensional"),
    ([1.0, 2.0], TypeError, "a must be a numpy array"),
])
def test_stream_sum_rejects_bad_input(lang, a, error, text):
    with pytest.raises(error, match=text):
        native.stream_sum(lang, a)


def test_stream_measures_the_read_rate():
    st = timing.stream(n=2**16, repeat=2)
    assert st["read_gbs"] > 0 and st["triad_gbs"] > 0 and st["copy_gbs"] > 0


def test_stream_reference_measures_an_old_cache_file_again(tmp_path):
    """A stored reference from before the sum (no read_gbs) is measured again, not returned."""
    path = tmp_path / "stream.json"
    n, repeat = 2**16, 2
    key = f"c, 1 threads, n = {n}, best of {repeat}"
    old = {"n": n, "lang": "c", "threads": 1, "repeat": repeat, "copy_gbs": 1.0,
           "triad_gbs": 1.0, "triad_runs_gbs": [1.0], "spread": 1.0, "quiet": True,
           "measured_at": 4e9}
    path.write_text(json.dumps({"machine": timing._stream_machine(), key: old}))
    ref = timing.stream_reference(1, n=n, repeat=repeat, path=path, max_age=1e12)
    assert ref["cached"] is False and ref["read_gbs"] > 0
    assert len(ref["read_runs_gbs"]) == repeat
    resources.set_threads("c", resources.default_threads("c"))


# --- every summary marks a figure above the bound ------------------------------------------------

def unmarked_above_100(text: str) -> list[str]:
    """The percentages above 100 in `text` that carry no "!" mark."""
    import re
    return [m.group(0) for m in re.finditer(r"(\d+)%(!?)", text)
            if int(m.group(1)) > 100 and not m.group(2)]


STREAM_1 = {"threads": 1, "copy_gbs": 10.0, "triad_gbs": 12.0, "read_gbs": 16.0}
STREAM_2 = {"threads": 2, "copy_gbs": 15.0, "triad_gbs": 18.0, "read_gbs": 25.0}


def openmp_results(fractions):
    from course import native as nat
    spmv = [{"threads": 2, "lang": "c", "format": f, "bandwidth_gbs": 20.0,
             "fraction_of_stream": fr, "read_bytes": 8 * 10**8, "written_bytes": 10**8,
             "spmv_seconds": 0.05} for f, fr in zip(timing.SPMV_FORMATS, fractions)]
    ladder = [{"threads": 2, "lang": "c", "version": v, "seconds_per_iteration": 0.01,
               "speedup": 1.5} for v in nat.LADDER]
    return {"suite": "openmp", "sizes": [128], "threads": [1, 2], "llc_bytes": 32 * 2**20,
            "topology": {"model": "CPU", "cores": 2, "sockets": 1, "numa_nodes": 1,
                         "OMP_PLACES": None, "OMP_PROC_BIND": None},
            "stream": [STREAM_1, STREAM_2], "ladder": ladder, "spmv": spmv, "numa_note": "one"}


def fem3d_results(fractions, n=64):
    runs = [{"n": n, "lang": lang, "elements_per_second": 1e6, "seconds_per_iteration": 1e-3,
             "assemble_seconds": 0.1, "spmv_gbs": 10.0, "spmv_fraction_of_stream": fr,
             "spmv_gflops": 1.0, "read_bytes": timing.spmv_traffic((n + 1)**3, (3 * n + 1)**3)[0],
             "written_bytes": 8 * (n + 1)**3} for lang, fr in zip(("c", "fortran"), fractions)]
    return {"suite": "fem3d", "stream": STREAM_1, "runs": runs, "llc_bytes": 32 * 2**20}


def iccg_results(fraction, mb=400):
    r = {"threads": 2, "lang": "c", "ordering": "cm-rcm", "colors_requested": 32, "colors": 32,
         "iterations": 50, "synchronisations_per_iteration": 70, "seconds_per_iteration": 0.01,
         "bytes_per_iteration": mb * 10**6, "bandwidth_gbs": 20.0, "fraction_of_stream": fraction,
         "time_vs_c": 1.0}
    return {"suite": "iccg", "sizes": [128], "threads": [1, 2], "stream": [STREAM_1, STREAM_2],
            "runs": [r], "bandwidth_bound": {"natural_1_thread": None, "cm_rcm_all_threads": r},
            "llc_bytes": 32 * 2**20}


def halo_results(fraction, rows=400_000):
    cg = {"seconds_per_iteration": 0.02, "halo_s": 0.001, "allreduce_s": 0.001,
          "bytes_per_iteration_max_rank": 420 * rows}
    run = {"ranks": 2, "model": None, "oversubscribed": False, "cg": cg,
           "halo": {"p2p": {"seconds": 1e-5}},
           "ratios": {"halo_vs_pingpong": None, "c_halo_vs_pingpong": None,
                      "allgather_vs_p2p": 2.0, "cg_fraction_of_bound": fraction},
           "sizes": {"table": {"metadata_bytes_per_rank": 32}}}
    return {"suite": "halo", "n": 24, "cg_n": 72, "partition": "metis", "cores": 2,
            "runs": [run], "warning": None, "llc_bytes": 32 * 2**20}


SUMMARIES = {"openmp": (openmp_results, [0.8, 1.19, 0.9], [0.8, 0.7, 0.9]),
             "fem3d": (fem3d_results, [1.36, 0.9], [0.5, 0.9]),
             "iccg": (iccg_results, 1.42, 0.6),
             "halo": (halo_results, 1.48, 0.6)}


@pytest.mark.parametrize("suite", SUMMARIES)
def test_summaries_mark_every_figure_above_the_bound(suite):
    from course import bench
    make, above, below = SUMMARIES[suite]
    text = bench.summary_table(make(above))
    assert unmarked_above_100(text) == [], text
    assert "%!" in text and timing.ABOVE_BOUND_NOTE in text, text
    assert text.count(timing.ABOVE_BOUND_NOTE) == 1
    quiet = bench.summary_table(make(below))
    assert "%!" not in quiet and timing.ABOVE_BOUND_NOTE not in quiet, quiet


def test_the_checker_finds_an_unmarked_figure():
    assert unmarked_above_100("crs 12.0 (119%) ell (87%) sell (101%!)") == ["119%"]


@pytest.mark.parametrize("suite, small, large", [
    ("fem3d", fem3d_results([0.5, 0.5], n=16), fem3d_results([0.5, 0.5], n=96)),
    ("iccg", iccg_results(0.5, mb=10), iccg_results(0.5, mb=400)),
    ("halo", halo_results(0.5, rows=20_000), halo_results(0.5, rows=400_000)),
])
def test_summaries_say_when_the_size_is_in_cache(suite, small, large):
    from course import bench
    assert "in cache" in bench.summary_table(small) or "cache:" in bench.summary_table(small)
    text = bench.summary_table(large)
    assert "in cache" not in text and "cache:" not in text, text


def test_openmp_summary_says_when_the_spmv_is_in_cache():
    from course import bench
    results = openmp_results([0.5, 0.5, 0.5])
    assert "in cache" not in bench.summary_table(results)
    for r in results["spmv"]:
        r["read_bytes"], r["written_bytes"] = 10**6, 10**5
    assert "in cache" in bench.summary_table(results)


def test_disturbed_note():
    quiet = {**REF, "quiet": True, "triad_runs_gbs": [29.0, 30.0]}
    assert timing.disturbed_note(quiet) is None
    noisy = {**REF, "quiet": False, "triad_runs_gbs": [15.0, 30.0]}
    note = timing.disturbed_note(noisy)
    assert "15.0 to 30.0 GB/s" in note and "25%" in note


def test_a_stored_reference_that_the_machine_beats_is_measured_again(tmp_path, monkeypatch):
    """A reference measured while other work ran throughout (its runs agree, all slow) gave every
    page of a build a bound too low; a short triad check that beats it by more than the quiet
    spread takes it again."""
    path = tmp_path / "stream.json"
    n, repeat = 2**16, 2
    first = timing.stream_reference(1, n=n, repeat=repeat, path=path)
    data = json.loads(path.read_text()) if path.exists() else {
        "machine": timing._stream_machine()}
    key = f"c, 1 threads, n = {n}, best of {repeat}"
    slow = {**first, "triad_gbs": first["triad_gbs"] / 10, "quiet": True,
            "measured_at": 4e9}
    slow.pop("cached", None)
    data[key] = slow
    path.write_text(json.dumps(data))
    again = timing.stream_reference(1, n=n, repeat=repeat, path=path, max_age=1e12)
    assert again["cached"] is False
    resources.set_threads("c", resources.default_threads("c"))
