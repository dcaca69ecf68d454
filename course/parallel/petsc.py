"""PETSc for the course's matrices and solvers (lecture 09_petsc): the same matrix handed to the
library learners use next, solved by the PETSc twin of each course solver, stopped by the same
rule, so that the two can be compared iteration for iteration.

    petsc()                       petsc4py's PETSc, initialised once; PETScMissing (one line: how to
                                  get it) where petsc4py is not installed
    skip_later_cells(message)     a notebook without petsc4py prints message for every later cell
    crs_mat(crs)                  a course CRS matrix as a PETSc AIJ matrix of one process
    global_columns(local, halo)   PETSc's number of every local column: PETSc numbers the rows rank
                                  by rank (rank 0's internal nodes first), so an external node
                                  takes the number its owner gives it, sent by one halo exchange
    local_mat(matrix, columns)    each rank's internal rows as its rows of one distributed AIJ
    save_system(path, crs, b)     the matrix and the right-hand side in PETSc's binary format: what
                                  the C and Fortran programs petsc_solve_c/_f read (rows=: each
                                  rank's rows, written next to it)
    command_line(options)         the options as PETSc's command line (-ksp_type cg ...)
    run_program(name, path, ranks, options)   petsc_solve_c or petsc_solve_f on the saved system
                                  under mpiexec: the summary it prints (read_program_output)
    read_log_view(text)           the event table of a `-log_view` report: per event its calls,
                                  seconds (the slowest rank's), their ratio max/min over the
                                  ranks, messages and global reductions
    log_view_excerpt(text, names) the parts of a `-log_view` report a reader starts with, as PETSc
                                  printed them: the summary, the stages, the event table's header
                                  and the lines of the events named
    solve_with(mat, b, options)   PETSc's KSP with any options, from x0 = 0
    solve(mat, b, ...)            PETSc's KSP with the twin of the course's choice:

        course             PETSc
        pcg                -ksp_type cg
        chronopoulos-gear  -ksp_type cg -ksp_cg_single_reduction
        gropp              -ksp_type groppcg
        pipelined          -ksp_type pipecg
        diagonal           -pc_type jacobi
        bjacobi-ic0        -pc_type bjacobi -sub_pc_type icc      (IC(0) of each rank's block)
        asdd-ic0, K        -pc_type ksp -ksp_ksp_type richardson -ksp_ksp_max_it K
                           -ksp_pc_type bjacobi -ksp_sub_pc_type icc   (K sweeps z += B (r - A z))
        (overlap_options)  -pc_type asm -pc_asm_type basic -pc_asm_overlap k -sub_pc_type icc:
                           each rank's block grown by k layers of its neighbours' rows
        gamg, boomeramg    -pc_type gamg, -pc_type hypre -pc_hypre_type boomeramg: algebraic
                           multigrid, which the course does not build (LIBRARY_PRECONDS)

    and the course's stopping rule: the unpreconditioned residual norm (PETSc's CG watches the
    preconditioned one unless told), relative to ||b|| (x0 = 0), no absolute tolerance.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np

from ..solvers import check_algorithm
from ..sparse import CRS
from .precond import check_precond

INSTALL = ("petsc4py is not installed for this Python: on Debian, as root, `make setup` installs "
           "PETSc (libpetsc-real-dev) and builds petsc4py; with conda: conda install -c "
           "conda-forge petsc4py")
KSP_TYPES = {"pcg": "cg", "chronopoulos-gear": "cg", "gropp": "groppcg", "pipelined": "pipecg"}
# the preconditioners the course does not build, what comes next: algebraic multigrid, PETSc's own
# (smoothed aggregation) and hypre's BoomerAMG (classical)
LIBRARY_PRECONDS = {"gamg": {"pc_type": "gamg"},
                    "boomeramg": {"pc_type": "hypre", "pc_hypre_type": "boomeramg"}}
# the events of PETSc's log that are one global reduction each: the dot products and norms of
# distributed vectors, blocking (VecTDot, VecDot, VecMDot: several dots in one, VecNorm) or split
# into begin and end (VecReduceBegin: one MPI_Iallreduce for every value gathered since the last)
REDUCTION_EVENTS = ("VecTDot", "VecDot", "VecMDot", "VecNorm", "VecReduceBegin")
PETSC_INT = np.int32                       # PETSc's indices as Debian builds it: 32 bits


class PETScMissing(RuntimeError):
    """petsc4py cannot be imported here (the message says how to install it)."""


def skip_later_cells(message: str) -> bool:
    """In a notebook (IPython) where petsc4py is missing: every cell run after this one prints
    `message` instead of running, so that a lecture decides its fallback once, in one set-up cell,
    and its other cells are the PETSc calls alone. Returns False outside IPython (nothing done)."""
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    if shell is None:
        return False
    shell.input_transformers_cleanup.append(lambda lines: [f"print({message!r})\n"])
    return True


def petsc():
    """petsc4py's PETSc module, initialised with no command-line options of its own (the course's
    options are not PETSc's)."""
    try:
        import petsc4py
    except ImportError:
        raise PETScMissing(INSTALL) from None
    petsc4py.init(sys.argv[:1])                 # (a second call, or after the import, is a no-op)
    from petsc4py import PETSc
    if not PETSc.Log.isActive():
        PETSc.Log.begin()                       # count the events (reductions_counted)
    return PETSc


def reductions_counted() -> int:
    """The global reductions this process has made so far, by PETSc's log (REDUCTION_EVENTS)."""
    PETSc = petsc()
    return sum(int(PETSc.Log.Event(name).getPerfInfo()["count"]) for name in REDUCTION_EVENTS)


# [crs_mat]
def crs_mat(crs: CRS, comm=None):
    """The CRS matrix as a PETSc AIJ matrix (rows preallocated from the pattern) on one process."""
    PETSc = petsc()
    return PETSc.Mat().createAIJ(size=(crs.n, crs.n), csr=(crs.row_ptr, crs.col_idx, crs.val),
                                 comm=comm or PETSc.COMM_SELF)
# [crs_mat]


# [global_columns]
def global_columns(n_internal: int, n_columns: int, halo, comm) -> np.ndarray:
    """PETSc's global number of each of this rank's local columns: its internal nodes get
    first + 0 .. n_internal - 1 (first: the internal nodes of the ranks before it), its external
    nodes the numbers their owners give them, received by halo.update (a float64 vector: exact
    below 2^53)."""
    first = comm.exscan(n_internal) or 0
    numbers = np.zeros(n_columns)
    numbers[:n_internal] = first + np.arange(n_internal)
    halo.update(numbers)
    return numbers.astype(PETSC_INT)
# [global_columns]


def local_mat(matrix, columns: np.ndarray, comm):
    """This rank's rows of the distributed AIJ matrix: `matrix` (course.parallel.solve.LocalMatrix:
    internal rows, local columns) with its columns renumbered by `columns` (global_columns)."""
    PETSc = petsc()
    n = matrix.n_rows
    total = comm.allreduce(n)
    if total >= np.iinfo(PETSC_INT).max:
        raise ValueError(f"{total} rows are more than this PETSc's 32-bit indices can number")
    return PETSc.Mat().createAIJ(size=((n, total), (n, total)),
                                 csr=(matrix.row_ptr.astype(PETSC_INT),
                                      columns[matrix.col_idx], matrix.val),
                                 comm=comm)


def save_system(path, crs: CRS, b: np.ndarray, rows=None) -> None:
    """Write A (CRS) and then b into the PETSc binary file `path` (and PETSc's `path.info`), as
    petsc_solve_c and petsc_solve_f read them; with `rows` (the rows of each rank, in order), also
    `path.rows`, from which the programs take their split of the rows instead of PETSc's own."""
    PETSc = petsc()
    if rows is not None:
        rows = [int(r) for r in rows]
        if min(rows, default=-1) < 0 or sum(rows) != crs.n:
            raise ValueError(f"rows {rows}: one count >= 0 per rank, {crs.n} in all")
    mat = crs_mat(crs)
    rhs = PETSc.Vec().createWithArray(np.ascontiguousarray(b, dtype=float), comm=PETSc.COMM_SELF)
    viewer = PETSc.Viewer().createBinary(str(path), "w", comm=PETSc.COMM_SELF)
    try:
        mat.view(viewer)
        rhs.view(viewer)
    finally:
        for obj in (viewer, rhs, mat):
            obj.destroy()
    split = Path(f"{path}.rows")
    if rows is not None:
        split.write_text("".join(f"{r}\n" for r in rows))
    elif split.exists():
        split.unlink()                                   # (an earlier system's split)


def command_line(chosen: dict[str, str]) -> list[str]:
    """options(...) as the arguments of a PETSc program: ["-ksp_type", "cg", ...]."""
    return [word for key, value in chosen.items() for word in (f"-{key}", value)]


PROGRAMS = ("petsc_solve_c", "petsc_solve_f")
_SUMMARY = re.compile(
    r"petsc_solve: (?P<rows>\d+) rows on (?P<ranks>\d+) ranks, ksp (?P<ksp>\S+), pc (?P<pc>\S+), "
    r"norm (?P<norm>\S+)\niterations (?P<iterations>\d+), reason (?P<reason>-?\d+) \((?:converged|"
    r"diverged)\), true relative residual (?P<true_residual>\S+)\nsolve (?P<seconds>\S+) s, "
    r"(?P<us_per_iteration>\S+) us per iteration")


def read_program_output(text: str) -> dict:
    """The three lines petsc_solve_c and petsc_solve_f print, as a dictionary (numbers as numbers,
    converged from PETSc's reason). ValueError for any other text."""
    found = _SUMMARY.search(text)
    if found is None:
        raise ValueError(f"not the summary of petsc_solve:\n{text}")
    summary = found.groupdict()
    for key in ("rows", "ranks", "iterations", "reason"):
        summary[key] = int(summary[key])
    for key in ("true_residual", "seconds", "us_per_iteration"):
        summary[key] = float(summary[key])
    summary["converged"] = summary["reason"] > 0
    return summary


def run_program(name: str, path, ranks: int, chosen: dict[str, str], timeout: float = 300) -> dict:
    """`mpiexec -n ranks NAME PATH -OPTION VALUE ...` (NAME: one of PROGRAMS, built by `course
    build` where PETSc was found) on the system save_system wrote: its summary (read_program_output).
    RuntimeError with the program's error line when it fails or takes longer than `timeout`."""
    from .. import native
    from .mpi_job import mpi_environment

    if name not in PROGRAMS:
        raise ValueError(f"no PETSc program {name!r}: {' or '.join(PROGRAMS)}")
    try:
        program = native.binary(name)
    except FileNotFoundError:
        raise RuntimeError(f"{name} was not built: the course's build found no PETSc ("
                           f"{INSTALL.split(': ', 1)[1]})") from None
    command = ["mpiexec", "-n", str(ranks), str(program), str(path), *command_line(chosen)]
    # the environment given explicitly: a process that has initialised MPI (petsc4py) changed its
    # own, and an mpiexec started with that would take itself for a part of this process's job
    env = {**mpi_environment(), "MPIEXEC_TIMEOUT": str(int(timeout))}
    try:
        done = subprocess.run(command, capture_output=True, text=True, env=env,
                              timeout=timeout + 10)
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"{name} on {ranks} ranks took more than {timeout:.0f} s") from None
    if done.returncode not in (0, 1):
        said = [line for line in done.stderr.splitlines() if line.startswith(name)]
        raise RuntimeError(said[0] if said else f"{name} failed (exit {done.returncode}):\n"
                           f"{done.stderr.strip()[-2000:]}")
    return read_program_output(done.stdout)


# [options]
def options(algorithm: str = "pcg", precond: str = "diagonal", sweeps: int | None = None,
            tol: float = 1e-8, max_iter: int = 10_000) -> dict[str, str]:
    """PETSc's options (without the leading -) for the twin of the course's algorithm and
    preconditioner (the module docstring's table), with the course's stopping rule."""
    check_algorithm(algorithm)
    if precond in LIBRARY_PRECONDS:
        if sweeps is not None:
            raise ValueError(f"sweeps are for asdd-ic0, not for {precond}")
    else:
        sweeps = check_precond(precond, sweeps)
    chosen = {"ksp_type": KSP_TYPES[algorithm], "ksp_norm_type": "unpreconditioned",
              "ksp_rtol": f"{tol:.17g}", "ksp_atol": "0", "ksp_max_it": str(max_iter)}
    if algorithm == "chronopoulos-gear":
        chosen["ksp_cg_single_reduction"] = "1"
    if precond in LIBRARY_PRECONDS:
        chosen.update(LIBRARY_PRECONDS[precond])
    elif precond == "diagonal":
        chosen["pc_type"] = "jacobi"
    elif precond == "bjacobi-ic0":
        chosen.update(pc_type="bjacobi", sub_pc_type="icc")
    else:                                  # K Richardson steps on B: K sweeps z += B (r - A z)
        chosen.update(pc_type="ksp", ksp_ksp_type="richardson", ksp_ksp_max_it=str(sweeps),
                      ksp_ksp_norm_type="none", ksp_pc_type="bjacobi", ksp_sub_pc_type="icc")
    return chosen
# [options]


# [overlap_options]
def overlap_options(overlap: int, exact: bool = False, algorithm: str = "pcg",
                    tol: float = 1e-8) -> dict[str, str]:
    """PETSc's additive Schwarz with `overlap` layers of the neighbours' rows added to each rank's
    block, which the course does not build: each block solved by IC(0) (as bjacobi-ic0's) or,
    exact, by Cholesky; `basic` adds the blocks' corrections (twice where they overlap) and keeps
    M^-1 symmetric, as CG needs (PETSc's default, `restrict`, does not). Overlap 0 is bjacobi."""
    if isinstance(overlap, bool) or not isinstance(overlap, int) or overlap < 0:
        raise ValueError(f"overlap must be a whole number of layers >= 0, got {overlap!r}")
    chosen = options(algorithm, "bjacobi-ic0", tol=tol)
    chosen.update(pc_type="asm", pc_asm_type="basic", pc_asm_overlap=str(overlap),
                  sub_pc_type="cholesky" if exact else "icc")
    return chosen
# [overlap_options]


_solves = iter(range(1, 1 << 62))


def solve(mat, b: np.ndarray, comm=None, **choice) -> dict:
    """Solve mat x = b (b: this rank's rows) from x0 = 0 with the options of `choice`
    (options(...)): solve_with's answer. Every rank of mat's communicator calls it."""
    return solve_with(mat, b, options(**choice))


def solve_with(mat, b: np.ndarray, chosen: dict[str, str], inspect=None) -> dict:
    """Solve mat x = b from x0 = 0 with PETSc's options `chosen` (names without the -, set under
    a prefix of this solve's own and removed afterwards); returns x (this rank's rows),
    iterations, converged, the recursive residual's norm relative to ||b|| (its history in
    residuals, iteration 0 first), PETSc's reason, the options, the global reductions of the
    solve (reductions_counted) and, with inspect, inspect(ksp) after the solve. PETSc.Error for
    options PETSc refuses. Every rank of mat's communicator calls it."""
    PETSc = petsc()
    prefix = f"course{next(_solves)}_"
    database = PETSc.Options(prefix)
    for key, value in chosen.items():
        database.setValue(key, value)
    ksp = PETSc.KSP().create(comm=mat.getComm())
    try:
        ksp.setOptionsPrefix(prefix)
        ksp.setOperators(mat)
        ksp.setFromOptions()
        ksp.setConvergenceHistory()
        rhs, x = mat.createVecLeft(), mat.createVecRight()
        rhs.getArray()[:] = b
        x.set(0.0)
        ksp.setUp()                             # the preconditioner's set-up (AMG's hierarchy)
        before = reductions_counted()           # then only the solve's reductions count
        ksp.solve(rhs, x)
        reductions = reductions_counted() - before
        bnorm = rhs.norm()
        result = {"x": x.getArray().copy(), "iterations": ksp.getIterationNumber(),
                  "converged": ksp.getConvergedReason() > 0,
                  "relative_residual": ksp.getResidualNorm() / (bnorm or 1.0),
                  "residuals": np.asarray(ksp.getConvergenceHistory()) / (bnorm or 1.0),
                  "reason": int(ksp.getConvergedReason()), "options": chosen,
                  "reductions": reductions,
                  "inspected": inspect(ksp) if inspect is not None else None}
        for vec in (rhs, x):
            vec.destroy()
        return result
    finally:
        ksp.destroy()
        for key in chosen:
            database.delValue(key)


def read_log_view(text: str) -> dict[str, dict]:
    """The event table of PETSc's `-log_view` report (the columns of PETSc 3.18): for each event,
    its calls (count), seconds (the largest over the ranks), time_ratio (the largest over the
    smallest of the ranks' seconds), messages sent (by all the ranks together), their average
    length in bytes and its global reductions (as the report prints them: two digits, 1.9e+02).
    ValueError for a text without the table."""
    events, inside = {}, False
    for line in text.splitlines():
        if line.startswith("Event ") and "Count" in line:
            inside = True
        elif inside and line.startswith("--- Event Stage"):
            continue
        elif inside:
            fields = line.split()
            if len(fields) >= 10 and fields[1].isdigit():
                events[fields[0]] = {"count": int(fields[1]), "seconds": float(fields[3]),
                                     "time_ratio": float(fields[4]),
                                     "messages": float(fields[7]), "message_bytes": float(fields[8]),
                                     "reductions": float(fields[9])}
            elif line.startswith("Object Type"):
                break
    if not events:
        raise ValueError("no event table in this text: is it the output of -log_view?")
    return events


def log_view_excerpt(text: str, names) -> str:
    """What a reader of a `-log_view` report looks at first, line for line as PETSc printed it,
    the parts left out marked "...": the summary (Max, Max/Min, Avg and Total of the time, flop,
    messages, their length and reductions; not the lines naming the program, machine and user),
    the summary of the stages, the event table's header, and each stage's lines of the events in
    `names` (in the report's order). ValueError for a text without the event table."""
    read_log_view(text)                                  # (the same ValueError)
    lines, names = text.splitlines(), set(names)
    summary = next((i for i, line in enumerate(lines) if "Max/Min" in line), None)
    stages = next((i for i, line in enumerate(lines) if line.startswith("Summary of Stages")),
                  None)
    header = next(i for i, line in enumerate(lines)
                  if line.startswith("Event ") and "Count" in line)
    parts = []
    if summary is not None:
        end = next((i for i in range(summary, len(lines)) if lines[i].startswith(
            "MPI Reductions")), summary)
        parts.append(lines[summary:end + 1])
    if stages is not None:
        end = next((i for i in range(stages, len(lines)) if not lines[i].strip()), len(lines))
        parts.append(lines[stages:end])
    table, stage, chosen = lines[header:header + 3], None, []
    for line in lines[header + 3:]:
        if line.startswith("Object Type"):
            break
        if line.startswith("--- Event Stage"):
            stage = line
        elif line.split()[:1] and line.split()[0] in names:
            if stage is not None:
                chosen += ["", stage, ""]
                stage = None
            chosen.append(line)
    parts.append(table + chosen)
    return "\n...\n".join("\n".join(part) for part in parts) + "\n"
