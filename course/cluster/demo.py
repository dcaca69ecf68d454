"""The jobs lecture 07 submits: an OpenMP run, an MPI run, a notebook in batch and ipyparallel
engines, on a single-node Slurm started for the purpose, or (where none can run) as recorded.

    python -m course.cluster.demo --record examples/07_cluster/recorded_slurm.json

runs them and writes the record that the lecture shows on machines without Slurm.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import tempfile
from pathlib import Path

import nbformat

from .. import toolchain
from . import jobscript, local_slurm
from .engines import engines_request, start_controller
from .jobscript import JobRequest

ROOT = jobscript.ROOT
RECORD = ROOT / "examples" / "07_cluster" / "recorded_slurm.json"
INPUT_03 = "examples/03_openmp/INPUT.DAT"
BATCH_NOTEBOOK = "notebooks/01_fem1d_b_solve_and_verify.ipynb"
SHOWN_CHECKOUT = "$HOME/pfem"      # the checkout as the lecture shows it (07a's WORKDIR)


def shown(text: str, folder: str | Path) -> str:
    """A job's script or output as the lecture shows it: the run's temporary folder as $TMP and
    this checkout as one at SHOWN_CHECKOUT (`cd "$HOME"/pfem`), so that no page shows the paths
    of the machine that ran the jobs."""
    text = text.replace(str(folder), "$TMP")
    text = text.replace(jobscript.cd_line(str(ROOT)), jobscript.cd_line(SHOWN_CHECKOUT))
    return text.replace(str(ROOT), SHOWN_CHECKOUT)


def requests(folder: Path, cpus: int) -> dict[str, JobRequest]:
    """The lecture's jobs, sized for a node of `cpus` cores."""
    lines = (ROOT / "examples/05_halo/input.dat").read_text().splitlines()
    two_ranks = folder / "input_2ranks.dat"             # the 05 input, cut in 2 x 1 x 1 blocks
    two_ranks.write_text("\n".join(lines[:-1] + ["2 1 1           PX PY PZ"]) + "\n")
    common = dict(cores_per_node=cpus, time="00:05:00")
    return {
        "openmp": JobRequest(program=["solc", INPUT_03], threads=min(2, cpus), name="openmp",
                             **common),
        "mpi": JobRequest(program=["fem3d_mpi_c", str(two_ranks)], ranks_per_node=2,
                          name="mpi", **common),
        "batch": JobRequest(program=["papermill", BATCH_NOTEBOOK, str(folder / "batch.ipynb"),
                                     "-p", "N_ELEM", "40", "--log-level", "WARNING"],
                            name="batch", **common),
    }


def _injected(path: Path) -> str:
    """The parameters cell papermill put into the executed notebook."""
    if not path.exists():
        return ""
    nb = nbformat.read(path, as_version=4)
    return next((c.source for c in nb.cells if "injected-parameters" in c.metadata.get("tags", [])),
                "")


def _engines(slurm: local_slurm.LocalSlurm, folder: Path) -> dict:
    cluster, connection = start_controller(folder)
    try:
        request = engines_request(connection, ranks=2, cores=slurm.cpus)
        script = folder / "engines.sh"
        script.write_text(jobscript.render(request))
        job = slurm.submit(script, cwd=folder, env=toolchain.mpi_env())
        client = cluster.connect_client_sync()
        client.wait_for_engines(2, timeout=120)
        view = client[:]
        view.execute("from mpi4py import MPI; import os, socket; comm = MPI.COMM_WORLD; "
                     "total = comm.allreduce(comm.rank + 1); "
                     "where = (comm.rank, comm.size, os.environ.get('SLURM_JOB_ID'), "
                     "socket.gethostname())", block=True)
        pulled = view.pull(["total", "where"], block=True)
        client.shutdown(hub=False, block=True)
        slurm.wait(job, timeout=60)
        return {"script": shown(script.read_text().replace(str(connection), "CONNECTION.json"),
                                folder),
                "job_id": job, "engines": [{"rank": w[0], "size": w[1], "job": w[2],
                                            "host": w[3], "allreduce": t} for t, w in pulled]}
    finally:
        cluster.stop_controller_sync()


def run_jobs(folder: str | Path) -> dict:
    """Start a local Slurm in FOLDER, submit the lecture's jobs, stop it; what each did."""
    folder = Path(folder)
    with local_slurm.LocalSlurm(folder / "slurm") as slurm:
        jobs = {}
        for key, request in requests(folder, slurm.cpus).items():
            script = folder / f"{key}.sh"
            script.write_text(jobscript.render(request))
            result = slurm.run(script, cwd=folder, timeout=300, env=toolchain.mpi_env())
            jobs[key] = {"script": shown(script.read_text(), folder),
                         "job_id": result.job_id, "state": result.state,
                         "exit_code": result.exit_code, "seconds": round(result.seconds, 1),
                         "output": shown(result.output, folder)}
        jobs["batch"]["injected"] = _injected(folder / "batch.ipynb")
        jobs["engines"] = _engines(slurm, folder)
        version = subprocess.run(["sinfo", "--version"], capture_output=True, text=True,
                                 env=slurm.env).stdout.strip()
        return {"live": True, "slurm": version, "node": platform.node(), "cpus": slurm.cpus,
                "date": datetime.date.today().isoformat(), "jobs": jobs}


def live_or_recorded(folder: str | Path) -> dict:
    """The jobs run now where a local Slurm can run, else the recorded run with the reason."""
    reason = local_slurm.unavailable()
    if reason is None:
        return run_jobs(folder)
    record = json.loads(RECORD.read_text())
    return {**record, "live": False, "why_recorded": reason}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    parser.add_argument("--record", metavar="FILE", default=str(RECORD),
                        help=f"write the run here (default {RECORD.relative_to(ROOT)})")
    args = parser.parse_args(argv)
    os.environ.setdefault("IPP_NONINTERACTIVE", "1")
    with tempfile.TemporaryDirectory() as tmp:
        record = run_jobs(tmp)
    Path(args.record).parent.mkdir(parents=True, exist_ok=True)
    Path(args.record).write_text(json.dumps(record, indent=1) + "\n")
    print(f"wrote {args.record}: " + ", ".join(f"{k} {v.get('state', 'done')}"
                                                for k, v in record["jobs"].items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
