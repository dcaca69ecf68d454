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
import hashlib
import os
import shlex
import shutil
import subprocess
from functools import cache
from pathlib import Path

import numba
import numpy as np

from . import toolchain
from .cache import private_dir
from .toolchain import usable_cores as _usable_cores   # (build() has an argument `toolchain`)

ROOT = Path(__file__).resolve().parent.parent
COMPILED_LANGS = ("c", "fortran")
VARIANTS = ("release", "sanitize")
_LIBRARY = {"c": "libcourse_c.so", "fortran": "libcourse_fortran.so"}
_SOURCES = ("CMakeLists.txt", "src_c", "src_fortran")

INT = np.dtype(np.int32)
REAL = np.dtype(np.float64)
ELL_WIDTH = 6                 # entries per row of the compiled ELL kernels (the 7-point stencil)
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


def toolchain_file(path: str | os.PathLike | None = None) -> Path | None:
    """The CMake toolchain file of a build (e.g. cmake/a64fx-fujitsu.cmake): `path`, else the
    CMAKE_TOOLCHAIN_FILE environment variable (which CMake >= 3.21 reads by itself), else None (the
    compilers on the PATH, or those CC and FC name). A relative path is taken from the current
    folder, else from the repository."""
    path = path or os.environ.get("CMAKE_TOOLCHAIN_FILE") or None
    if path is None:
        return None
    candidates = [Path(path)] if Path(path).is_absolute() else [Path.cwd() / path, ROOT / path]
    for candidate in candidates:
        if candidate.is_file():
            return candidate.resolve()
    tried = ", ".join(map(str, candidates))
    raise FileNotFoundError(f"toolchain file {path} not found (tried {tried})")


def build_dir(variant: str = "release", toolchain: str | os.PathLike | None = None) -> Path:
    """build/native/<variant> (or under COURSE_BUILD_DIR); with a toolchain file (argument or
    CMAKE_TOOLCHAIN_FILE), build/native/<variant>-<its name without .cmake>, so that a cross build
    (e.g. on a cluster's login node) never overwrites the machine's own build.

    A course installed for several users (a JupyterHub) is read-only to them: its build is used
    while it is up to date; when it is missing or older than the sources, each user builds into
    a folder of their own (course.cache.private_dir), never into one they cannot write."""
    file = toolchain_file(toolchain)
    name = variant if file is None else f"{variant}-{file.stem}"
    if os.environ.get("COURSE_BUILD_DIR"):
        return Path(os.environ["COURSE_BUILD_DIR"]) / name
    shared = ROOT / "build" / "native" / name
    if _can_write(shared) or not _is_stale_at(shared):
        return shared
    checkout = hashlib.sha1(str(ROOT).encode()).hexdigest()[:12]     # one per installed course
    return private_dir("native") / f"{checkout}-{name}"


def _can_write(folder: Path) -> bool:
    """Whether this user can create or change `folder` (its nearest existing ancestor)."""
    existing = next(p for p in (folder, *folder.parents) if p.exists())
    return os.access(existing, os.W_OK | os.X_OK)


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
    return _is_stale_at(build_dir(variant))


def _is_stale_at(folder: Path) -> bool:
    libs = [folder / "lib" / lib for lib in _LIBRARY.values()]
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


def _compiler_options(toolchain: Path | None) -> list[str]:
    """-DCMAKE_TOOLCHAIN_FILE=..., or the compilers of CC and FC when set (CMake itself reads them
    only when it first configures a folder; passed on, a changed CC is not silently ignored). A
    compiler with options ("fcc -Nclang") becomes CMake's list form: compiler;options."""
    if toolchain is not None:
        return [f"-DCMAKE_TOOLCHAIN_FILE={toolchain}"]
    return [f"-DCMAKE_{lang}_COMPILER={';'.join(shlex.split(os.environ[var]))}"
            for var, lang in (("CC", "C"), ("FC", "Fortran")) if os.environ.get(var, "").strip()]


def build(variant: str = "release", werror: bool = True, verbose: bool = False,
          clean: bool = False, toolchain: str | os.PathLike | None = None) -> Path:
    """Configure and compile src_c/ and src_fortran/ with CMake; returns the build directory.
    `toolchain`: a CMake toolchain file (default: the CMAKE_TOOLCHAIN_FILE environment variable),
    built in a folder of its own (see build_dir)."""
    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {VARIANTS}, not {variant!r}")
    if shutil.which("cmake") is None:
        raise BuildError("cmake not found: run `make setup` or `python -m course doctor`")
    file = toolchain_file(toolchain)
    out = build_dir(variant, file)
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out.parent / f".{out.name}.lock", "w") as lock:   # one build at a time
        fcntl.flock(lock, fcntl.LOCK_EX)
        if clean and out.exists():
            shutil.rmtree(out)
        _run(["cmake", "-S", str(ROOT), "-B", str(out), "-DCMAKE_BUILD_TYPE=Release",
              f"-DCOURSE_WERROR={'ON' if werror else 'OFF'}",
              f"-DCOURSE_SANITIZE={'ON' if variant == 'sanitize' else 'OFF'}",
              *_compiler_options(file)], verbose)
        _run(["cmake", "--build", str(out), "--parallel", str(_usable_cores())], verbose)
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
        "crs_dirichlet": (None, [_c_int, _ptr, _ptr, _ptr, _ptr, _ptr, _ptr]),
        "fem3d_element": (_c_int, [_ptr, _c_double, _ptr, _ptr, _ptr]),
        "fem3d_pattern": (None, [_c_int, _c_int, _c_int, _ptr, _ptr]),
        "fem3d_assemble": (_c_int, [_c_int, _ptr, _ptr, _c_double, _ptr, _ptr, _ptr, _ptr, _ptr]),
        "fem3d_face_flux": (None, [_c_int, _ptr, _ptr, _c_double, _ptr]),
        "fem3d_nakajima_source": (None, [_c_int, _ptr, _ptr, _c_double, _ptr]),
        "fem3d_element_source_load": (_c_int, [_c_int, _ptr, _ptr, _ptr, _ptr]),
        "stream_init": (None, [_c_int, _ptr, _ptr, _ptr]),
        "stream_copy": (None, [_c_int, _ptr, _ptr]),
        "stream_triad": (None, [_c_int, _c_double, _ptr, _ptr, _ptr]),
        "stream_sum": (_c_double, [_c_int, _ptr]),
        "poi_gen_crs": (None, [_c_int] * 3 + [_c_double] * 3 + [_c_int] + [_ptr] * 5),
        "poi_gen_ell": (None, [_c_int] * 3 + [_c_double] * 3 + [_c_int] + [_ptr] * 4),
        "pcg_v0": (_c_int, [_c_int] + [_ptr] * 6 + [_c_double, _c_int, _ptr]),
        "pcg_v1": (_c_int, [_c_int] + [_ptr] * 6 + [_c_double, _c_int, _ptr]),
        "pcg_v2": (_c_int, [_c_int] + [_ptr] * 5 + [_c_double, _c_int, _ptr]),
        "pcg_v3": (_c_int, [_c_int] + [_ptr] * 5 + [_c_double, _c_int, _ptr]),
        "offdiag_crs_matvec": (None, [_c_int] + [_ptr] * 6),
        "ell_matvec": (None, [_c_int] + [_ptr] * 5),
        "sell_matvec": (None, [_c_int, _c_int] + [_ptr] * 7),
        "course_set_threads": (None, [_c_int]),
        "dot_racy": (_c_double, [_c_int, _ptr, _ptr]),
        "dot_reduction": (_c_double, [_c_int, _ptr, _ptr]),
        "scalar_race": (None, [_c_int, _ptr, _ptr, _c_int, _ptr]),
        # lecture 04_iccg
        "cuthill_mckee": (None, [_c_int] + [_ptr] * 4),
        "wavefronts": (None, [_c_int] + [_ptr] * 4),
        "multicolor": (_c_int, [_c_int, _ptr, _ptr, _c_int, _ptr]),
        "cyclic_colors": (_c_int, [_c_int] + [_ptr] * 4 + [_c_int, _ptr]),
        "color_permutation": (None, [_c_int, _c_int] + [_ptr] * 4),
        "ic0_factor": (_c_int, [_c_int] + [_ptr] * 6),
        "ic0_transpose": (_c_int, [_c_int] + [_ptr] * 5),
        "ic0_apply": (_c_int, [_c_int, _c_int] + [_ptr] * 10),
        "iccg": (_c_int, [_c_int, _c_int] + [_ptr] * 13 + [_c_double, _c_int, _ptr]),
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


def check_table(a, name: str, dtype: np.dtype, width: int, rows: int | None = None,
                writeable: bool = False) -> np.ndarray:
    """Like check_array, for a 2-D C-contiguous table of shape (rows, width) (a row per node,
    element or face)."""
    if not isinstance(a, np.ndarray):
        raise TypeError(f"{name} must be a numpy array, got {type(a).__name__}")
    if a.dtype != dtype:
        raise TypeError(f"{name} must have dtype {dtype}, got {a.dtype} "
                        f"(convert with np.asarray({name}, dtype=np.{dtype}))")
    if a.ndim != 2 or a.shape[1] != width:
        raise ValueError(f"{name} must have shape ({'n' if rows is None else rows}, {width}), "
                         f"got {a.shape}")
    if not a.flags.c_contiguous:
        raise ValueError(f"{name} must be C-contiguous (use np.ascontiguousarray)")
    if rows is not None and a.shape[0] != rows:
        raise ValueError(f"{name} must have shape ({rows}, {width}), got {a.shape}")
    if a.shape[0] * width > np.iinfo(np.int32).max:
        raise ValueError(f"{name} has more entries than 32-bit indices allow")
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


def check_pattern(row_ptr, col_idx, n: int | None = None, n_cols: int | None = None) -> int:
    """Check the index arrays of a CRS matrix (0-based), square unless n_cols is given (the rows
    of one rank: columns over its internal and external nodes); returns its number of rows."""
    check_array(row_ptr, "row_ptr", INT)
    if row_ptr.shape[0] < 2:
        raise ValueError("row_ptr must have at least 2 entries (n + 1 for n rows)")
    order = row_ptr.shape[0] - 1
    if n is not None and order != n:
        raise ValueError(f"row_ptr must have length {n + 1}, got {row_ptr.shape[0]}")
    nnz = check_array(col_idx, "col_idx", INT).shape[0]
    if row_ptr[0] != 0 or row_ptr[-1] != nnz or np.any(np.diff(row_ptr) < 0):
        raise ValueError(f"row_ptr must rise from 0 to len(col_idx) = {nnz}")
    columns = order if n_cols is None else n_cols
    if nnz and (col_idx.min() < 0 or col_idx.max() >= columns):
        raise ValueError(f"col_idx entries must lie in [0, {columns}) (0-based column indices)")
    return order


def check_crs(row_ptr, col_idx, val, n: int | None = None, n_cols: int | None = None) -> int:
    """Check a CRS matrix (0-based indices, float64 values; square unless n_cols is given);
    returns its number of rows."""
    order = check_pattern(row_ptr, col_idx, n, n_cols)
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


def crs_matvec_prepared(lang, row_ptr, col_idx, val, x, y):
    """A function of no arguments that computes y = A x with the kernel of `lang`, its arguments
    checked (and, for Fortran, shifted to 1-based) once, here: for timing the kernel alone, or for
    the rows of one rank (A has as many columns as x has entries)."""
    check_array(x, "x", REAL)
    n = check_crs(row_ptr, col_idx, val, n_cols=x.shape[0])
    check_array(y, "y", REAL, n, writeable=True)
    rp, ci = _index_base(lang, row_ptr, col_idx)
    kernel = load(lang).crs_matvec
    arrays = (rp, ci, val, x, y)              # the closure keeps them alive

    def run() -> None:
        kernel(n, *(_p(a) for a in arrays))
    return run


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


# ---------------------------------------------------------------------------------------------
# lecture 02_fem3d: hexahedra, 27-point pattern, assembly, face flux, Dirichlet rows
# ---------------------------------------------------------------------------------------------

def _check_finite(a: np.ndarray, name: str) -> None:
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{name} must hold finite numbers only (no inf or nan)")


def _check_nodes(table: np.ndarray, name: str, n_node: int) -> None:
    """Every node number in `table` must lie in [0, n_node)."""
    if table.size and (table.min() < 0 or table.max() >= n_node):
        raise ValueError(f"{name} entries must lie in [0, {n_node}) (0-based node numbers), "
                         f"got values in [{table.min()}, {table.max()}]")


def fem3d_element(lang, xyz8, cond, q8):
    """Element matrix ke (8x8) and load fe (8) of one tri-linear hexahedron with corners xyz8
    (8x3 float64) and nodal source q8 (8 float64); ValueError for a non-positive Jacobian."""
    check_table(xyz8, "xyz8", REAL, 3, rows=8)
    _check_finite(xyz8, "xyz8")
    check_array(q8, "q8", REAL, 8)
    _check_finite(q8, "q8")
    cond = check_real(cond, "cond", positive=True)
    ke, fe = np.empty(64), np.empty(8)
    if load(lang).fem3d_element(_p(xyz8), cond, _p(q8), _p(ke), _p(fe)) != 0:
        raise ValueError("xyz8: the element is inverted or degenerate (det J <= 0 at a Gauss "
                         "point); are its corners in the local order of course.fem.element?")
    return ke.reshape(8, 8), fe


def fem3d_nnz(nx: int, ny: int, nz: int) -> int:
    """Nonzeros of the 27-point pattern of an nx x ny x nz box of hexahedra."""
    return (3 * nx + 1) * (3 * ny + 1) * (3 * nz + 1)


def fem3d_pattern(lang, nx, ny, nz):
    """0-based CRS pattern (row_ptr, col_idx) of the structured nx x ny x nz hexahedral mesh."""
    nx, ny, nz = (check_int(v, name, minimum=1) for v, name in ((nx, "nx"), (ny, "ny"), (nz, "nz")))
    n_node, nnz = (nx + 1) * (ny + 1) * (nz + 1), fem3d_nnz(nx, ny, nz)
    if nnz > np.iinfo(np.int32).max:
        raise ValueError(f"nx, ny, nz = {nx}, {ny}, {nz} give {nnz} nonzeros, more than 32-bit "
                         f"indices allow")
    row_ptr = np.empty(n_node + 1, dtype=INT)
    col_idx = np.empty(nnz, dtype=INT)
    load(lang).fem3d_pattern(nx, ny, nz, _p(row_ptr), _p(col_idx))
    if lang == "fortran":           # Fortran numbers from 1
        row_ptr -= 1
        col_idx -= 1
    return row_ptr, col_idx


@numba.njit(cache=True)
def _first_missing_entry(elements, row_ptr, col_idx):
    """(e, a, b) of the first element e whose entry (node a, node b) is not in the pattern, or
    (-1, -1, -1): the pattern must hold every entry the assembly adds into."""
    for e in range(elements.shape[0]):
        for a in range(elements.shape[1]):
            row = elements[e, a]
            for b in range(elements.shape[1]):
                col = elements[e, b]
                found = False
                for k in range(row_ptr[row], row_ptr[row + 1]):
                    if col_idx[k] == col:
                        found = True
                        break
                if not found:
                    return e, a, b
    return -1, -1, -1


def check_element_pattern(elements, row_ptr, col_idx) -> None:
    """ValueError unless the CRS pattern holds the entry (i, j) of every pair of nodes i, j that
    share an element (elements and the pattern already checked for types and ranges)."""
    e, a, b = _first_missing_entry(elements, row_ptr, col_idx)
    if e >= 0:
        raise ValueError(f"row_ptr/col_idx lack the entry ({elements[e, a]}, {elements[e, b]}) "
                         f"that element {e} adds into: not the pattern of this mesh")


def fem3d_assemble(lang, elements, xyz, cond, q, row_ptr, col_idx, val=None, rhs=None):
    """Adds every element matrix into val and every element load into rhs (new zero arrays when
    not given); returns (val, rhs). elements (n_elem, 8) int32, xyz (n_node, 3) float64, nodal
    source q (n_node) float64."""
    check_table(elements, "elements", INT, 8)
    if elements.shape[0] == 0:
        raise ValueError("elements must hold at least one element")
    check_table(xyz, "xyz", REAL, 3)
    _check_finite(xyz, "xyz")
    n_node = xyz.shape[0]
    _check_nodes(elements, "elements", n_node)
    cond = check_real(cond, "cond", positive=True)
    check_array(q, "q", REAL, n_node)
    _check_finite(q, "q")
    check_pattern(row_ptr, col_idx, n_node)
    val = np.zeros(col_idx.shape[0]) if val is None else \
        check_array(val, "val", REAL, col_idx.shape[0], writeable=True)
    rhs = np.zeros(n_node) if rhs is None else check_array(rhs, "rhs", REAL, n_node, writeable=True)
    check_element_pattern(elements, row_ptr, col_idx)
    el, rp, ci = _index_base(lang, elements, row_ptr, col_idx)
    status = load(lang).fem3d_assemble(elements.shape[0], _p(el), _p(xyz), cond, _p(q), _p(rp),
                                       _p(ci), _p(val), _p(rhs))
    if status < 0:
        raise ValueError(f"elements: element {-status - 1} is inverted or degenerate "
                         f"(det J <= 0 at a Gauss point)")
    return val, rhs


def fem3d_face_flux(lang, faces, xyz, qflux, rhs) -> None:
    """Adds the load of the heat flux qflux into the body through the quadrilaterals faces
    (n_face, 4) int32 (node numbers in cyclic order) to rhs, in place."""
    check_table(faces, "faces", INT, 4)
    check_table(xyz, "xyz", REAL, 3)
    _check_finite(xyz, "xyz")
    n_node = xyz.shape[0]
    _check_nodes(faces, "faces", n_node)
    qflux = check_real(qflux, "qflux")
    check_array(rhs, "rhs", REAL, n_node, writeable=True)
    (fc,) = _index_base(lang, faces)
    load(lang).fem3d_face_flux(faces.shape[0], _p(fc), _p(xyz), qflux, _p(rhs))


def _check_elements(elements, xyz) -> int:
    """elements (n_elem, 8) int32 with at least one element, node numbers within xyz (n_node, 3)
    float64 of finite numbers; returns n_node."""
    check_table(elements, "elements", INT, 8)
    if elements.shape[0] == 0:
        raise ValueError("elements must hold at least one element")
    check_table(xyz, "xyz", REAL, 3)
    _check_finite(xyz, "xyz")
    _check_nodes(elements, "elements", xyz.shape[0])
    return xyz.shape[0]


def fem3d_nakajima_source(lang, elements, xyz, qvol) -> np.ndarray:
    """The heat generation of Nakajima's FEM course code on each element, qvol |x_c + y_c|
    ((x_c, y_c, z_c) the mean of its 8 corners): (n_elem) float64."""
    _check_elements(elements, xyz)
    qvol = check_real(qvol, "qvol")
    q_elem = np.empty(elements.shape[0])
    (el,) = _index_base(lang, elements)
    load(lang).fem3d_nakajima_source(elements.shape[0], _p(el), _p(xyz), qvol, _p(q_elem))
    return q_elem


def fem3d_element_source_load(lang, elements, xyz, q_elem, rhs=None) -> np.ndarray:
    """Adds the load of a source constant on each element, q_elem (n_elem) float64, into rhs
    (a new zero array when not given): rhs_a += q_elem[e] * integral of N_a over element e.
    Returns rhs; ValueError for an element with a non-positive Jacobian."""
    n_node = _check_elements(elements, xyz)
    check_array(q_elem, "q_elem", REAL, elements.shape[0])
    _check_finite(q_elem, "q_elem")
    rhs = np.zeros(n_node) if rhs is None else check_array(rhs, "rhs", REAL, n_node, writeable=True)
    (el,) = _index_base(lang, elements)
    status = load(lang).fem3d_element_source_load(elements.shape[0], _p(el), _p(xyz), _p(q_elem),
                                                  _p(rhs))
    if status < 0:
        raise ValueError(f"elements: element {-status - 1} is inverted or degenerate "
                         f"(det J <= 0 at a Gauss point)")
    return rhs


def check_dirichlet_rows(fixed, row_ptr, col_idx) -> None:
    """Every fixed row must hold its diagonal entry (it becomes the identity's row)."""
    n = row_ptr.shape[0] - 1
    rows = np.repeat(np.arange(n), np.diff(row_ptr))
    has_diagonal = np.zeros(n, dtype=bool)
    has_diagonal[rows[rows == col_idx]] = True
    missing = np.flatnonzero((fixed != 0) & ~has_diagonal)
    if missing.size:
        raise ValueError(f"row_ptr/col_idx: fixed row {missing[0]} has no diagonal entry")


def crs_dirichlet(lang, fixed, g, row_ptr, col_idx, val, rhs) -> None:
    """Prescribe T_i = g_i where fixed[i] = 1 (int32 flags 0/1), in place, keeping A symmetric."""
    n = check_crs(row_ptr, col_idx, val)
    check_array(val, "val", REAL, writeable=True)
    check_array(fixed, "fixed", INT, n)
    if n and (fixed.min() < 0 or fixed.max() > 1):
        raise ValueError("fixed must hold the flags 0 (free) and 1 (prescribed) only")
    check_array(g, "g", REAL, n)
    _check_finite(g, "g")
    check_array(rhs, "rhs", REAL, n, writeable=True)
    check_dirichlet_rows(fixed, row_ptr, col_idx)
    rp, ci = _index_base(lang, row_ptr, col_idx)     # fixed is flags, not indices: no shift
    load(lang).crs_dirichlet(n, _p(fixed), _p(g), _p(rp), _p(ci), _p(val), _p(rhs))


# --- STREAM (memory bandwidth) -------------------------------------------------------------------

def _stream_vectors(vectors, names) -> int:
    """The common length of the float64 vectors (all checked)."""
    n = None
    for a, name in zip(vectors, names):
        check_array(a, name, REAL, n)
        n = a.shape[0] if n is None else n
    if n > np.iinfo(np.int32).max:
        raise ValueError(f"{names[0]} is longer than 32-bit indices allow")
    return n


def stream_init(lang, a, b, c) -> None:
    """a = 1, b = 2, c = 0.5 (in parallel, so that first touch places the pages)."""
    n = _stream_vectors((a, b, c), ("a", "b", "c"))
    for v, name in ((a, "a"), (b, "b"), (c, "c")):
        check_array(v, name, REAL, n, writeable=True)
    load(lang).stream_init(n, _p(a), _p(b), _p(c))


def stream_copy(lang, b, a) -> None:
    """a = b."""
    n = _stream_vectors((b, a), ("b", "a"))
    check_array(a, "a", REAL, n, writeable=True)
    load(lang).stream_copy(n, _p(b), _p(a))


def stream_triad(lang, scalar, b, c, a) -> None:
    """a = b + scalar c."""
    n = _stream_vectors((b, c, a), ("b", "c", "a"))
    check_array(a, "a", REAL, n, writeable=True)
    scalar = check_real(scalar, "scalar")
    load(lang).stream_triad(n, scalar, _p(b), _p(c), _p(a))


def stream_sum(lang, a) -> float:
    """The sum of a: the read-only kernel (8 bytes loaded per element, nothing stored)."""
    n = _stream_vectors((a,), ("a",))
    return float(load(lang).stream_sum(n, _p(a)))


# --- lecture 03_openmp: the Poisson FVM generator, the PCG ladder, CRS/ELL/SELL products -----------

def set_threads(lang, n) -> None:
    """Threads of the OpenMP regions that the library of `lang` runs from now on
    (omp_set_num_threads): to vary them within one process (OMP_NUM_THREADS is read only once,
    when the library loads)."""
    n = check_int(n, "n", minimum=1)
    load(lang).course_set_threads(n)


def poisson_offdiag_nnz(nx: int, ny: int, nz: int) -> int:
    """Off-diagonal nonzeros of the 7-point stencil on an nx x ny x nz box of cells."""
    return 2 * ((nx - 1) * ny * nz + nx * (ny - 1) * nz + nx * ny * (nz - 1))


def _check_poisson_box(nx, ny, nz, dx, dy, dz):
    nx, ny, nz = (check_int(v, name, minimum=1) for v, name in ((nx, "nx"), (ny, "ny"), (nz, "nz")))
    dx, dy, dz = (check_real(v, name, positive=True) for v, name in ((dx, "dx"), (dy, "dy"),
                                                                     (dz, "dz")))
    n = nx * ny * nz
    if ELL_WIDTH * n > np.iinfo(np.int32).max:
        raise ValueError(f"nx, ny, nz = {nx}, {ny}, {nz} give {n} cells, more than 32-bit "
                         f"indices allow")
    return nx, ny, nz, dx, dy, dz, n


def poi_gen_crs(lang, nx, ny, nz, dx=1.0, dy=1.0, dz=1.0, parallel=True):
    """The finite-volume Poisson matrix of the nx x ny x nz box: (d, index, item, amat, b), the
    diagonal, the off-diagonal part in 0-based CRS and the right-hand side."""
    nx, ny, nz, dx, dy, dz, n = _check_poisson_box(nx, ny, nz, dx, dy, dz)
    d, b = np.empty(n), np.empty(n)
    index = np.empty(n + 1, dtype=INT)
    nnz = poisson_offdiag_nnz(nx, ny, nz)
    item, amat = np.empty(nnz, dtype=INT), np.empty(nnz)
    load(lang).poi_gen_crs(nx, ny, nz, dx, dy, dz, int(bool(parallel)), _p(d), _p(index),
                           _p(item), _p(amat), _p(b))
    if lang == "fortran":           # Fortran numbers from 1
        index -= 1
        item -= 1
    return d, index, item, amat, b


def poi_gen_ell(lang, nx, ny, nz, dx=1.0, dy=1.0, dz=1.0, parallel=True):
    """The same matrix with its off-diagonal part in ELL, 6 entries per row (padded with the row
    itself and 0.0): (d, item_ell, amat_ell, b), 0-based."""
    nx, ny, nz, dx, dy, dz, n = _check_poisson_box(nx, ny, nz, dx, dy, dz)
    d, b = np.empty(n), np.empty(n)
    item, amat = np.empty(ELL_WIDTH * n, dtype=INT), np.empty(ELL_WIDTH * n)
    load(lang).poi_gen_ell(nx, ny, nz, dx, dy, dz, int(bool(parallel)), _p(d), _p(item),
                           _p(amat), _p(b))
    if lang == "fortran":
        item -= 1
    return d, item, amat, b


def check_ell(d, item, val, width: int = ELL_WIDTH) -> int:
    """Check a diagonal d (float64, n) and an off-diagonal part in ELL (item int32 and val float64
    of width * n entries, columns in [0, n)); returns n."""
    check_array(d, "d", REAL)
    n = d.shape[0]
    check_array(item, "item", INT, width * n)
    check_array(val, "val", REAL, width * n)
    if item.size and (item.min() < 0 or item.max() >= n):
        raise ValueError(f"item entries must lie in [0, {n}) (0-based column indices)")
    return n


def check_sell(n, chunk, perm, slice_ptr, col, val) -> None:
    """Check the arrays of an n x n SELL-C-sigma matrix with slices of `chunk` rows."""
    n = check_int(n, "n")
    chunk = check_int(chunk, "chunk", minimum=1)
    check_array(perm, "perm", INT, n)
    if n and not np.array_equal(np.sort(perm), np.arange(n)):
        raise ValueError(f"perm must be a permutation of 0 .. {n - 1}")
    n_slices = -(-n // chunk)
    check_array(slice_ptr, "slice_ptr", INT, n_slices + 1)
    total = check_array(col, "col", INT).shape[0]
    steps = np.diff(slice_ptr)
    if slice_ptr[0] != 0 or slice_ptr[-1] != total or np.any(steps < 0) \
            or np.any(steps % chunk):
        raise ValueError(f"slice_ptr must rise from 0 to len(col) = {total} in steps that are "
                         f"multiples of chunk = {chunk}")
    check_array(val, "val", REAL, total)
    if total and (col.min() < 0 or col.max() >= n):
        raise ValueError(f"col entries must lie in [0, {n}) (0-based column indices)")


def _diagonal_and_x(d, x, n, y):
    check_array(d, "d", REAL, n)
    check_array(x, "x", REAL, n)
    return np.empty(n) if y is None else check_array(y, "y", REAL, n, writeable=True)


def _offdiag_crs_args(lang, d, index, item, amat, x, y):
    n = check_crs(index, item, amat)
    y = _diagonal_and_x(d, x, n, y)
    ip, it = _index_base(lang, index, item)
    return "offdiag_crs_matvec", (n, d, ip, it, amat, x, y), y


def _ell_args(lang, d, item, amat, x, y):
    n = check_ell(d, item, amat)
    y = _diagonal_and_x(d, x, n, y)
    (it,) = _index_base(lang, item)
    return "ell_matvec", (n, d, it, amat, x, y), y


def _sell_args(lang, chunk, d, perm, slice_ptr, col, val, x, y):
    check_array(d, "d", REAL)
    n = d.shape[0]
    check_sell(n, chunk, perm, slice_ptr, col, val)
    y = _diagonal_and_x(d, x, n, y)
    pm, cl = _index_base(lang, perm, col)     # slice_ptr: offsets, not indices (no shift)
    return "sell_matvec", (n, int(chunk), d, pm, slice_ptr, cl, val, x, y), y


def _call(lang, name, args):
    getattr(load(lang), name)(*(_p(a) if isinstance(a, np.ndarray) else a for a in args))


def _prepared(lang, name, args):
    kernel = getattr(load(lang), name)
    converted = [_p(a) if isinstance(a, np.ndarray) else a for a in args]
    keep = args                              # the closure keeps the arrays alive

    def run() -> None:
        kernel(*converted)
    run.arrays = keep
    return run


def offdiag_crs_matvec(lang, d, index, item, amat, x, y=None) -> np.ndarray:
    """y = d x + A_off x, A_off the off-diagonal part in CRS."""
    name, args, y = _offdiag_crs_args(lang, d, index, item, amat, x, y)
    _call(lang, name, args)
    return y


def ell_matvec(lang, d, item, amat, x, y=None) -> np.ndarray:
    """y = d x + A_off x, A_off in ELL with 6 entries per row."""
    name, args, y = _ell_args(lang, d, item, amat, x, y)
    _call(lang, name, args)
    return y


def sell_matvec(lang, chunk, d, perm, slice_ptr, col, val, x, y=None) -> np.ndarray:
    """y = d x + A_off x, A_off in SELL-C-sigma (slices of `chunk` rows)."""
    name, args, y = _sell_args(lang, chunk, d, perm, slice_ptr, col, val, x, y)
    _call(lang, name, args)
    return y


def offdiag_crs_matvec_prepared(lang, d, index, item, amat, x, y):
    """offdiag_crs_matvec as a function of no arguments, checked once (for timing)."""
    if y is None:
        raise ValueError("y must be given (the prepared kernel writes into it)")
    return _prepared(lang, *_offdiag_crs_args(lang, d, index, item, amat, x, y)[:2])


def ell_matvec_prepared(lang, d, item, amat, x, y):
    if y is None:
        raise ValueError("y must be given (the prepared kernel writes into it)")
    return _prepared(lang, *_ell_args(lang, d, item, amat, x, y)[:2])


def sell_matvec_prepared(lang, chunk, d, perm, slice_ptr, col, val, x, y):
    if y is None:
        raise ValueError("y must be given (the prepared kernel writes into it)")
    return _prepared(lang, *_sell_args(lang, chunk, d, perm, slice_ptr, col, val, x, y)[:2])


LADDER = ("v0", "v1", "v2", "v3")
_LADDER_FORMAT = {"v0": "crs", "v1": "crs", "v2": "ell", "v3": "ell"}


def check_version(version) -> str:
    if version not in LADDER:
        raise ValueError(f"version must be one of {', '.join(LADDER)}; got {version!r}")
    return version


def pcg_ladder(lang, version, d, off, b, x0=None, tol=1e-8, max_iter=None):
    """Diagonal-scaled CG, step `version` of the OpenMP ladder: v0/v1 take the off-diagonal part
    in CRS, off = (index, item, amat); v2/v3 in ELL, off = (item_ell, amat_ell). Returns
    (x, iterations, relative residual)."""
    check_version(version)
    if not isinstance(off, tuple):
        raise TypeError(f"off must be a tuple of arrays, got {type(off).__name__}")
    if _LADDER_FORMAT[version] == "crs":
        if len(off) != 3:
            raise ValueError(f"{version} takes the CRS off-diagonal part off = (index, item, amat)")
        index, item, amat = off
        n = check_crs(index, item, amat)
        check_array(d, "d", REAL, n)
        arrays = _index_base(lang, index, item) + [amat]
    else:
        if len(off) != 2:
            raise ValueError(f"{version} takes the ELL off-diagonal part off = (item, amat)")
        item, amat = off
        n = check_ell(d, item, amat)
        arrays = _index_base(lang, item) + [amat]
    check_array(b, "b", REAL, n)
    x = np.zeros(n) if x0 is None else check_array(x0, "x0", REAL, n).copy()
    tol = check_real(tol, "tol", positive=True)
    max_iter = check_int(10 * n if max_iter is None else max_iter, "max_iter")
    relres = np.zeros(1)
    iters = getattr(load(lang), f"pcg_{version}")(n, _p(d), *(_p(a) for a in arrays), _p(b),
                                                  _p(x), tol, max_iter, _p(relres))
    if iters < 0:
        raise MemoryError(f"pcg_{version} ({lang}) could not allocate its work array (n = {n})")
    return x, iters, float(relres[0])


# --- lecture 03_openmp, part c: data races on purpose --------------------------------------------

def _dot_vectors(a, b) -> int:
    """The common length of the float64 vectors a and b (both checked)."""
    check_array(a, "a", REAL)
    n = a.shape[0]
    check_array(b, "b", REAL, n)
    if n > np.iinfo(np.int32).max:
        raise ValueError("a is longer than 32-bit indices allow")
    return n


def dot_racy(lang, a, b) -> float:
    """a . b by a loop with a DATA RACE (on purpose, for the lecture): the threads add into one
    shared sum without a reduction, so with more than one thread the result may be wrong, and
    differ from call to call."""
    n = _dot_vectors(a, b)
    return float(load(lang).dot_racy(n, _p(a), _p(b)))


def dot_reduction(lang, a, b) -> float:
    """a . b by the same loop with an OpenMP reduction (correct)."""
    n = _dot_vectors(a, b)
    return float(load(lang).dot_reduction(n, _p(a), _p(b)))


def scalar_race(lang, a, b, rounds=1000) -> np.ndarray:
    """a . b computed `rounds` times in one parallel region in which every thread zeroes the
    shared sum before the reduction loop (a DATA RACE, on purpose): the array of the rounds'
    results, of which some may be wrong with more than one thread."""
    n = _dot_vectors(a, b)
    rounds = check_int(rounds, "rounds", minimum=1)
    out = np.empty(rounds)
    load(lang).scalar_race(n, _p(a), _p(b), rounds, _p(out))
    return out


# --- lecture 04_iccg: orderings, IC(0), the colored substitution, ICCG ----------------------------
#
# Index arrays (ptr, adj, order, perm, color_ptr, the CRS parts) and the numbers of levels and
# colors go to Fortran 1-based, as every index: +1 on the way in, -1 on the way out.

def _graph(ptr, adj) -> int:
    """Check a graph (ptr int32 n + 1, adj int32, neighbours in [0, n)); returns n."""
    return check_pattern(ptr, adj)


def _check_sequence(order, name: str, n: int) -> None:
    check_array(order, name, INT, n)
    if n and not np.array_equal(np.sort(order), np.arange(n)):
        raise ValueError(f"{name} must be a permutation of 0 .. {n - 1}")


def check_color_ptr(color_ptr, n: int) -> int:
    """color_ptr: int32, rising from 0 to n, at least one color; returns the number of colors."""
    check_array(color_ptr, "color_ptr", INT)
    if color_ptr.shape[0] < 2 or color_ptr[0] != 0 or color_ptr[-1] != n \
            or np.any(np.diff(color_ptr) < 0):
        raise ValueError(f"color_ptr must rise from 0 to n = {n} (at least one color)")
    return color_ptr.shape[0] - 1


def _shift(lang, *arrays):
    return _index_base(lang, *arrays)


def cuthill_mckee(lang, ptr, adj, order, level) -> None:
    """Breadth-first numbering into order and level (int32, n, written)."""
    n = _graph(ptr, adj)
    check_array(order, "order", INT, n, writeable=True)
    check_array(level, "level", INT, n, writeable=True)
    p, a = _shift(lang, ptr, adj)
    load(lang).cuthill_mckee(n, _p(p), _p(a), _p(order), _p(level))
    if lang == "fortran":
        order -= 1
        level -= 1


def wavefronts(lang, ptr, adj, order, level) -> None:
    """The wavefront level of every unknown in the numbering `order` into level."""
    n = _graph(ptr, adj)
    _check_sequence(order, "order", n)
    check_array(level, "level", INT, n, writeable=True)
    p, a, o = _shift(lang, ptr, adj, order)
    load(lang).wavefronts(n, _p(p), _p(a), _p(o), _p(level))
    if lang == "fortran":
        level -= 1


def multicolor(lang, ptr, adj, target_colors, color) -> int:
    """Greedy multicoloring into color (int32, n); returns the number of colors."""
    n = _graph(ptr, adj)
    k = check_int(target_colors, "target_colors", minimum=1)
    check_array(color, "color", INT, n, writeable=True)
    p, a = _shift(lang, ptr, adj)
    ncolor = load(lang).multicolor(n, _p(p), _p(a), k, _p(color))
    if lang == "fortran":
        color -= 1
    return int(ncolor)


def cyclic_colors(lang, ptr, adj, order, level, target_colors, color) -> int:
    """CM-RCM colors (level mod K, or the next free color) into color; returns their number."""
    n = _graph(ptr, adj)
    _check_sequence(order, "order", n)
    check_array(level, "level", INT, n)
    if n and level.min() < 0:
        raise ValueError("level must hold levels >= 0")
    k = check_int(target_colors, "target_colors", minimum=1)
    check_array(color, "color", INT, n, writeable=True)
    p, a, o, lv = _shift(lang, ptr, adj, order, level)
    ncolor = load(lang).cyclic_colors(n, _p(p), _p(a), _p(o), _p(lv), k, _p(color))
    if ncolor < 0:
        raise MemoryError(f"cyclic_colors ({lang}) could not allocate its work array")
    if lang == "fortran":
        color -= 1
    return int(ncolor)


def color_permutation(lang, color, within, ncolor):
    """(perm, color_ptr): the unknowns sorted by color, `within` order inside a color."""
    check_array(color, "color", INT)
    n = color.shape[0]
    ncolor = check_int(ncolor, "ncolor", minimum=1 if n else 0)
    if n and (color.min() < 0 or color.max() >= ncolor):
        raise ValueError(f"color must hold colors in [0, {ncolor})")
    _check_sequence(within, "within", n)
    perm, color_ptr = np.empty(n, dtype=INT), np.empty(ncolor + 1, dtype=INT)
    c, w = _shift(lang, color, within)
    load(lang).color_permutation(n, ncolor, _p(c), _p(w), _p(perm), _p(color_ptr))
    if lang == "fortran":
        perm -= 1
        color_ptr -= 1
    return perm, color_ptr


def _check_split_lower(diag, lower_ptr, lower_col, lower_val):
    check_array(diag, "diag", REAL)
    n = diag.shape[0]
    check_crs(lower_ptr, lower_col, lower_val, n)
    rows = np.repeat(np.arange(n), np.diff(lower_ptr))
    if np.any(lower_col >= rows):
        raise ValueError("lower_col: the lower part must hold columns < row only")
    if np.any((np.diff(lower_col) <= 0) & (rows[1:] == rows[:-1])):
        raise ValueError("lower_col: columns must rise within each row")
    return n


def _check_upper_transposed(n, lower_ptr, lower_col, upper_ptr, upper_col) -> None:
    """The upper pattern must be the transpose of the lower (a structurally symmetric matrix)."""
    check_pattern(upper_ptr, upper_col, n)
    if upper_col.shape[0] != lower_col.shape[0]:
        raise ValueError("upper_col must have as many entries as lower_col (the transpose)")
    rows = np.repeat(np.arange(n), np.diff(lower_ptr))
    order = np.lexsort((rows, lower_col))
    expected_ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(lower_col, minlength=n), out=expected_ptr[1:])
    if not (np.array_equal(upper_ptr, expected_ptr) and np.array_equal(upper_col, rows[order])):
        raise ValueError("upper_ptr/upper_col must be the transpose of lower_ptr/lower_col "
                         "(columns rising)")


def ic0_factor(lang, diag, lower_ptr, lower_col, lower_val, upper_ptr, upper_col):
    """IC(0) of the split symmetric matrix: (fac_diag, fac_lower, fac_upper); ValueError if a
    pivot is not positive."""
    n = _check_split_lower(diag, lower_ptr, lower_col, lower_val)
    _check_upper_transposed(n, lower_ptr, lower_col, upper_ptr, upper_col)
    fac_diag, fac_lower = np.empty(n), np.empty(lower_col.shape[0])
    fac_upper = np.empty(lower_col.shape[0])
    lp, lc, up = _shift(lang, lower_ptr, lower_col, upper_ptr)
    kernels = load(lang)
    status = kernels.ic0_factor(n, _p(lp), _p(lc), _p(lower_val), _p(diag), _p(fac_lower),
                                _p(fac_diag))
    if status < 0:
        raise ValueError(f"IC(0) broke down: pivot {-status - 1} is not positive (the matrix "
                         f"is not an M-matrix, or not positive definite)")
    if kernels.ic0_transpose(n, _p(lp), _p(lc), _p(fac_lower), _p(up), _p(fac_upper)) < 0:
        raise MemoryError(f"ic0_transpose ({lang}) could not allocate its work array")
    return fac_diag, fac_lower, fac_upper


def _check_colored(color_ptr, n, lower_ptr, lower_col, upper_ptr, upper_col) -> int:
    """The colors, and that no row depends on a row of its own color (the parallel loop inside a
    color would race): every lower column lies in an earlier color, every upper one in a later."""
    ncolor = check_color_ptr(color_ptr, n)
    if ncolor == 1:
        return 1                                  # the sequential sweep: any pattern
    color = np.repeat(np.arange(ncolor), np.diff(color_ptr))
    for ptr, col, name, ok in ((lower_ptr, lower_col, "lower", np.less),
                               (upper_ptr, upper_col, "upper", np.greater)):
        rows = np.repeat(np.arange(n), np.diff(ptr))
        if not np.all(ok(color[col], color[rows])):
            raise ValueError(f"color_ptr: two coupled unknowns share a color ({name} part): "
                             f"not a valid coloring of this matrix")
    return ncolor


def ic0_apply(lang, color_ptr, lower_ptr, lower_col, fac_lower, upper_ptr, upper_col, fac_upper,
              fac_diag, r, z=None):
    """z = M^-1 r (IC(0)), color by color in parallel; z returned."""
    n = _check_split_lower(fac_diag, lower_ptr, lower_col, fac_lower)
    check_crs(upper_ptr, upper_col, fac_upper, n)
    ncolor = _check_colored(color_ptr, n, lower_ptr, lower_col, upper_ptr, upper_col)
    if np.any(fac_diag == 0):
        raise ValueError("fac_diag must have no zero entry (the substitution divides by it)")
    check_array(r, "r", REAL, n)
    z = np.empty(n) if z is None else check_array(z, "z", REAL, n, writeable=True)
    cp, lp, lc, up, uc = _shift(lang, color_ptr, lower_ptr, lower_col, upper_ptr, upper_col)
    if load(lang).ic0_apply(n, ncolor, _p(cp), _p(lp), _p(lc), _p(fac_lower), _p(up), _p(uc),
                            _p(fac_upper), _p(fac_diag), _p(r), _p(z)) < 0:
        raise MemoryError(f"ic0_apply ({lang}) could not allocate 1 / fac_diag (n = {n})")
    return z


def ic0_apply_prepared(lang, color_ptr, lower_ptr, lower_col, fac_lower, upper_ptr, upper_col,
                       fac_upper, fac_diag, r, z):
    """A function of no arguments that computes z = M^-1 r (ic0_apply) with the kernel of `lang`,
    its arguments checked (the coloring too: a scan of every entry) and shifted once, here: for a
    preconditioner applied at every iteration (course.parallel.precond)."""
    ic0_apply(lang, color_ptr, lower_ptr, lower_col, fac_lower, upper_ptr, upper_col, fac_upper,
              fac_diag, r, z)                             # checks everything, and runs once
    n, ncolor = fac_diag.shape[0], color_ptr.shape[0] - 1
    shifted = _shift(lang, color_ptr, lower_ptr, lower_col, upper_ptr, upper_col)
    arrays = (*shifted[:3], fac_lower, *shifted[3:], fac_upper, fac_diag, r, z)
    kernel = load(lang).ic0_apply                          # (the closure keeps the arrays alive)

    def run() -> None:
        if kernel(n, ncolor, *(_p(a) for a in arrays)) < 0:
            raise MemoryError(f"ic0_apply ({lang}) could not allocate 1 / fac_diag (n = {n})")
    return run


def iccg(lang, color_ptr, diag, lower, upper, fac_diag, fac_lower, fac_upper, b, tol=1e-8,
         max_iter=None):
    """ICCG (x0 = 0) on the split matrix (lower, upper: course.sparse.CRS parts) with its IC(0)
    factor; returns (x, iterations, relative residual)."""
    n = _check_split_lower(diag, lower.row_ptr, lower.col_idx, lower.val)
    check_crs(upper.row_ptr, upper.col_idx, upper.val, n)
    check_array(fac_diag, "fac_diag", REAL, n)
    if np.any(fac_diag == 0):
        raise ValueError("fac_diag must have no zero entry (the substitution divides by it)")
    check_array(fac_lower, "fac_lower", REAL, lower.nnz)
    check_array(fac_upper, "fac_upper", REAL, upper.nnz)
    ncolor = _check_colored(color_ptr, n, lower.row_ptr, lower.col_idx, upper.row_ptr,
                            upper.col_idx)
    check_array(b, "b", REAL, n)
    tol = check_real(tol, "tol", positive=True)
    max_iter = check_int(10 * n if max_iter is None else max_iter, "max_iter")
    x, relres = np.zeros(n), np.zeros(1)
    cp, lp, lc, up, uc = _shift(lang, color_ptr, lower.row_ptr, lower.col_idx, upper.row_ptr,
                                upper.col_idx)
    iters = load(lang).iccg(n, ncolor, _p(cp), _p(diag), _p(lp), _p(lc), _p(lower.val), _p(up),
                            _p(uc), _p(upper.val), _p(fac_diag), _p(fac_lower), _p(fac_upper),
                            _p(b), _p(x), tol, max_iter, _p(relres))
    if iters < 0:
        raise MemoryError(f"iccg ({lang}) could not allocate its work array (n = {n})")
    return x, int(iters), float(relres[0])
