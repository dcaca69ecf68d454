"""`python -m course bench hybrid` (08_hybrid): the same cores as R MPI ranks x T OpenMP threads.

For a fixed number of cores C (this machine's, or --layouts), every layout R x T with R T = C,
from flat MPI (C x 1) to one rank with all threads (1 x C), solves the Poisson problem of
03_openmp with every parallel preconditioner (course.parallel.precond), each run one
`mpiexec -n R ... python -m course solve poisson --parallel --threads T --json`:

- with one thread per rank the IC(0) substitutions run in the natural order (one sequential
  sweep); with T > 1 threads they need colors (CM-RCM, COLORS colors requested) so that the threads
  can share each color's rows: fewer domains make the preconditioner stronger, more colors make it
  weaker and add a barrier per color - the two opposite forces of the lecture;
- the time per iteration split into the local SpMV, the preconditioner, the halo exchanges, the
  reductions and the rest (vector updates and dots), the iterations, the time to solution, and the
  fraction of the node's memory-bandwidth bound (STREAM triad on all C cores, against the least
  traffic of one iteration: bytes_per_iteration) that the iterations reach.

Layouts with R T above the cores are run and flagged (oversubscribed: their timings say little).
The ranks are bound with Open MPI's --map-by slot:PE=T and the threads with OMP_PLACES=cores
(course.parallel.mpi_job.course_solve).
Benchmarks, never tests.
"""

from __future__ import annotations

from tqdm.auto import tqdm

from .. import timing, toolchain
from ..parallel.mpi_job import course_solve

PRECONDITIONERS = (("diagonal", 1), ("bjacobi-ic0", 1), ("asdd-ic0", 2))
COLORS = 10                      # CM-RCM colors requested for threaded substitutions


def parse_layout(text: str) -> tuple[int, int]:
    """"RxT" -> (R, T), both positive; ValueError otherwise."""
    try:
        ranks, threads = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise ValueError(f"a layout is RANKSxTHREADS, e.g. 2x1; got {text!r}") from None
    if ranks < 1 or threads < 1:
        raise ValueError(f"a layout needs at least 1 rank and 1 thread; got {text!r}")
    return ranks, threads


def default_layouts(cores: int) -> list[tuple[int, int]]:
    """Every R x T = cores, flat MPI first."""
    return [(cores // t, t) for t in range(1, cores + 1) if cores % t == 0]


def bytes_per_iteration(n: int, nnz: int, precond: str, sweeps: int) -> int:
    """The least memory traffic of one PCG iteration on the whole problem (course.timing's
    counting): A p, the 3 dots and 3 updates (15 vectors), and M^-1 - Jacobi: r, 1/d, z; IC(0):
    its two triangles (the off-diagonal entries, 12 bytes each) and about 9 vectors (r, z, 1/d
    twice, the two permutations); each extra ASDD sweep one more product, IC(0) and 4 vectors."""
    spmv = timing.spmv_bytes(n, nnz)
    if precond == "diagonal":
        m = 3 * 8 * n
    else:
        ic0 = 12 * (nnz - n) + 9 * 8 * n
        m = sweeps * ic0 + (sweeps - 1) * (spmv + 4 * 8 * n)
    return spmv + 15 * 8 * n + m


def launch_options(ranks: int, threads: int, cores: int) -> list[str]:
    """mpiexec's options of a layout: bound where it fits on the cores (Open MPI's words)."""
    if toolchain.mpi_family(toolchain.mpi4py_library()[1]) != "Open MPI":
        return []
    return ["--map-by", f"slot:PE={threads}", "--bind-to", "core"] \
        if ranks * threads <= cores else ["--bind-to", "none"]


def run_layout(n: int, ranks: int, threads: int, precond: str, sweeps: int, lang: str,
               cores: int, repeat: int, timeout: float = 600) -> dict:
    """The fastest of `repeat` solves of one layout and preconditioner."""
    ordering = ["--ordering", "cm-rcm", "--colors", COLORS] \
        if threads > 1 and precond != "diagonal" else []
    args = ["poisson", "--nx", n, "--ny", n, "--nz", n, "--lang", lang, "--precond", precond,
            *ordering] + (["--asdd-sweeps", sweeps] if precond == "asdd-ic0" else [])
    options = launch_options(ranks, threads, cores)
    runs = [course_solve(ranks, args, threads, options, timeout) for _ in range(repeat)]
    return min(runs, key=lambda out: out["seconds"]["solve"])


def summarise_run(out: dict, n: int, ranks: int, threads: int, cores: int,
                  triad_gbs: float) -> dict:
    """One row of the results from a solve's JSON: seconds per iteration and their split."""
    iterations = max(out["iterations"], 1)
    s = out["seconds"]
    per = {part: s[part] / iterations for part in ("spmv", "precond", "halo", "allreduce")}
    per_iteration = s["solve"] / iterations
    traffic = bytes_per_iteration(out["unknowns"], out["nnz"], out["precond"], out["asdd_sweeps"])
    return {"n": n, "layout": f"{ranks}x{threads}", "ranks": ranks, "threads": threads,
            "precond": out["precond"], "asdd_sweeps": out["asdd_sweeps"],
            "ordering": out["ordering"], "colors_per_rank": out["colors_per_rank"],
            "iterations": out["iterations"], "converged": out["converged"],
            "seconds_per_iteration": per_iteration,
            **{f"{part}_s": value for part, value in per.items()},
            # each part is the slowest rank's: on a small problem their sum can pass the total
            "rest_s": max(per_iteration - sum(per.values()), 0.0),
            "time_to_solution_s": s["solve"],
            "halo_exchanges_per_iteration": out["halo_exchanges_per_iteration"],
            "mpi_thread_level": out["mpi_thread_level"],
            "bytes_per_iteration": traffic,
            "fraction_of_bandwidth_bound": traffic / per_iteration / 1e9 / triad_gbs,
            "oversubscribed": ranks * threads > cores}


def bench_hybrid(sizes=(64,), layouts=None, repeat: int = 3, langs=("c",),
                 progress: bool = True) -> dict:
    """Every layout x preconditioner on each n^3 Poisson problem (see the module docstring)."""
    if len(langs) != 1:
        raise ValueError("bench hybrid takes one language (its kernels do the threads' work)")
    lang = langs[0]
    cores = toolchain.usable_cores()
    pairs = [parse_layout(x) if isinstance(x, str) else tuple(x) for x in layouts] \
        if layouts else default_layouts(cores)
    stream = timing.stream_reference(cores)
    runs = []
    cases = [(n, r, t, p, k) for n in sizes for r, t in pairs for p, k in PRECONDITIONERS]
    for n, r, t, p, k in tqdm(cases, desc="bench hybrid", unit="run", disable=not progress):
        out = run_layout(n, r, t, p, k, lang, cores, repeat)
        runs.append(summarise_run(out, n, r, t, cores, stream["triad_gbs"]))
    over = sorted({run["layout"] for run in runs if run["oversubscribed"]})
    return {"suite": "hybrid", "lang": lang, "cores": cores, "colors": COLORS,
            "stream": stream, "topology": timing.topology(),
            "mpi": toolchain.mpi4py_library()[1], "runs": runs,
            "warning": (f"layouts {', '.join(over)} use more than the {cores} cores: "
                        f"oversubscribed, their timings are not comparable") if over else None}


def summary_hybrid(results: dict) -> str:
    lines = [f"{results['cores']} cores, {results['lang']}; microseconds per iteration; "
             f"bound = STREAM triad of all cores ({results['stream']['triad_gbs']:.1f} GB/s) "
             f"against the least traffic",
             f"{'n':>4} {'layout':>6} {'precond':>12} {'colors':>7} {'its':>5} {'total':>8} "
             f"{'SpMV':>7} {'M^-1':>7} {'halo':>7} {'reduce':>7} {'rest':>7} {'solve s':>8} "
             f"{'bound':>6}"]
    for r in results["runs"]:
        colors = f"{min(r['colors_per_rank'])}-{max(r['colors_per_rank'])}" \
            if min(r["colors_per_rank"]) != max(r["colors_per_rank"]) \
            else str(r["colors_per_rank"][0])
        name = r["precond"] + (f" K={r['asdd_sweeps']}" if r["precond"] == "asdd-ic0" else "")
        us = {k: r[k] * 1e6 for k in ("seconds_per_iteration", "spmv_s", "precond_s", "halo_s",
                                       "allreduce_s", "rest_s")}
        lines.append(f"{r['n']:>4} {r['layout']:>6} {name:>12} {colors:>7} {r['iterations']:>5} "
                     f"{us['seconds_per_iteration']:>8.1f} {us['spmv_s']:>7.1f} "
                     f"{us['precond_s']:>7.1f} {us['halo_s']:>7.1f} {us['allreduce_s']:>7.1f} "
                     f"{us['rest_s']:>7.1f} {r['time_to_solution_s']:>8.3f} "
                     f"{r['fraction_of_bandwidth_bound']:>6.0%}"
                     + ("  (oversubscribed)" if r["oversubscribed"] else ""))
    if results["warning"]:
        lines.append("warning: " + results["warning"])
    return "\n".join(lines)


def plot_hybrid(results: dict, path=None):
    """Per size: the seconds per iteration of every layout and preconditioner, stacked by part,
    and the iterations beside them."""
    import matplotlib.pyplot as plt
    import numpy as np

    sizes = sorted({r["n"] for r in results["runs"]})
    fig, axes = plt.subplots(len(sizes), 2, figsize=(10.0, 4.4 * len(sizes) + 0.4),
                             squeeze=False)
    parts = (("spmv_s", "local SpMV"), ("precond_s", "M^-1"), ("halo_s", "halo"),
             ("allreduce_s", "reductions"), ("rest_s", "vectors, dots"))
    for row, n in zip(axes, sizes):
        runs = [r for r in results["runs"] if r["n"] == n]
        labels = [f"{r['layout']}\n{r['precond'].replace('-ic0', '')}" for r in runs]
        x = np.arange(len(runs))
        bottom = np.zeros(len(runs))
        for key, name in parts:
            values = np.array([max(r[key], 0.0) * 1e3 for r in runs])
            row[0].bar(x, values, bottom=bottom, label=name)
            bottom += values
        row[0].set_ylabel("milliseconds per iteration")
        row[0].set_title(f"{n}^3 cells: time per iteration")
        row[1].bar(x, [r["iterations"] for r in runs], color="tab:gray")
        row[1].set_ylabel("iterations")
        row[1].set_title("iterations to ||r|| <= 1e-8 ||b||")
        for ax in row:
            ax.set_xticks(x, labels, fontsize=9)
        row[0].legend(fontsize=9)
    fig.suptitle(f"ranks x threads on {results['cores']} cores ({results['lang']})")
    fig.tight_layout()
    if path:
        fig.savefig(path)
        plt.close(fig)
    return fig
