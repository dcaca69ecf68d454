"""`python -m course bench petsc` (09_petsc): the course's distributed CG against PETSc's on the
same matrix, the same partition and the same stopping rule.

For every size n (the n^3 Poisson problem of 03_openmp) and rank count P, each preconditioner
(Jacobi, localized IC(0), two additive Schwarz sweeps) is solved by both engines of
`mpiexec -n P python -m course solve poisson --parallel --engine {course,petsc} --json`: the
course's (its CG driven from Python, the products and substitutions in C) and PETSc's twin of it
(course.parallel.petsc). Reported per run: the iterations (equal, or the mapping is wrong), the
microseconds per iteration, the time to solution, the global reductions per iteration (counted by
the course, and by PETSc's log), and the fraction of the P-process memory-bandwidth bound (STREAM
triad against the least traffic of an iteration, course.bench.hybrid.bytes_per_iteration), and
for each pair the ratio of the course's time per iteration to PETSc's.

The compiled side (compiled=True): the course's MPI program fem3d_mpi_c (and fem3d_mpi_f) on the
n^3-element model problem of 02_fem3d, the nodes cut into P slabs along z, against PETSc's program
petsc_solve_c on the same matrix (assembled here, saved with save_system) with the same rows on
every rank (FILE.rows): each program's own microseconds per iteration (its solve, the slowest
rank), the same iterations, their ratio (compiled_pair).

The default size is the smallest whose matrix and vectors exceed four times the last-level cache
(course.timing.last_level_cache_bytes), so that both engines stream from memory. Rank counts above
the cores are run and flagged (oversubscribed: their timings say little). Benchmarks, never tests.
"""

from __future__ import annotations

import functools
import re
import subprocess
import tempfile
from pathlib import Path

from tqdm.auto import tqdm

from .. import native, timing, toolchain
from ..parallel.mpi_job import course_solve, mpi_environment
from .hybrid import bytes_per_iteration

PRECONDITIONERS = (("diagonal", None), ("bjacobi-ic0", None), ("asdd-ic0", 2))
ENGINES = ("course", "petsc")
BYTES_PER_ROW = 7 * 12 + 6 * 8          # the 7-point matrix and six vectors of one CG iteration
SIZE_CAP = 160                          # 4.1 million unknowns: a laptop's memory, a few seconds


def default_size(cache_bytes: int | None = None) -> int:
    """The smallest n whose n^3 rows (BYTES_PER_ROW each) exceed 4 times the last-level cache
    (64 where the system tells no cache size), at most SIZE_CAP."""
    cache = cache_bytes if cache_bytes is not None else timing.last_level_cache_bytes()
    if not cache:
        return 64
    n = 16
    while n ** 3 * BYTES_PER_ROW < 4 * cache and n < SIZE_CAP:
        n += 8
    return n


def run_engine(engine: str, n: int, ranks: int, precond: str, sweeps: int | None,
               repeat: int, timeout: float = 900) -> dict:
    """The fastest of `repeat` solves of one engine, case and rank count."""
    args = ["poisson", "--nx", n, "--ny", n, "--nz", n, "--engine", engine, "--precond", precond,
            *(["--asdd-sweeps", sweeps] if sweeps else []),
            *(["--lang", "c"] if engine == "course" else [])]
    runs = [course_solve(ranks, args, 1, (), timeout) for _ in range(repeat)]
    return min(runs, key=lambda out: out["seconds"]["solve"])


FEM3D_INPUT = """{n} {n} {n}
{h} {h} {h}
1.0 1.0
0.5
zmax
{tol}
1 1 {ranks}
{precond} {sweeps}
natural 0
"""
_ITERATIONS = re.compile(r"CG: (\d+) iterations")
_TIME = re.compile(r"solve (\S+) s, (\S+) us per iteration")


@functools.lru_cache(maxsize=1)
def fem3d_system(n: int):
    """The model problem of FEM3D_INPUT as fem3d_mpi assembles it (T = 0 on zmax, the flux 0.5
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


def compiled_pair(n: int, ranks: int, precond: str, sweeps: int | None, lang: str = "c",
                  tol: float = 1e-8, timeout: float = 900) -> dict:
    """fem3d_mpi_c or _f (lang c or fortran) and petsc_solve_c on the same n^3-element fem3d system, the same rows on
    every rank and the same stopping rule: the iterations of each and their microseconds per
    iteration (each program's own clock around its solve, the slowest rank)."""
    from ..parallel import petsc
    program = f"fem3d_mpi_{lang[0]}"                 # fem3d_mpi_c, fem3d_mpi_f
    env = {**mpi_environment(), "MPIEXEC_TIMEOUT": str(int(timeout))}
    with tempfile.TemporaryDirectory(prefix="course-bench-petsc-") as folder:
        folder = Path(folder)
        (folder / "input.dat").write_text(FEM3D_INPUT.format(
            n=n, h=1.0 / n, tol=tol, ranks=ranks, precond=precond, sweeps=sweeps or 1))
        done = subprocess.run(["mpiexec", "-n", str(ranks), str(native.binary(program)),
                               "input.dat"], cwd=folder, capture_output=True, text=True, env=env,
                              timeout=timeout + 10)
        if done.returncode != 0:
            raise RuntimeError(f"{program} failed: {done.stderr.strip()[-1000:]}")
        course = {"iterations": int(_ITERATIONS.search(done.stdout)[1]),
                  "us_per_iteration": float(_TIME.search(done.stdout)[2])}
        a, b = fem3d_system(n)
        petsc.save_system(folder / "fem3d.petsc", a, b, rows=slab_rows(n, ranks))
        theirs = petsc.run_program("petsc_solve_c", folder / "fem3d.petsc", ranks,
                                   petsc.options("pcg", precond, sweeps, tol), timeout)
    return {"n": n, "ranks": ranks, "precond": precond, "asdd_sweeps": sweeps,
            "program": program, "unknowns": a.n,
            "iterations": course["iterations"], "petsc_iterations": theirs["iterations"],
            "us_per_iteration": course["us_per_iteration"],
            "petsc_us_per_iteration": theirs["us_per_iteration"],
            "compiled_over_petsc": course["us_per_iteration"] / theirs["us_per_iteration"]}


def summarise(out: dict, n: int, ranks: int, cores: int, triad_gbs: float) -> dict:
    iterations = max(out["iterations"], 1)
    per_iteration = out["seconds"]["solve"] / iterations
    traffic = bytes_per_iteration(out["unknowns"], out["nnz"], out["precond"],
                                  out["asdd_sweeps"] or 1)
    return {"n": n, "ranks": ranks, "engine": out["engine"], "precond": out["precond"],
            "asdd_sweeps": out["asdd_sweeps"], "iterations": out["iterations"],
            "converged": out["converged"], "seconds_per_iteration": per_iteration,
            "time_to_solution_s": out["seconds"]["solve"],
            "reductions_per_iteration": out["reductions_per_iteration"],
            "fraction_of_bandwidth_bound": traffic / per_iteration / 1e9 / triad_gbs,
            "petsc_options": out.get("petsc_options"), "oversubscribed": ranks > cores}


def bench_petsc(sizes=None, ranks=None, repeat: int = 3, progress: bool = True,
                compiled: bool = True) -> dict:
    """Both engines for every size, rank count and preconditioner, and with `compiled` the course's
    C and Fortran programs against PETSc's (see the module docstring)."""
    cores = toolchain.usable_cores()
    sizes = list(sizes) if sizes else [default_size()]
    ranks = sorted(set(ranks)) if ranks else sorted({1, min(cores, 4)})
    stream = {p: timing.stream_reference(min(p, cores)) for p in ranks}
    cases = [(n, p, precond, sweeps, engine) for n in sizes for p in ranks
             for precond, sweeps in PRECONDITIONERS for engine in ENGINES]
    runs = []
    for n, p, precond, sweeps, engine in tqdm(cases, desc="bench petsc", unit="run",
                                              disable=not progress):
        out = run_engine(engine, n, p, precond, sweeps, repeat)
        runs.append(summarise(out, n, p, cores, stream[p]["triad_gbs"]))
    ratios = []
    for course, theirs in zip(runs[::2], runs[1::2]):
        ratios.append({"n": course["n"], "ranks": course["ranks"], "precond": course["precond"],
                       "same_iterations": course["iterations"] == theirs["iterations"],
                       "course_over_petsc": course["seconds_per_iteration"] /
                       theirs["seconds_per_iteration"]})
    pairs = [(n, p, precond, sweeps, lang) for n in sizes for p in ranks
             for precond, sweeps in PRECONDITIONERS for lang in ("c", "fortran")] if compiled \
        else []
    programs = [compiled_pair(max(n // 2, 4), p, precond, sweeps, lang)       # 27 points a row
                for n, p, precond, sweeps, lang in tqdm(pairs, desc="bench petsc, compiled",
                                                        unit="run", disable=not progress)]
    over = sorted({run["ranks"] for run in runs if run["oversubscribed"]})
    return {"suite": "petsc", "cores": cores, "sizes": sizes, "ranks": ranks,
            "llc_bytes": timing.last_level_cache_bytes(), "stream": stream, "runs": runs,
            "ratios": ratios, "compiled": programs, "mpi": toolchain.mpi4py_library()[1],
            "warning": (f"rank counts {', '.join(map(str, over))} use more than the {cores} "
                        f"cores: oversubscribed, their timings are not comparable")
            if over else None}


def summary_petsc(results: dict) -> str:
    lines = [f"{results['cores']} cores; microseconds per iteration, the course's engine (C "
             f"kernels, CG in Python) against PETSc; bound = STREAM triad of the ranks against "
             f"the least traffic",
             f"{'n':>4} {'ranks':>5} {'precond':>14} {'its':>5} {'course':>9} {'petsc':>9} "
             f"{'ratio':>6} {'red/it':>7} {'bound':>11}"]
    for course, theirs, ratio in zip(results["runs"][::2], results["runs"][1::2],
                                     results["ratios"]):
        name = course["precond"] + (f" K={course['asdd_sweeps']}"
                                    if course["precond"] == "asdd-ic0" else "")
        its = str(course["iterations"]) if ratio["same_iterations"] else \
            f"{course['iterations']}/{theirs['iterations']}"
        lines.append(f"{course['n']:>4} {course['ranks']:>5} {name:>14} {its:>5} "
                     f"{1e6 * course['seconds_per_iteration']:>9.1f} "
                     f"{1e6 * theirs['seconds_per_iteration']:>9.1f} "
                     f"{ratio['course_over_petsc']:>6.2f} "
                     f"{course['reductions_per_iteration']}/{theirs['reductions_per_iteration']:<5}"
                     f"{100 * course['fraction_of_bandwidth_bound']:>5.0f}%/"
                     f"{100 * theirs['fraction_of_bandwidth_bound']:.0f}%")
    if results.get("compiled"):
        lines.append("the course's compiled programs (fem3d, slabs along z) against petsc_solve_c "
                     "on the same matrix and rows; microseconds per iteration")
        lines.append(f"{'n':>4} {'ranks':>5} {'precond':>14} {'program':>12} {'its':>9} "
                     f"{'course':>9} {'petsc':>9} {'ratio':>6}")
        for run in results["compiled"]:
            name = run["precond"] + (f" K={run['asdd_sweeps']}" if run["asdd_sweeps"] else "")
            its = (str(run["iterations"]) if run["iterations"] == run["petsc_iterations"] else
                   f"{run['iterations']}/{run['petsc_iterations']}")
            lines.append(f"{run['n']:>4} {run['ranks']:>5} {name:>14} {run['program']:>12} "
                         f"{its:>9} {run['us_per_iteration']:>9.1f} "
                         f"{run['petsc_us_per_iteration']:>9.1f} "
                         f"{run['compiled_over_petsc']:>6.2f}")
    if results["warning"]:
        lines.append("note: " + results["warning"])
    return "\n".join(lines)


def plot_petsc(results: dict, path=None):
    """Microseconds per iteration of both engines for every case; returns the figure."""
    import matplotlib.pyplot as plt
    import numpy as np

    pairs = list(zip(results["runs"][::2], results["runs"][1::2]))
    labels = [f"{c['n']}³, {c['ranks']} rk\n{c['precond']}" for c, _ in pairs]
    x = np.arange(len(pairs))
    fig, ax = plt.subplots(figsize=(max(6.0, 1.1 * len(pairs)), 4.2))
    for offset, index, label in ((-0.2, 0, "the course (CG in Python, C kernels)"),
                                 (0.2, 1, "PETSc")):
        ax.bar(x + offset, [1e6 * pair[index]["seconds_per_iteration"] for pair in pairs], 0.4,
               label=label)
    ax.set_xticks(x, labels, fontsize=8)
    ax.set_ylabel("µs per iteration")
    ax.legend()
    fig.tight_layout()
    if path is not None:
        fig.savefig(path)
    return fig
