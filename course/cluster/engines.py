"""ipyparallel engines started as a batch job (07_cluster): the controller runs where the notebook
runs (a login node, a laptop), the engines run where the scheduler puts them, as MPI ranks of one
job whose script comes from `course.cluster.jobscript`. (ipyparallel can write such a job itself,
`ipp.Cluster(engines="slurm")`; writing it here shows the script and checks it like any other.)
"""

from __future__ import annotations

import time
from pathlib import Path

from . import jobscript


def start_controller(folder: str | Path):
    """An ipyparallel controller with its profile in FOLDER; (cluster, engine connection file)."""
    import ipyparallel as ipp

    cluster = ipp.Cluster(n=0, profile_dir=str(Path(folder) / "ipython"), log_level=40)
    cluster.start_controller_sync()
    connection = Path(cluster.profile_dir) / "security" / \
        f"ipcontroller-{cluster.cluster_id}-engine.json"
    for _ in range(300):                        # the controller writes it once it listens
        if connection.exists():
            return cluster, connection
        time.sleep(0.1)
    cluster.stop_controller_sync()
    raise RuntimeError(f"the ipyparallel controller wrote no {connection}")


def engines_request(connection: Path, ranks: int, threads: int = 1, cores: int | None = None,
                    time_limit: str = "00:10:00") -> jobscript.JobRequest:
    """A job of RANKS MPI engines on one node that connect to the controller of CONNECTION."""
    return jobscript.JobRequest(
        program=["ipengine", f"--file={connection}", "--mpi", "--log-level=ERROR"],
        ranks_per_node=ranks, threads=threads, cores_per_node=cores, time=time_limit,
        name="engines")
