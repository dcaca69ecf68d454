"""Lecture 03_iccg end to end: ICCG with a reordering on the Poisson FVM matrix (04_openmp) or the
27-point FEM matrix (02_fem3d), as `python -m course solve ... --precond ic0`, and the benchmark
`python -m course bench iccg`.

The matrix and right-hand side are permuted once (course.ordering.permute), solved in the new
numbering and the solution is given back in the original one.
"""

from __future__ import annotations

import time

import numba
import numpy as np

from . import fem, fvm, mesh, native, ordering, problems, toolchain
from .bench import machine
from .solvers import iccg as ic
from .sparse import CRS

SOLVE_LANGS = ("c", "fortran", "numba", "numpy")


def synchronisations_per_iteration(colors: int, lang: str = "c") -> int:
    """Barriers of one ICCG iteration: one per color in each substitution plus the CG's own
    (course.solvers.iccg.CG_BARRIERS_PER_ITERATION: those of C and Fortran, and of numpy, which
    runs on one thread; the Numba team has two fewer)."""
    return 2 * colors + ic.CG_BARRIERS_PER_ITERATION[lang]


def _threads(lang: str, threads: int | None) -> int:
    if threads is not None:
        problems.set_threads(lang, threads)
        return int(threads)
    return numba.get_num_threads() if lang == "numba" else problems.threads_for(lang)


def solve_ordered(a: CRS, b: np.ndarray, ordering_name: str = "natural", colors: int | None = None,
                  lang: str = "c", tol: float = 1e-8) -> dict:
    """Order, permute, factor and solve A x = b by ICCG; x in the original numbering."""
    t0 = time.perf_counter()
    order = ordering.order(a, ordering_name, colors,
                           lang="numba" if lang in ("numpy", "numba") else lang)
    ptr, adj = ordering.adjacency(a)
    ap, bp = ordering.permute(a, order.perm), ordering.permute_vector(b, order.perm)
    factor = ic.ic0(ic.split(ap), lang)
    t1 = time.perf_counter()
    result = ic.iccg(ap, bp, order.color_ptr, lang, tol=tol, max_iter=10 * a.n, factor=factor)
    t2 = time.perf_counter()
    return {"x": ordering.unpermute_vector(result.x, order.perm), "result": result,
            "ordering": order, "valid": ordering.is_valid_coloring(ptr, adj, order.perm,
                                                                   order.color_ptr)
            if order.colors > 1 else True,
            "incompatible_nodes": ordering.incompatible_nodes(ptr, adj, order.perm),
            "seconds": {"order_and_factor": t1 - t0, "solve": t2 - t1}}


def _fields(solved: dict, precond: str, lang: str) -> dict:
    order = solved["ordering"]
    return {"precond": precond, "ordering": order.name,
            "colors_requested": order.requested_colors, "colors": order.colors,
            "synchronisations_per_iteration": synchronisations_per_iteration(order.colors, lang),
            "incompatible_nodes": solved["incompatible_nodes"]}


def poisson(nx: int = 32, ny: int = 32, nz: int = 32, ordering_name: str = "natural",
            colors: int | None = None, lang: str = "c", threads: int | None = None,
            tol: float = 1e-8, input_file=None, dx: float = 1.0, dy: float = 1.0,
            dz: float = 1.0) -> dict:
    """`solve poisson --precond ic0`: the Poisson FVM problem of 04_openmp by ICCG."""
    if lang not in SOLVE_LANGS:
        raise ValueError(f"lang must be one of {', '.join(SOLVE_LANGS)}; got {lang!r}")
    ordering.check_ordering(ordering_name, colors)
    if input_file is not None:
        params = fvm.read_input(input_file)
        nx, ny, nz, dx, dy, dz, tol = (params[k] for k in ("nx", "ny", "nz", "dx", "dy", "dz",
                                                           "eps"))
    fvm._check_box(nx, ny, nz, dx, dy, dz)
    problems.check_memory(2 * problems.POISSON_BYTES_PER_CELL * float(nx) * ny * nz,
                          f"poisson on {nx} x {ny} x {nz} cells")
    tol = native.check_real(tol, "tol", positive=True)
    used = _threads(lang, threads)
    t0 = time.perf_counter()
    problem = fvm.poisson(nx, ny, nz, dx, dy, dz, lang="numba" if lang == "numpy" else lang)
    a = problem.full_crs()
    t1 = time.perf_counter()
    solved = solve_ordered(a, problem.b, ordering_name, colors, lang, tol)
    x, result = solved["x"], solved["result"]
    imax = int(np.argmax(x))
    out = {"problem": "poisson", "lang": lang, "unknowns": problem.n, "nnz": problem.nnz,
           "iterations": result.iterations, "converged": bool(result.converged),
           "relative_residual": result.relative_residual, "threads": used,
           "seconds": {"assemble": t1 - t0, **solved["seconds"],
                       "total": t1 - t0 + sum(solved["seconds"].values())},
           **_fields(solved, "ic0", lang),
           "checksum": float(x.sum()), "phi_max": float(x[imax]), "phi_max_cell": imax,
           "nx": nx, "ny": ny, "nz": nz, "dx": dx, "dy": dy, "dz": dz, "tol": tol}
    if input_file is not None:
        out["input"] = str(input_file)
    return out


def fem3d(nx: int = 8, ny: int = 8, nz: int = 8, ordering_name: str = "natural",
          colors: int | None = None, lang: str = "c", threads: int | None = None,
          tol: float = 1e-8, cond: float = 1.0, qvol: float = 1.0, qflux: float = 0.0,
          fixed_face: str = "zmax") -> dict:
    """`solve fem3d --precond ic0`: the model problem of 02_fem3d (T = 0 on fixed_face, the
    flux qflux through the opposite face, the source qvol) by ICCG on its 27-point matrix."""
    if lang not in SOLVE_LANGS:
        raise ValueError(f"lang must be one of {', '.join(SOLVE_LANGS)}; got {lang!r}")
    ordering.check_ordering(ordering_name, colors)
    mesh.check_face(fixed_face)
    tol = native.check_real(tol, "tol", positive=True)
    box = mesh.box_mesh(nx, ny, nz)
    problems.check_memory(2 * problems.FEM3D_BYTES_PER_NODE * box.n_node,
                          f"fem3d on {box.nx} x {box.ny} x {box.nz} elements")
    used = _threads(lang, threads)
    t0 = time.perf_counter()
    exact, _ = fem.fem3d_model_exact(box, fixed_face, cond, qvol, qflux)
    asm_lang = "numba" if lang == "numpy" else lang
    a, rhs = fem.fem3d_assemble(box, cond, qvol, asm_lang)
    if qflux != 0.0:
        fem.fem3d_face_flux(box, mesh.OPPOSITE_FACE[fixed_face], qflux, rhs, asm_lang)
    mask = np.zeros(box.n_node, dtype=bool)
    mask[box.face_nodes(fixed_face)] = True
    fem.dirichlet(a, rhs, mask, np.where(mask, exact(box.xyz), 0.0), asm_lang)
    t1 = time.perf_counter()
    solved = solve_ordered(a, rhs, ordering_name, colors, lang, tol)
    result = solved["result"]
    return {"problem": "fem3d", "lang": lang, "unknowns": a.n, "nnz": a.nnz,
            "iterations": result.iterations, "converged": bool(result.converged),
            "relative_residual": result.relative_residual, "threads": used,
            "seconds": {"assemble": t1 - t0, **solved["seconds"],
                        "total": t1 - t0 + sum(solved["seconds"].values())},
            **_fields(solved, "ic0", lang),
            "error_max": float(np.max(np.abs(solved["x"] - exact(box.xyz)))),
            "nx": box.nx, "ny": box.ny, "nz": box.nz, "tol": tol, "cond": cond, "qvol": qvol,
            "qflux": qflux, "fixed_face": fixed_face}


# --- the command line (course.cli) ----------------------------------------------------------------

def check_cli_options(args) -> bool:
    """True for --precond ic0; ValueError for --ordering or --colors without it, or with
    --parallel (the distributed solvers are diagonal-scaled)."""
    ic0 = getattr(args, "precond", None) == "ic0"
    given = [f"--{name}" for name in ("ordering", "colors") if getattr(args, name, None)
             is not None]
    if given and not ic0:
        raise ValueError(f"{', '.join(given)} {'needs' if len(given) == 1 else 'need'} "
                         f"--precond ic0")
    if ic0 and getattr(args, "parallel", False):
        raise ValueError("--precond ic0 is not for --parallel (the distributed CG is "
                         "diagonal-scaled)")
    return ic0


def solve_from_args(args, values: dict | None = None) -> dict:
    """`solve poisson|fem3d --precond ic0 ...`: values are solve poisson's sizes (or input)."""
    common = {"ordering_name": args.ordering or "natural", "colors": args.colors,
              "lang": args.lang, "threads": args.threads}
    if args.problem == "poisson":
        for name in ("version", "format"):
            if getattr(args, name) is not None:
                raise ValueError(f"--{name} is for the OpenMP ladder, not for --precond ic0")
        return poisson(**common, **values)
    if args.manufactured or args.vtk is not None or any(
            getattr(args, name) is not None for name in ("dx", "dy", "dz")):
        raise ValueError("--precond ic0 solves the model problem on the unit cube: no "
                         "--manufactured, --vtk, --dx/--dy/--dz")
    options = {name: getattr(args, name) for name in ("qvol", "qflux", "fixed_face")
               if getattr(args, name) is not None}
    return fem3d(args.nx, args.ny, args.nz, **common, tol=args.tol, cond=args.cond, **options)


# --- bench iccg --------------------------------------------------------------------------------

BENCH_ORDERINGS = (("natural", None), ("rcm", None)) + tuple(
    (name, k) for name in ("mc", "cm-rcm") for k in (2, 3, 4, 8, 16, 32))


def iteration_bytes(ap: CRS) -> int:
    """The least memory traffic of one compiled ICCG iteration (8-byte values, 4-byte indices):
    the SpMV (D, L_A, U_A with their columns and row pointers, p read, q written), the two
    substitutions (d, L, L^T values, their columns and row pointers, r read, z read and written
    twice) and the vector updates (rho: r, z; p = z + beta p: 3; (p, q): 2; x, r: 4 reads,
    2 writes)."""
    n, off = ap.n, ap.nnz - ap.n
    pattern = 12 * off + 8 * (n + 1)                    # columns + values, two row pointers
    spmv = 8 * n + pattern + 16 * n
    substitutions = 8 * n + pattern + 8 * n * 4
    vectors = 8 * n * (2 + 3 + 2 + 6)
    return spmv + substitutions + vectors


def bench_iccg(sizes=(32,), langs=("c", "fortran", "numba"), threads=None, repeat=3,
               orderings=BENCH_ORDERINGS, stream_n=2**24, progress: bool = True) -> dict:
    """ICCG on the Poisson problem of n^3 cells for every ordering of `orderings` (mc and cm-rcm
    over a sweep of colors) and every thread count: iterations, colors, synchronisations and
    seconds per iteration (best of `repeat` solves); the bandwidth of natural on one thread and
    of CM-RCM (the most colors) on all threads against STREAM of the same run; Numba / C."""
    from .bench import best_of, stream
    from tqdm.auto import tqdm

    if len(sizes) != 1:
        raise ValueError(f"bench iccg takes one size (n of the n^3 cells), got {list(sizes)}")
    n = native.check_int(sizes[0], "size", minimum=2)
    threads = list(threads) if threads else list(range(1, toolchain.usable_cores() + 1))
    for t in threads:
        problems.check_threads(t)
    problem = fvm.poisson(n, n, n, lang="numba")
    a = problem.full_crs()
    results = {"suite": "iccg", "sizes": [n], "repeat": repeat, "threads": threads,
               "machine": machine(),
               "stream": [], "runs": []}
    bar = tqdm(total=len(threads) * len(orderings) * len(langs), desc="bench iccg",
               disable=not progress)
    try:
        for t in threads:
            for lang in {*langs, "c"}:
                problems.set_threads(lang, min(t, problems.default_threads(lang))
                                     if lang == "numba" else t)
            results["stream"].append({**stream(stream_n, repeat), "threads": t})
            for name, k in orderings:
                order = ordering.order(a, name, k)
                ap = ordering.permute(a, order.perm)
                bp = problem.b[order.perm]
                nbytes = iteration_bytes(ap)
                parts = ic.split(ap)
                for lang in langs:
                    factor = ic.ic0(parts, lang)
                    solve = (lambda: ic.iccg(parts, bp, order.color_ptr, lang,  # noqa: E731
                                             1e-8, factor=factor))
                    res = solve()
                    seconds = best_of(solve, repeat) / max(res.iterations, 1)
                    results["runs"].append({
                        "threads": t, "lang": lang, "ordering": name, "colors_requested": k,
                        "colors": order.colors, "iterations": res.iterations,
                        "synchronisations_per_iteration":
                            synchronisations_per_iteration(order.colors, lang),
                        "seconds_per_iteration": seconds, "bytes_per_iteration": nbytes,
                        "bandwidth_gbs": nbytes / seconds / 1e9,
                        "fraction_of_stream": nbytes / seconds / 1e9
                        / results["stream"][-1]["triad_gbs"]})
                    bar.update()
    finally:
        bar.close()
        for lang in {*langs, "c"}:
            problems.set_threads(lang, problems.default_threads(lang))
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
    lines.append("")
    for label, r in results["bandwidth_bound"].items():
        if r:
            lines.append(f"{label}: {r['bandwidth_gbs']:.1f} GB/s = "
                         f"{r['fraction_of_stream']:.0%} of STREAM triad ({r['threads']} "
                         f"thread(s), {r['bytes_per_iteration'] / 1e6:.1f} MB per iteration)")
    if any(r and r["fraction_of_stream"] > 1 for r in results["bandwidth_bound"].values()):
        lines.append("(over 100%: an iteration's data stays in the caches, which STREAM's arrays "
                     "do not; a larger --sizes measures the memory)")
    return "\n".join(lines)


def plot_iccg(results: dict, path=None):
    """Iterations against colors (mc, cm-rcm; natural and rcm as lines), and time per iteration
    against threads for every ordering (C)."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4), layout="constrained")
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
        ax.legend(fontsize=7, ncol=2)
    if path:
        fig.savefig(path, dpi=120)
    return fig
