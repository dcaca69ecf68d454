"""Checks for the exercise of lecture 09_petsc: the course's solvers in PETSc's terms, and a course
matrix handed to PETSc.

    check_options(petsc_options)                        task 1: the options of each twin
    check_petsc_matrix("petsc_matrix.py", [Case(2, "blocks", (6, 4, 3)), ...])   task 2

Each raises AssertionError with a message for the learner when something is wrong.

Task 1 turns a course configuration (algorithm, preconditioner, sweeps, tol) into PETSc's options
(a dictionary, names without the leading -). The check sets them, as course.parallel.petsc.solve
does, on a KSP of its own for the Poisson matrix of 03_openmp and compares what PETSc then says it
built (its own view of the solver: types, variant, tolerances, norm, the preconditioner's inner
solvers; `describe`) with the course's twin (course.parallel.petsc.options), and the iterations
and residual history of the solve. The course's mapping is blocked while the learner's function
runs. Any language's learner answers it: the options are the same words on the command line of a
C or Fortran program (petsc_solve_c, petsc_solve_f).

Task 2 builds this rank's rows of the distributed AIJ matrix from the rank's local CRS (its
internal rows over its local columns, course.parallel.solve.LocalMatrix) in Python with petsc4py:
PETSc's numbering of the rows (rank by rank), the external columns' numbers by one halo exchange,
the preallocation of the diagonal and off-diagonal blocks, the values, the assembly. It runs under
`mpiexec` (course.grading.petsc_driver), stopped when a case takes too long: a collective PETSc
call that some ranks never make waits for ever, and the message names the rule.
"""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

import numpy as np

from ..parallel.mpi_job import run_watched
from .exercise import reference, references_blocked
from .halo import Case, check_python_source
from .pipecg import raise_first_error, raise_if_cut_short

# task 1: (algorithm, preconditioner, sweeps, tol), every CG variant and every preconditioner with
# a twin, two tolerances
CONFIGURATIONS = (("pcg", "diagonal", None, 1e-8), ("chronopoulos-gear", "diagonal", None, 1e-6),
                  ("gropp", "bjacobi-ic0", None, 1e-8), ("pipelined", "bjacobi-ic0", None, 1e-7),
                  ("pcg", "asdd-ic0", 2, 1e-8), ("chronopoulos-gear", "asdd-ic0", 3, 1e-8))
POISSON = (12, 10, 8)            # the cells of task 1's matrix (03_openmp's Poisson problem)
HISTORY_RTOL = 1e-6              # residual histories: the same solver, rounding apart

# PETSc's error codes for options it refuses (petscerror.h), in words
PETSC_ERRORS = {86: "a type name PETSc does not know: is it spelt as in PETSc's manual?",
                62: "a value PETSc cannot take: a number where one is needed?",
                63: "a value PETSc cannot take: a number where one is needed?",
                56: "PETSc does not support this combination"}
# what each line of PETSc's view that can differ means, for the learner (task 1's hints)
HINTS = (
    ("norm type", "PETSc's CG tests the PRECONDITIONED residual ||M^-1 r|| unless told: the "
                  "course's rule is the unpreconditioned ||r|| (ksp_norm_type)"),
    ("absolute=", "the course has no absolute tolerance: PETSc stops when ||r|| < max(rtol "
                  "||b||, atol), so atol must be 0 (ksp_atol)"),
    ("relative=", "the relative tolerance is the tol of the configuration (ksp_rtol)"),
    ("single-reduction", "Chronopoulos-Gear is PETSc's cg with its single-reduction variant "
                         "(ksp_cg_single_reduction)"),
    ("maximum iterations", "K sweeps are K iterations of the inner Richardson solve, each z += "
                           "B (r - A z) (ksp_ksp_max_it)"),
    ("type:", "the type names the algorithm or the preconditioner: lecture 09a's table maps the "
              "course's names to PETSc's"),
)
# the inner Richardson solve of asdd-ic0 (options prefix ksp_) with a norm
INNER_NORM = ("the K sweeps are an inner Richardson solve that tests no norm (ksp_ksp_norm_type): "
              "with one it makes a reduction in every sweep and stops when its own tolerance is "
              "met, perhaps before K sweeps")


# --- task 1: the options ---------------------------------------------------------------------------

def describe(ksp) -> list[str]:
    """PETSc's own description of a set-up KSP (KSPView), reduced to what makes the solver: each
    object's kind, options prefix (without the solve's own), type and settings; not the sizes or
    the factorisation's state."""
    from ..parallel import petsc
    PETSc = petsc.petsc()
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "view.txt"
        viewer = PETSc.Viewer().createASCII(str(path), comm=PETSc.COMM_SELF)
        ksp.view(viewer)
        viewer.destroy()
        text = path.read_text()
    prefix = ksp.getOptionsPrefix() or ""         # (each solve's own: not part of the solver)
    kept, kind = [], None
    for line in text.splitlines():
        words = line.strip()
        found = re.match(r"(KSP|PC|Mat) Object: (?:\((\S*)\) )?", words)
        if found:
            kind = found[1]
            inner = (found[2] or "")[len(prefix):] if (found[2] or "").startswith(prefix) else ""
            if kind != "Mat":
                kept.append(f"{kind} ({inner or 'outer'})")
        elif kind in ("KSP", "PC") and re.match(r"(type:|using .*(norm type|variant)|maximum "
                                                r"iterations)", words):
            kept[-1] += " | " + words.split(", initial guess")[0]
        elif kind == "KSP" and words.startswith("tolerances:"):
            kept[-1] += "".join(" | " + part.strip()
                                for part in words[len("tolerances:"):].split(","))
    return kept


def _solve(mat, b, chosen: dict):
    """PETSc's solve of mat x = b with the options `chosen`: (its description of the solver,
    iterations, residual history relative to ||b||, converged)."""
    from ..parallel import petsc
    out = petsc.solve_with(mat, b, chosen, inspect=describe)
    return out["inspected"], out["iterations"], out["residuals"], out["converged"]


def _as_options(got, where: str) -> dict[str, str]:
    if not isinstance(got, dict) or not got:
        raise AssertionError(f"petsc_options{where} must return a dictionary of PETSc's options, "
                             f"e.g. {{'ksp_type': 'cg', ...}}, not {type(got).__name__}"
                             + (" (an empty one)" if isinstance(got, dict) else ""))
    chosen = {}
    for key, value in got.items():
        if not isinstance(key, str) or not key.strip("-"):
            raise AssertionError(f"petsc_options{where}: the option names are strings, like "
                                 f"'ksp_type', not {key!r}")
        chosen[key.lstrip("-")] = str(value)
    return chosen


def check_options(petsc_options, configurations=CONFIGURATIONS) -> None:
    """petsc_options(algorithm, precond, sweeps, tol) for every configuration: PETSc builds from
    its options the course's twin (describe) and solves the Poisson system of POISSON cells in the
    twin's iterations, with its residual history. AssertionError naming the configuration, the
    first line of PETSc's description that differs, and what it means."""
    from ..fem import fvm
    from ..parallel import petsc

    PETSc = petsc.petsc()
    a = fvm.poisson(*POISSON, lang="numpy", fmt="crs").full_crs()
    b = np.random.default_rng(9).standard_normal(a.n)
    mat = petsc.crs_mat(a)
    twin = reference(petsc.options)
    try:
        for algorithm, precond, sweeps, tol in configurations:
            where = f"({algorithm!r}, {precond!r}, {sweeps!r}, {tol:g})"
            with references_blocked(petsc):
                got = petsc_options(algorithm, precond, sweeps, tol)
            chosen = _as_options(got, where)
            try:
                mine = _solve(mat, b, chosen)
            except PETSc.Error as err:
                why = PETSC_ERRORS.get(err.ierr, "PETSc's error code says which")
                raise AssertionError(f"petsc_options{where} gave {chosen}, and PETSc refused "
                                     f"them (its error code {err.ierr}: {why})") from None
            wanted = _solve(mat, b, twin(algorithm, precond, sweeps, tol))
            compare(where, chosen, mine, wanted)
    finally:
        mat.destroy()


def compare(where: str, chosen: dict, mine, wanted) -> None:
    """The learner's solve (describe, iterations, history, converged) against the twin's: the
    first setting of the first object that differs, then the iterations and the history."""
    said, iterations, history, _ = mine
    expected, twin_iterations, twin_history, _ = wanted
    gave = f"petsc_options{where} gave {chosen}"
    for line, want in zip(said + [""] * len(expected), expected):
        if line == want:
            continue
        name, *settings = want.split(" | ")
        if not line.startswith(name + " |"):
            raise AssertionError(f"{gave}. PETSc built {line.split(' | ')[0] or 'nothing'} where "
                                 f"the course's twin has {name}: {want}")
        theirs = line.split(" | ")[1:]
        missing = [s for s in settings if s not in theirs]
        setting = missing[0] if missing else settings[0]
        got = next((s for s in theirs if s not in settings and s.split("=")[0].split(" ")[0]
                    == setting.split("=")[0].split(" ")[0]), None)
        hint = INNER_NORM if name == "KSP (ksp_)" and "norm type" in setting else next(
            (h for key, h in HINTS if key in setting), "")
        said_so = (f"PETSc reports \"{got}\" where the course's twin has \"{setting}\"" if got
                   else f"PETSc does not report \"{setting}\", which the course's twin does")
        raise AssertionError(f"{gave}. For the {name}, {said_so}" + (f": {hint}" if hint else "")
                             + ".")
    if len(said) > len(expected):
        raise AssertionError(f"{gave}: PETSc built more than the twin, {said[len(expected)]}")
    same = len(history) == len(twin_history) and np.allclose(history, twin_history,
                                                             rtol=HISTORY_RTOL, atol=0)
    if iterations != twin_iterations or not same:
        raise AssertionError(f"{gave}: {iterations} iterations where the course's twin takes "
                             f"{twin_iterations}, with another residual history: an option "
                             f"PETSc's description does not show?")


# --- task 2: the distributed matrix ----------------------------------------------------------------

MATRIX_ARGS = ("comm", "n_internal", "n_local", "row_ptr", "col", "val", "update")
COLLECTIVE_RULE = (
    "every rank of the communicator must call every collective PETSc method, in the same order "
    "(createAIJ, setSizes, setPreallocationNNZ, assemble / assemblyBegin / assemblyEnd, ...), on "
    "the communicator `comm` you are given: a rank that skips one, or calls it on another "
    "communicator, leaves the others waiting for ever")


def check_petsc_matrix(source, cases, step_timeout: float = 20.0, timeout: float = 120.0) -> None:
    """Run the learner's petsc_matrix on every case (one mpiexec job of max(ranks) processes):
    the matrix it returns is assembled, distributed as PETSc numbers the rows (rank by rank), equal
    to the course's (course.parallel.petsc.local_mat) and preallocated exactly from the pattern.
    AssertionError that says what happened."""
    path = check_python_source(source, "petsc_matrix", MATRIX_ARGS)
    job = run_matrix_job([("python", path)], cases, step_timeout, timeout)
    judge(job, cases, step_timeout)


def run_matrix_job(variants, cases, step_timeout: float = 20.0, timeout: float = 120.0):
    """The driver's job: every (lang, path) of variants ("course", "-": the course's own, for the
    tests) on every case, one variant after the other."""
    return run_watched(["-m", "mpi4py", "-m", "course.grading.petsc_driver",
                        *(str(word) for pair in variants for word in pair), "--",
                        *(case.spec() for case in cases)],
                       max(case.ranks for case in cases), timeout, step_timeout)


def _where(cases: list, k: int | None) -> str:
    case = cases[k] if k is not None and k < len(cases) else None
    return f"on {case.describe()} ({case.ranks} ranks)" if case is not None else ""


def judge(job, cases, step_timeout: float, variant: int = 0) -> None:
    """AssertionError that says what went wrong in the job for its variant."""
    raise_first_error(job, "petsc_matrix", lambda k: _where(cases, k))
    mine = [e for e in job.events if e.get("variant", 0) == variant]
    results = {e["case"]: e for e in mine if e["event"] == "result"}
    for k, case in enumerate(cases):
        if k in results:
            text = message(results[k], _where(cases, k))
            if text is not None:
                raise AssertionError(text)
    started = [e for e in mine if e["event"] == "start"]
    running = started[-1]["case"] if started and started[-1]["case"] not in results else None
    uneven = [e for e in mine if e["event"] == "uneven"]
    if uneven:
        raise AssertionError(f"petsc_matrix returned on rank {uneven[0]['rank']} "
                             f"{_where(cases, uneven[0]['case'])} while other ranks were still "
                             f"inside it: {COLLECTIVE_RULE}.")
    if job.stopped:
        where = _where(cases, running) if running is not None else "(before any case began)"
        raise AssertionError(f"petsc_matrix did not finish within {step_timeout:g} s {where}, "
                             f"and the job was stopped: {COLLECTIVE_RULE}.")
    if "SEGV" in job.output and "PETSC ERROR" in job.output:
        raise AssertionError(f"PETSc crashed (a segmentation violation) while petsc_matrix ran "
                             f"{_where(cases, running) if running is not None else ''}: a matrix "
                             "whose preallocation was never set (createAIJ without nnz= or csr=, "
                             "and no setUp()) cannot take values. Preallocate from the pattern.")
    raise_if_cut_short(job, "petsc_matrix", _where(cases, running), len(results) == len(cases))


def message(result: dict, where: str) -> str | None:
    """The message for what is wrong in one case's result (None: nothing)."""
    what = result["problem"]
    if what is None:
        return None
    if what == "not_a_mat":
        return (f"{where}: petsc_matrix returned {result['returned']}, not a PETSc Mat (return "
                "the matrix you created: PETSc.Mat().createAIJ(...))")
    if what == "communicator":
        return (f"{where}: the matrix lives on a communicator of {result['comm_size']} ranks, not "
                f"on comm ({result['ranks']} ranks): create it with comm=comm")
    if what == "not_assembled":
        return (f"{where}: the matrix is not assembled: after the last setValues, every rank "
                "calls mat.assemble() (MatAssemblyBegin/End: the entries that belong to other "
                "ranks travel then)")
    if what == "sizes":
        mine, want = result["sizes"], result["expected_sizes"]
        return (f"{where}: rank {result['bad_rank']} holds the rows {mine[0]} to {mine[1] - 1} "
                f"of {mine[2]}, where PETSc's numbering gives it {want[0]} to {want[1] - 1} of "
                f"{want[2]}: each rank owns its n_internal rows, and rank r's come after those of "
                "ranks 0 .. r-1 (their sum: comm.exscan); sizes=((n_internal, N), (n_internal, "
                "N))")
    if what == "values":
        row, column, mine, want = result["first_difference"]
        hint = ""
        if result["local_columns"]:
            hint = (": the columns are the LOCAL numbers of the rank's nodes; PETSc wants its "
                    "global numbers: the internal node i is first + i, an external node takes "
                    "the number its owner gives it (fill a vector of n_local values with the "
                    "internal numbers and call update on it)")
        return (f"{where}: the matrix differs from the course's in row {row}, column {column}: "
                f"yours holds {mine:.6g}, the course's {want:.6g}{hint}")
    if what == "mallocs":
        return (f"{where}: PETSc had to allocate memory {result['mallocs']:.0f} times while "
                "values were set: preallocate from the pattern, per row the count of columns "
                "in this rank's own rows (d_nnz, the diagonal block) and of the others (o_nnz): "
                "createAIJ(..., nnz=(d_nnz, o_nnz))")
    return (f"{where}: {result['unneeded']:.0f} preallocated entries stay unused: preallocate "
            "exactly from the pattern, per row the columns in this rank's own rows (d_nnz) and "
            "the others (o_nnz), not a guess")
