"""Checks for tasks 1 to 3 of the exercise of lecture 02_fem3d, in Python, C or Fortran alike.

    check_shape_derivatives(shape_derivatives)                          task 1 in Python
    check_shape_derivatives(compiled_shape_derivatives("c"), "c")       task 1 in C, in a child
    check_jacobian_and_gradients(answer, lang)                          task 2
    check_element_matrix(answer, lang)                                  task 3

A C or Fortran answer is compiled and called in ONE child process that serves call after call
(ServedArrays), through a callable with the Python answer's signature: the same checks, on the
same cases, grade every language, and a crash or an endless loop fails the check instead of
killing the notebook's kernel. The arrays of the C answers are the Python ones, row by row; the
Fortran answers hold the same numbers column-major, as dN(3, 8), grad(3, 8), xyz8(3, 8) (column a
is local node a) and ke(8, 8). Each check raises AssertionError with a message that names entries
as the learner's language writes them: dN[1, 0] in Python, dN[3*1 + 0] in C, dN(1, 2) in Fortran.

A compiled task 2 or 3 is one file that stands alone: it computes the shape derivatives (and the
gradients) it needs itself, and no check ever calls a learner's earlier function.
"""

from __future__ import annotations

import functools
import inspect
import sys
import textwrap

import numpy as np

from ..fem import element
from .exercise import (ServedFunction, compile_kernel, compiled_language, course_versions,
                       plain, provided, reference, references_blocked)

# local node a of the reference cube [-1, 1]^3 sits at CORNERS[a] = (xi_a, eta_a, zeta_a)
CORNERS = np.array([[-1, -1, -1], [1, -1, -1], [1, 1, -1], [-1, 1, -1],
                    [-1, -1, 1], [1, -1, 1], [1, 1, 1], [-1, 1, 1]], dtype=float)
# the files the notebook's %%writefile cells write, per task
FILES = {name: {"c": f"{name}.c", "fortran": f"{name}.f90"}
         for name in ("shape_derivatives", "jacobian_and_gradients", "element_matrix")}
GUARD = 8           # entries past each output array, which must keep their NaN


# --- the compiled answers, served in a child process --------------------------------------------

class ServedArrays(ServedFunction):
    """A compiled function of doubles and arrays of doubles, served call after call by ONE child
    process (see exercise.ServedFunction: a crash or an endless loop is an AssertionError, the
    next call starts a fresh child).

    inputs: per input argument, 0 for a double passed by value or n > 0 for an array of n
    doubles (a pointer); outputs: the sizes of the arrays of doubles the function writes, passed
    after the inputs, each filled with NaN before the call (an entry never written stays NaN)
    and GUARD entries longer than its size; returns: "double" or None (void). A call returns
    (the result or None, [the output arrays]); AssertionError if the function wrote past one."""

    def __init__(self, lib, function: str, inputs: tuple, outputs: tuple, names: tuple,
                 returns: str | None = None, timeout: float = 10.0):
        if returns not in (None, "double") or not all(n > 0 for n in outputs):
            raise ValueError(f"returns is 'double' or None and outputs are sizes > 0, got "
                             f"{returns!r}, {outputs!r}")
        self.lib, self.function, self.timeout = lib, function, timeout
        self.inputs, self.outputs, self.names = tuple(inputs), tuple(outputs), tuple(names)
        self.returns = returns
        self._process = None

    def __call__(self, *args):
        if len(args) != len(self.inputs):
            raise TypeError(f"{self.function} takes {len(self.inputs)} inputs, got {len(args)}")
        values = []
        for size, arg in zip(self.inputs, args):
            arg = np.asarray(arg, dtype=float).ravel()
            if arg.size != max(size, 1):
                raise ValueError(f"an input of {self.function} has {arg.size} values, not "
                                 f"{max(size, 1)}")
            values += [float(v).hex() for v in arg]
        words = self._ask(" ".join(values)).split()
        result = float.fromhex(words.pop(0)) if self.returns else None
        arrays, start = [], 0
        for size, name in zip(self.outputs, self.names):
            array = np.array([float.fromhex(w) for w in words[start:start + size + GUARD]])
            start += size + GUARD
            if not np.all(np.isnan(array[size:])):
                raise AssertionError(f"{self.function} wrote past the end of {name}, which has "
                                     f"{size} entries")
            arrays.append(array[:size])
        return result, arrays

    def _command(self) -> list[str]:
        return [sys.executable, "-c", _arrays_server_program(), str(self.lib), self.function,
                ",".join(map(str, self.inputs)), ",".join(map(str, self.outputs)),
                str(self.returns), str(GUARD)]


def _serve_arrays(lib: str, function: str, inputs: str, outputs: str, returns: str,
                  guard: str) -> None:
    """Runs in ServedArrays' child process: call the function on each line of stdin (its inputs,
    doubles as float.hex), answer each on a line of the original stdout (the result, then every
    output array with its guard entries). What the function prints goes to stderr."""
    import ctypes
    import os

    answers = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sizes = [int(n) for n in inputs.split(",")]
    room = [int(n) + int(guard) for n in outputs.split(",")]
    pointer = ctypes.POINTER(ctypes.c_double)
    fn = getattr(ctypes.CDLL(lib), function)
    fn.argtypes = [ctypes.c_double if n == 0 else pointer for n in sizes] + [pointer] * len(room)
    fn.restype = ctypes.c_double if returns == "double" else None
    for line in sys.stdin:
        values = iter([float.fromhex(v) for v in line.split()])
        args = [next(values) if n == 0 else (ctypes.c_double * n)(*[next(values) for _ in
                                                                  range(n)]) for n in sizes]
        out = [(ctypes.c_double * n)(*[float("nan")] * n) for n in room]
        result = fn(*args, *out)
        words = [float(result).hex()] if returns == "double" else []
        answers.write(" ".join(words + [float(v).hex() for array in out for v in array]) + "\n")
        answers.flush()


@functools.cache
def _arrays_server_program() -> str:
    """_serve_arrays as a program of its own (`python -c`): it imports nothing but ctypes."""
    return "import sys\n\n" + textwrap.dedent(inspect.getsource(_serve_arrays)) + \
        "\n_serve_arrays(*sys.argv[1:7])\n"


class CompiledShapeDerivatives(ServedArrays):
    """The learner's compiled shape_derivatives as shape_derivatives(xi, eta, zeta) -> dN (8 x 3).

        void shape_derivatives(double xi, double eta, double zeta, double *restrict dN)
        dN[3*a + r] = dN_a / dxi_r in C; dN(r, a), dN(3, 8), in Fortran (the same memory)"""

    def __call__(self, xi, eta, zeta):
        return super().__call__(xi, eta, zeta)[1][0].reshape(8, 3)


class CompiledJacobianAndGradients(ServedArrays):
    """The learner's compiled jacobian_and_gradients as jacobian_and_gradients(xyz8, xi, eta,
    zeta) -> (det_J, grad (8 x 3)).

        double jacobian_and_gradients(const double *restrict xyz8, double xi, double eta,
                                      double zeta, double *restrict grad)
        xyz8[3*a + d], grad[3*a + d] in C; xyz8(d, a), grad(d, a), (3, 8), in Fortran"""

    def __call__(self, xyz8, xi, eta, zeta):
        det_j, (grad,) = super().__call__(xyz8, xi, eta, zeta)
        return det_j, grad.reshape(8, 3)


class CompiledElementMatrix(ServedArrays):
    """The learner's compiled element_matrix as element_matrix(xyz8, cond) -> ke (8 x 8).

        void element_matrix(const double *restrict xyz8, double cond, double *restrict ke)
        ke[8*a + b] in C; ke(a, b), ke(8, 8), in Fortran (column-major: the grader transposes)"""

    def __init__(self, *args, lang: str = "c", **kwargs):
        super().__init__(*args, **kwargs)
        self.lang = lang

    def __call__(self, xyz8, cond):
        ke = super().__call__(xyz8, cond)[1][0].reshape(8, 8)
        return ke.T if self.lang == "fortran" else ke


def compiled_shape_derivatives(lang: str, source=None, timeout: float = 10.0):
    """The learner's C or Fortran shape_derivatives from `source` (default: the file of the
    notebook's %%writefile cell), compiled, as a Python shape_derivatives for
    check_shape_derivatives; every call runs in one child process."""
    return CompiledShapeDerivatives(*_compiled(1, "shape_derivatives", lang, source),
                                    (0, 0, 0), (24,), ("dN",), None, timeout)


def compiled_jacobian_and_gradients(lang: str, source=None, timeout: float = 10.0):
    """The learner's C or Fortran jacobian_and_gradients, compiled, as a Python one for
    check_jacobian_and_gradients; every call runs in one child process."""
    return CompiledJacobianAndGradients(*_compiled(2, "jacobian_and_gradients", lang, source),
                                        (24, 0, 0, 0), (24,), ("grad",), "double", timeout)


def compiled_element_matrix(lang: str, source=None, timeout: float = 10.0):
    """The learner's C or Fortran element_matrix, compiled, as a Python one for
    check_element_matrix; every call runs in one child process."""
    return CompiledElementMatrix(*_compiled(3, "element_matrix", lang, source), (24, 0), (64,),
                                 ("ke",), None, timeout, lang=lang)


def _compiled(task: int, name: str, lang: str, source) -> tuple:
    """(library, function name) of the learner's file for task `task`, compiled."""
    compiled_language(lang, task)
    return compile_kernel(source or FILES[name][lang], lang), name


# --- entries in the learner's language ------------------------------------------------------------

def _entry(name: str, i: int, j: int, columns: int, lang: str) -> str:
    """Entry (i, j) (0-based) of the array `name` of `columns` columns: ke[0, 1] in Python,
    ke[8*0 + 1] in C; in Fortran dN(j+1, i+1) for the 8 x 3 arrays, stored as (3, 8), and
    ke(i+1, j+1)."""
    if lang == "fortran":
        return f"{name}({j + 1}, {i + 1})" if columns == 3 else f"{name}({i + 1}, {j + 1})"
    return f"{name}[{columns}*{i} + {j}]" if lang == "c" else f"{name}[{i}, {j}]"


def _of_node(name: str, a: int, lang: str) -> str:
    """The 3 values of local node a (0-based) in the 8 x 3 array `name`."""
    if lang == "fortran":
        return f"{name}(:, {a + 1})"
    return f"{name}[3*{a} .. 3*{a} + 2]" if lang == "c" else f"{name}[{a}]"


def _array(got, shape: tuple, what: str) -> np.ndarray:
    """got as an array of floats of this shape, or AssertionError that says what it is."""
    try:
        array = np.asarray(got, dtype=float)
    except (TypeError, ValueError):
        raise AssertionError(f"{what} must be an array of numbers, not "
                             f"{type(got).__name__}") from None
    if array.shape != shape:
        raise AssertionError(f"{what} must be a {shape[0]} x {shape[1]} array, not of shape "
                             f"{array.shape}")
    return array


def _layout(got: np.ndarray, expected: np.ndarray, name: str, what: str, lang: str,
            rtol: float, atol: float) -> None:
    """AssertionError if a compiled answer wrote the right 8 x 3 array column by column (C:
    name[a + 8*r]; Fortran: declared name(8, 3)) instead of as the task says."""
    if lang == "python" or got.shape != (8, 3):
        return
    if np.allclose(got.ravel().reshape(3, 8).T, expected, rtol=rtol, atol=atol):
        k = "r" if name == "dN" else "d"               # a reference or a physical direction
        how = (f"as {name}(8, 3), {name}(a, {k}); it is {name}(3, 8), with {name}({k}, a) for "
               f"node a" if lang == "fortran" else
               f"column by column, {name}[a + 8*{k}]; it is {name}[3*a + {k}], row by row")
        raise AssertionError(f"{what}: the right numbers in the wrong places: you wrote {name} "
                             f"{how}")


def _compare(got: np.ndarray, expected: np.ndarray, name: str, what: str, lang: str,
             rtol: float, atol: float) -> None:
    wrong = ~np.isclose(got, expected, rtol=rtol, atol=atol)
    if wrong.any():
        _layout(got, expected, name, what, lang, rtol, atol)
        i, j = np.argwhere(wrong)[0]
        never = " (NaN: an entry never written?)" if np.isnan(got[i, j]) else ""
        raise AssertionError(f"{what}: {_entry(name, i, j, got.shape[1], lang)} is "
                             f"{plain(got[i, j])}, expected {plain(expected[i, j])}{never}")


# --- task 1 --------------------------------------------------------------------------------------

def check_shape_derivatives(shape_derivatives, lang: str = "python", points: int = 0,
                            seed: int = 3011) -> None:
    """At the centre and at corner 1: an 8 x 3 array whose columns add up to 0, with the values
    the formula gives there; then at `points` random points of the cube (from `seed`) the values
    of the course's derivatives, to 1e-12. The course's own shape derivatives are blocked while
    the answer runs."""
    hex8_dshape = reference(element.hex8_dshape)
    where = np.random.default_rng(seed).uniform(-1.0, 1.0, size=(points, 3))
    with references_blocked(element.hex8_dshape, element.hex8_jacobian):
        centre = shape_derivatives(0.0, 0.0, 0.0)
        corner = shape_derivatives(1.0, -1.0, -1.0)
        got = [shape_derivatives(*p) for p in where]
    dn = _array(centre, (8, 3), "shape_derivatives(0, 0, 0)")
    _layout(dn, hex8_dshape(0.0, 0.0, 0.0), "dN", "shape_derivatives(0, 0, 0)", lang, 1e-12,
            1e-14)
    never = " (NaN: entries never written?)" if np.isnan(dn).any() else ""
    assert np.allclose(dn.sum(axis=0), 0.0), \
        f"the N_a add up to 1 everywhere, so their derivatives add up to 0{never}"
    assert np.allclose(dn[6], 0.125), \
        (f"at the centre, the derivatives of the N_a of the corner (1, 1, 1), "
         f"{_of_node('dN', 6, lang)}, are all 1/8; yours are "
         f"{', '.join(plain(v) for v in dn[6])}")
    corner = _array(corner, (8, 3), "shape_derivatives(1, -1, -1)")
    assert np.allclose(corner[1], [0.5, -0.5, -0.5]), \
        (f"at its own corner (1, -1, -1), N_1 = 1 and falls to 0 along each edge of length 2 "
         f"that leaves it: {_of_node('dN', 1, lang)} = 0.5, -0.5, -0.5, not "
         f"{', '.join(plain(v) for v in corner[1])}")
    for p, dn in zip(where, got):
        call = "shape_derivatives({:.3f}, {:.3f}, {:.3f})".format(*p)
        _compare(_array(dn, (8, 3), call), hex8_dshape(*p), "dN", call, lang, 1e-12, 1e-14)


# --- task 2 --------------------------------------------------------------------------------------

def _det_and_grad(answer, xyz8, p) -> tuple:
    """What jacobian_and_gradients(xyz8, *p) returned, as (det_J, grad), or AssertionError."""
    got = answer(xyz8, *p)
    try:
        det_j, grad = got
        return float(det_j), grad
    except (TypeError, ValueError):
        raise AssertionError(f"jacobian_and_gradients must return (det_J, grad): two values, "
                             f"not {type(got).__name__} {str(got)[:60]}") from None


def check_jacobian_and_gradients(jacobian_and_gradients, lang: str = "python",
                                 namespace: dict | None = None, distorted: int = 0,
                                 seed: int = 3012) -> None:
    """On a 2 x 3 x 4 box element: det J = 3, an 8 x 3 grad whose columns add up to 0 and with
    sum_a x_a (grad N_a)^T = I; then on `distorted` random distorted elements (from `seed`) at
    random points, the course's det J (to 1e-12) and gradients (to 1e-10). namespace: the
    notebook's globals, where the course's shape_derivatives stands in for the learner's while
    a Python answer runs (graded on its own). The course's Jacobian is blocked meanwhile."""
    hex8_dshape, hex8_jacobian = reference(element.hex8_dshape), reference(element.hex8_jacobian)
    box = 0.5 * (CORNERS + 1.0) * [2.0, 3.0, 4.0]
    rng = np.random.default_rng(seed)
    cases = []
    for _ in range(distorted):
        xyz = 0.5 * (CORNERS + 1.0) + rng.uniform(-0.15, 0.15, size=(8, 3))
        p = rng.uniform(-1.0, 1.0, size=3)
        jac = hex8_jacobian(xyz, *p)
        cases.append((xyz, p, np.linalg.det(jac), hex8_dshape(*p) @ np.linalg.inv(jac)))
    earlier = course_versions("02_fem3d", "shape_derivatives")
    with provided(namespace if namespace is not None else {}, **earlier), \
            references_blocked(element.hex8_jacobian):
        det_j, grad = _det_and_grad(jacobian_and_gradients, box, (0.3, -0.2, 0.1))
        got = [_det_and_grad(jacobian_and_gradients, xyz, p) for xyz, p, _, _ in cases]
    corners = {"c": " (corner a is xyz8[3*a] .. xyz8[3*a + 2])",
               "fortran": " (corner a is xyz8(:, a), in xyz8(3, 8))"}.get(lang, "")
    assert np.isclose(det_j, 1.0 * 1.5 * 2.0), \
        (f"on a 2 x 3 x 4 box{corners}, J = diag(2/2, 3/2, 4/2) and det J = 3, not "
         f"{plain(det_j)}")
    grad = _array(grad, (8, 3), "grad")
    _layout(grad, hex8_dshape(0.3, -0.2, 0.1) / [1.0, 1.5, 2.0], "grad", "grad on the box", lang,
            1e-10, 1e-12)
    never = " (NaN: entries never written?)" if np.isnan(grad).any() else ""
    assert np.allclose(grad.sum(axis=0), 0.0), f"the gradients add up to zero{never}"
    assert np.allclose(box.T @ grad, np.eye(3)), \
        "sum_a x_a (grad N_a)^T is the identity: on a box, grad N_a = dN_a / (dx/2, dy/2, dz/2)"
    for (xyz, p, det, expected), (det_j, grad) in zip(cases, got):
        where = "a distorted element at ({:.3f}, {:.3f}, {:.3f})".format(*p)
        assert np.isclose(det_j, det, rtol=1e-12, atol=0.0), \
            f"det J of {where}: {plain(det_j)}, expected {plain(det)}"
        _compare(_array(grad, (8, 3), f"grad of {where}"), expected, "grad", f"grad of {where}",
                 lang, 1e-10, 1e-12)


# --- task 3 --------------------------------------------------------------------------------------

def check_element_matrix(element_matrix, lang: str = "python", namespace: dict | None = None,
                         distorted: int = 0, seed: int = 3013) -> None:
    """On the unit cube with cond = 1: an 8 x 8 symmetric matrix with zero row sums, k_00 = 1/3
    and one zero eigenvalue; then on `distorted` random distorted elements (from `seed`) with
    random conductivities the course's element matrix, to 1e-10. namespace: the notebook's
    globals, where the course's shape_derivatives and jacobian_and_gradients stand in for the
    learner's while a Python answer runs. The course's element matrices are blocked meanwhile."""
    hex8_element = reference(element.hex8_element)
    cube = 0.5 * (CORNERS + 1.0)
    rng = np.random.default_rng(seed)
    cases = []
    for _ in range(distorted):
        xyz = 0.5 * (CORNERS + 1.0) * rng.uniform(0.2, 3.0, 3) + rng.uniform(-0.1, 0.1, (8, 3))
        cond = rng.uniform(0.1, 10.0)
        cases.append((xyz, cond, hex8_element(xyz, cond, np.zeros(8))[0]))
    earlier = course_versions("02_fem3d", "shape_derivatives", "jacobian_and_gradients")
    with provided(namespace if namespace is not None else {}, **earlier), \
            references_blocked(element.hex8_element, element.hex8_element_numpy,
                               element.hex8_element_numba, element.hex8_element_into):
        ke = element_matrix(cube, 1.0)
        got = [element_matrix(xyz, cond) for xyz, cond, _ in cases]
    ke = _array(ke, (8, 8), "element_matrix")
    never = " (NaN: entries never written?)" if np.isnan(ke).any() else ""
    assert np.allclose(ke, ke.T), f"the element matrix is symmetric{never}"
    assert np.allclose(ke.sum(axis=1), 0.0), "rows sum to zero: a constant T carries no heat"
    assert np.isclose(ke[0, 0], 1.0 / 3.0), \
        (f"on the unit cube, k_00 = lambda / 3: {_entry('ke', 0, 0, 8, lang)} = "
         f"{plain(ke[0, 0])}, expected 1/3")
    assert np.isclose(np.linalg.eigvalsh(ke)[0], 0.0, atol=1e-12), \
        "one zero eigenvalue (constants), and no negative one"
    for k, ((xyz, cond, expected), ke) in enumerate(zip(cases, got)):
        what = f"element_matrix of distorted element {k + 1} of {len(cases)} (cond = {cond:.3g})"
        _compare(_array(ke, (8, 8), what), expected, "ke", what, lang, 1e-10, 1e-12)
