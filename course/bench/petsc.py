"""`python -m course bench petsc` (09_petsc): the course's distributed CG against PETSc's on the
same matrix, the same partition and the same stopping rule.

For every size n (the n^3 Poisson problem of 03_openmp) and rank count P, each preconditioner
(Jacobi, localized IC(0), two additive Schwarz sweeps) is solved by both engines of
`mpiexec -n P python -m course solve poisson --parallel --engine {course,petsc} --json`: the
course's (its CG driven from Python, the products and substitutions in C) and PETSc's twin of it
(course.parallel.petsc), `repeat` times each, the engines taking turns. Reported per run: the
iterations (equal, or the mapping is wrong), the median and the range (min to max over the
repeats) of the microseconds per iteration, the time to solution, the global reductions per
iteration (counted by the course, and by PETSc's log), and the fraction of the P-process
memory-bandwidth bound that the median reaches (course.timing.fraction_of_bound: the least
traffic of an iteration, read and written, hybrid.traffic_per_iteration, against the measured STREAM
reference); for each pair the ratio of the medians and a verdict that names the faster engine
only when the two ranges do not overlap (compare).

The compiled side (compiled=True): the course's MPI programs fem3d_mpi_c and fem3d_mpi_f on the
n^3-element model problem of 02_fem3d, the nodes cut into P slabs along z, against PETSc's program
petsc_solve_c on the same matrix (assembled here, saved with save_system) with the same rows on
every rank (FILE.rows), the three programs taking turns `repeat` times: each program's own
microseconds per iteration (its solve, the slowest rank) as median and range, the same
iterations, the ratio of the medians, the verdict and the fraction of the bound (compiled_case).
PETSc's series is shared by the C and the Fortran row of a case.

The default sizes are the smallest whose matrix and vectors exceed four times the last-level cache
(course.timing.last_level_cache_bytes), so that every engine streams from memory: default_size
for the Poisson problem, default_size(fem3d=True) for the compiled programs' 27-point matrix.
Rank counts above the cores are run and flagged (oversubscribed: their timings say little).
Benchmarks, never tests.
"""

from __future__ import annotations

import functools
import tempfile
from pathlib import Path

from tqdm.auto import tqdm

from .. import timing, toolchain
from ..timing import spread
from ..parallel.mpi_job import course_solve, run_fem3d_mpi
from .hybrid import traffic_per_iteration

PRECONDITIONERS = (("diagonal", None), ("bjacobi-ic0", None), ("asdd-ic0", 2))
ENGINES = ("course", "petsc")
BYTES_PER_ROW = 7 * 12 + 6 * 8          # the 7-point matrix and six vectors of one CG iteration
FEM3D_BYTES_PER_ROW = 27 * 12 + 6 * 8   # fem3d's 27-point matrix (nodes: (n + 1)^3 rows)
SIZE_CAP = 160                          # 4.1 million unknowns: a laptop's memory, a few seconds


def default_size(cache_bytes: int | None = None, fem3d: bool = False) -> int:
    """The smallest n (16, 24, ...) whose rows (n^3, or (n + 1)^3 nodes for fem3d) of
    BYTES_PER_ROW (FEM3D_BYTES_PER_ROW) each exceed 4 times the last-level cache (64 where the
    system tells no cache size), at most SIZE_CAP."""
    cache = cache_bytes if cache_bytes is not None else timing.last_level_cache_bytes()
    if not cache:
        return 64
    rows, per_row = ((lambda n: (n + 1) ** 3), FEM3D_BYTES_PER_ROW) if fem3d else \
        ((lambda n: n ** 3), BYTES_PER_ROW)
    n = 16
    while rows(n) * per_row < 4 * cache and n < SIZE_CAP:
        n += 8
    return n


def compare(ours: dict, theirs: dict, names=("the course", "PETSc")) -> str:
    """Which of two spread()s of times is faster: the name of the faster one when its slowest run
    beat the other's fastest, else "within the spread" (the ranges overlap)."""
    if ours["max"] < theirs["min"]:
        return f"{names[0]} faster"
    if theirs["max"] < ours["min"]:
        return f"{names[1]} faster"
    return "within the spread"


def run_engine(engine: str, n: int, ranks: int, precond: str, sweeps: int | None,
               timeout: float = 900) -> dict:
    """One solve of one engine, case and rank count (course solve --json)."""
    args = ["poisson", "--nx", n, "--ny", n, "--nz", n, "--engine", engine, "--precond", precond,
            *(["--asdd-sweeps", sweeps] if sweeps else []),
            *(["--lang", "c"] if engine == "course" else [])]
    return course_solve(ranks, args, 1, (), timeout)


@functools.lru_cache(maxsize=1)
def fem3d_system(n: int):
    """The model problem of mpi_job.FEM3D_INPUT as fem3d_mpi assembles it (T = 0 on zmax, the flux 0.5
    into zmin, source 1, conductivity 1, n^3 elements of the unit cube): (CRS, b), assembled once
    for all the runs of one size (read only)."""
    import numpy as np

    from ..fem import assembly, mesh
    box = mesh.box_mesh(n, n, n)
    a, rhs = assembly.fem3d_assemble(box, 1.0, 1.0, "numba")
    assembly.fem3d_face_flux(box, "zmin", 0.5, rhs, "numba")
    fixed = np.zeros(box.n_node, dtype=bool)
    fixed[box.face_nodes("zmax")] = True
    assembly.dirichlet(a, rhs, fixed, np.zeros(box.n_node), "numba")
    return a, rhs


def slab_rows(n: int, ranks: int) -> list[int]:
    """The nodes of each rank when fem3d_mpi cuts the n + 1 node planes along z into `ranks`
    blocks (PX = PY = 1): plane k to rank p for p (n + 1) / P <= k < (p + 1) (n + 1) / P."""
    planes = [p * (n + 1) // ranks for p in range(ranks + 1)]
    return [(n + 1) ** 2 * (planes[p + 1] - planes[p]) for p in range(ranks)]


def compiled_case(n: int, ranks: int, precond: str, sweeps: int | None, repeat: int = 3,
                  langs=("c", "fortran"), tol: float = 1e-8, reference: dict | None = None,
                  timeout: float = 900) -> list[dict]:
    """fem3d_mpi_c and _f (langs) and petsc_solve_c on the same n^3-element fem3d system, the same
    rows on every rank and the same stopping rule, the programs taking turns `repeat` times: for
    each language a row with the iterations of each side, their microseconds per iteration (each
    program's own clock around its solve, the slowest rank: spread()), the ratio of the medians,
    the verdict (compare) and, with a STREAM `reference`, the fraction of the bound each median
    reaches. PETSc's series is the same in both rows."""
    from ..parallel import petsc
    programs = {lang: f"fem3d_mpi_{lang[0]}" for lang in langs}      # fem3d_mpi_c, fem3d_mpi_f
    ours = {lang: [] for lang in langs}
    theirs = []
    with tempfile.TemporaryDirectory(prefix="course-bench-petsc-") as folder:
        folder = Path(folder)
        a, b = fem3d_system(n)
        petsc.save_system(folder / "fem3d.petsc", a, b, rows=slab_rows(n, ranks))
        for _ in range(repeat):
            for lang in langs:
                ours[lang].append(run_fem3d_mpi(lang, n, ranks, precond, sweeps or 1, tol=tol,
                                                timeout=timeout))
            theirs.append(petsc.run_program("petsc_solve_c", folder / "fem3d.petsc", ranks,
                                            petsc.options("pcg", precond, sweeps, tol), timeout))
    petsc_us = spread(run["us_per_iteration"] for run in theirs)
    traffic = traffic_per_iteration(a.n, a.nnz, precond, sweeps or 1)
    rows = []
    for lang, program in programs.items():
        us = spread(run["us_per_iteration"] for run in ours[lang])
        row = {"n": n, "ranks": ranks, "precond": precond, "asdd_sweeps": sweeps,
               "program": program, "unknowns": a.n, "repeat": repeat,
               "iterations": ours[lang][0]["iterations"],
               "petsc_iterations": theirs[0]["iterations"],
               "same_iterations_every_run": len({run["iterations"] for run in ours[lang]}) == 1
               and len({run["iterations"] for run in theirs}) == 1,
               "us_per_iteration": us["median"], "petsc_us_per_iteration": petsc_us["median"],
               "us_spread": us, "petsc_us_spread": petsc_us,
               "compiled_over_petsc": us["median"] / petsc_us["median"],
               "verdict": compare(us, petsc_us, (program, "PETSc"))}
        if reference is not None:
            row["fraction_of_bound"] = timing.fraction_of_bound(*traffic, 1e-6 * us["median"],
                                                                reference)
            row["petsc_fraction_of_bound"] = timing.fraction_of_bound(
                *traffic, 1e-6 * petsc_us["median"], reference)
        rows.append(row)
    return rows


def summarise(outs: list[dict], n: int, ranks: int, cores: int, reference: dict) -> dict:
    """One engine's repeated solves of one case: the median and range of the time per iteration,
    and the fraction of the bound the median reaches."""
    out = outs[0]
    iterations = max(out["iterations"], 1)
    us = spread(1e6 * run["seconds"]["solve"] / max(run["iterations"], 1) for run in outs)
    read, written = traffic_per_iteration(out["unknowns"], out["nnz"], out["precond"],
                                          out["asdd_sweeps"] or 1)
    return {"n": n, "ranks": ranks, "engine": out["engine"], "precond": out["precond"],
            "asdd_sweeps": out["asdd_sweeps"], "iterations": out["iterations"],
            "same_iterations_every_run": len({run["iterations"] for run in outs}) == 1,
            "converged": out["converged"], "seconds_per_iteration": 1e-6 * us["median"],
            "us_spread": us, "repeat": len(outs),
            "time_to_solution_s": 1e-6 * us["median"] * iterations,
            "reductions_per_iteration": out["reductions_per_iteration"],
            "fraction_of_bandwidth_bound": timing.fraction_of_bound(
                read, written, 1e-6 * us["median"], reference),
            "petsc_options": out.get("petsc_options"), "oversubscribed": ranks > cores}


def bench_petsc(sizes=None, ranks=None, repeat: int = 3, progress: bool = True,
                compiled: bool = True, compiled_sizes=None) -> dict:
    """Both engines for every size, rank count and preconditioner, and with `compiled` the course's
    C and Fortran programs against PETSc's at `compiled_sizes`, each `repeat` times (see the
    module docstring). Default sizes: default_size() for the engines; for the programs
    default_size(fem3d=True) (beyond the cache) where `sizes` is not given, else half of each
    size (n/2 elements: (n/2 + 1)^3 nodes of 27 points, about the nonzeros of n^3 rows of 7)."""
    if isinstance(repeat, bool) or not isinstance(repeat, int) or repeat < 1:
        raise ValueError(f"repeat must be a whole number of runs >= 1, got {repeat!r}")
    cores = toolchain.usable_cores()
    if not compiled:
        compiled_sizes = []
    elif not compiled_sizes:
        compiled_sizes = [max(n // 2, 4) for n in sizes] if sizes else [default_size(fem3d=True)]
    sizes = list(sizes) if sizes else [default_size()]
    ranks = sorted(set(ranks)) if ranks else sorted({1, min(cores, 4)})
    stream = {p: timing.stream_reference(min(p, cores)) for p in ranks}
    cases = [(n, p, precond, sweeps) for n in sizes for p in ranks
             for precond, sweeps in PRECONDITIONERS]
    runs, ratios = [], []
    for n, p, precond, sweeps in tqdm(cases, desc="bench petsc", unit="case",
                                      disable=not progress):
        outs = {engine: [] for engine in ENGINES}
        for _ in range(repeat):                   # the engines take turns
            for engine in ENGINES:
                outs[engine].append(run_engine(engine, n, p, precond, sweeps))
        course, theirs = (summarise(outs[engine], n, p, cores, stream[p]) for engine in ENGINES)
        runs += [course, theirs]
        ratios.append({"n": n, "ranks": p, "precond": precond,
                       "same_iterations": course["iterations"] == theirs["iterations"],
                       "course_over_petsc": course["seconds_per_iteration"] /
                       theirs["seconds_per_iteration"],
                       "verdict": compare(course["us_spread"], theirs["us_spread"])})
    pairs = [(n, p, precond, sweeps) for n in compiled_sizes for p in ranks
             for precond, sweeps in PRECONDITIONERS]
    programs = [row for n, p, precond, sweeps in tqdm(pairs, desc="bench petsc, compiled",
                                                      unit="case", disable=not progress)
                for row in compiled_case(n, p, precond, sweeps, repeat, reference=stream[p])]
    over = sorted({run["ranks"] for run in runs if run["oversubscribed"]})
    return {"suite": "petsc", "cores": cores, "sizes": sizes, "ranks": ranks, "repeat": repeat,
            "compiled_sizes": list(compiled_sizes),
            "llc_bytes": timing.last_level_cache_bytes(), "stream": stream, "runs": runs,
            "ratios": ratios, "compiled": programs, "mpi": toolchain.mpi4py_library()[1],
            "warning": (f"rank counts {', '.join(map(str, over))} use more than the {cores} "
                        f"cores: oversubscribed, their timings are not comparable")
            if over else None}


def working_set_mib(n: int, fem3d: bool = False) -> float:
    """The matrix and vectors of one CG iteration on the whole problem, in MiB (the bytes per row
    of default_size)."""
    return ((n + 1) ** 3 * FEM3D_BYTES_PER_ROW if fem3d else n ** 3 * BYTES_PER_ROW) / 2**20


def _range(us: dict) -> str:
    return f"{us['median']:.0f} ({us['min']:.0f}-{us['max']:.0f})"


def summary_petsc(results: dict) -> str:
    repeat = results.get("repeat", 1)
    lines = [f"{results['cores']} cores; microseconds per iteration, median (min-max) of "
             f"{repeat} runs, the course's engine (C kernels, CG in Python) against PETSc; "
             f"bound = the medians' fraction of the measured memory-bandwidth bound",
             f"{'n':>4} {'ranks':>5} {'precond':>14} {'its':>5} {'course':>19} {'petsc':>19} "
             f"{'ratio':>6} {'verdict':>18} {'red/it':>7} {'bound':>11}"]
    marked = False
    for course, theirs, ratio in zip(results["runs"][::2], results["runs"][1::2],
                                     results["ratios"]):
        name = course["precond"] + (f" K={course['asdd_sweeps']}"
                                    if course["precond"] == "asdd-ic0" else "")
        its = str(course["iterations"]) if ratio["same_iterations"] else \
            f"{course['iterations']}/{theirs['iterations']}"
        fractions = [course["fraction_of_bandwidth_bound"], theirs["fraction_of_bandwidth_bound"]]
        marked |= any(timing.above_bound(f) for f in fractions)
        lines.append(f"{course['n']:>4} {course['ranks']:>5} {name:>14} {its:>5} "
                     f"{_range(course['us_spread']):>19} {_range(theirs['us_spread']):>19} "
                     f"{ratio['course_over_petsc']:>6.2f} {ratio['verdict']:>18} "
                     f"{course['reductions_per_iteration']}/{theirs['reductions_per_iteration']:<5}"
                     f"{'/'.join(map(timing.format_fraction, fractions)):>11}")
    if results.get("compiled"):
        lines.append("the course's compiled programs (fem3d, slabs along z) against petsc_solve_c "
                     "on the same matrix and rows; microseconds per iteration, median (min-max)")
        lines.append(f"{'n':>4} {'ranks':>5} {'precond':>14} {'program':>12} {'its':>9} "
                     f"{'course':>19} {'petsc':>19} {'ratio':>6} {'verdict':>18} {'bound':>11}")
        for run in results["compiled"]:
            name = run["precond"] + (f" K={run['asdd_sweeps']}" if run["asdd_sweeps"] else "")
            its = (str(run["iterations"]) if run["iterations"] == run["petsc_iterations"] else
                   f"{run['iterations']}/{run['petsc_iterations']}")
            fractions = [run[key] for key in ("fraction_of_bound", "petsc_fraction_of_bound")
                         if key in run]
            marked |= any(timing.above_bound(f) for f in fractions)
            verdict = "within the spread" if run["verdict"] == "within the spread" else \
                run["verdict"].replace(run["program"], "course")
            lines.append(f"{run['n']:>4} {run['ranks']:>5} {name:>14} {run['program']:>12} "
                         f"{its:>9} {_range(run['us_spread']):>19} "
                         f"{_range(run['petsc_us_spread']):>19} "
                         f"{run['compiled_over_petsc']:>6.2f} {verdict:>18} "
                         f"{'/'.join(map(timing.format_fraction, fractions)):>11}")
    if marked:
        lines.append(timing.ABOVE_BOUND_NOTE)
    llc = results.get("llc_bytes")
    for n, fem3d in [(n, False) for n in results.get("sizes", [])] + \
            [(n, True) for n in results.get("compiled_sizes", [])]:
        note = timing.cache_note(working_set_mib(n, fem3d) * 2**20, llc) if llc else None
        if note:
            lines.append(f"{'fem3d ' if fem3d else ''}n = {n}: {note}")
    if results["warning"]:
        lines.append("note: " + results["warning"])
    return "\n".join(lines)


def plot_petsc(results: dict, path=None):
    """Microseconds per iteration of both engines for every case (the median, the bar from the
    fastest to the slowest run); returns the figure."""
    import matplotlib.pyplot as plt
    import numpy as np

    pairs = list(zip(results["runs"][::2], results["runs"][1::2]))
    labels = [f"{c['n']}³, {c['ranks']} rk\n{c['precond']}" for c, _ in pairs]
    x = np.arange(len(pairs))
    fig, ax = plt.subplots(figsize=(max(6.0, 1.1 * len(pairs)), 4.2))
    for offset, index, label in ((-0.2, 0, "the course (CG in Python, C kernels)"),
                                 (0.2, 1, "PETSc")):
        us = [pair[index].get("us_spread") or {"median": 1e6 * pair[index][
            "seconds_per_iteration"]} for pair in pairs]
        median = np.array([u["median"] for u in us])
        low = median - np.array([u.get("min", u["median"]) for u in us])
        high = np.array([u.get("max", u["median"]) for u in us]) - median
        ax.bar(x + offset, median, 0.4, yerr=[low, high], capsize=3, label=label)
    ax.set_xticks(x, labels, fontsize=8)
    ax.set_ylabel("µs per iteration (median, min to max)")
    # the legend above the axes, where no bar reaches
    ax.legend(loc="lower left", bbox_to_anchor=(0.0, 1.0), ncol=2, frameon=False)
    fig.tight_layout()
    if path is not None:
        fig.savefig(path)
    return fig
