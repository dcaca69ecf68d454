"""The learner's halo exchange under mpiexec (started by course.grading.halo, never imported by
a notebook's kernel):

    mpiexec -n P python -m mpi4py -m course.grading.halo_driver check LANG FILE CASE...
    mpiexec -n P python -m mpi4py -m course.grading.halo_driver solve LANG FILE NX NY NZ PART

LANG is c or fortran (FILE: the shared library compiled from the learner's source), python (FILE:
the learner's halo_exchange.py) or, for solve, course (the course's own Halo). A CASE is written by
grading.Case.spec. The cases run one after the other, each on RANKS ranks of the job, in a
communicator of their own whose ranks are those of MPI_COMM_WORLD rotated (no rank keeps its world
number; see case_comm); each case exchanges 3 times, with new values each time, and compares with
the course's Halo bit for bit. The learner's exchange must use the communicator it is given: while
it runs, every rank also waits for any message on MPI_COMM_WORLD (other traffic, which swallows a
message the learner sends there), and the MPI monitor (course.grading.mpi_monitor, preloaded by
the caller) counts the requests the call leaves outstanding. Python: the course's halo module is
blocked and mpi4py's pickling (lower-case) calls refuse, on every communicator.

Rank 0 reports on stdout, one line per event (course.parallel.mpi_job.report):

    {"event": "start", "case": k, "largest_message": bytes}    the exchanges of case k begin
    {"event": "result", "case": k, "ranks": [...]}             one report per rank
    {"event": "error", "case": k, "rank": r, "stage": "load" or "exchange", "error": "..."}
                                    the learner's code raised (on any rank)
    {"event": "solve", ...}                                    the result of `solve`

After an error the job is aborted; after a wrong result (or requests left outstanding, or a
message on MPI_COMM_WORLD) the remaining cases are skipped.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import pickle
import sys
import traceback
from pathlib import Path

import numpy as np
from mpi4py import MPI

from ..fem.mesh import box_mesh
from ..parallel import halo as halo_module
from ..parallel.halo import CompiledExchange, Halo, load_halo_exchange
from ..parallel.local import LocalData, local_data
from ..parallel.mpi_job import report
from .exercise import references_blocked
from .halo import REPEAT, Case
from .halo_messages import world_to_case_rank
from .mpi_monitor import LINE as MONITOR_LINE
from .mpi_monitor import Window

PACKAGE = Path(__file__).resolve().parents[1]          # the course package: not the learner's code


# --- the learner's exchange behind the interface of course.parallel.halo.Halo (update(x)) -------

PICKLING = ("the lower-case mpi4py calls (comm.isend, comm.recv, comm.alltoall, comm.allgather, "
            "comm.bcast, ...) pickle Python objects: every value is serialised into a byte "
            "string, copied and unpickled on the other side. This exercise is about the "
            "buffer-based communication of the lecture, in which the values go straight from a "
            "contiguous NumPy array into the receiver's: use the upper-case calls (Irecv, Isend, "
            "Waitall, ...) on NumPy arrays")


def _refuse_pickling(*args, **kwargs):
    raise TypeError(PICKLING)


@contextlib.contextmanager
def no_pickling():
    """mpi4py's lower-case calls refuse while the learner's code runs, on every communicator
    (the one given, MPI.COMM_WORLD, one the learner makes): they all pickle through MPI.pickle."""
    protocol = MPI.pickle.PROTOCOL
    MPI.pickle.__init__(_refuse_pickling, _refuse_pickling)
    try:
        yield
    finally:
        MPI.pickle.__init__(pickle.dumps, pickle.loads, protocol)


class PythonExchange:
    """halo_exchange(comm, neighbours, import_ptr, import_index, export_ptr, export_index, x) of
    the learner's Python file; every call gets fresh copies of the tables."""

    def __init__(self, function, local: LocalData, comm):
        self.function, self.local, self.comm = function, local, comm

    def update(self, x: np.ndarray) -> None:
        loc = self.local
        # the course's own exchange (every function of course.parallel.halo, private helpers
        # such as Halo._update_p2p included) is blocked, and pickling refused
        with references_blocked(halo_module), no_pickling():
            self.function(self.comm, loc.neighbours.copy(), loc.import_ptr.copy(),
                          loc.import_index.copy(), loc.export_ptr.copy(), loc.export_index.copy(),
                          x)


def exchange_factory(lang: str, path: str):
    """(local, comm) -> an object with update(x): the learner's exchange (or the course's)."""
    if lang == "course":
        return lambda local, comm: Halo(local, comm)
    if lang == "python":
        spec = importlib.util.spec_from_file_location("learner_halo_exchange", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return lambda local, comm: PythonExchange(module.halo_exchange, local, comm)
    try:
        function = load_halo_exchange(path)
    except AttributeError:
        raise AttributeError("the compiled file has no function halo_exchange" + (
            ' (Fortran: bind(C, name="halo_exchange"))' if lang == "fortran" else "")) from None
    return lambda local, comm: CompiledExchange(function, lang == "fortran", local, comm)


def guarded(world, case: int, step, stage: str = "exchange", rank: int | None = None):
    """step(); if the learner's code raises (stage "load": while the file is loaded), report it
    (as on `rank`: the rank in the learner's communicator; default, the rank in world) and abort
    the whole job (the other ranks may be waiting for this one in an exchange)."""
    try:
        return step()
    except Exception as err:        # noqa: BLE001 - anything the learner's code raises
        frames = [f for f in traceback.extract_tb(err.__traceback__)     # the learner's lines
                  if f.line and not Path(f.filename).resolve().is_relative_to(PACKAGE)]
        where = f" (line {frames[-1].lineno}: {frames[-1].line})" if frames else ""
        said = f": {err}" if str(err) else ""
        report(event="error", case=case, rank=world.Get_rank() if rank is None else rank,
               stage=stage, error=f"{type(err).__name__}{said}{where}")
        world.Abort(1)


# --- check ---------------------------------------------------------------------------------------

def owner_values(local: LocalData, repeat: int) -> np.ndarray:
    """The local vector before an exchange: internal entries hold values that only their owner
    knows (new in every repeat), external entries NaN."""
    x = np.full(local.n_local, np.nan)
    ids = local.global_ids[:local.n_internal].astype(float)
    x[:local.n_internal] = ids + np.sin(0.37 * ids + repeat) + 1000.0 * repeat
    return x


def differences(local: LocalData, x: np.ndarray, expected: np.ndarray) -> dict | None:
    """What is wrong in x after one exchange (None: nothing): internal entries changed, and per
    neighbour the wrong external values, and how many of them were left untouched (NaN)."""
    wrong = x.view(np.uint64) != expected.view(np.uint64)
    if not wrong.any():
        return None
    per_neighbour = []
    for m, q in enumerate(local.neighbours):
        mine = local.imports_from(m)
        if wrong[mine].any():
            per_neighbour.append({"rank": int(q), "wrong": int(wrong[mine].sum()),
                                  "of": int(mine.size),
                                  "untouched": int(np.isnan(x[mine]).sum())})
    return {"internal_changed": int(wrong[:local.n_internal].sum()),
            "n_internal": local.n_internal, "neighbours": per_neighbour}


def case_comm(world, ranks: int):
    """The communicator of a case: `ranks` ranks of world, rotated: comm rank r is world rank
    r + 1 (modulo the size of world), so no rank keeps its world number, and with fewer ranks than
    the job, world rank 0 is not in it (MPI_COMM_NULL on the ranks left out). An exchange that
    talks on MPI_COMM_WORLD instead of the comm it is given reaches other ranks than it means."""
    position = world_to_case_rank(world.Get_rank(), world.Get_size())
    return world.Split(0 if position < ranks else MPI.UNDEFINED, position)


class OtherTraffic:
    """A receive of any message on MPI_COMM_WORLD, posted before the learner's exchange and
    cancelled after it: nothing of the check talks there meanwhile, so what it catches is a
    message of the learner's code sent on MPI_COMM_WORLD (which then never reaches the receive it
    was meant for)."""

    def __init__(self, world):
        self.world, self.buffer = world, np.empty(1 << 16, dtype=np.uint8)

    def post(self) -> None:
        self.request = self.world.Irecv([self.buffer, MPI.BYTE], source=MPI.ANY_SOURCE,
                                        tag=MPI.ANY_TAG)

    def caught(self) -> dict | None:
        """Cancel the receive; the message it caught, if it caught one."""
        self.request.Cancel()
        status = MPI.Status()
        try:
            self.request.Wait(status)
        except MPI.Exception:                   # truncated: a message larger than the buffer
            return {"source": status.Get_source(), "tag": status.Get_tag()}
        if status.Is_cancelled():
            return None
        return {"source": status.Get_source(), "tag": status.Get_tag()}


def exchange_once(world, k: int, comm, learner, x: np.ndarray, window: Window,
                  traffic: OtherTraffic) -> dict:
    """learner.update(x), watched: what the monitor and the other traffic saw ({} if nothing):
    "leaks" (the requests left outstanding, by the call that made them), "world_message" (the
    source and tag of a message caught on MPI_COMM_WORLD)."""
    traffic.post()
    window.begin(comm)
    guarded(world, k, lambda: learner.update(x), rank=comm.Get_rank())
    seen = window.end()
    found = {}
    if seen is not None and seen["outstanding"]:
        found["leaks"] = {"requests": seen["outstanding"]}
    message = traffic.caught()
    if message is not None:
        found["world_message"] = message
    return found


def on_mpi_error(comm) -> None:
    """Where the MPI monitor is not loaded (it reports them itself): MPI errors on the learner's
    communicator, which C and Fortran code seldom look at, end the job at once, written as the
    monitor writes them, by an error handler of mpi4py (4.0 or newer); with an older mpi4py, by
    MPI_ERRORS_ARE_FATAL (the MPI library's own report, which exchange_messages.crash reads)."""
    if not hasattr(MPI.Comm, "Create_errhandler"):
        comm.Set_errhandler(MPI.ERRORS_ARE_FATAL)
        return
    names = {getattr(MPI, name): f"MPI_{name}" for name in dir(MPI)
             if name.startswith("ERR_") and isinstance(getattr(MPI, name), int)}
    rank = comm.Get_rank()

    def failed(_comm, code: int) -> None:
        error = MPI.Get_error_class(code)
        sys.stdout.write(MONITOR_LINE + json.dumps({
            "event": "mpi_error", "rank": rank, "call": "an MPI call",
            "error": names.get(error, "MPI_ERR_OTHER"), "text": MPI.Get_error_string(error),
            "request": "an MPI call", "peer": -1, "count": -1, "type": "", "type_size": 0,
            "tag": -1}) + "\n")
        sys.stdout.flush()
        MPI.COMM_WORLD.Abort(3)

    comm.Set_errhandler(MPI.Comm.Create_errhandler(failed))


def check_case(world, k: int, case: Case, make_exchange, window: Window,
               report_errors: bool) -> bool:
    """Run case k on case.ranks ranks of world (case_comm); True if it went wrong anywhere.
    report_errors: MPI errors on the learner's communicator end the job (on_mpi_error); where
    the monitor is loaded, it reports them itself."""
    comm = case_comm(world, case.ranks)
    failed = False
    if comm != MPI.COMM_NULL:
        if report_errors:
            on_mpi_error(comm)
        mesh = box_mesh(*case.size)
        owner = comm.bcast(case.owner(mesh) if comm.Get_rank() == 0 else None)
        local = local_data(mesh, owner, comm.Get_rank())
        reference = Halo(local, comm)
        learner = guarded(world, k, lambda: make_exchange(local, comm), rank=comm.Get_rank())
        largest = comm.allreduce(8 * int(np.diff(local.export_ptr).max(initial=0)), op=MPI.MAX)
        traffic = OtherTraffic(world)
        comm.Barrier()
        if comm.Get_rank() == 0:
            report(event="start", case=k, largest_message=largest)
        found = {"rank": comm.Get_rank(), "ok": True}
        for repeat in range(1, REPEAT + 1):      # all of them on every rank: they are collective
            x = owner_values(local, repeat)
            expected = x.copy()
            reference.update(expected)
            seen = exchange_once(world, k, comm, learner, x, window, traffic)
            wrong = differences(local, x, expected)
            if wrong is not None and found["ok"]:
                found.update({"ok": False, "repeat": repeat, **wrong})
            for key, value in seen.items():
                found.setdefault(key, {**value, "repeat": repeat})
        reports = comm.gather(found)
        if comm.Get_rank() == 0:
            report(event="result", case=k, ranks=reports)
            failed = not all(r["ok"] and "leaks" not in r and "world_message" not in r
                             for r in reports)
        reference.free()
        comm.Free()
    return world.bcast(failed)


def check(world, lang: str, path: str, specs: list[str]) -> None:
    make_exchange = guarded(world, 0, lambda: exchange_factory(lang, path), "load")
    window = Window(fortran=lang == "fortran")
    report_errors = lang != "python" and not window.active    # Python: mpi4py raises
    for k, spec in enumerate(specs):
        if check_case(world, k, Case.parse(spec), make_exchange, window, report_errors):
            break


# --- solve (task 3) ------------------------------------------------------------------------------

MAX_ITER = 500      # a wrong exchange may keep CG from converging: stop it soon


def solve(world, lang: str, path: str, nx: str, ny: str, nz: str, partition: str) -> None:
    """The model problem of 02_fem3d (T fixed on zmax, heat flux through zmin) solved with the
    distributed CG of course.parallel.solve, the exchange in its product being `lang`'s (at most
    MAX_ITER iterations); rank 0 compares with the serial solve."""
    from .. import problems
    from ..parallel.fem3d import model_system
    from ..parallel.solve import Distributed, gather_vector
    from ..parallel.partition import make_partition

    mesh = box_mesh(int(nx), int(ny), int(nz))
    owner = world.bcast(make_partition(mesh, partition, world.Get_size())
                        if world.Get_rank() == 0 else None)
    local = local_data(mesh, owner, world.Get_rank())
    matrix, b, _ = model_system(mesh, local, qflux=0.5, fixed_face="zmax")
    make_exchange = guarded(world, 0, lambda: exchange_factory(lang, path), "load")
    halo = guarded(world, 0, lambda: make_exchange(local, world))
    system = Distributed(matrix, halo, world, kernel="numpy")
    result = guarded(world, 0, lambda: system.solve(b, tol=1e-10, max_iter=MAX_ITER))
    t = gather_vector(world, local, result.x, mesh.n_node)
    if world.Get_rank() == 0:
        serial = problems.fem3d(mesh.nx, mesh.ny, mesh.nz, lang="numpy", qflux=0.5,
                                fixed_face="zmax", tol=1e-10, keep_solution=True)
        difference = float(np.max(np.abs(t - serial["T"])) / np.max(np.abs(serial["T"])))
        report(event="solve", ranks=world.Get_size(), exchange=lang,
               iterations=result.iterations, serial_iterations=serial["iterations"],
               converged=bool(result.converged), difference=difference)


def main(argv: list[str]) -> None:
    world = MPI.COMM_WORLD
    mode, lang, path, *rest = argv
    {"check": lambda: check(world, lang, path, rest),
     "solve": lambda: solve(world, lang, path, *rest)}[mode]()


if __name__ == "__main__":
    main(sys.argv[1:])
