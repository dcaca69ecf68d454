"""The exercise of lecture 05_halo and its checks (course.grading.halo): the course's own halo
exchanges (src_c, src_fortran) and the solution notebook's (C, Fortran, Python) pass; the typical
wrong answers fail, each with the message that says what happened: external values left as they
were, export and import swapped, a blocking Send before the Recv (a deadlock once the messages pass
the eager limit), a segfault, a tag mismatch or a message to the wrong rank (deadlocks), Fortran
code that takes the tables as 0-based, pickling calls, code that does not compile. The learner's
local tables are checked table by table, in Python and in C and Fortran (compiled and called in a
child process: 0-based Fortran tables, a crash, an endless loop, an array overrun).

Every exchange runs under mpiexec in a subprocess that the check stops itself: a deadlock fails
in seconds and leaves no process behind."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from conftest import ROOT, solution_cell, written_file
from course.grading import halo as grading
from course.grading.halo import Case

pytestmark = [pytest.mark.timeout(300),
              pytest.mark.skipif(shutil.which("mpiexec") is None, reason="no mpiexec")]

SMALL = [Case(2, "blocks", (4, 3, 2)), Case(3, "metis", (5, 4, 3)),
         Case(4, "blocks", (4, 4, 2), dims=(2, 2, 1))]
LARGE = Case(2, "blocks", (2, 150, 150), dims=(2, 1, 1))      # 22801 values (178 KB) each way
SUFFIX = {"c": ".c", "fortran": ".f90", "python": ".py"}


def solution_file(lang: str) -> str:
    """What the %%writefile cell of `lang` in the solution notebook writes."""
    return written_file("05_halo", f"halo_exchange_{lang}")


def write(tmp_path: Path, lang: str, text: str, name: str = "halo_exchange") -> Path:
    path = tmp_path / (name + SUFFIX[lang])
    path.write_text(text)
    return path


def changed(text: str, old: str, new: str) -> str:
    assert old in text, f"{old!r} is not in the solution"
    return text.replace(old, new)


def failure(tmp_path, lang: str, text: str, cases) -> str:
    with pytest.raises(AssertionError) as info:
        grading.check_halo_exchange(write(tmp_path, lang, text), lang, cases)
    return str(info.value)


# --- the course's exchanges, as a learner would hand them in -------------------------------------

def course_c_exchange() -> str:
    """halo_exchange of src_c/05_halo/halo.c (its marked region) in a file of its own."""
    text = (ROOT / "src_c" / "05_halo" / "halo.c").read_text()
    region = re.search(r"^/\* \[halo_exchange\].*?^/\* \[halo_exchange\] \*/", text, re.M | re.S)
    return "#include <mpi.h>\n\n" + region.group(0) + "\n"


def course_fortran_exchange() -> str:
    """halo_exchange of src_fortran/05_halo/halo.f90 (a module procedure there) as a bind(C)
    subroutine of its own, with the module's declarations it uses."""
    text = (ROOT / "src_fortran" / "05_halo" / "halo.f90").read_text()
    region = re.search(r"^! \[halo_exchange\]\n(.*?)^! \[halo_exchange\]", text, re.M | re.S)
    header = re.search(r"subroutine halo_exchange\(.*?\)", region.group(1), re.S).group(0)
    return region.group(1).replace(
        header, header + ' bind(C, name="halo_exchange")\n'
        "    use, intrinsic :: iso_c_binding, only: c_int, c_double\n"
        "    use mpi_f08\n    implicit none\n    integer, parameter :: HALO_TAG = 5", 1)


@pytest.mark.parametrize("lang, source", [("c", course_c_exchange),
                                          ("fortran", course_fortran_exchange)],
                         ids=["src_c", "src_fortran"])
def test_the_course_exchanges_pass(tmp_path, lang, source):
    grading.check_halo_exchange(write(tmp_path, lang, source()), lang, SMALL + [LARGE])


@pytest.mark.parametrize("lang", ["c", "fortran", "python"])
def test_the_solution_cells_pass(tmp_path, lang):
    grading.check_halo_exchange(write(tmp_path, lang, solution_file(lang)), lang,
                                SMALL + [LARGE, Case(4, "random", (3, 3, 2), seed=4)])


# --- wrong exchanges -----------------------------------------------------------------------------

def test_no_unpack_leaves_the_external_values(tmp_path):
    text = changed(solution_file("c"), "        x[import_index[k]] = recv_buf[k];\n",
                   "        (void)x;\n")
    message = failure(tmp_path, "c", text, SMALL)
    assert re.search(r"on rank \d, 12 of 12 values from rank \d are wrong", message), message
    assert "left as they were" in message and "unpack" in message


def test_export_and_import_swapped(tmp_path):
    text = changed(changed(solution_file("c"), "send_buf[k] = x[export_index[k]];",
                           "send_buf[k] = x[import_index[k]];"),
                   "x[import_index[k]] = recv_buf[k];", "x[export_index[k]] = recv_buf[k];")
    message = failure(tmp_path, "c", text, SMALL)
    assert "internal values changed" in message and "swapped" in message, message


BLOCKING_SENDS = """
    for (int k = 0; k < export_ptr[n_neighbours]; k++)
        send_buf[k] = x[export_index[k]];
    for (int m = 0; m < n_neighbours; m++)      /* everybody sends first ... */
        MPI_Send(send_buf + export_ptr[m], export_ptr[m + 1] - export_ptr[m], MPI_DOUBLE,
                 neighbours[m], 5, comm);
    for (int m = 0; m < n_neighbours; m++)      /* ... and then receives */
        MPI_Recv(recv_buf + import_ptr[m], import_ptr[m + 1] - import_ptr[m], MPI_DOUBLE,
                 neighbours[m], 5, comm, MPI_STATUS_IGNORE);
    for (int k = 0; k < import_ptr[n_neighbours]; k++)
        x[import_index[k]] = recv_buf[k];
"""


def with_body(text: str, body: str) -> str:
    start = text.index("    /* ### BEGIN SOLUTION */")
    end = text.index("    /* ### END SOLUTION */")
    return text[:start] + body + text[end:]


def leftover_processes(marker: str) -> list[str]:
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            text = cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if marker in text:
            found.append(text)
    return found


def test_blocking_sends_pass_small_messages_and_deadlock_on_large_ones(tmp_path):
    text = with_body(solution_file("c"), BLOCKING_SENDS)
    source = write(tmp_path, "c", text)
    grading.check_halo_exchange(source, "c", SMALL)        # lucky: the messages are eager
    message = failure(tmp_path, "c", text, [SMALL[0], LARGE])
    assert "did not finish within" in message and "deadlock" in message, message
    assert "22801 values (178 KB)" in message and "Irecv" in message, message
    assert "2 x 150 x 150" in message
    assert leftover_processes(str(grading.prepare_exchange(source, "c"))) == []


def test_a_segfault_is_reported_with_its_rank(tmp_path):
    text = changed(solution_file("c"), "MPI_STATUSES_IGNORE);",
                   "MPI_STATUSES_IGNORE);\n    *(volatile double *)0 = x[0];")
    message = failure(tmp_path, "c", text, SMALL)
    assert re.search(r"crashed with SIGSEGV on rank \d", message), message
    assert "4 x 3 x 2 element mesh" in message


def test_a_tag_mismatch_deadlocks(tmp_path):
    text = changed(solution_file("c"), "neighbours[m], TAG, comm, &requests[n_neighbours + m]",
                   "neighbours[m], TAG + 1, comm, &requests[n_neighbours + m]")
    message = failure(tmp_path, "c", text, SMALL)
    assert "deadlock" in message and "tags" in message and "small" in message, message


def test_a_message_to_the_wrong_rank_deadlocks(tmp_path):
    text = changed(solution_file("python"), "dest=int(rank)", "dest=comm.Get_rank()")
    message = failure(tmp_path, "python", text, SMALL)
    assert "deadlock" in message and "destination rank" in message, message


def test_a_fortran_exchange_with_0_based_tables_fails(tmp_path):
    text = solution_file("fortran")
    for old, new in (("x(export_index(k))", "x(export_index(k) + 1)"),
                     ("x(import_index(k)) =", "x(import_index(k) + 1) ="),
                     ("first = import_ptr(m)\n", "first = import_ptr(m) + 1\n"),
                     ("last = import_ptr(m + 1) - 1", "last = import_ptr(m + 1)"),
                     ("first = export_ptr(m)\n", "first = export_ptr(m) + 1\n"),
                     ("last = export_ptr(m + 1) - 1", "last = export_ptr(m + 1)")):
        text = changed(text, old, new)
    message = failure(tmp_path, "fortran", text, SMALL)
    assert "1-based" in message and ("wrong" in message or "crashed" in message), message


def test_pickling_calls_are_refused(tmp_path):
    text = changed(solution_file("python"),
                   "comm.Isend([part, MPI.DOUBLE], dest=int(rank), tag=tag)",
                   "comm.isend(part, dest=int(rank), tag=tag)")
    message = failure(tmp_path, "python", text, SMALL)
    assert "raised an exception on rank" in message and "upper-case" in message, message


def test_the_untouched_python_stub_says_what_to_do(tmp_path):
    text = solution_file("python")
    text = text[:text.index("    ### BEGIN SOLUTION")] + "    raise NotImplementedError()\n"
    message = failure(tmp_path, "python", text, SMALL[:1])
    assert "NotImplementedError" in message and "YOUR CODE HERE" in message, message


@pytest.mark.parametrize("lang, text, expected", [
    ("c", "void halo_exchange(void) { undeclared = 1; }\n", "does not compile"),
    ("fortran", "subroutine halo_exchange() bind(C)\n  call nothing(\nend subroutine\n",
     "does not compile"),
    ("python", "def halo_exchange(comm, x):\n    pass\n", "must take 7 arguments"),
    ("python", "def halo_exchange(comm\n", "is not valid Python")])
def test_code_that_cannot_run_is_refused_before_mpiexec(tmp_path, lang, text, expected):
    message = failure(tmp_path, lang, text, SMALL[:1])
    assert expected in message, message


def test_a_library_without_halo_exchange(tmp_path):
    message = failure(tmp_path, "c", "void halo_exchang(void) {}\n", SMALL[:1])
    assert "no function halo_exchange" in message, message


# --- what the values alone do not show (issue 19): the communicator, the requests, pickling, ----
# --- a receive too small, the course's exchange behind its front door ---------------------------

def python_body(body: str) -> str:
    """The solution's halo_exchange.py with `body` in place of its solution."""
    text = solution_file("python")
    start, end = text.index("    ### BEGIN SOLUTION\n"), text.index("    ### END SOLUTION")
    return text[:start] + body + text[end:]


def fortran_body(body: str) -> str:
    """The solution's halo_exchange.f90 with `body` after its declarations (m, k: integers,
    requests(2 * n_neighbours), TAG = 5)."""
    text = solution_file("fortran")
    start = text.index("  integer(c_int) :: m, k, first, last\n")
    end = text.index("  ! ### END SOLUTION")
    return text[:start] + "  integer(c_int) :: m, k\n" + body + text[end:]


TRANSLATED_TO_WORLD = """
    MPI_Group group, world;                      /* the right ranks, but on MPI_COMM_WORLD */
    MPI_Comm_group(comm, &group);
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    int ranks[n_neighbours + 1];
    MPI_Group_translate_ranks(group, n_neighbours, neighbours, world, ranks);
    MPI_Request requests[2 * n_neighbours + 1];
    for (int k = 0; k < export_ptr[n_neighbours]; k++)
        send_buf[k] = x[export_index[k]];
    for (int m = 0; m < n_neighbours; m++)
        MPI_Irecv(recv_buf + import_ptr[m], import_ptr[m + 1] - import_ptr[m], MPI_DOUBLE,
                  ranks[m], 5, MPI_COMM_WORLD, &requests[m]);
    for (int m = 0; m < n_neighbours; m++)
        MPI_Isend(send_buf + export_ptr[m], export_ptr[m + 1] - export_ptr[m], MPI_DOUBLE,
                  ranks[m], 5, MPI_COMM_WORLD, &requests[n_neighbours + m]);
    MPI_Waitall(2 * n_neighbours, requests, MPI_STATUSES_IGNORE);
    MPI_Group_free(&group);
    MPI_Group_free(&world);
    for (int k = 0; k < import_ptr[n_neighbours]; k++)
        x[import_index[k]] = recv_buf[k];
"""


def on_world(lang: str) -> str:
    if lang == "c":
        return changed(solution_file("c"), "TAG, comm, &", "TAG, MPI_COMM_WORLD, &")
    if lang == "fortran":
        return changed(solution_file("fortran"), "TAG, comm, requests",
                       "TAG, MPI_COMM_WORLD, requests")
    if lang == "python":
        return changed(solution_file("python"), "    tag = 5\n",
                       "    tag = 5\n    comm = MPI.COMM_WORLD\n")
    return with_body(solution_file("c"), TRANSLATED_TO_WORLD)


@pytest.mark.parametrize("lang", ["c", "fortran", "python", "c_translated_ranks"])
def test_an_exchange_on_mpi_comm_world_fails_and_says_so(tmp_path, lang):
    """The MPI monitor sees the call on MPI_COMM_WORLD (in Fortran too) and ends the job."""
    message = failure(tmp_path, lang.split("_")[0], on_world(lang), SMALL[:2])
    assert re.search(r"called MPI_I(recv|send) on MPI_COMM_WORLD on rank \d with the", message)
    assert "the MPI job was ended" in message, message
    assert "not on the comm it is given" in message and "pass comm" in message, message


@pytest.mark.parametrize("lang", ["c", "c_translated_ranks"])
def test_without_the_monitor_an_exchange_on_mpi_comm_world_still_fails(tmp_path, monkeypatch,
                                                                         lang):
    """The check's communicator has its ranks rotated (a subset of the job's, in the second
    case), and a receive of any message waits on MPI_COMM_WORLD meanwhile: even the right world
    ranks deadlock."""
    monkeypatch.setattr(grading.mpi_monitor, "library", lambda: None)
    with pytest.raises(AssertionError) as info:
        grading.check_halo_exchange(write(tmp_path, "c", on_world(lang)), "c", SMALL[:2],
                                    exchange_timeout=2.0)
    assert "deadlock" in str(info.value) and "not MPI_COMM_WORLD" in str(info.value), info.value


def test_a_message_sent_on_mpi_comm_world_is_caught(tmp_path, monkeypatch):
    """A right exchange that also sends a message on MPI_COMM_WORLD (here to itself): without
    the monitor (which would end the job at that call), the check's receive on MPI_COMM_WORLD
    catches it."""
    monkeypatch.setattr(grading.mpi_monitor, "library", lambda: None)
    text = changed(solution_file("c"), "    /* ### END SOLUTION */",
                   "    int me, one = 1;\n    MPI_Comm_rank(MPI_COMM_WORLD, &me);\n"
                   "    MPI_Send(&one, 1, MPI_INT, me, 77, MPI_COMM_WORLD);\n"
                   "    /* ### END SOLUTION */")
    message = failure(tmp_path, "c", text, SMALL[:1])
    assert "sent a message on MPI_COMM_WORLD" in message and "(tag 77)" in message, message


RECEIVES_ONLY = {"c": ("MPI_Waitall(2 * n_neighbours,", "MPI_Waitall(n_neighbours,"),
                 "fortran": ("call MPI_Waitall(2 * n_neighbours,", "call MPI_Waitall(n_neighbours,"),
                 "python": ("MPI.Request.Waitall(requests)",
                            "MPI.Request.Waitall(requests[:len(neighbours)])")}


@pytest.mark.parametrize("lang", ["c", "fortran", "python"])
def test_send_requests_never_completed_are_reported(tmp_path, lang):
    """MPI_Waitall over the receives only: the values are right (the small messages go eagerly),
    and the MPI monitor (PMPI wrappers; Open MPI's Fortran bindings call PMPI_) counts the send
    requests left outstanding."""
    text = changed(solution_file(lang), *RECEIVES_ONLY[lang])
    message = failure(tmp_path, lang, text, SMALL[:1])
    assert "requests still outstanding" in message and "in exchange 1 of 3" in message, message
    assert re.search(r"on rank \d, 1 send request \(MPI_Isend\) was never completed by a wait "
                     r"or test", message), message
    assert "MPI_Waitall over the receives and the sends" in message


TOO_SMALL = {"c": ("import_ptr[m + 1] - import_ptr[m], MPI_DOUBLE,",
                   "import_ptr[m + 1] - import_ptr[m] - 1, MPI_DOUBLE,"),
             "fortran": ("call MPI_Irecv(recv_buf(first:last), last - first + 1,",
                         "call MPI_Irecv(recv_buf(first:last), last - first,"),
             "python": ("part = recv[import_ptr[m]:import_ptr[m + 1]]",
                        "part = recv[import_ptr[m]:import_ptr[m + 1] - 1]")}


@pytest.mark.parametrize("lang", ["c", "fortran", "python"])
def test_a_receive_too_small_is_named_mpi_err_truncate(tmp_path, lang):
    """Not a 'deadlock': the monitor names the error and the receive, and ends the job at once."""
    message = failure(tmp_path, lang, changed(solution_file(lang), *TOO_SMALL[lang]), SMALL)
    assert "MPI_ERR_TRUNCATE" in message and "deadlock" not in message, message
    found = re.search(r"the receive from rank (\d) has room for (\d+) values of MPI_DOUBLE\w* "
                      r"\(\d+ bytes\), but rank (\d) sends (\d+) values", message)
    assert found and found.group(1) == found.group(3), message
    assert int(found.group(2)) == int(found.group(4)) - 1, message
    assert "import_ptr" in message and "room for the whole message" in message, message


def test_a_receive_of_floats_says_the_values_are_doubles(tmp_path):
    text = changed(solution_file("c"), "import_ptr[m + 1] - import_ptr[m], MPI_DOUBLE,",
                   "import_ptr[m + 1] - import_ptr[m], MPI_FLOAT,")
    message = failure(tmp_path, "c", text, SMALL[:1])
    assert "MPI_ERR_TRUNCATE" in message and "values of MPI_FLOAT" in message, message
    assert "receive them as MPI_DOUBLE" in message, message


@pytest.mark.parametrize("lang", ["c", "fortran"])
def test_without_the_monitor_mpi_names_the_error_itself(tmp_path, monkeypatch, lang):
    """MPI_ERRORS_ARE_FATAL on the learner's communicator: Open MPI's report is read."""
    monkeypatch.setattr(grading.mpi_monitor, "library", lambda: None)
    message = failure(tmp_path, lang, changed(solution_file(lang), *TOO_SMALL[lang]), SMALL[:1])
    assert "MPI_ERR_TRUNCATE" in message and "deadlock" not in message, message
    assert "room for the whole message" in message, message


ALLTOALL = """    out = [[] for _ in range(comm.Get_size())]
    for m, rank in enumerate(neighbours):
        out[rank] = x[export_index[export_ptr[m]:export_ptr[m + 1]]]
    got = comm.alltoall(out)
    for m, rank in enumerate(neighbours):
        x[import_index[import_ptr[m]:import_ptr[m + 1]]] = got[rank]
"""
WORLD_ALLGATHER = """    owners = MPI.COMM_WORLD.allgather(x)   # every rank's whole vector, pickled
    x[import_index] = np.nan
"""


@pytest.mark.parametrize("body, line", [(ALLTOALL, "got = comm.alltoall(out)"),
                                        (WORLD_ALLGATHER, "MPI.COMM_WORLD.allgather(x)")],
                         ids=["alltoall", "world_allgather"])
def test_pickling_collectives_are_refused(tmp_path, body, line):
    message = failure(tmp_path, "python", python_body(body), SMALL[:1])
    assert "TypeError: the lower-case mpi4py calls" in message and "pickle" in message, message
    assert "buffer-based communication of the lecture" in message and line in message, message


PRIVATE_HELPER = """    from types import SimpleNamespace
    from course.parallel.halo import Halo
    halo = object.__new__(Halo)
    halo.comm, halo.send, halo.recv = comm, np.empty(len(export_index)), np.empty(len(import_index))
    halo.local = SimpleNamespace(neighbours=neighbours, import_ptr=import_ptr,
                                 import_index=import_index, export_ptr=export_ptr,
                                 export_index=export_index)
    halo._update_p2p(x)
"""


def test_the_course_exchange_is_blocked_behind_its_front_door(tmp_path):
    message = failure(tmp_path, "python", python_body(PRIVATE_HELPER), SMALL[:1])
    assert "ReferenceUsed" in message and "Halo._update_p2p" in message, message


# right, but not the solution's: they keep their points (the monitor sees no leak in them)

SENDRECV = """
    for (int k = 0; k < export_ptr[n_neighbours]; k++)
        send_buf[k] = x[export_index[k]];
    for (int m = 0; m < n_neighbours; m++)
        MPI_Sendrecv(send_buf + export_ptr[m], export_ptr[m + 1] - export_ptr[m], MPI_DOUBLE,
                     neighbours[m], 1, recv_buf + import_ptr[m],
                     import_ptr[m + 1] - import_ptr[m], MPI_DOUBLE, neighbours[m], 1, comm,
                     MPI_STATUS_IGNORE);
    for (int k = 0; k < import_ptr[n_neighbours]; k++)
        x[import_index[k]] = recv_buf[k];
"""
PERSISTENT_C = """
    MPI_Request requests[2 * n_neighbours + 1];
    for (int m = 0; m < n_neighbours; m++) {
        MPI_Recv_init(recv_buf + import_ptr[m], import_ptr[m + 1] - import_ptr[m], MPI_DOUBLE,
                      neighbours[m], 2, comm, &requests[m]);
        MPI_Send_init(send_buf + export_ptr[m], export_ptr[m + 1] - export_ptr[m], MPI_DOUBLE,
                      neighbours[m], 2, comm, &requests[n_neighbours + m]);
    }
    for (int k = 0; k < export_ptr[n_neighbours]; k++)
        send_buf[k] = x[export_index[k]];
    MPI_Startall(2 * n_neighbours, requests);
    MPI_Waitall(2 * n_neighbours, requests, MPI_STATUSES_IGNORE);
    for (int i = 0; i < 2 * n_neighbours; i++)
        MPI_Request_free(&requests[i]);
    for (int k = 0; k < import_ptr[n_neighbours]; k++)
        x[import_index[k]] = recv_buf[k];
"""
DUP_ISSEND_WAITANY = """
    MPI_Comm mine;                               /* a copy of comm: the same ranks */
    MPI_Comm_dup(comm, &mine);
    MPI_Request requests[2 * n_neighbours + 1];
    for (int k = 0; k < export_ptr[n_neighbours]; k++)
        send_buf[k] = x[export_index[k]];
    for (int m = 0; m < n_neighbours; m++) {
        MPI_Irecv(recv_buf + import_ptr[m], import_ptr[m + 1] - import_ptr[m], MPI_DOUBLE,
                  neighbours[m], 0, mine, &requests[m]);
        MPI_Issend(send_buf + export_ptr[m], export_ptr[m + 1] - export_ptr[m], MPI_DOUBLE,
                   neighbours[m], 0, mine, &requests[n_neighbours + m]);
    }
    for (int done = 0; done < 2 * n_neighbours; done++) {
        int index;
        MPI_Waitany(2 * n_neighbours, requests, &index, MPI_STATUS_IGNORE);
    }
    MPI_Comm_free(&mine);
    for (int k = 0; k < import_ptr[n_neighbours]; k++)
        x[import_index[k]] = recv_buf[k];
"""
TESTSOME = """
    MPI_Request requests[2 * n_neighbours + 1];
    int done[2 * n_neighbours + 1], count, left = 2 * n_neighbours;
    for (int k = 0; k < export_ptr[n_neighbours]; k++)
        send_buf[k] = x[export_index[k]];
    for (int m = 0; m < n_neighbours; m++) {
        MPI_Irecv(recv_buf + import_ptr[m], import_ptr[m + 1] - import_ptr[m], MPI_DOUBLE,
                  neighbours[m], 0, comm, &requests[m]);
        MPI_Isend(send_buf + export_ptr[m], export_ptr[m + 1] - export_ptr[m], MPI_DOUBLE,
                  neighbours[m], 0, comm, &requests[n_neighbours + m]);
    }
    while (left > 0) {
        MPI_Testsome(2 * n_neighbours, requests, &count, done, MPI_STATUSES_IGNORE);
        if (count != MPI_UNDEFINED)
            left -= count;
    }
    for (int k = 0; k < import_ptr[n_neighbours]; k++)
        x[import_index[k]] = recv_buf[k];
"""
PERSISTENT_PYTHON = """    send = x[export_index]
    recv = np.empty(len(import_index))
    requests = [comm.Recv_init([recv[import_ptr[m]:import_ptr[m + 1]], MPI.DOUBLE],
                               source=int(q), tag=3) for m, q in enumerate(neighbours)]
    requests += [comm.Send_init([send[export_ptr[m]:export_ptr[m + 1]], MPI.DOUBLE],
                                dest=int(q), tag=3) for m, q in enumerate(neighbours)]
    MPI.Prequest.Startall(requests)
    MPI.Request.Waitall(requests)
    for request in requests:
        request.Free()
    x[import_index] = recv
"""
NEIGHBOUR_COLLECTIVE = """    ranks = [int(q) for q in neighbours]
    graph = comm.Create_dist_graph_adjacent(ranks, ranks, reorder=False)
    send, recv = x[export_index], np.empty(len(import_index))
    graph.Neighbor_alltoallv([send, (np.diff(export_ptr), export_ptr[:-1]), MPI.DOUBLE],
                             [recv, (np.diff(import_ptr), import_ptr[:-1]), MPI.DOUBLE])
    graph.Free()
    x[import_index] = recv
"""
PERSISTENT_FORTRAN = """  do m = 1, n_neighbours
    call MPI_Recv_init(recv_buf(import_ptr(m)), import_ptr(m + 1) - import_ptr(m), &
                       MPI_DOUBLE_PRECISION, neighbours(m), TAG, comm, requests(m))
    call MPI_Send_init(send_buf(export_ptr(m)), export_ptr(m + 1) - export_ptr(m), &
                       MPI_DOUBLE_PRECISION, neighbours(m), TAG, comm, requests(n_neighbours + m))
  end do
  do k = 1, export_ptr(n_neighbours + 1) - 1
    send_buf(k) = x(export_index(k))
  end do
  call MPI_Startall(2 * n_neighbours, requests)
  call MPI_Waitall(2 * n_neighbours, requests, MPI_STATUSES_IGNORE)
  do m = 1, 2 * n_neighbours
    call MPI_Request_free(requests(m))
  end do
  do k = 1, import_ptr(n_neighbours + 1) - 1
    x(import_index(k)) = recv_buf(k)
  end do
"""


@pytest.mark.parametrize("lang, text", [
    ("c", lambda: with_body(solution_file("c"), SENDRECV)),
    ("c", lambda: with_body(solution_file("c"), PERSISTENT_C)),
    ("c", lambda: with_body(solution_file("c"), DUP_ISSEND_WAITANY)),
    ("c", lambda: with_body(solution_file("c"), TESTSOME)),
    ("python", lambda: python_body(PERSISTENT_PYTHON)),
    ("python", lambda: python_body(NEIGHBOUR_COLLECTIVE)),
    ("python", lambda: changed(solution_file("python"), "MPI.Request.Waitall(requests)",
                               "MPI.Request.waitall(requests)")),
    ("fortran", lambda: fortran_body(PERSISTENT_FORTRAN))],
    ids=["c_sendrecv", "c_persistent", "c_dup_issend_waitany", "c_testsome",
         "python_persistent", "python_neighbor_alltoallv", "python_lower_case_waitall",
         "fortran_persistent"])
def test_right_exchanges_of_other_kinds_pass(tmp_path, lang, text):
    grading.check_halo_exchange(write(tmp_path, lang, text()), lang, SMALL[2:])


def test_the_monitor_reads_its_lines():
    from course.grading import mpi_monitor

    output = ("noise\n" + mpi_monitor.LINE + '{"event": "foreign_comm", "rank": 1}\n'
              "[host:1] " + mpi_monitor.LINE + '{"event": "mpi_error", "rank": 0}\n'
              + mpi_monitor.LINE + "{broken\n")
    assert [e["event"] for e in mpi_monitor.lines(output)] == ["foreign_comm", "mpi_error"]


# --- task 3: the distributed solve ---------------------------------------------------------------

@pytest.mark.parametrize("lang", ["c", "course"])
def test_the_distributed_solve_with_an_exchange_matches_the_serial_one(tmp_path, lang):
    source = write(tmp_path, "c", solution_file("c")) if lang == "c" else None
    solved = grading.solve_with_exchange(source, lang, ranks=3, size=(6, 5, 4))
    assert solved["converged"] and solved["difference"] < 1e-10, solved
    assert abs(solved["iterations"] - solved["serial_iterations"]) <= 1, solved


# --- task 1: the local tables --------------------------------------------------------------------

def solution_local_tables():
    namespace = {"np": np}
    exec(solution_cell("05_halo", "local_tables"), namespace)      # noqa: S102 - our own notebook
    return namespace["local_tables"]


UNSEEN = [Case(4, "metis", (6, 5, 4)), Case(6, "blocks", (7, 6, 5), dims=(3, 2, 1)),
          Case(3, "random", (4, 3, 3), seed=7), Case(1, "blocks", (2, 1, 1)),
          Case(4, "blocks", (4, 4, 2), dims=(2, 2, 1))]


def test_the_solution_local_tables_pass():
    grading.check_local_tables(solution_local_tables(), UNSEEN)


def wrong_tables(change):
    right = solution_local_tables()

    def local_tables(elements, owner, rank):
        tables = right(elements, owner, rank)
        change(tables, np.asarray(owner))
        return tables
    return local_tables


def sorted_by_number(tables, owner):
    n = tables["n_internal"]
    tables["global_ids"][n:] = np.sort(tables["global_ids"][n:])


def global_export_index(tables, owner):
    tables["export_index"] = tables["global_ids"][tables["export_index"]]


def without_neighbours(tables, owner):
    del tables["neighbours"]


def one_external_node_less(tables, owner):
    tables["global_ids"] = tables["global_ids"][:-1]


def n_internal_one_more(tables, owner):
    tables["n_internal"] = np.int64(tables["n_internal"] + 1)


def global_ids_as_text(tables, owner):
    tables["global_ids"] = np.array([str(v) for v in tables["global_ids"]])


@pytest.mark.parametrize("change, expected", [
    (sorted_by_number, "global_ids is wrong: the right external nodes in the wrong order"),
    (n_internal_one_more, "n_internal is "),
    (global_ids_as_text, "global_ids must be a 1-D array (or list) of integers, got ndarray"),
    (global_export_index, "export_index for neighbour"),
    (without_neighbours, "without neighbours"),
    (one_external_node_less, "external node(s) are missing")])
def test_wrong_local_tables_name_the_field(change, expected):
    with pytest.raises(AssertionError) as info:
        grading.check_local_tables(wrong_tables(change), UNSEEN)
    assert expected in str(info.value), str(info.value)
    assert re.search(r"rank \d+ of the .* mesh", str(info.value)), str(info.value)
    assert "np.int" not in str(info.value) and "array(" not in str(info.value)


def test_the_course_local_module_is_blocked():
    """Every function of course.parallel.local (the module that computes the tables) is blocked
    while local_tables runs, its private helpers too."""
    right = solution_local_tables()

    def local_tables(elements, owner, rank):
        from course.parallel import local
        tables = right(elements, owner, rank)
        tables["import_ptr"] = local._offsets(np.diff(tables["import_ptr"]))
        return tables
    with pytest.raises(AssertionError, match=r"course's own course\.parallel\.local\._offsets"):
        grading.check_local_tables(local_tables, UNSEEN[:1])


def sorted_with_a_key():
    """Right, but not the solution's: the external nodes sorted with a key function."""
    text = changed(solution_cell("05_halo", "local_tables"),
                   "external = external[np.lexsort((external, owner[external]))]",
                   "external = np.array(sorted(external, key=lambda n: (owner[n], n)), dtype=int)")
    namespace = {"np": np}
    exec(text, namespace)                                           # noqa: S102
    return namespace["local_tables"]


def test_externals_sorted_with_a_key_pass():
    grading.check_local_tables(sorted_with_a_key(), UNSEEN[:3])


# --- task 1 in C and Fortran: compiled, called in a child process --------------------------------

TABLES_SUFFIX = {"c": ".c", "fortran": ".f90"}


def compiled_tables(tmp_path, lang: str, text: str | None = None, **options):
    """The solution cell of `lang` (or `text`) as the check's callable."""
    text = written_file("05_halo", f"local_tables_{lang}") if text is None else text
    path = tmp_path / f"local_tables{TABLES_SUFFIX[lang]}"
    path.write_text(text)
    return grading.compiled_local_tables(path, lang, **options)


def tables_failure(tmp_path, lang: str, text: str, cases=UNSEEN, **options) -> str:
    with pytest.raises(AssertionError) as info:
        grading.check_local_tables(compiled_tables(tmp_path, lang, text, **options), cases)
    return str(info.value)


@pytest.mark.parametrize("lang", ["c", "fortran"])
def test_the_compiled_solution_local_tables_pass(tmp_path, lang):
    grading.check_local_tables(compiled_tables(tmp_path, lang), UNSEEN)


def tables_c(*edits) -> str:
    text = written_file("05_halo", "local_tables_c")
    for old, new in edits:
        text = changed(text, old, new)
    return text


def tables_fortran(*edits) -> str:
    text = written_file("05_halo", "local_tables_fortran")
    for old, new in edits:
        text = changed(text, old, new)
    return text


WRONG_TABLES = {
    # the owners taken in descending order: the external nodes not grouped by ascending owner
    "c_owners_descending": ("c", tables_c(("for (int q = 0; q < n_rank; q++) {",
                                           "for (int q = n_rank - 1; q >= 0; q--) {")),
                            "global_ids is wrong: the right external nodes in the wrong order"),
    # a loop from 1, as in Fortran: node 0 is never exported (an export count too small)
    "c_exports_from_1": ("c", tables_c(("        for (int i = 0; i < n_node; i++)                 "
                                        "/* our nodes near q's",
                                        "        for (int i = 1; i < n_node; i++)                 "
                                        "/* our nodes near q's")),
                         "export_ptr is [0, 24, 47], expected [0, 25, 49] (the offsets of each "
                         "neighbour's share in export_index"),
    # global numbers exported, not local indices
    "c_global_exports": ("c", tables_c(("export_index[export_ptr[n_nb + 1]++] = local[i];",
                                        "export_index[export_ptr[n_nb + 1]++] = i;")),
                         "export_index for neighbour"),
    # n_local never counts the external nodes
    "c_n_local": ("c", tables_c(("counts[1] = n_local;", "counts[1] = n_internal;")),
                  "external node(s) are missing"),
    "c_n_neighbours": ("c", tables_c(("counts[2] = n_nb;", "counts[2] = n_rank;")),
                       "n_neighbours (counts[2]) must be between 0 and"),
    # the owners in descending order, in Fortran
    "fortran_owners_descending": ("fortran", tables_fortran(("do q = 0, n_rank - 1",
                                                             "do q = n_rank - 1, 0, -1")),
                                  "global_ids is wrong: the right external nodes in the wrong "
                                  "order"),
    # 0-based node numbers in Fortran
    "fortran_0_based_nodes": ("fortran", tables_fortran(("global_ids(n_internal) = i",
                                                         "global_ids(n_internal) = i - 1"),
                                                        ("global_ids(n_local) = i",
                                                         "global_ids(n_local) = i - 1")),
                              "every entry is one too small (0-based? in Fortran they count "
                              "from 1)"),
    # 0-based offsets in Fortran
    "fortran_0_based_offsets": ("fortran", tables_fortran(
        ("import_ptr(1) = 1", "import_ptr(1) = 0"),
        ("if (n_local - n_internal + 1 == import_ptr(n_nb + 1))",
         "if (n_local - n_internal == import_ptr(n_nb + 1))"),
        ("import_ptr(n_nb + 1) = n_local - n_internal + 1",
         "import_ptr(n_nb + 1) = n_local - n_internal")),
        "import_ptr is [0, "),
    # 0-based local indices in Fortran
    "fortran_0_based_exports": ("fortran", tables_fortran(("      local(i) = n_internal\n",
                                                           "      local(i) = n_internal - 1\n")),
                                "export_index for neighbour"),
}


@pytest.mark.parametrize("name", WRONG_TABLES)
def test_wrong_compiled_local_tables_name_the_table(tmp_path, name):
    lang, text, expected = WRONG_TABLES[name]
    message = tables_failure(tmp_path, lang, text)
    assert expected in message, message
    assert re.search(r"^local_tables for rank \d+ of the .* mesh", message), message
    assert ("from 1, ranks from 0]" in message) == (lang == "fortran" and "counts" not in message)


def test_fortran_messages_count_from_1(tmp_path):
    message = tables_failure(tmp_path, "fortran", WRONG_TABLES["fortran_0_based_exports"][1],
                             UNSEEN[-1:])
    # rank 0 of the 4 x 4 x 2 mesh in 2 x 2 blocks owns 12 nodes and sends 6 to rank 1 first,
    # local numbers 2, 4, ..., 12 in Fortran's count: the 0-based answer gives 1, 3, ...
    assert "export_index(1:6)) is [1, 3, " in message and "expected [2, 4, " in message, message
    assert "every entry is one too small" in message, message


def test_a_compiled_answer_that_writes_past_its_room_fails(tmp_path):
    text = tables_c(("counts[2] = n_nb;", "counts[2] = n_nb;\n    neighbours[n_rank] = 0;"))
    message = tables_failure(tmp_path, "c", text, UNSEEN[:1])
    assert "neighbours has room for 4 entries, and your function wrote past them, into " \
           "neighbours[4]" in message, message


def test_a_compiled_answer_that_crashes_or_hangs_fails(tmp_path):
    crash = tables_c(("counts[2] = n_nb;", "counts[2] = n_nb;\n    *(volatile int *)0 = 1;"))
    message = tables_failure(tmp_path, "c", crash, UNSEEN[:1])
    assert "local_tables for rank 0 of" in message and "crashed with SIGSEGV" in message, message
    hang = tables_fortran(("  counts = [n_internal, n_local, n_nb]\n",
                           "  do while (n_nb >= 0)\n    counts(1) = n_nb\n  end do\n"))
    message = tables_failure(tmp_path, "fortran", hang, UNSEEN[:1], timeout=2.0)
    assert "did not finish within 2 s" in message, message


def test_the_untouched_compiled_stubs_fail(tmp_path):
    from course.grading import ClearSolutionsByCellLanguage  # noqa: F401 - what the stubs are

    for lang, comment in (("c", "/* YOUR CODE HERE */"), ("fortran", "! YOUR CODE HERE")):
        text = written_file("05_halo", f"local_tables_{lang}")
        begin, end = ("/* ### BEGIN SOLUTION */", "/* ### END SOLUTION */") if lang == "c" \
            else ("! ### BEGIN SOLUTION", "! ### END SOLUTION")
        stub = text[:text.index(begin)] + comment + text[text.index(end) + len(end):]
        message = tables_failure(tmp_path, lang, stub, UNSEEN[:1])
        assert "your function wrote nothing into counts" in message, message


def test_task1_language_must_be_one_of_three(tmp_path):
    with pytest.raises(AssertionError, match="TASK1_LANGUAGE must be 'python', 'c' or 'fortran'"):
        grading.compiled_local_tables(None, "C")
