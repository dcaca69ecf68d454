"""Complete problems, each run end to end and summarised as one dictionary (the JSON of
`python -m course solve`). Shared fields: problem, lang, unknowns, nnz, iterations, converged,
relative_residual, threads, seconds {assemble, solve, total}."""

from __future__ import annotations

import os
import time

import numpy as np

from . import fem, mesh, solvers
from .langs import check_lang


def threads_for(lang: str) -> int:
    """Threads the kernels of `lang` use: OpenMP's for C/Fortran, 1 for the serial twins."""
    if lang in ("c", "fortran"):
        return int(os.environ.get("OMP_NUM_THREADS", os.cpu_count() or 1))
    return 1


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


PROBLEMS = {"fem1d": fem1d}
