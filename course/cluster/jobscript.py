"""Job scripts for Slurm and PJM from one template (07_cluster, `python -m course jobscript`).

A request (program, nodes, ranks per node, threads, time, queue, group, system) is checked first
against the rules of the system (queues, node ranges, elapse limits, cores per node); a request
that breaks one gets a one-line `JobScriptError` and no script. A script has the same four parts
for either scheduler: the directives, the environment (modules, OpenMP threads and binding), the
launch line, and comments saying how to submit it and follow it.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

from .systems import SYSTEMS, System

ROOT = Path(__file__).resolve().parents[2]
SCHEDULERS = ("slurm", "pjm")

# the course's standalone programs (build/native/release/bin), OpenMP-only or MPI
OPENMP_PROGRAMS = {"fem1d_c", "fem1d_f", "fem3d_c", "fem3d_f", "solc", "solf", "iccg_c", "iccg_f"}
MPI_PROGRAMS = {"fem3d_mpi_c", "fem3d_mpi_f", "mpi_hello_c", "mpi_hello_f",
                "pencil_fft_c", "pencil_fft_f"}

COMMANDS = {
    "slurm": {"submit": "sbatch", "status": "squeue --me", "cancel": "scancel", "prefix": "#SBATCH"},
    "pjm": {"submit": "pjsub", "status": "pjstat", "cancel": "pjdel", "prefix": "#PJM"},
}


class JobScriptError(ValueError):
    """A request the system would refuse (or that makes no sense): one line saying why."""


@dataclass
class JobRequest:
    program: list[str]                  # the program and its arguments
    scheduler: str = "slurm"
    system: str = "generic"
    nodes: int = 1
    ranks_per_node: int = 1
    threads: int = 1
    time: str = "00:10:00"              # elapse limit, HH:MM:SS
    queue: str | None = None
    group: str | None = None            # PJM -g / Slurm --account: who pays
    name: str | None = None
    cores_per_node: int | None = None   # generic systems only (the named ones know theirs)
    launcher: str = "mpiexec"           # generic Slurm: mpiexec (Open MPI) or srun
    workdir: str = str(ROOT)            # the course checkout on the cluster; "$HOME/..." or "~/..."
                                        # stays relative to the home folder of whoever submits
    notes: list[str] = field(default_factory=list)

    @property
    def ranks(self) -> int:
        return self.nodes * self.ranks_per_node


def seconds(hms: str) -> int:
    """HH:MM:SS (hours may exceed 24, minutes and seconds below 60) in seconds."""
    match = re.fullmatch(r"(\d+):([0-5]\d):([0-5]\d)", hms or "")
    if not match:
        raise JobScriptError(f"time must be HH:MM:SS (minutes and seconds below 60), not {hms!r}")
    h, m, s = (int(g) for g in match.groups())
    return 3600 * h + 60 * m + s


def is_mpi(request: JobRequest) -> bool:
    """Launched through MPI: a known MPI program, or more than one rank of anything else."""
    name = Path(request.program[0]).name
    return name in MPI_PROGRAMS or request.ranks > 1


def check(request: JobRequest) -> System:
    """The system the request is for, once every rule holds; else JobScriptError."""
    if request.system not in SYSTEMS:
        raise JobScriptError(f"unknown system {request.system!r}: one of {', '.join(SYSTEMS)}")
    system = SYSTEMS[request.system]
    if request.scheduler not in SCHEDULERS:
        raise JobScriptError(f"unknown scheduler {request.scheduler!r}: slurm or pjm")
    if request.system != "generic" and request.scheduler != system.scheduler:
        raise JobScriptError(f"{system.name} schedules with {system.scheduler}, "
                             f"not {request.scheduler}")
    if not request.program or not request.program[0].strip():
        raise JobScriptError("no program to run (--program PROG [ARGS])")
    for what in ("nodes", "ranks_per_node", "threads"):
        if getattr(request, what) < 1:
            raise JobScriptError(f"{what.replace('_', '-')} must be 1 or more, "
                                 f"not {getattr(request, what)}")
    wanted = seconds(request.time)
    if wanted == 0:
        raise JobScriptError("time must be more than 00:00:00")
    name = Path(request.program[0]).name
    if name in OPENMP_PROGRAMS and request.ranks > 1:
        raise JobScriptError(f"{name} is an OpenMP program, not an MPI one: one rank "
                             f"(--nodes 1 --ranks-per-node 1), not {request.ranks}")
    if request.launcher not in ("mpiexec", "srun"):
        raise JobScriptError(f"launcher must be mpiexec or srun, not {request.launcher!r}")
    if request.launcher == "srun" and request.scheduler != "slurm":
        raise JobScriptError("srun launches only under Slurm")
    cores = system.cores_per_node or request.cores_per_node
    if request.system != "generic" and request.cores_per_node not in (None, cores):
        raise JobScriptError(f"a {system.name} node has {cores} cores: "
                             f"--cores-per-node {request.cores_per_node} is wrong")
    per_node = request.ranks_per_node * request.threads
    if cores is not None and per_node > cores:
        raise JobScriptError(f"{request.ranks_per_node} rank(s) x {request.threads} thread(s) = "
                             f"{per_node} per node, more than the {cores} cores of a node "
                             f"of {system.name}")
    if system.group_required and not request.group:
        raise JobScriptError(f"a job on {system.name} needs --group (the group whose tokens "
                             f"it uses)")
    if system.queues:
        _check_queue(system, request, wanted)
    return system


def _check_queue(system: System, request: JobRequest, wanted: int) -> None:
    name = request.queue or system.default_queue
    queue = system.queue(name)
    if queue is None:
        raise JobScriptError(f"{system.name} has no queue {name!r}: "
                             f"{', '.join(q.name for q in system.queues)}")
    if not queue.min_nodes <= request.nodes <= queue.max_nodes:
        raise JobScriptError(f"queue {queue.name} takes {queue.min_nodes}-{queue.max_nodes} "
                             f"nodes, not {request.nodes}")
    limit = queue.elapse_limit(request.nodes)
    if wanted > seconds(limit):
        raise JobScriptError(f"time {request.time} is over the limit {limit} of queue "
                             f"{queue.name} at {request.nodes} node(s)")


def render(request: JobRequest) -> str:
    """The job script (after `check`): directives, environment, launch, how to submit it."""
    system = check(request)
    name = request.name or Path(request.program[0]).name
    cmd = COMMANDS[request.scheduler]
    queue = request.queue or system.default_queue
    lines = ["#!/bin/bash",
             f"# {name}: {_shape(request)} on {_where(system, request)}",
             f"# submit: {cmd['submit']} FILE   status: {cmd['status']}   "
             f"cancel: {cmd['cancel']} JOBID"]
    lines += [f"# note: {note}" for note in (*system.notes, *request.notes)]
    directives = _slurm_directives if request.scheduler == "slurm" else _pjm_directives
    lines += [f"{cmd['prefix']} {d}" for d in directives(request, name, queue)]
    lines += ["", "set -e", cd_line(request.workdir)]
    lines += [f"module load {m}" for m in system.modules]
    lines += [f"export OMP_NUM_THREADS={request.threads}",
              "export OMP_PLACES=cores          # one thread per core",
              "export OMP_PROC_BIND=close       # a rank's threads on neighbouring cores"]
    lines += [f"export {k}={v}" for k, v in system.env]
    lines += [_launch(request, system), ""]
    return "\n".join(lines)


def _shape(request: JobRequest) -> str:
    return (f"{request.nodes} node(s) x {request.ranks_per_node} rank(s) x "
            f"{request.threads} thread(s)")


def _slurm_directives(request: JobRequest, name: str, queue: str | None) -> list[str]:
    out = [f"--job-name={name}", f"--nodes={request.nodes}",
           f"--ntasks-per-node={request.ranks_per_node}",
           f"--cpus-per-task={request.threads}", f"--time={request.time}",
           f"--output={name}-%j.out                # stdout and stderr, %j = job id"]
    if queue:
        out.append(f"--partition={queue}")
    if request.group:
        out.append(f"--account={request.group}")
    return out


def _pjm_directives(request: JobRequest, name: str, queue: str | None) -> list[str]:
    out = [f'-N "{name}"']
    if queue:
        out.append(f"-L rscgrp={queue}")
    out.append(f"-L node={request.nodes}")
    if is_mpi(request):
        out.append(f"--mpi proc={request.ranks}")
    out += [f"--omp thread={request.threads}", f"-L elapse={request.time}"]
    if request.group:
        out.append(f"-g {request.group}")
    out += ["-j                                # stderr into stdout", f"-o {name}.lst"]
    return out


def _where(system: System, request: JobRequest) -> str:
    """The system of the title line; the generic one says which scheduler the script is for."""
    if system.name == "generic":
        return f"any {'Slurm' if request.scheduler == 'slurm' else 'PJM'} cluster"
    return system.title


def cd_line(workdir: str) -> str:
    """cd to the checkout: a path under $HOME (or ~) keeps $HOME for the shell to expand."""
    for home in ("$HOME/", "~/"):
        if workdir.startswith(home):
            return f'cd "$HOME"/{shlex.quote(workdir[len(home):])}'
    return f"cd {shlex.quote(workdir)}"


def _program(request: JobRequest, system: System) -> str:
    """The command line, with the course's programs and the virtual environment's commands found
    in the checkout (relative to the working directory the script changes to)."""
    first, *rest = request.program
    if "/" not in first:
        if first in OPENMP_PROGRAMS | MPI_PROGRAMS:
            first = f"./{system.programs}/{first}"
        elif (ROOT / ".venv" / "bin" / first).exists():
            first = f".venv/bin/{first}"
    return " ".join(shlex.quote(word) for word in [first, *rest])


def _launch(request: JobRequest, system: System) -> str:
    program = _program(request, system)
    if not is_mpi(request):
        return f"{system.numactl} {program}" if system.numactl else program
    if request.scheduler == "slurm" and request.launcher == "srun":
        # srun does not inherit --cpus-per-task from sbatch in Slurm 22.05-23.02: give it again
        return f"srun --cpus-per-task={request.threads} --cpu-bind=cores {program}"
    if request.scheduler == "slurm":
        # Open MPI: R ranks per node, each bound to T cores (Intel MPI, MPICH: -n N -ppn R)
        return (f"mpiexec -n {request.ranks} --map-by ppr:{request.ranks_per_node}:node:"
                f"PE={request.threads} --bind-to core {program}")
    return f"{system.mpiexec} -n {request.ranks} {program}"
