"""Checks for the exercise of lecture 08_hybrid: localized IC(0) and its ASDD sweeps.

    check_internal_block(internal_block, cases)                          task 1 in Python
    check_internal_block(compiled_internal_block("c"), cases)   C or Fortran (internal_block.c)
    check_asdd_apply("asdd_apply.c", "c", [(Case(2, "blocks", (6, 4, 3)), (1, 2, 3))])   task 2

Each raises AssertionError with a message for the learner when something is wrong.

Task 1 takes a rank's local CRS (course.parallel.fem3d.assemble_local on a partition of a Case:
its n_internal internal rows first, and on some ranks also the external nodes' partial rows after
them; the entries of every row shuffled) and must return A_ii exactly as
course.parallel.precond.internal_block does (which is blocked while the learner's code runs). A
compiled answer runs in a child process (exercise.run_isolated): a crash costs the check, never the
notebook's kernel.

Task 2 runs the learner's sweeps under `mpiexec` in a subprocess (course.grading.hybrid_driver),
stopped when one case takes too long or a rank crashes. The learner's function gets the local
solve B and the distributed product A as callbacks, and the driver counts both: K sweeps make K
local solves and K - 1 products (halo exchanges), no more; z must be the course's asdd-ic0 to
1e-12, r must stay as it was, and a PCG with the learner's sweeps must take the course's
iterations. A Python answer may not use mpi4py (as in 06_pipecg).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..parallel.mpi_job import run_watched
from .exercise import (_base, compile_kernel, compiled_language, entry, plain, reference,
                       references_blocked, row_label, run_isolated)
from .halo import Case, check_python_source
from .hybrid_driver import MAX_ITER, TOL, Z_RTOL, verdict
from .pipecg import mpi4py_import, raise_first_error, raise_if_cut_short

LANGUAGES = ("c", "fortran", "python")


# --- task 1: the internal block ------------------------------------------------------------------

INTERNAL_BLOCK_FILES = {"c": "internal_block.c", "fortran": "internal_block.f90"}  # the notebook's
UNWRITTEN = -999_999            # a compiled answer's index arrays before it writes (values: NaN)
GUARD = 8                       # entries past the room of each output, to catch writes past it


def local_matrices(case: Case, seed: int | None = None):
    """For every rank of the case: (rank, n_internal, row_ptr, col, val, n_local) of the matrix it
    assembles from its local elements (course.parallel.fem3d.assemble_local, conductivity 1), the
    entries of every row shuffled (from the case's seed). Even ranks give all n_local rows (the
    external nodes' partial rows after the internal ones), odd ranks the n_internal internal rows
    only."""
    from ..parallel.fem3d import assemble_local
    from ..parallel.local import local_data

    mesh = case.mesh()
    owner = case.owner(mesh)
    rng = np.random.default_rng(1000 + (case.seed if seed is None else seed))
    found = []
    for rank in range(case.ranks):
        local = local_data(mesh, owner, rank)
        a, _ = assemble_local(mesh, local, 1.0, np.ones(mesh.n_node))
        rows = local.n_local if rank % 2 == 0 else local.n_internal
        row_ptr = a.row_ptr[:rows + 1].astype(np.int32)
        order = np.concatenate([row_ptr[i] + rng.permutation(row_ptr[i + 1] - row_ptr[i])
                                for i in range(rows)] + [np.zeros(0, dtype=int)]).astype(int)
        found.append((rank, local.n_internal, row_ptr, a.col_idx[order].astype(np.int32),
                      a.val[order].copy(), local.n_local))
    return found


# a hand-made rank: 3 internal nodes (0, 1, 2), 2 external ones (3, 4); rows in scrambled order,
# the diagonal not first; row 2 keeps its diagonal only
HAND_MADE = (3,
             np.array([0, 4, 7, 10], dtype=np.int32),
             np.array([3, 1, 0, 4, 2, 4, 1, 3, 2, 4], dtype=np.int32),
             np.array([-0.5, -1.0, 4.0, -0.25, -2.0, -0.75, 5.0, -1.5, 6.0, -3.0]))


def compiled_internal_block(lang: str, source=None, timeout: float = 10.0):
    """The learner's C or Fortran internal_block (compiled here, called in a child process: a
    crash or an endless loop is an AssertionError) as a Python internal_block(n_internal,
    row_ptr, col, val) that returns (block_ptr, block_col, block_val), 0-based, as the Python
    answer does. The compiled function:

        int internal_block(int n_internal, const int *row_ptr, const int *col, const double *val,
                           int *block_ptr, int *block_col, double *block_val)

    returns the block's nnz; the outputs have the sizes of the inputs (in Fortran: bind(C),
    n_internal by value, the indices in row_ptr, col, block_ptr and block_col count from 1).
    Entries it leaves unwritten come back as UNWRITTEN (indices) and NaN (values); a write past
    an output's room is an AssertionError."""
    compiled_language(lang)
    lib = compile_kernel(source or INTERNAL_BLOCK_FILES[lang], lang)
    base = _base(lang)

    def internal_block(n_internal, row_ptr, col, val):
        row_ptr = np.ascontiguousarray(row_ptr, dtype=np.int32)
        col = np.ascontiguousarray(col, dtype=np.int32)
        val = np.ascontiguousarray(val, dtype=float)
        rooms = (row_ptr.size, col.size, val.size)
        outputs = [np.full(rooms[0] + GUARD, UNWRITTEN, dtype=np.int32),
                   np.full(rooms[1] + GUARD, UNWRITTEN, dtype=np.int32),
                   np.full(rooms[2] + GUARD, np.nan)]
        (run,) = run_isolated(lib, "internal_block",
                              [int(n_internal), row_ptr + base, col + base, val, *outputs],
                              returns="int", timeout=timeout, keep=[4, 5, 6])
        got = run.arrays[4:]
        for name, values, room in zip(("block_ptr", "block_col", "block_val"), got, rooms):
            past = np.isnan(values[room:]) if name == "block_val" else values[room:] == UNWRITTEN
            if not past.all():
                raise AssertionError(f"{name} has room for {room} entries (the size of the input "
                                     f"it corresponds to), and your function wrote past them, "
                                     f"into {entry(name, room + int(np.argmin(past)), lang)}")
        block_ptr, block_col, block_val = (values[:room] for values, room in zip(got, rooms))
        written = np.flatnonzero(block_ptr != UNWRITTEN)
        block_ptr = block_ptr[:max(int(n_internal) + 1, written[-1] + 1 if written.size else 0)]
        nnz = run.result
        if not 0 <= nnz <= col.size:
            raise AssertionError(f"internal_block returned {nnz}: it returns the number of entries "
                                 f"of the block, between 0 and the input's {col.size}")
        block_ptr = np.where(block_ptr == UNWRITTEN, UNWRITTEN, block_ptr - base)
        block_col = np.where(block_col[:nnz] == UNWRITTEN, UNWRITTEN, block_col[:nnz] - base)
        return block_ptr, block_col, block_val[:nnz]

    internal_block.lang = lang
    return internal_block


def check_internal_block(internal_block, cases=(), hand_made: bool = True) -> None:
    """Call internal_block(n_internal, row_ptr, col, val) on the hand-made rank and on every rank
    of every case (local_matrices) and compare with course.parallel.precond.internal_block
    (blocked while the learner's function runs): the same block_ptr, the same columns and values
    in the same order. AssertionError naming the rank, the row and what is wrong."""
    from ..parallel import precond
    from ..parallel.solve import LocalMatrix

    lang = getattr(internal_block, "lang", "python")
    course_block = reference(precond.internal_block)
    matrices = []
    if hand_made:
        n, row_ptr, col, val = HAND_MADE
        matrices.append(("the hand-made rank of the task (3 internal nodes, 2 external)", n,
                         row_ptr, col, val, 5))
    for case in cases:
        for rank, n, row_ptr, col, val, n_local in local_matrices(case):
            rows = row_ptr.size - 1
            shape = ("its internal rows, then the external nodes' partial rows"
                     if rows > n else "its internal rows")
            matrices.append((f"rank {rank} of {case.describe()} ({n} internal nodes, {n_local} "
                             f"local; {rows} rows: {shape})", n, row_ptr, col, val, n_local))
    for where, n, row_ptr, col, val, n_local in matrices:
        end = row_ptr[n]
        expected = course_block(LocalMatrix(row_ptr[:n + 1].copy(), col[:end].copy(),
                                            val[:end].copy(), n_local))
        try:
            with references_blocked(precond):
                got = internal_block(n, row_ptr.copy(), col.copy(), val.copy())
        except AssertionError as err:
            if lang == "python" or str(err).startswith("your code called"):
                raise
            raise AssertionError(f"internal_block for {where}: {err}") from None
        compare_block(got, expected, n, row_ptr, col, where, lang)


def _as_array(got, k: int, name: str, integer: bool, where: str) -> np.ndarray:
    try:
        values = np.asarray(got[k])
        if values.ndim != 1 or (values.size and integer and
                                not np.issubdtype(values.dtype, np.integer)):
            raise ValueError
        return values.astype(np.int64 if integer else float)
    except (TypeError, ValueError):
        kind = "integers" if integer else "numbers"
        raise AssertionError(f"internal_block for {where}: {name} must be a 1-D array of {kind}")\
            from None


def compare_block(got, expected, n: int, row_ptr, col, where: str, lang: str) -> None:
    """The learner's (block_ptr, block_col, block_val), 0-based, against the course's CRS."""
    base = _base(lang)
    what = f"internal_block for {where}"
    if not isinstance(got, (tuple, list)) or len(got) != 3:
        raise AssertionError(f"internal_block must return (block_ptr, block_col, block_val), not "
                             f"{type(got).__name__}")
    bp = _as_array(got, 0, "block_ptr", True, where)
    bc = _as_array(got, 1, "block_col", True, where)
    bv = _as_array(got, 2, "block_val", False, where)
    ptr = entry("block_ptr", 0, lang)
    if bp.size != n + 1:
        more = (f": A_ii has the n_internal rows of the internal nodes only (the rows after them "
                f"are the external nodes': not part of the block)" if bp.size > n + 1 else "")
        raise AssertionError(f"{what}: block_ptr has {bp.size} entries, expected n_internal + 1 "
                             f"= {n + 1}{more}")
    if np.any(bp == UNWRITTEN):
        raise AssertionError(f"{what}: {entry('block_ptr', int(np.argmax(bp == UNWRITTEN)), lang)}"
                             f" is never written: block_ptr has n_internal + 1 = {n + 1} entries, "
                             f"{base} first, then the end of each row")
    if bp[0] != 0:
        raise AssertionError(f"{what}: {ptr} is {plain(bp[0] + base)}, expected {base}"
                             + (" (in Fortran the offsets count from 1)" if bp[0] == -1 else ""))
    copied = np.array_equal(bp, row_ptr[:n + 1]) and not np.array_equal(bp, expected.row_ptr)
    hint = (" (block_ptr is the input's row_ptr: count the entries each row KEEPS instead)"
            if copied else "")
    steps = np.diff(bp)
    if np.any(steps < 0):
        bad = int(np.argmax(steps < 0))
        raise AssertionError(f"{what}: block_ptr decreases: {entry('block_ptr', bad, lang)} = "
                             f"{plain(bp[bad] + base)}, {entry('block_ptr', bad + 1, lang)} = "
                             f"{plain(bp[bad + 1] + base)}")
    if bp[-1] != bc.size or bc.size != bv.size:
        sizes = (f"your function returned nnz = {bc.size}" if lang != "python" else
                 f"block_col has {bc.size} and block_val {bv.size}")
        raise AssertionError(f"{what}: block_ptr ends at {plain(bp[-1] + base)}, "
                             f"{plain(bp[-1])} entries, but {sizes}{hint}")
    for i in range(n):
        mine = bc[bp[i]:bp[i + 1]], bv[bp[i]:bp[i + 1]]
        want = (expected.col_idx[expected.row_ptr[i]:expected.row_ptr[i + 1]],
                expected.val[expected.row_ptr[i]:expected.row_ptr[i + 1]])
        if np.array_equal(mine[0], want[0]) and np.array_equal(mine[1], want[1]):
            continue
        row = f"{what}, {row_label(i, lang)}"
        _row_message(row, mine, want, n, col[row_ptr[i]:row_ptr[i + 1]], i, "", lang)
    if bc.size != expected.nnz:                     # (every row right: cannot happen)
        raise AssertionError(f"{what}: {bc.size} entries, but the block has {expected.nnz}")


def _row_message(row: str, mine, want, n: int, row_cols, i: int, hint: str, lang: str):
    base = _base(lang)
    cols, vals = (np.asarray(a) for a in mine)
    want_cols, want_vals = want

    def shown(values):
        return "[" + ", ".join(str(int(c) + base) for c in values) + "]"

    extra = [int(c) for c in cols if c not in want_cols]
    missing = [int(c) for c in want_cols if c not in cols]
    if extra:
        c = extra[0]
        if c >= n and c in row_cols:
            close = (f" (a test `<= n_internal`? column {n + base} is the first external node)"
                     if c == n and lang != "fortran" and max(extra) == n else "")
            raise AssertionError(f"{row} keeps column {c + base}, an external node (the "
                                 f"internal nodes are the columns {base} .. {n - 1 + base}, the "
                                 f"external ones come after them): A_ii drops the couplings to "
                                 f"external nodes{close}{hint}")
        if lang == "fortran" and all(c + 1 in want_cols for c in cols if c not in want_cols):
            raise AssertionError(f"{row} is {shown(cols)}, expected {shown(want_cols)}: every "
                                 "column is one too small (0-based? in Fortran col and block_col "
                                 f"count from 1){hint}")
        raise AssertionError(f"{row} has column {c + base}, which is not in this row of the input "
                             f"(its columns: {shown(row_cols)}); expected {shown(want_cols)}"
                             f"{hint}")
    if missing:
        c = missing[0]
        if c == i:
            raise AssertionError(f"{row}: the diagonal entry (column {i + base}) is missing: "
                                 f"A_ii keeps every column of an internal node, the diagonal "
                                 f"included; expected the columns {shown(want_cols)}{hint}")
        close = (f" (in Fortran, the internal nodes are 1 .. n_internal: `col(k) <= n_internal`)"
                 if lang == "fortran" and c == n - 1 else "")
        raise AssertionError(f"{row} misses column {c + base}, an internal node (columns "
                             f"{base} .. {n - 1 + base}): it is kept; the row's columns are "
                             f"{shown(cols)}, expected {shown(want_cols)}{close}{hint}")
    if len(cols) != len(want_cols):
        raise AssertionError(f"{row} has the columns {shown(cols)}, expected {shown(want_cols)}: "
                             f"each kept entry once{hint}")
    if not np.array_equal(cols, want_cols):
        raise AssertionError(f"{row} has the columns in the order {shown(cols)}, expected "
                             f"{shown(want_cols)}: keep the entries in the order of the input's "
                             f"row (do not sort them){hint}")
    k = int(np.argmax(vals != want_vals))
    raise AssertionError(f"{row}: the value of column {int(cols[k]) + base} is "
                         f"{plain(vals[k])}, expected {plain(want_vals[k])}: each entry keeps its "
                         f"own value (val of the same position k as its column){hint}")


# --- task 2: the sweeps, compiled and run under mpiexec ------------------------------------------

ASDD_FILES = {"c": "asdd_apply.c", "fortran": "asdd_apply.f90", "python": "asdd_apply.py"}


def prepare_apply(source, lang: str) -> Path:
    """The file the driver loads: a shared library compiled (without MPI: the sweeps talk to the
    other ranks only through matvec) from a C or Fortran source, or the Python file itself once it
    is known to define asdd_apply and not to use mpi4py."""
    if lang not in LANGUAGES:
        raise AssertionError(f"LANGUAGE must be one of {', '.join(map(repr, LANGUAGES))}, "
                             f"not {lang!r}")
    if lang != "python":
        return compile_kernel(source, lang)
    path = check_python_source(source, "asdd_apply", ("local_solve", "matvec", "sweeps", "r"))
    line = mpi4py_import(path.read_text())
    if line is not None:
        raise AssertionError(
            f"{Path(source).name} imports mpi4py (line {line}): asdd_apply needs no MPI call of "
            "its own: matvec does the halo exchange (and the check counts it), local_solve needs "
            "none. Remove the MPI calls.")
    return path


def check_asdd_apply(source, lang: str, cases, apply_timeout: float = 20.0,
                     timeout: float = 120.0) -> None:
    """Run the learner's asdd_apply on every case, a list of (Case, sweeps) (all in one mpiexec
    job of max(ranks) processes): for every K in sweeps, z = the course's asdd-ic0 (Z_RTOL), K
    local solves, K - 1 products, r unchanged; then a PCG with it takes the course's iterations.
    AssertionError that says what happened."""
    path = prepare_apply(source, lang)
    cases = [(case, tuple(int(k) for k in sweeps)) for case, sweeps in cases]
    job = run_apply_job([(lang, path)], cases, apply_timeout, timeout)
    judge(job, cases, lang, apply_timeout)


def run_apply_job(variants, cases, apply_timeout: float = 20.0, timeout: float = 120.0):
    """The driver's job: every (lang, path) of variants (prepared by prepare_apply; "course", "-"
    for the course's sweeps) on every (Case, sweeps) of cases, one variant after the other."""
    return run_watched(["-m", "mpi4py", "-m", "course.grading.hybrid_driver",
                        *(str(word) for pair in variants for word in pair), "--",
                        *(f"{case.spec()}/{','.join(map(str, sweeps))}"
                          for case, sweeps in cases)],
                       max(case.ranks for case, _ in cases), timeout, apply_timeout)


def judge(job, cases, lang: str, apply_timeout: float, variant: int = 0) -> None:
    """AssertionError that says what went wrong in the job for its variant (None: the only one)."""
    raise_first_error(job, "asdd_apply", lambda k: _where(cases, k),
                      lambda stage: " (in the PCG solve that uses it as preconditioner)"
                      if stage == "pcg" else "")
    mine = [e for e in job.events if e.get("variant", 0) == variant]
    results = {e["case"]: e for e in mine if e["event"] == "result"}
    for k, (case, _) in enumerate(cases):
        if k in results:
            text = message(results[k], case, lang)
            if text is not None:
                raise AssertionError(text)
    started = [e for e in mine if e["event"] == "start"]
    running = started[-1]["case"] if started and started[-1]["case"] not in results else None
    if job.stopped:
        where = _where(cases, running) if running is not None else "(before any case began)"
        raise AssertionError(f"asdd_apply did not finish within {apply_timeout:g} s {where}, and "
                             "the job was stopped: an endless loop? Or ranks waiting for each "
                             "other in matvec: each call is a halo exchange, so every rank must "
                             "call it as often as the others (K - 1 times).")
    raise_if_cut_short(job, "asdd_apply", _where(cases, running), len(results) == len(cases))


def _where(cases: list, k: int | None) -> str:
    case = cases[k][0] if k is not None and k < len(cases) else None
    return f"on {case.describe()} ({case.ranks} ranks)" if case is not None else ""


SWEEPS = ("K sweeps: z = B r (a local solve, no product: z starts as 0, and A 0 = 0), then K - 1 "
          "times z = z + B (r - A z) (one product, one local solve each)")


def _times(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


def message(result: dict, case: Case, lang: str) -> str | None:
    """The message for the first thing wrong in one case's result (None: nothing)."""
    where = f"on {case.describe()} ({case.ranks} ranks)"
    passed = []
    for app in result["applications"]:
        k, what = app["sweeps"], verdict(app)
        if what is None:
            passed.append(k)
            continue
        if what == "uneven":
            return (f"{where}, K = {k}: the ranks called local_solve or matvec different numbers "
                    "of times: every rank makes the same sweeps (matvec is a halo exchange with "
                    "the neighbours)")
        if what == "r_changed":
            how = ("r is const: a cast that writes through it" if lang != "python" else
                   "r -= ... (or r[:] = ...) writes into the caller's array")
            return (f"{where}, K = {k}: asdd_apply changed r, its input ({how}): compute the "
                    "residual t = r - A z in a work array of your own; the CG that calls the "
                    "preconditioner still needs r")
        if what == "solves":
            got = app["solves"]
            why = ""
            if got == k + 1:
                why = ": one too many (a solve before the loop AND one in every one of K sweeps?)"
            elif got == k - 1:
                why = (": one too few: did you start from z = 0 and make K - 1 corrections? The "
                       "first sweep is z = B r")
            return (f"{where}: {_times(got, 'local solve')} for K = {k}, where K sweeps make "
                    f"exactly {k}{why}. {SWEEPS}.")
        if what == "products":
            got = app["products"]
            why = ""
            if got == k:
                why = ": the first sweep needs none, z starts as B r"
            elif got > k:
                why = ": A z once per correction, not more"
            return (f"{where}: {_times(got, 'product')} for K = {k}{why} (K sweeps make K - 1 = "
                    f"{k - 1} calls of matvec, each a halo exchange). {SWEEPS}.")
        worst = app.get("worst")
        detail = ""
        if worst is not None:
            _, rank, i, mine, theirs = worst
            shown = "NaN" if np.isnan(mine) else plain(mine)
            detail = (f" (rank {rank}: {entry('z', i, lang)} is {shown}, expected "
                      f"{plain(theirs)})")
        if worst is not None and not np.isfinite(worst[3]):
            hint = (" z is output only and holds garbage on entry (here NaN): set it (z = B r), "
                    "do not add to it, in the first sweep")
        elif k == 1:
            hint = " With K = 1, z = B r: local_solve(r), nothing more."
        elif 1 in passed:
            hint = (" K = 1 is right, so look at the corrections: z = z + B (r - A z), the "
                    "correction ADDED to z (not put in its place, nor subtracted), with the "
                    "residual of the current z.")
        else:
            hint = f" {SWEEPS}."
        off = ("z holds NaN or infinity" if not np.isfinite(app["difference"]) else
               f"z differs from the course's asdd-ic0 by {app['difference']:.1e} (relative: the "
               f"check allows {Z_RTOL:g})")
        return f"{where}, K = {k}: {off}{detail}.{hint}"
    if "iterations" in result and result["iterations"] != result["reference_iterations"]:
        return (f"{where}: PCG with your asdd_apply (K = {result['pcg_sweeps']}) as preconditioner "
                f"took {result['iterations']} iterations where the course's asdd-ic0 takes "
                f"{result['reference_iterations']} (tol {TOL:g}, at most {MAX_ITER}): is z "
                "different when it is called again (a state kept between calls)?")
    return None
