"""Build (CMake) and load (ctypes) the C and Fortran kernel libraries, and call them safely.

Every wrapper checks dtype, contiguity, length and index ranges *before* the ctypes call, so a wrong
array raises a Python exception instead of crashing the interpreter.

Index base: the C kernels are 0-based. The Fortran kernels are 1-based inside, as Fortran programs
are; the wrappers here add 1 to every index array handed to Fortran (and subtract 1 from index arrays
Fortran returns), once per call, so that Python always sees 0-based CRS arrays.
"""

from __future__ import annotations

import ctypes
import fcntl
import os
import shutil
import subprocess
from functools import cache
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
COMPILED_LANGS = ("c", "fortran")
VARIANTS = ("release", "sanitize")
_LIBRARY = {"c": "libcourse_c.so", "fortran": "libcourse_fortran.so"}
_SOURCES = ("CMakeLists.txt", "src_c", "src_fortran")

INT = np.dtype(np.int32)
REAL = np.dtype(np.float64)
_c_int, _c_double = ctypes.c_int, ctypes.c_double
_ptr = ctypes.c_void_p


class BuildError(RuntimeError):
    """The kernels did not compile; the message holds the end of the compiler output."""


def default_variant() -> str:
    """`release`, or `sanitize` when COURSE_NATIVE_VARIANT=sanitize (used by the sanitizer tests)."""
    variant = os.environ.get("COURSE_NATIVE_VARIANT", "release")
    if variant not in VARIANTS:
        raise ValueError(f"COURSE_NATIVE_VARIANT must be one of {VARIANTS}, not {variant!r}")
    return variant


def build_dir(variant: str = "release") -> Path:
    base = Path(os.environ.get("COURSE_BUILD_DIR", ROOT / "build" / "native"))
    return base / variant


def binary(name: str, variant: str | None = None) -> Path:
    """Path of a standalone program (e.g. ``fem1d_c``), built if needed."""
    variant = variant or default_variant()
    ensure_built(variant)
    path = build_dir(variant) / "bin" / name
    if not path.exists():
        raise FileNotFoundError(f"{path} was not built (is the program in src_*/CMakeLists.txt?)")
    return path


def _newest_source_mtime() -> float:
    newest = 0.0
    for name in _SOURCES:
        path = ROOT / name
        files = [path] if path.is_file() else path.rglob("*")
        newest = max([newest] + [f.stat().st_mtime for f in files if f.is_file()])
    return newest


def _is_stale(variant: str) -> bool:
    libs = [build_dir(variant) / "lib" / lib for lib in _LIBRARY.values()]
    if not all(lib.exists() for lib in libs):
        return True
    return min(lib.stat().st_mtime for lib in libs) < _newest_source_mtime()


def _run(cmd: list[str], verbose: bool) -> None:
    result = subprocess.run(cmd, cwd=ROOT, text=True,
                            stdout=None if verbose else subprocess.PIPE,
                            stderr=subprocess.STDOUT)
    if result.returncode != 0:
        tail = "\n".join((result.stdout or "").splitlines()[-40:])
        raise BuildError(f"command failed: {' '.join(cmd)}\n{tail}")


def build(variant: str = "release", werror: bool = True, verbose: bool = False,
          clean: bool = False) -> Path:
    """Configure and compile src_c/ and src_fortran/ with CMake; returns the build directory."""
    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {VARIANTS}, not {variant!r}")
    if shutil.which("cmake") is None:
        raise BuildError("cmake not found: run `make setup` or `python -m course doctor`")
    out = build_dir(variant)
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out.parent / f".{variant}.lock", "w") as lock:   # one build at a time
        fcntl.flock(lock, fcntl.LOCK_EX)
        if clean and out.exists():
            shutil.rmtree(out)
        _run(["cmake", "-S", str(ROOT), "-B", str(out), "-DCMAKE_BUILD_TYPE=Release",
              f"-DCOURSE_WERROR={'ON' if werror else 'OFF'}",
              f"-DCOURSE_SANITIZE={'ON' if variant == 'sanitize' else 'OFF'}"], verbose)
        _run(["cmake", "--build", str(out), "--parallel", str(os.cpu_count() or 2)], verbose)
        for lib in _LIBRARY.values():   # mark as fresh even when nothing needed recompiling
            (out / "lib" / lib).touch()
    return out


def ensure_built(variant: str) -> None:
    if _is_stale(variant):
        build(variant)


@cache
def load(lang: str, variant: str | None = None) -> ctypes.CDLL:
    """The kernel library of `lang` ("c" or "fortran"), compiled first if missing or out of date."""
    if lang not in COMPILED_LANGS:
        raise ValueError(f"lang must be one of {COMPILED_LANGS} for compiled kernels, not {lang!r}")
    variant = variant or default_variant()
    ensure_built(variant)
    lib = ctypes.CDLL(str(build_dir(variant) / "lib" / _LIBRARY[lang]))
    _declare(lib)
    return lib


def _declare(lib: ctypes.CDLL) -> None:
    """Argument and result types of every kernel (the same in C and Fortran)."""
    signatures = {
        "crs_matvec": (None, [_c_int, _ptr, _ptr, _ptr, _ptr, _ptr]),
        "pcg_jacobi": (_c_int, [_c_int, _ptr, _ptr, _ptr, _ptr, _ptr, _c_double, _c_int, _ptr]),
        "fem1d_element": (None, [_c_double, _c_double, _c_double, _ptr, _ptr]),
        "fem1d_pattern": (None, [_c_int, _ptr, _ptr]),
        "fem1d_assemble": (None, [_c_int, _ptr, _c_double, _c_double, _ptr, _ptr, _ptr, _ptr]),
        "fem1d_boundary": (None, [_c_int, _c_double, _ptr, _ptr, _ptr, _ptr]),
    }
    for name, (restype, argtypes) in signatures.items():
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = restype, argtypes


# ---------------------------------------------------------------------------------------------
# argument checks
# ---------------------------------------------------------------------------------------------

def check_array(a, name: str, dtype: np.dtype, length: int | None = None,
                writeable: bool = False) -> np.ndarray:
    """Raise TypeError/ValueError unless `a` is a 1-D C-contiguous array of `dtype` and `length`."""
    if not isinstance(a, np.ndarray):
        raise TypeError(f"{name} must be a numpy array, got {type(a).__name__}")
    if a.dtype != dtype:
        raise TypeError(f"{name} must have dtype {dtype}, got {a.dtype} "
                        f"(convert with np.asarray({name}, dtype=np.{dtype}))")
    if a.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {a.shape}")
    if not a.flags.c_contiguous:
        raise ValueError(f"{name} must be contiguous (use np.ascontiguousarray)")
    if length is not None and a.shape[0] != length:
        raise ValueError(f"{name} must have length {length}, got {a.shape[0]}")
    if writeable and not a.flags.writeable:
        raise ValueError(f"{name} must be writeable")
    return a


def check_int(value, name: str, minimum: int = 0) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an integer, got {type(value).__name__}")
    if not minimum <= value <= np.iinfo(np.int32).max:
        raise ValueError(f"{name} must be between {minimum} and 2**31-1, got {value}")
    return int(value)


def check_real(value, name: str, positive: bool = False) -> float:
    try:
        value = float(value)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be a real number, got {value!r}") from None
    if not np.isfinite(value) or (positive and value <= 0):
        raise ValueError(f"{name} must be {'positive and ' if positive else ''}finite, got {value}")
    return value


def check_pattern(row_ptr, col_idx, n: int | None = None) -> int:
    """Check the index arrays of a square CRS matrix (0-based); returns its order n."""
    check_array(row_ptr, "row_ptr", INT)
    if row_ptr.shape[0] < 2:
        raise ValueError("row_ptr must have at least 2 entries (n + 1 for n rows)")
    order = row_ptr.shape[0] - 1
    if n is not None and order != n:
        raise ValueError(f"row_ptr must have length {n + 1}, got {row_ptr.shape[0]}")
    nnz = check_array(col_idx, "col_idx", INT).shape[0]
    if row_ptr[0] != 0 or row_ptr[-1] != nnz or np.any(np.diff(row_ptr) < 0):
        raise ValueError(f"row_ptr must rise from 0 to len(col_idx) = {nnz}")
    if nnz and (col_idx.min() < 0 or col_idx.max() >= order):
        raise ValueError(f"col_idx entries must lie in [0, {order}) (0-based column indices)")
    return order


def check_crs(row_ptr, col_idx, val, n: int | None = None) -> int:
    """Check a square CRS matrix (0-based indices, float64 values); returns its order n."""
    order = check_pattern(row_ptr, col_idx, n)
    check_array(val, "val", REAL, col_idx.shape[0])
    return order


def _p(a: np.ndarray) -> ctypes.c_void_p:
    return a.ctypes.data_as(ctypes.c_void_p)


def _index_base(lang: str, *arrays: np.ndarray) -> list[np.ndarray]:
    """0-based index arrays as the kernel of `lang` wants them (Fortran: +1)."""
    return [a + 1 if lang == "fortran" else a for a in arrays]


# ---------------------------------------------------------------------------------------------
# checked kernel calls (one per kernel, the same for both languages)
# ---------------------------------------------------------------------------------------------

def crs_matvec(lang, row_ptr, col_idx, val, x, y=None) -> np.ndarray:
    """y = A x for the CRS matrix A."""
    n = check_crs(row_ptr, col_idx, val)
    check_array(x, "x", REAL, n)
    y = np.empty(n) if y is None else check_array(y, "y", REAL, n, writeable=True)
    rp, ci = _index_base(lang, row_ptr, col_idx)
    load(lang).crs_matvec(n, _p(rp), _p(ci), _p(val), _p(x), _p(y))
    return y


def pcg_jacobi(lang, row_ptr, col_idx, val, b, x0=None, tol=1e-10, max_iter=None):
    """Jacobi-preconditioned CG; returns (x, iterations, relative residual)."""
    n = check_crs(row_ptr, col_idx, val)
    check_array(b, "b", REAL, n)
    x = np.zeros(n) if x0 is None else check_array(x0, "x0", REAL, n).copy()
    tol = check_real(tol, "tol", positive=True)
    max_iter = check_int(10 * n if max_iter is None else max_iter, "max_iter")
    relres = np.zeros(1)
    rp, ci = _index_base(lang, row_ptr, col_idx)
    iters = load(lang).pcg_jacobi(n, _p(rp), _p(ci), _p(val), _p(b), _p(x), tol, max_iter,
                                  _p(relres))
    if iters < 0:
        raise MemoryError(f"pcg_jacobi ({lang}) could not allocate its work vectors (n = {n})")
    return x, iters, float(relres[0])


def fem1d_element(lang, h, cond, qvol):
    """Element matrix (2x2) and load (2) of one linear element."""
    h = check_real(h, "h", positive=True)
    cond = check_real(cond, "cond", positive=True)
    qvol = check_real(qvol, "qvol")
    ke, fe = np.empty(4), np.empty(2)
    load(lang).fem1d_element(h, cond, qvol, _p(ke), _p(fe))
    return ke.reshape(2, 2), fe


def fem1d_pattern(lang, n_node):
    """0-based CRS pattern (row_ptr, col_idx) of the 1D mesh with n_node nodes."""
    n_node = check_int(n_node, "n_node", minimum=2)
    row_ptr = np.empty(n_node + 1, dtype=INT)
    col_idx = np.empty(3 * n_node - 2, dtype=INT)
    load(lang).fem1d_pattern(n_node, _p(row_ptr), _p(col_idx))
    if lang == "fortran":           # Fortran numbers from 1
        row_ptr -= 1
        col_idx -= 1
    return row_ptr, col_idx


def fem1d_assemble(lang, x, cond, qvol, row_ptr, col_idx):
    """Global matrix values (for the pattern row_ptr/col_idx) and load vector."""
    n = check_pattern(row_ptr, col_idx)
    check_array(x, "x", REAL, n)
    if n < 2 or not np.all(np.isfinite(x)) or np.any(np.diff(x) <= 0):
        raise ValueError("x must hold at least 2 node coordinates in increasing order")
    _check_fem1d_pattern(row_ptr, col_idx)
    cond = check_real(cond, "cond", positive=True)
    qvol = check_real(qvol, "qvol")
    val, rhs = np.zeros(col_idx.shape[0]), np.zeros(n)
    rp, ci = _index_base(lang, row_ptr, col_idx)
    load(lang).fem1d_assemble(n - 1, _p(x), cond, qvol, _p(rp), _p(ci), _p(val), _p(rhs))
    return val, rhs


def fem1d_boundary(lang, qflux, row_ptr, col_idx, val, rhs) -> None:
    """Apply T = 0 at the first node and the flux at the last, in place."""
    n = check_crs(row_ptr, col_idx, val)
    check_array(val, "val", REAL, writeable=True)
    check_array(rhs, "rhs", REAL, n, writeable=True)
    qflux = check_real(qflux, "qflux")
    rp, ci = _index_base(lang, row_ptr, col_idx)
    load(lang).fem1d_boundary(n, qflux, _p(rp), _p(ci), _p(val), _p(rhs))


def _check_fem1d_pattern(row_ptr, col_idx) -> None:
    """The assembly adds into the entries (i, i-1), (i, i) and (i, i+1): they must all be in the
    pattern, or it would write out of bounds."""
    n = row_ptr.shape[0] - 1
    rows = np.repeat(np.arange(n, dtype=np.int64), np.diff(row_ptr))
    present = rows * n + col_idx
    i = np.arange(n, dtype=np.int64)
    needed = np.concatenate([i * n + i, i[1:] * n + i[:-1], i[:-1] * n + i[1:]])
    if not np.all(np.isin(needed, present)):
        raise ValueError("row_ptr/col_idx must contain the tridiagonal pattern of a 1D mesh")
