"""The systems a job script can be written for, and their queues (07_cluster).

Odyssey (Wisteria/BDEC-01, A64FX) and Oakbridge-CX schedule with Fujitsu's PJM; their job classes
are the tables of the course's seed document 004 (the Information Technology Center of the
University of Tokyo, 2021-05-14 for Odyssey, 2019-07-01 for Oakbridge-CX). Check the system's
current guide before a real run: queues change. `generic` is any Slurm (or PJM) cluster: no queue
table, and the cores of a node only when given.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Queue:
    name: str
    min_nodes: int
    # (up to this many nodes, elapse limit HH:MM:SS), by node count: a queue that routes jobs by
    # their size to sub-classes (regular-o -> small-o ... x-large-o) has several
    limits: tuple[tuple[int, str], ...]
    note: str = ""

    @property
    def max_nodes(self) -> int:
        return self.limits[-1][0]

    def elapse_limit(self, nodes: int) -> str:
        return next(limit for most, limit in self.limits if nodes <= most)


@dataclass(frozen=True)
class System:
    name: str
    title: str
    scheduler: str                  # "slurm" or "pjm"
    cores_per_node: int | None      # compute cores a job may use on one node
    queues: tuple[Queue, ...] = ()
    default_queue: str | None = None
    modules: tuple[str, ...] = ()   # `module load` lines of the job
    env: tuple[tuple[str, str], ...] = ()
    numactl: str | None = None      # wrapper of a single-process (OpenMP) run
    mpiexec: str = "mpiexec"
    # where `python -m course build` puts the programs for this system's nodes: the build made on
    # the cluster itself, or (a processor of its own) with a toolchain file, named in the folder
    programs: str = "build/native/release/bin"
    arch: str | None = None         # the compute nodes' processor, where only its own build runs
    group_required: bool = False
    notes: tuple[str, ...] = field(default=())

    def queue(self, name: str) -> Queue | None:
        return next((q for q in self.queues if q.name == name), None)


def _odyssey_queues() -> tuple[Queue, ...]:
    # seed S004 ~l.162-306; regular-o routes a job to small/medium/large/x-large-o by its nodes
    return (
        Queue("debug-o", 1, ((144, "00:30:00"),)),
        Queue("short-o", 1, ((72, "08:00:00"),)),
        Queue("regular-o", 1, ((1152, "48:00:00"), (2304, "24:00:00")),
              "routed by node count: small-o 1-144, medium-o 145-576, large-o 577-1152 (48 h), "
              "x-large-o 1153-2304 (24 h)"),
        Queue("priority-o", 1, ((288, "48:00:00"),), "token factor 1.50"),
        Queue("challenge-o", 1, ((7680, "24:00:00"),), "by review, once a month"),
        Queue("interactive-o", 1, ((1, "00:30:00"), (12, "00:10:00")),
              "pjsub --interact; no tokens; 1 node 30 min, 2-12 nodes 10 min"),
    )


def _obcx_queues() -> tuple[Queue, ...]:
    # seed S004 ~l.478-620
    return (
        Queue("debug", 1, ((16, "00:30:00"),)),
        Queue("short", 1, ((8, "08:00:00"),)),
        Queue("regular", 1, ((128, "48:00:00"), (256, "24:00:00")),
              "routed by node count: small 1-16, medium 17-64, large 65-128 (48 h), "
              "x-large 129-256 (24 h)"),
        Queue("challenge", 1, ((1368, "24:00:00"),)),
        Queue("interactive", 1, ((1, "02:00:00"), (8, "00:10:00")),
              "pjsub --interact; no tokens; 1 node 2 h, 2-8 nodes 10 min"),
    )



SYSTEMS = {
    "generic": System(
        name="generic", title="any Slurm or PJM cluster", scheduler="slurm",
        cores_per_node=None,
        notes=("load your site's compiler and MPI modules (`module avail`) before building",)),
    "odyssey": System(
        name="odyssey", title="Wisteria/BDEC-01 Odyssey (A64FX, 48 cores in 4 CMGs per node)",
        scheduler="pjm", cores_per_node=48, queues=_odyssey_queues(), default_queue="debug-o",
        modules=("fj",),
        # first-touch pages on the CMG that touches them when OpenMP spans CMGs (seed S004 ~l.2975)
        env=(("XOS_MMM_L_PAGING_POLICY", "demand:demand:demand"),),
        numactl="numactl -l", group_required=True,
        # built with the A64FX toolchain file, on the login node (cross) or a compute node
        programs="build/native/release-a64fx-fujitsu/bin", arch="A64FX",
        notes=("one MPI rank per CMG (4 per node, 12 threads each) is the recommended hybrid layout",
               "interactive jobs use no tokens: pjsub --interact -g GROUP "
               "-L rscgrp=interactive-o,node=1")),
    "obcx": System(
        name="obcx", title="Oakbridge-CX (2 x Xeon Platinum 8280, 56 cores per node)",
        scheduler="pjm", cores_per_node=56, queues=_obcx_queues(), default_queue="debug",
        mpiexec="mpiexec.hydra", group_required=True,
        notes=("no job script of this system is printed in the seeds: the directives are "
               "Odyssey's PJM ones; check the system's guide for the module names",
               "interactive jobs use no tokens: pjsub --interact -g GROUP "
               "-L rscgrp=interactive,node=1")),
}
