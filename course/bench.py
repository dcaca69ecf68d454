"""Benchmarks (not tests): best-of-N timings, ratios measured in one run, plots."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Callable

import numpy as np
import scipy.sparse.linalg
from tqdm.auto import tqdm

from . import fem, mesh, native, problems, solvers, sparse, toolchain
from .langs import LANGS


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
               "machine": {k: v for k, v in toolchain.report().items() if k != "problems"},
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
               "machine": {k: v for k, v in toolchain.report().items() if k != "problems"},
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


SUITES = {"fem1d": (bench_fem1d, plot_fem1d), "fem3d": (bench_fem3d, plot_fem3d)}


def run_suite(name: str, json_path: str | None, plot_path: str | None, **kwargs) -> dict:
    bench, plot = SUITES[name]
    results = bench(**kwargs)
    if json_path:
        Path(json_path).write_text(json.dumps(results, indent=2))
    if plot_path:
        plot(results, plot_path)
    return results


def summary_table(results: dict) -> str:
    if results["suite"] == "fem3d":
        return summary_fem3d(results)
    lines = [f"{'n_elem':>9} {'lang':>8} {'assemble s':>11} {'solve s':>10} {'iters':>6} "
             f"{'asm vs numpy':>12} {'solve vs scipy':>14}"]
    for r in results["runs"]:
        asm = f"{r['assemble_seconds']:.2e}" if r["assemble_seconds"] is not None else "-"
        ratio = r.get("assemble_speedup_vs_numpy")
        lines.append(f"{r['n_elem']:>9} {r['lang']:>8} {asm:>11} {r['solve_seconds']:>10.2e} "
                     f"{r['iterations']:>6} {f'{ratio:.1f}x' if ratio else '-':>12} "
                     f"{r['solve_speedup_vs_scipy']:>13.1f}x")
    return "\n".join(lines)
