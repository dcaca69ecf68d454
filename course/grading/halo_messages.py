"""What the check of the learner's halo exchange (course.grading.halo) tells the learner: one
paragraph per way an exchange can go wrong, with what happened, where, and what to look at."""

from __future__ import annotations

import re
import signal

EAGER_LIMIT = 4096      # bytes: Open MPI's shared-memory eager limit; others allow some tens of KB
FORTRAN_BASE = (" In Fortran the tables are 1-based: the m-th neighbour's values are "
                "recv_buf(import_ptr(m) : import_ptr(m+1)-1) and go to x(import_index(k)).")


def _case(cases: list, event: dict | None):
    return cases[event["case"]] if event is not None and event["case"] < len(cases) else None


def case_of(event: dict | None, cases: list):
    """The case an event of the driver belongs to (None: none, or not known)."""
    return _case(cases, event)


def _where(case) -> str:
    return f"with {case.describe()} ({case.ranks} ranks)" if case is not None else ""


def _last_lines(output: str, count: int = 6) -> str:
    lines = [line for line in output.strip().splitlines() if line.strip() and "----" not in line]
    return " | ".join(line.strip() for line in lines[-count:])


def exception(event: dict, cases: list) -> str:
    if event["stage"] == "load":
        return f"your halo_exchange could not be loaded (rank {event['rank']}): {event['error']}"
    case = _case(cases, event)
    text = (f"halo_exchange raised an exception on rank {event['rank']} {_where(case)}: "
            f"{event['error']}.")
    if "NotImplementedError" in event["error"]:
        text += " Write your code where it says YOUR CODE HERE and delete the raise line."
    if "MPI_ERR_TRUNCATE" in event["error"]:
        text += " " + TRUNCATE_HINT.format(**_TABLES["python"])
    return text


# --- what the MPI monitor (course.grading.mpi_monitor) saw ----------------------------------------

_TABLES = {"c": {"count": "import_ptr[m+1] - import_ptr[m]", "buf": "recv_buf + import_ptr[m]",
                 "type": "MPI_DOUBLE", "from": "neighbours[m]"},
           "fortran": {"count": "import_ptr(m+1) - import_ptr(m)",
                       "buf": "recv_buf(import_ptr(m) : import_ptr(m+1)-1)",
                       "type": "MPI_DOUBLE_PRECISION", "from": "neighbours(m)"},
           "python": {"count": "import_ptr[m+1] - import_ptr[m]",
                      "buf": "recv[import_ptr[m]:import_ptr[m+1]]", "type": "MPI.DOUBLE",
                      "from": "neighbours[m]"}}
TRUNCATE_HINT = ("A receive must have room for the whole message: from {from} it gets {count} "
                 "values of {type}, into {buf}.")
_SENDS = ("MPI_Isend", "MPI_Issend", "MPI_Ibsend", "MPI_Irsend")


def foreign_comm(event: dict, running: dict | None, cases: list) -> str:
    """A point-to-point call on another communicator than the one given (on MPI_COMM_WORLD, the
    monitor ended the job there)."""
    ended = "; the MPI job was ended there" if event["comm"] == "MPI_COMM_WORLD" else ""
    where = _where(_case(cases, running))
    return (f"halo_exchange called {event['call']} on {event['comm']} on rank {event['rank']}"
            f"{' ' + where if where else ''}, not on the comm it is given{ended}. The check "
            "runs every partition on a communicator of its own, whose ranks are numbered "
            "differently from MPI_COMM_WORLD, while other messages travel on MPI_COMM_WORLD: the "
            "ranks in neighbours are ranks of comm, so pass comm to every MPI call.")


def mpi_error(event: dict, case, lang: str, expected: int | None) -> str:
    """An MPI call of the learner's that failed (the monitor then ended the job)."""
    where = _where(case)
    error = event["error"]
    said = event["text"] if event["text"].startswith(error) else f"{error}: {event['text']}"
    call = (f"{event['request']} (completed by {event['call']})"
            if event["request"] != event["call"] else event["call"])
    within = f", in {call}" if event["call"] != "an MPI call" else ""
    text = (f"halo_exchange failed on rank {event['rank']} {where} with the MPI error "
            f"{said}{within}; the MPI job was ended at once.")
    if error != "MPI_ERR_TRUNCATE":
        return text + {
            "MPI_ERR_RANK": " A rank that is not in comm: neighbours[m] is the rank to talk to.",
            "MPI_ERR_COUNT": " A negative count: is an offset taken from the wrong table?",
            "MPI_ERR_REQUEST": " A request that was never made (or already freed) was waited "
                               "for: wait for exactly the requests your calls made.",
            "MPI_ERR_BUFFER": " A NULL buffer: are send_buf and recv_buf passed on?",
        }.get(error, "")
    tables = _TABLES.get(lang, _TABLES["c"])
    if event.get("count", -1) < 0:          # the receive is not known
        return (text + " A message was larger than the receive posted for it. "
                + TRUNCATE_HINT.format(**tables))
    size = event.get("type_size") or 0
    room = (f"{event['count']} values of {event['type']}" if event.get("type")
            else f"{event['count']} values")
    text += (f" A message was larger than the receive posted for it: the receive from rank "
             f"{event['peer']} has room for {room}" + (f" ({event['count'] * size} bytes)"
                                                         if size else "") + ", but ")
    if expected is not None:
        text += (f"rank {event['peer']} sends {expected} values ({8 * expected} bytes) to rank "
                 f"{event['rank']}.")
    else:
        text += f"rank {event['peer']} sends more."
    if size and size != 8:
        text += (f" The values are doubles (8 bytes each), not {size}-byte items: receive them "
                 f"as {tables['type']}.")
    return text + " " + TRUNCATE_HINT.format(**tables)


def _requests(calls: dict) -> str:
    """'2 send requests (MPI_Isend)' for {"MPI_Isend": 2}, and so on."""
    parts = []
    for call, n in calls.items():
        what = ("send" if call in _SENDS else "receive" if call == "MPI_Irecv" else
                "persistent")
        plural = "s" if n > 1 else ""
        started = " started" if what == "persistent" else ""
        parts.append(f"{n} {what} request{plural} ({call}){started}")
    return " and ".join(parts)


def leaks(result: dict, case, lang: str, exchanges: int) -> str:
    """Requests that halo_exchange left outstanding when it returned."""
    bad = [r for r in result["ranks"] if "leaks" in r]
    first = min(r["leaks"]["repeat"] for r in bad)
    per_rank = "; ".join(
        f"on rank {r['rank']}, {_requests(r['leaks']['requests'])} "
        f"{'was' if sum(r['leaks']['requests'].values()) == 1 else 'were'} never completed by "
        "a wait or test" for r in bad[:4]) + ("; ..." if len(bad) > 4 else "")
    calls = {call for r in bad for call in r["leaks"]["requests"]}
    text = (f"halo_exchange returned with requests still outstanding {_where(case)}, in exchange "
            f"{first} of {exchanges}: {per_rank}. Every request your exchange makes must be "
            "complete before it returns: wait for all of them (MPI_Waitall over the receives "
            "and the sends, 2 * n_neighbours requests).")
    if calls & set(_SENDS):
        text += (" A send is complete only once its request is: until then the send buffer "
                 "may not be written again (the next exchange packs into it), and a request "
                 "never waited for stays in the MPI library.")
    if "MPI_Irecv" in calls:
        text += (" A receive whose request was not waited for may not have arrived yet when "
                 "you unpack it.")
    return text


def world_message(result: dict, case) -> str:
    """A message of the learner's code caught on MPI_COMM_WORLD."""
    bad = [r for r in result["ranks"] if "world_message" in r][0]
    caught = bad["world_message"]
    return (f"halo_exchange sent a message on MPI_COMM_WORLD {_where(case)}: in exchange "
            f"{caught['repeat']}, rank {bad['rank']} received on MPI_COMM_WORLD a message (tag "
            f"{caught['tag']}) from world rank {caught['source']}, where the check has other "
            "messages on their way. Use the comm you are given for every message: the check "
            "runs each partition on a communicator of its own, whose ranks are numbered "
            "differently from MPI_COMM_WORLD.")


def _rank_summary(report: dict) -> str:
    parts = [f"{n['wrong']} of {n['of']} values from rank {n['rank']} are wrong"
             + (f" ({n['untouched']} of them left as they were)" if n["untouched"] else "")
             for n in report["neighbours"]]
    if report["internal_changed"]:
        parts.append(f"{report['internal_changed']} of its {report['n_internal']} internal "
                     "values changed")
    return f"on rank {report['rank']}, " + ", ".join(parts)


def wrong_values(result: dict, case, lang: str, exchanges: int) -> str:
    bad = [r for r in result["ranks"] if not r["ok"]]
    first = min(r["repeat"] for r in bad)
    text = (f"halo_exchange gives wrong values {_where(case)}, in exchange {first} of "
            f"{exchanges}: " + "; ".join(_rank_summary(r) for r in bad[:4])
            + ("; ..." if len(bad) > 4 else "") + ".")
    external = [n for r in bad for n in r["neighbours"]]
    if external and all(n["untouched"] == n["wrong"] for n in external):
        text += (" The external entries were left as they were: after the wait, unpack the "
                 "received values into x[import_index]" +
                 (" (fill x in place; do not bind a new array to the name x)."
                  if lang == "python" else "."))
    if any(r["internal_changed"] for r in bad):
        text += (" The internal entries x[0 .. n_internal-1] belong to this rank and must not "
                 "change: are export and import swapped? Pack and send x[export_index], receive "
                 "and unpack into x[import_index].")
    if first > 1:
        text += (" Exchange 1 was right: something stays from one call to the next (every "
                 "call must send the values x holds at that call).")
    if lang == "fortran":
        text += FORTRAN_BASE
    return text + (" Every external value must arrive bit for bit: the k-th value a rank sends "
                   "to a neighbour is the k-th that neighbour receives from it.")


def deadlock(running: dict | None, cases: list, exchange_timeout: float, output: str) -> str:
    case = _case(cases, running)
    if case is None:
        return ("the MPI job did not finish in time, before any exchange began (the machine may "
                f"be very busy): {_last_lines(output) or 'no output'}")
    size = running["largest_message"]
    text = (f"halo_exchange did not finish within {exchange_timeout:g} s {_where(case)}: the "
            "ranks were waiting for each other (a deadlock), and the job was stopped.")
    unmatched = ("a receive without a matching send: a wrong source or destination rank, "
                 "different tags on the two sides, another communicator than the comm you are "
                 "given (not MPI_COMM_WORLD), or a request that nobody waits for")
    if size <= EAGER_LIMIT:
        return (text + f" The messages here are small (at most {size // 8} values), so look for "
                + unmatched + ".")
    return (text + f" Here the largest message holds {size // 8} values ({size / 1024:.0f} KB), "
            "more than MPI sends without waiting for its receiver (the eager limit: a few KB). "
            "A blocking Send to every neighbour before the receives then waits for a receive "
            "that nobody has posted, on every rank: post all the receives first (Irecv), then "
            "all the sends (Isend), then wait for all of them (Waitall). Otherwise look for "
            + unmatched + ".")


def world_to_case_rank(world_rank: int, world_size: int) -> int:
    """The rank in a case's communicator of a rank of the job (halo_driver.case_comm: comm
    rank r is world rank r + 1, modulo the job's size)."""
    return (world_rank - 1) % world_size


def _signal(output: str) -> tuple[str | None, str | None]:
    """(rank, signal name) from Open MPI's or MPICH's report of a rank killed by a signal."""
    found = re.search(r"process rank (\d+) with PID \d+ .*? exited on signal (\d+)", output,
                      re.S)
    if found:
        return found.group(1), signal.Signals(int(found.group(2))).name
    found = re.search(r"(?:signal|Signal:?)\s*(\d+)\b", output)
    if found and 0 < int(found.group(1)) < 65:
        return None, signal.Signals(int(found.group(1))).name
    if re.search(r"Segmentation fault", output):
        return None, "SIGSEGV"
    return None, None


def _own_words(output: str, count: int = 3) -> str:
    """The lines of the output that are neither the MPI library's crash report nor its banners:
    what the C library, the Fortran run time or the learner's code said."""
    lines = [line.strip() for line in output.splitlines()
             if line.strip() and not re.match(r"^\[[^\]]*:\d+\]", line.strip())
             and "course-mpi-monitor: " not in line
             and not re.search(r"^-{5,}|mpiexec noticed|Primary job|non-zero exit code|"
                               r"job has been aborted|^\*\*\*", line.strip())]
    return " | ".join(lines[:count])


def crash(running: dict | None, cases: list, returncode: int | None, output: str,
          lang: str) -> str:
    case = _case(cases, running)
    rank, name = _signal(output)
    if rank is not None and case is not None and cases:    # MPI names the rank in world
        rank = str(world_to_case_rank(int(rank), max(c.ranks for c in cases)))
    words = _own_words(output)
    said = f" Before it ended, the job wrote: {words}." if words else ""
    base = FORTRAN_BASE if lang == "fortran" else ""
    error = re.search(r"\*\*\* (MPI_ERR_[A-Z_]+): ([^\n]*)", output)
    if error is not None:         # MPI_ERRORS_ARE_FATAL: the MPI library's own report
        call = re.search(r"An error occurred in (MPI_\w+)", output)
        text = (f"halo_exchange failed {_where(case)} with the MPI error {error.group(1)}: "
                f"{error.group(2).strip()}" + (f", in {call.group(1)}" if call else "") +
                "; the MPI job was ended.")
        if error.group(1) == "MPI_ERR_TRUNCATE":
            text += (" A message was larger than the receive posted for it. " +
                     TRUNCATE_HINT.format(**_TABLES.get(lang, _TABLES["c"])))
        return text + base
    if name is not None:
        on_rank = f" on rank {rank}" if rank is not None else ""
        hint = {"SIGSEGV": " (a segmentation fault: an index out of bounds, a buffer too small, "
                           "or a NULL pointer?)",
                "SIGABRT": " (an abort: often the C library finding its memory corrupted, after "
                           "a write past the end of an array)"}.get(name, "")
        return (f"halo_exchange crashed with {name}{on_rank} {_where(case)}{hint}; the MPI job "
                f"was ended.{said}{base}")
    return (f"the MPI job running halo_exchange {_where(case)} ended with exit status "
            f"{returncode} before it reported every check.{said or ' It wrote nothing.'}{base}")
