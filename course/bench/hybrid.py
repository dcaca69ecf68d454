"""`python -m course bench hybrid` (08_hybrid): the same cores as R MPI ranks x T OpenMP threads.

For a fixed number of cores C (this machine's, or --layouts), every layout R x T with R T = C,
from flat MPI (C x 1) to one rank with all threads (1 x C), solves the heat-conduction problem of
02_fem3d on n^3 elements (the Q1 hexahedra: 27 nonzeros a row) with every parallel
preconditioner of the compiled programs, `repeat` runs each of
`mpiexec -n R fem3d_mpi_c INPUT` (course.parallel.mpi_job.run_fem3d_mpi; fem3d_mpi_f with
--langs fortran), the nodes cut into R slabs along z:

- the whole CG loop runs in one OpenMP parallel region per rank (src_c/06_pipecg/cg_mpi.c): the
  products, the substitutions, the vector updates and the dot products are all shared by the T
  threads, and the master thread alone calls MPI (MPI_THREAD_FUNNELED);
- with one thread per rank the IC(0) substitutions run in the natural order (one sequential
  sweep); with T > 1 threads they need colors (CM-RCM, COLORS colors asked for) so that the
  threads can share each color's rows: fewer domains make the preconditioner stronger, more colors
  make it weaker and add a barrier per color - the two opposite forces of the lecture;
- reported per layout and preconditioner: the median and the min-max spread of the programs' own
  microseconds per iteration (their clock around the solve, the slowest rank), the median time to
  solution, the iterations, the colors, and the fraction of the memory-bandwidth bound
  (course.timing.fraction_of_bound: the least reads and writes of one iteration,
  traffic_per_iteration, against the STREAM reference of all C cores) that the median reaches.

`fastest_layout` names the fastest layout of a preconditioner only when its median lies outside
the spread of every other layout, and calls the others within it a tie.

With driver=True, a second series runs the same layouts through the course's Python driver,
`mpiexec -n R python -m course solve fem3d --parallel --threads T --json`: the same C kernels for
the products and the substitutions, but CG's vector updates and dot products in NumPy on one thread
per rank. It splits the time per iteration into its parts (the SpMV, M^-1, the halo exchanges, the
reductions and the rest), which the compiled programs do not report: what the preconditioner costs
against a product, and what the serial vector work costs a layout with many threads.

The default size is the smallest whose matrix and vectors exceed four times the last-level cache
(default_size), so that the iterations stream from memory. Layouts with R T above the cores are
run and flagged (oversubscribed: their timings say little). The ranks are bound with Open MPI's
--map-by slot:PE=T --bind-to core and the threads with OMP_PLACES=cores, OMP_PROC_BIND=close.
Benchmarks, never tests.
"""

from __future__ import annotations


from tqdm.auto import tqdm

from .. import timing, toolchain
from ..parallel.mpi_job import course_solve, run_fem3d_mpi

PRECONDITIONERS = (("diagonal", 1), ("bjacobi-ic0", 1), ("asdd-ic0", 2))
COLORS = 10                      # CM-RCM colors requested for threaded substitutions
BYTES_PER_ROW = 27 * 12 + 10 * 8          # the 27-point matrix and ten vectors of one iteration
SIZE_CAP = 128                            # 2.1 million unknowns: a laptop's memory
PARTS = ("spmv", "precond", "halo", "allreduce")


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


def default_size(cache_bytes: int | None = None) -> int:
    """The smallest n (a multiple of 8) whose (n + 1)^3 rows of BYTES_PER_ROW exceed 4 times the
    last-level cache (course.timing.last_level_cache_bytes; 48 where the system tells none), at
    most SIZE_CAP."""
    cache = cache_bytes if cache_bytes is not None else timing.last_level_cache_bytes()
    if not cache:
        return 48
    n = 16
    while (n + 1) ** 3 * BYTES_PER_ROW < 4 * cache and n < SIZE_CAP:
        n += 8
    return n


def working_set_bytes(n: int) -> int:
    """The matrix and vectors of the n^3-element problem (BYTES_PER_ROW a row): what default_size
    compares with the cache."""
    return (n + 1) ** 3 * BYTES_PER_ROW


def traffic_per_iteration(n: int, nnz: int, precond: str, sweeps: int) -> tuple[int, int]:
    """The least memory traffic of one PCG iteration on the whole problem, split into the bytes
    its loads name and the bytes its stores name (course.timing's counting, for
    timing.fraction_of_bound): A p (timing.spmv_traffic); the 3 dots (6 vectors read) and 3
    updates (6 read, 3 written); M^-1 - Jacobi: r and 1/d read, z written; IC(0): its two
    triangles (the off-diagonal entries, 12 bytes each) and 7 vectors read (r, 1/d twice, the
    forward result, the two permutations, the backward input) and 2 written (the forward result,
    z); each extra additive Schwarz sweep one more product (its result: the residual r - A z),
    IC(0), and 4 vectors: r, z and the correction read, z written."""
    spmv_read, spmv_written = timing.spmv_traffic(n, nnz)
    read, written = spmv_read + 12 * 8 * n, spmv_written + 3 * 8 * n
    if precond == "diagonal":
        return read + 2 * 8 * n, written + 8 * n
    ic0_read, ic0_written = 12 * (nnz - n) + 7 * 8 * n, 2 * 8 * n
    read += sweeps * ic0_read + (sweeps - 1) * (spmv_read + 3 * 8 * n)
    written += sweeps * ic0_written + (sweeps - 1) * (spmv_written + 8 * n)
    return read, written


def bytes_per_iteration(n: int, nnz: int, precond: str, sweeps: int) -> int:
    """The least memory traffic of one PCG iteration, reads and writes together
    (traffic_per_iteration)."""
    return sum(traffic_per_iteration(n, nnz, precond, sweeps))


def launch_options(ranks: int, threads: int, cores: int) -> list[str]:
    """mpiexec's options of a layout: bound where it fits on the cores (Open MPI's words)."""
    if toolchain.mpi_family(toolchain.mpi4py_library()[1]) != "Open MPI":
        return []
    return ["--map-by", f"slot:PE={threads}", "--bind-to", "core"] \
        if ranks * threads <= cores else ["--bind-to", "none"]


def ordering_of(threads: int, precond: str) -> tuple[str, int]:
    """The ordering of each rank's IC(0): natural with one thread (and for Jacobi), CM-RCM with
    COLORS colors asked for when the threads share the substitutions."""
    return ("cm-rcm", COLORS) if threads > 1 and precond != "diagonal" else ("natural", 0)


def run_layout(lang: str, n: int, ranks: int, threads: int, precond: str, sweeps: int,
               cores: int, repeat: int, timeout: float = 900) -> list[dict]:
    """`repeat` runs of the compiled program on one layout and preconditioner."""
    ordering, colors = ordering_of(threads, precond)
    return [run_fem3d_mpi(lang, n, ranks, precond, sweeps, threads, ordering, colors,
                          mpiexec_options=launch_options(ranks, threads, cores), timeout=timeout)
            for _ in range(repeat)]


def summarise_layout(runs: list[dict], cores: int, reference: dict) -> dict:
    """One row of the results from the runs of one layout and preconditioner: the median and
    spread of the microseconds per iteration and of the time to solution, and the bound."""
    first = runs[0]
    per_iteration = timing.spread(run["us_per_iteration"] for run in runs)
    solve = timing.spread(run["seconds"] for run in runs)
    read, written = traffic_per_iteration(first["unknowns"], first["nnz"], first["precond"],
                                          first["sweeps"])
    return {"n": first["n"], "layout": f"{first['ranks']}x{first['threads']}",
            "ranks": first["ranks"], "threads": first["threads"], "program": first["program"],
            "precond": first["precond"], "asdd_sweeps": first["sweeps"],
            "ordering": first["ordering"], "colors_per_rank": list(first["colors_per_rank"]),
            "unknowns": first["unknowns"], "nnz": first["nnz"],
            "iterations": first["iterations"],
            "same_iterations": len({run["iterations"] for run in runs}) == 1,
            "converged": all(run["converged"] for run in runs),
            "repeat": len(runs), "us_per_iteration": per_iteration["median"],
            "us_min": per_iteration["min"], "us_max": per_iteration["max"],
            "us_runs": [run["us_per_iteration"] for run in runs],
            "time_to_solution_s": solve["median"], "solve_min_s": solve["min"],
            "solve_max_s": solve["max"],
            "reductions_per_iteration": first["reductions_per_iteration"],
            "halo_exchanges_per_iteration": first["halo_exchanges_per_iteration"],
            "mpi_thread_level": first["mpi_thread_level"],
            "read_bytes": read, "written_bytes": written, "bytes_per_iteration": read + written,
            "fraction_of_bandwidth_bound": timing.fraction_of_bound(
                read, written, per_iteration["median"] * 1e-6, reference),
            "oversubscribed": first["ranks"] * first["threads"] > cores}


def run_driver(lang: str, n: int, ranks: int, threads: int, precond: str, sweeps: int,
               cores: int, repeat: int, timeout: float = 900) -> dict:
    """The Python driver's fastest of `repeat` solves of one layout and preconditioner (the same
    n^3-element problem and slabs as the programs)."""
    ordering, colors = ordering_of(threads, precond)
    args = ["fem3d", "--nx", n, "--ny", n, "--nz", n, "--lang", lang, "--precond", precond,
            "--px", 1, "--py", 1, "--pz", ranks,
            *(["--ordering", ordering, "--colors", colors] if colors else []),
            *(["--asdd-sweeps", sweeps] if precond == "asdd-ic0" else [])]
    options = launch_options(ranks, threads, cores)
    runs = [course_solve(ranks, args, threads, options, timeout) for _ in range(repeat)]
    return min(runs, key=lambda out: out["seconds"]["solve"])


def summarise_driver(out: dict, n: int, ranks: int, threads: int, cores: int) -> dict:
    """One row of the driver's series: seconds per iteration and their split."""
    iterations = max(out["iterations"], 1)
    s = out["seconds"]
    per = {part: s[part] / iterations for part in PARTS}
    per_iteration = s["solve"] / iterations
    return {"n": n, "layout": f"{ranks}x{threads}", "ranks": ranks, "threads": threads,
            "precond": out["precond"], "asdd_sweeps": out["asdd_sweeps"],
            "ordering": out["ordering"], "colors_per_rank": out["colors_per_rank"],
            "iterations": out["iterations"], "converged": out["converged"],
            "seconds_per_iteration": per_iteration,
            **{f"{part}_s": value for part, value in per.items()},
            # each part is the slowest rank's (its halo and reductions include the wait for
            # the other ranks): their sum can pass the total, and then the rest is not resolved
            "rest_s": max(per_iteration - sum(per.values()), 0.0),
            "rest_resolved": per_iteration >= sum(per.values()),
            "oversubscribed": ranks * threads > cores}


def bench_hybrid(sizes=None, layouts=None, repeat: int = 3, langs=("c",),
                 progress: bool = True, driver: bool = False, driver_size: int | None = None,
                 driver_repeat: int = 1) -> dict:
    """Every layout x preconditioner on each n^3-element problem, the compiled programs `repeat`
    times each; with `driver` the Python driver's split too, on driver_size (default: the first
    size), best of driver_repeat (see the module docstring)."""
    if len(langs) != 1:
        raise ValueError("bench hybrid takes one language (its program does the threads' work)")
    lang = langs[0]
    cores = toolchain.usable_cores()
    sizes = list(sizes) if sizes else [default_size()]
    pairs = [parse_layout(x) if isinstance(x, str) else tuple(x) for x in layouts] \
        if layouts else default_layouts(cores)
    reference = timing.stream_reference(cores)
    cases = [(n, r, t, p, k) for n in sizes for r, t in pairs for p, k in PRECONDITIONERS]
    runs = []
    for n, r, t, p, k in tqdm(cases, desc="bench hybrid", unit="case", disable=not progress):
        runs.append(summarise_layout(run_layout(lang, n, r, t, p, k, cores, repeat), cores,
                                     reference))
    split = []
    if driver:
        m = driver_size or sizes[0]
        for r, t, p, k in tqdm([(r, t, p, k) for r, t in pairs for p, k in PRECONDITIONERS],
                               desc="bench hybrid, driver", unit="case", disable=not progress):
            split.append(summarise_driver(run_driver(lang, m, r, t, p, k, cores, driver_repeat),
                                          m, r, t, cores))
    over = sorted({run["layout"] for run in runs if run["oversubscribed"]})
    return {"suite": "hybrid", "lang": lang, "cores": cores, "colors": COLORS, "repeat": repeat,
            "driver_repeat": driver_repeat if driver else 0,
            "sizes": sizes, "default_size": default_size(),
            "llc_bytes": timing.last_level_cache_bytes(),
            "working_set_bytes": {n: working_set_bytes(n) for n in sizes},
            "stream": reference, "topology": timing.topology(),
            "mpi": toolchain.mpi4py_library()[1], "runs": runs, "driver": split,
            "warning": (f"layouts {', '.join(over)} use more than the {cores} cores: "
                        f"oversubscribed, their timings are not comparable") if over else None}


def fastest_layout(results: dict, precond: str, n: int | None = None) -> dict:
    """The layout of the least median time per iteration for `precond` (on size n, default the
    first), and whether it beats the others beyond the spread: fastest (its layout, or None when
    another layout's spread reaches its median's), tied (the layouts whose min-max range reaches
    the best median's range, the best first), and text, one clause for a sentence."""
    n = results["sizes"][0] if n is None else n
    mine = [r for r in results["runs"]
            if r["precond"] == precond and r["n"] == n and not r["oversubscribed"]]
    if not mine:
        raise ValueError(f"no run of {precond} on {n}^3 elements within the cores")
    mine.sort(key=lambda r: r["us_per_iteration"])
    best = mine[0]
    tied = [best] + [r for r in mine[1:] if r["us_min"] <= best["us_max"]]

    def shown(r):
        return (f"{layout_name(r['layout'])}, {r['us_per_iteration']:,.0f} µs "
                f"({r['us_min']:,.0f}–{r['us_max']:,.0f})")
    if len(mine) == 1:
        text = f"{precond}: only {shown(best)} was run"
    elif len(tied) == 1:
        text = (f"{precond}: fastest {shown(best)}, beyond the spread of "
                + " and ".join(shown(r) for r in mine[1:]))
    else:
        text = (f"{precond}: a tie within the spread, " + " and ".join(shown(r) for r in tied)
                + "".join(f"; slower {shown(r)}" for r in mine if r not in tied))
    return {"precond": precond, "n": n, "fastest": best["layout"] if len(tied) == 1 else None,
            "tied": [r["layout"] for r in tied], "text": text}


def solve_over_spmv(results: dict) -> dict:
    """From the driver's series: M^-1 of localized IC(0) (one sweep) over the SpMV, per layout
    ({layout: ratio}), the cost of one local solve in products on this machine."""
    return {r["layout"]: r["precond_s"] / r["spmv_s"] for r in results.get("driver", [])
            if r["precond"] == "bjacobi-ic0" and r["spmv_s"] > 0}


def layout_name(layout: str) -> str:
    """"2x1" as prose writes it: "2 × 1"."""
    return layout.replace("x", " × ")


def _colors(values) -> str:
    low, high = min(values), max(values)
    return str(low) if low == high else f"{low}-{high}"


def summary_hybrid(results: dict) -> str:
    reference = results["stream"]
    lines = [f"{results['cores']} cores, fem3d_mpi_{results['lang'][0]} (the whole CG loop on "
             f"the threads), {results['repeat']} runs a case: median and min-max of "
             f"microseconds per iteration; bound = the least reads and writes of an iteration "
             f"against STREAM of all cores (read {reference.get('read_gbs', float('nan')):.1f}, "
             f"triad {reference['triad_gbs']:.1f} GB/s)",
             f"{'n':>4} {'layout':>6} {'precond':>14} {'colors':>7} {'its':>5} {'median':>9} "
             f"{'min-max':>17} {'solve s':>8} {'bound':>6}"]
    above = False
    for r in results["runs"]:
        name = r["precond"] + (f" K={r['asdd_sweeps']}" if r["precond"] == "asdd-ic0" else "")
        bound = timing.format_fraction(r["fraction_of_bandwidth_bound"])
        above |= timing.above_bound(r["fraction_of_bandwidth_bound"])
        lines.append(f"{r['n']:>4} {r['layout']:>6} {name:>14} {_colors(r['colors_per_rank']):>7} "
                     f"{r['iterations']:>5} {r['us_per_iteration']:>9.1f} "
                     f"{r['us_min']:>8.1f}-{r['us_max']:<8.1f} {r['time_to_solution_s']:>8.3f} "
                     f"{bound:>6}" + ("  (oversubscribed)" if r["oversubscribed"] else ""))
    if above:
        lines.append(timing.ABOVE_BOUND_NOTE)
    for n in results["sizes"]:
        for precond, _ in PRECONDITIONERS:
            try:
                lines.append(f"{n}^3: " + fastest_layout(results, precond, n)["text"])
            except ValueError:
                pass
    if results.get("driver"):
        lines.append("the Python driver (the same C products and substitutions; CG's vector "
                     "updates and dots in NumPy on one thread per rank), "
                     + ("one run" if results.get("driver_repeat", 1) == 1 else
                        f"best of {results['driver_repeat']} runs")
                     + ": microseconds per iteration (halo and reduce include the wait for the "
                     "other ranks; rest n/r: not resolved, the slowest ranks' parts add up to "
                     "more than the total)")
        lines.append(f"{'n':>4} {'layout':>6} {'precond':>14} {'its':>5} {'total':>8} "
                     f"{'SpMV':>7} {'M^-1':>7} {'halo':>7} {'reduce':>7} {'rest':>7}")
        for r in results["driver"]:
            name = r["precond"] + (f" K={r['asdd_sweeps']}" if r["precond"] == "asdd-ic0"
                                   else "")
            us = {k: r[k] * 1e6 for k in ("seconds_per_iteration", "spmv_s", "precond_s",
                                           "halo_s", "allreduce_s", "rest_s")}
            lines.append(f"{r['n']:>4} {r['layout']:>6} {name:>14} {r['iterations']:>5} "
                         f"{us['seconds_per_iteration']:>8.1f} {us['spmv_s']:>7.1f} "
                         f"{us['precond_s']:>7.1f} {us['halo_s']:>7.1f} "
                         f"{us['allreduce_s']:>7.1f} "
                         + (f"{us['rest_s']:>7.1f}" if r.get("rest_resolved", True)
                            else f"{'n/r':>7}"))
    if results["warning"]:
        lines.append("warning: " + results["warning"])
    return "\n".join(lines)


def plot_hybrid(results: dict, path=None):
    """Per size: the median microseconds per iteration of every layout and preconditioner with
    the min-max spread as error bars, and the iterations beside them; with the driver's series a
    last row, its time per iteration stacked by part."""
    import matplotlib.pyplot as plt
    import numpy as np

    sizes = results["sizes"]
    rows = len(sizes) + (1 if results.get("driver") else 0)
    fig = plt.figure(figsize=(10.4, 4.6 * rows + 0.4))
    grid = fig.add_gridspec(rows, 2)
    for row, n in enumerate(sizes):
        runs = [r for r in results["runs"] if r["n"] == n]
        labels = [f"{r['layout']}\n{r['precond'].replace('-ic0', '')}" for r in runs]
        x = np.arange(len(runs))
        median = np.array([r["us_per_iteration"] for r in runs])
        errors = np.array([[m - r["us_min"] for m, r in zip(median, runs)],
                           [r["us_max"] - m for m, r in zip(median, runs)]])
        time_ax, its_ax = fig.add_subplot(grid[row, 0]), fig.add_subplot(grid[row, 1])
        time_ax.bar(x, median / 1e3, yerr=errors / 1e3, capsize=4, color="tab:blue")
        time_ax.set_ylabel("ms per iteration")
        time_ax.set_title(f"{n}³ elements: fem3d_mpi_{results['lang'][0]}, median, min-max",
                          fontsize=12)
        its_ax.bar(x, [r["iterations"] for r in runs], color="tab:gray")
        its_ax.set_ylabel("iterations")
        its_ax.set_title("iterations to ‖r‖ ≤ 1e-8 ‖b‖")
        for ax in (time_ax, its_ax):
            ax.set_xticks(x, labels, fontsize=10)
    if results.get("driver"):
        ax = fig.add_subplot(grid[rows - 1, :])
        runs = results["driver"]
        x = np.arange(len(runs))
        bottom = np.zeros(len(runs))
        for key, name in (("spmv_s", "SpMV"), ("precond_s", "M⁻¹"), ("halo_s", "halo"),
                          ("allreduce_s", "reductions"), ("rest_s", "vectors, dots (NumPy)")):
            values = np.array([max(r[key], 0.0) * 1e3 for r in runs])
            ax.bar(x, values, bottom=bottom, label=name)
            bottom += values
        # the total per iteration: where the slowest ranks' parts stand above it, the rest is
        # not resolved
        ax.scatter(x, [r["seconds_per_iteration"] * 1e3 for r in runs], marker="_", s=400,
                   color="black", zorder=3, label="total")
        ax.set_xticks(x, [f"{r['layout']}\n{r['precond'].replace('-ic0', '')}" for r in runs],
                      fontsize=10)
        ax.set_ylabel("ms per iteration")
        count = results.get("driver_repeat", 1)
        ax.set_title(f"{runs[0]['n']}³ elements: the Python driver's split, "
                     + ("one run" if count == 1 else f"best of {count} runs"))
        ax.legend(fontsize=10, loc="upper left")
    fig.suptitle(f"ranks x threads on {results['cores']} cores")
    fig.tight_layout()
    if path:
        fig.savefig(path)
        plt.close(fig)
    return fig
