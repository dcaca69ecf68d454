"""The learner's halo exchange under mpiexec (started by course.parallel.grading, never imported by
a notebook's kernel):

    mpiexec -n P python -m mpi4py -m course.parallel.exchange_driver check LANG FILE CASE...
    mpiexec -n P python -m mpi4py -m course.parallel.exchange_driver solve LANG FILE NX NY NZ PART

LANG is c or fortran (FILE: the shared library compiled from the learner's source), python (FILE:
the learner's halo_exchange.py) or, for solve, course (the course's own Halo). A CASE is written by
grading.Case.spec. The cases run one after the other, each on the first RANKS ranks of the job, in
a communicator of their own (the learner's exchange must use the one it is given); each case
exchanges 3 times, with new values each time, and compares with the course's Halo bit for bit.

Rank 0 reports on stdout, one line per event (course.parallel.mpi_job.report):

    {"event": "start", "case": k, "largest_message": bytes}    the exchanges of case k begin
    {"event": "result", "case": k, "ranks": [...]}             one report per rank
    {"event": "error", "case": k, "rank": r, "stage": "load" or "exchange", "error": "..."}
                                    the learner's code raised (on any rank)
    {"event": "solve", ...}                                    the result of `solve`

After an error the job is aborted; after a wrong result the remaining cases are skipped.
"""

from __future__ import annotations

import ctypes
import importlib.util
import sys
import traceback
from pathlib import Path

import numpy as np
from mpi4py import MPI

from ..mesh import box_mesh
from ..exercise import references_blocked
from .grading import REPEAT, Case
from .halo import Halo
from .local import LocalData, local_data
from .mpi_job import report

PACKAGE = Path(__file__).resolve().parents[1]          # the course package: not the learner's code


# --- the learner's exchange behind the interface of course.parallel.halo.Halo (update(x)) -------

class NoPickleComm(MPI.Intracomm):
    """The communicator the learner's Python gets: the lower-case (pickling) calls refuse."""

    def _refuse(self, *args, **kwargs):
        raise TypeError("use the upper-case, buffer-based calls (Isend, Irecv, Send, Recv, ...) "
                        "on NumPy arrays: the lower-case ones pickle Python objects")

    send = recv = isend = irecv = sendrecv = bsend = ssend = issend = _refuse


class CompiledExchange:
    """halo_exchange of a C or Fortran shared library. Fortran: tables 1-based, every argument by
    reference, comm as the integer handle of mpi_f08's type(MPI_Comm)."""

    def __init__(self, function, fortran: bool, local: LocalData, comm):
        base = 1 if fortran else 0
        self.function, self.fortran, self.local = function, fortran, local
        self.tables = [np.ascontiguousarray(local.neighbours, dtype=np.int32)] + [
            np.ascontiguousarray(table + base, dtype=np.int32)
            for table in (local.import_ptr, local.import_index, local.export_ptr,
                          local.export_index)]
        self.send = np.full(max(local.export_index.size, 1), np.nan)
        self.recv = np.full(max(local.import_index.size, 1), np.nan)
        if fortran:
            self.n = ctypes.c_int(local.n_neighbours)
            self.handle = ctypes.c_int(comm.py2f())
            self.comm = ctypes.byref(self.handle)
        else:
            self.n = local.n_neighbours
            c_comm = ctypes.c_int if MPI._sizeof(MPI.Comm) == ctypes.sizeof(ctypes.c_int) \
                else ctypes.c_void_p
            self.comm = c_comm(MPI._handleof(comm))
        # the arguments before and after x, made once: the call then costs one ctypes call
        n = ctypes.byref(self.n) if fortran else ctypes.c_int(self.n)
        self.before = (n, *map(_pointer, self.tables))
        self.after = (_pointer(self.send), _pointer(self.recv), self.comm)

    def update(self, x: np.ndarray) -> None:
        self.function(*self.before, ctypes.c_void_p(x.ctypes.data), *self.after)


def _pointer(array: np.ndarray):
    return array.ctypes.data_as(ctypes.c_void_p)


class PythonExchange:
    """halo_exchange(comm, neighbours, import_ptr, import_index, export_ptr, export_index, x) of
    the learner's Python file; every call gets fresh copies of the tables."""

    def __init__(self, function, local: LocalData, comm):
        self.function, self.local, self.comm = function, local, NoPickleComm(comm)

    def update(self, x: np.ndarray) -> None:
        loc = self.local
        with references_blocked(Halo.__init__, Halo.update):     # the course's own exchange
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
        function = ctypes.CDLL(path).halo_exchange
    except AttributeError:
        raise AttributeError("the compiled file has no function halo_exchange" + (
            ' (Fortran: bind(C, name="halo_exchange"))' if lang == "fortran" else "")) from None
    function.restype = None
    return lambda local, comm: CompiledExchange(function, lang == "fortran", local, comm)


def guarded(world, case: int, step, stage: str = "exchange"):
    """step(); if the learner's code raises (stage "load": while the file is loaded), report it
    and abort the whole job (the other ranks may be waiting for this one in an exchange)."""
    try:
        return step()
    except Exception as err:        # noqa: BLE001 - anything the learner's code raises
        frames = [f for f in traceback.extract_tb(err.__traceback__)     # the learner's lines
                  if not Path(f.filename).resolve().is_relative_to(PACKAGE)]
        where = f" (line {frames[-1].lineno}: {frames[-1].line})" if frames else ""
        said = f": {err}" if str(err) else ""
        report(event="error", case=case, rank=world.Get_rank(), stage=stage,
               error=f"{type(err).__name__}{said}{where}")
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


def check_case(world, k: int, case: Case, make_exchange) -> bool:
    """Run case k on the first case.ranks ranks of world; True if it went wrong anywhere."""
    active = world.Get_rank() < case.ranks
    comm = world.Split(0 if active else MPI.UNDEFINED, world.Get_rank())
    failed = False
    if active:
        mesh = box_mesh(*case.size)
        owner = comm.bcast(case.owner(mesh) if comm.Get_rank() == 0 else None)
        local = local_data(mesh, owner, comm.Get_rank())
        reference = Halo(local, comm)
        learner = guarded(world, k, lambda: make_exchange(local, comm))
        largest = comm.allreduce(8 * int(np.diff(local.export_ptr).max(initial=0)), op=MPI.MAX)
        comm.Barrier()
        if comm.Get_rank() == 0:
            report(event="start", case=k, largest_message=largest)
        found = {"rank": comm.Get_rank(), "ok": True}
        for repeat in range(1, REPEAT + 1):      # all of them on every rank: they are collective
            x = owner_values(local, repeat)
            expected = x.copy()
            reference.update(expected)
            guarded(world, k, lambda: learner.update(x))
            wrong = differences(local, x, expected)
            if wrong is not None and found["ok"]:
                found = {"rank": comm.Get_rank(), "ok": False, "repeat": repeat, **wrong}
        reports = comm.gather(found)
        if comm.Get_rank() == 0:
            report(event="result", case=k, ranks=reports)
            failed = not all(r["ok"] for r in reports)
        reference.free()
        comm.Free()
    return world.bcast(failed)


def check(world, lang: str, path: str, specs: list[str]) -> None:
    make_exchange = guarded(world, 0, lambda: exchange_factory(lang, path), "load")
    for k, spec in enumerate(specs):
        if check_case(world, k, Case.parse(spec), make_exchange):
            break


# --- solve (task 3) ------------------------------------------------------------------------------

MAX_ITER = 500      # a wrong exchange may keep CG from converging: stop it soon


def solve(world, lang: str, path: str, nx: str, ny: str, nz: str, partition: str) -> None:
    """The model problem of 02_fem3d (T fixed on zmax, heat flux through zmin) solved with the
    distributed CG of course.parallel.fem3d, the exchange in its product being `lang`'s (at most
    MAX_ITER iterations); rank 0 compares with the serial solve."""
    from .. import problems
    from .fem3d import Distributed, gather_vector, model_system
    from .partition import make_partition

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
