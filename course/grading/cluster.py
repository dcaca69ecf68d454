"""A learner's job script read back and checked against the run it is meant for (07_cluster).

`problems(text, target)` reads the directives of a Slurm (`#SBATCH`) or PJM (`#PJM`) script into a
`JobRequest`, puts that request through the system's rules (`jobscript.check`, the same rules the
generator obeys), compares it with the target run, and reads the body by its values:
`OMP_NUM_THREADS` exported and equal to the threads; the program launched with its arguments,
through MPI with the right rank count for an MPI run; the launcher's layout (Open MPI's
`--map-by ppr:R:node:PE=T`, `-npernode`, srun's `--ntasks-per-node` and `-c`: ranks per node x
cores per rank against the run and the node); the binding of a hybrid run (`OMP_PROC_BIND=false`,
`--bind-to none` and `--cpu-bind=none` bind nothing, `--bind-to core` without PE= binds a rank to
one core, and under Slurm an mpiexec that gives a rank no cores of its own, no PE=T and no
`--cpus-per-rank T`, leaves Open MPI's default, each rank bound to a whole socket, where two ranks
run their threads on the same cores); the build of the program for the system's nodes (Odyssey's
A64FX build); and the `module load` lines the system needs before the launch. It returns one
teaching message per problem (empty: the script is right); `check_script` raises `ScriptError`
with all of them.

`check_local_job` grades exercise 07's task 3: the rules, the local Slurm's own rules
(`local_problems`: its partition, its node's memory, the folder the job runs the program from),
then, where Slurm can run, the script submitted to a `LocalSlurm` of its own; where it cannot,
it says that the grade rests on the rules alone. `first_queue` / `routed_queue` answer "which
queue takes this job" from `systems.py` (task 4); `without_answers` blocks them, and every rule
check that answers the same question, while a learner's answer runs.
"""

from __future__ import annotations

import difflib
import os
import posixpath
import re
import shlex
import subprocess
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path

from ..cluster import local_slurm
from ..cluster.jobscript import (COMMANDS, MPI_PROGRAMS, OPENMP_PROGRAMS, ROOT, JobRequest,
                                 JobScriptError, check, is_mpi, seconds)
from ..cluster.systems import SYSTEMS

COURSE = ROOT          # the course checkout: a job on the local Slurm changes to it

# Slurm: short option -> long option; the long options the check reads
SLURM_SHORT = {"N": "nodes", "n": "ntasks", "c": "cpus-per-task", "t": "time", "p": "partition",
               "A": "account", "J": "job-name", "o": "output", "e": "error", "D": "chdir",
               "q": "qos", "C": "constraint", "w": "nodelist", "G": "gpus", "a": "array",
               "d": "dependency", "x": "exclude", "M": "clusters", "L": "licenses",
               "B": "extra-node-info", "F": "nodefile", "k": "no-kill", "O": "overcommit",
               "s": "oversubscribe", "W": "wait", "H": "hold", "Q": "quiet", "v": "verbose",
               "S": "core-spec"}
SLURM_READ = ("nodes", "ntasks", "ntasks-per-node", "cpus-per-task", "time", "partition",
              "account")
# sbatch options that take no value (all others take one)
SLURM_FLAGS = {"exclusive", "requeue", "no-requeue", "hold", "wait", "quiet", "verbose",
               "overcommit", "oversubscribe", "no-kill", "contiguous", "parsable", "test-only",
               "use-min-nodes", "spread-job", "reboot", "ignore-pbs", "get-user-env"}
# other sbatch options, so that a valid one is not taken for a misspelt one of SLURM_READ
SLURM_OTHER = {"job-name", "output", "error", "chdir", "qos", "constraint", "nodelist", "gpus",
               "array", "dependency", "exclude", "clusters", "licenses", "extra-node-info",
               "nodefile", "core-spec", "mem", "mem-per-cpu", "mem-per-gpu", "mail-type",
               "mail-user", "gres", "gpus-per-node", "gpus-per-task", "cpus-per-gpu", "hint",
               "export", "ntasks-per-core", "ntasks-per-socket", "ntasks-per-gpu",
               "sockets-per-node", "cores-per-socket", "threads-per-core", "distribution",
               "cpu-freq", "comment", "begin", "deadline", "time-min", "signal", "open-mode",
               "input", "reservation", "switches", "tmp", "wckey", "propagate", "mincpus",
               "gpu-bind", "gpu-freq", "mem-bind", "priority", "nice", "profile", "uid", "gid",
               "container", "tres-per-task", "kill-on-invalid-dep", "batch", "acctg-freq",
               "network", "power", "prefer", *SLURM_FLAGS}

LAUNCHERS = ("mpiexec", "mpirun", "mpiexec.hydra", "srun")
SHELL_OPERATORS = {">", ">>", "<", "|", "||", "&&", ";", "&", "2>&1", "2>", "&>", "1>"}
# what a rank count may be written as, besides a number: the scheduler's own variable
RANK_VARIABLES = {"SLURM_NTASKS", "SLURM_NPROCS", "PJM_MPI_PROC"}
BINDING_VARIABLES = ("OMP_PROC_BIND", "OMP_PLACES")
BINDING_FLAGS = ("--bind-to", "-bind-to", "--map-by", "-map-by", "--cpu-bind", "--cpu_bind",
                 "-binding", "--binding")
# the queues anyone may use by default, by system (priority-o costs 1.5 tokens per node-hour,
# challenge-o is by review, interactive-o is for pjsub --interact)
GENERAL_QUEUES = {"odyssey": ("debug-o", "short-o", "regular-o"),
                  "obcx": ("debug", "short", "regular")}


class ScriptError(AssertionError):
    """A job script that is not the one the run needs: every problem, one line each."""


@dataclass
class Script:
    """What a job script asks for, as read from its text."""
    scheduler: str | None = None            # "slurm", "pjm", or None (no directives at all)
    options: dict[str, str] = field(default_factory=dict)  # directive -> value (the last wins)
    lines: dict[str, int] = field(default_factory=dict)    # directive -> line number
    body: list[tuple[int, list[str]]] = field(default_factory=list)   # (line, words)
    problems: list[str] = field(default_factory=list)      # found while reading


# --- reading the directives ---------------------------------------------------------------------

def _words(text: str, number: int, problems: list[str]) -> list[str] | None:
    try:
        return shlex.split(text, comments=True)
    except ValueError as err:
        problems.append(f"line {number}: cannot read `{text.strip()}` ({err}): "
                        f"check the quotes")
        return None


def _slurm_options(words: list[str], number: int, script: Script) -> None:
    i = 0
    while i < len(words):
        word = words[i]
        if word.startswith("--"):
            name, eq, value = word[2:].partition("=")
            if not eq and name not in SLURM_FLAGS and i + 1 < len(words):
                value, i = words[i + 1], i + 1
        elif word.startswith("-") and len(word) > 1:
            short = word[1]
            name = SLURM_SHORT.get(short, f"-{short}")
            value = word[2:].lstrip("=")
            if not value and name not in SLURM_FLAGS and i + 1 < len(words):
                value, i = words[i + 1], i + 1
        else:
            script.problems.append(f"line {number}: `#SBATCH ... {word}` is not an option "
                                   f"(options start with - or --)")
            i += 1
            continue
        if name not in SLURM_READ and name not in SLURM_OTHER:
            close = difflib.get_close_matches(name, SLURM_READ, n=1, cutoff=0.8)
            if close:
                script.problems.append(f"line {number}: `--{name}` is not an sbatch option "
                                       f"(did you mean --{close[0]}?)")
        script.options[name] = value
        script.lines[name] = number
        i += 1


PJM_RESOURCES = ("rscgrp", "node", "elapse")


def _pjm_options(words: list[str], number: int, script: Script) -> None:
    i = 0
    while i < len(words):
        word = words[i]
        value = words[i + 1] if i + 1 < len(words) else ""
        if word in ("-L", "--rsc-list"):
            # -L rscgrp=debug-o,node=2 (PJM takes several resources, comma-separated)
            for item in filter(None, value.split(",")):
                key, eq, val = item.partition("=")
                key = key.strip()
                if not eq:
                    script.problems.append(f"line {number}: `-L {item}` has no value "
                                           f"(resource=value, e.g. -L node=2)")
                    continue
                if key not in PJM_RESOURCES:
                    close = difflib.get_close_matches(key, PJM_RESOURCES, n=1, cutoff=0.6)
                    if close:
                        script.problems.append(f"line {number}: `-L {key}=` is not a resource "
                                               f"of PJM (did you mean -L {close[0]}=?)")
                script.options[key] = val.strip()
                script.lines[key] = number
            i += 2
        elif word in ("--mpi", "--omp"):
            for item in filter(None, value.split(",")):
                key, _, val = item.partition("=")
                name = f"{word[2:]} {key.strip()}"             # "mpi proc", "omp thread"
                script.options[name] = val.strip()
                script.lines[name] = number
            i += 2
        elif word in ("-g", "-N", "-o", "-e", "-x", "-s", "--name"):
            name = {"--name": "-N"}.get(word, word)
            script.options[name] = value
            script.lines[name] = number
            i += 2
        else:                                  # -j, -S, --interact, ...: no value read
            script.options[word] = ""
            script.lines[word] = number
            i += 1


def read_script(text: str) -> Script:
    """The directives and the command lines of a job script."""
    script = Script()
    lines = text.splitlines()
    if not lines or not lines[0].startswith("#!"):
        script.problems.append("the first line must name the shell, `#!/bin/bash`: sbatch "
                               "refuses a script without it")
    commands_started = None
    continued = None            # (line, text) of a command cut by a backslash at its end
    for number, line in enumerate(lines, start=1):
        if continued:
            text = continued[1] + " " + line.rstrip()
            if text.endswith("\\"):
                continued = (continued[0], text[:-1])
            else:
                _command(continued[0], text, script)
                continued = None
            continue
        stripped = line.strip()
        for prefix, scheduler in (("#SBATCH", "slurm"), ("#PJM", "pjm")):
            if line.startswith(prefix) and (len(line) == len(prefix) or line[len(prefix)] in " \t"):
                break
        else:
            scheduler = None
        if scheduler:
            if script.scheduler not in (None, scheduler):
                script.problems.append(f"line {number}: `{prefix}` in a script that already has "
                                       f"{COMMANDS[script.scheduler]['prefix']} lines: one "
                                       f"scheduler per script")
                continue
            script.scheduler = scheduler
            if scheduler == "slurm" and commands_started:
                script.problems.append(
                    f"line {number}: sbatch stops reading #SBATCH lines at the first command "
                    f"(line {commands_started}), so `{stripped}` is ignored: put every #SBATCH "
                    f"line before the first command")
                continue
            words = _words(line[len(prefix):], number, script.problems)
            if words is not None:
                (_slurm_options if scheduler == "slurm" else _pjm_options)(words, number, script)
            continue
        if not stripped or stripped.startswith("#"):
            continue
        commands_started = commands_started or number
        if line.rstrip().endswith("\\"):
            continued = (number, line.rstrip()[:-1])
        else:
            _command(number, line, script)
    if continued:
        _command(*continued, script)
    return script


def _command(number: int, text: str, script: Script) -> None:
    """A command line (continued lines joined) read into the body."""
    words = _words(text, number, script.problems)
    if words:
        script.body.append((number, words))


# --- the request a script makes -----------------------------------------------------------------

def slurm_seconds(value: str) -> int:
    """A Slurm time limit in seconds: M, M:S, H:M:S, D-H, D-H:M, D-H:M:S."""
    days, dash, rest = value.partition("-")
    if not dash:
        days, rest = "0", value
    parts = rest.split(":")
    if not days.isdigit() or not all(p.isdigit() for p in parts) or len(parts) > 3:
        raise ValueError(value)
    numbers = [int(p) for p in parts]
    if dash:                                   # D-H, D-H:M, D-H:M:S
        h, m, s = (numbers + [0, 0])[:3]
    else:                                      # M, M:S, H:M:S
        h, m, s = {1: (0, numbers[0], 0), 2: (0, *numbers),
                   3: tuple(numbers)}[len(numbers)]
    return 86400 * int(days) + 3600 * h + 60 * m + s


def pjm_seconds(value: str) -> int:
    """A PJM elapse limit in seconds: [[H:]M:]S."""
    parts = value.split(":")
    if not all(p.isdigit() for p in parts) or not 1 <= len(parts) <= 3:
        raise ValueError(value)
    total = 0
    for p in parts:
        total = 60 * total + int(p)
    return total


def hms(total: int) -> str:
    return f"{total // 3600:02d}:{total // 60 % 60:02d}:{total % 60:02d}"


def _number(script: Script, name: str, shown: str, problems: list[str]) -> int | None:
    value = script.options.get(name)
    if value is None:
        return None
    if not value.isdigit():
        problems.append(f"`{shown}{value}` (line {script.lines[name]}): expected a whole number")
        return None
    return int(value)


@dataclass
class Asked:
    """The run that the directives ask for (None: not given)."""
    nodes: int | None = None
    ranks: int | None = None                 # all ranks together
    ranks_per_node: int | None = None
    threads: int | None = None
    seconds: int | None = None
    queue: str | None = None
    group: str | None = None


def _slurm_asked(script: Script, target: JobRequest, problems: list[str]) -> Asked:
    asked = Asked(queue=script.options.get("partition"), group=script.options.get("account"))
    asked.nodes = _number(script, "nodes", "--nodes=", problems)
    per_node = _number(script, "ntasks-per-node", "--ntasks-per-node=", problems)
    ntasks = _number(script, "ntasks", "--ntasks=", problems)
    asked.threads = _number(script, "cpus-per-task", "--cpus-per-task=", problems)
    nodes = asked.nodes or 1
    if per_node is not None:
        asked.ranks_per_node, asked.ranks = per_node, per_node * nodes
        if ntasks is not None and ntasks != per_node * nodes:
            problems.append(f"--ntasks={ntasks} and --ntasks-per-node={per_node} on {nodes} "
                            f"node(s) disagree ({per_node * nodes} tasks): give one of them")
    elif ntasks is not None:
        asked.ranks = ntasks
        if ntasks % nodes == 0:
            asked.ranks_per_node = ntasks // nodes
        else:
            problems.append(f"--ntasks={ntasks} does not split evenly over {nodes} node(s): "
                            f"use --ntasks-per-node")
    if "time" in script.options:
        try:
            asked.seconds = slurm_seconds(script.options["time"])
        except ValueError:
            problems.append(f"`--time={script.options['time']}` (line {script.lines['time']}) "
                            f"is not a Slurm time: minutes, or HH:MM:SS")
    return asked


def _pjm_asked(script: Script, target: JobRequest, problems: list[str]) -> Asked:
    asked = Asked(queue=script.options.get("rscgrp"), group=script.options.get("-g"))
    asked.nodes = _number(script, "node", "-L node=", problems)
    asked.ranks = _number(script, "mpi proc", "--mpi proc=", problems)
    asked.threads = _number(script, "omp thread", "--omp thread=", problems)
    if asked.ranks is not None:
        nodes = asked.nodes or 1
        if asked.ranks % nodes == 0:
            asked.ranks_per_node = asked.ranks // nodes
        else:
            problems.append(f"--mpi proc={asked.ranks} does not split evenly over {nodes} "
                            f"node(s)")
    elif not is_mpi(target):
        asked.ranks, asked.ranks_per_node = 1, 1
    if "elapse" in script.options:
        try:
            asked.seconds = pjm_seconds(script.options["elapse"])
        except ValueError:
            problems.append(f"`-L elapse={script.options['elapse']}` (line "
                            f"{script.lines['elapse']}) is not a PJM time: HH:MM:SS")
    return asked


def _directive(scheduler: str, what: str) -> str:
    return {"slurm": {"nodes": "#SBATCH --nodes", "ranks": "#SBATCH --ntasks-per-node",
                      "threads": "#SBATCH --cpus-per-task", "seconds": "#SBATCH --time",
                      "queue": "#SBATCH --partition", "group": "#SBATCH --account"},
            "pjm": {"nodes": "#PJM -L node", "ranks": "#PJM --mpi proc",
                    "threads": "#PJM --omp thread", "seconds": "#PJM -L elapse",
                    "queue": "#PJM -L rscgrp", "group": "#PJM -g"}}[scheduler][what]


def _compare(script: Script, asked: Asked, target: JobRequest, problems: list[str]) -> None:
    """The directives against the target run: which directive, expected vs found."""
    s = target.scheduler
    system = SYSTEMS.get(target.system)
    expected_nodes = target.nodes
    if (asked.nodes or 1) != expected_nodes:
        found = f"{asked.nodes}" if asked.nodes is not None else "none (1 node)"
        problems.append(f"{_directive(s, 'nodes')}: the run needs {expected_nodes} node(s), "
                        f"found {found}")
    if s == "slurm":
        per_node = asked.ranks_per_node or 1
        if per_node != target.ranks_per_node or (asked.ranks or 1) != target.ranks:
            if asked.ranks is None:
                found = "no --ntasks-per-node or --ntasks (1 task)"
            elif "ntasks-per-node" in script.options:
                found = f"--ntasks-per-node={asked.ranks_per_node}, {asked.ranks} in all"
            else:
                found = (f"--ntasks={asked.ranks}, which is the number of tasks of the whole job "
                         f"(on all nodes together), not per node")
            problems.append(f"#SBATCH --ntasks-per-node: the run needs {target.ranks_per_node} "
                            f"rank(s) per node, {target.ranks} in all; found {found}")
        if (asked.threads or 1) != target.threads:
            if asked.threads is None:
                problems.append(f"#SBATCH --cpus-per-task is missing: each task then gets 1 core, "
                                f"and the {target.threads} threads of a rank share it; the run "
                                f"needs --cpus-per-task={target.threads}")
            else:
                problems.append(f"#SBATCH --cpus-per-task: the run needs {target.threads} (the "
                                f"threads of a rank, one core each), found {asked.threads}")
    else:
        if is_mpi(target) and asked.ranks != target.ranks:
            found = "none" if "mpi proc" not in script.options else str(asked.ranks)
            problems.append(f"#PJM --mpi proc: the run needs {target.ranks} MPI processes in all "
                            f"({target.ranks_per_node} per node x {target.nodes} node(s)), "
                            f"found {found}")
        elif not is_mpi(target) and "mpi proc" in script.options and asked.ranks != 1:
            problems.append(f"#PJM --mpi proc={asked.ranks}: {target.program[0]} runs as one "
                            f"process (OpenMP only): leave --mpi out")
        if (asked.threads or 1) != target.threads:
            found = "none" if asked.threads is None else str(asked.threads)
            problems.append(f"#PJM --omp thread: the run needs {target.threads} thread(s) per "
                            f"process, found {found}")
    if asked.seconds is None:
        problems.append(f"{_directive(s, 'seconds')} is missing: the run needs a limit of "
                        f"{target.time}")
    elif asked.seconds != seconds(target.time):
        problems.append(f"{_directive(s, 'seconds')}: the run needs {target.time}, found "
                        f"{hms(asked.seconds)}")
    expected_queue = target.queue
    if expected_queue is None and system is not None and system.queues:
        expected_queue = system.default_queue
    if expected_queue is not None and asked.queue != expected_queue:
        found = "none" if asked.queue is None else repr(asked.queue)
        hint = ""
        if system is not None and system.queues and asked.queue and not system.queue(asked.queue):
            hint = f" ({target.system} has no queue {asked.queue!r})"
        problems.append(f"{_directive(s, 'queue')}: the run goes to the queue "
                        f"{expected_queue!r}, found {found}{hint}")
    if target.group is not None and asked.group != target.group:
        found = "none" if asked.group is None else repr(asked.group)
        why = " (the group whose tokens the job uses)" if s == "pjm" else ""
        problems.append(f"{_directive(s, 'group')}: the run is paid by the group "
                        f"{target.group!r}{why}, found {found}")


def _rules(asked: Asked, target: JobRequest, problems: list[str]) -> None:
    """The system's rules (jobscript.check, the generator's own) on the request the script makes."""
    request = replace(target, nodes=asked.nodes or 1, ranks_per_node=asked.ranks_per_node or 1,
                      threads=asked.threads or 1,
                      time=hms(asked.seconds) if asked.seconds else target.time,
                      queue=asked.queue, group=asked.group)
    try:
        check(request)
    except JobScriptError as err:
        whose = "the cluster's" if target.system == "generic" else f"{target.system}'s"
        problems.append(f"{whose} rules refuse what these directives ask for: {err}")


# --- the body -----------------------------------------------------------------------------------

# where a job starts when the script names no folder (--chdir): the folder sbatch or pjsub ran in
SUBMIT_DIR = "(the folder the job was submitted from)"
# OMP_PROC_BIND takes a list, one value per nesting level; `false` alone switches binding off
OMP_PROC_BIND_VALUES = {"true", "master", "primary", "close", "spread"}
OMP_PLACES_VALUE = re.compile(r"(threads|cores|sockets|ll_caches|numa_domains)(\(\d+\))?|\{.*",
                              re.I)
# a launcher's binding switched off: Open MPI's --bind-to none, srun's --cpu-bind=none
BINDING_OFF = {"none", "no", "false", "off", "disabled"}


@dataclass
class Launch:
    """A command line that starts the program, with what the script set up before it."""
    number: int                     # its line
    command: list[str]              # its words (variables not replaced)
    env: dict[str, str]             # the environment the command starts with (as far as read)
    variables: dict[str, str]       # the shell's variables at that point
    cwd: str | None                 # the working directory (None: the script does not say)
    modules: tuple[str, ...]        # the modules loaded, by name (no version)


@dataclass
class Layout:
    """What a launch line's options say about the ranks and the cores of each: the value read,
    and the option as the script writes it (for the message)."""
    count: str | None = None        # all the ranks (-n)
    per_node: str | None = None     # ranks per node (ppr:R:node, -npernode, srun --ntasks-per-node)
    per_node_shown: str = ""
    cores: str | None = None        # cores of each rank (PE=T, --cpus-per-rank, srun -c)
    cores_shown: str = ""
    bind: str | None = None         # the launcher's binding: "off", what it binds to, or None
    bind_shown: str = ""
    env: dict[str, str] = field(default_factory=dict)      # mpiexec -x NAME=value


def _value(word: str, variables: dict[str, str]) -> str:
    """A word with $NAME / ${NAME} replaced by what the script (or the scheduler) sets."""
    return re.sub(r"\$\{?(\w+)\}?", lambda m: variables.get(m.group(1), m.group(0)), word)


def _is_program(word: str, name: str) -> bool:
    return Path(word).name == name


def _same_argument(found: str, expected: str) -> bool:
    if found == expected:
        return True
    # a file given by another path to the same name: ../examples/x.dat, /home/me/pfem/x.dat
    return ("/" in found or "/" in expected) and found.endswith("/" + expected.lstrip("./"))


def _join(cwd: str | None, path: str) -> str | None:
    """PATH (variables replaced) seen from the folder CWD; None where that cannot be told."""
    path = os.path.expanduser(path)
    if path.startswith(("/", SUBMIT_DIR)):
        return posixpath.normpath(path)
    if cwd is None or "$" in path:
        return None
    return posixpath.normpath(posixpath.join(cwd, path))


def _module_command(command: list[str], loaded: list[str]) -> None:
    """`module load/unload/purge/swap ...` (Lmod's `ml` too): LOADED, the modules by name,
    updated."""
    lmod = command[0] == "ml"
    # module's own options (-s, --force) are not names; for `ml`, -NAME unloads NAME
    args = command[1:] if lmod else [a for a in command[1:] if not a.startswith("-")]
    if lmod and args and args[0] not in ("load", "add", "unload", "rm", "purge", "swap", "switch"):
        args = ["load", *args]                      # ml NAME -OTHER
    if not args:
        return
    sub = args[0]
    names = [a.split("/")[0] for a in args[1:] if not a.startswith("-")]
    added, removed = [], [a[1:].split("/")[0] for a in args[1:] if a.startswith("-")]
    if sub in ("load", "add", "try-load"):
        added = names
    elif sub in ("unload", "rm", "del", "remove"):
        removed += names
    elif sub == "purge":
        loaded.clear()
    elif sub in ("swap", "switch") and names:          # swap OLD NEW (or swap NEW)
        removed.append(names[0])
        added.append(names[-1])
    for name in removed:
        while name in loaded:
            loaded.remove(name)
    loaded.extend(added)


def _read_body(script: Script, asked: Asked, program: str) -> tuple[list[Launch], dict[str, str]]:
    """The command lines that start PROGRAM, each with its environment, working directory and
    modules; and what the script exports at its end."""
    variables = {"SLURM_NTASKS": str(asked.ranks or 1), "SLURM_NPROCS": str(asked.ranks or 1),
                 "PJM_MPI_PROC": str(asked.ranks or 1), "SLURM_SUBMIT_DIR": SUBMIT_DIR,
                 "PJM_O_WORKDIR": SUBMIT_DIR, "HOME": os.path.expanduser("~"),
                 **({"SLURM_CPUS_PER_TASK": str(asked.threads),
                     "PJM_OMP_THREADS": str(asked.threads)} if asked.threads else {})}
    exported: dict[str, str] = {}
    chdir = script.options.get("chdir") if script.scheduler == "slurm" else None
    cwd = _join(SUBMIT_DIR, _value(chdir, variables)) if chdir else SUBMIT_DIR
    modules: list[str] = []
    launches: list[Launch] = []
    for number, words in script.body:
        # split a line at ; && || into commands
        commands, current = [], []
        for word in words:
            if word in (";", "&&", "||"):
                commands.append(current)
                current = []
            else:
                current.append(word)
        commands.append(current)
        for command in commands:
            if not command:
                continue
            if command[0] == "export":
                for item in command[1:]:
                    name, eq, value = item.partition("=")
                    if eq:
                        variables[name] = _value(value, variables)
                    if name in variables:
                        exported[name] = variables[name]
                continue
            inline = {}
            while command and re.fullmatch(r"\w+=.*", command[0]):
                name, _, value = command.pop(0).partition("=")
                inline[name] = _value(value, variables)
            if command and command[0] == "env":
                command = command[1:]
                while command and re.fullmatch(r"\w+=.*", command[0]):
                    name, _, value = command.pop(0).partition("=")
                    inline[name] = _value(value, variables)
            if not command:                    # NAME=value alone: a shell variable
                variables.update(inline)
                if any(name in exported for name in inline):
                    exported.update({k: v for k, v in inline.items() if k in exported})
                continue
            if command[0] in ("cd", "pushd"):
                folders = [w for w in command[1:] if not w.startswith("-")]
                cwd = _join(cwd, _value(folders[0], variables) if folders else "~")
            elif command[0] in ("module", "ml"):
                _module_command(command, modules)
            elif any(_is_program(w, program) for w in command):
                launches.append(Launch(number, command, {**exported, **inline}, dict(variables),
                                       cwd, tuple(modules)))
    return launches, exported


def _body(script: Script, asked: Asked, target: JobRequest, problems: list[str]) -> Launch | None:
    """The body's problems (those of the launch line that comes closest to the run); that line."""
    program = Path(target.program[0]).name
    args = target.program[1:]
    launches, exported = _read_body(script, asked, program)
    threads_needed = target.threads > 1 or program in OPENMP_PROGRAMS
    if not launches:
        shown = " ".join([program, *args])
        problems.append(f"the script never runs {program}: the run needs a line that starts it, "
                        f"`{shown}`" + (" under mpiexec" if is_mpi(target) else ""))
        if threads_needed:
            _threads(exported, target, problems, "")
        return None
    best: tuple[Launch, list[str]] | None = None
    for launch in launches:
        found: list[str] = []
        where = f" (line {launch.number})"
        command = launch.command
        at = next(i for i, w in enumerate(command) if _is_program(w, program))
        # the launcher (mpiexec, srun) before the program, if any, and what its options say
        i = next((i for i, w in enumerate(command[:at]) if Path(w).name in LAUNCHERS), None)
        launcher = None if i is None else Path(command[i]).name
        layout = Layout() if i is None else _layout(launcher, command[i + 1:at], launch.variables)
        env = {**launch.env, **layout.env}
        if threads_needed or "OMP_NUM_THREADS" in env:
            _threads(env, target, found, where)
        given = []
        for word in command[at + 1:]:
            if word in SHELL_OPERATORS or word.startswith((">", "2>", "1>", "&>")):
                break
            given.append(word)
        if len(given) != len(args) or not all(_same_argument(f, e) for f, e in zip(given, args)):
            found.append(f"{program} must run with the arguments `{' '.join(args) or '(none)'}`, "
                         f"found `{' '.join(given) or '(none)'}`{where}")
        _launcher(launcher, layout, env, target, script.scheduler, asked.nodes or 1, found, where)
        _build(command[at], launch, target, found, where)
        _modules(launch, target, found, where)
        if best is None or len(found) < len(best[1]):
            best = (launch, found)
    problems.extend(best[1])
    return best[0]


def _threads(env: dict[str, str], target: JobRequest, problems: list[str], where: str) -> None:
    value = env.get("OMP_NUM_THREADS")
    if value is None:
        problems.append(f"OMP_NUM_THREADS is not exported before {Path(target.program[0]).name} "
                        f"starts{where}: the run needs `export OMP_NUM_THREADS={target.threads}` "
                        f"(the scheduler does not set it for you; without it the program picks "
                        f"its own thread count)")
    elif value != str(target.threads):
        unset = (" (a variable that nothing sets: Slurm sets $SLURM_CPUS_PER_TASK only with "
                 "--cpus-per-task)") if "$" in value else ""
        problems.append(f"OMP_NUM_THREADS: the run needs {target.threads} thread(s) per rank, "
                        f"the script exports {value or '(nothing)'}{where}{unset}")


def _option(flags: list[str], names: tuple[str, ...]) -> tuple[str, str] | None:
    """(value, the option as written) of the last of the options NAMES among FLAGS: `--opt value`,
    `--opt=value`, and for one-letter options `-n8`."""
    found = None
    for i, word in enumerate(flags):
        for name in names:
            if word == name and i + 1 < len(flags):
                found = (flags[i + 1], f"{word} {flags[i + 1]}")
            elif word.startswith(name + "="):
                found = (word[len(name) + 1:], word)
            elif len(name) == 2 and word.startswith(name) and word[2:].isdigit():
                found = (word[2:], word)
    return found


def _layout(launcher: str, flags: list[str], variables: dict[str, str]) -> Layout:
    """The launcher's options: rank count, ranks per node, cores per rank, binding."""
    layout = Layout()
    count = _option(flags, ("-n", "-np", "--n", "--np", "--ntasks"))
    if count:
        layout.count = _value(count[0], variables)
    if launcher == "srun":
        per_node = _option(flags, ("--ntasks-per-node",))
        cores = _option(flags, ("-c", "--cpus-per-task"))
        bind = _option(flags, ("--cpu-bind", "--cpu_bind"))
        if bind:
            kinds = {k.split(":")[0].lower() for k in bind[0].split(",")} - {"verbose", "v",
                                                                             "quiet", "q"}
            if kinds:
                layout.bind = "off" if kinds & BINDING_OFF else min(kinds)
                layout.bind_shown = bind[1]
    else:
        # Open MPI (-npernode, -N, --map-by, --bind-to, -x); MPICH and Intel MPI (-ppn, -bind-to)
        per_node = _option(flags, ("-npernode", "--npernode", "-N", "-ppn", "--ppn", "-perhost"))
        cores = _option(flags, ("--cpus-per-rank", "-cpus-per-rank", "--cpus-per-proc",
                                "-cpus-per-proc"))
        mapping = _option(flags, ("--map-by", "-map-by"))
        mapped_to = None
        if mapping:
            parts = mapping[0].split(":")
            modifiers = parts[1:]
            if parts[0].lower() == "ppr" and len(parts) >= 3:      # ppr:R:node[:PE=T]
                if parts[2].lower() == "node":
                    per_node = (parts[1], mapping[1])
                modifiers = parts[3:]
            mapped_to = parts[0].lower()
            for modifier in modifiers:
                name, _, number = modifier.partition("=")
                if name.lower() == "pe":
                    cores = (number, mapping[1])
        bind = _option(flags, ("--bind-to", "-bind-to", "--binding", "-binding"))
        if bind:
            level, _, number = bind[0].lower().partition(":")
            layout.bind = "off" if level in BINDING_OFF else level
            layout.bind_shown = bind[1]
            if number.isdigit() and not cores:      # MPICH: -bind-to core:T
                cores = (number, bind[1])
        elif cores:                         # PE=T: each rank bound to its T cores
            layout.bind, layout.bind_shown = "core", cores[1]
        elif mapped_to in ("core", "hwthread"):     # mapped to one, bound to it
            layout.bind, layout.bind_shown = mapped_to, mapping[1]
        for i, word in enumerate(flags[:-1]):
            if word == "-x":
                name, eq, value = flags[i + 1].partition("=")
                if eq or name in variables:
                    layout.env[name] = _value(value, variables) if eq else variables[name]
    if per_node:
        layout.per_node, layout.per_node_shown = _value(per_node[0], variables), per_node[1]
    if cores:
        layout.cores, layout.cores_shown = _value(cores[0], variables), cores[1]
    return layout


def _launcher(launcher: str | None, layout: Layout, env: dict[str, str], target: JobRequest,
              scheduler: str | None, nodes: int, problems: list[str], where: str) -> None:
    """The launch: through MPI where the run needs it, with all the ranks, laid out on the nodes
    as the run asks, and (hybrid) bound to cores."""
    program = Path(target.program[0]).name
    if launcher is None:
        if is_mpi(target):
            problems.append(f"{program} is an MPI run of {target.ranks} rank(s): start it with "
                            f"`mpiexec -n {target.ranks} ...`"
                            + (" (or srun)" if scheduler == "slurm" else "")
                            + f", not on its own{where}")
        return
    if launcher == "srun" and scheduler != "slurm":
        problems.append(f"srun launches only under Slurm: use mpiexec under PJM{where}")
    count = layout.count
    if count is None and layout.per_node and layout.per_node.isdigit() and launcher != "srun":
        count = str(int(layout.per_node) * nodes)   # R per node on every node of the job
    if count is None and launcher != "srun":
        problems.append(f"{launcher} without a rank count: the run needs "
                        f"`{launcher} -n {target.ranks}`{where}")
    elif count is not None and count != str(target.ranks):
        what = "ranks" if is_mpi(target) else "copies of the program (it is OpenMP only)"
        problems.append(f"{launcher}: the run needs {target.ranks} rank(s) in all "
                        f"({target.ranks_per_node} per node x {target.nodes} node(s)), the "
                        f"script starts {count} {what}{where}")
    if is_mpi(target):
        _placement(launcher, layout, target, problems, where)
    if is_mpi(target) and target.threads > 1:
        _binding(launcher, layout, env, target, scheduler, problems, where)


def _placement(launcher: str, layout: Layout, target: JobRequest, problems: list[str],
               where: str) -> None:
    """The ranks per node and the cores per rank that the launcher's options give, against the
    run and the cores of a node."""
    cores_per_node = SYSTEMS[target.system].cores_per_node or target.cores_per_node
    threads = target.threads
    cores = int(layout.cores) if layout.cores and layout.cores.isdigit() else None
    if cores is not None and cores != threads:
        problems.append(f"{launcher} {layout.cores_shown}{where} gives each rank {cores} core(s), "
                        f"but a rank runs {threads} thread(s), one core each: make it {threads}")
    if layout.per_node and layout.per_node.isdigit() and \
            int(layout.per_node) != target.ranks_per_node:
        per_node = int(layout.per_node)
        used = per_node * (cores or threads)
        over = (f", {per_node} x {cores or threads} = {used} cores, more than the "
                f"{cores_per_node} of a node" if cores_per_node and used > cores_per_node else "")
        problems.append(f"{launcher} {layout.per_node_shown}{where} puts {per_node} rank(s) on "
                        f"each node{over}; the run needs {target.ranks_per_node} rank(s) per node "
                        f"x {threads} thread(s)" + (f" ({target.ranks_per_node * threads} of "
                                                    f"the {cores_per_node} cores)"
                                                    if cores_per_node else ""))


def _openmp_binding(env: dict[str, str]) -> tuple[str | None, str]:
    """What the OpenMP runtime makes of the environment: ("on", "off", "bad" or None: nothing
    set) and the setting that decides it. OMP_PLACES alone binds (as OMP_PROC_BIND=true does);
    OMP_PROC_BIND=false switches binding off whatever OMP_PLACES says."""
    bind, places = env.get("OMP_PROC_BIND"), env.get("OMP_PLACES")
    if bind is not None:
        values = [v.strip().lower() for v in bind.split(",")]
        if values == ["false"]:
            return "off", f"OMP_PROC_BIND={bind}"
        if not bind or not set(values) <= OMP_PROC_BIND_VALUES:
            return "bad", f"OMP_PROC_BIND={bind or '(nothing)'}"
        return "on", f"OMP_PROC_BIND={bind}"
    if places is not None:
        if OMP_PLACES_VALUE.fullmatch(places.strip()):
            return "on", f"OMP_PLACES={places}"
        return "bad", f"OMP_PLACES={places or '(nothing)'}"
    return None, ""


def _binding(launcher: str, layout: Layout, env: dict[str, str], target: JobRequest,
             scheduler: str | None, problems: list[str], where: str) -> None:
    """A hybrid run's threads bound to cores: by the launcher (each rank on its own cores), by
    OpenMP (each thread on a core of its rank), or both; not switched off."""
    threads = target.threads
    omp, omp_shown = _openmp_binding(env)
    ranks = ("srun --cpu-bind=cores" if launcher == "srun" else
             f"--map-by ppr:{target.ranks_per_node}:node:PE={threads} --bind-to core")
    # Open MPI's mpiexec under Slurm (not PJM's, whose --mpi proc and --omp thread place the
    # ranks) must be told the cores of a rank: without PE=T or --cpus-per-rank T it binds each
    # rank to a socket (more than 2 ranks; to one core with 2 or fewer), and two ranks on a socket
    # then run their threads on the same cores whatever OpenMP's binding says
    no_cores = (launcher in ("mpiexec", "mpirun") and scheduler != "pjm" and layout.cores is None)
    if no_cores:
        how = (f"give each rank its {threads} cores ({ranks}), and export OMP_PROC_BIND=close and "
               f"OMP_PLACES=cores to bind each thread to one of them")
    else:
        how = "export OMP_PROC_BIND=close and OMP_PLACES=cores" + (
            "" if scheduler == "pjm" else f", or bind the ranks ({ranks})")
    if omp == "bad":
        problems.append(f"{omp_shown} is not a setting the OpenMP runtime knows: it ignores "
                        f"it, and binds nothing when {launcher} starts the program{where}; "
                        f"OMP_PROC_BIND takes close, spread, "
                        f"primary or true (false switches binding off), OMP_PLACES takes cores, "
                        f"threads, sockets or a list of places")
        return
    if layout.bind == "off":
        if omp == "on":
            problems.append(f"{launcher} {layout.bind_shown}{where} leaves every rank the whole "
                            f"node, and {omp_shown} then binds the threads of every rank of a "
                            f"node to the same first cores (each rank's first thread takes the "
                            f"first place): bind the ranks to cores of their own too ({ranks}), "
                            f"or leave {layout.bind_shown} out")
        else:
            off = f", and {omp_shown} switches OpenMP's off" if omp == "off" else ""
            problems.append(f"{launcher} {layout.bind_shown}{where} switches the ranks' binding "
                            f"off{off}: nothing binds the {threads} threads of a rank to cores; "
                            f"{how}")
        return
    if layout.bind in ("core", "hwthread") and layout.cores is None and launcher != "srun":
        problems.append(f"{launcher} {layout.bind_shown}{where} binds each rank to one "
                        f"{layout.bind}, so its {threads} threads share it: give each rank "
                        f"{threads} cores, --map-by ppr:{target.ranks_per_node}:node:PE={threads} "
                        f"(PE= is the cores of a rank)")
        return
    if no_cores and (layout.bind is not None or omp == "on"):
        if layout.bind is None:
            shown, binds = "", "Open MPI binds each rank to a socket by default"
        else:
            shown = f" {layout.bind_shown}"
            binds = f"{layout.bind_shown} binds each rank to a whole {layout.bind}"
        problems.append(f"{launcher}{shown}{where} gives a rank no cores of its own (no "
                        f"PE={threads} in --map-by, no --cpus-per-rank {threads}): {binds}, and "
                        f"two ranks on a socket then run their {threads} threads on the same cores "
                        f"of it; give each rank its cores with {ranks}")
        return
    if layout.bind is not None or omp == "on":
        return
    if omp == "off":
        ignored = " (OMP_PLACES is then ignored)" if "OMP_PLACES" in env else ""
        problems.append(f"{omp_shown} switches the threads' binding off{ignored}, and "
                        f"{launcher}{where} is given no binding of its own: nothing binds the "
                        f"{threads} threads of a rank to cores; {how}")
    else:
        fix = how if no_cores else (f"export OMP_PROC_BIND=close and OMP_PLACES=cores, or give "
                                    f"{launcher} its binding flags (--bind-to core with --map-by "
                                    f"ppr:{target.ranks_per_node}:node:PE={threads}, "
                                    f"--cpu-bind=cores)")
        problems.append(f"a hybrid run ({threads} threads per rank) needs its threads bound to "
                        f"cores: {fix}{where}")


def _build_folder(path: str | None) -> str | None:
    """The build folder (release, release-a64fx-fujitsu, ...) of a path into build/native/X/bin."""
    match = re.search(r"(?:^|/)build/native/([^/]+)/bin(?:/|$)", path or "")
    return match.group(1) if match else None


def _build(word: str, launch: Launch, target: JobRequest, problems: list[str],
           where: str) -> None:
    """The course's program started in the build for the system's nodes: build/native/release
    is built on the machine itself, release-TOOLCHAIN with the toolchain file cmake/TOOLCHAIN.cmake
    for another processor (the A64FX of Odyssey)."""
    program = Path(target.program[0]).name
    if program not in OPENMP_PROGRAMS | MPI_PROGRAMS:
        return
    system = SYSTEMS[target.system]
    wanted = _build_folder(system.programs).partition("-")[2]      # the toolchain, or ""
    value = _value(word, launch.variables)
    if "/" in value:
        folder = _build_folder(_join(launch.cwd, value) or value)
    else:                                  # found on the PATH: its first build folder
        folder = next((f for f in map(_build_folder, launch.variables.get("PATH", "").split(":"))
                       if f), None)
    name = system.title.split(" (")[0]
    if folder is None:
        if system.arch:
            problems.append(f"`{word}`{where}: which build of {program} is this? {name}'s "
                            f"{system.arch} nodes run only the {system.arch} build: start "
                            f"`./{system.programs}/{program}` by its path")
        return
    made_with = folder.partition("-")[2]
    if made_with == wanted:
        return
    if wanted:
        problems.append(f"`{word}`{where} is the build in build/native/{folder}, made for the "
                        f"machine that built it (x86-64), which {name}'s {system.arch} nodes "
                        f"cannot run: start the {system.arch} build, `./{system.programs}/"
                        f"{program}` (python -m course build --toolchain cmake/{wanted}.cmake)")
    else:
        problems.append(f"`{word}`{where} is the build made with cmake/{made_with}.cmake, for "
                        f"another processor (Odyssey's A64FX): this cluster's nodes run the build "
                        f"made on it, `./{system.programs}/{program}`")


def _modules(launch: Launch, target: JobRequest, problems: list[str], where: str) -> None:
    """The modules of the system (its compiler's runtime and MPI) loaded before the launch."""
    system = SYSTEMS[target.system]
    missing = [m for m in system.modules if m.split("/")[0] not in launch.modules]
    if missing:
        name = system.title.split(" (")[0]
        problems.append(f"`module load {' '.join(missing)}` is missing before "
                        f"{Path(target.program[0]).name} starts{where}: on {name} the compiler's "
                        f"runtime and MPI (mpiexec, the libraries the program was linked with) "
                        f"come from it; load it before the launch line")


# --- the whole check ----------------------------------------------------------------------------

def _examine(text: str, target: JobRequest) -> tuple[list[str], Script | None, Asked | None,
                                                     Launch | None]:
    """problems(), with what it read: the script, its request, its launch line."""
    if not isinstance(text, str):
        return [f"the job script must be a str (its text), not {type(text).__name__}"], None, \
            None, None
    check(target)                   # a target the system refuses is the caller's error
    script = read_script(text)
    found = list(script.problems)
    want = target.scheduler
    if script.scheduler is None:
        return found + [f"no {COMMANDS[want]['prefix']} lines: a {want} job script asks for its "
                        f"resources in {COMMANDS[want]['prefix']} directives at its top"], \
            script, None, None
    if script.scheduler != want:
        prefix = COMMANDS[script.scheduler]['prefix']
        return found + [f"this is a {script.scheduler} script ({prefix} lines), but the run is "
                        f"for {want} ({COMMANDS[want]['prefix']} lines)"], script, None, None
    asked = (_slurm_asked if want == "slurm" else _pjm_asked)(script, target, found)
    _compare(script, asked, target, found)
    _rules(asked, target, found)
    launch = _body(script, asked, target, found)
    return found, script, asked, launch


def problems(text: str, target: JobRequest) -> list[str]:
    """Everything wrong with the job script `text` for the run `target`; empty if it is right."""
    return _examine(text, target)[0]


def check_script(text: str, target: JobRequest, what: str = "the job script") -> None:
    """Raise ScriptError listing every problem of the script, if it has any."""
    _raise(problems(text, target), what)


def _raise(found: list[str], what: str) -> None:
    if found:
        raise ScriptError(f"{what} has {len(found)} problem(s):\n"
                          + "\n".join(f"  - {p}" for p in found))


# --- the job on the local Slurm (task 3) ----------------------------------------------------------

def local_problems(text: str, target: JobRequest) -> list[str]:
    """problems(), and what the local Slurm would refuse or its job fail on, found by the rules
    (so also where no Slurm can run): a partition it lacks, more memory than its node has, and
    the program or its input looked up where they are not (the job's working directory)."""
    found, script, asked, launch = _examine(text, target)
    if script is None or asked is None or script.scheduler != "slurm":
        return found
    partition = script.options.get("partition")
    if partition is not None and partition != local_slurm.PARTITION:
        found.append(f"#SBATCH --partition={partition} (line {script.lines['partition']}): the "
                     f"local Slurm has one partition, `{local_slurm.PARTITION}` (its default), "
                     f"and sbatch refuses a job for any other: name {local_slurm.PARTITION} or "
                     f"leave --partition out")
    _memory(script, asked, found)
    chdir = script.options.get("chdir")
    if chdir is not None and not os.path.isdir(os.path.expanduser(chdir)):
        found.append(f"#SBATCH --chdir={chdir} (line {script.lines['chdir']}): no such folder "
                     f"on this machine, so the job fails before its first line: --chdir="
                     f"{COURSE}")
    if launch is not None:
        _workdir(launch, target, found)
    return found


def _megabytes(value: str) -> int | None:
    """A Slurm memory size in megabytes: a number, in MB unless it ends in K, M, G or T (KB, MB,
    GB, TB: sbatch takes those too)."""
    match = re.fullmatch(r"(\d+)(?:([KMGT])B?)?", value.strip(), re.I)
    if not match:
        return None
    number, unit = int(match.group(1)), (match.group(2) or "M").upper()
    return {"K": -(-number // 1024), "M": number, "G": number * 1024,
            "T": number * 1024 ** 2}[unit]


def _memory(script: Script, asked: Asked, found: list[str]) -> None:
    """--mem (a node's) or --mem-per-cpu (times the CPUs of the job on a node) against the memory
    of the local Slurm's node."""
    node = local_slurm.MEMORY_MB
    given = [name for name in ("mem", "mem-per-cpu") if name in script.options]
    if len(given) == 2:
        found.append(f"#SBATCH --mem and --mem-per-cpu (lines {script.lines['mem']} and "
                     f"{script.lines['mem-per-cpu']}): sbatch takes only one of them")
        return
    for name in given:
        value, line = script.options[name], script.lines[name]
        megabytes = _megabytes(value)
        if megabytes is None:
            found.append(f"#SBATCH --{name}={value} (line {line}) is not a memory size of Slurm: "
                         f"megabytes, or a number with K, M, G or T (--{name}=500M)")
            continue
        cpus = (asked.threads or 1) * (asked.ranks_per_node or 1)
        total = megabytes * cpus if name == "mem-per-cpu" else megabytes
        times = f" x {cpus} CPU(s)" if name == "mem-per-cpu" else ""
        if total > node:
            found.append(f"#SBATCH --{name}={value} (line {line}) asks a node for {megabytes} "
                         f"MB{times}" + (f" = {total} MB" if times else "") + f", more than the "
                         f"{node} MB of the local Slurm's node: sbatch refuses the job "
                         f"(\"Requested node configuration is not available\"); ask for at most "
                         f"{node} MB, or leave --{name} out (the job then gets "
                         f"{local_slurm.MEMORY_PER_CPU_MB} MB per CPU)")


def _workdir(launch: Launch, target: JobRequest, found: list[str]) -> None:
    """The program and its input found where the job looks for them: relative paths from the
    job's working directory, which is the folder it was submitted from (a temporary one here)
    unless the script changes it; a bare name on the job's PATH."""
    course = os.path.realpath(COURSE)
    program = Path(target.program[0]).name
    command = launch.command
    at = next(i for i, w in enumerate(command) if _is_program(w, program))
    programs = re.compile(re.escape(course) + r"/build/native/[^/]+/bin/" + re.escape(program))
    # (word, where it must lead): the program, and each argument that is a file of the checkout
    wanted = [(command[at], programs)]
    for word, expected in zip(command[at + 1:], target.program[1:]):
        if (Path(COURSE) / expected).exists():
            wanted.append((word, re.compile(re.escape(os.path.realpath(Path(COURSE) / expected)))))
    relative, elsewhere = [], []
    for word, where_it_is in wanted:
        value = _value(word, launch.variables)
        if "/" not in value and word == command[at]:     # a bare name: looked up on the PATH
            folders = _value(launch.variables.get("PATH", ""), launch.variables).split(":")
            if not any(programs.fullmatch(os.path.realpath(posixpath.join(f, value)))
                       for f in folders if f.startswith("/")):
                found.append(f"`{word}` (line {launch.number}) is looked up on the job's PATH, "
                             f"where the course's programs are not: give its path, "
                             f"`{COURSE}/build/native/release/bin/{program}`")
            continue
        full = _join(launch.cwd, value)
        if full is not None and where_it_is.fullmatch(os.path.realpath(full)):
            continue
        (elsewhere if os.path.expanduser(value).startswith("/") else relative).append(word)
    line = f" (line {launch.number})"
    if relative:
        shown = " and ".join(f"`{w}`" for w in relative)
        cwd = launch.cwd
        if cwd is None:
            start = (f"the script changes to a folder this check cannot tell (a variable it does "
                     f"not set) before it runs {shown}{line}")
        elif cwd.startswith(SUBMIT_DIR):
            start = (f"the job runs {shown}{line} from the folder it was submitted from (a "
                     f"temporary folder on the grader), not from the course checkout, so they "
                     f"are not found")
        else:
            start = (f"the job runs {shown}{line} in {cwd}, where its `cd` (or --chdir) took it, "
                     f"but they are in the course checkout")
        found.append(f"{start}: `cd {COURSE}` before the program (or `#SBATCH --chdir={COURSE}`), "
                     f"or give their full paths")
    if elsewhere:
        shown = " and ".join(f"`{w}`" for w in elsewhere)
        found.append(f"{shown}{line}: not the course's {program} and its input, which the local "
                     f"Slurm's job finds in the course checkout, {COURSE}")


def run_on_local_slurm(text: str, timeout: float = 120.0,
                       folder: str | Path | None = None) -> local_slurm.JobResult:
    """Submit the script to a LocalSlurm started for it in a temporary folder (stopped after). The
    job's output goes to that folder whatever the script says (nothing lands in the checkout)."""
    with tempfile.TemporaryDirectory(dir=folder) as tmp:
        tmp = Path(tmp)
        (tmp / "job.sh").write_text(text)
        output = f"--output={tmp / 'job-%j.out'}"
        cluster = local_slurm.LocalSlurm(tmp / "slurm")
        try:
            cluster.start()
            return cluster.run(tmp / "job.sh", cwd=tmp, timeout=timeout,
                               options=(output, output.replace("--output", "--error")))
        finally:
            cluster.stop()


def check_local_job(text: str, target: JobRequest, what: str = "the job script") -> str:
    """The rules first (ScriptError): the script's, and the local Slurm's (`local_problems`). Then,
    where a local Slurm can run, the script submitted to one: it must complete, with the thread
    count of the target and solc's 208 iterations (ScriptError otherwise). Returns what was
    checked, in words: where no Slurm can run, that the grade rests on the rules alone and why."""
    _raise(local_problems(text, target), what)
    reason = local_slurm.unavailable()
    if reason:
        return (f"{what} follows the rules. It was graded by the rules alone, not run: this "
                f"machine cannot run the local Slurm ({reason}). The directives, the working "
                f"directory, the memory and the partition were checked; whether the job really "
                f"completes with threads {target.threads} and 208 iterations was not (a grading "
                f"machine with Slurm, munge and root checks that)")
    try:
        result = run_on_local_slurm(text)
    except RuntimeError as err:                 # sbatch refused it
        raise ScriptError(f"{what} follows the rules, but the local Slurm refused it: "
                          f"{err}") from None
    except TimeoutError as err:
        raise ScriptError(f"{what}: the job did not finish in time ({err})") from None
    tail = "\n".join(result.output.strip().splitlines()[-8:]) or "(no output)"
    if not result.ok:
        raise ScriptError(f"{what} follows the rules, but its job ended {result.state} (exit "
                          f"code {result.exit_code}): does it change to the course checkout "
                          f"(cd {COURSE}) before it runs the program? The end of its "
                          f"output:\n{tail}")
    wanted = f"threads {target.threads}"
    if wanted not in result.output:
        found = re.search(r"threads \d+", result.output)
        raise ScriptError(f"the job completed, but {Path(target.program[0]).name} did not run "
                          f"with {target.threads} thread(s) (it says "
                          f"{found.group(0) if found else 'nothing about threads'!r})")
    if "208 iterations" not in result.output:
        raise ScriptError(f"the job completed, but its output lacks CG's \"208 iterations\" of "
                          f"the input {target.program[1:]}:\n{tail}")
    return (f"{what} follows the rules, and its job on a local Slurm completed: {wanted}, "
            f"208 iterations")


def shell_syntax(text: str) -> str | None:
    """What bash says about the script's syntax (`bash -n`), or None if it reads it."""
    done = subprocess.run(["bash", "-n"], input=text, capture_output=True, text=True, timeout=30)
    return done.stderr.strip().replace("bash: ", "") if done.returncode else None


# --- which queue (task 4) -------------------------------------------------------------------------

def first_queue(system: str, nodes: int, elapse: str) -> str | None:
    """The general queue with the shortest elapse limit that takes `nodes` nodes for `elapse`
    (HH:MM:SS) on `system`; None if none does."""
    sys_ = SYSTEMS[system]
    wanted = seconds(elapse)
    fits = []
    for name in GENERAL_QUEUES[system]:
        queue = sys_.queue(name)
        if queue.min_nodes <= nodes <= queue.max_nodes:
            limit = seconds(queue.elapse_limit(nodes))
            if wanted <= limit:
                fits.append((max(seconds(lim) for _, lim in queue.limits), name))
    return min(fits)[1] if fits else None


def routed_queue(system: str, queue: str, nodes: int) -> str:
    """The class a job of `nodes` nodes runs in: the sub-class that a routing queue (regular-o)
    sends it to by its size, read from the queue's note in systems.py; else the queue itself."""
    q = SYSTEMS[system].queue(queue)
    for name, low, high in re.findall(r"([\w-]+) (\d+)-(\d+)", q.note if q else ""):
        if int(low) <= nodes <= int(high):
            return name
    return queue


def answers() -> tuple:
    """The course's functions that answer task 4's question, "which queue takes this job, and
    which class does it run in": the answers themselves, and the rule checks that answer it by
    taking or refusing a job of a given queue (the generator's check, its queue part, and the
    writer of scripts that runs it; this module's checks of a script, which run those rules)."""
    from ..cluster import jobscript
    return (first_queue, routed_queue, jobscript.check, jobscript._check_queue, jobscript.render,
            _examine, _rules, problems, check_script, local_problems, check_local_job)


@contextmanager
def without_answers():
    """While it lasts, every function of `answers()` raises instead of answering (however it is
    reached: course.grading.exercise.references_blocked): the grader calls a learner's function
    inside it."""
    from .exercise import references_blocked
    with references_blocked(*answers()):
        yield


def call_without_answers(function, *args):
    """function(*args) as a tuple, called while the course's own answers refuse
    (`without_answers`)."""
    with without_answers():
        try:
            return tuple(function(*args))
        except AssertionError:
            raise
        except Exception as err:
            raise AssertionError(f"{function.__name__} raised {type(err).__name__}"
                                 f"{': ' + str(err) if str(err) else ''} on a job of the checks: "
                                 f"it must return (queue, runs_in) for any job, (None, None) "
                                 f"where no queue takes it") from None
