"""`python -m course bench fem1d` and `bench fem3d` (lectures 01_fem1d, 02_fem3d): assembly, the
Jacobi-preconditioned CG and the SpMV per language against SciPy, and the SpMV against the memory-
bandwidth bound that STREAM measures (timing.fraction_of_bound)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import scipy.sparse.linalg
from tqdm.auto import tqdm

from .. import resources, solvers, timing
from ..fem import assembly, mesh
from ..langs import LANGS


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
               "machine": timing.machine(),
               "runs": []}
    steps = [(n, lang) for n in sizes for lang in (*langs, "scipy")]
    for n, lang in tqdm(steps, desc="bench fem1d", unit="run", disable=not progress):
        x = mesh.line_mesh(n)
        build_lang = "numpy" if lang == "scipy" else lang

        def assemble():
            a, rhs = assembly.fem1d_assemble(x, 1.0, 1.0, build_lang)
            assembly.fem1d_boundary(a, rhs, 0.0, build_lang)
            return a, rhs

        a, rhs = assemble()                                   # warm-up (JIT, library load)
        if lang == "scipy":
            solve = lambda: _scipy_pcg(a, rhs, tol)           # noqa: E731
        else:
            solvers.pcg_jacobi(a, rhs, lang, tol=tol)
            solve = lambda: solvers.pcg_jacobi(a, rhs, lang, tol=tol)  # noqa: E731
        iters = solvers.pcg_jacobi(a, rhs, build_lang, tol=tol).iterations
        results["runs"].append({
            "n_elem": n, "lang": lang, "threads": resources.threads_for(build_lang),
            "assemble_seconds": None if lang == "scipy" else timing.best_of(assemble, repeat),
            "solve_seconds": timing.best_of(solve, repeat), "iterations": iters})
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


def summary_fem1d(results: dict) -> str:
    lines = [f"{'n_elem':>9} {'lang':>8} {'assemble s':>11} {'solve s':>10} {'iters':>6} "
             f"{'asm vs numpy':>12} {'solve vs scipy':>14}"]
    for r in results["runs"]:
        asm = f"{r['assemble_seconds']:.2e}" if r["assemble_seconds"] is not None else "-"
        ratio = r.get("assemble_speedup_vs_numpy")
        lines.append(f"{r['n_elem']:>9} {r['lang']:>8} {asm:>11} {r['solve_seconds']:>10.2e} "
                     f"{r['iterations']:>6} {f'{ratio:.1f}x' if ratio else '-':>12} "
                     f"{r['solve_speedup_vs_scipy']:>13.1f}x")
    return "\n".join(lines)


def bench_fem3d(sizes=(16, 32, 48, 80), langs=LANGS, repeat=5, iterations=20,
                stream_n=2**24, progress: bool = True) -> dict:
    """Per language and cube size n^3: assembly (elements per second), PCG seconds per iteration
    (a run of `iterations` iterations), and the SpMV against the STREAM measured in this same run:
    achieved GB/s (from spmv_bytes) and spmv_fraction_of_stream, its fraction of the measured
    bound (timing.fraction_of_bound of its reads and writes, timing.spmv_traffic). SciPy's CSR
    product is the outside reference for the SpMV. Best of `repeat` everywhere. The sizes sweep
    from in-cache to beyond (the SpMV of 80^3 moves 170 MiB, beyond 4 x a 32 MiB last-level
    cache); the summary marks the sizes below 4 x this machine's last-level cache."""
    results = {"suite": "fem3d", "repeat": repeat, "sizes": list(sizes),
               "iterations": iterations,
               "machine": timing.machine(), "llc_bytes": timing.last_level_cache_bytes(),
               "stream": timing.stream(stream_n, repeat), "runs": []}
    steps = [(n, lang) for n in sizes for lang in (*langs, "scipy")]
    for n, lang in tqdm(steps, desc="bench fem3d", unit="run", disable=not progress):
        box = mesh.box_mesh(n, n, n)
        build_lang = "numpy" if lang == "scipy" else lang
        assemble = lambda: assembly.fem3d_assemble(box, 1.0, 1.0, build_lang)  # noqa: E731
        a, rhs = assemble()                                   # warm-up (JIT, library load)
        x = np.random.default_rng(n).standard_normal(a.n)
        run = {"n": n, "lang": lang, "elements": box.n_elem, "unknowns": a.n, "nnz": a.nnz,
               "threads": resources.threads_for(build_lang)}
        if lang == "scipy":
            a_scipy = a.to_scipy()
            spmv = lambda: a_scipy @ x                        # noqa: E731
            run["assemble_seconds"] = run["seconds_per_iteration"] = None
        else:
            spmv = timing.spmv_kernel(a, x, lang)
            run["assemble_seconds"] = timing.best_of(assemble, repeat)
            run["elements_per_second"] = box.n_elem / run["assemble_seconds"]
            pcg = lambda: solvers.pcg_jacobi(a, rhs, lang, tol=1e-300,  # noqa: E731
                                             max_iter=iterations)
            pcg()
            run["seconds_per_iteration"] = timing.best_of(pcg, repeat) / iterations
        spmv()
        run["spmv_seconds"] = timing.best_of(spmv, repeat)
        run["spmv_gflops"] = 2 * a.nnz / run["spmv_seconds"] / 1e9
        run["read_bytes"], run["written_bytes"] = timing.spmv_traffic(a.n, a.nnz)
        run["spmv_gbs"] = timing.spmv_bytes(a.n, a.nnz) / run["spmv_seconds"] / 1e9
        run["spmv_fraction_of_stream"] = timing.fraction_of_bound(
            run["read_bytes"], run["written_bytes"], run["spmv_seconds"], results["stream"])
        results["runs"].append(run)
    return results


def plot_fem3d(results: dict, path: str | Path | None = None):
    """Assembly rate and SpMV bandwidth per language against the mesh size, the SpMV next to its
    measured bound (timing.least_seconds of its reads and writes, dashed) and the STREAM triad's
    24-byte figure (dotted)."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 4), layout="constrained")
    langs = list(dict.fromkeys(r["lang"] for r in results["runs"]))
    for lang in langs:
        runs = [r for r in results["runs"] if r["lang"] == lang]
        if runs[0]["assemble_seconds"] is not None:
            axes[0].semilogy([r["n"] for r in runs], [r["elements_per_second"] for r in runs],
                             "o-", label=lang)
        axes[1].plot([r["n"] for r in runs], [r["spmv_gbs"] for r in runs], "o-", label=lang)
    triad = results["stream"]["triad_gbs"]
    axes[1].axhline(triad, color="k", ls=":", lw=1, label=f"STREAM triad {triad:.1f} GB/s")
    # the bound for the SpMV's mix of reads and writes (of the largest matrix), in its GB/s
    big = max(results["runs"], key=lambda r: r["read_bytes"] + r["written_bytes"])
    roof = ((big["read_bytes"] + big["written_bytes"]) / 1e9
            / timing.least_seconds(big["read_bytes"], big["written_bytes"], results["stream"]))
    axes[1].axhline(roof, color="k", ls="--", label=f"bound for the SpMV {roof:.1f} GB/s")
    axes[0].set(xlabel="n (mesh of n^3 elements)", ylabel="elements per second",
                title="assembly")
    axes[1].set(xlabel="n (mesh of n^3 elements)", ylabel="GB/s (least traffic model)",
                title="SpMV bandwidth against STREAM",
                ylim=(0, 1.1 * max(roof, triad, *(r["spmv_gbs"] for r in results["runs"]))))
    for ax in axes:
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=10)
    if path:
        fig.savefig(path, dpi=120)
    return fig


def summary_fem3d(results: dict) -> str:
    """The table of bench fem3d; "of STREAM" is the fraction of the measured bound (marked above
    100 %), "cache" marks the sizes whose SpMV working set is below 4 x the last-level cache."""
    st, llc = results["stream"], results.get("llc_bytes")
    lines = [f"STREAM ({st['threads']} thread{'s' * (st['threads'] != 1)}): "
             f"copy {st['copy_gbs']:.1f} GB/s, "
             f"triad {st['triad_gbs']:.1f} GB/s, read-only sum {st['read_gbs']:.1f} GB/s; "
             "of STREAM = fraction of the bound they measure for the SpMV's reads and writes",
             f"{'n':>4} {'lang':>8} {'Melem/s':>8} {'s/iter':>9} {'SpMV GB/s':>9} "
             f"{'of STREAM':>9} {'GFLOP/s':>8}"]
    in_cache = []
    for r in results["runs"]:
        rate = r.get("elements_per_second")
        per_iter = r["seconds_per_iteration"]
        cached = llc and timing.cache_note(r["read_bytes"] + r["written_bytes"], llc)
        if cached and r["n"] not in in_cache:
            in_cache.append(r["n"])
        lines.append(f"{r['n']:>4} {r['lang']:>8} {f'{rate / 1e6:.2f}' if rate else '-':>8} "
                     f"{f'{per_iter:.2e}' if per_iter else '-':>9} {r['spmv_gbs']:>9.2f} "
                     f"{timing.format_fraction(r['spmv_fraction_of_stream']):>9} "
                     f"{r['spmv_gflops']:>8.2f}" + ("  cache" if cached else ""))
    if any(timing.above_bound(r["spmv_fraction_of_stream"]) for r in results["runs"]):
        lines.append(timing.ABOVE_BOUND_NOTE)
    if in_cache:
        lines.append(f"cache: n = {', '.join(map(str, in_cache))}: the SpMV's working set is "
                     f"less than {timing.OUT_OF_CACHE_FACTOR} x the last-level cache "
                     f"({llc / 2**20:.0f} MiB): these fractions measure the cache, not the memory")
    return "\n".join(lines)

