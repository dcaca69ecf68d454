"""The solvers: Krylov methods, their preconditioners and the orderings they need, one module per
concern:

    krylov   preconditioned CG four ways (PCG, Chronopoulos-Gear, Gropp, pipelined) on one code
             path with pluggable matvec, preconditioner and global reductions: the serial solver
             is the one-process case of the distributed one (lectures 01, 02, 05, 06)
    jacobi   Jacobi-preconditioned CG on a CRS matrix: NumPy (krylov), Numba, C and Fortran
    ladder   the OpenMP PCG ladder v0 .. v3 of lecture 03_openmp
    iccg     IC(0), the colored substitutions and ICCG of lecture 04_iccg
    ordering the orderings of 04_iccg: RCM, multicolor, CM-RCM (NCOLORtot), the permutation of a
             matrix and its checks (valid coloring, incompatible nodes)
    team     Numba threads as one team in one parallel region (static chunks, a barrier), for
             the Numba ICCG

They take matrices in course.sparse's formats from anywhere (course.fem builds them, and nothing
here imports it): a solver knows a matrix, not where it came from.
"""

from .jacobi import jacobi, pcg_jacobi
from .krylov import ALGORITHMS, VECTOR_UPDATES, Reductions, SolveResult, cg, check_algorithm, krylov
from .ladder import LADDER, LADDER_LANGS, check_ladder, pcg_ladder

__all__ = ["ALGORITHMS", "LADDER", "LADDER_LANGS", "Reductions", "SolveResult", "VECTOR_UPDATES",
           "cg", "check_algorithm", "check_ladder", "jacobi", "krylov", "pcg_jacobi",
           "pcg_ladder"]
