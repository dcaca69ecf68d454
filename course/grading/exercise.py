"""Checks for exercises in which the learner writes a compiled kernel (C or Fortran).

The learner's file is compiled into a shared library and called in a *separate process*: a
segmentation fault or an endless loop in learner code fails that one check with a clear message,
instead of killing the notebook's kernel (and with it the grading of every later cell).

    check_crs_matvec("crs_matvec.c", "c")              # raises AssertionError if it is wrong

OpenMP kernels (lecture 03_openmp) are compiled with -fopenmp and run in the child process with a
given number of threads (OMP_NUM_THREADS in the child's environment), several times if asked.

A failed check speaks the learner's language: rows and entries are 0-based (y[3]) for C and 1-based
(y(4), "row 4 (1-based)") for Fortran, whose kernels get 1-based index arrays; numbers are printed
as a person writes them (1.5, never np.float64(1.5)).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import inspect
import os
import re
import shutil
import signal
import subprocess
import sys
import select
import tempfile
import textwrap
import time
import types
import weakref
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import scipy.sparse

from .. import cache, native
from ..native import INT, REAL

_COMPILER = {"c": ("cc", ["-std=c99"]), "fortran": ("gfortran", ["-ffree-form"])}
_MPI_COMPILER = {"c": "mpicc", "fortran": "mpif90"}      # the same compilers, with MPI
_SUFFIX = {"c": ".c", "fortran": ".f90"}


# --- messages in the learner's language: 0-based C, 1-based Fortran, plain numbers -------------

def _base(lang: str) -> int:
    """The first index of the learner's arrays: 1 in Fortran, 0 in C (and Python)."""
    return 1 if lang == "fortran" else 0


def plain(value) -> str:
    """A number as a person writes it: 1.5, -2, nan, 1e-300 (never np.float64(1.5) or
    np.int32(3), whatever NumPy scalar or 0-d array it is)."""
    value = np.asarray(value).item() if hasattr(value, "dtype") else value
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int):
        return str(value)
    return repr(float(value))


def entry(name: str, index: int, lang: str) -> str:
    """Entry `index` (0-based, as NumPy counts) of the array `name`, written as the learner's
    language writes it: y[3] in C, y(4) in Fortran (1-based)."""
    index = int(index)
    return f"{name}({index + 1})" if lang == "fortran" else f"{name}[{index}]"


def row_label(index: int, lang: str) -> str:
    """'row 3' in C, 'row 4 (1-based)' in Fortran, for the 0-based row `index`."""
    index = int(index)
    return f"row {index + 1} (1-based)" if lang == "fortran" else f"row {index}"


# --- the course's references out of the learner's reach while their answer runs -------------------

class ReferenceUsed(AssertionError):
    """The learner's code called the course's own implementation of the task it is checked on."""


def _blocked_code(*args, **kwargs):
    # runs with the globals of the blocked function's module: builtins only
    raise __import__("course.grading.exercise").grading.exercise.ReferenceUsed(
        "your code called one of the course's own functions that this check compares with: it is "
        "not available while your answer is checked; write the computation yourself")


def _blocker(name: str):
    def blocked(*args, **kwargs):
        raise ReferenceUsed(f"your code called the course's own {name}, the function this check "
                            f"compares with: it is not available while your answer is checked; "
                            f"write the computation yourself")
    return blocked


def _owner(function):
    """(object that holds the function as an attribute, attribute name): its module, or the class
    of a method (course.sparse.ELL.from_crs)."""
    holder = sys.modules[function.__module__]
    *path, name = function.__qualname__.split(".")
    for part in path:
        holder = getattr(holder, part)
    return holder, name


@functools.cache
def reference(function):
    """A private copy of a course function that `references_blocked` does not block: what a check
    computes its expected values with, or hands the learner's code in place of one of the
    learner's own earlier functions."""
    plain_function = getattr(function, "__func__", function)
    copy = types.FunctionType(plain_function.__code__, plain_function.__globals__,
                              plain_function.__name__, plain_function.__defaults__,
                              plain_function.__closure__)
    copy.__kwdefaults__ = plain_function.__kwdefaults__
    return copy.__get__(function.__self__) if hasattr(function, "__func__") else copy


def _functions_in(target) -> list:
    """The functions a module or a class defines (a class: its methods, static and class methods
    included, and __init__ and __call__; a module: its functions and its classes' methods); a
    function is itself."""
    if isinstance(target, types.ModuleType):
        found = []
        for value in vars(target).values():
            if getattr(value, "__module__", None) != target.__name__:
                continue                    # imported from elsewhere
            if isinstance(value, type):
                found += _functions_in(value)
            elif callable(value) and hasattr(getattr(value, "py_func", value), "__code__"):
                found.append(value)
        return found
    if isinstance(target, type):
        return [getattr(target, name) for name, value in vars(target).items()
                if isinstance(getattr(value, "__func__", value), types.FunctionType)
                and (not name.startswith("__") or name in ("__init__", "__call__"))]
    return [target]


@contextlib.contextmanager
def references_blocked(*functions):
    """While the learner's code runs, these course functions raise ReferenceUsed, however the
    learner reached them: by module attribute (assembly.fem1d_element), imported by name (from
    course.fem import fem1d_element), or as a method (sparse.ELL.from_crs). A module or a class
    stands for every function it defines, private helpers included: a learner who reaches behind
    the front door (Halo._update_p2p) is stopped too. A submission that returns the course's own
    answer then fails the check instead of scoring its points. So does `reference` itself (and so
    course_versions): an unblocked copy is for the checks only."""
    saved = []
    functions = list(dict.fromkeys(f for target in functions for f in _functions_in(target)))
    try:
        for function in (*functions, reference):
            # a method's function; a Numba dispatcher's Python function (for its name)
            plain_function = getattr(function, "__func__", function)
            python_function = getattr(plain_function, "py_func", plain_function)
            holder, name = _owner(python_function)
            code = getattr(plain_function, "__code__", None)
            saved.append((holder, name, holder.__dict__[name], plain_function, code))
            blocked = _blocker(f"{python_function.__module__}.{python_function.__qualname__}")
            setattr(holder, name, classmethod(blocked) if isinstance(
                holder.__dict__[name], classmethod) else blocked)
            if code is not None and not code.co_freevars:   # names bound earlier: swap the code
                plain_function.__code__ = _blocked_code.__code__
        yield
    finally:
        for holder, name, attribute, plain_function, code in reversed(saved):
            setattr(holder, name, attribute)
            if code is not None:
                plain_function.__code__ = code


@contextlib.contextmanager
def provided(namespace: dict, **functions):
    """The learner's earlier functions replaced, in the notebook's namespace, by working ones for
    the length of a check: a later task is graded on its own, and a mistake in an earlier task
    costs only that task's points."""
    missing = object()
    saved = {name: namespace.get(name, missing) for name in functions}
    namespace.update(functions)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is missing:
                namespace.pop(name, None)
            else:
                namespace[name] = value


def course_versions(key: str, *names: str) -> dict:
    """The course's working versions of the learner's functions `names` of exercise `key`, for
    `provided`: what a later task's check runs in place of the learner's earlier answers."""
    from ..fem import assembly, element

    fem1d_element = reference(assembly.fem1d_element)
    hex8_dshape, hex8_jacobian = reference(element.hex8_dshape), reference(element.hex8_jacobian)

    def jacobian_and_gradients(xyz8, xi, eta, zeta):
        jac = hex8_jacobian(xyz8, xi, eta, zeta)
        return np.linalg.det(jac), hex8_dshape(xi, eta, zeta) @ np.linalg.inv(jac)

    versions = {
        "01_fem1d": {"element_matrix": lambda h, cond: fem1d_element(h, cond, 0.0)[0],
                     "element_load": lambda h, qvol: fem1d_element(h, 1.0, qvol)[1]},
        "02_fem3d": {"shape_derivatives": hex8_dshape,
                     "jacobian_and_gradients": jacobian_and_gradients},
    }
    return {name: versions[key][name] for name in names}


def assert_close(got, expected, what: str, rtol: float = 1e-12, atol: float = 1e-12,
                 lang: str = "python") -> None:
    """got == expected (to rtol, atol), or AssertionError naming `what`, the shape, or the first
    wrong entry with both values, in the learner's index base."""
    expected = np.asarray(expected, dtype=float)
    try:
        got = np.asarray(got, dtype=float)
    except (TypeError, ValueError):
        raise AssertionError(f"{what}: returned {type(got).__name__}, not an array of numbers") \
            from None
    if got.shape != expected.shape:
        raise AssertionError(f"{what}: shape {got.shape}, expected {expected.shape}")
    wrong = ~np.isclose(got, expected, rtol=rtol, atol=atol)
    if wrong.any():
        index = np.unravel_index(int(np.argmax(wrong)), wrong.shape)
        where = ", ".join(str(i + _base(lang)) for i in index)
        name = f"({where})" if lang == "fortran" else f"[{where}]"
        raise AssertionError(f"{what}: entry {name} is {plain(got[index])}, expected "
                             f"{plain(expected[index])}")


def compiled_language(lang: str, task: int = 1) -> str:
    """lang, when the learner's TASKn_LANGUAGE names a compiled language (c, fortran);
    AssertionError saying which values the setting takes otherwise."""
    if lang not in _COMPILER:
        raise AssertionError(f"TASK{task}_LANGUAGE must be 'python', 'c' or 'fortran', "
                             f"not {lang!r}")
    return lang


def learner_source(source: str | Path, lang: str) -> Path:
    """The learner's C or Fortran file, once it exists with the suffix of its language."""
    if lang not in _COMPILER:
        raise ValueError(f"lang must be 'c' or 'fortran', not {lang!r}")
    source = Path(source)
    if not source.exists():
        raise AssertionError(f"{source} does not exist: run the %%writefile cell above first")
    if source.suffix != _SUFFIX[lang]:
        raise AssertionError(f"{source}: a {lang} source file must end in {_SUFFIX[lang]}")
    return source


def compile_kernel(source: str | Path, lang: str, link_course: bool = False,
                   openmp: bool = False, mpi: bool = False) -> Path:
    """Compile the learner's source file into a shared library; return its path. With
    link_course, the learner's code may call the kernels of the course library (libcourse_c or
    libcourse_fortran, e.g. fem3d_element). With openmp, the compiler obeys the OpenMP directives
    (-fopenmp, for gcc and gfortran alike); without, they are ignored. With mpi, the MPI compiler
    wrappers (mpicc, mpif90) compile it: the code may include mpi.h or use mpi_f08.

    Raises AssertionError with the compiler's messages if it does not compile."""
    source = learner_source(source, lang)
    compiler, flags = _COMPILER[lang]
    if mpi:
        compiler = _MPI_COMPILER[lang]
    if shutil.which(compiler) is None:
        raise AssertionError(f"the {lang} compiler {compiler} is not installed "
                             "(python -m course doctor says what to install)")
    link = []
    if link_course:
        native.ensure_built("release")
        lib_dir = native.build_dir("release") / "lib"
        link = [f"-L{lib_dir}", f"-lcourse_{lang}", f"-Wl,-rpath,{lib_dir}"]
    omp = ["-fopenmp"] if openmp else []
    text = source.read_bytes()
    digest = hashlib.sha1(text + lang.encode() + compiler.encode() + " ".join(link).encode()
                          + "".join(f" {flag}" for flag in omp).encode()).hexdigest()[:16]
    # this user's own folder (never a shared one: another user could have written the library)
    lib = cache.private_dir("exercise-builds") / f"{source.stem}-{digest}.so"
    if lib.exists():
        return lib
    with tempfile.TemporaryDirectory() as tmp:     # Fortran writes .mod files into the cwd
        tmp_lib = Path(tmp) / lib.name
        result = subprocess.run([compiler, *flags, *omp, "-O2", "-Wall", "-fPIC", "-shared",
                                 str(source.resolve()), "-o", str(tmp_lib), *link],
                                capture_output=True, text=True, cwd=tmp, timeout=120)
        if result.returncode != 0:
            raise AssertionError(f"{source} does not compile:\n{result.stderr.strip()}")
        shutil.move(tmp_lib, lib)
    return lib


# what a compiled function may return (run_isolated's `returns`): how its result comes back
RETURNS = {None: lambda saved: None, "int": int, "double": float}


@dataclass
class Run:
    """One call made by run_isolated: the function's result (an int or a float, as `returns` said;
    None for a void function), the arrays as the function left them (None for those not kept) and
    the seconds the call took."""
    result: int | float | None
    arrays: list
    seconds: float


def run_isolated(lib: Path, function: str, args: list, returns: str | None = None,
                 timeout: float = 10.0, threads: int | None = None, repeat: int = 1,
                 keep=None, env: dict | None = None) -> list[Run]:
    """Call `function(*args)` of the library `lib` `repeat` times in ONE child process, each time
    on fresh copies of the arguments; returns one Run per call.

    Python ints become C ints, floats C doubles, NumPy arrays pointers to their data. returns:
    what the function returns, "int" (a C int), "double" or None (void). threads:
    OMP_NUM_THREADS of the child (the OpenMP threads of the learner's parallel regions); None
    keeps the caller's environment. env: more variables for the child's environment. keep: the
    positions of the arrays to send back (default: all). A call that crashes, or runs past
    `timeout` seconds (all calls together), raises AssertionError naming the call."""
    if repeat < 1:
        raise ValueError(f"repeat must be at least 1, got {repeat}")
    if returns not in RETURNS:
        raise ValueError(f"returns must be one of {', '.join(map(repr, RETURNS))}, "
                         f"not {returns!r}")
    extra = {**(env or {}), **({} if threads is None else {"OMP_NUM_THREADS": str(int(threads))})}
    env = {**os.environ, **{k: str(v) for k, v in extra.items()}} if extra else None
    with_threads = "" if threads is None else f" with OMP_NUM_THREADS={int(threads)}"
    keep = range(len(args)) if keep is None else [int(i) for i in keep]
    with tempfile.TemporaryDirectory() as tmp:
        args_path, out_path = Path(tmp) / "in.npz", Path(tmp) / "out.npz"
        np.savez(args_path, *[np.asarray(a) for a in args])
        command = [sys.executable, "-c", _child_program(), str(lib), function, str(args_path),
                   str(out_path), str(returns), str(repeat), ",".join(map(str, keep))]
        try:
            result = subprocess.run(command, capture_output=True, text=True, timeout=timeout,
                                    env=env)
        except subprocess.TimeoutExpired as err:
            where = _which_run(err.stderr, repeat)
            raise AssertionError(f"{function}{with_threads} did not finish within {timeout:g} s"
                                 f"{where} (an endless loop? threads waiting for each other at "
                                 "different barriers?)") from None
        if result.returncode < 0:
            name = signal.Signals(-result.returncode).name
            raise AssertionError(f"{function}{with_threads} crashed with {name}"
                                 f"{_which_run(result.stderr, repeat)}"
                                 + (" (segmentation fault: an index out of bounds?)"
                                    if name == "SIGSEGV" else ""))
        if result.returncode != 0:
            raise AssertionError(f"{function} could not be called:\n{result.stderr.strip()}")
        with np.load(out_path) as out:
            return [Run(RETURNS[returns](out[f"result{k}"]),
                        [out[f"run{k}_{i}"] if f"run{k}_{i}" in out.files else None
                         for i in range(len(args))],
                        float(out[f"seconds{k}"]))
                    for k in range(repeat)]


def _which_run(stderr, repeat: int) -> str:
    """' in run k of n', from the last progress line the child wrote before it died."""
    if repeat == 1 or not stderr:
        return ""
    text = stderr.decode(errors="replace") if isinstance(stderr, bytes) else stderr
    started = re.findall(r"^course\.grading\.exercise: run (\d+)$", text, re.M)
    return f" in run {started[-1]} of {repeat}" if started else ""


def call_isolated(lib: Path, function: str, args: list, returns: str | None = None,
                  timeout: float = 10.0, threads: int | None = None
                  ) -> tuple[int | float | None, list[np.ndarray]]:
    """Call `function(*args)` of the library `lib` in a child process (see _child below).

    Python ints become C ints, floats C doubles, NumPy arrays pointers to their data. Returns the
    function's result (an int, a float or None: see run_isolated's `returns`) and the arrays as
    the function left them. threads: the OMP_NUM_THREADS of the child (None: the caller's
    environment)."""
    run = run_isolated(lib, function, args, returns=returns, timeout=timeout,
                       threads=threads)[0]
    return run.result, run.arrays


class ServedFunction:
    """A compiled function of scalars, called from Python with the same arguments, in ONE child
    process that serves call after call over a pipe: a check that calls it once per step of a CG
    (a hundred times) starts one process, not one per call (0.1 s each, as run_isolated would),
    and a crash or an endless loop still ends only the child.

    params: one letter per argument, "i" (a C int) or "d" (a double), passed by value; returns:
    "int" or "double". The numbers cross the pipe exactly (doubles as float.hex). A call that
    crashes the child or runs past `timeout` seconds raises AssertionError, and the next call
    starts a fresh child; close() (or the end of a with block, or garbage collection) ends it."""

    def __init__(self, lib: Path, function: str, params: str, returns: str,
                 timeout: float = 10.0):
        if set(params) - {"i", "d"} or returns not in ("int", "double"):
            raise ValueError(f"params are letters i and d, returns 'int' or 'double'; got "
                             f"{params!r}, {returns!r}")
        self.lib, self.function, self.params, self.returns = lib, function, params, returns
        self.timeout = timeout
        self._process = None

    def __call__(self, *args):
        if len(args) != len(self.params):
            raise TypeError(f"{self.function} takes {len(self.params)} arguments, "
                            f"got {len(args)}")
        answer = self._ask(" ".join(str(int(a)) if p == "i" else float(a).hex()
                                    for p, a in zip(self.params, args)))
        return int(answer) if self.returns == "int" else float.fromhex(answer.strip())

    def _ask(self, line: str) -> str:
        """Send one line of arguments to the child (started first if need be), return its answer
        line; AssertionError when it crashes or does not answer within the timeout."""
        process = self._process or self._start()
        with contextlib.suppress(BrokenPipeError):       # a dead child is reported below
            process.stdin.write(line + "\n")
            process.stdin.flush()
        ready, _, _ = select.select([process.stdout], [], [], self.timeout)
        answer = process.stdout.readline() if ready else None
        if answer:
            return answer
        if answer == "":                                  # the child ended: how?
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=self.timeout)
        self._stderr.seek(0)
        said = self._stderr.read().decode(errors="replace").strip().splitlines()
        self.close()
        if answer is None:
            raise AssertionError(f"{self.function} did not finish within {self.timeout:g} s "
                                 "(an endless loop?)")
        if process.returncode < 0:
            name = signal.Signals(-process.returncode).name
            raise AssertionError(f"{self.function} crashed with {name}" + (
                " (a segmentation fault: in Fortran, arguments declared without `value` are "
                "read as addresses)" if name == "SIGSEGV" else ""))
        raise AssertionError(f"{self.function} could not be called: "
                             f"{said[-1] if said else f'exit status {process.returncode}'}")

    def _start(self) -> subprocess.Popen:
        self._stderr = tempfile.TemporaryFile()      # unbounded: a chatty function never blocks
        self._process = subprocess.Popen(self._command(), stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, stderr=self._stderr, text=True)
        self._stop = weakref.finalize(self, _stop_child, self._process)
        return self._process

    def _command(self) -> list[str]:
        """The child's command line: the server program and what it serves."""
        return [sys.executable, "-c", _server_program(), str(self.lib), self.function,
                self.params, self.returns]

    def close(self) -> None:
        """End the child process (a later call starts a fresh one)."""
        if self._process is not None:
            self._stop()
            self._stderr.close()
            self._process = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _stop_child(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.kill()
    process.wait()
    for pipe in (process.stdin, process.stdout):
        with contextlib.suppress(OSError):
            pipe.close()


def course_library(lang: str) -> Path:
    """The path of the course's own kernel library of `lang` (built first if needed), to call
    its kernels with run_isolated, e.g. to time them beside the learner's."""
    if lang not in _COMPILER:
        raise ValueError(f"lang must be 'c' or 'fortran', not {lang!r}")
    variant = native.default_variant()
    native.ensure_built(variant)
    return native.build_dir(variant) / "lib" / native._LIBRARY[lang]


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
                worst = _worst(y, expected)
                raise AssertionError(
                    f"crs_matvec is wrong for a {n}x{n} matrix with {val.size} nonzeros "
                    f"(seed {seed}): {row_label(worst, lang)} gives {plain(y[worst])}, expected "
                    f"{plain(expected[worst])}")


def _worst(got, expected) -> int:
    """The 0-based index of the entry of `got` farthest from `expected`; a NaN or an infinity
    (a value never written, a division by zero) counts as the farthest."""
    diff = np.abs(np.asarray(got, dtype=float) - np.asarray(expected, dtype=float))
    diff[~np.isfinite(diff)] = np.inf
    return int(np.argmax(diff))


def distorted_box(nx: int, ny: int, nz: int, seed: int, shake: float = 0.2):
    """A box mesh whose inner nodes are moved at random by up to `shake` element sizes (every
    element stays valid), and a random nodal heat source: inputs the learner has not seen."""
    from ..fem.mesh import box_mesh

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
    from ..fem import assembly

    lib = compile_kernel(source, lang, link_course=True)
    base = _base(lang)                               # Fortran kernels take 1-based indices
    for seed in seeds:
        for nx, ny, nz in sizes:
            box, xyz, q = distorted_box(nx, ny, nz, seed)
            row_ptr, col_idx = assembly.fem3d_pattern(box)
            val_ref, rhs_ref = assembly.fem3d_assemble_numpy(box.elements, xyz, 1.5, q,
                                                        row_ptr, col_idx)
            args = [box.n_elem, box.elements + base, xyz, 1.5, q, row_ptr + base, col_idx + base,
                    np.zeros(col_idx.size), np.zeros(box.n_node)]
            status, arrays = call_isolated(lib, "fem3d_assemble", args, returns="int",
                                           timeout=timeout)
            case = f"a {nx} x {ny} x {nz} mesh with moved inner nodes (seed {seed})"
            assert status == 0, f"fem3d_assemble returned {status} for {case}, expected 0"
            for name, got, expected in (("val", arrays[7], val_ref), ("rhs", arrays[8], rhs_ref)):
                if not np.allclose(got, expected, rtol=1e-12, atol=1e-12):
                    worst = _worst(got, expected)
                    raise AssertionError(f"fem3d_assemble: {entry(name, worst, lang)} is "
                                         f"{plain(got[worst])}, expected {plain(expected[worst])}, "
                                         f"for {case}")
    # an inverted element: mirror the last element of a 2 x 1 x 1 mesh
    box = distorted_box(2, 1, 1, seed=0, shake=0.0)[0]
    xyz = box.xyz.copy()
    xyz[:, 0] = np.where(xyz[:, 0] > 0.75, 0.25, xyz[:, 0])    # x = 1 -> x = 0.25 < 0.5
    row_ptr, col_idx = assembly.fem3d_pattern(box)
    status, _ = call_isolated(lib, "fem3d_assemble",
                              [box.n_elem, box.elements + base, xyz, 1.0, np.ones(box.n_node),
                               row_ptr + base, col_idx + base, np.zeros(col_idx.size),
                               np.zeros(box.n_node)], returns="int", timeout=timeout)
    if lang == "fortran":
        inverted = "element 2 (1-based) is inverted, expected -2 (minus the element)"
    else:
        inverted = "element 1 is inverted, expected -2 = -(1 + 1)"
    assert status == -2, f"fem3d_assemble returned {status} for a mesh whose {inverted}"


# --- lecture 03_openmp: the ELL product and a CG in one parallel region, with several threads ---

ELL_WIDTH = native.ELL_WIDTH
# Threads that wait at a barrier sleep instead of spinning: with more threads than free cores (a
# busy grading machine, 8 threads on 2 cores) spinning threads hold the cores that the threads
# they wait for need, and a CG of a few hundred barriers takes seconds instead of milliseconds.
PASSIVE = {"OMP_WAIT_POLICY": "passive"}


def random_ell(n: int, seed: int, width: int = ELL_WIDTH):
    """A random off-diagonal part in ELL (course.sparse.ELL: `width` entries per row, short rows
    padded with the row's own index and 0.0), rows of every length from 0 to width (empty ones
    included, as far as n allows), a positive diagonal d and a random vector x."""
    from ..sparse import CRS, ELL

    rng = np.random.default_rng(seed)
    lengths = rng.integers(0, width + 1, n)
    lengths[: min(n, 2)] = [0, width][: min(n, 2)]       # an empty and a full row, always
    lengths = np.minimum(lengths, n - 1)
    cols = [np.sort(rng.choice(np.delete(np.arange(n), i), size=m, replace=False))
            for i, m in enumerate(lengths)]
    row_ptr = np.zeros(n + 1, dtype=INT)
    np.cumsum(lengths, out=row_ptr[1:])
    col_idx = np.concatenate(cols + [np.zeros(0)]).astype(INT)
    off = ELL.from_crs(CRS(row_ptr, col_idx, rng.uniform(-1.0, 1.0, col_idx.size)), width)
    return rng.uniform(1.0, 3.0, n), off.item, off.val, rng.standard_normal(n)


def _ell_cases(seeds, sizes, poisson):
    """(label, d, item, amat, x) of the random matrices and the Poisson problems."""
    from ..fem import fvm

    cases = []
    for seed in seeds:
        for n in sizes:
            cases.append((f"a random {n} x {n} matrix with rows of 0 to 6 off-diagonal entries "
                          f"(seed {seed})", *random_ell(n, seed)))
    for k, size in enumerate(poisson):
        problem = fvm.poisson(*size, fmt="ell")
        x = np.random.default_rng(1000 + k).standard_normal(problem.n)
        cases.append((f"the Poisson matrix of {' x '.join(map(str, size[:3]))} cells",
                      problem.d, problem.off.item, problem.off.val, x))
    return cases


# --- lecture 03_openmp, task 1: CRS to ELL, in Python, C or Fortran -----------------------------

CRS_TO_ELL_FILES = {"c": "crs_to_ell.c", "fortran": "crs_to_ell.f90"}   # the notebook's
UNWRITTEN = -999_999                # a compiled crs_to_ell's item_ell before it writes (amat: NaN)
GUARD = 8                           # entries past the room of each output, to catch writes past it


def compiled_crs_to_ell(source, lang: str, timeout: float = 10.0):
    """The learner's C or Fortran crs_to_ell (compiled here, called in a child process: a crash or
    an endless loop is an AssertionError) as a Python crs_to_ell(index, item, amat, width) that
    returns (item_ell, amat_ell), 0-based, as the Python answer does, and raises ValueError where
    the compiled function returns a negative value (a row does not fit). The compiled function:

        int crs_to_ell(int n, int width, const int *restrict index, const int *restrict item,
                       const double *restrict amat, int *restrict item_ell,
                       double *restrict amat_ell)

    item_ell and amat_ell have width * n entries, row after row (in Fortran, bind(C), scalars by
    value: item_ell(width, n), whose column i is row i; index, item and item_ell count from 1).
    Entries it leaves unwritten come back as UNWRITTEN (item_ell) and NaN (amat_ell); a write past
    the width * n entries is an AssertionError."""
    compiled_language(lang)
    lib = compile_kernel(source or CRS_TO_ELL_FILES[lang], lang)
    base = _base(lang)

    def crs_to_ell(index, item, amat, width):
        index = np.ascontiguousarray(index, dtype=INT)
        n, width = index.size - 1, int(width)
        room = max(n * width, 0)
        outputs = [np.full(room + GUARD, UNWRITTEN, dtype=INT), np.full(room + GUARD, np.nan)]
        args = [n, width, (index + base).astype(INT),
                (np.ascontiguousarray(item, dtype=INT) + base).astype(INT),
                np.ascontiguousarray(amat, dtype=REAL), *outputs]
        (run,) = run_isolated(lib, "crs_to_ell", args, returns="int", timeout=timeout,
                              keep=[5, 6])
        item_ell, amat_ell = run.arrays[5], run.arrays[6]
        for name, past in (("item_ell", item_ell[room:] != UNWRITTEN),
                           ("amat_ell", ~np.isnan(amat_ell[room:]))):
            if past.any():
                raise AssertionError(f"crs_to_ell with n = {n}, width = {width}: {name} has "
                                     f"width * n = {room} entries, and your function wrote past "
                                     f"them, into {entry(name, room + int(np.argmax(past)), lang)}")
        if run.result < 0:
            row = -run.result - 1
            which = row_label(row, lang) if row < n else "a row"
            raise ValueError(f"your crs_to_ell returned {run.result}: {which} has more than "
                             f"width = {width} entries")
        if run.result != 0:
            raise AssertionError(f"crs_to_ell with n = {n}, width = {width} returned "
                                 f"{run.result}: it returns 0 when every row fits, a negative "
                                 "value when one does not")
        item_ell = item_ell[:room]
        return np.where(item_ell == UNWRITTEN, UNWRITTEN, item_ell - base), amat_ell[:room]

    crs_to_ell.lang = lang
    return crs_to_ell


def check_crs_to_ell(crs_to_ell, example: bool = True, random=(), empty: bool = False,
                     poisson=()) -> None:
    """Check crs_to_ell(index, item, amat, width) -> (item_ell, amat_ell): a Python answer, or the
    callable of compiled_crs_to_ell (whose messages then speak C or Fortran: 1-based entries and
    columns in Fortran). example: the task's example (the Poisson matrix of 3 x 2 x 2 cells,
    width 6: row 0, its padding, the product; width 2 refused). random: (seed, n) pairs, random
    n x n matrices compared with course.sparse.ELL.from_crs with the width of the longest row and
    3 more, and refused with one less; empty: a 3 x 3 matrix without entries; poisson: Poisson
    problems (fvm.poisson's arguments), width 6. ELL.from_crs is blocked while the answer runs.
    AssertionError naming the first entry that is wrong."""
    from ..fem import fvm

    lang = getattr(crs_to_ell, "lang", "python")
    if example:
        _check_crs_to_ell_example(crs_to_ell, lang)
    for seed, n in random:
        ptr, col, val, _ = random_crs(n, min(1.0, 4.0 / n), seed)
        longest = int(np.diff(ptr).max())
        for width in (longest, longest + 3):
            _compare_with_course_ell(crs_to_ell, ptr, col, val, width,
                                     f"a random {n} x {n} matrix", lang)
        _assert_refused(crs_to_ell, ptr, col, val, longest - 1,
                        f"crs_to_ell of a random {n} x {n} matrix whose longest row has "
                        f"{longest} entries, with width {longest - 1}", lang)
    if empty:
        _compare_with_course_ell(crs_to_ell, np.zeros(4, dtype=INT), np.zeros(0, dtype=INT),
                                 np.zeros(0), 3, "a 3 x 3 matrix with no off-diagonal entries",
                                 lang)
    for size in poisson:
        off = fvm.poisson(*size).off
        _compare_with_course_ell(crs_to_ell, off.row_ptr, off.col_idx, off.val, ELL_WIDTH,
                                 f"the Poisson matrix of {' x '.join(map(str, size[:3]))} cells",
                                 lang)


def _ell_of(crs_to_ell, ptr, col, val, width, what: str):
    """The learner's (item_ell, amat_ell) as NumPy arrays; AssertionError if it refuses a matrix
    whose rows fit or returns something else than two arrays."""
    try:
        got = crs_to_ell(ptr.copy(), col.copy(), val.copy(), width)
    except ValueError as err:
        longest = int(np.diff(ptr).max(initial=0))
        raise AssertionError(f"crs_to_ell of {what}, width {width}: refused ({err}), but its "
                             f"longest row has {longest} entries") from None
    if not isinstance(got, (tuple, list)) or len(got) != 2:
        raise AssertionError(f"crs_to_ell of {what} must return (item_ell, amat_ell), "
                             f"not a {type(got).__name__}")
    return np.asarray(got[0]), np.asarray(got[1])


def _assert_refused(crs_to_ell, ptr, col, val, width, what: str, lang: str) -> ValueError:
    """The ValueError of crs_to_ell (the Python answer's, or a compiled answer's negative
    return value) for a width that a row does not fit; AssertionError if there is none."""
    try:
        crs_to_ell(ptr.copy(), col.copy(), val.copy(), width)
    except ValueError as err:
        return err
    refuse = "raise ValueError" if lang == "python" else "return a negative value"
    raise AssertionError(f"{what}: no refusal (a row that does not fit must {refuse})")


def _check_crs_to_ell_example(crs_to_ell, lang: str) -> None:
    """The task's example: the Poisson matrix of 3 x 2 x 2 cells, width 6."""
    from ..fem import fvm

    small = fvm.poisson(3, 2, 2)
    off, n, base = small.off, small.n, _base(lang)
    item_ell, amat_ell = _ell_of(crs_to_ell, off.row_ptr, off.col_idx, off.val, 6,
                                 "the Poisson matrix of 3 x 2 x 2 cells")
    if item_ell.shape != (6 * n,) or amat_ell.shape != (6 * n,):
        raise AssertionError("crs_to_ell must return two flat arrays of width * n entries")
    if not np.issubdtype(item_ell.dtype, np.integer):
        raise AssertionError(f"item_ell must hold integers (the columns), not {item_ell.dtype}")
    unwritten = np.flatnonzero((item_ell == UNWRITTEN) | np.isnan(amat_ell))
    if unwritten.size:
        raise AssertionError(f"crs_to_ell of the Poisson matrix of 3 x 2 x 2 cells, width 6: "
                             f"{_ell_entry('item_ell', int(unwritten[0]), 6, lang)} or its "
                             "amat_ell is never written: every slot, padding included, is set")
    row0 = "item_ell(1:6, 1)" if lang == "fortran" else "item_ell[0:6]"
    want = [c + base for c in (1, 3, 6, 0, 0, 0)]
    got = [int(c) + base for c in item_ell[:6]]
    if got != want:
        hint = " (0-based? in Fortran the columns count from 1)" \
            if lang == "fortran" and [c + 1 for c in got] == want else ""
        raise AssertionError(f"{row_label(0, lang)}: {row0} is {got}, expected {want}: the "
                             f"neighbours {want[0]}, {want[1]}, {want[2]} in CRS order, then "
                             f"padding with the row's own index {base}{hint}")
    if list(amat_ell[:6]) != [-1.0, -1.0, -1.0, 0.0, 0.0, 0.0]:
        raise AssertionError(f"{row_label(0, lang)}: {row0.replace('item', 'amat')} is "
                             f"[{', '.join(plain(a) for a in amat_ell[:6])}], expected "
                             "[-1.0, -1.0, -1.0, 0.0, 0.0, 0.0]: padding values are 0.0")
    outside = np.flatnonzero((item_ell < 0) | (item_ell >= n))
    if outside.size:
        k = int(outside[0])
        raise AssertionError(f"crs_to_ell of the Poisson matrix of 3 x 2 x 2 cells, width 6: "
                             f"{_ell_entry('item_ell', k, 6, lang)} is column "
                             f"{plain(item_ell[k] + base)}, outside the matrix")
    x = np.arange(1.0, n + 1.0)
    y = small.d * x + (amat_ell.reshape(-1, 6) * x[item_ell.reshape(-1, 6)]).sum(axis=1)
    if not np.allclose(y, small.full_crs().to_scipy() @ x):
        raise AssertionError("d x + the ELL product must give A x")
    err = _assert_refused(crs_to_ell, off.row_ptr, off.col_idx, off.val, 2,
                          "every cell has 3 or more neighbours: width 2", lang)
    print(f"width 2 is refused: {err}")


def _compare_with_course_ell(crs_to_ell, ptr, col, val, width: int, what: str,
                             lang: str) -> None:
    from ..sparse import CRS, ELL

    expected = ELL.from_crs(CRS(ptr, col, val), width)      # expected, first
    with references_blocked(ELL.from_crs):
        got = _ell_of(crs_to_ell, ptr, col, val, width, what)
    base = _base(lang)
    for name, values, want, shift in (("item_ell", got[0], expected.item, base),
                                      ("amat_ell", got[1], expected.val, 0)):
        if values.shape != want.shape:
            raise AssertionError(f"crs_to_ell of {what}, width {width}: {name} has shape "
                                 f"{values.shape}, expected {want.shape}")
        wrong = np.flatnonzero(values != want)
        if wrong.size:
            k = int(wrong[0])
            shown = "never written" if values[k] == UNWRITTEN or np.isnan(values[k]) \
                else plain(values[k] + shift)
            raise AssertionError(
                f"crs_to_ell of {what}, width {width}: {_ell_entry(name, k, width, lang)} is "
                f"{shown}, expected {plain(want[k] + shift)}"
                f"{_ell_hint(name, values, want, k, expected, lang)}")


def _ell_entry(name: str, k: int, width: int, lang: str) -> str:
    """Entry k of a flat ELL array with its row and slot, as the learner's language writes it."""
    row, slot = divmod(k, width)
    if lang == "fortran":
        return f"{name}({slot + 1}, {row + 1}) (row {row + 1}, slot {slot + 1})"
    return f"{name}[{k}] (row {row}, slot {slot})"


def _ell_hint(name: str, values, want, k: int, expected, lang: str) -> str:
    """Why entry k may be wrong: the layout, 0-based columns in Fortran, a padding slot."""
    n, width = expected.n, expected.width
    if n > 1 and width > 1 and np.array_equal(values, want.reshape(n, width).T.ravel()):
        layout = ("item_ell(width, n) holds row i in its column i: item_ell(m, i)"
                  if lang == "fortran" else "row i occupies the slots width*i .. width*i + width-1")
        return f" (slot by slot instead of row by row: {layout})"
    real = (np.arange(width)[None, :] < expected.row_length[:, None]).ravel()
    if lang == "fortran" and name == "item_ell" and np.array_equal(values[real] + 1, want[real]):
        return " (0-based columns? in Fortran they count from 1)"
    if not real[k]:
        own = "the row's own number i (1-based)" if lang == "fortran" else "the row's own index i"
        return f" (a padding slot: its column is {own}, its value 0.0)"
    return ""


def uses_openmp(lib: Path) -> bool:
    """Whether the compiled library opens an OpenMP parallel region (calls libgomp's
    GOMP_parallel*: what `omp parallel`, `omp parallel for` and `omp parallel do` compile to)."""
    return b"GOMP_parallel" in Path(lib).read_bytes()


def check_ell_matvec(source: str | Path, lang: str, seeds=(1, 2), sizes=(1, 7, 60),
                     poisson=((4, 3, 2),), threads=(1, 2, 3, 4), timeout: float = 10.0) -> None:
    """Check the learner's ell_matvec (signature of src_c/include/course.h: y = D x + A_off x,
    A_off in ELL with 6 entries per row, C 0-based, Fortran 1-based) compiled with OpenMP, run
    with each number of threads, against D x + SciPy on random matrices and Poisson matrices;
    and that it opens a parallel region. Raises AssertionError naming the first case that fails.

    All the matrices go to the kernel at once, as the diagonal blocks of one matrix (one child
    process per thread count); a wrong row is traced back to its matrix."""
    lib = compile_kernel(source, lang, openmp=True)
    cases = _ell_cases(seeds, sizes, poisson)
    starts = np.cumsum([0] + [c[1].size for c in cases])
    n = int(starts[-1])
    d = np.concatenate([c[1] for c in cases])
    item = np.concatenate([c[2] + start for c, start in zip(cases, starts)]).astype(INT)
    amat = np.concatenate([c[3] for c in cases])
    x = np.concatenate([c[4] for c in cases])
    rows = np.repeat(np.arange(n), ELL_WIDTH)
    expected = d * x + scipy.sparse.csr_matrix((amat, (rows, item)), shape=(n, n)) @ x
    base = _base(lang)                                  # Fortran kernels take 1-based indices
    y = np.full(n, np.nan)          # a kernel that writes nothing cannot pass by luck
    passed = []
    for t in threads:
        (run,) = run_isolated(lib, "ell_matvec", [n, d, item + base, amat, x, y],
                              threads=t, timeout=timeout, keep=[5], env=PASSIVE)
        got = run.arrays[5]
        wrong = ~np.isclose(got, expected, rtol=1e-12, atol=1e-12)
        if wrong.any():
            wrong_row = int(np.argmax(wrong))
            k = int(np.searchsorted(starts, wrong_row, side="right")) - 1
            hint = ""
            if passed:
                hint = (f" (it is right with OMP_NUM_THREADS={passed[0]}: look for a variable that "
                        "all threads share but each should have its own (private), or rows "
                        "that no thread computes)")
            raise AssertionError(
                f"ell_matvec with OMP_NUM_THREADS={t} is wrong for {cases[k][0]}: "
                f"{row_label(wrong_row - starts[k], lang)} gives {plain(got[wrong_row])}, "
                f"expected {plain(expected[wrong_row])}{hint}")
        passed.append(t)
    if not uses_openmp(lib):
        raise AssertionError("ell_matvec gives the right y but runs on one thread only: share the "
                             "rows among the threads with `#pragma omp parallel for` (C) or "
                             "`!$omp parallel do` (Fortran)")


def _poisson_size(size) -> tuple:
    """(nx, ny, nz) or (nx, ny, nz, dx, dy, dz) -> (nx, ny, nz, dx, dy, dz); unit cells if not
    given."""
    size = tuple(size)
    if len(size) == 3:
        return size + (1.0, 1.0, 1.0)
    if len(size) == 6:
        return size
    raise ValueError(f"a size is (nx, ny, nz) or (nx, ny, nz, dx, dy, dz), got {size!r}")


def _directives(text: str, lang: str) -> list[tuple[int, str]]:
    """The OpenMP directives of a C or Fortran source: (line number, the directive with its
    continuation lines joined), in lower case."""
    start, go_on = ("#pragma omp", "\\") if lang == "c" else ("!$omp", "&")
    lines = [line.strip().lower() for line in text.splitlines()]
    found, i = [], 0
    while i < len(lines):
        if lines[i].startswith(start):
            number, directive = i + 1, lines[i]
            while directive.endswith(go_on) and i + 1 < len(lines):
                i += 1
                directive = directive[:-1] + " " + lines[i].removeprefix("!$omp&")
            found.append((number, directive))
        i += 1
    return found


def unreproducible_reductions(source: str | Path, lang: str) -> list[int]:
    """The lines of the OpenMP loops in `source` that have a reduction and a dynamic or guided
    schedule: which thread adds which rows then changes from run to run, and so does the
    rounding of the sum."""
    text = Path(source).read_text(errors="replace")
    return [number for number, directive in _directives(text, lang)
            if "reduction" in directive and re.search(r"schedule\s*\(\s*(dynamic|guided)",
                                                      directive)]


def check_race_free_cg(source: str | Path, lang: str, sizes=((6, 5, 4),),
                       threads=(1, 2, 3, 4, 8), repeat: int = 10, eps: float = 1e-8,
                       timeout: float = 20.0) -> None:
    """Check the learner's cg_single_region (the signature of pcg_v3 in src_c/include/course.h
    and src_fortran/03_openmp/pcg.f90: C 0-based, Fortran 1-based columns), compiled with
    OpenMP, on Poisson problems: with each number of threads, `repeat` runs in one child process
    must all take as many iterations as the course's pcg_ladder v3 in the same language and give
    its solution (rtol 1e-10) with a relative residual <= eps; with 1 and 2 threads the runs must
    agree bit for bit (a race-free CG with static schedules and reductions does). Raises
    AssertionError naming the problem, the threads and the run."""
    from .. import solvers
    from ..fem import fvm

    lib = compile_kernel(source, lang, openmp=True)
    lines = unreproducible_reductions(source, lang)
    if lines:
        raise AssertionError(
            f"{Path(source).name}, line {', '.join(map(str, lines))}: a loop with a reduction "
            "and a dynamic or guided schedule. Which thread adds which rows then changes from run "
            "to run, and with it the rounding of the sum: the iterations and the solution change "
            "from run to run. Keep schedule(static) on the loops with a reduction, as the task "
            "says (a dynamic schedule is fine on a loop without one)")
    base = _base(lang)                                  # Fortran kernels take 1-based indices
    for size in sizes:
        nx, ny, nz, dx, dy, dz = _poisson_size(size)
        problem = fvm.poisson(nx, ny, nz, dx, dy, dz, fmt="ell")
        n = problem.n
        ref = solvers.pcg_ladder(problem, "v3", lang, tol=eps)
        max_iter = 10 * n
        args = [n, problem.d, problem.off.item + base, problem.off.val, problem.b, np.zeros(n),
                eps, max_iter, np.zeros(1)]
        what = f"the Poisson problem on {nx} x {ny} x {nz} cells"
        if (dx, dy, dz) != (1.0, 1.0, 1.0):
            what += f" of size {dx:g} x {dy:g} x {dz:g}"
        for t in threads:
            runs = run_isolated(lib, "cg_single_region", args, returns="int",
                                timeout=timeout, threads=t, repeat=repeat, keep=[5, 8],
                                env=PASSIVE)
            for k, run in enumerate(runs):
                case = f"{what} with OMP_NUM_THREADS={t}, run {k + 1} of {repeat}"
                x, relres = run.arrays[5], float(run.arrays[8][0])
                if run.result != ref.iterations:
                    raise AssertionError(
                        f"cg_single_region returned {run.result} iterations for {case}; the "
                        f"course's pcg_v3 needs {int(ref.iterations)} (relative residual "
                        f"{relres:.3g})")
                if not np.all(np.isfinite(x)) or \
                        np.linalg.norm(x - ref.x) > 1e-10 * np.linalg.norm(ref.x):
                    worst = _worst(x, ref.x)
                    raise AssertionError(
                        f"cg_single_region gives a different solution for {case}: "
                        f"{entry('x', worst, lang)} = {plain(x[worst])}, pcg_v3 gives "
                        f"{plain(ref.x[worst])}")
                if not relres <= eps or not np.isclose(relres, ref.relative_residual,
                                                       rtol=1e-4, atol=0.0):
                    raise AssertionError(
                        f"cg_single_region reports the relative residual {plain(relres)} for "
                        f"{case}; pcg_v3 reaches {plain(ref.relative_residual)} (tolerance "
                        f"{eps:g})")
                if t <= 2 and k > 0 and (run.result != runs[0].result or
                                         x.tobytes() != runs[0].arrays[5].tobytes() or
                                         relres != float(runs[0].arrays[8][0])):
                    raise AssertionError(
                        f"cg_single_region gives a different result in {case} than in run 1 "
                        f"(largest difference in x: {np.max(np.abs(x - runs[0].arrays[5])):.3g}): "
                        f"with {t} thread(s) a race-free version with schedule(static) loops "
                        "repeats itself bit for bit. Look for a race, or for a dynamic or guided "
                        "schedule on a loop with a reduction: its partial sums then depend on "
                        "which thread got which rows (keep schedule(static) there, as the task "
                        "says)")


def _child(lib: str, function: str, args_path: str, out_path: str, returns: str,
           repeat: str = "1", keep: str | None = None) -> None:
    """Runs in the child process: load the arguments, call the function `repeat` times (each on
    fresh copies of the arguments), save what each call left in the arrays listed in keep."""
    import ctypes

    with np.load(args_path) as saved:
        loaded = [saved[f"arr_{i}"] for i in range(len(saved.files))]
    keep = range(len(loaded)) if keep is None else [int(i) for i in keep.split(",") if i]
    fn = getattr(ctypes.CDLL(lib), function)
    fn.restype = {"int": ctypes.c_int, "double": ctypes.c_double}.get(returns)
    fn.argtypes = [ctypes.c_int if a.ndim == 0 and a.dtype.kind == "i" else
                   ctypes.c_double if a.ndim == 0 else ctypes.c_void_p for a in loaded]
    out = {}
    for k in range(int(repeat)):
        args = [a.copy() for a in loaded]
        values = [a.item() if a.ndim == 0 else a.ctypes.data_as(ctypes.c_void_p) for a in args]
        sys.stderr.write(f"course.grading.exercise: run {k + 1}\n")
        sys.stderr.flush()
        start = time.perf_counter()
        result = fn(*values)
        out[f"seconds{k}"] = time.perf_counter() - start
        out[f"result{k}"] = result if result is not None else 0
        out.update({f"run{k}_{i}": args[i] for i in keep})
    np.savez(out_path, **out)


def _serve(lib: str, function: str, params: str, returns: str) -> None:
    """Runs in ServedFunction's child process: call the function on each line of stdin (its
    arguments, doubles as float.hex), answer each on a line of the original stdout. What the
    function prints goes to stderr, so that it cannot garble the answers."""
    import ctypes
    import os

    answers = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    types = {"i": ctypes.c_int, "d": ctypes.c_double}
    fn = getattr(ctypes.CDLL(lib), function)
    fn.argtypes = [types[p] for p in params]
    fn.restype = types[returns[0]]
    for line in sys.stdin:
        result = fn(*[int(v) if p == "i" else float.fromhex(v)
                      for p, v in zip(params, line.split())])
        answers.write(f"{result}\n" if returns == "int" else f"{float(result).hex()}\n")
        answers.flush()


@functools.cache
def _server_program() -> str:
    """_serve as a program of its own (`python -c`): it imports nothing but ctypes."""
    return "import sys\n\n" + textwrap.dedent(inspect.getsource(_serve)) + \
        "\n_serve(*sys.argv[1:5])\n"


@functools.cache
def _child_program() -> str:
    """_child as a program of its own (`python -c`): it imports NumPy only, not the course
    package with SciPy and Numba, and so starts in a fraction of the time."""
    return ("import sys, time\nimport numpy as np\n\n"
            + textwrap.dedent(inspect.getsource(_child)) + "\n_child(*sys.argv[1:8])\n")


if __name__ == "__main__":
    _child(*sys.argv[1:8])
