"""The parallel preconditioners of the distributed CG (lecture 08_hybrid): Jacobi, IC(0) localized
per rank, and GeoFEM's ASDD sweeps around it (Richardson steps on that block Jacobi, no overlap:
not the overlapping additive Schwarz of PETSc's asm).

IC(0)'s substitutions run along a dependency that crosses every cut of the mesh: row i waits for
rows j < i coupled to it, which may live on another rank. GeoFEM does not distribute them. Each
rank factorises only its internal block A_ii (the rows of its internal nodes, the columns of its
internal nodes: the couplings to external nodes are dropped) and the ranks apply their factors
independently, with no communication:

    bjacobi-ic0   z = B r,  B = the IC(0) of A_ii, numbered and colored inside the domain with an
                  ordering of 04_iccg (natural, cm, rcm, mc, cm-rcm), so that threads can share
                  each color's rows (course.solvers.iccg.ic0_apply)

This is block Jacobi over the ranks with IC(0) blocks. The more ranks, the more couplings are
dropped; how much that costs depends on where the cut lies more than on its size (08_hybrid_a
measures it). The ASDD sweeps are Richardson steps on B: each corrects z by the local solve of
the whole residual r - A z, which strengthens the preconditioner everywhere (one rank too) and
recovers part of what the dropped couplings cost,

    asdd-ic0      z = B r;  K - 1 times:  z = z + B (r - A z)

where A z needs the external entries of z: one halo exchange per extra sweep. K = 1 is
bjacobi-ic0. K sweeps apply M^-1 = (I - (I - B A)^K) A^-1; as A and B are symmetric, its transpose
A^-1 (I - (I - A B)^K) is the same matrix, so CG may use it. It is positive definite for odd K
(every eigenvalue lam of B A is positive, and 1 - (1 - lam)^K > 0), and for even K while every lam
stays below 2.

One rank's bjacobi-ic0 is the serial ICCG of 04_iccg on the same ordering (the internal block is
the whole matrix). The C and Fortran programs (src_c/08_hybrid/precond_mpi.c, its Fortran twin)
compute the same: same block, same ordering, same factor, same sweeps.
"""

from __future__ import annotations

import numpy as np

from .. import native
from ..solvers import iccg, ordering
from ..sparse import CRS

PRECONDITIONERS = ("diagonal", "bjacobi-ic0", "asdd-ic0")
DEFAULT_SWEEPS = {"diagonal": 1, "bjacobi-ic0": 1, "asdd-ic0": 2}


def check_precond(name: str, sweeps: int | None = None, ordering_name: str = "natural",
                  colors: int | None = None) -> int:
    """ValueError for a preconditioner, a number of sweeps or an ordering that do not go together;
    returns the sweeps (DEFAULT_SWEEPS[name] when None)."""
    if name not in PRECONDITIONERS:
        raise ValueError(f"precond must be one of {', '.join(PRECONDITIONERS)}; got {name!r}")
    if sweeps is None:
        sweeps = DEFAULT_SWEEPS[name]
    elif name != "asdd-ic0":
        raise ValueError(f"sweeps are for asdd-ic0, not for {name}")
    sweeps = native.check_int(sweeps, "asdd sweeps", minimum=1)
    if name == "diagonal" and (ordering_name != "natural" or colors is not None):
        raise ValueError("an ordering (and its colors) is for the IC(0) preconditioners, "
                         "not for diagonal")
    ordering.check_ordering(ordering_name, colors)
    return sweeps


# [internal_block]
def internal_block(matrix) -> CRS:
    """A_ii: the entries of the internal rows of `matrix` (a course.parallel.solve.LocalMatrix)
    whose column is an internal node, in their order."""
    n = matrix.n_rows
    rows = np.repeat(np.arange(n), np.diff(matrix.row_ptr))
    keep = matrix.col_idx < n
    row_ptr = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(np.bincount(rows[keep], minlength=n), out=row_ptr[1:])
    return CRS(row_ptr, matrix.col_idx[keep].copy(), matrix.val[keep].copy())
# [internal_block]


class Diagonal:
    """Jacobi: z = r / diag(A). No communication."""
    name, sweeps, colors, ordering = "diagonal", 1, 1, "natural"

    def __init__(self, matrix):
        self.dinv = 1.0 / matrix.diagonal()

    def __call__(self, r: np.ndarray) -> np.ndarray:
        return self.dinv * r


class LocalizedIC0:
    """bjacobi-ic0 (sweeps 1) and asdd-ic0 (sweeps K): IC(0) of this rank's internal block,
    numbered by `ordering_name` (colors: the target of mc and cm-rcm). `matvec(z)` is the
    distributed product (halo exchange of z + the local rows), needed by the extra sweeps only.
    lang: the substitutions' language (numpy: SciPy's triangular solves; numba, c, fortran: the
    colored sweeps of 04_iccg on the threads of this rank)."""

    def __init__(self, matrix, matvec=None, sweeps: int = 1, ordering_name: str = "natural",
                 colors: int | None = None, lang: str = "numba", name: str = "asdd-ic0"):
        self.name = name
        self.sweeps, self.ordering, self.matvec, self.lang = sweeps, ordering_name, matvec, lang
        block = internal_block(matrix)
        if colors is not None and colors > block.n:
            raise ValueError(f"colors {colors} exceed its {block.n} internal nodes")
        numbered = ordering.order(block, ordering_name, colors)
        self.perm, self.color_ptr = numbered.perm, numbered.color_ptr
        self.colors = numbered.colors
        self.factor = iccg.ic0(iccg.split(ordering.permute(block, self.perm)),
                               "numba" if lang == "numpy" else lang)
        # the substitutions of every application read and write these, in the block's numbering;
        # C and Fortran check the factor and its coloring once, here, not at every iteration
        self.permuted, self.solved = np.zeros(block.n), np.zeros(block.n)
        self.compiled = None if lang not in native.COMPILED_LANGS else native.ic0_apply_prepared(
            lang, self.color_ptr, self.factor.lower.row_ptr, self.factor.lower.col_idx,
            self.factor.lower.val, self.factor.upper.row_ptr, self.factor.upper.col_idx,
            self.factor.upper.val, self.factor.d, self.permuted, self.solved)

    def solve_block(self, r: np.ndarray) -> np.ndarray:
        """B r: the two substitutions of the local factor, in the domain's own numbering."""
        np.take(r, self.perm, out=self.permuted)
        if self.compiled is not None:
            self.compiled()
            solved = self.solved
        else:
            solved = iccg.ic0_apply(self.factor, self.permuted, self.color_ptr, self.lang)
        return ordering.unpermute_vector(solved, self.perm)

    # [asdd_sweeps]
    def __call__(self, r: np.ndarray) -> np.ndarray:
        z = self.solve_block(r)
        for _ in range(self.sweeps - 1):               # a Richardson step on B: correct z by
            z += self.solve_block(r - self.matvec(z))  # the local solve of the residual
        return z
    # [asdd_sweeps]


def preconditioner(matrix, name: str = "diagonal", matvec=None, sweeps: int | None = None,
                   ordering_name: str = "natural", colors: int | None = None,
                   lang: str = "numba"):
    """The preconditioner `name` of PRECONDITIONERS for this rank's rows."""
    sweeps = check_precond(name, sweeps, ordering_name, colors)
    if name == "diagonal":
        return Diagonal(matrix)
    return LocalizedIC0(matrix, matvec, sweeps, ordering_name, colors, lang, name)
