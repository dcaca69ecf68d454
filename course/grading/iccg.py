"""The checks of the exercise of lecture 04_iccg (solutions/04_iccg): a greedy multicoloring, the
colored IC(0) substitution `ic0_apply` in C or Fortran with OpenMP, and the number of incompatible
nodes of a coloring.

The multicoloring and the count may be written in Python, C or Fortran: compiled_multicolor and
compiled_incompatible_nodes turn the learner's C or Fortran function into a Python function of the
same signature as the Python task's, which runs it in a child process (a crash or an endless loop
fails the check, the notebook's kernel lives on), so that check_multicolor and
check_incompatible_nodes grade every language on the same cases. Fortran's index arrays and colors
are 1-based; these functions convert, and the messages of check_multicolor name entries and colors
as the learner's language counts them.

A coloring is graded by what makes it usable, never by equality with the course's: every unknown
has a color 0, 1, ..., ncolor - 1 (each used), no two coupled unknowns share one, no color holds
more than ceil(n / K) unknowns (the target K of the lecture's multicoloring), and there are at most
K + max_degree colors. That bound holds for every greedy coloring with a size cap, the lecture's
color-by-color sweep and the unknown-by-unknown first fit alike: a new color is opened only when
each color so far is full or holds a neighbour of the unknown to be placed; at most K - 1 colors
can be full then (K full colors hold all n unknowns), and at most max_degree hold a neighbour.
`multicolor_first_fit_reversed` is such a second coloring, different from the course's, and passes.

The substitution is run in a child process (course.grading.exercise.run_isolated) with 1 to 4
threads on matrices colored by the course (expected values from the NumPy reference, SciPy's
triangular solves), must give the same z bit for bit with every number of threads, and, at grading
time, runs once under ThreadSanitizer + Archer and under the OMPT work count
(course.grading.race_check): a sweep that ignores the colors, shares out the colors instead of the
rows, or drops the barrier between two colors races; one with num_threads(1) runs serially; one
with a `parallel for` per color and sweep is right and race-free, but opens 2 ncolor parallel
regions per call where the task asks for one (the region count of the work check).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import numpy as np
import scipy.sparse

from .. import native
from ..fem import assembly, fvm
from ..solvers import ordering
from ..fem.mesh import box_mesh
from ..solvers import iccg as ic
from ..sparse import CRS
from . import exercise
from .exercise import entry, plain, row_label


def _course(function):
    """The course's `function` as the private copy (exercise.reference) that the checks compute
    with: it stays usable while the original is blocked during the learner's call. (Taken at call
    time, not kept in this module, where a learner's code could pick it up.)"""
    return exercise.reference(function)


# --- the graphs and matrices -------------------------------------------------------------------

@dataclass
class Graph:
    """The coupled unknowns of each unknown: adj[ptr[i]:ptr[i+1]] (0-based, rising, no i)."""
    label: str
    ptr: np.ndarray
    adj: np.ndarray

    @property
    def n(self) -> int:
        return self.ptr.shape[0] - 1

    @property
    def max_degree(self) -> int:
        return int(np.diff(self.ptr).max(initial=0))


def _from_pairs(n: int, i: np.ndarray, j: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    keep = i != j
    pairs = np.unique(np.sort(np.stack([i[keep], j[keep]], axis=1), axis=1), axis=0)
    rows = np.concatenate([pairs[:, 0], pairs[:, 1]])
    cols = np.concatenate([pairs[:, 1], pairs[:, 0]])
    order = np.lexsort((cols, rows))
    ptr = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(np.bincount(rows, minlength=n), out=ptr[1:])
    return ptr, cols[order].astype(np.int32)


def random_graph(n: int, mean_degree: float, seed: int) -> Graph:
    """A random symmetric graph of n unknowns and about n * mean_degree / 2 couplings (some
    unknowns have none)."""
    rng = np.random.default_rng(seed)
    m = int(round(n * mean_degree / 2))
    ptr, adj = _from_pairs(n, rng.integers(0, n, m), rng.integers(0, n, m))
    return Graph(f"a random graph of {n} unknowns with about {mean_degree:g} neighbours each "
                 f"(seed {seed})", ptr, adj)


def grid_graph(nx: int, ny: int, nz: int = 1) -> Graph:
    """The 5-point (nz = 1) or 7-point finite-volume stencil on nx x ny (x nz) cells."""
    ptr, adj = _course(ordering.adjacency)(fvm.poisson(nx, ny, nz).full_crs())
    if nz == 1:
        return Graph(f"the 5-point grid of {nx} x {ny} cells", ptr, adj)
    return Graph(f"the 7-point grid of {nx} x {ny} x {nz} cells", ptr, adj)


def fem_graph(nx: int, ny: int, nz: int) -> Graph:
    """The 27-point graph of the trilinear FEM matrix on nx x ny x nz hexahedra (02_fem3d)."""
    row_ptr, col_idx = assembly.fem3d_pattern(box_mesh(nx, ny, nz))
    ptr, adj = _course(ordering.adjacency)(CRS(row_ptr, col_idx, np.ones(col_idx.shape[0])))
    return Graph(f"the 27-point FEM graph of {nx} x {ny} x {nz} hexahedra "
                 f"({(nx + 1) * (ny + 1) * (nz + 1)} nodes)", ptr, adj)


def m_matrix(graph: Graph, seed: int) -> CRS:
    """A symmetric, diagonally dominant M-matrix with the graph's couplings (IC(0) exists)."""
    rng = np.random.default_rng(seed)
    n = graph.n
    rows = np.repeat(np.arange(n), np.diff(graph.ptr))
    upper = graph.adj > rows
    u = scipy.sparse.coo_matrix((-rng.uniform(0.2, 1.0, int(upper.sum())),
                                 (rows[upper], graph.adj[upper])), shape=(n, n))
    off = (u + u.T).tocsr()
    dominance = -np.asarray(off.sum(axis=1)).ravel()
    a = (off + scipy.sparse.diags(dominance + rng.uniform(0.1, 1.0, n))).tocsr()
    a.sort_indices()
    return CRS(a.indptr.astype(np.int32), a.indices.astype(np.int32), a.data.copy())


# --- colorings -----------------------------------------------------------------------------------

def course_multicolor(graph: Graph, target_colors: int) -> np.ndarray:
    """The lecture's multicoloring (course.solvers.ordering, Nakajima's MC): a color per unknown."""
    color = np.empty(graph.n, dtype=np.int32)
    _course(ordering._multicolor)(graph.ptr, graph.adj, int(target_colors), color)
    return color


def multicolor_first_fit_reversed(ptr, adj, target_colors) -> np.ndarray:
    """A second greedy coloring with the same target, different from the course's: the unknowns
    from the last to the first, each into the lowest color that holds no neighbour and fewer than
    ceil(n / K) unknowns. Valid, within the cap, at most K + max_degree colors."""
    n = len(ptr) - 1
    cap = -(-n // int(target_colors))
    color = np.full(n, -1, dtype=np.int64)
    sizes = []
    for v in range(n - 1, -1, -1):
        taken = {int(color[u]) for u in adj[ptr[v]:ptr[v + 1]] if color[u] >= 0}
        c = 0
        while c < len(sizes) and (c in taken or sizes[c] == cap):
            c += 1
        if c == len(sizes):
            sizes.append(0)
        color[v] = c
        sizes[c] += 1
    return color


COLORINGS = {"mc": "the course's MC", "reversed": "a first fit from the last unknown to the first"}


def coloring(graph: Graph, how: str, target_colors: int) -> tuple[np.ndarray, str]:
    """(a color per unknown, its description): how = "mc" (the course's multicoloring) or
    "reversed" (multicolor_first_fit_reversed), with the target K."""
    if how == "mc":
        color = course_multicolor(graph, target_colors)
    elif how == "reversed":
        color = multicolor_first_fit_reversed(graph.ptr, graph.adj, target_colors)
    else:
        raise ValueError(f"how must be one of {', '.join(COLORINGS)}; got {how!r}")
    return color.astype(np.int32), f"{COLORINGS[how]} with K = {target_colors}"


# what compiled_multicolor puts into `color` before the learner's function runs: an entry that
# still holds it was never written
NOT_WRITTEN = int(np.iinfo(np.int32).min)


def coloring_problem(graph: Graph, target_colors: int, color, lang: str = "python") -> str | None:
    """What is wrong with `color` (0-based colors) as a coloring of the graph with the target K
    (None: nothing), said in the learner's language: for Fortran, entries, unknowns and colors
    counted from 1 (compiled_multicolor returned Fortran's colors less 1)."""
    n, k = graph.n, int(target_colors)
    base = 1 if lang == "fortran" else 0
    try:
        color = np.asarray(color)
    except (TypeError, ValueError):
        return f"returned {type(color).__name__}, not an array of n = {n} colors"
    if color.shape != (n,):
        return (f"returned an array of shape {color.shape}, expected one color per unknown: "
                f"shape ({n},)")
    if color.dtype.kind not in "iu":
        if color.dtype.kind != "f" or not np.all(np.isfinite(color)) \
                or np.any(color != np.round(color)):
            return f"returned an array of {color.dtype}, not of integer colors"
        color = color.astype(np.int64)
    color = color.astype(np.int64)
    if n == 0:
        return None
    if color.min() < 0:
        v = int(np.argmin(color))
        written = int(color[v]) + base                  # as the learner's code wrote it
        if lang != "python" and written == NOT_WRITTEN:
            return f"{entry('color', v, lang)} was never written: give every unknown a color"
        hint = " (Fortran's colors count from 1)" if lang == "fortran" and written == 0 else ""
        return (f"{entry('color', v, lang)} is {written}: every unknown needs a color {base}, "
                f"{base + 1}, {base + 2}, ...{hint}")
    ncolor = int(color.max()) + 1
    sizes = np.bincount(color, minlength=ncolor)
    empty = np.flatnonzero(sizes == 0)
    if empty.size:
        shifted = f" (colors counted from {base + 1}?)" if empty.tolist() == [0] else ""
        last = "ncolor" if base else "ncolor - 1"
        return (f"no unknown has color {int(empty[0]) + base}{shifted}: number the colors {base}, "
                f"{base + 1}, ..., {last} without gaps (color_ptr gets one entry per color, and "
                f"an empty color costs a barrier for nothing)")
    rows = np.repeat(np.arange(n), np.diff(graph.ptr))
    same = np.flatnonzero(color[rows] == color[graph.adj])
    if same.size:
        i, j = int(rows[same[0]]), int(graph.adj[same[0]])
        counted = " (1-based)" if base else ""
        return (f"the unknowns {i + base} and {j + base}{counted} are coupled and both have color "
                f"{int(color[i]) + base}: rows of one color must be independent")
    cap = -(-n // k)
    big = int(np.argmax(sizes))
    if sizes[big] > cap:
        return (f"color {big + base} holds {int(sizes[big])} unknowns; with the target K = {k} a "
                f"color holds at most ceil(n / K) = ceil({n} / {k}) = {cap} (close a color when it "
                f"is full)")
    bound = k + graph.max_degree
    if ncolor > bound:
        return (f"it uses {ncolor} colors; a greedy coloring with the target K = {k} needs at "
                f"most K + the largest number of neighbours = {k} + {graph.max_degree} = {bound} "
                f"(open a new color only when no existing one can take the unknown)")
    return None


# --- the course's ordering code out of the learner's reach --------------------------------------

# every function that would answer task 1: course.solvers.ordering's and course.native's colorings
# and the colorings of this module (references_blocked adds exercise.reference, the door to copies)
_ORDERING_FUNCTIONS = (ordering.order, ordering._kernels, ordering._multicolor,
                       ordering._cyclic_colors, ordering._wavefronts, ordering._cuthill_mckee,
                       native.multicolor, native.cyclic_colors, native.wavefronts,
                       course_multicolor, multicolor_first_fit_reversed, coloring)


@contextlib.contextmanager
def orderings_blocked():
    """Every entry point of course.solvers.ordering (and course.native, and this module) that would
    color the graph raises exercise.ReferenceUsed: by name, by module attribute, and the
    compiled (Numba) kernels in ordering._KERNELS."""
    saved = dict(ordering._KERNELS)
    blocker = exercise._blocker("course.solvers.ordering (its multicoloring)")
    try:
        with exercise.references_blocked(*_ORDERING_FUNCTIONS):
            ordering._KERNELS["numba"] = (blocker,) * len(saved["numba"])
            yield
    finally:
        ordering._KERNELS.clear()
        ordering._KERNELS.update(saved)


# --- task 1: the multicoloring -------------------------------------------------------------------

def check_multicolor(multicolor, cases, lang: str = "python") -> None:
    """multicolor(ptr, adj, target_colors) -> a color per unknown, on each (graph, K) of
    `cases`, with the course's orderings blocked; AssertionError naming the graph and the
    property that fails. lang: the language the learner wrote it in (a C or Fortran multicolor
    comes from compiled_multicolor), which the message speaks."""
    for graph, k in cases:
        with orderings_blocked():
            got = multicolor(graph.ptr.copy(), graph.adj.copy(), k)
        problem = coloring_problem(graph, k, got, lang)
        if problem:
            raise AssertionError(f"multicolor on {graph.label} with target_colors = {k}: "
                                 f"{problem}")


# --- task 3: incompatible nodes ------------------------------------------------------------------

def expected_incompatible(graph: Graph, color: np.ndarray) -> int:
    """The course's count, for the unknowns numbered color by color."""
    perm = np.argsort(color, kind="stable").astype(np.int32)
    return _course(ordering.incompatible_nodes)(graph.ptr, graph.adj, perm)


def check_incompatible_nodes(incompatible_nodes, cases) -> None:
    """incompatible_nodes(ptr, adj, color) against the course's count (which is blocked while
    the learner's function runs) on each (graph, how, K) of `cases`: the graph colored by
    coloring(graph, how, K)."""
    for graph, how, k in cases:
        color, what = coloring(graph, how, k)
        expected = expected_incompatible(graph, color)
        with exercise.references_blocked(ordering.incompatible_nodes, expected_incompatible,
                                         exercise.reference):
            got = incompatible_nodes(graph.ptr.copy(), graph.adj.copy(), color.copy())
        try:
            same = int(got) == expected and float(got) == expected
        except (TypeError, ValueError):
            raise AssertionError(f"incompatible_nodes returned {type(got).__name__}, not a "
                                 f"number") from None
        if not same:
            raise AssertionError(f"incompatible_nodes of {graph.label} colored by {what} "
                                 f"({int(color.max()) + 1} colors): returned {plain(got)}, "
                                 f"expected {expected}")


# --- tasks 1 and 3 in C or Fortran: the learner's function as a Python function -----------------

_SUFFIX = {"c": ".c", "fortran": ".f90"}


def _graph_args(ptr, adj, lang: str) -> tuple[int, np.ndarray, np.ndarray]:
    """(n, ptr, adj) as the compiled function takes them: int32, 1-based for Fortran."""
    base = 1 if lang == "fortran" else 0
    ptr, adj = np.asarray(ptr, dtype=np.int32), np.asarray(adj, dtype=np.int32)
    return ptr.shape[0] - 1, ptr + base, adj + base


def compiled_multicolor(source, lang: str, timeout: float = 10.0):
    """The learner's `void multicolor(int n, const int *ptr, const int *adj, int target_colors,
    int *color)` of the C or Fortran file `source`, compiled, as a Python function
    multicolor(ptr, adj, target_colors) -> a 0-based color per unknown, each call run in a child
    process (a crash or a call past `timeout` seconds: AssertionError). Fortran gets 1-based
    ptr and adj and gives colors 1, 2, ...: they come back less 1. An entry the function does
    not write holds NOT_WRITTEN. The compiler's errors: AssertionError, now."""
    lib = exercise.compile_kernel(source, lang)
    base = 1 if lang == "fortran" else 0

    def multicolor(ptr, adj, target_colors):
        n, ptr, adj = _graph_args(ptr, adj, lang)
        color = np.full(n, NOT_WRITTEN, dtype=np.int32)
        args = [n, ptr, adj, int(target_colors), color]
        (run,) = exercise.run_isolated(lib, "multicolor", args, timeout=timeout, keep=[4])
        return run.arrays[4].astype(np.int64) - base
    return multicolor


def compiled_incompatible_nodes(source, lang: str, timeout: float = 10.0):
    """The learner's `int incompatible_nodes(int n, const int *ptr, const int *adj,
    const int *color)` of the C or Fortran file `source`, compiled, as a Python function
    incompatible_nodes(ptr, adj, color) -> its count, each call run in a child process (a crash
    or a call past `timeout` seconds: AssertionError). Fortran gets ptr, adj and the colors
    1-based."""
    lib = exercise.compile_kernel(source, lang)
    base = 1 if lang == "fortran" else 0

    def incompatible_nodes(ptr, adj, color):
        n, ptr, adj = _graph_args(ptr, adj, lang)
        color = np.asarray(color, dtype=np.int32) + base
        (run,) = exercise.run_isolated(lib, "incompatible_nodes", [n, ptr, adj, color],
                                       returns="int", timeout=timeout, keep=[])
        return run.result
    return incompatible_nodes


def _learners(setting: str, name: str, lang: str, python_function, compiled):
    """python_function for lang "python"; for "c" and "fortran", compiled(name.c or name.f90: the
    file the notebook's %%writefile cell writes, lang); ValueError naming `setting` otherwise."""
    if lang == "python":
        return python_function
    if lang not in _SUFFIX:
        raise ValueError(f'{setting} must be "python", "c" or "fortran", not {lang!r}')
    return compiled(name + _SUFFIX[lang], lang)


def learners_multicolor(lang: str, multicolor):
    """Task 1's answer in the language `lang` (the notebook's TASK1_LANGUAGE): the Python
    `multicolor` itself, or multicolor.c / multicolor.f90 through compiled_multicolor."""
    return _learners("TASK1_LANGUAGE", "multicolor", lang, multicolor, compiled_multicolor)


def learners_incompatible_nodes(lang: str, incompatible_nodes):
    """Task 3's answer in the language `lang` (the notebook's TASK3_LANGUAGE): the Python
    `incompatible_nodes` itself, or incompatible_nodes.c / .f90 through
    compiled_incompatible_nodes."""
    return _learners("TASK3_LANGUAGE", "incompatible_nodes", lang, incompatible_nodes,
                     compiled_incompatible_nodes)


# --- task 2: the colored substitution ------------------------------------------------------------

@dataclass
class Colored:
    """A matrix numbered color by color, its IC(0) factor, a right-hand side and M^-1 r."""
    label: str
    color_ptr: np.ndarray
    factor: ic.IC0
    r: np.ndarray
    expected: np.ndarray

    @property
    def n(self) -> int:
        return self.r.shape[0]

    @property
    def ncolor(self) -> int:
        return self.color_ptr.shape[0] - 1

    def args(self, lang: str) -> list:
        """The arguments of ic0_apply (course signature; Fortran: 1-based index arrays)."""
        base = 1 if lang == "fortran" else 0
        f = self.factor
        return [self.n, self.ncolor, self.color_ptr + base, f.lower.row_ptr + base,
                f.lower.col_idx + base, f.lower.val, f.upper.row_ptr + base,
                f.upper.col_idx + base, f.upper.val, f.d, self.r, np.full(self.n, np.nan)]


APPLY_NAMES = ("n", "ncolor", "color_ptr", "lower_ptr", "lower_col", "fac_lower", "upper_ptr",
               "upper_col", "fac_upper", "fac_diag", "r", "z")


def colored(graph: Graph, how: str, target_colors: int, seed: int) -> Colored:
    """The M-matrix on the graph numbered by coloring(graph, how, K), factored, with a random r
    and M^-1 r."""
    color, what = coloring(graph, how, target_colors)
    a = m_matrix(graph, seed)
    ncolor = int(color.max()) + 1
    perm = np.argsort(color, kind="stable").astype(np.int32)
    color_ptr = np.zeros(ncolor + 1, dtype=np.int32)
    np.cumsum(np.bincount(color, minlength=ncolor), out=color_ptr[1:])
    factor = _course(ic.ic0)(_course(ic.split)(_course(ordering.permute)(a, perm)), "numpy")
    r = np.random.default_rng(seed + 1).uniform(-1.0, 1.0, graph.n)
    expected = _course(ic.ic0_apply)(factor, r, color_ptr, "numpy")
    return Colored(f"{graph.label}, colored by {what} ({ncolor} colors)", color_ptr, factor, r,
                   expected)


def check_ic0_apply(source, lang: str, cases: list[Colored], threads=(1, 2, 3, 4),
                    timeout: float = 10.0) -> None:
    """The learner's ic0_apply (signature of src_c/04_iccg/ic0.c), compiled with OpenMP, run
    with each number of threads on each case: z = M^-1 r to 1e-10 of the NumPy reference, and
    bitwise the same z for every number of threads. AssertionError naming the case, the threads
    and the first wrong entry (in the learner's index base)."""
    lib = exercise.compile_kernel(source, lang, openmp=True)
    base = 1 if lang == "fortran" else 0
    for case in cases:
        first = None
        for t in threads:
            (run,) = exercise.run_isolated(lib, "ic0_apply", case.args(lang), threads=t,
                                           timeout=timeout, keep=[11], env=exercise.PASSIVE)
            z = run.arrays[11]
            scale = float(np.abs(case.expected).max(initial=0.0))
            wrong = ~np.isclose(z, case.expected, rtol=1e-10, atol=1e-12 * scale)
            if wrong.any():
                i = int(np.argmax(wrong))
                color = int(np.searchsorted(case.color_ptr, i, side="right")) - 1
                hint = ""
                if first is not None:
                    hint = (f" (it is right with OMP_NUM_THREADS={first[0]}: does every color "
                            "wait until the earlier colors are done, in both sweeps?)")
                raise AssertionError(
                    f"ic0_apply with OMP_NUM_THREADS={t} is wrong for {case.label}: "
                    f"{entry('z', i, lang)} is {plain(z[i])}, expected {plain(case.expected[i])} "
                    f"({row_label(i, lang)} is in color {color + base}){hint}")
            if first is None:
                first = (t, z)
            elif z.tobytes() != first[1].tobytes():
                i = int(np.argmax(z != first[1]))
                raise AssertionError(
                    f"ic0_apply gives {entry('z', i, lang)} = {plain(z[i])} with "
                    f"OMP_NUM_THREADS={t} but {plain(first[1][i])} with OMP_NUM_THREADS="
                    f"{first[0]}, for {case.label}: the ordering fixes every row's arithmetic, "
                    "so a race-free substitution gives bitwise the same z with any number of "
                    "threads")


def check_ic0_apply_openmp(source, lang: str, threads: int = 2, timeout: float = 20.0) -> None:
    """The learner's ic0_apply opens one parallel region per call (not one per color and sweep),
    shares the rows of each color among the threads (OMPT) and has no data race (ThreadSanitizer
    + Archer), on a random matrix of 240 unknowns colored with K = 5."""
    from . import race_check

    case = colored(random_graph(240, 4.0, 331), "mc", 5, 41)
    loop = "`#pragma omp for`" if lang == "c" else "`!$omp do`"
    race_check.check_openmp_kernel(
        source, lang, "ic0_apply", case.args(lang), names=APPLY_NAMES, threads=threads,
        timeout=timeout, regions=1,
        region_advice=f"In that region, every thread runs the loops over the colors of both "
                      f"sweeps, and {loop} shares the rows of each color.",
        hint="the rows of one color may run at the same time, but a color may start only when "
             "the colors it reads are done: one worksharing loop per color, with its implied "
             "barrier (no nowait), inside the loop over the colors")
