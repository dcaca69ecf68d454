"""Checks for tasks 1 and 2 of the exercise of lecture 01_fem1d, in Python, C or Fortran alike.

    check_element(python_element(element_matrix, element_load), cases)   task 1 in Python
    check_element(compiled_element("c"), cases)                          task 1 in C or Fortran
    check_assemble(assemble, meshes, cond, qvol)                         task 2 in Python
    check_assemble(compiled_assemble("fortran"), meshes, cond, qvol)     task 2 in C or Fortran

Each raises AssertionError with a message for the learner when something is wrong. A C or Fortran
answer is compiled (course.grading.exercise.compile_kernel) and every call runs in a child process
(call_isolated), so that a crash or an endless loop fails the check instead of killing the
notebook's kernel; its messages name the entries as the learner's arrays hold them (ke[1] in C,
ke(1, 2) and K(4, 3) in Fortran). The compiled assembly is linked with the course library and may
call the course's fem1d_element: like the Python assembly, which is checked with the course's
element functions in place of the learner's, it does not depend on the learner's task 1.
"""

from __future__ import annotations

import numpy as np

from ..fem import assembly
from .exercise import (assert_close, call_isolated, compile_kernel, compiled_language,
                       course_versions, plain, provided, references_blocked)

ELEMENT_FILES = {"c": "fem1d_element.c", "fortran": "fem1d_element.f90"}     # the notebook's
ASSEMBLE_FILES = {"c": "fem1d_assemble.c", "fortran": "fem1d_assemble.f90"}

# the course's element and assembly, switched off while the learner's answer runs
ELEMENT_REFERENCES = (assembly.fem1d_element, assembly.fem1d_element_numpy,
                      assembly.fem1d_element_numba)
ASSEMBLE_REFERENCES = (assembly.fem1d_assemble, assembly.fem1d_assemble_numpy,
                       assembly.fem1d_assemble_numba)


# --- task 1: the element matrix and load ---------------------------------------------------------

def random_element_cases(seed: int, count: int) -> list[tuple[float, float, float]]:
    """`count` random (h, cond, qvol), each between 0.01 and 5."""
    rng = np.random.default_rng(seed)
    return [tuple(float(v) for v in row) for row in rng.uniform(0.01, 5.0, size=(count, 3))]


def python_element(element_matrix, element_load):
    """The learner's two Python functions as one element(h, cond, qvol) -> (ke, fe)."""
    def element(h, cond, qvol):
        return element_matrix(h, cond), element_load(h, qvol)
    element.lang = "python"
    return element


def compiled_element(lang: str, source=None, timeout: float = 10.0):
    """The learner's fem1d_element in C (`void fem1d_element(double h, double cond, double qvol,
    double *restrict ke, double *restrict fe)`, ke 2 x 2 row by row) or Fortran (the same with
    bind(C), `value` scalars, ke(2, 2), fe(2)), from `source` (default: what the notebook's
    %%writefile cell writes), compiled, as element(h, cond, qvol) -> (ke, fe) for check_element:
    ke as the learner's array holds it (4 numbers in C, 2 x 2 in Fortran), each call in a child
    process."""
    lang = compiled_language(lang, 1)
    lib = compile_kernel(source or ELEMENT_FILES[lang], lang)

    def element(h, cond, qvol):
        _, arrays = call_isolated(lib, "fem1d_element", [float(h), float(cond), float(qvol),
                                                         np.zeros(4), np.zeros(2)],
                                  timeout=timeout)
        ke = arrays[3] if lang == "c" else arrays[3].reshape((2, 2), order="F")
        return ke, arrays[4]
    element.lang = lang
    return element


def check_element(element, cases) -> None:
    """element(h, cond, qvol) -> (ke, fe) (python_element or compiled_element) against the
    course's fem1d_element on every (h, cond, qvol) of cases: first what every element matrix
    and load must satisfy (symmetry, rows that sum to zero, k_11 = cond / h, a load that sums to
    qvol h), then every entry, to 1e-12 relative."""
    lang = getattr(element, "lang", "python")
    expected = [assembly.fem1d_element(h, cond, qvol) for h, cond, qvol in cases]
    with references_blocked(*ELEMENT_REFERENCES, *ASSEMBLE_REFERENCES):
        got = [element(h, cond, qvol) for h, cond, qvol in cases]
    for (h, cond, qvol), (ke, fe), (gke, gfe) in zip(cases, expected, got):
        if lang == "python":
            matrix, load = f"element_matrix(h={h:.4g}, cond={cond:.4g})", \
                f"element_load(h={h:.4g}, qvol={qvol:.4g})"
        else:
            call = f"fem1d_element(h={h:.4g}, cond={cond:.4g}, qvol={qvol:.4g})"
            matrix, load = f"{call}: ke", f"{call}: fe"
        k = _element_matrix(gke, matrix, lang)
        if not np.isclose(k[0, 1], k[1, 0], rtol=1e-12, atol=1e-12):
            raise AssertionError(f"{matrix}: the element matrix must be symmetric (k_12 = k_21), "
                                 f"got k_12 = {plain(k[0, 1])}, k_21 = {plain(k[1, 0])}")
        if not np.allclose(k.sum(axis=1), 0.0, rtol=0.0, atol=1e-12 * np.abs(k).max()):
            raise AssertionError(f"{matrix}: every row must sum to zero (a constant temperature "
                                 f"carries no heat), got the row sums {plain(k[0].sum())} and "
                                 f"{plain(k[1].sum())}")
        if not np.isclose(k[0, 0], cond / h, rtol=1e-12, atol=1e-12):
            raise AssertionError(f"{matrix}: k_11 is {plain(k[0, 0])}, expected cond / h = "
                                 f"{plain(cond / h)}")
        _check_load(gfe, fe, load, qvol * h)
        assert_close(gke, np.ravel(ke) if lang == "c" else ke, matrix, lang=lang)
        assert_close(gfe, fe, load, lang=lang)


def _element_matrix(got, what: str, lang: str) -> np.ndarray:
    """The learner's element matrix as a 2 x 2 array of numbers (k[a, b] = k_ab)."""
    try:
        k = np.asarray(got, dtype=float)
    except (TypeError, ValueError):
        raise AssertionError(f"{what}: returned {type(got).__name__}, not a 2x2 array of "
                             "numbers") from None
    if lang == "python" and k.shape != (2, 2):
        raise AssertionError(f"{what}: element_matrix must return a 2x2 array, got the shape "
                             f"{k.shape}")
    return k.reshape(2, 2)


def _check_load(got, expected, what: str, total: float) -> None:
    try:
        f = np.asarray(got, dtype=float)
    except (TypeError, ValueError):
        raise AssertionError(f"{what}: returned {type(got).__name__}, not 2 numbers") from None
    if f.shape != np.shape(expected):
        raise AssertionError(f"{what}: 2 load entries expected, got the shape {f.shape}")
    if not np.isclose(f.sum(), total, rtol=1e-12, atol=1e-12):
        raise AssertionError(f"{what}: the load adds up to {plain(f.sum())}, expected qvol * h "
                             f"= {plain(total)} (each node gets half of it)")


# --- task 2: the assembly ------------------------------------------------------------------------

def random_meshes(seed: int, sizes) -> list[np.ndarray]:
    """Non-uniform meshes of [0, 2]: sorted random node coordinates, one mesh per size."""
    rng = np.random.default_rng(seed)
    return [np.sort(rng.uniform(0.0, 2.0, size=n)) for n in sizes]


def compiled_assemble(lang: str, source=None, timeout: float = 10.0):
    """The learner's fem1d_assemble in C (`void fem1d_assemble(int n, const double *restrict x,
    double cond, double qvol, double *restrict K, double *restrict f)`, K n x n row by row) or
    Fortran (the same with bind(C), `value` scalars, x(n), K(n, n), f(n)), from `source`
    (default: what the notebook's %%writefile cell writes), compiled and linked with the course
    library (it may call the course's fem1d_element), as assemble(x, cond, qvol) -> (K, f) with
    the Python answer's signature: K and f start as zeros, each call runs in a child process."""
    lang = compiled_language(lang, 2)
    lib = compile_kernel(source or ASSEMBLE_FILES[lang], lang, link_course=True)

    def assemble(x, cond, qvol):
        x = np.asarray(x, dtype=float)
        n = x.size
        _, arrays = call_isolated(lib, "fem1d_assemble", [n, x, float(cond), float(qvol),
                                                          np.zeros(n * n), np.zeros(n)],
                                  timeout=timeout)
        return arrays[4].reshape((n, n), order="C" if lang == "c" else "F"), arrays[5]
    assemble.lang = lang
    return assemble


def check_assemble(assemble, meshes, cond: float, qvol: float, namespace: dict | None = None
                   ) -> None:
    """assemble(x, cond, qvol) -> (K dense, f) (the learner's Python function or
    compiled_assemble) against the course's assembly on every mesh x, to 1e-12 relative; the
    course's assemblies are switched off while it runs. namespace: the notebook's globals, where
    the course's element_matrix and element_load replace the learner's while it runs (a compiled
    assembly calls the course's fem1d_element), so that a mistake in task 1 costs nothing here."""
    lang = getattr(assemble, "lang", "python")
    name = "assemble" if lang == "python" else "fem1d_assemble"
    elements = course_versions("01_fem1d", "element_matrix", "element_load")
    for x in meshes:
        x = np.asarray(x, dtype=float)
        matrix, load = assembly.fem1d_assemble(x, cond, qvol)
        with provided({} if namespace is None else namespace, **elements), \
                references_blocked(*ASSEMBLE_REFERENCES):
            got = assemble(x, cond, qvol)
        if not isinstance(got, tuple) or len(got) != 2:
            raise AssertionError(f"{name} must return the pair K, f, got {type(got).__name__}")
        spacing = "uniform" if np.allclose(np.diff(x), x[1] - x[0]) else "non-uniform"
        where = f"{name}(x, cond={cond:g}, qvol={qvol:g}) on a mesh of {x.size} nodes ({spacing})"
        _check_assembled(got[0], matrix.to_dense(), f"{where}: K", lang, x, cond, qvol)
        _check_assembled(got[1], load, f"{where}: f", lang, x, cond, qvol)


def _check_assembled(got, expected: np.ndarray, what: str, lang: str, x: np.ndarray,
                     cond: float, qvol: float) -> None:
    """assert_close, with a hint where the answer is one of the typical mistakes: nothing added,
    the last element left out, every element's entries written over those of the element before
    instead of added to them."""
    try:
        assert_close(got, expected, what, lang=lang)
    except AssertionError as err:
        if np.shape(got) != expected.shape:
            raise
        got = np.asarray(got, dtype=float)
        which = 0 if expected.ndim == 2 else 1
        if not np.any(got):
            hint = "nothing was added to it"
        elif np.allclose(got, _mistaken(x, cond, qvol, elements=x.size - 2)[which]):
            hint = ("the last element is left out: there are n - 1 elements, element e joins "
                    "the nodes e and e + 1")
        elif np.allclose(got, _mistaken(x, cond, qvol, added=False)[which]):
            hint = ("each element's entries are written over those of the element before: an "
                    "inner node collects the entries of its two elements, add them")
        else:
            raise
        raise AssertionError(f"{err} ({hint})") from None


def _mistaken(x: np.ndarray, cond: float, qvol: float, elements: int | None = None,
              added: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """K and f assembled with a typical mistake: only the first `elements` elements, or each
    element's entries written over (added=False) instead of added."""
    n = x.size
    matrix, load = np.zeros((n, n)), np.zeros(n)
    for e in range(n - 1 if elements is None else elements):
        ke, fe = assembly.fem1d_element(x[e + 1] - x[e], cond, qvol)
        nodes = np.ix_([e, e + 1], [e, e + 1])
        matrix[nodes] = matrix[nodes] + ke if added else ke
        load[e:e + 2] = load[e:e + 2] + fe if added else fe
    return matrix, load
