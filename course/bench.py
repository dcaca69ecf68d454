"""Benchmarks (not tests): best-of-N timings, ratios measured in one run, plots."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Callable

import numpy as np
import scipy.sparse.linalg
from tqdm.auto import tqdm

from . import fem, fvm, mesh, native, problems, solvers, sparse, toolchain
from .langs import LANGS


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


def _scipy_pcg(a, rhs, tol):
    """SciPy's CG with the same Jacobi preconditioner, as the outside reference."""
    dinv = solvers.jacobi(a)
    m = scipy.sparse.linalg.LinearOperator(a.to_scipy().shape, matvec=lambda r: dinv * r)
    return scipy.sparse.linalg.cg(a.to_scipy(), rhs, rtol=tol, maxiter=10 * a.n, M=m)


def bench_fem1d(sizes=(1_000, 10_000, 100_000), langs=LANGS, repeat=5, tol=1e-10,
                progress: bool = True) -> dict:
    """Assembly and solve times per language and size, best of `repeat`; SciPy's CG as reference.

    Ratios are computed within this one run: `speedup_vs_numpy` for assembly, `speedup_vs_scipy`
    for the solve."""
    results = {"suite": "fem1d", "repeat": repeat, "tol": tol, "sizes": list(sizes),
               "machine": machine(),
               "runs": []}
    steps = [(n, lang) for n in sizes for lang in (*langs, "scipy")]
    for n, lang in tqdm(steps, desc="bench fem1d", unit="run", disable=not progress):
        x = mesh.line_mesh(n)
        build_lang = "numpy" if lang == "scipy" else lang

        def assemble():
            a, rhs = fem.fem1d_assemble(x, 1.0, 1.0, build_lang)
            fem.fem1d_boundary(a, rhs, 0.0, build_lang)
            return a, rhs

        a, rhs = assemble()                                   # warm-up (JIT, library load)
        if lang == "scipy":
            solve = lambda: _scipy_pcg(a, rhs, tol)           # noqa: E731
        else:
            solvers.pcg_jacobi(a, rhs, lang, tol=tol)
            solve = lambda: solvers.pcg_jacobi(a, rhs, lang, tol=tol)  # noqa: E731
        iters = solvers.pcg_jacobi(a, rhs, build_lang, tol=tol).iterations
        results["runs"].append({
            "n_elem": n, "lang": lang, "threads": problems.threads_for(build_lang),
            "assemble_seconds": None if lang == "scipy" else best_of(assemble, repeat),
            "solve_seconds": best_of(solve, repeat), "iterations": iters})
    _add_ratios(results)
    return results


def _add_ratios(results: dict) -> None:
    by_key = {(r["n_elem"], r["lang"]): r for r in results["runs"]}
    for r in results["runs"]:
        numpy_run, scipy_run = by_key.get((r["n_elem"], "numpy")), by_key[(r["n_elem"], "scipy")]
        if r["assemble_seconds"] and numpy_run:
            r["assemble_speedup_vs_numpy"] = numpy_run["assemble_seconds"] / r["assemble_seconds"]
        r["solve_speedup_vs_scipy"] = scipy_run["solve_seconds"] / r["solve_seconds"]


def plot_fem1d(results: dict, path: str | Path | None = None):
    """Log-log plot of assembly and solve time against the number of elements, per language."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 4), layout="constrained")
    langs = list(dict.fromkeys(r["lang"] for r in results["runs"]))
    for ax, key, title in ((axes[0], "assemble_seconds", "assembly"),
                           (axes[1], "solve_seconds", "CG solve")):
        for lang in langs:
            runs = [r for r in results["runs"] if r["lang"] == lang and r[key] is not None]
            if runs:
                ax.loglog([r["n_elem"] for r in runs], [r[key] for r in runs], "o-", label=lang)
        ax.set(xlabel="elements", ylabel=f"seconds (best of {results['repeat']})", title=title)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
    if path:
        fig.savefig(path, dpi=120)
    return fig


# --- memory bandwidth: STREAM and the SpMV ------------------------------------------------------

def stream(n: int = 2**24, repeat: int = 5, lang: str = "c") -> dict:
    """STREAM copy (a = b) and triad (a = b + s c) bandwidth in GB/s, best of `repeat`, with the
    compiled kernels of `lang` on all OpenMP threads. The arrays (8 n bytes each, 128 MiB for the
    default n) are first touched in parallel by stream_init. Bytes counted as STREAM does: 16 per
    element for copy, 24 for triad (write-allocate traffic not counted)."""
    a, b, c = np.empty(n), np.empty(n), np.empty(n)
    native.stream_init(lang, a, b, c)
    copy = best_of(lambda: native.stream_copy(lang, b, a), repeat)
    triad = best_of(lambda: native.stream_triad(lang, 3.0, b, c, a), repeat)
    return {"n": n, "lang": lang, "threads": problems.threads_for(lang),
            "copy_gbs": 16 * n / copy / 1e9, "triad_gbs": 24 * n / triad / 1e9}


# STREAM once per build: every lecture page compares with the same measurement, not with one of
# its own (separate short measurements on a shared machine differ by tens of percent).
STREAM_CACHE = Path(os.environ.get("COURSE_STREAM_CACHE",
                                   native.ROOT / "build" / "stream-reference.json"))
STREAM_MAX_AGE = 6 * 3600          # seconds: an older measurement is taken again
STREAM_REFERENCE_N = 2**24         # 3 arrays of 128 MiB: beyond the caches of laptops and nodes


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
    (every run, for the spread), measured_at (Unix time) and cached (True when reused). Leaves
    the kernels of `lang` at `threads` threads."""
    threads = native.check_int(threads, "threads", minimum=1)
    path = Path(path or STREAM_CACHE)
    key = f"{lang}, {threads} threads, n = {n}, best of {repeat}"
    problems.set_threads(lang, threads)

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
    entry = {"n": n, "lang": lang, "threads": threads, "repeat": repeat,
             "copy_gbs": max(copy), "triad_gbs": max(triad), "triad_runs_gbs": triad,
             "measured_at": time.time()}
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


def use_stream_reference(results: dict, repeat: int = 10) -> dict:
    """Compare the SpMV of a bench_fem3d or bench_openmp `results` with stream_reference() of the
    same thread counts instead of the STREAM measured inside that run (kept as stream_in_run):
    every page of a build then sets its measurements against the same roof. Returns results."""
    if results["suite"] == "fem3d":
        results["stream_in_run"] = results["stream"]
        results["stream"] = stream_reference(results["stream"]["threads"], repeat=repeat)
        for run in results["runs"]:
            run["spmv_fraction_of_stream"] = run["spmv_gbs"] / results["stream"]["triad_gbs"]
    elif results["suite"] == "openmp":
        results["stream_in_run"] = results["stream"]
        results["stream"] = [stream_reference(s["threads"], repeat=repeat)
                             for s in results["stream_in_run"]]
        triad = {s["threads"]: s["triad_gbs"] for s in results["stream"]}
        for run in results["spmv"]:
            run["fraction_of_stream"] = run["bandwidth_gbs"] / triad[run["threads"]]
    else:
        raise ValueError(f"no STREAM to replace in a {results['suite']!r} result")
    return results


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


def bench_fem3d(sizes=(16, 32, 48, 64), langs=LANGS, repeat=5, iterations=20,
                stream_n=2**24, progress: bool = True) -> dict:
    """Per language and cube size n^3: assembly (elements per second), PCG seconds per iteration
    (a run of `iterations` iterations), and the SpMV against the STREAM triad bandwidth measured in
    this same run: achieved GB/s (from spmv_bytes) and its fraction of STREAM. SciPy's CSR product
    is the outside reference for the SpMV. Best of `repeat` everywhere."""
    results = {"suite": "fem3d", "repeat": repeat, "sizes": list(sizes),
               "iterations": iterations,
               "machine": machine(),
               "stream": stream(stream_n, repeat), "runs": []}
    triad = results["stream"]["triad_gbs"]
    steps = [(n, lang) for n in sizes for lang in (*langs, "scipy")]
    for n, lang in tqdm(steps, desc="bench fem3d", unit="run", disable=not progress):
        box = mesh.box_mesh(n, n, n)
        build_lang = "numpy" if lang == "scipy" else lang
        assemble = lambda: fem.fem3d_assemble(box, 1.0, 1.0, build_lang)  # noqa: E731
        a, rhs = assemble()                                   # warm-up (JIT, library load)
        x = np.random.default_rng(n).standard_normal(a.n)
        run = {"n": n, "lang": lang, "elements": box.n_elem, "unknowns": a.n, "nnz": a.nnz,
               "threads": problems.threads_for(build_lang)}
        if lang == "scipy":
            a_scipy = a.to_scipy()
            spmv = lambda: a_scipy @ x                        # noqa: E731
            run["assemble_seconds"] = run["seconds_per_iteration"] = None
        else:
            spmv = spmv_kernel(a, x, lang)
            run["assemble_seconds"] = best_of(assemble, repeat)
            run["elements_per_second"] = box.n_elem / run["assemble_seconds"]
            pcg = lambda: solvers.pcg_jacobi(a, rhs, lang, tol=1e-300,  # noqa: E731
                                             max_iter=iterations)
            pcg()
            run["seconds_per_iteration"] = best_of(pcg, repeat) / iterations
        spmv()
        run["spmv_seconds"] = best_of(spmv, repeat)
        run["spmv_gflops"] = 2 * a.nnz / run["spmv_seconds"] / 1e9
        run["spmv_gbs"] = spmv_bytes(a.n, a.nnz) / run["spmv_seconds"] / 1e9
        run["spmv_fraction_of_stream"] = run["spmv_gbs"] / triad
        results["runs"].append(run)
    return results


def plot_fem3d(results: dict, path: str | Path | None = None):
    """Assembly rate and SpMV bandwidth per language against the mesh size, the SpMV next to the
    STREAM triad bandwidth of the same run (the memory roof)."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4), layout="constrained")
    langs = list(dict.fromkeys(r["lang"] for r in results["runs"]))
    for lang in langs:
        runs = [r for r in results["runs"] if r["lang"] == lang]
        if runs[0]["assemble_seconds"] is not None:
            axes[0].semilogy([r["n"] for r in runs], [r["elements_per_second"] for r in runs],
                             "o-", label=lang)
        axes[1].plot([r["n"] for r in runs], [r["spmv_gbs"] for r in runs], "o-", label=lang)
    triad = results["stream"]["triad_gbs"]
    axes[1].axhline(triad, color="k", ls="--", label=f"STREAM triad {triad:.1f} GB/s")
    axes[0].set(xlabel="n (mesh of n^3 elements)", ylabel="elements per second",
                title="assembly")
    axes[1].set(xlabel="n (mesh of n^3 elements)", ylabel="GB/s (least traffic model)",
                title="SpMV bandwidth against STREAM",
                ylim=(0, 1.1 * max(triad, *(r["spmv_gbs"] for r in results["runs"]))))
    for ax in axes:
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    if path:
        fig.savefig(path, dpi=120)
    return fig


def summary_fem3d(results: dict) -> str:
    st = results["stream"]
    lines = [f"STREAM ({st['threads']} threads): copy {st['copy_gbs']:.1f} GB/s, "
             f"triad {st['triad_gbs']:.1f} GB/s",
             f"{'n':>4} {'lang':>8} {'Melem/s':>8} {'s/iter':>9} {'SpMV GB/s':>9} "
             f"{'of STREAM':>9} {'GFLOP/s':>8}"]
    for r in results["runs"]:
        rate = r.get("elements_per_second")
        per_iter = r["seconds_per_iteration"]
        lines.append(f"{r['n']:>4} {r['lang']:>8} {f'{rate / 1e6:.2f}' if rate else '-':>8} "
                     f"{f'{per_iter:.2e}' if per_iter else '-':>9} {r['spmv_gbs']:>9.2f} "
                     f"{r['spmv_fraction_of_stream']:>8.0%} {r['spmv_gflops']:>8.2f}")
    return "\n".join(lines)


# --- 04_openmp: storage formats and the PCG ladder over a thread sweep --------------------------

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
        a = sparse.SELL.from_crs(problem.off_crs(), problems.SELL_CHUNK, problems.SELL_SIGMA)
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
OMP_NUM_THREADS=48 build/native/release/bin/solf examples/04_openmp/INPUT.DAT v0"""


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
        problems.check_threads(t)
    if "numba" in langs and max(threads) > problems.default_threads("numba"):
        raise ValueError(f"numba runs at most {problems.default_threads('numba')} threads "
                         f"(NUMBA_NUM_THREADS); the sweep asks for {max(threads)}")
    return n, threads


def bench_openmp(sizes=(128,), langs=OPENMP_LANGS, threads=None, repeat=5, iterations=20,
                 stream_n=2**24, progress: bool = True) -> dict:
    """The OpenMP PCG ladder on the course.fvm Poisson problem of n^3 cells, over a thread sweep
    (default 1 .. cores).

    At every thread count: the STREAM copy and triad of the C kernels; per language and ladder
    version the PCG seconds per iteration (a run of `iterations`, the matrix generated again at
    that thread count so that first touch follows the threads); per language the SpMV alone in
    CRS, ELL and SELL-C-sigma, its bandwidth and its fraction of the STREAM triad at the same
    thread count. Best of `repeat` everywhere; speedups relative to the first thread count."""
    n, threads = _check_openmp_args(sizes, langs, threads)
    configs = [(lang, v) for lang in langs for v in native.LADDER
               if lang in solvers.LADDER_LANGS[v]]
    results = {"suite": "openmp", "repeat": repeat, "sizes": [n], "iterations": iterations,
               "threads": threads, "topology": topology(),
               "machine": machine(),
               "stream": [], "ladder": [], "spmv": []}
    results["numa_note"] = numa_note(results["topology"])
    bar = tqdm(total=len(threads) * (1 + len(configs) + len(langs)), desc="bench openmp",
               unit="run", disable=not progress)
    try:
        for t in threads:
            for lang in {*langs, "c"}:
                problems.set_threads(lang, t)
            results["stream"].append({**stream(stream_n, repeat), "threads": t})
            bar.update()
            for lang, version in configs:
                results["ladder"].append(_ladder_run(n, lang, version, t, repeat, iterations))
                bar.update()
            for lang in langs:
                problem = fvm.poisson(n, n, n, lang=lang, fmt="crs")
                for fmt in problems.SPMV_FORMATS:
                    run = spmv_timing(problem, fmt, lang, repeat)
                    run.update(threads=t, lang=lang, format=fmt, fraction_of_stream=(
                        run["bandwidth_gbs"] / results["stream"][-1]["triad_gbs"]))
                    results["spmv"].append(run)
                bar.update()
    finally:
        bar.close()
        for lang in {*langs, "c"}:
            problems.set_threads(lang, problems.default_threads(lang))
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
            "unknowns": problem.n, "seconds_per_iteration": best_of(pcg, repeat) / iterations}


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
    lines = [f"{topo['model'] or 'CPU'}: {topo['cores']} cores, {topo['sockets']} socket(s), "
             f"{topo['numa_nodes']} NUMA node(s); OMP_PLACES={topo['OMP_PLACES']}, "
             f"OMP_PROC_BIND={topo['OMP_PROC_BIND']}",
             f"Poisson {results['sizes'][0]}^3 cells; STREAM triad GB/s by threads: "
             + ", ".join(f"{t}: {s['triad_gbs']:.1f}" for t, s in st.items()),
             "", f"PCG ms per iteration (speedup vs {results['threads'][0]} thread(s)) "
             f"at {top} threads:",
             f"{'lang':>8} " + " ".join(f"{v:>14}" for v in native.LADDER)]
    ladder = {(r["lang"], r["version"]): r for r in results["ladder"] if r["threads"] == top}
    for lang in langs:
        cells = [f"{1e3 * r['seconds_per_iteration']:7.2f} ({r['speedup']:.2f}x)"
                 if (r := ladder.get((lang, v))) else "-" for v in native.LADDER]
        lines.append(f"{lang:>8} " + " ".join(f"{c:>14}" for c in cells))
    lines += ["", f"SpMV alone at {top} threads: GB/s (fraction of STREAM triad)",
              f"{'lang':>8} " + " ".join(f"{f:>14}" for f in problems.SPMV_FORMATS)]
    spmv = {(r["lang"], r["format"]): r for r in results["spmv"] if r["threads"] == top}
    for lang in langs:
        lines.append(f"{lang:>8} " + " ".join(
            f"{spmv[lang, f]['bandwidth_gbs']:7.1f} ({spmv[lang, f]['fraction_of_stream']:4.0%})"
            for f in problems.SPMV_FORMATS))
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


def plot_openmp(results: dict, path: str | Path | None = None):
    """Speedup of every ladder step against the threads; the SpMV bandwidth of every format
    against the STREAM triad of the same thread count (the memory roof)."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4), layout="constrained")
    threads = results["threads"]
    styles = {"c": "-", "fortran": "--", "numba": ":"}
    colours = dict(zip(native.LADDER, plt.rcParams["axes.prop_cycle"].by_key()["color"]))
    for (lang, version) in dict.fromkeys((r["lang"], r["version"]) for r in results["ladder"]):
        runs = [r for r in results["ladder"] if (r["lang"], r["version"]) == (lang, version)]
        axes[0].plot([r["threads"] for r in runs], [r["speedup"] for r in runs], "o",
                     ls=styles[lang], color=colours[version], label=f"{version} {lang}")
    axes[0].plot(threads, [t / threads[0] for t in threads], "k-", lw=0.8, label="ideal")
    fmt_colours = dict(zip(problems.SPMV_FORMATS, ("C0", "C1", "C2")))
    for (lang, fmt) in dict.fromkeys((r["lang"], r["format"]) for r in results["spmv"]):
        runs = [r for r in results["spmv"] if (r["lang"], r["format"]) == (lang, fmt)]
        axes[1].plot([r["threads"] for r in runs], [r["bandwidth_gbs"] for r in runs], "o",
                     ls=styles[lang], color=fmt_colours[fmt], label=f"{fmt} {lang}")
    axes[1].plot(threads, [s["triad_gbs"] for s in results["stream"]], "ks-",
                 label="STREAM triad")
    n = results["sizes"][0]
    axes[0].set(xlabel="threads", ylabel="speedup (time per PCG iteration)",
                title=f"the PCG ladder, {n}^3 cells")
    axes[1].set(xlabel="threads", ylabel="GB/s (least traffic model)", ylim=(0, None),
                title="SpMV bandwidth against STREAM")
    for ax in axes:
        ax.set_xticks(threads)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7, ncol=2)
    if path:
        fig.savefig(path, dpi=120)
    return fig


def bench_halo(**kwargs) -> dict:
    """The MPI suite (05_halo): course.parallel.bench, which starts mpiexec itself."""
    from .parallel.bench import bench_halo as run

    return run(**kwargs)


def plot_halo(results: dict, path=None):
    from .parallel.bench import plot_halo as plot

    return plot(results, path)


def bench_pipecg(**kwargs) -> dict:
    """The CG variants over MPI (06_pipecg): course.parallel.bench, which starts mpiexec."""
    from .parallel.bench import bench_pipecg as run

    return run(**kwargs)


def plot_pipecg(results: dict, path=None):
    from .parallel.bench import plot_pipecg as plot

    return plot(results, path)


def bench_alltoall(**kwargs) -> dict:
    """MPI_Alltoall and the pencil FFT (07_cluster): course.parallel.fft_bench, which starts
    mpiexec."""
    from .parallel.fft_bench import bench_alltoall as run

    return run(**kwargs)


def plot_alltoall(results: dict, path=None):
    from .parallel.fft_bench import plot_alltoall as plot

    return plot(results, path)


def bench_iccg(**kwargs) -> dict:
    """ICCG with reordering (03_iccg): course.iccg.bench_iccg."""
    from .iccg import bench_iccg as run

    return run(**kwargs)


def plot_iccg(results: dict, path=None):
    from .iccg import plot_iccg as plot

    return plot(results, path)


SUITES = {"fem1d": (bench_fem1d, plot_fem1d), "fem3d": (bench_fem3d, plot_fem3d),
          "openmp": (bench_openmp, plot_openmp), "iccg": (bench_iccg, plot_iccg),
          "halo": (bench_halo, plot_halo),
          "pipecg": (bench_pipecg, plot_pipecg), "alltoall": (bench_alltoall, plot_alltoall)}


def run_suite(name: str, json_path: str | None, plot_path: str | None, **kwargs) -> dict:
    bench, plot = SUITES[name]
    results = bench(**kwargs)
    # every result says where it was measured: versions, cores, and inside a batch job the
    # scheduler, job id, node, binding and modules (toolchain.job_context)
    results.setdefault("machine", machine())
    if json_path:
        Path(json_path).write_text(json.dumps(results, indent=2))
    if plot_path:
        plot(results, plot_path)
    return results


def summary_table(results: dict) -> str:
    if results["suite"] == "fem3d":
        return summary_fem3d(results)
    if results["suite"] == "openmp":
        return summary_openmp(results)
    if results["suite"] == "iccg":
        from .iccg import summary_iccg

        return summary_iccg(results)
    if results["suite"] in ("halo", "pipecg"):
        from .parallel import bench as parallel_bench

        return getattr(parallel_bench, f"summary_{results['suite']}")(results)
    if results["suite"] == "alltoall":
        from .parallel.fft_bench import summary_alltoall

        return summary_alltoall(results)
    lines = [f"{'n_elem':>9} {'lang':>8} {'assemble s':>11} {'solve s':>10} {'iters':>6} "
             f"{'asm vs numpy':>12} {'solve vs scipy':>14}"]
    for r in results["runs"]:
        asm = f"{r['assemble_seconds']:.2e}" if r["assemble_seconds"] is not None else "-"
        ratio = r.get("assemble_speedup_vs_numpy")
        lines.append(f"{r['n_elem']:>9} {r['lang']:>8} {asm:>11} {r['solve_seconds']:>10.2e} "
                     f"{r['iterations']:>6} {f'{ratio:.1f}x' if ratio else '-':>12} "
                     f"{r['solve_speedup_vs_scipy']:>13.1f}x")
    return "\n".join(lines)
