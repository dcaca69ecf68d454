"""Complete problems, each run end to end and summarised as one dictionary (the JSON of
`python -m course solve`). Shared fields: problem, lang, unknowns, nnz, iterations, converged,
relative_residual, threads, seconds {assemble, solve, total}.

    fem1d, fem3d      the heat-conduction problems of 01_fem1d and 02_fem3d by Jacobi-PCG
    poisson           the finite-volume Poisson problem by a step of the OpenMP PCG ladder
    poisson_iccg,     the same two by ICCG after a reordering (04_iccg, `--precond ic0`): the
    fem3d_iccg        matrix permuted once, solved in the new numbering, given back in the old

A problem builds on the discretisation (course.fem) and the solvers beneath it, measures with
course.timing and checks its size against course.resources; the distributed problems live in
course.parallel, the benchmarks in course.bench."""

from __future__ import annotations

import time

import numba
import numpy as np

from . import native, resources, solvers, timing
from .fem import assembly, fvm, mesh
from .langs import check_lang
from .solvers import iccg as ic
from .solvers import ordering
from .sparse import CRS


# Bytes per unknown, estimated for resources.check_memory: the matrix rows (value 8 + column 4 bytes
# per entry), counted twice because assembly holds the pattern and the values while the matrix is
# built, and the vectors (coordinates, right-hand side, CG's work vectors, the solution, the exact
# one). Measured peaks
# (resident set, 100^3 elements, 60..120^3 cells): fem3d 620 (c) .. 800 (numpy), poisson 130.
FEM1D_BYTES_PER_NODE = 3 * 12 * 2 + 16 * 8
FEM3D_BYTES_PER_NODE = 27 * 12 * 2 + 16 * 8
POISSON_BYTES_PER_CELL = 7 * 12 * 2 + 8 * 8


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
        resources.check_memory(FEM1D_BYTES_PER_NODE * (n_elem + 1.0), f"fem1d on {n_elem} elements")
    if warm_up:
        fem1d(2, lang, length, cond, qvol, qflux, tol, warm_up=False)
    t0 = time.perf_counter()
    x = mesh.line_mesh(n_elem, length)
    a, rhs = assembly.fem1d_assemble(x, cond, qvol, lang)
    assembly.fem1d_boundary(a, rhs, qflux, lang)
    t1 = time.perf_counter()
    result = solvers.pcg_jacobi(a, rhs, lang, tol=tol, max_iter=10 * a.n)
    t2 = time.perf_counter()

    def exact(xx):
        return assembly.fem1d_exact(xx, length, cond, qvol, qflux)

    out = {
        "problem": "fem1d", "lang": lang, "unknowns": a.n, "nnz": a.nnz,
        "iterations": result.iterations, "converged": bool(result.converged),
        "relative_residual": result.relative_residual, "threads": resources.threads_for(lang),
        "seconds": {"assemble": t1 - t0, "solve": t2 - t1, "total": t2 - t0},
        "error_l2": assembly.fem1d_error_l2(x, result.x, exact),
        "error_max": float(np.max(np.abs(result.x - exact(x)))),
        "n_elem": int(n_elem), "length": length, "cond": cond, "qvol": qvol, "qflux": qflux,
        "tol": tol,
    }
    if keep_solution:
        out["x"], out["T"] = x, result.x
    return out


def fem3d(nx: int = 8, ny: int = 8, nz: int = 8, lang: str = "numpy", manufactured: bool = False,
          dx: float | None = None, dy: float | None = None, dz: float | None = None,
          cond: float = 1.0, qvol: float = 1.0, qflux: float = 0.0, fixed_face: str = "zmax",
          tol: float = 1e-8, warm_up: bool = True, keep_solution: bool = False,
          source: str = "constant") -> dict:
    """Solve 3D steady heat conduction on an nx x ny x nz box of hexahedra and check it.

    Model problem (default): T = 0 on fixed_face, the heat flux qflux into the body through the
    opposite face, the other faces insulated, the constant source qvol; the exact T depends on one
    coordinate only (assembly.fem3d_model_exact) and the tri-linear elements reproduce it at the
    nodes (error_max is round-off and the CG tolerance).
    Manufactured (manufactured=True): T = sin(pi x / Lx) sin(pi y / Ly) sin(pi z / Lz) with T = 0
    on every face and the matching source (assembly.manufactured); qvol, qflux and fixed_face are
    not used. error_l2 falls as h^2, error_h1 (the H1 seminorm) as h.
    source="nakajima": the model problem's boundary conditions with the heat generation of
    Nakajima's FEM course code, QVOL |x_c + y_c| on each element (assembly.nakajima_source); it
    has no exact solution: the errors are None, t_max is the largest temperature.

    Element sizes default to the unit cube (dx = 1/nx, ...). With warm_up, a 2x2x2 solve first
    takes compilation (Numba) and library loading out of the timings. peak_memory_mb is the
    process's largest resident set size so far (it includes earlier work in the same process).
    """
    check_lang(lang)
    mesh.check_face(fixed_face)
    assembly.check_source(source)
    if manufactured and source != "constant":
        raise ValueError("the manufactured problem has its own source")
    tol = native.check_real(tol, "tol", positive=True)
    box = mesh.box_mesh(nx, ny, nz, dx, dy, dz)       # checks the sizes; arrays made when used
    resources.check_memory(FEM3D_BYTES_PER_NODE * box.n_node,
                 f"fem3d on {box.nx} x {box.ny} x {box.nz} elements ({box.n_node} nodes)")
    if warm_up:
        fem3d(2, 2, 2, lang, manufactured, cond=cond, qvol=qvol, qflux=qflux,
              fixed_face=fixed_face, tol=tol, warm_up=False, source=source)
    t0 = time.perf_counter()
    if manufactured:
        exact, grad_exact, manufactured_source = assembly.manufactured(cond, box.lengths)
        q = manufactured_source(box.xyz)
        fixed = box.boundary_nodes()
    else:
        exact, grad_exact = assembly.fem3d_model_exact(box, fixed_face, cond, qvol, qflux)
        q = qvol
        fixed = box.face_nodes(fixed_face)
    a, rhs = assembly.fem3d_assemble(box, cond, 0.0 if source == "nakajima" else q, lang)
    if source == "nakajima":
        rhs += assembly.element_source_load(
            box.elements, box.xyz, assembly.nakajima_source(box.elements, box.xyz, qvol), lang)
    if not manufactured and qflux != 0.0:
        assembly.fem3d_face_flux(box, mesh.OPPOSITE_FACE[fixed_face], qflux, rhs, lang)
    mask = np.zeros(box.n_node, dtype=bool)
    mask[fixed] = True
    assembly.dirichlet(a, rhs, mask, np.where(mask, exact(box.xyz), 0.0), lang)
    t1 = time.perf_counter()
    result = solvers.pcg_jacobi(a, rhs, lang, tol=tol, max_iter=10 * a.n)
    t2 = time.perf_counter()
    known = source == "constant"                       # an exact solution to compare with
    error_l2, error_h1 = assembly.fem3d_errors(box, result.x, exact, grad_exact) if known \
        else (None, None)
    out = {
        "problem": "fem3d", "lang": lang, "unknowns": a.n, "nnz": a.nnz,
        "iterations": result.iterations, "converged": bool(result.converged),
        "relative_residual": result.relative_residual, "threads": resources.threads_for(lang),
        "seconds": {"assemble": t1 - t0, "solve": t2 - t1, "total": t2 - t0},
        "error_max": float(np.max(np.abs(result.x - exact(box.xyz)))) if known else None,
        "error_l2": error_l2, "error_h1": error_h1, "t_max": float(result.x.max()),
        "source": source,
        "peak_memory_mb": resources.peak_memory_mb(),
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


def _threads_used(lang: str, threads: int | None) -> int:
    """Set the threads of `lang` when given; the threads its kernels will use."""
    if threads is not None:
        resources.set_threads(lang, threads)
        return int(threads)
    return numba.get_num_threads() if lang == "numba" else resources.threads_for(lang)


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
    if fmt not in timing.SPMV_FORMATS:
        raise ValueError(f"fmt must be one of {', '.join(timing.SPMV_FORMATS)}; got {fmt!r}")
    if input_file is not None:
        params = fvm.read_input(input_file)
        nx, ny, nz, dx, dy, dz, tol = (params[k] for k in ("nx", "ny", "nz", "dx", "dy", "dz",
                                                           "eps"))
    fvm._check_box(nx, ny, nz, dx, dy, dz)
    resources.check_memory(POISSON_BYTES_PER_CELL * float(nx) * ny * nz,
                 f"poisson on {nx} x {ny} x {nz} cells")
    tol = native.check_real(tol, "tol", positive=True)
    used = _threads_used(lang, threads)
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
    spmv = timing.spmv_timing(problem, fmt, lang)
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


# --- ICCG with a reordering (lecture 04): `solve poisson|fem3d --precond ic0` -------------------

ICCG_LANGS = ("c", "fortran", "numba", "numpy")


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


def _iccg_fields(solved: dict, precond: str, lang: str) -> dict:
    order = solved["ordering"]
    return {"precond": precond, "ordering": order.name,
            "colors_requested": order.requested_colors, "colors": order.colors,
            "synchronisations_per_iteration": ic.synchronisations_per_iteration(order.colors, lang),
            "incompatible_nodes": solved["incompatible_nodes"]}


def poisson_iccg(nx: int = 32, ny: int = 32, nz: int = 32, ordering_name: str = "natural",
            colors: int | None = None, lang: str = "c", threads: int | None = None,
            tol: float = 1e-8, input_file=None, dx: float = 1.0, dy: float = 1.0,
            dz: float = 1.0) -> dict:
    """`solve poisson --precond ic0`: the Poisson FVM problem of 03_openmp by ICCG."""
    if lang not in ICCG_LANGS:
        raise ValueError(f"lang must be one of {', '.join(ICCG_LANGS)}; got {lang!r}")
    ordering.check_ordering(ordering_name, colors)
    if input_file is not None:
        params = fvm.read_input(input_file)
        nx, ny, nz, dx, dy, dz, tol = (params[k] for k in ("nx", "ny", "nz", "dx", "dy", "dz",
                                                           "eps"))
    fvm._check_box(nx, ny, nz, dx, dy, dz)
    resources.check_memory(2 * POISSON_BYTES_PER_CELL * float(nx) * ny * nz,
                          f"poisson on {nx} x {ny} x {nz} cells")
    tol = native.check_real(tol, "tol", positive=True)
    used = _threads_used(lang, threads)
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
           **_iccg_fields(solved, "ic0", lang),
           "checksum": float(x.sum()), "phi_max": float(x[imax]), "phi_max_cell": imax,
           "nx": nx, "ny": ny, "nz": nz, "dx": dx, "dy": dy, "dz": dz, "tol": tol}
    if input_file is not None:
        out["input"] = str(input_file)
    return out


def fem3d_iccg(nx: int = 8, ny: int = 8, nz: int = 8, ordering_name: str = "natural",
          colors: int | None = None, lang: str = "c", threads: int | None = None,
          tol: float = 1e-8, cond: float = 1.0, qvol: float = 1.0, qflux: float = 0.0,
          fixed_face: str = "zmax", source: str = "constant") -> dict:
    """`solve fem3d --precond ic0`: the model problem of 02_fem3d (T = 0 on fixed_face, the
    flux qflux through the opposite face, the source qvol, or Nakajima's QVOL |x_c + y_c| with
    source="nakajima") by ICCG on its 27-point matrix."""
    if lang not in ICCG_LANGS:
        raise ValueError(f"lang must be one of {', '.join(ICCG_LANGS)}; got {lang!r}")
    ordering.check_ordering(ordering_name, colors)
    mesh.check_face(fixed_face)
    assembly.check_source(source)
    tol = native.check_real(tol, "tol", positive=True)
    box = mesh.box_mesh(nx, ny, nz)
    resources.check_memory(2 * FEM3D_BYTES_PER_NODE * box.n_node,
                          f"fem3d on {box.nx} x {box.ny} x {box.nz} elements")
    used = _threads_used(lang, threads)
    t0 = time.perf_counter()
    exact, _ = assembly.fem3d_model_exact(box, fixed_face, cond, qvol, qflux)
    asm_lang = "numba" if lang == "numpy" else lang
    a, rhs = assembly.fem3d_assemble(box, cond, qvol if source == "constant" else 0.0, asm_lang)
    if source == "nakajima":
        rhs += assembly.element_source_load(
            box.elements, box.xyz, assembly.nakajima_source(box.elements, box.xyz, qvol), asm_lang)
    if qflux != 0.0:
        assembly.fem3d_face_flux(box, mesh.OPPOSITE_FACE[fixed_face], qflux, rhs, asm_lang)
    mask = np.zeros(box.n_node, dtype=bool)
    mask[box.face_nodes(fixed_face)] = True
    assembly.dirichlet(a, rhs, mask, np.where(mask, exact(box.xyz), 0.0), asm_lang)
    t1 = time.perf_counter()
    solved = solve_ordered(a, rhs, ordering_name, colors, lang, tol)
    result = solved["result"]
    return {"problem": "fem3d", "lang": lang, "unknowns": a.n, "nnz": a.nnz,
            "iterations": result.iterations, "converged": bool(result.converged),
            "relative_residual": result.relative_residual, "threads": used,
            "seconds": {"assemble": t1 - t0, **solved["seconds"],
                        "total": t1 - t0 + sum(solved["seconds"].values())},
            **_iccg_fields(solved, "ic0", lang),
            "error_max": float(np.max(np.abs(solved["x"] - exact(box.xyz))))
            if source == "constant" else None, "t_max": float(solved["x"].max()),
            "source": source,
            "nx": box.nx, "ny": box.ny, "nz": box.nz, "tol": tol, "cond": cond, "qvol": qvol,
            "qflux": qflux, "fixed_face": fixed_face}


PROBLEMS = {"fem1d": fem1d, "fem3d": fem3d, "poisson": poisson}
