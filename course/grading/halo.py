"""Checks for the exercise of lecture 05_halo: the learner's local tables (Python) and halo exchange
(C, Fortran or mpi4py), against course.parallel.local and course.parallel.halo.

    check_local_tables(local_tables, [Case(3, "metis", (5, 4, 3))])
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
from .exercise import plain, references_blocked

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
    computes these tables, private helpers included) is blocked."""
    for case in cases:
        mesh = case.mesh()
        owner = case.owner(mesh)
        for rank in range(case.ranks):
            expected = local_data(mesh, owner, rank)
            with references_blocked(local_module):
                got = local_tables(np.array(mesh.elements), owner.copy(), rank)
            _compare_tables(got, expected, owner, f"rank {rank} of {case.describe()}")


def _show(values, keep: int = 12) -> str:
    values = [int(v) for v in np.ravel(values)]
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


def _compare_tables(got, expected: LocalData, owner: np.ndarray, where: str) -> None:
    if not isinstance(got, dict) or any(name not in got for name in TABLES):
        missing = [n for n in TABLES if not isinstance(got, dict) or n not in got]
        raise AssertionError(f"local_tables must return a dict with the keys {', '.join(TABLES)}; "
                             f"for {where} it returned {type(got).__name__} without "
                             f"{', '.join(missing)}")
    n = expected.n_internal
    if not isinstance(got["n_internal"], (int, np.integer)) or got["n_internal"] != n:
        raise AssertionError(f"local_tables for {where}: n_internal is "
                             f"{_shown(got['n_internal'])}, "
                             f"expected {n} (the number of nodes this rank owns)")
    _compare_global_ids(_as_ints(got, "global_ids", where), expected, owner, where)
    for name, hint in (
            ("neighbours", "the owners of the external nodes, each once, ascending"),
            ("import_ptr", "the offsets of each neighbour's external nodes in the list after the "
                           "internal ones: 0, then a running sum, one more entry than neighbours"),
            ("export_ptr", "the offsets of each neighbour's share in export_index: 0, then a "
                           "running sum of how many internal nodes each neighbour needs")):
        values = _as_ints(got, name, where)
        if not np.array_equal(values, getattr(expected, name)):
            raise AssertionError(f"local_tables for {where}: {name} is {_show(values)}, expected "
                                 f"{_show(getattr(expected, name))} ({hint})")
    export_index = _as_ints(got, "export_index", where)
    for m, q in enumerate(expected.neighbours):
        want = expected.exports_to(m)
        have = export_index[expected.export_ptr[m]:expected.export_ptr[m + 1]]
        if not np.array_equal(have, want):
            raise AssertionError(
                f"local_tables for {where}: export_index for neighbour {q} (local indices "
                f"export_index[{expected.export_ptr[m]}:{expected.export_ptr[m + 1]}]) is "
                f"{_show(have)}, expected {_show(want)}: the internal nodes of this rank that "
                f"share an element with a node of rank {q}, as LOCAL indices, in the order rank "
                f"{q} numbers them (ascending global number)")
    if export_index.size != expected.export_index.size:
        raise AssertionError(f"local_tables for {where}: export_index has {export_index.size} "
                             f"entries, expected export_ptr[-1] = {expected.export_index.size}")


def _compare_global_ids(got: np.ndarray, expected: LocalData, owner, where: str) -> None:
    want, n = expected.global_ids, expected.n_internal
    if np.array_equal(got, want):
        return
    what = f"local_tables for {where}: global_ids is wrong"
    if not np.array_equal(got[:n], want[:n]):
        raise AssertionError(f"{what} in its first n_internal = {n} entries: {_show(got[:n])}, "
                             f"expected {_show(want[:n])} (the nodes this rank owns, ascending)")
    got_ext, want_ext = got[n:], want[n:]
    missing = np.setdiff1d(want_ext, got_ext)
    extra = np.setdiff1d(got_ext, want_ext)
    if missing.size:
        node = int(missing[0])
        raise AssertionError(f"{what}: {missing.size} external node(s) are missing, e.g. node "
                             f"{node} (owned by rank {owner[node]}): every corner of an element "
                             "that has an internal node, and that another rank owns, is external")
    if extra.size or got_ext.size != want_ext.size:
        node = int(extra[0]) if extra.size else None
        detail = (f"e.g. node {node} (owned by rank {owner[node]})" if node is not None
                  else "some nodes appear twice")
        raise AssertionError(f"{what}: its external part holds {got_ext.size} nodes, expected "
                             f"{want_ext.size} ({detail}): the external nodes are the corners, "
                             "owned by other ranks, of the elements with an internal node, "
                             "each once")
    raise AssertionError(f"{what}: the right external nodes in the wrong order: {_show(got_ext)} "
                         f"(owners {_show(owner[got_ext])}), expected {_show(want_ext)} (owners "
                         f"{_show(owner[want_ext])}): group them by owner, ranks ascending, and "
                         "sort them by global number within an owner")


# --- task 2: the exchange, compiled and run under mpiexec ----------------------------------------

def prepare_exchange(source, lang: str) -> Path:
    """The file the driver loads: the shared library compiled with mpicc / mpif90 from a C or
    Fortran source, or the Python file itself once it is known to define halo_exchange.
    AssertionError with the compiler's (or Python's) message otherwise."""
    from .exercise import compile_kernel

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
