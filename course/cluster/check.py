"""A learner's job script read back and checked against the run it is meant for (07_cluster).

`problems(text, target)` reads the directives of a Slurm (`#SBATCH`) or PJM (`#PJM`) script into a
`JobRequest`, puts that request through the system's rules (`jobscript.check`, the same rules the
generator obeys), compares it with the target run, and reads the body: `OMP_NUM_THREADS` exported
and equal to the threads, the program launched with its arguments, through MPI with the right
rank count for an MPI run, and bound to cores for a hybrid one. It returns one teaching message per
problem (empty: the script is right); `check_script` raises `ScriptError` with all of them.

`run_on_local_slurm` submits a script to a `LocalSlurm` of its own (exercise 07, task 3), and
`first_queue` / `routed_queue` answer "which queue takes this job" from `systems.py` (task 4).
"""

from __future__ import annotations

import difflib
import re
import shlex
import subprocess
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path

from . import local_slurm
from .jobscript import (COMMANDS, OPENMP_PROGRAMS, ROOT, JobRequest, JobScriptError, check, is_mpi,
                        seconds)
from .systems import SYSTEMS

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
    for number, line in enumerate(lines, start=1):
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
        words = _words(line, number, script.problems)
        if words:
            script.body.append((number, words))
    return script


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


def _body(script: Script, asked: Asked, target: JobRequest, problems: list[str]) -> None:
    program = Path(target.program[0]).name
    args = target.program[1:]
    scheduler_vars = {"SLURM_NTASKS": str(asked.ranks or 1), "SLURM_NPROCS": str(asked.ranks or 1),
                      "PJM_MPI_PROC": str(asked.ranks or 1),
                      **({"SLURM_CPUS_PER_TASK": str(asked.threads),
                          "PJM_OMP_THREADS": str(asked.threads)} if asked.threads else {})}
    variables: dict[str, str] = dict(scheduler_vars)
    exported: dict[str, str] = {}
    launches: list[tuple[int, list[str], dict[str, str]]] = []
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
            if any(_is_program(w, program) for w in command):
                launches.append((number, command, {**exported, **inline}))
    threads_needed = target.threads > 1 or program in OPENMP_PROGRAMS
    if not launches:
        shown = " ".join([program, *args])
        problems.append(f"the script never runs {program}: the run needs a line that starts it, "
                        f"`{shown}`" + (" under mpiexec" if is_mpi(target) else ""))
        env = exported
        if threads_needed:
            _threads(env, target, problems, "")
        return
    best: list[str] | None = None
    for number, command, env in launches:
        found: list[str] = []
        where = f" (line {number})"
        if threads_needed or "OMP_NUM_THREADS" in env:
            _threads(env, target, found, where)
        at = next(i for i, w in enumerate(command) if _is_program(w, program))
        given = []
        for word in command[at + 1:]:
            if word in SHELL_OPERATORS or word.startswith((">", "2>", "1>", "&>")):
                break
            given.append(word)
        if len(given) != len(args) or not all(_same_argument(f, e) for f, e in zip(given, args)):
            found.append(f"{program} must run with the arguments `{' '.join(args) or '(none)'}`, "
                         f"found `{' '.join(given) or '(none)'}`{where}")
        _launcher(command[:at], env, variables, target, script.scheduler, found, where)
        if best is None or len(found) < len(best):
            best = found
    problems.extend(best or [])


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


def _launcher(before: list[str], env: dict[str, str], variables: dict[str, str],
              target: JobRequest, scheduler: str | None, problems: list[str], where: str) -> None:
    program = Path(target.program[0]).name
    at = next((i for i, w in enumerate(before) if Path(w).name in LAUNCHERS), None)
    if at is None:
        if is_mpi(target):
            problems.append(f"{program} is an MPI run of {target.ranks} rank(s): start it with "
                            f"`mpiexec -n {target.ranks} ...`"
                            + (" (or srun)" if scheduler == "slurm" else "")
                            + f", not on its own{where}")
        return
    launcher = Path(before[at]).name
    flags = before[at + 1:]
    if launcher == "srun" and scheduler != "slurm":
        problems.append(f"srun launches only under Slurm: use mpiexec under PJM{where}")
    count = None
    for i, word in enumerate(flags):
        for flag in ("-n", "-np", "--n", "--np", "--ntasks"):
            if word == flag and i + 1 < len(flags):
                count = flags[i + 1]
            elif word.startswith(flag + "=") or (flag == "-n" and re.fullmatch(r"-n\d+", word)):
                count = word[len(flag):].lstrip("=")
    if count is not None:
        count = _value(count, variables)
    if count is None and launcher != "srun":
        problems.append(f"{launcher} without a rank count: the run needs "
                        f"`{launcher} -n {target.ranks}`{where}")
    elif count is not None and count != str(target.ranks):
        what = "ranks" if is_mpi(target) else "copies of the program (it is OpenMP only)"
        problems.append(f"{launcher}: the run needs {target.ranks} rank(s) in all "
                        f"({target.ranks_per_node} per node x {target.nodes} node(s)), the "
                        f"script starts {count} {what}{where}")
    if is_mpi(target) and target.threads > 1:
        bound = any(name in env for name in BINDING_VARIABLES) or any(
            f.split("=")[0] in BINDING_FLAGS for f in flags)
        if not bound:
            problems.append(f"a hybrid run ({target.threads} threads per rank) needs its threads "
                            f"bound to cores: export OMP_PROC_BIND=close and OMP_PLACES=cores, or "
                            f"give {launcher} its binding flags (--bind-to core, --cpu-bind=cores)"
                            f"{where}")


# --- the whole check ----------------------------------------------------------------------------

def problems(text: str, target: JobRequest) -> list[str]:
    """Everything wrong with the job script `text` for the run `target`; empty if it is right."""
    if not isinstance(text, str):
        return [f"the job script must be a str (its text), not {type(text).__name__}"]
    check(target)                   # a target the system refuses is the caller's error
    script = read_script(text)
    found = list(script.problems)
    want = target.scheduler
    if script.scheduler is None:
        return found + [f"no {COMMANDS[want]['prefix']} lines: a {want} job script asks for its "
                        f"resources in {COMMANDS[want]['prefix']} directives at its top"]
    if script.scheduler != want:
        prefix = COMMANDS[script.scheduler]['prefix']
        return found + [f"this is a {script.scheduler} script ({prefix} lines), but the run is "
                        f"for {want} ({COMMANDS[want]['prefix']} lines)"]
    asked = (_slurm_asked if want == "slurm" else _pjm_asked)(script, target, found)
    _compare(script, asked, target, found)
    _rules(asked, target, found)
    _body(script, asked, target, found)
    return found


def check_script(text: str, target: JobRequest, what: str = "the job script") -> None:
    """Raise ScriptError listing every problem of the script, if it has any."""
    found = problems(text, target)
    if found:
        raise ScriptError(f"{what} has {len(found)} problem(s):\n"
                          + "\n".join(f"  - {p}" for p in found))


def run_on_local_slurm(text: str, timeout: float = 120.0,
                       folder: str | Path | None = None) -> local_slurm.JobResult:
    """Submit the script to a LocalSlurm started for it in a temporary folder (stopped after)."""
    with tempfile.TemporaryDirectory(dir=folder) as tmp:
        tmp = Path(tmp)
        (tmp / "job.sh").write_text(text)
        cluster = local_slurm.LocalSlurm(tmp / "slurm")
        try:
            cluster.start()
            return cluster.run(tmp / "job.sh", cwd=tmp, timeout=timeout)
        finally:
            cluster.stop()


# --- which queue ----------------------------------------------------------------------------------

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


def shell_syntax(text: str) -> str | None:
    """What bash says about the script's syntax (`bash -n`), or None if it reads it."""
    done = subprocess.run(["bash", "-n"], input=text, capture_output=True, text=True, timeout=30)
    return done.stderr.strip().replace("bash: ", "") if done.returncode else None


def check_local_job(text: str, target: JobRequest, what: str = "the job script") -> str:
    """The rules first (ScriptError); then, where a local Slurm can run, the script submitted to
    one: it must complete, with the thread count of the target and solc's 208 iterations
    (ScriptError otherwise). Returns what was checked, in words."""
    check_script(text, target, what)
    reason = local_slurm.unavailable()
    if reason:
        return (f"{what} follows the rules; Slurm cannot run here ({reason}), so it is graded by "
                f"the rules alone")
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


@contextmanager
def without_answers():
    """While it lasts, the course's own answers to "which queue" (first_queue, routed_queue) raise
    instead of answering: the grader calls a learner's function inside it."""
    def refuse(*args, **kwargs):
        raise AssertionError("the answer must not call course.cluster.check's first_queue or "
                             "routed_queue (the grader's own answers): read the queues from "
                             "course.cluster.systems")
    saved = {f: f.__code__ for f in (first_queue, routed_queue)}
    try:
        for f in saved:
            f.__code__ = refuse.__code__
        yield
    finally:
        for f, code in saved.items():
            f.__code__ = code


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
