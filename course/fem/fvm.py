"""Finite volumes for -div(grad phi) = f on a box of NX x NY x NZ cells (lecture 03_openmp).

Cell (i, j, k) has the number c = i + NX (j + NY k) and the centre ((i + 1/2) DX, (j + 1/2) DY,
(k + 1/2) DZ). Two neighbouring cells are coupled by the face area over the distance of their
centres: a_x = DY DZ / DX, a_y = DX DZ / DY, a_z = DX DY / DZ. phi = 0 on the top face z = NZ DZ,
half a cell from the centres of the top cells: they get 2 a_z on their diagonal. The other faces are
insulated. The source f = x + y + z at the cell centre times the cell volume is the right-hand side.

A = D + A_off: D (a vector) holds the sum of a cell's coefficients (plus the Dirichlet term), A_off
the couplings -a, stored apart in CRS (neighbours in increasing order) or ELL (6 per row, padded
with the row itself and 0.0). The generator comes in numpy (vectorised reference), numba, c and
fortran; the compiled ones touch the arrays first in parallel when parallel=True.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numba
import numpy as np

from .. import native
from ..langs import check_lang
from ..sparse import CRS, ELL

FORMATS = ("crs", "ell")
WIDTH = native.ELL_WIDTH


def offdiag_nnz(nx: int, ny: int, nz: int) -> int:
    """Off-diagonal nonzeros: two per interior face."""
    return native.poisson_offdiag_nnz(nx, ny, nz)


@dataclass
class Poisson:
    """The assembled problem: diagonal d, right-hand side b and the off-diagonal part `off`, a
    CRS (row_ptr, col_idx, val) or an ELL of width 6."""
    nx: int
    ny: int
    nz: int
    dx: float
    dy: float
    dz: float
    d: np.ndarray
    b: np.ndarray
    off: CRS | ELL

    @property
    def n(self) -> int:
        return self.d.shape[0]

    @property
    def fmt(self) -> str:
        return "crs" if isinstance(self.off, CRS) else "ell"

    @property
    def nnz(self) -> int:
        """Nonzeros of the whole matrix: the diagonal and the off-diagonal entries."""
        return self.n + offdiag_nnz(self.nx, self.ny, self.nz)

    def off_crs(self) -> CRS:
        return self.off if isinstance(self.off, CRS) else self.off.to_crs()

    def off_ell(self) -> ELL:
        if isinstance(self.off, ELL):
            return self.off
        return ELL.from_crs(self.off, WIDTH)

    def full_crs(self) -> CRS:
        """The whole matrix D + A_off in CRS, each row's columns in increasing order."""
        off = self.off_crs()
        n = self.n
        lengths = np.diff(off.row_ptr) + 1
        row_ptr = np.zeros(n + 1, dtype=np.int32)
        np.cumsum(lengths, out=row_ptr[1:])
        rows = np.concatenate([np.repeat(np.arange(n), np.diff(off.row_ptr)), np.arange(n)])
        cols = np.concatenate([off.col_idx, np.arange(n, dtype=np.int32)])
        vals = np.concatenate([off.val, self.d])
        order = np.lexsort((cols, rows))
        return CRS(row_ptr, cols[order].astype(np.int32), vals[order])


def _check_box(nx, ny, nz, dx, dy, dz):
    return native._check_poisson_box(nx, ny, nz, dx, dy, dz)


# --- numpy: the vectorised reference -------------------------------------------------------------

def _neighbours_numpy(nx, ny, nz, dx, dy, dz):
    """(N, 6) tables of the candidate neighbours in increasing order (k-1, j-1, i-1, i+1, j+1,
    k+1), whether they exist, and their coefficients -a; plus d and b."""
    return rows_of(nx, ny, nz, dx, dy, dz, np.arange(nx * ny * nz, dtype=np.int64))


def rows_of(nx, ny, nz, dx, dy, dz, cells):
    """The tables of _neighbours_numpy for the given cells only (a rank's rows: course.parallel
    builds its part of the matrix without the whole)."""
    c = np.asarray(cells, dtype=np.int64)
    n = c.shape[0]
    i, j, k = c % nx, (c // nx) % ny, c // (nx * ny)
    ax, ay, az = dy * dz / dx, dx * dz / dy, dx * dy / dz
    cols = np.stack([c - nx * ny, c - nx, c - 1, c + 1, c + nx, c + nx * ny], axis=1)
    exists = np.stack([k > 0, j > 0, i > 0, i < nx - 1, j < ny - 1, k < nz - 1], axis=1)
    coef = np.array([az, ay, ax, ax, ay, az])
    d = (exists * coef).sum(axis=1) + np.where(k == nz - 1, 2.0 * az, 0.0)
    b = ((i + 0.5) * dx + (j + 0.5) * dy + (k + 0.5) * dz) * (dx * dy * dz)
    return cols, exists, np.broadcast_to(-coef, (n, WIDTH)), d, b


def _gen_numpy(nx, ny, nz, dx, dy, dz, fmt):
    cols, exists, amat, d, b = _neighbours_numpy(nx, ny, nz, dx, dy, dz)
    n = d.shape[0]
    if fmt == "crs":
        row_ptr = np.zeros(n + 1, dtype=np.int32)
        np.cumsum(exists.sum(axis=1), out=row_ptr[1:])
        return d, b, CRS(row_ptr, cols[exists].astype(np.int32), amat[exists].copy())
    # ELL: the existing neighbours first (stable: still increasing), then the padding
    order = np.argsort(~exists, axis=1, kind="stable")
    exists = np.take_along_axis(exists, order, axis=1)
    cols = np.take_along_axis(cols, order, axis=1)
    amat = np.take_along_axis(amat, order, axis=1)
    item = np.where(exists, cols, np.arange(n)[:, None]).astype(np.int32).ravel()
    val = np.where(exists, amat, 0.0).ravel()
    return d, b, ELL(n, WIDTH, item, val)


# --- numba: the loops of the C kernel (prange over the cells when parallel) ----------------------

def _cell_rows(nx, ny, nz, dx, dy, dz, d, b, counts):
    """d, b and the number of neighbours of every cell."""
    ax, ay, az = dy * dz / dx, dx * dz / dy, dx * dy / dz
    vol = dx * dy * dz
    for c in numba.prange(nx * ny * nz):
        i, j, k = c % nx, (c // nx) % ny, c // (nx * ny)
        s, m = 0.0, 0
        if k > 0:
            s += az
            m += 1
        if j > 0:
            s += ay
            m += 1
        if i > 0:
            s += ax
            m += 1
        if i < nx - 1:
            s += ax
            m += 1
        if j < ny - 1:
            s += ay
            m += 1
        if k < nz - 1:
            s += az
            m += 1
        else:
            s += 2.0 * az
        d[c] = s
        counts[c] = m
        b[c] = ((i + 0.5) * dx + (j + 0.5) * dy + (k + 0.5) * dz) * vol


def _fill_rows(nx, ny, nz, dx, dy, dz, start, width, item, amat):
    """Row c's neighbours at item/amat[start[c] ...] in increasing order; with width > 0 (ELL,
    start[c] = width c) the rest of the row padded with c itself and 0.0."""
    ax, ay, az = dy * dz / dx, dx * dz / dy, dx * dy / dz
    for c in numba.prange(nx * ny * nz):
        i, j, k = c % nx, (c // nx) % ny, c // (nx * ny)
        p = start[c]
        if k > 0:
            item[p] = c - nx * ny
            amat[p] = -az
            p += 1
        if j > 0:
            item[p] = c - nx
            amat[p] = -ay
            p += 1
        if i > 0:
            item[p] = c - 1
            amat[p] = -ax
            p += 1
        if i < nx - 1:
            item[p] = c + 1
            amat[p] = -ax
            p += 1
        if j < ny - 1:
            item[p] = c + nx
            amat[p] = -ay
            p += 1
        if k < nz - 1:
            item[p] = c + nx * ny
            amat[p] = -az
            p += 1
        if width > 0:
            while p < start[c] + width:
                item[p] = c
                amat[p] = 0.0
                p += 1


_cell_rows_serial = numba.njit(cache=True)(_cell_rows)
_cell_rows_parallel = numba.njit(parallel=True, cache=True)(_cell_rows)
_fill_rows_serial = numba.njit(cache=True)(_fill_rows)
_fill_rows_parallel = numba.njit(parallel=True, cache=True)(_fill_rows)


def _gen_numba(nx, ny, nz, dx, dy, dz, fmt, parallel):
    cell_rows = _cell_rows_parallel if parallel else _cell_rows_serial
    fill_rows = _fill_rows_parallel if parallel else _fill_rows_serial
    n = nx * ny * nz
    d, b = np.empty(n), np.empty(n)
    counts = np.empty(n, dtype=np.int32)
    cell_rows(nx, ny, nz, dx, dy, dz, d, b, counts)
    if fmt == "crs":
        row_ptr = np.zeros(n + 1, dtype=np.int32)
        np.cumsum(counts, out=row_ptr[1:])
        nnz = int(row_ptr[-1])
        item, amat = np.empty(nnz, dtype=np.int32), np.empty(nnz)
        fill_rows(nx, ny, nz, dx, dy, dz, row_ptr, 0, item, amat)
        return d, b, CRS(row_ptr, item, amat)
    item, amat = np.empty(WIDTH * n, dtype=np.int32), np.empty(WIDTH * n)
    start = np.arange(0, WIDTH * n, WIDTH, dtype=np.int64)
    fill_rows(nx, ny, nz, dx, dy, dz, start, WIDTH, item, amat)
    return d, b, ELL(n, WIDTH, item, amat)


def poisson(nx: int, ny: int, nz: int, dx: float = 1.0, dy: float = 1.0, dz: float = 1.0,
            lang: str = "numpy", fmt: str = "crs", parallel: bool = True) -> Poisson:
    """The finite-volume Poisson problem on nx x ny x nz cells, its off-diagonal part in `fmt`
    ("crs" or "ell"), generated by `lang`. parallel: the cells shared out among the threads
    (numba prange, OpenMP in c/fortran: first touch), else serial loops."""
    check_lang(lang)
    if fmt not in FORMATS:
        raise ValueError(f"fmt must be one of {', '.join(FORMATS)}; got {fmt!r}")
    nx, ny, nz, dx, dy, dz, n = _check_box(nx, ny, nz, dx, dy, dz)
    if lang == "numpy":
        d, b, off = _gen_numpy(nx, ny, nz, dx, dy, dz, fmt)
    elif lang == "numba":
        d, b, off = _gen_numba(nx, ny, nz, dx, dy, dz, fmt, bool(parallel))
    elif fmt == "crs":
        d, index, item, amat, b = native.poi_gen_crs(lang, nx, ny, nz, dx, dy, dz, parallel)
        off = CRS(index, item, amat)
    else:
        d, item, amat, b = native.poi_gen_ell(lang, nx, ny, nz, dx, dy, dz, parallel)
        off = ELL(n, WIDTH, item, amat)
    return Poisson(nx, ny, nz, dx, dy, dz, d, b, off)


# --- INPUT.DAT (the file the programs solc / solf read) -------------------------------------------

_MAX_LINE = 1022          # as the C reader: a buffer of 1024 characters


class InputError(ValueError):
    """A bad INPUT.DAT: the message starts with FILE:LINE:."""


def _tokens(line: str) -> list[str]:
    return line.replace(",", " ").split()


def _parse_real(token: str) -> float | None:
    text = token.replace("d", "e").replace("D", "e")
    if "x" in text.lower() or text.lower().lstrip("+-") in ("inf", "infinity", "nan"):
        return None
    try:
        value = float(text)
    except ValueError:
        return None
    return value if np.isfinite(value) else None


def read_input(path) -> dict:
    """Read INPUT.DAT: `NX NY NZ` / `DX DY DZ` / `EPSICCG`, one group per line, anything after the
    values a comment. The rules and messages of the C reader (src_c/common/input.c): a bad file
    raises InputError "FILE:LINE: what was expected", a missing one FileNotFoundError."""
    path = str(path)
    try:
        lines = Path(path).read_text().splitlines(keepends=True)
    except FileNotFoundError:
        raise FileNotFoundError(f"{path}: cannot open input file: No such file or "
                                f"directory") from None
    except (OSError, UnicodeDecodeError) as err:
        reason = getattr(err, "strerror", None) or "not a text file"
        raise FileNotFoundError(f"{path}: cannot open input file: {reason}") from None

    state = {"line": 0}

    def fail(message):
        raise InputError(f"{path}:{state['line']}: {message}")

    def next_line(what):
        state["line"] += 1
        if state["line"] > len(lines):
            fail(f"missing line, expected {what}")
        line = lines[state["line"] - 1]
        if len(line.rstrip("\n")) > _MAX_LINE:
            fail(f"line longer than {_MAX_LINE} characters")
        return _tokens(line)

    def ints(count, what):
        tokens = next_line(what)
        values = []
        for idx in range(count):
            if idx >= len(tokens):
                fail(f"expected {count} integer(s) ({what}), found {idx}")
            try:
                value = int(tokens[idx], 10)
            except ValueError:
                value = None
            if value is None or not -2**31 <= value < 2**31 or "_" in tokens[idx]:
                fail(f"expected an integer ({what}), got '{tokens[idx]}'")
            values.append(value)
        return values

    def reals(count, what):
        tokens = next_line(what)
        values = []
        for idx in range(count):
            if idx >= len(tokens):
                fail(f"expected {count} real number(s) ({what}), found {idx}")
            value = _parse_real(tokens[idx]) if "_" not in tokens[idx] else None
            if value is None:
                fail(f"expected a real number ({what}), got '{tokens[idx]}'")
            values.append(value)
        return values

    def positive(value, what):
        if not value > 0:
            fail(f"{what} must be positive, got {value:g}")

    nx, ny, nz = ints(3, "NX NY NZ: number of cells")
    for value, what in zip((nx, ny, nz), ("NX", "NY", "NZ")):
        positive(value, what)
    if WIDTH * nx * ny * nz > np.iinfo(np.int32).max:
        fail(f"mesh too large: more than {np.iinfo(np.int32).max} entries")
    dx, dy, dz = reals(3, "DX DY DZ: cell size")
    for value, what in zip((dx, dy, dz), ("DX", "DY", "DZ")):
        positive(value, what)
    (eps,) = reals(1, "EPSICCG: CG tolerance")
    positive(eps, "EPSICCG")
    return {"nx": nx, "ny": ny, "nz": nz, "dx": dx, "dy": dy, "dz": dz, "eps": eps}


def spmv_bytes(fmt: str, n: int, stored: int, n_slices: int = 0) -> int:
    """The least memory traffic of one y = D x + A_off x: d (8 n), every stored value (8) and
    column (4) once (padding included), x read once and y written once (16 n), plus the row
    pointers (CRS: 4 (n + 1)) or the permutation and slice pointers (SELL: 4 n + 4 (slices + 1))."""
    base = 8 * n + 12 * stored + 16 * n
    if fmt == "crs":
        return base + 4 * (n + 1)
    if fmt == "sell":
        return base + 4 * n + 4 * (n_slices + 1)
    return base
