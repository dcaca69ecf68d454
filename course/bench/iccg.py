"""`python -m course bench iccg` (lecture 04_iccg): ICCG on the Poisson problem for every ordering
(natural, RCM, multicolor and CM-RCM over a sweep of colors) and thread count: iterations, colors,
synchronisations, seconds per iteration, and the bandwidth of one iteration against the memory-
bandwidth bound that STREAM measures (timing.fraction_of_bound)."""

from __future__ import annotations

from tqdm.auto import tqdm

from .. import native, resources, timing, toolchain
from ..fem import fvm
from ..solvers import iccg as ic
from ..solvers import ordering
from ..sparse import CRS
BENCH_ORDERINGS = (("natural", None), ("rcm", None)) + tuple(
    (name, k) for name in ("mc", "cm-rcm") for k in (2, 3, 4, 8, 16, 32))


def iteration_traffic(ap: CRS) -> tuple[int, int]:
    """The least memory traffic of one compiled ICCG iteration (8-byte values, 4-byte indices) as
    (read_bytes, written_bytes): the SpMV (D, L_A, U_A with their columns and row pointers, p
    read; q written), the two substitutions (d, L, L^T values, their columns and row pointers,
    r read; z written, then read and written again) and the vector updates (rho: r, z read;
    p = z + beta p: 2 reads, 1 write; (p, q): 2 reads; x, r: 4 reads, 2 writes)."""
    n, off = ap.n, ap.nnz - ap.n
    pattern = 12 * off + 8 * (n + 1)                    # columns + values, two row pointers
    spmv = (8 * n + pattern + 8 * n, 8 * n)
    substitutions = (8 * n + pattern + 8 * n * 2, 8 * n * 2)
    vectors = (8 * n * (2 + 2 + 2 + 4), 8 * n * (1 + 2))
    return tuple(sum(part) for part in zip(spmv, substitutions, vectors))


def iteration_bytes(ap: CRS) -> int:
    """The least memory traffic of one compiled ICCG iteration: the sum of iteration_traffic."""
    return sum(iteration_traffic(ap))


def bench_iccg(sizes=(32,), langs=("c", "fortran", "numba"), threads=None, repeat=3,
               orderings=BENCH_ORDERINGS, stream_n=2**24, progress: bool = True) -> dict:
    """ICCG on the Poisson problem of n^3 cells for every ordering of `orderings` (mc and cm-rcm
    over a sweep of colors) and every thread count: iterations, colors, synchronisations and
    seconds per iteration (best of `repeat` solves); the bandwidth of natural on one thread and
    of CM-RCM (the most colors) on all threads against STREAM of the same run
    (fraction_of_stream: timing.fraction_of_bound of an iteration's reads and writes); Numba / C.
    The default 32^3 cells keep the sweep short and sit in the caches of most machines: the
    summary says so (timing.cache_note)."""
    if len(sizes) != 1:
        raise ValueError(f"bench iccg takes one size (n of the n^3 cells), got {list(sizes)}")
    n = native.check_int(sizes[0], "size", minimum=2)
    threads = list(threads) if threads else list(range(1, toolchain.usable_cores() + 1))
    for t in threads:
        resources.check_threads(t)
    problem = fvm.poisson(n, n, n, lang="numba")
    a = problem.full_crs()
    results = {"suite": "iccg", "sizes": [n], "repeat": repeat, "threads": threads,
               "machine": timing.machine(), "llc_bytes": timing.last_level_cache_bytes(),
               "stream": [], "runs": []}
    bar = tqdm(total=len(threads) * len(orderings) * len(langs), desc="bench iccg",
               disable=not progress)
    try:
        for t in threads:
            for lang in {*langs, "c"}:
                resources.set_threads(lang, min(t, resources.default_threads(lang))
                                     if lang == "numba" else t)
            results["stream"].append({**timing.stream(stream_n, repeat), "threads": t})
            for name, k in orderings:
                order = ordering.order(a, name, k)
                ap = ordering.permute(a, order.perm)
                bp = problem.b[order.perm]
                read_bytes, written_bytes = iteration_traffic(ap)
                nbytes = read_bytes + written_bytes
                parts = ic.split(ap)
                for lang in langs:
                    factor = ic.ic0(parts, lang)
                    solve = (lambda: ic.iccg(parts, bp, order.color_ptr, lang,  # noqa: E731
                                             1e-8, factor=factor))
                    res = solve()
                    seconds = timing.best_of(solve, repeat) / max(res.iterations, 1)
                    results["runs"].append({
                        "threads": t, "lang": lang, "ordering": name, "colors_requested": k,
                        "colors": order.colors, "iterations": res.iterations,
                        "synchronisations_per_iteration":
                            ic.synchronisations_per_iteration(order.colors, lang),
                        "seconds_per_iteration": seconds, "bytes_per_iteration": nbytes,
                        "read_bytes": read_bytes, "written_bytes": written_bytes,
                        "bandwidth_gbs": nbytes / seconds / 1e9,
                        "fraction_of_stream": timing.fraction_of_bound(
                            read_bytes, written_bytes, seconds, results["stream"][-1])})
                    bar.update()
    finally:
        bar.close()
        for lang in {*langs, "c"}:
            resources.set_threads(lang, resources.default_threads(lang))
    runs = results["runs"]
    c_time = {(r["threads"], r["ordering"], r["colors_requested"]): r["seconds_per_iteration"]
              for r in runs if r["lang"] == "c"}
    for r in runs:
        key = (r["threads"], r["ordering"], r["colors_requested"])
        if key in c_time:
            r["time_vs_c"] = r["seconds_per_iteration"] / c_time[key]
    cmrcm = [r for r in runs if r["ordering"] == "cm-rcm" and r["lang"] == "c"
             and r["threads"] == threads[-1]]
    results["bandwidth_bound"] = {
        "natural_1_thread": next((r for r in runs if r["ordering"] == "natural"
                                  and r["lang"] == "c" and r["threads"] == threads[0]), None),
        "cm_rcm_all_threads": max(cmrcm, key=lambda r: r["colors"]) if cmrcm else None}
    return results


def summary_iccg(results: dict) -> str:
    top = results["threads"][-1]
    lines = [f"ICCG, Poisson {results['sizes'][0]}^3 cells; STREAM triad GB/s by threads: "
             + ", ".join(f"{s['threads']}: {s['triad_gbs']:.1f}" for s in results["stream"]),
             "", f"{'ordering':>9} {'K':>3} {'colors':>6} {'iters':>6} {'syncs/it':>8} "
             f"{'ms/it C':>8} {'numba/C':>8} (at {top} threads)"]
    runs = results["runs"]
    for r in runs:
        if r["lang"] != "c" or r["threads"] != top:
            continue
        nb = next((q for q in runs if q["lang"] == "numba" and q["threads"] == top
                   and q["ordering"] == r["ordering"]
                   and q["colors_requested"] == r["colors_requested"]), None)
        lines.append(f"{r['ordering']:>9} {r['colors_requested'] or '-':>3} {r['colors']:>6} "
                     f"{r['iterations']:>6} {r['synchronisations_per_iteration']:>8} "
                     f"{1e3 * r['seconds_per_iteration']:>8.3f} "
                     f"{nb['time_vs_c'] if nb else float('nan'):>8.2f}")
    lines += ["", "fraction of the bound: an iteration's least reads and writes at the rates "
              "of STREAM triad and the read-only sum of the same threads (timing.least_seconds)"]
    bound = [r for r in results["bandwidth_bound"].values() if r]
    for label, r in results["bandwidth_bound"].items():
        if r:
            lines.append(f"{label}: {r['bandwidth_gbs']:.1f} GB/s = "
                         f"{timing.format_fraction(r['fraction_of_stream'])} of the bound "
                         f"({r['threads']} thread{'s' if r['threads'] > 1 else ''}, "
                         f"{r['bytes_per_iteration'] / 1e6:.1f} MB per iteration)")
    if any(timing.above_bound(r["fraction_of_stream"]) for r in bound):
        lines.append(timing.ABOVE_BOUND_NOTE)
    llc = results.get("llc_bytes")
    note = (timing.cache_note(min(r["bytes_per_iteration"] for r in bound), llc)
            if bound and llc else None)
    if note:
        lines.append(note)
    return "\n".join(lines)


def plot_iccg(results: dict, path=None):
    """Iterations against colors (mc, cm-rcm; natural and rcm as lines), and time per iteration
    against threads for every ordering (C)."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 4.2), layout="constrained")
    first = results["threads"][0]
    runs = [r for r in results["runs"] if r["lang"] == "c"]
    for name, style in (("mc", "o-"), ("cm-rcm", "s-")):
        sel = [r for r in runs if r["ordering"] == name and r["threads"] == first]
        axes[0].plot([r["colors"] for r in sel], [r["iterations"] for r in sel], style,
                     label=name)
    for name, style in (("natural", "k--"), ("rcm", "k:")):
        sel = [r for r in runs if r["ordering"] == name and r["threads"] == first]
        if sel:
            axes[0].axhline(sel[0]["iterations"], ls=style[1:], color="k", label=name)
    axes[0].set(xscale="log", xlabel="colors", ylabel="ICCG iterations",
                title=f"iterations against colors, {results['sizes'][0]}^3 cells")
    for key in dict.fromkeys((r["ordering"], r["colors_requested"]) for r in runs):
        sel = [r for r in runs if (r["ordering"], r["colors_requested"]) == key]
        axes[1].plot([r["threads"] for r in sel], [1e3 * r["seconds_per_iteration"] for r in sel],
                     "o-", label=f"{key[0]} {key[1] or ''}".strip())
    axes[1].set(xlabel="threads", ylabel="ms per iteration (C)", title="time per iteration")
    for ax in axes:
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=10, ncol=2)
    if path:
        fig.savefig(path, dpi=120)
    return fig
