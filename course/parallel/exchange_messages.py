"""What the check of the learner's halo exchange (course.parallel.grading) tells the learner: one
paragraph per way an exchange can go wrong, with what happened, where, and what to look at."""

from __future__ import annotations

import re
import signal

EAGER_LIMIT = 4096      # bytes: Open MPI's shared-memory eager limit; others allow some tens of KB
FORTRAN_BASE = (" In Fortran the tables are 1-based: the m-th neighbour's values are "
                "recv_buf(import_ptr(m) : import_ptr(m+1)-1) and go to x(import_index(k)).")


def _case(cases: list, event: dict | None):
    return cases[event["case"]] if event is not None and event["case"] < len(cases) else None


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
    return text


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
             and not re.search(r"^-{5,}|mpiexec noticed|Primary job|non-zero exit code|"
                               r"job has been aborted|^\*\*\*", line.strip())]
    return " | ".join(lines[:count])


def crash(running: dict | None, cases: list, returncode: int | None, output: str,
          lang: str) -> str:
    case = _case(cases, running)
    rank, name = _signal(output)
    words = _own_words(output)
    said = f" Before it ended, the job wrote: {words}." if words else ""
    base = FORTRAN_BASE if lang == "fortran" else ""
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
