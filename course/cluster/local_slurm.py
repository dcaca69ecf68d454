"""A real, single-node Slurm in a temporary folder: the tests (and lecture 07) submit the course's
job scripts to it with `sbatch`.

Debian's `slurm-wlm` and `munge` provide the daemons. Everything they write lives in the folder:
a fresh munge key and its daemon, a generated `slurm.conf` (this machine as the only node, its
CPUs as `slurmd -C` sees them, `MEMORY_MB` of its memory, one partition `PARTITION`, free ports),
the controller and node daemons, their state and logs. Memory is a consumable resource, as on most
clusters: sbatch refuses a job that asks a node for more than it has (`--mem`, or `--mem-per-cpu`
times the job's CPUs on the node).
`stop()` ends them all. It runs as root only (the daemons then run as root too, `SlurmUser=root`),
which is the case on the CI machine and in a container; elsewhere `unavailable()` says why not.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

COMMANDS = ("munged", "slurmctld", "slurmd", "sbatch", "squeue", "scontrol", "sinfo")
# the node and partition the jobs see; exercise 07's check applies the same limits by the rules
# where this Slurm cannot run (course.grading.cluster.local_problems)
PARTITION = "debug"
MAX_TIME = "00:30:00"
MEMORY_MB = 2048            # the node's memory for jobs (RealMemory; less on a smaller machine)
MEMORY_PER_CPU_MB = 256     # what a job that asks for no memory gets per CPU (DefMemPerCPU)
FINISHED = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY",
            "PREEMPTED", "BOOT_FAIL", "DEADLINE"}


def unavailable() -> str | None:
    """Why a local Slurm cannot run here, or None."""
    missing = [c for c in COMMANDS if shutil.which(c) is None]
    if missing:
        return (f"Slurm is not installed ({', '.join(missing)} missing; Debian: apt-get install "
                f"slurm-wlm munge)")
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return "a local Slurm needs root (its daemons run as root here)"
    return None


@dataclass
class JobResult:
    job_id: int
    state: str                  # COMPLETED, FAILED, TIMEOUT, ...
    exit_code: str              # "0:0" = exit status:signal
    output: str                 # the job's stdout (and stderr, merged by the course's scripts)
    seconds: float

    @property
    def ok(self) -> bool:
        return self.state == "COMPLETED" and self.exit_code == "0:0"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LocalSlurm:
    """`with LocalSlurm(folder) as slurm: result = slurm.run(script_path)`."""

    def __init__(self, folder: str | Path):
        self.folder = Path(folder).resolve()
        self.conf = self.folder / "slurm.conf"
        self.munge_socket = self.folder / "munge.socket"
        self.node = "localhost"
        self.cpus = 1

    @property
    def env(self) -> dict[str, str]:
        """The environment of a Slurm client (sbatch, squeue) talking to this cluster."""
        return {**os.environ, "SLURM_CONF": str(self.conf)}

    # --- start and stop ---------------------------------------------------------------------
    def start(self, timeout: float = 30.0) -> "LocalSlurm":
        reason = unavailable()
        if reason:
            raise RuntimeError(reason)
        self.folder.mkdir(parents=True, exist_ok=True)
        os.chmod(self.folder, 0o700)
        self._start_munge()
        self._write_conf()
        for daemon in (["slurmctld", "-i"], ["slurmd", "-N", self.node]):
            self._call([*daemon, "-f", str(self.conf)], what=daemon[0])
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            state = subprocess.run(["sinfo", "-h", "-o", "%T"], capture_output=True, text=True,
                                   env=self.env, timeout=10).stdout.strip()
            if state == "idle":
                return self
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"the local Slurm node did not become idle in {timeout:.0f} s; "
                           f"see {self.folder}/slurmctld.log and slurmd.log")

    def _call(self, cmd: list[str], what: str) -> None:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
        if done.returncode != 0:
            raise RuntimeError(f"{what} did not start: {(done.stderr or done.stdout).strip()}")

    def _start_munge(self) -> None:
        key = self.folder / "munge.key"
        key.write_bytes(os.urandom(128))
        key.chmod(0o600)
        f = self.folder
        self._call(["munged", "--force", f"--socket={self.munge_socket}", f"--key-file={key}",
                    f"--log-file={f / 'munged.log'}", f"--pid-file={f / 'munged.pid'}",
                    f"--seed-file={f / 'munged.seed'}"], what="munged")

    def _write_conf(self) -> None:
        # this machine as slurmd sees it: "NodeName=vm CPUs=2 Boards=1 ... RealMemory=24105"
        hardware = subprocess.run(["slurmd", "-C"], capture_output=True, text=True,
                                  timeout=30).stdout.splitlines()[0]
        self.node = re.search(r"NodeName=(\S+)", hardware).group(1)
        self.cpus = int(re.search(r"CPUs=(\d+)", hardware).group(1))
        memory = int(re.search(r"RealMemory=(\d+)", hardware).group(1))
        node_line = re.sub(r"RealMemory=\d+", f"RealMemory={max(min(MEMORY_MB, memory), 1)}",
                           hardware)
        f = self.folder
        (f / "state").mkdir(exist_ok=True)
        (f / "spool").mkdir(exist_ok=True)
        self.conf.write_text(f"""\
# a one-node Slurm for the course's tests (course.cluster.local_slurm)
ClusterName=course
SlurmctldHost={self.node}(127.0.0.1)
SlurmUser=root
SlurmdUser=root
SlurmctldPort={_free_port()}
SlurmdPort={_free_port()}
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={self.munge_socket}
StateSaveLocation={f / 'state'}
SlurmdSpoolDir={f / 'spool'}
SlurmctldPidFile={f / 'slurmctld.pid'}
SlurmdPidFile={f / 'slurmd.pid'}
SlurmctldLogFile={f / 'slurmctld.log'}
SlurmdLogFile={f / 'slurmd.log'}
ProctrackType=proctrack/linuxproc
TaskPlugin=task/affinity
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU={MEMORY_PER_CPU_MB}
MpiDefault=none
# a job starts as soon as the node is free (by default sbatch's jobs wait up to 3 s each)
SchedulerParameters=batch_sched_delay=0
ReturnToService=2
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MinJobAge=600
KillWait=5
{node_line} NodeAddr=127.0.0.1 State=UNKNOWN
PartitionName={PARTITION} Nodes={self.node} Default=YES MaxTime={MAX_TIME} State=UP
""")

    def stop(self) -> None:
        # the two Slurm daemons together, then munge (which they talk through while they stop)
        for names in (("slurmd", "slurmctld"), ("munged",)):
            pids = []
            for name in names:
                try:
                    pid = int((self.folder / f"{name}.pid").read_text().split()[0])
                    os.kill(pid, signal.SIGTERM)
                    pids.append(pid)
                except (OSError, ValueError, IndexError):
                    continue
            for pid in pids:
                for _ in range(200):            # up to 10 s for it to go
                    try:
                        os.kill(pid, 0)
                    except OSError:
                        break
                    time.sleep(0.05)

    def __enter__(self) -> "LocalSlurm":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # --- jobs -------------------------------------------------------------------------------
    def submit(self, script: str | Path, cwd: str | Path, env: dict | None = None,
               options: tuple[str, ...] = ()) -> int:
        """sbatch SCRIPT from the folder CWD (where the job's output goes); the job id. OPTIONS go
        to sbatch before the script and win over its #SBATCH lines."""
        done = subprocess.run(["sbatch", "--parsable", *options, str(script)], cwd=cwd,
                              capture_output=True, text=True, env={**self.env, **(env or {})},
                              timeout=30)
        if done.returncode != 0:
            raise RuntimeError(f"sbatch {script}: {done.stderr.strip()}")
        return int(done.stdout.strip().split(";")[0])

    def job(self, job_id: int) -> dict[str, str]:
        """`scontrol show job` as a dict (JobState, ExitCode, StdOut, ...)."""
        text = subprocess.run(["scontrol", "-o", "show", "job", str(job_id)], capture_output=True,
                              text=True, env=self.env, timeout=30).stdout
        return dict(re.findall(r"(\w+)=(\S*)", text))

    def wait(self, job_id: int, timeout: float = 120.0) -> JobResult:
        """Wait for the job to finish (cancelled after `timeout` seconds)."""
        start = time.monotonic()
        info = self.job(job_id)
        while info.get("JobState") not in FINISHED:
            if time.monotonic() - start > timeout:
                subprocess.run(["scancel", str(job_id)], env=self.env, timeout=30)
                raise TimeoutError(f"job {job_id} did not finish in {timeout:.0f} s "
                                   f"(state {info.get('JobState')}); cancelled")
            time.sleep(0.2)
            info = self.job(job_id)
        out = Path(info.get("StdOut", ""))
        return JobResult(job_id, info["JobState"], info.get("ExitCode", "?"),
                         out.read_text(errors="replace") if out.is_file() else "",
                         time.monotonic() - start)

    def run(self, script: str | Path, cwd: str | Path, timeout: float = 120.0,
            env: dict | None = None, options: tuple[str, ...] = ()) -> JobResult:
        return self.wait(self.submit(script, cwd, env, options), timeout)
