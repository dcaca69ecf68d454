"""The learner's petsc_matrix under mpiexec (started by course.grading.petsc, never imported by a
notebook's kernel):

    mpiexec -n P python -m mpi4py -m course.grading.petsc_driver LANG FILE [LANG FILE..] -- CASE..

LANG is python (FILE: the learner's petsc_matrix.py) or, for the tests, course (FILE: -): the
course's own construction (course.parallel.petsc) behind the learner's interface. Several (LANG,
FILE) pairs, variants, run one after the other on the same cases; each variant stops at its first
case that goes wrong (but course: it runs them all). A CASE is written by grading.Case.spec.

The cases run one after the other, each in a communicator of its own, on case.ranks ranks of the
job in descending world order (pipecg_driver.on_case_ranks). On each rank, the problem's local
matrix (pipecg_driver.case_system: the internal rows over the local columns) is handed to

    petsc_matrix(comm, n_internal, n_local, row_ptr, col, val, update)

with update(v) the halo exchange of a float vector of n_local values (its external entries take
their owners' values). The matrix it returns is compared with course.parallel.petsc.local_mat:
the communicator, assembled, the rows each rank owns, every entry, and PETSc's count of mallocs
and of preallocated entries left unused.

Rank 0 of the case reports on stdout, one line per event (course.parallel.mpi_job.report):

    {"event": "start", "variant": j, "case": k}       the learner's code runs on case k
    {"event": "result", "variant": j, "case": k, "problem": ..., ...}   (problem: None, or
        what is wrong: course.grading.petsc.message says it in words)
    {"event": "uneven", "variant": j, "case": k, "rank": r}   rank r returned, others did not
    {"event": "error", "case": k, "rank": r, "stage": "load" or "build", "error": "..."}
"""

from __future__ import annotations

import importlib.util
import os
import sys

from mpi4py import MPI

from ..parallel import petsc as petsc_module
from ..parallel.mpi_job import report
from ..parallel.solve import LocalMatrix
from .exercise import reference, references_blocked
from .halo import Case
from .halo_driver import guarded
from .pipecg_driver import all_returned, case_system, on_case_ranks

_GLOBAL_COLUMNS = reference(petsc_module.global_columns)
_LOCAL_MAT = reference(petsc_module.local_mat)
VALUE_RTOL = 1e-12            # entries: the same numbers, set in another order at most


def python_matrix(path: str):
    spec = importlib.util.spec_from_file_location("learner_petsc_matrix", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    function = module.petsc_matrix

    def build(*args):
        with references_blocked(petsc_module):
            return function(*args)
    return build


class _Exchange:
    """halo.update behind the name course.parallel.petsc.global_columns calls."""

    def __init__(self, update):
        self.update = update


def course_matrix(comm, n_internal, n_local, row_ptr, col, val, update):
    """The course's construction behind the learner's interface (for the tests)."""
    columns = _GLOBAL_COLUMNS(n_internal, n_local, _Exchange(update), comm)
    return _LOCAL_MAT(LocalMatrix(row_ptr, col, val, n_local), columns, comm)


def matrix_factory(lang: str, path: str):
    return course_matrix if lang == "course" else python_matrix(path)


# --- one case ------------------------------------------------------------------------------------

def run_case(world, k: int, case: Case, build, variant: int) -> bool:
    """Case k on the ranks case_members(k, ...) of world; True if it went wrong."""
    return on_case_ranks(world, k, case.ranks,
                         lambda comm: check_case(world, comm, k, case, build, variant))


def _rows(mat, first: int, last: int) -> list[dict]:
    return [dict(zip(*(a.tolist() for a in mat.getRow(i)))) for i in range(first, last)]


def first_difference(mine: list[dict], want: list[dict], first: int):
    """(row, column, yours, the course's) of the first entry that differs, or None."""
    for i, (got, expected) in enumerate(zip(mine, want)):
        for column in sorted(set(got) | set(expected)):
            a, b = got.get(column, 0.0), expected.get(column, 0.0)
            if not abs(a - b) <= VALUE_RTOL * max(abs(b), 1.0):
                return (first + i, column, a, b)
    return None


def check_case(world, comm, k: int, case: Case, build, variant: int) -> bool:
    PETSc = petsc_module.petsc()
    rank, size = comm.Get_rank(), comm.Get_size()
    matrix, _, halo = case_system(case, comm)
    n, n_local = matrix.n_rows, matrix.n_cols
    expected = course_matrix(comm, n, n_local, matrix.row_ptr, matrix.col_idx, matrix.val,
                             halo.update)
    control = comm.Dup()
    if rank == 0:
        report(event="start", variant=variant, case=k)
    got = guarded(world, k, lambda: build(comm, n, n_local, matrix.row_ptr.copy(),
                                          matrix.col_idx.copy(), matrix.val.copy(),
                                          halo.update), "build", rank=rank)
    if not all_returned(control):           # a collective on some ranks only: they wait for ever
        report(event="uneven", variant=variant, case=k, rank=rank)
        world.Abort(1)
    control.Free()
    result = {"event": "result", "variant": variant, "case": k, "problem": None,
              "returned": repr(got)[:60], "ranks": size}
    is_mat = comm.allreduce(isinstance(got, PETSc.Mat), op=MPI.LAND)
    if not is_mat:
        result["problem"] = "not_a_mat"
    else:
        same_comm = MPI.Comm.Compare(got.getComm().tompi4py(), comm) in (MPI.IDENT,
                                                                          MPI.CONGRUENT)
        result["comm_size"] = got.getComm().getSize()
        if not comm.allreduce(same_comm, op=MPI.LAND):
            result["problem"] = "communicator"
        elif not comm.allreduce(bool(got.assembled), op=MPI.LAND):
            result["problem"] = "not_assembled"
        else:
            result["problem"] = compare_matrix(comm, got, expected, matrix, result)
    if rank == 0:
        report(**result)
    for mat in (expected, got if is_mat else None):
        if mat is not None:
            mat.destroy()
    halo.free()
    return result["problem"] is not None


def compare_matrix(comm, got, expected, matrix: LocalMatrix, result: dict) -> str | None:
    """The rows each rank owns, every entry, the mallocs and unused preallocation."""
    PETSc = petsc_module.petsc()
    first, last = expected.getOwnershipRange()
    total = expected.getSize()[0]
    mine = (*got.getOwnershipRange(), got.getSize()[0])
    wrong = comm.allgather(mine != (first, last, total))
    if any(wrong):
        bad = wrong.index(True)
        result.update(bad_rank=bad, sizes=comm.bcast(mine, root=bad),
                      expected_sizes=comm.bcast((first, last, total), root=bad))
        return "sizes"
    difference = first_difference(_rows(got, first, last), _rows(expected, first, last), first)
    local_columns = False
    if difference is not None:          # the learner's columns of that row: local numbers?
        i = difference[0] - first
        row = set(_rows(got, difference[0], difference[0] + 1)[0])
        local_columns = row == set(matrix.col_idx[matrix.row_ptr[i]:matrix.row_ptr[i + 1]]
                                   .tolist())
    found = [d for d in comm.allgather((difference, local_columns)) if d[0] is not None]
    if found:
        result.update(first_difference=found[0][0], local_columns=found[0][1])
        return "values"
    info = got.getInfo(PETSc.Mat.InfoType.GLOBAL_SUM)
    result.update(mallocs=float(info["mallocs"]), unneeded=float(info["nz_unneeded"]))
    if result["mallocs"] > 0:
        return "mallocs"
    if result["unneeded"] > 0:
        return "unneeded"
    return None


def main(argv: list[str]) -> None:
    world = MPI.COMM_WORLD
    petsc_module.petsc()          # PETSc's start is collective over all the ranks of the job
    split = argv.index("--")
    pairs, specs = argv[:split], argv[split + 1:]
    for variant, (lang, path) in enumerate(zip(pairs[0::2], pairs[1::2])):
        build = guarded(world, 0, lambda: matrix_factory(lang, path), "load")
        for k, spec in enumerate(specs):
            if run_case(world, k, Case.parse(spec), build, variant) and lang != "course":
                break
    end_without_petsc_cleanup(world)


def end_without_petsc_cleanup(world) -> None:
    """Finalize MPI and leave, without petsc4py's clean-up at exit: it gathers PETSc's garbage
    (objects that Python's collector freed) over the world, and PETSc 3.18 enters that reduction
    only on the ranks that hold some; after cases run on some ranks only, the others never join
    and the job hangs at its end (tried here). Every object is destroyed by then."""
    world.Barrier()
    sys.stdout.flush()
    sys.stderr.flush()
    MPI.Finalize()
    os._exit(0)


if __name__ == "__main__":
    main(sys.argv[1:])
