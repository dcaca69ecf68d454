"""Orderings of the unknowns for the colored (parallel) IC(0) substitution (lecture 04_iccg).

The forward substitution of IC(0), z_i = (r_i - sum_{j < i} l_ij z_j) / d_i, needs every earlier
coupled unknown first: a data dependency from row to row. Unknowns that are not coupled to each
other can be done at the same time. An ordering here is a permutation that numbers the unknowns
color by color (color_ptr[c] .. color_ptr[c+1]-1 is color c) so that no two unknowns of one color
are coupled: the rows of a color are independent, and the substitution loops over the colors with
a parallel loop inside each (one barrier per color and sweep).

    natural   the given numbering, one "color" done sequentially (the reference; one thread)
    cm        Cuthill-McKee, not reversed; colors as for rcm
    rcm       reverse Cuthill-McKee (breadth-first level sets, reversed); the colors are the
              wavefronts of that numbering (level(v) = 1 + the largest level of an earlier
              neighbour), so it keeps exactly the dependencies, and the iterations, of RCM
    mc        greedy multicoloring with a target of K colors (Nakajima's MC): each color takes
              uncolored unknowns in the current order that have no neighbour in it yet, until it
              holds ceil(N / K); the count may exceed K
    cm-rcm    cyclic multicoloring of the RCM level sets: level l gets color l mod K (the next
              free one if a neighbour already holds it, a new color beyond K if none is free)

Nakajima's codes choose with one integer NCOLORtot (`from_ncolortot`): > 1 MC with that many
colors, 0 CM, -1 RCM, <= -2 CM-RCM with |NCOLORtot| colors, 1 the natural order (our convention
for 1: a single color is the sequential sweep).

RCM here starts from the first node of least degree and appends the unvisited neighbours of each
node by increasing degree (ties: increasing number), as SciPy's reverse_cuthill_mckee does; SciPy
breaks ties among the start candidates differently, so the two give orderings of the same
bandwidth class, not always the same permutation (tests/test_iccg.py compares the bandwidths).

Incompatible nodes (Doi & Washio, Parallel Computing 25, 1999; the definition as used in
Nakajima's ordering lectures, not from the seeds): unknowns with no coupled unknown numbered before
them, i.e. empty rows of the strict lower triangle. IC(0) leaves their diagonal unmodified; the more
there are, the weaker the preconditioner (MC: every unknown of the first color is one).

The same orderings are written in C and Fortran (src_*/04_iccg/ordering.*) so that the standalone
programs stand alone; `order(..., lang=)` runs any of them and the tests check they agree.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import numba
import numpy as np

from .. import native
from ..sparse import CRS

ORDERINGS = ("natural", "cm", "rcm", "mc", "cm-rcm")
ORDERING_LANGS = ("numpy", "numba", "c", "fortran")


@dataclass
class Ordering:
    """perm[new] = old: the unknown numbered `new` was `old`; color_ptr (ncolor + 1) the colors."""
    name: str
    requested_colors: int | None
    perm: np.ndarray            # int32, n
    color_ptr: np.ndarray       # int32, ncolor + 1

    @property
    def n(self) -> int:
        return self.perm.shape[0]

    @property
    def colors(self) -> int:
        return self.color_ptr.shape[0] - 1

    @property
    def iperm(self) -> np.ndarray:
        """iperm[old] = new."""
        inverse = np.empty_like(self.perm)
        inverse[self.perm] = np.arange(self.n, dtype=np.int32)
        return inverse

    @property
    def synchronisations_per_substitution(self) -> int:
        """Barriers of one forward (or backward) sweep: one per color."""
        return self.colors


def from_ncolortot(ncolortot: int) -> tuple[str, int | None]:
    """Nakajima's NCOLORtot as (ordering, colors): > 1 mc, 1 natural, 0 cm, -1 rcm, <= -2 cm-rcm."""
    k = native.check_int(ncolortot, "NCOLORtot", minimum=-2**31 + 1)
    if k > 1:
        return "mc", k
    if k == 1:
        return "natural", None
    if k == 0:
        return "cm", None
    if k == -1:
        return "rcm", None
    return "cm-rcm", -k


# --- the graph ---------------------------------------------------------------------------------

def adjacency(a: CRS) -> tuple[np.ndarray, np.ndarray]:
    """(ptr, adj): the coupled unknowns of each unknown (the off-diagonal pattern of the symmetric
    matrix a, columns increasing), int32."""
    rows = np.repeat(np.arange(a.n, dtype=np.int32), np.diff(a.row_ptr))
    off = rows != a.col_idx
    ptr = np.zeros(a.n + 1, dtype=np.int32)
    np.cumsum(np.bincount(rows[off], minlength=a.n), out=ptr[1:])
    return ptr, a.col_idx[off].astype(np.int32)


def is_valid_coloring(ptr, adj, perm, color_ptr) -> bool:
    """True if no two coupled unknowns share a color (and perm is a permutation)."""
    n = ptr.shape[0] - 1
    if not np.array_equal(np.sort(perm), np.arange(n)) or color_ptr[0] != 0 \
            or color_ptr[-1] != n or np.any(np.diff(color_ptr) < 0):
        return False
    color_of_new = np.repeat(np.arange(len(color_ptr) - 1), np.diff(color_ptr))
    color = np.empty(n, dtype=np.int64)
    color[perm] = color_of_new                     # color of every old unknown
    rows = np.repeat(np.arange(n), np.diff(ptr))
    return not np.any(color[rows] == color[adj])


def incompatible_nodes(ptr, adj, perm) -> int:
    """Unknowns with no coupled unknown numbered before them (Doi & Washio; see the module
    docstring): the empty rows of the strict lower triangle after the permutation."""
    n = ptr.shape[0] - 1
    new = np.empty(n, dtype=np.int64)
    new[perm] = np.arange(n)
    rows = np.repeat(np.arange(n), np.diff(ptr))
    has_earlier = np.zeros(n, dtype=bool)
    has_earlier[rows[new[adj] < new[rows]]] = True
    return int(n - has_earlier.sum())


def bandwidth(ptr, adj, perm=None) -> int:
    """max |new(i) - new(j)| over coupled i, j."""
    n = ptr.shape[0] - 1
    new = np.arange(n) if perm is None else np.argsort(perm)
    rows = np.repeat(np.arange(n), np.diff(ptr))
    return int(np.max(np.abs(new[rows] - new[adj]), initial=0))


def profile(ptr, adj, perm=None) -> int:
    """Sum over rows of the distance from the diagonal to the first entry of the row (the
    envelope of the lower triangle)."""
    n = ptr.shape[0] - 1
    new = np.arange(n) if perm is None else np.argsort(perm)
    rows = np.repeat(np.arange(n), np.diff(ptr))
    first = new.copy()
    np.minimum.at(first, new[rows], new[adj])
    return int(np.sum(new - first))


# --- the orderings: plain loops, run as Python (lang numpy) or compiled by Numba ---------------

# [cuthill_mckee]
def _cuthill_mckee(ptr, adj, order, level):
    """Breadth-first numbering: order[k] = the k-th unknown visited, level[v] its level set.
    Start: the first unvisited unknown of least degree; neighbours by increasing degree."""
    n = ptr.shape[0] - 1
    degree = ptr[1:] - ptr[:-1]
    visited = np.zeros(n, dtype=np.bool_)
    count, next_level = 0, 0
    while count < n:                                  # one connected component per pass
        start = -1
        for v in range(n):
            if not visited[v] and (start < 0 or degree[v] < degree[start]):
                start = v
        visited[start] = True
        order[count] = start
        level[start] = next_level
        head, count = count, count + 1
        while head < count:
            v = order[head]
            head += 1
            first = count
            for k in range(ptr[v], ptr[v + 1]):
                u = adj[k]
                if not visited[u]:
                    visited[u] = True
                    level[u] = level[v] + 1
                    # insert u among the new ones, sorted by degree (stable: by number on ties)
                    pos = count
                    while pos > first and degree[order[pos - 1]] > degree[u]:
                        order[pos] = order[pos - 1]
                        pos -= 1
                    order[pos] = u
                    count += 1
        next_level = level[order[count - 1]] + 1
# [cuthill_mckee]


# [wavefronts]
def _wavefronts(ptr, adj, order, level):
    """level[v] = 1 + the largest level of a neighbour numbered before v in `order` (0 if none):
    unknowns of one level never depend on each other in the substitution of that numbering."""
    n = ptr.shape[0] - 1
    position = np.empty(n, dtype=np.int32)
    for k in range(n):
        position[order[k]] = k
    for k in range(n):
        v = order[k]
        lv = 0
        for j in range(ptr[v], ptr[v + 1]):
            u = adj[j]
            if position[u] < k and level[u] + 1 > lv:
                lv = level[u] + 1
        level[v] = lv
# [wavefronts]


# [multicolor]
def _multicolor(ptr, adj, target_colors, color):
    """Greedy multicoloring: each color sweeps the unknowns in order and takes every uncolored
    one with no neighbour taken into this color, until the color holds ceil(n / K). Returns the
    number of colors (may exceed K)."""
    n = ptr.shape[0] - 1
    target = (n + target_colors - 1) // target_colors
    blocked = np.zeros(n, dtype=np.int32)       # blocked[v] = c + 1: a neighbour has color c
    for v in range(n):
        color[v] = -1
    left, ncolor = n, 0
    while left > 0:
        size = 0
        for v in range(n):
            if color[v] < 0 and blocked[v] != ncolor + 1:
                color[v] = ncolor
                size += 1
                left -= 1
                for k in range(ptr[v], ptr[v + 1]):
                    blocked[adj[k]] = ncolor + 1
                if size == target:
                    break
        ncolor += 1
    return ncolor
# [multicolor]


# [cyclic_colors]
def _cyclic_colors(ptr, adj, order, level, target_colors, color):
    """CM-RCM: visiting the unknowns in `order`, give v the color level[v] mod K, or the next
    of the K colors that no colored neighbour holds, or a new color beyond K if all K are held.
    Returns the number of colors."""
    n = ptr.shape[0] - 1
    held = np.full(n + target_colors, -1, dtype=np.int32)  # held[c] = v: a neighbour of v has c
    for v in range(n):
        color[v] = -1
    ncolor = 0
    for k in range(n):
        v = order[k]
        for j in range(ptr[v], ptr[v + 1]):
            if color[adj[j]] >= 0:
                held[color[adj[j]]] = v
        c = -1
        for t in range(target_colors):
            candidate = (level[v] + t) % target_colors
            if held[candidate] != v:
                c = candidate
                break
        if c < 0:
            c = target_colors
            while held[c] == v:
                c += 1
        color[v] = c
        if c + 1 > ncolor:
            ncolor = c + 1
    return ncolor
# [cyclic_colors]


_KERNELS = {
    "numpy": (_cuthill_mckee, _wavefronts, _multicolor, _cyclic_colors),
    "numba": tuple(numba.njit(cache=True)(f) for f in (_cuthill_mckee, _wavefronts, _multicolor,
                                                       _cyclic_colors)),
}


def _kernels(lang: str):
    """The four ordering kernels and the sort by color, in `lang`."""
    if lang in ("c", "fortran"):
        def native_by_color(color, within, ncolor):
            return native.color_permutation(lang, color, within, ncolor)
        return (partial(native.cuthill_mckee, lang), partial(native.wavefronts, lang),
                partial(native.multicolor, lang), partial(native.cyclic_colors, lang),
                native_by_color)
    return (*_KERNELS[lang], _by_color)


def _by_color(color: np.ndarray, within: np.ndarray, ncolor: int) -> tuple[np.ndarray, np.ndarray]:
    """perm sorted by color, in the order `within` inside a color; color_ptr."""
    perm = within[np.argsort(color[within], kind="stable")].astype(np.int32)
    color_ptr = np.zeros(ncolor + 1, dtype=np.int32)
    np.cumsum(np.bincount(color, minlength=ncolor), out=color_ptr[1:])
    return perm, color_ptr


def check_ordering(name: str, colors: int | None) -> int | None:
    if name not in ORDERINGS:
        raise ValueError(f"ordering must be one of {', '.join(ORDERINGS)}; got {name!r}")
    if name in ("mc", "cm-rcm"):
        if colors is None:
            raise ValueError(f"ordering {name} needs a number of colors (2 or more)")
        return native.check_int(colors, "colors", minimum=2)
    return None


def order(a: CRS, name: str, colors: int | None = None, lang: str = "numba") -> Ordering:
    """The ordering `name` of the symmetric matrix a (only its pattern is used). colors: the target
    K of mc and cm-rcm (>= 2; the result may have more). lang: numpy (the Python loops), numba,
    c or fortran (the kernels of the standalone programs)."""
    k = check_ordering(name, colors)
    if lang not in ORDERING_LANGS:
        raise ValueError(f"lang must be one of {', '.join(ORDERING_LANGS)}; got {lang!r}")
    ptr, adj = adjacency(a)
    n = a.n
    if name == "natural":
        return Ordering(name, None, np.arange(n, dtype=np.int32), np.array([0, n], np.int32))
    cuthill_mckee, wavefronts, multicolor, cyclic_colors, by_color = _kernels(lang)
    color = np.empty(n, dtype=np.int32)
    if name == "mc":
        ncolor = multicolor(ptr, adj, k, color)
        perm, color_ptr = by_color(color, np.arange(n, dtype=np.int32), ncolor)
        return Ordering(name, k, perm, color_ptr)
    cm, level = np.empty(n, dtype=np.int32), np.empty(n, dtype=np.int32)
    cuthill_mckee(ptr, adj, cm, level)
    rcm = cm[::-1].copy()
    if name in ("cm", "rcm"):
        sequence = cm if name == "cm" else rcm
        wavefronts(ptr, adj, sequence, color)
        ncolor = int(color.max()) + 1 if n else 0
        perm, color_ptr = by_color(color, sequence, ncolor)
        return Ordering(name, k, perm, color_ptr)
    rcm_level = (level.max() - level).astype(np.int32)          # cm-rcm
    ncolor = cyclic_colors(ptr, adj, rcm, rcm_level, k, color)
    perm, color_ptr = by_color(color, rcm, ncolor)
    return Ordering(name, k, perm, color_ptr)


def permute(a: CRS, perm: np.ndarray) -> CRS:
    """P A P^T: row and column `new` of the result are row and column perm[new] of a; columns
    of every row in increasing order."""
    n = a.n
    native.check_array(perm, "perm", native.INT, n)
    iperm = np.empty(n, dtype=np.int64)
    iperm[perm] = np.arange(n)
    rows = iperm[np.repeat(np.arange(n), np.diff(a.row_ptr))]
    cols = iperm[a.col_idx]
    idx = np.lexsort((cols, rows))
    row_ptr = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(np.bincount(rows, minlength=n), out=row_ptr[1:])
    return CRS(row_ptr, cols[idx].astype(np.int32), a.val[idx].copy())


def permute_vector(v: np.ndarray, perm: np.ndarray) -> np.ndarray:
    """v in the new numbering: out[new] = v[perm[new]]."""
    return v[perm]


def unpermute_vector(v: np.ndarray, perm: np.ndarray) -> np.ndarray:
    """Back to the original numbering: out[perm[new]] = v[new]."""
    out = np.empty_like(v)
    out[perm] = v
    return out
