"""`python -m course bench openmp` (lecture 03_openmp): the OpenMP PCG ladder v0 .. v3 and the SpMV
in CRS, ELL and SELL-C-sigma over a thread sweep, against the measured memory-bandwidth bound at
each thread count (timing.fraction_of_bound: the read-only sum and the STREAM triad, fitted to the
kernel's reads and writes), and what the source measured on A64FX."""

from __future__ import annotations

from pathlib import Path

from tqdm.auto import tqdm

from .. import native, resources, solvers, timing, toolchain
from ..fem import fvm


OPENMP_LANGS = ("c", "fortran", "numba")


# Seed 004, the OpenMP tutorial (key nakajima2022openmp on the book's References page):
# A64FX, 48 cores in 4 NUMA nodes of 12, Fortran, 128^3 cells, seconds of the solve (best of 5):
# v0 and v1 from 12 to 48 threads, the efficiency at 48 threads against 12 as the source reports
# it, and the ladder at 48 threads (Fortran, C in clang mode).
A64FX_FIRST_TOUCH = {"threads": [12, 24, 36, 48], "v0": [5.27, 2.78, 1.95, 1.60],
                     "v1": [5.26, 2.70, 1.86, 1.44], "efficiency_48": {"v0": 0.824, "v1": 0.912}}


A64FX_LADDER = {"v0": (1.671, 1.564), "v1": (1.480, 1.122), "v2": (0.747, 0.809),
                "v3": (0.707, 0.834)}


NUMA_COMMANDS = """\
# from the repository root, on a node with several NUMA nodes (lscpu: "NUMA node(s)" > 1),
# one thread per core:
export OMP_PLACES=cores OMP_PROC_BIND=spread
numactl --localalloc .venv/bin/python -m course bench openmp --json local.json
numactl --interleave=all .venv/bin/python -m course bench openmp --json spread.json
# the program, v0 then v1, v2, v3 (32^3 cells; 128 128 128 on line 1 for the seed's size):
OMP_NUM_THREADS=48 build/native/release/bin/solf examples/03_openmp/INPUT.DAT v0"""


def numa_note(topo: dict) -> str:
    """What this machine can show of first touch, and how to see it on a cluster node."""
    if topo["numa_nodes"] > 1:
        return (f"{topo['numa_nodes']} NUMA nodes: compare v1 (first touch) with v0 at the "
                "largest thread counts.")
    eff = A64FX_FIRST_TOUCH["efficiency_48"]
    return ("One NUMA node: every page is as near to every core as any other, so first touch "
            "(v1) cannot beat v0 here. On A64FX (4 NUMA nodes of 12 cores) the parallel "
            f"efficiency at 48 threads (against 12) rose from {eff['v0']:.1%} (v0) to "
            f"{eff['v1']:.1%} (v1) (seed 004: the OpenMP tutorial on the book's References page). "
            f"To see it on a cluster node:\n{NUMA_COMMANDS}")


def _check_openmp_args(sizes, langs, threads):
    if len(sizes) != 1:
        raise ValueError(f"bench openmp takes one size (n of the n^3 cells), got {list(sizes)}")
    n = native.check_int(sizes[0], "size", minimum=2)
    bad = [lang for lang in langs if lang not in OPENMP_LANGS]
    if bad:
        raise ValueError(f"bench openmp measures {', '.join(OPENMP_LANGS)}, not {', '.join(bad)}")
    threads = list(threads) if threads else list(range(1, toolchain.usable_cores() + 1))
    for t in threads:
        resources.check_threads(t)
    if "numba" in langs and max(threads) > resources.default_threads("numba"):
        raise ValueError(f"numba runs at most {resources.default_threads('numba')} threads "
                         f"(NUMBA_NUM_THREADS); the sweep asks for {max(threads)}")
    return n, threads


def bench_openmp(sizes=(128,), langs=OPENMP_LANGS, threads=None, repeat=5, iterations=20,
                 stream_n=2**24, progress: bool = True) -> dict:
    """The OpenMP PCG ladder on the course.fvm Poisson problem of n^3 cells, over a thread sweep
    (default 1 .. cores).

    At every thread count: the STREAM copy, triad and read-only sum of the C kernels; per language
    and ladder version the PCG seconds per iteration (a run of `iterations`, the matrix generated
    again at that thread count so that first touch follows the threads); per language the SpMV
    alone in CRS, ELL and SELL-C-sigma, its bandwidth and its fraction of the measured bound
    (fraction_of_stream: timing.fraction_of_bound of its reads and writes against the STREAM of
    the same thread count). Best of `repeat` everywhere; speedups relative to the first thread
    count. The default 128^3 cells are beyond 4 x the last-level cache of most machines;
    llc_bytes is recorded, and the summary says when the SpMV's working set is not."""
    n, threads = _check_openmp_args(sizes, langs, threads)
    configs = [(lang, v) for lang in langs for v in native.LADDER
               if lang in solvers.LADDER_LANGS[v]]
    results = {"suite": "openmp", "repeat": repeat, "sizes": [n], "iterations": iterations,
               "threads": threads, "topology": timing.topology(),
               "machine": timing.machine(), "llc_bytes": timing.last_level_cache_bytes(),
               "stream": [], "ladder": [], "spmv": []}
    results["numa_note"] = numa_note(results["topology"])
    bar = tqdm(total=len(threads) * (1 + len(configs) + len(langs)), desc="bench openmp",
               unit="run", disable=not progress)
    try:
        for t in threads:
            for lang in {*langs, "c"}:
                resources.set_threads(lang, t)
            results["stream"].append({**timing.stream(stream_n, repeat), "threads": t})
            bar.update()
            for lang, version in configs:
                results["ladder"].append(_ladder_run(n, lang, version, t, repeat, iterations))
                bar.update()
            for lang in langs:
                problem = fvm.poisson(n, n, n, lang=lang, fmt="crs")
                for fmt in timing.SPMV_FORMATS:
                    run = timing.spmv_timing(problem, fmt, lang, repeat)
                    run.update(threads=t, lang=lang, format=fmt,
                               fraction_of_stream=timing.fraction_of_bound(
                                   run["read_bytes"], run["written_bytes"], run["spmv_seconds"],
                                   results["stream"][-1]))
                    results["spmv"].append(run)
                bar.update()
    finally:
        bar.close()
        for lang in {*langs, "c"}:
            resources.set_threads(lang, resources.default_threads(lang))
    _add_ladder_ratios(results)
    return results


def _ladder_run(n, lang, version, threads, repeat, iterations) -> dict:
    """PCG seconds per iteration of one ladder step, the matrix generated at `threads`."""
    fmt = "crs" if version in ("v0", "v1") else "ell"
    problem = fvm.poisson(n, n, n, lang=lang, fmt=fmt, parallel=version != "v0")

    def pcg():
        return solvers.pcg_ladder(problem, version, lang, tol=1e-300, max_iter=iterations)
    pcg()                                                  # warm-up (JIT, work array pages)
    return {"threads": threads, "lang": lang, "version": version, "format": fmt,
            "unknowns": problem.n,
            "seconds_per_iteration": timing.best_of(pcg, repeat) / iterations}


def _add_ladder_ratios(results: dict) -> None:
    """Speedup and efficiency against the first thread count, per language and version."""
    first = results["threads"][0]
    base = {(r["lang"], r["version"]): r["seconds_per_iteration"]
            for r in results["ladder"] if r["threads"] == first}
    for r in results["ladder"]:
        r["speedup"] = base[r["lang"], r["version"]] / r["seconds_per_iteration"]
        r["efficiency"] = r["speedup"] * first / r["threads"]


def summary_openmp(results: dict) -> str:
    topo, top = results["topology"], results["threads"][-1]
    st = {s["threads"]: s for s in results["stream"]}
    langs = list(dict.fromkeys(r["lang"] for r in results["ladder"]))
    lines = [f"{topo['model'] or 'CPU'}: {topo['cores']} cores, {topo['sockets']} "
             f"socket{'s' * (topo['sockets'] != 1)}, {topo['numa_nodes']} NUMA "
             f"node{'s' * (topo['numa_nodes'] != 1)}; OMP_PLACES={topo['OMP_PLACES']}, "
             f"OMP_PROC_BIND={topo['OMP_PROC_BIND']}",
             f"Poisson {results['sizes'][0]}^3 cells; STREAM GB/s by threads, triad / "
             "read-only sum: "
             + ", ".join(f"{t}: {s['triad_gbs']:.1f} / {s['read_gbs']:.1f}"
                         for t, s in st.items()),
             "", f"PCG ms per iteration (speedup vs {results['threads'][0]} "
             f"thread{'s' * (results['threads'][0] != 1)}) "
             f"at {top} threads:",
             f"{'lang':>8} " + " ".join(f"{v:>14}" for v in native.LADDER)]
    ladder = {(r["lang"], r["version"]): r for r in results["ladder"] if r["threads"] == top}
    for lang in langs:
        cells = [f"{1e3 * r['seconds_per_iteration']:7.2f} ({r['speedup']:.2f}x)"
                 if (r := ladder.get((lang, v))) else "-" for v in native.LADDER]
        lines.append(f"{lang:>8} " + " ".join(f"{c:>14}" for c in cells))
    lines += ["", f"SpMV alone at {top} threads: GB/s (fraction of STREAM's bound: the read-only "
              "sum and the triad, fitted to the kernel's reads and writes)",
              f"{'lang':>8} " + " ".join(f"{f:>14}" for f in timing.SPMV_FORMATS)]
    spmv = {(r["lang"], r["format"]): r for r in results["spmv"] if r["threads"] == top}
    for lang in langs:
        lines.append(f"{lang:>8} " + " ".join(
            f"{spmv[lang, f]['bandwidth_gbs']:7.1f} "
            f"({timing.format_fraction(spmv[lang, f]['fraction_of_stream']):>5})"
            for f in timing.SPMV_FORMATS))
    lines += bound_notes(list(spmv.values()), results.get("llc_bytes"))
    def seconds(lang, version):
        return ladder[lang, version]["seconds_per_iteration"]
    lines.append("")
    for lang in langs:
        lines.append(f"{lang}: v2 takes {seconds(lang, 'v2') / seconds(lang, 'v0'):.2f} of the "
                     f"time of v0")
    if {"c", "fortran"} <= set(langs):
        lines.append("C / Fortran time per iteration: " + ", ".join(
            f"{v} {seconds('c', v) / seconds('fortran', v):.2f}" for v in native.LADDER))
    return "\n".join(lines + ["", results["numa_note"]])


def bound_notes(runs, llc_bytes) -> list[str]:
    """The lines under a table of SpMV fractions of the bound: timing.ABOVE_BOUND_NOTE where one
    is marked, and timing.cache_note where the SpMV's working set is below 4 x the cache."""
    lines = []
    if any(timing.above_bound(r["fraction_of_stream"]) for r in runs):
        lines.append(timing.ABOVE_BOUND_NOTE)
    working = min((r["read_bytes"] + r["written_bytes"] for r in runs), default=0)
    note = timing.cache_note(working, llc_bytes) if runs and llc_bytes else None
    return lines + ([note] if note else [])


def plot_openmp(results: dict, path: str | Path | None = None):
    """Speedup of every ladder step against the threads; the SpMV bandwidth of every format
    against the measured bound of the CRS SpMV at the same thread count (timing.least_seconds) and
    the STREAM triad's 24-byte figure."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 4.2), layout="constrained")
    threads = results["threads"]
    styles = {"c": "-", "fortran": "--", "numba": ":"}
    colours = dict(zip(native.LADDER, plt.rcParams["axes.prop_cycle"].by_key()["color"]))
    for (lang, version) in dict.fromkeys((r["lang"], r["version"]) for r in results["ladder"]):
        runs = [r for r in results["ladder"] if (r["lang"], r["version"]) == (lang, version)]
        axes[0].plot([r["threads"] for r in runs], [r["speedup"] for r in runs], "o",
                     ls=styles[lang], color=colours[version], label=f"{version} {lang}")
    axes[0].plot(threads, [t / threads[0] for t in threads], "k-", lw=0.8, label="ideal")
    fmt_colours = dict(zip(timing.SPMV_FORMATS, ("C0", "C1", "C2")))
    for (lang, fmt) in dict.fromkeys((r["lang"], r["format"]) for r in results["spmv"]):
        runs = [r for r in results["spmv"] if (r["lang"], r["format"]) == (lang, fmt)]
        axes[1].plot([r["threads"] for r in runs], [r["bandwidth_gbs"] for r in runs], "o",
                     ls=styles[lang], color=fmt_colours[fmt], label=f"{fmt} {lang}")
    axes[1].plot(threads, [s["triad_gbs"] for s in results["stream"]], "ks:",
                 label="STREAM triad")
    # the bound for the CRS SpMV's mix of reads and writes at each thread count, in its GB/s
    crs = {r["threads"]: r for r in results["spmv"] if r["format"] == "crs"}
    axes[1].plot(threads, [(crs[t]["read_bytes"] + crs[t]["written_bytes"]) / 1e9
                           / timing.least_seconds(crs[t]["read_bytes"], crs[t]["written_bytes"], s)
                           for t, s in zip(threads, results["stream"])], "ks-",
                 label="bound (CRS SpMV)")
    n = results["sizes"][0]
    axes[0].set(xlabel="threads", ylabel="speedup (time per PCG iteration)",
                title=f"the PCG ladder, {n}^3 cells")
    axes[1].set(xlabel="threads", ylabel="GB/s (least traffic model)", ylim=(0, None),
                title="SpMV bandwidth against its bound")
    for ax in axes:
        ax.set_xticks(threads)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=10, ncol=2)
    if path:
        fig.savefig(path, dpi=120)
    return fig
