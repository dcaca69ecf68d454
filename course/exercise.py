"""Checks for exercises in which the learner writes a compiled kernel (C or Fortran).

The learner's file is compiled into a shared library and called in a *separate process*: a
segmentation fault or an endless loop in learner code fails that one check with a clear message,
instead of killing the notebook's kernel (and with it the grading of every later cell).

    check_crs_matvec("crs_matvec.c", "c")              # raises AssertionError if it is wrong
"""

from __future__ import annotations

import hashlib
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import scipy.sparse

from . import native
from .native import INT, REAL

_COMPILER = {"c": ("cc", ["-std=c99"]), "fortran": ("gfortran", ["-ffree-form"])}
_SUFFIX = {"c": ".c", "fortran": ".f90"}
_CACHE = Path(tempfile.gettempdir()) / "course-exercise-builds"


def compile_kernel(source: str | Path, lang: str, link_course: bool = False) -> Path:
    """Compile the learner's source file into a shared library; return its path. With
    link_course, the learner's code may call the kernels of the course library (libcourse_c or
    libcourse_fortran, e.g. fem3d_element).

    Raises AssertionError with the compiler's messages if it does not compile."""
    if lang not in _COMPILER:
        raise ValueError(f"lang must be 'c' or 'fortran', not {lang!r}")
    source = Path(source)
    if not source.exists():
        raise AssertionError(f"{source} does not exist: run the %%writefile cell above first")
    if source.suffix != _SUFFIX[lang]:
        raise AssertionError(f"{source}: a {lang} source file must end in {_SUFFIX[lang]}")
    compiler, flags = _COMPILER[lang]
    if shutil.which(compiler) is None:
        raise AssertionError(f"the {lang} compiler {compiler} is not installed "
                             "(python -m course doctor says what to install)")
    link = []
    if link_course:
        native.ensure_built("release")
        lib_dir = native.build_dir("release") / "lib"
        link = [f"-L{lib_dir}", f"-lcourse_{lang}", f"-Wl,-rpath,{lib_dir}"]
    text = source.read_bytes()
    digest = hashlib.sha1(text + lang.encode() + " ".join(link).encode()).hexdigest()[:16]
    lib = _CACHE / f"{source.stem}-{digest}.so"
    if lib.exists():
        return lib
    _CACHE.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:     # Fortran writes .mod files into the cwd
        tmp_lib = Path(tmp) / lib.name
        result = subprocess.run([compiler, *flags, "-O2", "-Wall", "-fPIC", "-shared",
                                 str(source.resolve()), "-o", str(tmp_lib), *link],
                                capture_output=True, text=True, cwd=tmp, timeout=120)
        if result.returncode != 0:
            raise AssertionError(f"{source} does not compile:\n{result.stderr.strip()}")
        shutil.move(tmp_lib, lib)
    return lib


def call_isolated(lib: Path, function: str, args: list, returns_int: bool = False,
                  timeout: float = 10.0) -> tuple[int | None, list[np.ndarray]]:
    """Call `function(*args)` of the library `lib` in a child process (see _child below).

    Python ints become C ints, floats C doubles, NumPy arrays pointers to their data. Returns the
    function's int result (or None) and the arrays as the function left them."""
    with tempfile.TemporaryDirectory() as tmp:
        args_path, out_path = Path(tmp) / "in.npz", Path(tmp) / "out.npz"
        np.savez(args_path, *[np.asarray(a) for a in args])
        try:
            result = subprocess.run([sys.executable, "-m", "course.exercise", str(lib), function,
                                     str(args_path), str(out_path), str(int(returns_int))],
                                    capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"{function} did not finish within {timeout:g} s "
                                 "(an endless loop?)") from None
        if result.returncode < 0:
            name = signal.Signals(-result.returncode).name
            raise AssertionError(f"{function} crashed with {name}"
                                 + (" (segmentation fault: an index out of bounds?)"
                                    if name == "SIGSEGV" else ""))
        if result.returncode != 0:
            raise AssertionError(f"{function} could not be called:\n{result.stderr.strip()}")
        with np.load(out_path) as out:
            arrays = [out[f"arr_{i}"] for i in range(len(args))]
            return (int(out["result"]) if returns_int else None), arrays


def random_crs(n: int, density: float, seed: int):
    """A random n x n CRS matrix (0-based int32 indices) with rows of varying length, including
    rows that are empty, and a random vector x."""
    rng = np.random.default_rng(seed)
    a = scipy.sparse.random(n, n, density=density, random_state=rng, format="csr")
    a.sort_indices()
    x = rng.standard_normal(n)
    return a.indptr.astype(INT), a.indices.astype(INT), a.data.astype(REAL), x


def check_crs_matvec(source: str | Path, lang: str, seeds=(1, 2, 3), sizes=(1, 7, 50),
                     timeout: float = 10.0) -> None:
    """Check the learner's crs_matvec (same signature as src_c/common/crs.c) against y = A x
    on random matrices; raises AssertionError naming the first case that fails."""
    lib = compile_kernel(source, lang)
    for seed in seeds:
        for n in sizes:
            row_ptr, col_idx, val, x = random_crs(n, density=min(1.0, 3.0 / n), seed=seed)
            if lang == "fortran":            # Fortran kernels take 1-based indices
                row_ptr, col_idx = row_ptr + 1, col_idx + 1
            y = np.full(n, np.nan)      # a kernel that writes nothing cannot pass by luck
            _, (*_, y) = call_isolated(lib, "crs_matvec", [n, row_ptr, col_idx, val, x, y],
                                       timeout=timeout)
            expected = scipy.sparse.csr_matrix(
                (val, col_idx - (lang == "fortran"), row_ptr - (lang == "fortran")),
                shape=(n, n)) @ x
            if not np.allclose(y, expected, rtol=1e-12, atol=1e-12):
                worst = int(np.argmax(np.abs(y - expected)))
                raise AssertionError(
                    f"crs_matvec is wrong for a {n}x{n} matrix with {val.size} nonzeros "
                    f"(seed {seed}): row {worst} gives {y[worst]!r}, expected {expected[worst]!r}")


def distorted_box(nx: int, ny: int, nz: int, seed: int, shake: float = 0.2):
    """A box mesh whose inner nodes are moved at random by up to `shake` element sizes (every
    element stays valid), and a random nodal heat source: inputs the learner has not seen."""
    from .mesh import box_mesh

    box = box_mesh(nx, ny, nz)
    rng = np.random.default_rng(seed)
    xyz = box.xyz.copy()
    inner = np.ones(box.n_node, dtype=bool)
    inner[box.boundary_nodes()] = False
    xyz[inner] += shake * rng.uniform(-1, 1, (inner.sum(), 3)) * [box.dx, box.dy, box.dz]
    return box, xyz, rng.uniform(-1.0, 2.0, box.n_node)


def check_fem3d_assemble(source: str | Path, lang: str, seeds=(1,), sizes=((1, 1, 1), (2, 2, 1)),
                         timeout: float = 20.0) -> None:
    """Check the learner's fem3d_assemble (same signature as src_c/02_fem3d/fem3d.c; it may call
    the course's fem3d_element) against the NumPy reference on meshes with moved inner nodes, and
    its return value -(e+1) for an inverted element e; raises AssertionError naming the case."""
    from . import fem

    lib = compile_kernel(source, lang, link_course=True)
    base = 1 if lang == "fortran" else 0             # Fortran kernels take 1-based indices
    for seed in seeds:
        for nx, ny, nz in sizes:
            box, xyz, q = distorted_box(nx, ny, nz, seed)
            row_ptr, col_idx = fem.fem3d_pattern(box)
            val_ref, rhs_ref = fem.fem3d_assemble_numpy(box.elements, xyz, 1.5, q,
                                                        row_ptr, col_idx)
            args = [box.n_elem, box.elements + base, xyz, 1.5, q, row_ptr + base, col_idx + base,
                    np.zeros(col_idx.size), np.zeros(box.n_node)]
            status, arrays = call_isolated(lib, "fem3d_assemble", args, returns_int=True,
                                           timeout=timeout)
            case = f"a {nx} x {ny} x {nz} mesh with moved inner nodes (seed {seed})"
            assert status == 0, f"fem3d_assemble returned {status} for {case}, expected 0"
            for name, got, expected in (("val", arrays[7], val_ref), ("rhs", arrays[8], rhs_ref)):
                if not np.allclose(got, expected, rtol=1e-12, atol=1e-12):
                    worst = int(np.argmax(np.abs(got - expected)))
                    raise AssertionError(f"fem3d_assemble: {name}[{worst}] is {got[worst]!r}, "
                                         f"expected {expected[worst]!r}, for {case}")
    # an inverted element: mirror the last element of a 2 x 1 x 1 mesh
    box = distorted_box(2, 1, 1, seed=0, shake=0.0)[0]
    xyz = box.xyz.copy()
    xyz[:, 0] = np.where(xyz[:, 0] > 0.75, 0.25, xyz[:, 0])    # x = 1 -> x = 0.25 < 0.5
    row_ptr, col_idx = fem.fem3d_pattern(box)
    status, _ = call_isolated(lib, "fem3d_assemble",
                              [box.n_elem, box.elements + base, xyz, 1.0, np.ones(box.n_node),
                               row_ptr + base, col_idx + base, np.zeros(col_idx.size),
                               np.zeros(box.n_node)], returns_int=True, timeout=timeout)
    assert status == -2, (f"fem3d_assemble returned {status} for a mesh whose element 1 is "
                          "inverted, expected -2 = -(1 + 1)")


def _child(lib: str, function: str, args_path: str, out_path: str, returns_int: str) -> None:
    """Runs in the child process: load the arguments, call the function, save what it left."""
    import ctypes

    with np.load(args_path) as saved:
        args = [saved[f"arr_{i}"] for i in range(len(saved.files))]
    fn = getattr(ctypes.CDLL(lib), function)
    fn.restype = ctypes.c_int if returns_int == "1" else None
    fn.argtypes = [ctypes.c_int if a.ndim == 0 and a.dtype.kind == "i" else
                   ctypes.c_double if a.ndim == 0 else ctypes.c_void_p for a in args]
    values = [a.item() if a.ndim == 0 else a.ctypes.data_as(ctypes.c_void_p) for a in args]
    result = fn(*values)
    np.savez(out_path, *args, result=result if result is not None else 0)


if __name__ == "__main__":
    _child(*sys.argv[1:6])
