"""Benchmarks (not tests): best-of-N timings, ratios measured in one run, plots."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Callable

import scipy.sparse.linalg
from tqdm.auto import tqdm

from . import fem, mesh, problems, solvers, toolchain
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


def bench_fem1d(sizes=(1_000, 10_000, 100_000), langs=LANGS, repeat=5, tol=1e-10) -> dict:
    """Assembly and solve times per language and size, best of `repeat`; SciPy's CG as reference.

    Ratios are computed within this one run: `speedup_vs_numpy` for assembly, `speedup_vs_scipy`
    for the solve."""
    results = {"suite": "fem1d", "repeat": repeat, "tol": tol, "sizes": list(sizes),
               "machine": {k: v for k, v in toolchain.report().items() if k != "problems"},
               "runs": []}
    steps = [(n, lang) for n in sizes for lang in (*langs, "scipy")]
    for n, lang in tqdm(steps, desc="bench fem1d", unit="run"):
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


SUITES = {"fem1d": (bench_fem1d, plot_fem1d)}


def run_suite(name: str, json_path: str | None, plot_path: str | None, **kwargs) -> dict:
    bench, plot = SUITES[name]
    results = bench(**kwargs)
    if json_path:
        Path(json_path).write_text(json.dumps(results, indent=2))
    if plot_path:
        plot(results, plot_path)
    return results


def summary_table(results: dict) -> str:
    lines = [f"{'n_elem':>9} {'lang':>8} {'assemble s':>11} {'solve s':>10} {'iters':>6} "
             f"{'asm vs numpy':>12} {'solve vs scipy':>14}"]
    for r in results["runs"]:
        asm = f"{r['assemble_seconds']:.2e}" if r["assemble_seconds"] is not None else "-"
        ratio = r.get("assemble_speedup_vs_numpy")
        lines.append(f"{r['n_elem']:>9} {r['lang']:>8} {asm:>11} {r['solve_seconds']:>10.2e} "
                     f"{r['iterations']:>6} {f'{ratio:.1f}x' if ratio else '-':>12} "
                     f"{r['solve_speedup_vs_scipy']:>13.1f}x")
    return "\n".join(lines)
