"""An MPI job that cannot hang its caller: `mpiexec -n P python ARGS` in a session of its own,
watched from a thread that reads its output, and stopped (with every process it started) when it
takes too long.

The program reports to its caller on stdout, one event per line: REPORT, then a JSON object with
at least "event". An event {"event": "start", ...} opens a step that must end (with the next event)
within `step_timeout` seconds, e.g. one halo exchange; everything else has until `timeout`.

    job = run_watched(["-m", "mpi4py", "-m", "course.grading.halo_driver", ...], 4, 60, 4)
    job.events, job.output, job.returncode, job.stopped

Two runners for the benchmarks: course_solve (the Python driver, `python -m course solve
--parallel --json` under mpiexec) and run_fem3d_mpi (the compiled programs fem3d_mpi_c and
fem3d_mpi_f on FEM3D_INPUT, with R ranks x T threads: what they print, read into a dict).
"""

from __future__ import annotations

import json
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import threading
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPORT = "course-mpi-job: "     # a line on stdout that starts with this is an event (JSON)


@dataclass
class Job:
    """What a watched job left: its events, the rest of its output (stdout and stderr of every
    rank and of mpiexec), its exit status, and whether it had to be stopped."""
    events: list
    output: str
    returncode: int | None
    stopped: bool


def report(**event) -> None:
    """Send an event to the caller (from rank 0, usually)."""
    sys.stdout.write(REPORT + json.dumps(event) + "\n")
    sys.stdout.flush()


def mpi_environment() -> dict:
    """The environment of an mpiexec job on a small, shared machine: Open MPI as root and
    oversubscribed (course.toolchain.mpi_env), waiting ranks giving up their core, one thread
    per rank, and the course package importable."""
    from ..toolchain import mpi_env

    package_root = str(Path(__file__).resolve().parents[2])
    path = os.environ.get("PYTHONPATH", "")
    return {**os.environ, **mpi_env(), "OMPI_MCA_mpi_yield_when_idle": "1",
            "OMP_NUM_THREADS": "1",
            "PYTHONPATH": package_root + (os.pathsep + path if path else "")}


def run_watched(python_args: list, ranks: int, timeout: float, step_timeout: float,
                preload: Path | None = None, env: dict | None = None) -> Job:
    """`mpiexec -n ranks python PYTHON_ARGS`, stopped past `timeout` seconds in all, or when a
    step it has started has not ended within `step_timeout` seconds. MPIEXEC_TIMEOUT is set too,
    as a last resort should this process itself be killed. preload: a shared library preloaded
    into every rank (LD_PRELOAD of the ranks only, not of mpiexec), e.g. the MPI monitor of
    course.grading.mpi_monitor; env: more variables for the job's environment."""
    mpiexec = shutil.which("mpiexec")
    if mpiexec is None:
        raise AssertionError("mpiexec is not installed (python -m course doctor says what to "
                             "install)")
    env = {**mpi_environment(), **(env or {}), "MPIEXEC_TIMEOUT": str(int(timeout) + 10)}
    ranks_run = [sys.executable]
    if preload is not None:          # through env(1): the ranks get it, mpiexec does not
        preloaded = ":".join(filter(None, [str(preload), env.get("LD_PRELOAD", "")]))
        ranks_run = [shutil.which("env") or "/usr/bin/env", f"LD_PRELOAD={preloaded}",
                     sys.executable]
    command = [mpiexec, "-n", str(ranks), *ranks_run, *map(str, python_args)]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True, env=env, start_new_session=True)
    lines: queue.Queue = queue.Queue()
    reader = threading.Thread(target=_read_lines, args=(process.stdout, lines), daemon=True)
    reader.start()
    events, output, stopped = [], [], False
    try:
        stopped = _collect(lines, events, output, time.monotonic() + timeout, step_timeout)
    finally:                    # also when the caller is interrupted (a notebook cell's timeout)
        _stop(process)
        reader.join(timeout=5)
    while not lines.empty():
        line = lines.get()
        if line is not None:
            output.append(line)
    return Job(events, "".join(output), process.returncode, stopped)


def course_solve(ranks: int, args: list, threads: int = 1, mpiexec_options: list = (),
                 timeout: float = 600) -> dict:
    """`mpiexec -n ranks python -m course solve ARGS --parallel --json` with `threads` OpenMP
    threads per rank: rank 0's summary, or RuntimeError with the end of the job's error output
    (a failed run, or one stopped after `timeout` seconds with every process it started)."""
    env = {"OMP_NUM_THREADS": str(threads), "OMP_PLACES": "cores", "OMP_PROC_BIND": "close"}
    words = [*map(str, args), "--parallel", "--threads", str(threads), "--json"]
    command = [shutil.which("mpiexec") or "mpiexec", "-n", str(ranks), *mpiexec_options,
               sys.executable, "-m", "course", "solve", *words]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env={**mpi_environment(), **env}, start_new_session=True)
    try:
        out, err = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _stop(process)
        raise RuntimeError(f"{ranks} ranks x {threads} threads: course solve "
                           f"{' '.join(words)} did not finish in {timeout:.0f} s") from None
    if process.returncode != 0:
        tail = "\n".join(err.strip().splitlines()[-5:])
        raise RuntimeError(f"{ranks} ranks x {threads} threads: course solve {' '.join(words)} "
                           f"failed (exit {process.returncode})\n{tail}")
    return json.loads(out.strip().splitlines()[-1])


# The input of fem3d_mpi_c / _f (lecture 05, lines 8 and 9 of 08_hybrid): the model problem of
# 02_fem3d on n^3 elements of the unit cube (T = 0 on zmax, the flux 0.5 into zmin, source 1,
# conductivity 1), the nodes cut into `ranks` slabs along z, the preconditioner and the ordering.
FEM3D_INPUT = """{n} {n} {n}
{h} {h} {h}
1.0 1.0
0.5
zmax
{tol}
1 1 {ranks}
{precond} {sweeps}
{ordering} {colors}
"""
_FEM3D_PATTERNS = {
    "unknowns": r"elements, (\d+) unknowns", "nnz": r"unknowns, (\d+) nonzeros",
    "iterations": r"CG: (\d+) iterations", "converged": r"CG: \d+ iterations, .*\((\w+ ?\w*)\)",
    "reductions_per_iteration": r"reductions per iteration (\d+)",
    "halo_exchanges_per_iteration": r"halo exchanges per iteration (\d+)",
    "colors": r"colors (\d+\.\.\d+)", "mpi_thread_level": r"provided (\w+)",
    "threads_per_rank": r"OpenMP threads per rank (\d+)",
    "seconds": r"solve (\S+) s, ", "us_per_iteration": r"s, (\S+) us per iteration"}


def run_fem3d_mpi(lang: str, n: int, ranks: int, precond: str, sweeps: int = 1, threads: int = 1,
                  ordering: str = "natural", colors: int = 0, tol: float = 1e-8,
                  mpiexec_options=(), timeout: float = 900) -> dict:
    """One run of the compiled program fem3d_mpi_c (lang "c") or fem3d_mpi_f ("fortran") on
    FEM3D_INPUT: `ranks` MPI ranks of `threads` OpenMP threads each (OMP_PLACES=cores,
    OMP_PROC_BIND=close; mpiexec_options place the ranks, e.g. hybrid.launch_options), the
    preconditioner with its sweeps, and the ordering of each rank's IC(0) (natural 0, or cm-rcm
    K ...). Returns what the program printed: unknowns, nnz, iterations, converged, the
    reductions and halo exchanges per iteration, colors_per_rank (fewest, most), the MPI thread
    level, threads_per_rank, and its own clock of the solve (seconds, us_per_iteration: the
    slowest rank); RuntimeError with the program's message if it fails or outlasts `timeout`."""
    from .. import native

    if lang not in ("c", "fortran"):
        raise ValueError(f"lang must be c or fortran, got {lang!r}")
    program = f"fem3d_mpi_{lang[0]}"
    env = {**mpi_environment(), "OMP_NUM_THREADS": str(threads), "OMP_PLACES": "cores",
           "OMP_PROC_BIND": "close", "MPIEXEC_TIMEOUT": str(int(timeout))}
    text = FEM3D_INPUT.format(n=n, h=1.0 / n, tol=tol, ranks=ranks, precond=precond,
                              sweeps=sweeps, ordering=ordering, colors=colors)
    with tempfile.TemporaryDirectory(prefix="course-fem3d-mpi-") as folder:
        (Path(folder) / "input.dat").write_text(text)
        command = [shutil.which("mpiexec") or "mpiexec", "-n", str(ranks),
                   *map(str, mpiexec_options), str(native.binary(program)), "input.dat"]
        try:
            done = subprocess.run(command, cwd=folder, capture_output=True, text=True, env=env,
                                  timeout=timeout + 10)
        except subprocess.TimeoutExpired:
            raise RuntimeError(f"{program} on {ranks} ranks x {threads} threads did not finish "
                               f"in {timeout:.0f} s") from None
    if done.returncode not in (0, 1):            # 1: not converged, still a summary
        message = (done.stderr.strip() or done.stdout.strip())[-1000:]
        raise RuntimeError(f"{program} on {ranks} ranks x {threads} threads failed "
                           f"(exit {done.returncode}): {message}")
    found = {key: re.search(pattern, done.stdout) for key, pattern in _FEM3D_PATTERNS.items()}
    missing = [key for key, match in found.items() if match is None]
    if missing:
        raise RuntimeError(f"{program}: no {', '.join(missing)} in its summary:\n{done.stdout}")
    value = {key: match[1] for key, match in found.items()}
    low, high = (int(v) for v in value["colors"].split(".."))
    return {"program": program, "lang": lang, "n": n, "ranks": ranks, "threads": threads,
            "precond": precond, "sweeps": sweeps, "ordering": ordering, "colors_asked": colors,
            "unknowns": int(value["unknowns"]), "nnz": int(value["nnz"]),
            "iterations": int(value["iterations"]),
            "converged": value["converged"] == "converged",
            "reductions_per_iteration": int(value["reductions_per_iteration"]),
            "halo_exchanges_per_iteration": int(value["halo_exchanges_per_iteration"]),
            "colors_per_rank": (low, high), "mpi_thread_level": value["mpi_thread_level"],
            "threads_per_rank": int(value["threads_per_rank"]),
            "seconds": float(value["seconds"]),
            "us_per_iteration": float(value["us_per_iteration"])}


def _read_lines(stream, lines: queue.Queue) -> None:
    for line in stream:
        lines.put(line)
    lines.put(None)


def _collect(lines: queue.Queue, events: list, output: list, deadline: float,
             step_timeout: float) -> bool:
    """Read the job's output until it ends (False) or a deadline passes (True)."""
    started = None
    while True:
        limit = deadline if started is None else min(deadline, started + step_timeout)
        try:
            line = lines.get(timeout=max(0.0, limit - time.monotonic()))
        except queue.Empty:
            return True
        if line is None:
            return False
        if not line.startswith(REPORT):
            output.append(line)
            continue
        event = json.loads(line[len(REPORT):])
        events.append(event)
        started = time.monotonic() if event["event"] == "start" else None


def _stop(process: subprocess.Popen) -> None:
    """End the job if it still runs: SIGTERM to mpiexec (which ends its ranks); then SIGKILL to
    whatever is left of the session it was started in."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
    for pid in _session_members(process.pid):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    process.wait()


def _session_members(session: int) -> list[int]:
    """The processes of a session (the job's: mpiexec's pid is its session id)."""
    members = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[3]) == session:             # fields after "pid (comm)": state ppid pgrp sid
            members.append(int(stat.parent.name))
    return members
