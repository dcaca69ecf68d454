"""Complete problems, each run end to end and summarised as one dictionary (the JSON of
`python -m course solve`). Shared fields: problem, lang, unknowns, nnz, iterations, converged,
relative_residual, threads, seconds {assemble, solve, total}."""

from __future__ import annotations

import os
import resource
import time

import numba
import numpy as np

from . import fem, fvm, mesh, native, solvers, toolchain
from .langs import check_lang


def threads_for(lang: str) -> int:
    """Threads the kernels of `lang` use: OpenMP's for C/Fortran, 1 for the serial twins."""
    if lang in ("c", "fortran"):
        return int(os.environ.get("OMP_NUM_THREADS", toolchain.usable_cores()))
    return 1


THREADS_PER_CORE_MAX = 16


def check_threads(threads: int, label: str | None = None) -> int:
    """threads, if it is a positive integer and at most THREADS_PER_CORE_MAX per usable core (the
    OpenMP runtime crashes when asked for tens of thousands; beyond the cores threads only take
    turns); ValueError otherwise. `label` names the value in the message (default "threads N").
    The programs solc and solf refuse the same with the same words."""
    label = label or f"threads {threads}"
    threads = native.check_int(threads, label.split()[0], minimum=1)
    cores = toolchain.usable_cores()
    limit = THREADS_PER_CORE_MAX * cores
    if threads > limit:
        raise ValueError(f"{label} is more than {THREADS_PER_CORE_MAX} per core: this process "
                         f"may use {cores} core(s), so at most {limit} threads (more only take "
                         f"turns)")
    return threads


def default_threads(lang: str) -> int:
    """The threads the parallel kernels of `lang` start with: OpenMP's (OMP_NUM_THREADS or the
    cores) for c and fortran, NUMBA_NUM_THREADS for numba."""
    return numba.config.NUMBA_NUM_THREADS if lang == "numba" else threads_for(lang)


def set_threads(lang: str, threads: int) -> None:
    """Threads of the next parallel regions of `lang`: OpenMP (c, fortran: omp_set_num_threads)
    or Numba (at most NUMBA_NUM_THREADS)."""
    threads = check_threads(threads)
    if lang != "numba":
        native.set_threads(lang, threads)
    elif threads > numba.config.NUMBA_NUM_THREADS:
        raise ValueError(f"threads must be at most {numba.config.NUMBA_NUM_THREADS} for numba "
                         f"(NUMBA_NUM_THREADS), got {threads}")
    else:
        numba.set_num_threads(threads)


# --- memory: a problem that cannot fit is refused before anything is allocated --------------------

# Bytes per unknown, estimated: the matrix rows (value 8 + column 4 bytes per entry), counted twice
# because assembly holds the pattern and the values while the matrix is built, and the vectors
# (coordinates, right-hand side, CG's work vectors, the solution, the exact one). Measured peaks
# (resident set, 100^3 elements, 60..120^3 cells): fem3d 620 (c) .. 800 (numpy), poisson 130.
FEM1D_BYTES_PER_NODE = 3 * 12 * 2 + 16 * 8
FEM3D_BYTES_PER_NODE = 27 * 12 * 2 + 16 * 8
POISSON_BYTES_PER_CELL = 7 * 12 * 2 + 8 * 8
_MEMINFO = "/proc/meminfo"
_CGROUP = "/sys/fs/cgroup"
_CGROUP_FILES = (("memory.max", "memory.current"),                              # cgroup v2
                 ("memory/memory.limit_in_bytes", "memory/memory.usage_in_bytes"))  # v1


def _first_int(path) -> int | None:
    try:
        return int(open(path).read().split()[0])
    except (OSError, ValueError, IndexError):                # absent, or "max": no limit
        return None


def memory_available(meminfo=_MEMINFO, cgroup=_CGROUP) -> tuple[int | None, str]:
    """The bytes this process can still allocate and where the figure comes from: MemAvailable of
    /proc/meminfo, or the limit of its memory cgroup (a container, a batch job) less the cgroup's
    usage, whichever is less; (None, "unknown") where neither can be read."""
    found = []
    try:
        for line in open(meminfo):
            if line.startswith("MemAvailable:"):
                found.append((int(line.split()[1]) * 1024, f"MemAvailable in {meminfo}"))
    except (OSError, ValueError, IndexError):
        pass
    for limit_file, usage_file in _CGROUP_FILES:
        limit = _first_int(f"{cgroup}/{limit_file}")
        usage = _first_int(f"{cgroup}/{usage_file}")
        if limit is not None and usage is not None and limit < 2**60:   # v1: 2^63 - 4096, none
            found.append((max(limit - usage, 0), f"cgroup limit {limit / 1e9:.1f} GB less "
                                                 f"{usage / 1e9:.1f} GB used"))
    return min(found) if found else (None, "unknown")


def check_memory(needed: float, what: str) -> None:
    """ValueError, one line, when `needed` bytes (an estimate) are more than memory_available()."""
    available, source = memory_available()
    if available is not None and needed > available:
        raise ValueError(f"{what} needs about {needed / 1e9:.1f} GB of memory, but only "
                         f"{available / 1e9:.1f} GB are available ({source}): choose a smaller "
                         f"size")


def fem1d(n_elem: int = 100, lang: str = "numpy", length: float = 1.0, cond: float = 1.0,
          qvol: float = 1.0, qflux: float = 0.0, tol: float = 1e-12, warm_up: bool = True,
          keep_solution: bool = False) -> dict:
    """Solve the 1D heat conduction problem on n_elem linear elements and check it.

    error_max is the largest nodal error against the exact solution (linear elements are nodally
    exact here, so it is round-off); error_l2 is the L2 error of the piecewise-linear solution.
    With warm_up, a 2-element solve first takes compilation (Numba) and library loading out of
    the timings.
    """
    check_lang(lang)
    if int(n_elem) == n_elem and n_elem >= 1:               # (line_mesh refuses the others)
        check_memory(FEM1D_BYTES_PER_NODE * (n_elem + 1.0), f"fem1d on {n_elem} elements")
    if warm_up:
        fem1d(2, lang, length, cond, qvol, qflux, tol, warm_up=False)
    t0 = time.perf_counter()
    x = mesh.line_mesh(n_elem, length)
    a, rhs = fem.fem1d_assemble(x, cond, qvol, lang)
    fem.fem1d_boundary(a, rhs, qflux, lang)
    t1 = time.perf_counter()
    result = solvers.pcg_jacobi(a, rhs, lang, tol=tol, max_iter=10 * a.n)
    t2 = time.perf_counter()

    def exact(xx):
        return fem.fem1d_exact(xx, length, cond, qvol, qflux)

    out = {
        "problem": "fem1d", "lang": lang, "unknowns": a.n, "nnz": a.nnz,
        "iterations": result.iterations, "converged": bool(result.converged),
        "relative_residual": result.relative_residual, "threads": threads_for(lang),
        "seconds": {"assemble": t1 - t0, "solve": t2 - t1, "total": t2 - t0},
        "error_l2": fem.fem1d_error_l2(x, result.x, exact),
        "error_max": float(np.max(np.abs(result.x - exact(x)))),
        "n_elem": int(n_elem), "length": length, "cond": cond, "qvol": qvol, "qflux": qflux,
        "tol": tol,
    }
    if keep_solution:
        out["x"], out["T"] = x, result.x
    return out


def peak_memory_mb() -> float:
    """The largest resident set size of this process so far, in MB (Linux reports KB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def fem3d(nx: int = 8, ny: int = 8, nz: int = 8, lang: str = "numpy", manufactured: bool = False,
          dx: float | None = None, dy: float | None = None, dz: float | None = None,
          cond: float = 1.0, qvol: float = 1.0, qflux: float = 0.0, fixed_face: str = "zmax",
          tol: float = 1e-8, warm_up: bool = True, keep_solution: bool = False) -> dict:
    """Solve 3D steady heat conduction on an nx x ny x nz box of hexahedra and check it.

    Model problem (default): T = 0 on fixed_face, the heat flux qflux into the body through the
    opposite face, the other faces insulated, the constant source qvol; the exact T depends on one
    coordinate only (fem.fem3d_model_exact) and the tri-linear elements reproduce it at the nodes
    (error_max is round-off and the CG tolerance).
    Manufactured (manufactured=True): T = sin(pi x / Lx) sin(pi y / Ly) sin(pi z / Lz) with T = 0
    on every face and the matching source (fem.manufactured); qvol, qflux and fixed_face are not
    used. error_l2 falls as h^2, error_h1 (the H1 seminorm) as h.

    Element sizes default to the unit cube (dx = 1/nx, ...). With warm_up, a 2x2x2 solve first
    takes compilation (Numba) and library loading out of the timings. peak_memory_mb is the
    process's largest resident set size so far (it includes earlier work in the same process).
    """
    check_lang(lang)
    mesh.check_face(fixed_face)
    tol = native.check_real(tol, "tol", positive=True)
    box = mesh.box_mesh(nx, ny, nz, dx, dy, dz)       # checks the sizes; arrays made when used
    check_memory(FEM3D_BYTES_PER_NODE * box.n_node,
                 f"fem3d on {box.nx} x {box.ny} x {box.nz} elements ({box.n_node} nodes)")
    if warm_up:
        fem3d(2, 2, 2, lang, manufactured, cond=cond, qvol=qvol, qflux=qflux,
              fixed_face=fixed_face, tol=tol, warm_up=False)
    t0 = time.perf_counter()
    if manufactured:
        exact, grad_exact, source = fem.manufactured(cond, box.lengths)
        q = source(box.xyz)
        fixed = box.boundary_nodes()
    else:
        exact, grad_exact = fem.fem3d_model_exact(box, fixed_face, cond, qvol, qflux)
        q = qvol
        fixed = box.face_nodes(fixed_face)
    a, rhs = fem.fem3d_assemble(box, cond, q, lang)
    if not manufactured and qflux != 0.0:
        fem.fem3d_face_flux(box, mesh.OPPOSITE_FACE[fixed_face], qflux, rhs, lang)
    mask = np.zeros(box.n_node, dtype=bool)
    mask[fixed] = True
    fem.dirichlet(a, rhs, mask, np.where(mask, exact(box.xyz), 0.0), lang)
    t1 = time.perf_counter()
    result = solvers.pcg_jacobi(a, rhs, lang, tol=tol, max_iter=10 * a.n)
    t2 = time.perf_counter()
    error_l2, error_h1 = fem.fem3d_errors(box, result.x, exact, grad_exact)
    out = {
        "problem": "fem3d", "lang": lang, "unknowns": a.n, "nnz": a.nnz,
        "iterations": result.iterations, "converged": bool(result.converged),
        "relative_residual": result.relative_residual, "threads": threads_for(lang),
        "seconds": {"assemble": t1 - t0, "solve": t2 - t1, "total": t2 - t0},
        "error_max": float(np.max(np.abs(result.x - exact(box.xyz)))),
        "error_l2": error_l2, "error_h1": error_h1,
        "peak_memory_mb": peak_memory_mb(),
        "manufactured": bool(manufactured),
        "nx": box.nx, "ny": box.ny, "nz": box.nz, "dx": box.dx, "dy": box.dy, "dz": box.dz,
        "cond": cond, "tol": tol,
        # not used by the manufactured solution
        "qvol": None if manufactured else qvol, "qflux": None if manufactured else qflux,
        "fixed_face": None if manufactured else fixed_face,
    }
    if keep_solution:
        out["mesh"], out["T"] = box, result.x
    return out


SPMV_FORMATS = ("crs", "ell", "sell")
SELL_CHUNK, SELL_SIGMA = 8, 64          # SELL-C-sigma of the benchmark: C = 8, sigma = 64


def poisson(nx: int = 32, ny: int = 32, nz: int = 32, version: str = "v3", fmt: str | None = None,
            lang: str = "c", threads: int | None = None, tol: float = 1e-8,
            input_file=None, dx: float = 1.0, dy: float = 1.0, dz: float = 1.0,
            warm_up: bool = True, keep_solution: bool = False) -> dict:
    """Solve the finite-volume Poisson problem (course.fvm) with step `version` of the OpenMP PCG
    ladder (v0, v1: CRS; v2, v3: ELL) in `lang` (c, fortran; numba for v0 .. v2), and time the
    SpMV alone in `fmt` (crs, ell or sell; default: the format of the version).

    input_file: read NX NY NZ / DX DY DZ / EPSICCG from it instead (the INPUT.DAT of the programs
    solc and solf). threads: OpenMP threads (c, fortran: course_set_threads) or Numba threads; by
    default as many as the library starts with. The matrix is generated by the same language,
    serially for v0 and in parallel (first touch) for v1 .. v3.
    """
    solvers.check_ladder(version, lang)
    if fmt is None:
        fmt = "crs" if version in ("v0", "v1") else "ell"
    if fmt not in SPMV_FORMATS:
        raise ValueError(f"fmt must be one of {', '.join(SPMV_FORMATS)}; got {fmt!r}")
    if input_file is not None:
        params = fvm.read_input(input_file)
        nx, ny, nz, dx, dy, dz, tol = (params[k] for k in ("nx", "ny", "nz", "dx", "dy", "dz",
                                                           "eps"))
    fvm._check_box(nx, ny, nz, dx, dy, dz)
    check_memory(POISSON_BYTES_PER_CELL * float(nx) * ny * nz,
                 f"poisson on {nx} x {ny} x {nz} cells")
    tol = native.check_real(tol, "tol", positive=True)
    if threads is not None:
        set_threads(lang, threads)
    used = numba.get_num_threads() if lang == "numba" else (threads or threads_for(lang))
    solve_fmt = "crs" if version in ("v0", "v1") else "ell"
    if warm_up:
        small = fvm.poisson(2, 2, 2, lang=lang, fmt=solve_fmt, parallel=version != "v0")
        solvers.pcg_ladder(small, version, lang, tol=tol)
    t0 = time.perf_counter()
    problem = fvm.poisson(nx, ny, nz, dx, dy, dz, lang=lang, fmt=solve_fmt,
                          parallel=version != "v0")
    t1 = time.perf_counter()
    result = solvers.pcg_ladder(problem, version, lang, tol=tol, max_iter=10 * problem.n)
    t2 = time.perf_counter()
    from .bench import spmv_timing          # (bench imports this module)

    spmv = spmv_timing(problem, fmt, lang)
    imax = int(np.argmax(result.x))
    out = {
        "problem": "poisson", "lang": lang, "unknowns": problem.n, "nnz": problem.nnz,
        "iterations": result.iterations, "converged": bool(result.converged),
        "relative_residual": result.relative_residual, "threads": int(used),
        "seconds": {"assemble": t1 - t0, "solve": t2 - t1, "total": t2 - t0},
        "version": version, "format": fmt, "gflops": spmv["gflops"],
        "bandwidth_gbs": spmv["bandwidth_gbs"], "spmv_seconds": spmv["spmv_seconds"],
        "checksum": float(result.x.sum()), "phi_max": float(result.x[imax]),
        "phi_max_cell": imax,
        "nx": nx, "ny": ny, "nz": nz, "dx": dx, "dy": dy, "dz": dz, "tol": tol,
    }
    if input_file is not None:
        out["input"] = str(input_file)
    if keep_solution:
        out["problem_data"], out["phi"] = problem, result.x
    return out


PROBLEMS = {"fem1d": fem1d, "fem3d": fem3d, "poisson": poisson}
