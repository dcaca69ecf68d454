"""Sparse matrices in CRS (compressed row storage) and the matrix-vector product.

Row i of a CRS matrix keeps its nonzeros in val[row_ptr[i]:row_ptr[i+1]], their columns in
col_idx[same range]. Indices are 0-based int32, values float64: exactly what the C kernels take.
"""

from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np
import scipy.sparse

from . import native
from .langs import check_lang


@dataclass
class CRS:
    row_ptr: np.ndarray   # int32, n + 1
    col_idx: np.ndarray   # int32, nnz
    val: np.ndarray       # float64, nnz

    def __post_init__(self):
        native.check_crs(self.row_ptr, self.col_idx, self.val)

    @property
    def n(self) -> int:
        return self.row_ptr.shape[0] - 1

    @property
    def nnz(self) -> int:
        return self.col_idx.shape[0]

    def to_scipy(self) -> scipy.sparse.csr_matrix:
        return scipy.sparse.csr_matrix((self.val, self.col_idx, self.row_ptr), shape=(self.n,) * 2)

    @classmethod
    def from_scipy(cls, a) -> "CRS":
        a = scipy.sparse.csr_matrix(a)
        a.sort_indices()
        return cls(a.indptr.astype(np.int32), a.indices.astype(np.int32),
                   a.data.astype(np.float64))

    def to_dense(self) -> np.ndarray:
        return self.to_scipy().toarray()


def matvec_numpy(row_ptr, col_idx, val, x):
    """y = A x, the readable reference: products of all nonzeros, summed row by row."""
    products = val * x[col_idx]
    row_of = np.repeat(np.arange(row_ptr.shape[0] - 1), np.diff(row_ptr))
    return np.bincount(row_of, weights=products, minlength=row_ptr.shape[0] - 1)


@numba.njit(cache=True)
def matvec_numba(row_ptr, col_idx, val, x):
    """The loop of the C kernel. The indices are made unsigned: with signed ones Numba must allow
    for negative (wrap-around) indices on every access, which made this loop about 1.6 times
    slower than the C kernel on a 48^3 mesh."""
    n = row_ptr.shape[0] - 1
    y = np.empty(n)
    for i in range(n):
        s = 0.0
        for k in range(np.uint64(row_ptr[i]), np.uint64(row_ptr[i + 1])):
            s += val[k] * x[np.uint64(col_idx[k])]
        y[i] = s
    return y


def matvec(a: CRS, x: np.ndarray, lang: str = "numpy") -> np.ndarray:
    """y = A x in the implementation `lang`."""
    check_lang(lang)
    native.check_array(x, "x", native.REAL, a.n)
    if lang == "numpy":
        return matvec_numpy(a.row_ptr, a.col_idx, a.val, x)
    if lang == "numba":
        return matvec_numba(a.row_ptr, a.col_idx, a.val, x)
    return native.crs_matvec(lang, a.row_ptr, a.col_idx, a.val, x)


# ---------------------------------------------------------------------------------------------
# lecture 03_openmp: ELL and SELL-C-sigma, and products y = D x + A_off x
# ---------------------------------------------------------------------------------------------
#
# The Poisson matrix of course.fem.fvm keeps its diagonal D as a vector of its own and stores only
# the off-diagonal part in CRS, ELL or SELL; every product below therefore takes an optional
# diagonal d and computes y = d * x + A x (d = 0 when not given, for a general matrix).


def _check_square_items(item, val, n: int, what: str) -> None:
    """item int32 and val float64 of the same length, every column index in [0, n)."""
    native.check_array(item, f"{what}.item" if what else "item", native.INT)
    native.check_array(val, f"{what}.val" if what else "val", native.REAL, item.shape[0])
    if item.size and (item.min() < 0 or item.max() >= n):
        raise ValueError(f"{what} column indices must lie in [0, {n}) (0-based), got values in "
                         f"[{item.min()}, {item.max()}]")


@dataclass
class ELL:
    """ELLPACK: every row keeps `width` entries, row-major and flat (row i in
    item[width*i : width*(i+1)], the same range of val). A row with fewer entries is padded with
    its own index as column and 0.0 as value, so the padding reads a valid x and adds nothing.

    row_length (int32, n, optional) says how many of a row's entries are real (the first ones);
    from_crs sets it so that to_crs gives back exactly the CRS matrix, explicit zeros included.
    Without it, to_crs drops every padding-like entry (column = row, value 0.0).
    """
    n: int
    width: int
    item: np.ndarray              # int32, n * width
    val: np.ndarray               # float64, n * width
    row_length: np.ndarray | None = None

    def __post_init__(self):
        self.n = native.check_int(self.n, "n")
        self.width = native.check_int(self.width, "width")
        native.check_array(self.item, "item", native.INT, self.n * self.width)
        _check_square_items(self.item, self.val, self.n, "ELL")
        if self.row_length is not None:
            native.check_array(self.row_length, "row_length", native.INT, self.n)
            if self.n and (self.row_length.min() < 0 or self.row_length.max() > self.width):
                raise ValueError(f"row_length entries must lie in [0, {self.width}]")

    @property
    def nnz(self) -> int:
        """Stored entries, padding included."""
        return self.item.shape[0]

    @classmethod
    def from_crs(cls, a: CRS, width: int | None = None) -> "ELL":
        """ELL of the CRS matrix a, `width` (default: the longest row) entries per row."""
        lengths = np.diff(a.row_ptr).astype(np.int32)
        longest = int(lengths.max(initial=0))
        width = longest if width is None else native.check_int(width, "width")
        if width < longest:
            raise ValueError(f"width must be at least the longest row ({longest}), got {width}")
        rows = np.repeat(np.arange(a.n, dtype=np.int64), lengths)
        slot = np.arange(a.nnz, dtype=np.int64) - np.repeat(a.row_ptr[:-1].astype(np.int64),
                                                            lengths)
        item = np.repeat(np.arange(a.n, dtype=np.int32), width)   # padding: the row itself
        val = np.zeros(a.n * width)
        item[rows * width + slot] = a.col_idx
        val[rows * width + slot] = a.val
        return cls(a.n, width, item, val, lengths)

    def _real_entries(self) -> np.ndarray:
        """Mask of the entries that are not padding, row-major (n, width)."""
        if self.row_length is not None:
            return np.arange(self.width)[None, :] < self.row_length[:, None]
        item = self.item.reshape(self.n, self.width)
        val = self.val.reshape(self.n, self.width)
        return ~((item == np.arange(self.n)[:, None]) & (val == 0.0))

    def to_crs(self) -> CRS:
        keep = self._real_entries()
        row_ptr = np.zeros(self.n + 1, dtype=np.int32)
        np.cumsum(keep.sum(axis=1), out=row_ptr[1:])
        flat = keep.ravel()
        return CRS(row_ptr, self.item[flat].copy(), self.val[flat].copy())

    def to_sell(self, chunk: int = 8, sigma: int = 1) -> "SELL":
        return SELL.from_crs(self.to_crs(), chunk, sigma)


@dataclass
class SELL:
    """SELL-C-sigma: rows sorted by length (longest first) within windows of `sigma` rows, cut
    into slices of `chunk` (C) rows; each slice is stored column-major and padded to its longest
    row. perm[s] is the original row of sorted row s; slice k occupies
    col/val[slice_ptr[k] : slice_ptr[k+1]], C * width_k entries, entry j of its row r at
    slice_ptr[k] + j*C + r. Padding, and the rows past n in the last slice: a valid column (the
    row itself; 0 past n) with value 0.0. row_length[s] = the real entries of sorted row s (the
    first ones), so that to_crs gives back exactly the CRS matrix.
    """
    n: int
    chunk: int
    sigma: int
    perm: np.ndarray              # int32, n
    slice_ptr: np.ndarray         # int32, n_slices + 1
    col: np.ndarray               # int32, slice_ptr[-1]
    val: np.ndarray               # float64, slice_ptr[-1]
    row_length: np.ndarray        # int32, n (per sorted row)

    def __post_init__(self):
        self.n = native.check_int(self.n, "n")
        self.chunk = native.check_int(self.chunk, "chunk", minimum=1)
        self.sigma = native.check_int(self.sigma, "sigma", minimum=1)
        native.check_sell(self.n, self.chunk, self.perm, self.slice_ptr, self.col, self.val)
        native.check_array(self.row_length, "row_length", native.INT, self.n)

    @property
    def n_slices(self) -> int:
        return self.slice_ptr.shape[0] - 1

    @property
    def nnz(self) -> int:
        """Stored entries, padding included."""
        return self.col.shape[0]

    @classmethod
    def from_crs(cls, a: CRS, chunk: int = 8, sigma: int = 1) -> "SELL":
        chunk = native.check_int(chunk, "chunk", minimum=1)
        sigma = native.check_int(sigma, "sigma", minimum=1)
        n = a.n
        lengths = np.diff(a.row_ptr).astype(np.int32)
        # sort by length, longest first, within each window of sigma rows (stable: ties keep order)
        window = np.arange(n) // sigma
        perm = np.lexsort((np.arange(n), -lengths, window)).astype(np.int32)
        sorted_len = lengths[perm]
        n_slices = -(-n // chunk)
        padded = np.zeros(n_slices * chunk, dtype=np.int64)
        padded[:n] = sorted_len
        widths = padded.reshape(n_slices, chunk).max(axis=1, initial=0)
        slice_ptr = np.zeros(n_slices + 1, dtype=np.int64)
        np.cumsum(chunk * widths, out=slice_ptr[1:])
        if slice_ptr[-1] > np.iinfo(np.int32).max:
            raise ValueError("the SELL form has more entries than 32-bit indices allow")
        total = int(slice_ptr[-1])
        # padding: the row itself (rows past n: 0), value 0
        sorted_row = np.zeros(n_slices * chunk, dtype=np.int32)
        sorted_row[:n] = perm
        slot_row = np.concatenate([np.tile(np.arange(chunk), int(w)) for w in widths]) \
            if total else np.zeros(0, dtype=np.int64)
        slot_slice = np.repeat(np.arange(n_slices), chunk * widths)
        col = sorted_row[slot_slice * chunk + slot_row].astype(np.int32)
        val = np.zeros(total)
        # the real entries: sorted row s = k*C + r, its entry j at slice_ptr[k] + j*C + r
        s_of = np.repeat(np.arange(n, dtype=np.int64), sorted_len)
        starts = a.row_ptr[perm].astype(np.int64)
        j_of = np.arange(s_of.shape[0]) - np.repeat(np.cumsum(sorted_len) - sorted_len, sorted_len)
        src = np.repeat(starts, sorted_len) + j_of
        dst = slice_ptr[s_of // chunk] + j_of * chunk + s_of % chunk
        col[dst] = a.col_idx[src]
        val[dst] = a.val[src]
        return cls(n, chunk, sigma, perm, slice_ptr.astype(np.int32), col, val,
                   sorted_len.astype(np.int32))

    def to_crs(self) -> CRS:
        n, chunk = self.n, self.chunk
        lengths = np.zeros(n, dtype=np.int32)
        lengths[self.perm] = self.row_length
        row_ptr = np.zeros(n + 1, dtype=np.int32)
        np.cumsum(lengths, out=row_ptr[1:])
        col_idx = np.empty(row_ptr[-1], dtype=np.int32)
        val = np.empty(row_ptr[-1])
        s_of = np.repeat(np.arange(n, dtype=np.int64), self.row_length)
        j_of = np.arange(s_of.shape[0]) - np.repeat(np.cumsum(self.row_length) - self.row_length,
                                                    self.row_length)
        src = self.slice_ptr[s_of // chunk].astype(np.int64) + j_of * chunk + s_of % chunk
        dst = row_ptr[self.perm[s_of]].astype(np.int64) + j_of
        col_idx[dst] = self.col[src]
        val[dst] = self.val[src]
        return CRS(row_ptr, col_idx, val)

    @classmethod
    def from_ell(cls, a: ELL, chunk: int = 8, sigma: int = 1) -> "SELL":
        return cls.from_crs(a.to_crs(), chunk, sigma)

    def to_ell(self, width: int | None = None) -> ELL:
        return ELL.from_crs(self.to_crs(), width)


def _diagonal(d, n: int) -> np.ndarray:
    return np.zeros(n) if d is None else native.check_array(d, "d", native.REAL, n)


def offdiag_matvec_numpy(d, row_ptr, col_idx, val, x):
    """y = d x + A x, A in CRS."""
    return d * x + matvec_numpy(row_ptr, col_idx, val, x)


def ell_matvec_numpy(d, width, item, val, x):
    n = d.shape[0]
    return d * x + (val.reshape(n, width) * x[item.reshape(n, width)]).sum(axis=1)


def sell_matvec_numpy(d, chunk, perm, slice_ptr, col, val, x):
    """Slice by slice, a (width, C) block each: column-major, so that the C rows of a slice are
    the fast index (what a SIMD unit of width C would load at once)."""
    n = d.shape[0]
    y_sorted = np.zeros((slice_ptr.shape[0] - 1) * chunk)
    for k in range(slice_ptr.shape[0] - 1):
        block = slice(slice_ptr[k], slice_ptr[k + 1])
        y_sorted[k * chunk:(k + 1) * chunk] = \
            (val[block] * x[col[block]]).reshape(-1, chunk).sum(axis=0)
    y = d * x
    y[perm] += y_sorted[:n]
    return y


@numba.njit(parallel=True, cache=True)
def offdiag_matvec_numba(d, row_ptr, col_idx, val, x):
    """y = d x + A x, A in CRS, rows shared out among the threads (prange)."""
    n = d.shape[0]
    y = np.empty(n)
    for i in numba.prange(n):
        s = d[i] * x[i]
        for k in range(np.uint64(row_ptr[i]), np.uint64(row_ptr[i + 1])):
            s += val[k] * x[np.uint64(col_idx[k])]
        y[i] = s
    return y


@numba.njit(parallel=True, cache=True)
def ell_matvec_numba(d, width, item, val, x):
    """y = d x + A x, A in ELL: the inner loop has the same trip count in every row."""
    n = d.shape[0]
    y = np.empty(n)
    w = np.uint64(width)
    for i in numba.prange(n):
        s = d[i] * x[i]
        base = np.uint64(i) * w
        for j in range(w):
            s += val[base + j] * x[np.uint64(item[base + j])]
        y[i] = s
    return y


@numba.njit(parallel=True, cache=True)
def sell_matvec_numba(d, chunk, perm, slice_ptr, col, val, x):
    """y = d x + A x, A in SELL-C-sigma: slices shared out among the threads."""
    n = np.uint64(d.shape[0])
    c = np.uint64(chunk)
    y = np.empty(d.shape[0])
    for k in numba.prange(slice_ptr.shape[0] - 1):
        start = np.uint64(slice_ptr[k])
        width = (np.uint64(slice_ptr[k + 1]) - start) // c
        for r in range(c):
            s_row = np.uint64(k) * c + r
            if s_row >= n:
                break
            row = np.uint64(perm[s_row])
            s = d[row] * x[row]
            for j in range(width):
                e = start + j * c + r
                s += val[e] * x[np.uint64(col[e])]
            y[row] = s
    return y


def matvec_with_diagonal(a, x: np.ndarray, lang: str = "numpy",
                         d: np.ndarray | None = None) -> np.ndarray:
    """y = d x + A x for A in CRS, ELL or SELL (d = 0 when not given) in the implementation
    `lang`. The compiled ELL kernel takes width 6 only (the 7-point stencil)."""
    check_lang(lang)
    if not isinstance(a, (CRS, ELL, SELL)):
        raise TypeError(f"a must be a CRS, ELL or SELL matrix, got {type(a).__name__}")
    n = a.n
    native.check_array(x, "x", native.REAL, n)
    d = _diagonal(d, n)
    if isinstance(a, CRS):
        if lang == "numpy":
            return offdiag_matvec_numpy(d, a.row_ptr, a.col_idx, a.val, x)
        if lang == "numba":
            return offdiag_matvec_numba(d, a.row_ptr, a.col_idx, a.val, x)
        return native.offdiag_crs_matvec(lang, d, a.row_ptr, a.col_idx, a.val, x)
    if isinstance(a, ELL):
        if lang == "numpy":
            return ell_matvec_numpy(d, a.width, a.item, a.val, x)
        if lang == "numba":
            return ell_matvec_numba(d, a.width, a.item, a.val, x)
        if a.width != native.ELL_WIDTH:
            raise ValueError(f"the compiled ELL kernel takes width {native.ELL_WIDTH}, got "
                             f"{a.width} (widen with ELL.from_crs(a.to_crs(), "
                             f"{native.ELL_WIDTH}))")
        return native.ell_matvec(lang, d, a.item, a.val, x)
    if lang == "numpy":
        return sell_matvec_numpy(d, a.chunk, a.perm, a.slice_ptr, a.col, a.val, x)
    if lang == "numba":
        return sell_matvec_numba(d, a.chunk, a.perm, a.slice_ptr, a.col, a.val, x)
    return native.sell_matvec(lang, a.chunk, d, a.perm, a.slice_ptr, a.col, a.val, x)
