"""Checks for the exercise of lecture 05_halo: the learner's local tables (Python, C or Fortran) and
halo exchange (C, Fortran or mpi4py), against course.parallel.local and course.parallel.halo.

    check_local_tables(local_tables, [Case(3, "metis", (5, 4, 3))])
    check_local_tables(compiled_local_tables("local_tables.f90", "fortran"), cases)
    check_halo_exchange("halo_exchange.c", "c", [Case(2, "blocks", (4, 3, 2))])

Each raises AssertionError with a message for the learner when something is wrong. The exchange
never runs in the calling process (a notebook's kernel): it runs under `mpiexec` in a subprocess
(course.grading.halo_driver), which is stopped when an exchange takes too long (a deadlock)
or when a rank crashes, so that the caller always gets an answer, never a hang.

A Case is a partition of a box mesh that every check builds the same way:

    Case(ranks, partition, (NX, NY, NZ), dims=(PX, PY, PZ), seed=0)

partition is "blocks" (dims: the blocks along x, y, z; default course's choice), "metis" or
"random" (every node to a random rank, from seed: many neighbours, nothing box-shaped).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..fem.mesh import BoxMesh, box_mesh
from ..parallel import local as local_module
from ..parallel.local import LocalData, local_data
from ..parallel.mpi_job import Job, run_watched
from ..parallel.partition import make_partition
from . import halo_messages as messages
from . import mpi_monitor
from .exercise import (compile_kernel, compiled_language, entry, plain, references_blocked,
                       run_isolated)

LANGUAGES = ("c", "fortran", "python")
REPEAT = 3                          # exchanges per case, each with new values


# --- the partitions ------------------------------------------------------------------------------

@dataclass(frozen=True)
class Case:
    ranks: int
    partition: str
    size: tuple
    dims: tuple | None = None
    seed: int = 0

    def __post_init__(self):
        if self.partition not in ("blocks", "metis", "random"):
            raise ValueError(f"partition must be blocks, metis or random, not {self.partition!r}")
        object.__setattr__(self, "size", tuple(int(n) for n in self.size))
        if self.dims is not None:
            object.__setattr__(self, "dims", tuple(int(n) for n in self.dims))

    def mesh(self) -> BoxMesh:
        return box_mesh(*self.size)

    def owner(self, mesh: BoxMesh) -> np.ndarray:
        if self.partition == "random":
            return random_owner(mesh.n_node, self.ranks, self.seed)
        return make_partition(mesh, self.partition, self.ranks, self.dims)

    def describe(self) -> str:
        mesh = " x ".join(map(str, self.size))
        if self.partition == "metis":
            how = f"cut by METIS into {self.ranks} parts"
        elif self.partition == "random":
            how = f"with every node given to one of {self.ranks} ranks at random"
        elif self.dims is None:
            how = f"cut into {self.ranks} blocks"
        else:
            how = f"cut into {' x '.join(map(str, self.dims))} blocks"
        return f"the {mesh} element mesh {how}"

    def spec(self) -> str:
        """One command-line word: RANKS:PARTITION:NXxNYxNZ:PXxPYxPZ:SEED."""
        dims = "x".join(map(str, self.dims)) if self.dims else "-"
        return f"{self.ranks}:{self.partition}:{'x'.join(map(str, self.size))}:{dims}:{self.seed}"

    @classmethod
    def parse(cls, spec: str) -> "Case":
        ranks, partition, size, dims, seed = spec.split(":")
        return cls(int(ranks), partition, tuple(int(n) for n in size.split("x")),
                   None if dims == "-" else tuple(int(n) for n in dims.split("x")), int(seed))


def random_owner(n_node: int, ranks: int, seed: int) -> np.ndarray:
    """Every node to a random rank (each rank owns at least one node)."""
    owner = np.random.default_rng(seed).integers(0, ranks, n_node)
    owner[:ranks] = np.arange(ranks)
    return owner.astype(np.int32)


# --- task 1: the local tables --------------------------------------------------------------------

TABLES = ("global_ids", "n_internal", "neighbours", "import_ptr", "export_ptr", "export_index")


def check_local_tables(local_tables, cases) -> None:
    """Call local_tables(elements, owner, rank) for every rank of every case and compare each
    table with course.parallel.local.local_data; AssertionError naming the first wrong table.
    While the learner's function runs, every function of course.parallel.local (the module that
    computes these tables, private helpers included) is blocked. A C or Fortran answer comes as
    the callable of compiled_local_tables: its messages show the numbers as the learner's arrays
    hold them (1-based in Fortran)."""
    lang = getattr(local_tables, "lang", "python")
    for case in cases:
        mesh = case.mesh()
        owner = case.owner(mesh)
        for rank in range(case.ranks):
            where = f"rank {rank} of {case.describe()}"
            expected = local_data(mesh, owner, rank)
            try:
                with references_blocked(local_module):
                    got = local_tables(np.array(mesh.elements), owner.copy(), rank)
            except AssertionError as err:
                if lang == "python":
                    raise
                raise AssertionError(f"local_tables for {where}: {err}") from None
            try:
                _compare_tables(got, expected, owner, where, lang)
            except AssertionError as err:
                if lang != "fortran":
                    raise
                raise AssertionError(f"{err} {FORTRAN_NUMBERS}") from None


FORTRAN_NUMBERS = ("[the numbers as your Fortran arrays hold them: nodes, offsets and local "
                   "indices from 1, ranks from 0]")


def _show(values, keep: int = 12, base: int = 0) -> str:
    values = [int(v) + base for v in np.ravel(values)]
    more = f", ... ({len(values)} in all)" if len(values) > keep else ""
    return "[" + ", ".join(map(str, values[:keep])) + more + "]"


def _shown(value) -> str:
    """A value for a message: a number plainly (never np.int64(4)), anything else by its type and
    (short) text."""
    try:
        return plain(value)
    except (TypeError, ValueError):
        text = str(value).replace("\n", " ")
        return f"{type(value).__name__} {text[:60]}{'...' if len(text) > 60 else ''}"


def _as_ints(got: dict, name: str, where: str) -> np.ndarray:
    try:
        values = np.asarray(got[name])
        if values.ndim != 1 or not (values.size == 0 or np.issubdtype(values.dtype, np.integer)):
            raise ValueError
    except (TypeError, ValueError):
        raise AssertionError(f"local_tables for {where}: {name} must be a 1-D array (or list) of "
                             f"integers, got {_shown(got[name])}") from None
    return values.astype(np.int64)


def _one_too_small(got, want, lang: str) -> str:
    """A hint for Fortran tables that count from 0."""
    if lang == "fortran" and len(got) == len(want) and len(got) and np.array_equal(got + 1, want):
        return ": every entry is one too small (0-based? in Fortran they count from 1)"
    return ""


def _compare_tables(got, expected: LocalData, owner: np.ndarray, where: str,
                    lang: str = "python") -> None:
    """got (0-based, as the Python answer and compiled_local_tables give it) against expected;
    messages with the numbers shifted to the learner's base (lang: 1-based in Fortran)."""
    if not isinstance(got, dict) or any(name not in got for name in TABLES):
        missing = [n for n in TABLES if not isinstance(got, dict) or n not in got]
        raise AssertionError(f"local_tables must return a dict with the keys {', '.join(TABLES)}; "
                             f"for {where} it returned {type(got).__name__} without "
                             f"{', '.join(missing)}")
    base = 1 if lang == "fortran" else 0
    plus = "1 + " if base else ""
    n = expected.n_internal
    if not isinstance(got["n_internal"], (int, np.integer)) or got["n_internal"] != n:
        name = "n_internal" if lang == "python" else f"n_internal ({entry('counts', 0, lang)})"
        raise AssertionError(f"local_tables for {where}: {name} is {_shown(got['n_internal'])}, "
                             f"expected {n} (the number of nodes this rank owns)")
    _compare_global_ids(_as_ints(got, "global_ids", where), expected, owner, where, base)
    for name, shift, hint in (
            ("neighbours", 0, "the owners of the external nodes, each once, ascending"),
            ("import_ptr", base, f"the offsets of each neighbour's external nodes in the list "
                                 f"after the internal ones: {base}, then {plus}a running sum, one "
                                 f"more entry than neighbours"),
            ("export_ptr", base, f"the offsets of each neighbour's share in export_index: {base}, "
                                 f"then {plus}a running sum of how many internal nodes each "
                                 f"neighbour needs")):
        values, want = _as_ints(got, name, where), getattr(expected, name)
        if not np.array_equal(values, want):
            raise AssertionError(f"local_tables for {where}: {name} is "
                                 f"{_show(values, base=shift)}, expected "
                                 f"{_show(want, base=shift)} ({hint})"
                                 f"{_one_too_small(values, want, lang)}")
    export_index = _as_ints(got, "export_index", where)
    for m, q in enumerate(expected.neighbours):
        want = expected.exports_to(m)
        start, end = int(expected.export_ptr[m]), int(expected.export_ptr[m + 1])
        have = export_index[start:end]
        part = f"export_index({start + 1}:{end})" if lang == "fortran" else \
            f"export_index[{start}:{end}]"
        if not np.array_equal(have, want):
            raise AssertionError(
                f"local_tables for {where}: export_index for neighbour {q} (local indices "
                f"{part}) is {_show(have, base=base)}, expected {_show(want, base=base)}: the "
                f"internal nodes of this rank that share an element with a node of rank {q}, as "
                f"LOCAL indices, in the order rank {q} numbers them (ascending global number)"
                f"{_one_too_small(have, want, lang)}")
    if export_index.size != expected.export_index.size:
        last = "export_ptr(n_neighbours + 1) - 1" if lang == "fortran" else "export_ptr[-1]"
        raise AssertionError(f"local_tables for {where}: export_index has {export_index.size} "
                             f"entries, expected {last} = {expected.export_index.size}")


def _compare_global_ids(got: np.ndarray, expected: LocalData, owner, where: str,
                        base: int = 0) -> None:
    want, n = expected.global_ids, expected.n_internal
    if np.array_equal(got, want):
        return
    what = f"local_tables for {where}: global_ids is wrong"
    if not np.array_equal(got[:n], want[:n]):
        hint = _one_too_small(got[:n], want[:n], "fortran" if base else "python")
        raise AssertionError(f"{what} in its first n_internal = {n} entries: "
                             f"{_show(got[:n], base=base)}, expected {_show(want[:n], base=base)} "
                             f"(the nodes this rank owns, ascending){hint}")
    got_ext, want_ext = got[n:], want[n:]
    missing = np.setdiff1d(want_ext, got_ext)
    extra = np.setdiff1d(got_ext, want_ext)
    if missing.size:
        node = int(missing[0])
        raise AssertionError(f"{what}: {missing.size} external node(s) are missing, e.g. node "
                             f"{node + base} (owned by rank {owner[node]}): every corner of an "
                             "element that has an internal node, and that another rank owns, is "
                             "external")
    if extra.size or got_ext.size != want_ext.size:
        node = int(extra[0]) if extra.size else None
        detail = (f"e.g. node {node + base}" + (f" (owned by rank {owner[node]})"
                                                if 0 <= node < owner.size else "")
                  if node is not None else "some nodes appear twice")
        raise AssertionError(f"{what}: its external part holds {got_ext.size} nodes, expected "
                             f"{want_ext.size} ({detail}): the external nodes are the corners, "
                             "owned by other ranks, of the elements with an internal node, "
                             "each once")
    raise AssertionError(f"{what}: the right external nodes in the wrong order: "
                         f"{_show(got_ext, base=base)} (owners {_show(owner[got_ext])}), expected "
                         f"{_show(want_ext, base=base)} (owners {_show(owner[want_ext])}): group "
                         "them by owner, ranks ascending, and sort them by global number within "
                         "an owner")


# the C and Fortran answer: the tables written into arrays the caller gives, with room to spare
UNSET = -1                          # what the output arrays hold before the call
GUARD = 8                           # entries past each array's room, which must stay UNSET
OUTPUTS = ("global_ids", "counts", "neighbours", "import_ptr", "export_ptr", "export_index")


def output_room(n_node: int, n_rank: int) -> dict:
    """How many entries each output array of the C and Fortran local_tables has room for: every
    local node once; 3 counts; every other rank once (and one offset more); every internal node
    once for every neighbour (at most n_node * n_rank)."""
    return dict(zip(OUTPUTS, (n_node, 3, n_rank, n_rank + 1, n_rank + 1, n_node * n_rank)))


def compiled_local_tables(source, lang: str, timeout: float = 10.0):
    """The learner's C or Fortran local_tables (compiled here, called in a child process: a
    crash or an endless loop is an AssertionError) as a Python local_tables(elements, owner, rank)
    that returns the dict of the Python answer, 0-based. The compiled function:

        void local_tables(int n_elem, const int *elements /* 8 per element */, int n_node,
                          const int *owner, int n_rank, int rank, int *global_ids,
                          int *counts /* n_internal, n_local, n_neighbours */, int *neighbours,
                          int *import_ptr, int *export_ptr, int *export_index)

    the arrays with the room of output_room. In Fortran (bind(C), scalars by value) the node
    numbers in elements and global_ids, the offsets and the local indices in export_index count
    from 1; ranks count from 0. AssertionError when the counts are out of range or the function
    writes past an array's room."""
    compiled_language(lang)
    lib = compile_kernel(source, lang)
    base = 1 if lang == "fortran" else 0

    def local_tables(elements, owner, rank):
        elements = np.ascontiguousarray(elements, dtype=np.int32) + base
        owner = np.ascontiguousarray(owner, dtype=np.int32)
        n_node, n_rank = owner.size, int(owner.max()) + 1
        room = output_room(n_node, n_rank)
        outputs = [np.full(room[name] + GUARD, UNSET, dtype=np.int32) for name in OUTPUTS]
        args = [elements.shape[0], elements, n_node, owner, n_rank, int(rank), *outputs]
        (run,) = run_isolated(lib, "local_tables", args, timeout=timeout,
                              keep=range(6, 6 + len(OUTPUTS)))
        got = {}
        for name, values in zip(OUTPUTS, run.arrays[6:]):
            if np.any(values[room[name]:] != UNSET):
                raise AssertionError(f"{name} has room for {room[name]} entries, and your "
                                     f"function wrote past them, into "
                                     f"{entry(name, room[name], lang)}")
            got[name] = values[:room[name]]
        return _tables_of(got, n_node, n_rank, base, lang)

    local_tables.lang = lang
    return local_tables


def _tables_of(got: dict, n_node: int, n_rank: int, base: int, lang: str) -> dict:
    """The 0-based tables of the Python answer from the arrays a compiled local_tables filled."""
    counts = got["counts"][:3]
    if np.all(counts == UNSET):
        raise AssertionError("your function wrote nothing into counts (n_internal, n_local, "
                             "n_neighbours)")
    n_internal, n_local, n_nb = (int(c) for c in counts)
    for k, (name, value, high) in enumerate((("n_local", n_local, n_node),
                                             ("n_neighbours", n_nb, n_rank - 1))):
        if not 0 <= value <= high:
            raise AssertionError(f"n_internal, n_local, n_neighbours = "
                                 f"{n_internal}, {n_local}, {n_nb} in counts: {name} "
                                 f"({entry('counts', k + 1, lang)}) must be between 0 and {high}")
    export_ptr = got["export_ptr"][:n_nb + 1] - base
    end = int(np.clip(export_ptr[-1], 0, got["export_index"].size))
    return {"global_ids": got["global_ids"][:n_local] - base, "n_internal": n_internal,
            "neighbours": got["neighbours"][:n_nb],
            "import_ptr": got["import_ptr"][:n_nb + 1] - base, "export_ptr": export_ptr,
            "export_index": got["export_index"][:end] - base}


# --- task 2: the exchange, compiled and run under mpiexec ----------------------------------------

def prepare_exchange(source, lang: str) -> Path:
    """The file the driver loads: the shared library compiled with mpicc / mpif90 from a C or
    Fortran source, or the Python file itself once it is known to define halo_exchange.
    AssertionError with the compiler's (or Python's) message otherwise."""
    if lang not in LANGUAGES:
        raise AssertionError(f"LANGUAGE must be one of {', '.join(map(repr, LANGUAGES))}, "
                             f"not {lang!r}")
    if lang != "python":
        return compile_kernel(source, lang, mpi=True)
    return check_python_source(source, "halo_exchange", ("comm", "neighbours", "import_ptr",
                                                         "import_index", "export_ptr",
                                                         "export_index", "x"))


def check_python_source(source, function: str, arguments: tuple) -> Path:
    """The resolved path of the learner's Python file once it parses and defines `function`
    with len(arguments) arguments; AssertionError that says what is wrong otherwise."""
    source = Path(source)
    if not source.exists():
        raise AssertionError(f"{source} does not exist: run the %%writefile cell above first")
    try:
        tree = ast.parse(source.read_text(), filename=str(source))
    except SyntaxError as err:
        raise AssertionError(f"{source} is not valid Python: line {err.lineno}: {err.msg}") \
            from None
    functions = {node.name: node for node in tree.body if isinstance(node, ast.FunctionDef)}
    signature = f"{function}({', '.join(arguments)})"
    if function not in functions:
        raise AssertionError(f"{source} must define the function {signature}")
    if len(functions[function].args.args) != len(arguments):
        raise AssertionError(f"{source}: {function} must take {len(arguments)} arguments: "
                             f"{signature}")
    return source.resolve()


def run_driver(args: list, ranks: int, timeout: float, exchange_timeout: float,
               monitor: bool = False) -> Job:
    """course.grading.halo_driver ARGS on `ranks` MPI processes, stopped when an exchange
    does not report within exchange_timeout seconds, or the whole job within timeout. monitor:
    with the MPI monitor (course.grading.mpi_monitor) preloaded, where it can be built."""
    library = mpi_monitor.library() if monitor else None
    return run_watched(["-m", "mpi4py", "-m", "course.grading.halo_driver", *args], ranks,
                       timeout, exchange_timeout, preload=library,
                       env={mpi_monitor.ENVIRONMENT: str(library)} if library else None)


def check_halo_exchange(source, lang: str, cases, exchange_timeout: float = 4.0,
                        timeout: float = 60.0) -> None:
    """Check the learner's halo_exchange (C, Fortran: the signature of src_c/05_halo/halo.h;
    Python: halo_exchange(comm, neighbours, import_ptr, import_index, export_ptr, export_index,
    x)) on every case: on each rank, 3 exchanges with new values must fill the external entries
    with bitwise the values the course's Halo gives and leave the internal ones alone, on the
    communicator given (its ranks are not numbered as in MPI_COMM_WORLD), and complete every
    request they make. All the cases run in one mpiexec job of max(ranks) processes, with the MPI
    monitor (course.grading.mpi_monitor) where it can be built. AssertionError that says what
    happened: wrong values (which rank, which neighbour, how many), requests left outstanding, a
    call on another communicator than the one given, an MPI error (a receive smaller than its
    message), a deadlock, a crash, an exception."""
    path = prepare_exchange(source, lang)
    cases = list(cases)
    job = run_driver(["check", lang, path, *(case.spec() for case in cases)],
                     max(case.ranks for case in cases), timeout, exchange_timeout, monitor=True)
    _judge(job, cases, lang, exchange_timeout)


def _judge(job: Job, cases: list, lang: str, exchange_timeout: float) -> None:
    results = {e["case"]: e for e in job.events if e["event"] == "result"}
    started = [e for e in job.events if e["event"] == "start"]
    running = started[-1] if started and started[-1]["case"] not in results else None
    seen = mpi_monitor.lines(job.output)
    # a call on MPI_COMM_WORLD (the monitor ended the job) or on another communicator than the
    # one given (the likely cause of what follows)
    foreign = next((e for e in seen if e["event"] == "foreign_comm"), None)
    if foreign is not None and foreign["comm"] == "MPI_COMM_WORLD":
        raise AssertionError(messages.foreign_comm(foreign, running, cases))
    cause = messages.foreign_comm(foreign, running, cases) + " " if foreign is not None else ""
    mpi_errors = [e for e in seen if e["event"] == "mpi_error"]
    if mpi_errors:
        case = messages.case_of(running, cases)
        raise AssertionError(cause + messages.mpi_error(
            mpi_errors[0], case, lang, _import_count(case, mpi_errors[0])))
    errors = [e for e in job.events if e["event"] == "error"]
    if errors:
        raise AssertionError(cause + messages.exception(errors[0], cases))
    for k, case in enumerate(cases):
        if k not in results:
            continue
        ranks = results[k]["ranks"]
        if any(not r["ok"] for r in ranks):
            raise AssertionError(cause + messages.wrong_values(results[k], case, lang, REPEAT))
        if any("world_message" in r for r in ranks):
            raise AssertionError(messages.world_message(results[k], case))
        if any("leaks" in r for r in ranks):
            raise AssertionError(cause + messages.leaks(results[k], case, lang, REPEAT))
    if job.stopped:
        raise AssertionError(cause + messages.deadlock(running, cases, exchange_timeout,
                                                       job.output))
    if job.returncode != 0 or len(results) != len(cases):
        raise AssertionError(cause + messages.crash(running, cases, job.returncode, job.output,
                                                    lang))


def _import_count(case, event: dict) -> int | None:
    """How many values rank event["rank"] of `case` receives from rank event["peer"] (None: that
    rank is no neighbour of it, or the case is not known)."""
    if case is None or not 0 <= event.get("rank", -1) < case.ranks:
        return None
    mesh = case.mesh()
    local = local_data(mesh, case.owner(mesh), event["rank"])
    where = np.flatnonzero(local.neighbours == event.get("peer"))
    return int(np.diff(local.import_ptr)[where[0]]) if where.size else None


# --- task 3 (not graded): the distributed solve with the learner's exchange ----------------------

def solve_with_exchange(source, lang: str, ranks: int = 4, size=(12, 10, 8),
                        partition: str = "metis", timeout: float = 120.0) -> dict:
    """Solve the model problem of 02_fem3d on `ranks` MPI processes with the learner's
    halo_exchange (lang "course": the course's Halo) and compare with the serial solve. Returns
    rank 0's summary: iterations (parallel, serial), the largest relative difference."""
    path = "-" if lang == "course" else prepare_exchange(source, lang)
    job = run_driver(["solve", lang, path, *size, partition], ranks, timeout, timeout)
    solved = [e for e in job.events if e["event"] == "solve"]
    if solved:
        return solved[0]
    _judge(job, [Case(ranks, partition, size)], lang, timeout)
    raise AssertionError(f"the distributed solve did not report a result:\n{job.output[-2000:]}")
