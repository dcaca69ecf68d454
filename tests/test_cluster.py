"""Lecture 07_cluster: job scripts from one template, checked against the systems' rules, and every
kind of job the lecture shows submitted to a real single-node Slurm started by these tests."""

from __future__ import annotations

import json
import os
import re
import shlex

import nbformat
import pytest

from conftest import ROOT, env_with, run, run_course
from course.cluster import jobscript, local_slurm
from course.cluster.engines import engines_request, start_controller
from course.cluster.jobscript import JobRequest, JobScriptError

INPUT_03 = "examples/03_openmp/INPUT.DAT"


def odyssey(**kw) -> JobRequest:
    base = dict(program=["solc", INPUT_03], scheduler="pjm", system="odyssey", group="gx12")
    return JobRequest(**{**base, **kw})


# --- the generator: the rules -------------------------------------------------------------------

BAD = {
    "queue that does not exist": (odyssey(queue="debug"), "no queue 'debug'"),
    "too many nodes for the queue": (odyssey(program=["fem3d_mpi_c"], nodes=145), "1-144 nodes"),
    "elapse over the queue's": (odyssey(time="00:31:00"), "over the limit 00:30:00"),
    "regular-o at x-large size": (odyssey(program=["fem3d_mpi_c"], queue="regular-o",
                                          nodes=2000, time="30:00:00"), "limit 24:00:00"),
    "threads over the cores": (odyssey(threads=49), "more than the 48 cores"),
    "ranks x threads over the cores": (odyssey(program=["fem3d_mpi_c"], ranks_per_node=4,
                                               threads=13), "52 per node"),
    "obcx node": (JobRequest(program=["solc"], scheduler="pjm", system="obcx", group="g",
                             threads=57), "56 cores"),
    "no group on odyssey": (odyssey(group=None), "needs --group"),
    "odyssey is not slurm": (odyssey(scheduler="slurm"), "schedules with pjm"),
    "OpenMP program on 2 ranks": (JobRequest(program=["solc"], ranks_per_node=2),
                                  "not an MPI one"),
    "bad time": (JobRequest(program=["solc"], time="1:75:00"), "HH:MM:SS"),
    "zero time": (JobRequest(program=["solc"], time="00:00:00"), "more than 00:00:00"),
    "zero nodes": (JobRequest(program=["solc"], nodes=0), "nodes must be 1 or more"),
    "generic cores": (JobRequest(program=["solc"], threads=3, cores_per_node=2),
                      "more than the 2 cores"),
    "srun under PJM": (JobRequest(program=["fem3d_mpi_c"], scheduler="pjm", launcher="srun"),
                       "srun launches only under Slurm"),
}


@pytest.mark.parametrize("case", BAD, ids=list(BAD))
def test_a_request_the_system_refuses_gets_one_line(case):
    request, phrase = BAD[case]
    with pytest.raises(JobScriptError, match=re.escape(phrase)) as err:
        jobscript.render(request)
    assert "\n" not in str(err.value)


def test_the_odyssey_script_has_every_directive_of_the_seeds_c12():
    """The seed's c12.sh (SEED-NOTES §4.1): queue, node, threads, elapse, group, merged output,
    the fj module, OMP_NUM_THREADS equal to --omp thread, the paging policy, numactl -l."""
    text = jobscript.render(odyssey(threads=12, time="00:15:00", name="c12"))
    for line in ("#PJM -N \"c12\"", "#PJM -L rscgrp=debug-o", "#PJM -L node=1",
                 "#PJM --omp thread=12", "#PJM -L elapse=00:15:00", "#PJM -g gx12", "#PJM -o c12.lst",
                 "module load fj", "export OMP_NUM_THREADS=12",
                 "export XOS_MMM_L_PAGING_POLICY=demand:demand:demand",
                 f"numactl -l ./build/native/release-a64fx-fujitsu/bin/solc {INPUT_03}"):
        assert any(ln.startswith(line) for ln in text.splitlines()), (line, text)
    assert "--mpi" not in text                      # an OpenMP run: no MPI launch
    assert "pjsub" in text and "#SBATCH" not in text


def test_hybrid_scripts_for_each_scheduler_and_launcher():
    hybrid = dict(program=["fem3d_mpi_c", "in.dat"], nodes=2, ranks_per_node=4, threads=12)
    pjm = jobscript.render(odyssey(**hybrid))
    assert "#PJM --mpi proc=8" in pjm and "mpiexec -n 8 ./build/native/release-a64fx-" in pjm
    assert "numactl" not in pjm.split("\n")[-2]
    obcx = jobscript.render(JobRequest(scheduler="pjm", system="obcx", group="g", **hybrid))
    assert "mpiexec.hydra -n 8" in obcx and "#PJM -L rscgrp=debug" in obcx
    slurm = jobscript.render(JobRequest(queue="cpu", group="proj", **hybrid))
    for line in ("#SBATCH --nodes=2", "#SBATCH --ntasks-per-node=4", "#SBATCH --cpus-per-task=12",
                 "#SBATCH --partition=cpu", "#SBATCH --account=proj",
                 "mpiexec -n 8 --map-by ppr:4:node:PE=12 --bind-to core", "sbatch FILE"):
        assert line in slurm, line
    srun = jobscript.render(JobRequest(launcher="srun", **hybrid))
    assert "srun --cpus-per-task=12 --cpu-bind=cores ./build" in srun


@pytest.mark.parametrize("workdir, line", [
    ("$HOME/pfem", 'cd "$HOME"/pfem'), ("~/my course", "cd \"$HOME\"/'my course'"),
    ("/scratch/u1/pfem", "cd /scratch/u1/pfem")])
def test_the_checkout_can_be_given_under_home(workdir, line, tmp_path):
    """The book shows scripts for a checkout under $HOME, not the build machine's path; the
    shell expands $HOME on the cluster."""
    script = jobscript.render(JobRequest(program=["solc"], threads=2, workdir=workdir))
    assert line in script.splitlines()
    cd = next(l for l in script.splitlines() if l.startswith("cd "))
    done = run(["bash", "-c", f"HOME={shlex.quote(str(tmp_path))}; echo {cd[3:]}"], timeout=10)
    assert done.stdout.strip() == workdir.replace("$HOME", str(tmp_path)).replace("~", str(tmp_path))


def test_a_generic_script_names_its_own_scheduler():
    for scheduler, name in (("slurm", "any Slurm cluster"), ("pjm", "any PJM cluster")):
        script = jobscript.render(JobRequest(program=["solc"], threads=2, scheduler=scheduler))
        assert script.splitlines()[1].endswith(f"on {name}"), script.splitlines()[1]


def test_cli_writes_only_a_script_that_passed_the_rules(tmp_path):
    good = tmp_path / "good.sh"
    ok = run_course("jobscript", "--scheduler", "pjm", "--system", "odyssey", "--group", "g",
                    "--threads", "12", "--output", good, "--program", "solc", INPUT_03)
    assert ok.returncode == 0, ok.stderr
    assert good.read_text().startswith("#!/bin/bash") and "--omp thread=12" in good.read_text()
    bad = tmp_path / "bad.sh"
    refused = run_course("jobscript", "--scheduler", "pjm", "--system", "odyssey", "--group", "g",
                         "--queue", "nope", "--output", bad, "--program", "solc")
    assert refused.returncode == 2 and refused.stdout == ""
    assert refused.stderr.strip().splitlines() == [
        "course jobscript: error: odyssey has no queue 'nope': debug-o, short-o, regular-o, "
        "priority-o, challenge-o, interactive-o"]
    assert not bad.exists()


def test_pjm_command_lines_run_here(tmp_path):
    """PJM cannot run here: its script runs as a plain bash script (the directives are comments;
    `module` is a no-op stand-in), so its environment and launch line are the ones executed, with
    this machine's build of the program instead of the A64FX one."""
    script = tmp_path / "c2.sh"
    text = jobscript.render(odyssey(threads=2, program=["solc", INPUT_03, "v2"]))
    script.write_text(text.replace("release-a64fx-fujitsu/bin", "release/bin"))
    done = run(["bash", "-c", f"module() {{ :; }}; export -f module; bash {shlex.quote(str(script))}"],
               timeout=120)
    assert done.returncode == 0, done.stderr
    assert "threads 2" in done.stdout and "208 iterations" in done.stdout, done.stdout


# --- a real Slurm ---------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    reason = local_slurm.unavailable()
    if reason:
        pytest.skip(reason)
    cluster = local_slurm.LocalSlurm(tmp_path_factory.mktemp("slurm"))
    cluster.start()
    yield cluster
    cluster.stop()


def submit(slurm, tmp_path, request: JobRequest, timeout: float = 180):
    request.cores_per_node = slurm.cpus
    script = tmp_path / f"{request.name or 'job'}.sh"
    script.write_text(jobscript.render(request))
    return slurm.run(script, cwd=tmp_path, timeout=timeout, env=env_with())


def test_openmp_job(slurm, tmp_path):
    threads = min(2, slurm.cpus)
    result = submit(slurm, tmp_path, JobRequest(program=["solc", INPUT_03], threads=threads,
                                                time="00:05:00"))
    assert result.ok, (result.state, result.exit_code, result.output)
    assert f"threads {threads}" in result.output and "208 iterations" in result.output


def test_mpi_job_on_two_ranks(slurm, tmp_path):
    lines = (ROOT / "examples/05_halo/input.dat").read_text().splitlines()
    (tmp_path / "in2.dat").write_text("\n".join(lines[:-1] + ["2 1 1   PX PY PZ"]) + "\n")
    result = submit(slurm, tmp_path, JobRequest(program=["fem3d_mpi_c", str(tmp_path / "in2.dat")],
                                                ranks_per_node=2, time="00:05:00"))
    assert result.ok, (result.state, result.exit_code, result.output)
    assert "ranks 2 (2 x 1 x 1 blocks)" in result.output
    assert re.search(r"CG: 16 iterations, .*\(converged\)", result.output), result.output
    error = float(re.search(r"max nodal error (\S+)", result.output).group(1))
    assert error < 1e-10


def test_a_failing_job_is_seen_as_failed(slurm, tmp_path):
    """The checks above can fail: a program that stops on bad input fails its job."""
    (tmp_path / "bad.dat").write_text("not a number\n")
    result = submit(slurm, tmp_path, JobRequest(program=["fem3d_mpi_c", str(tmp_path / "bad.dat")],
                                                ranks_per_node=2, time="00:05:00", name="bad"))
    assert not result.ok and result.state == "FAILED"
    assert "bad.dat" in result.output


def test_notebook_in_batch_with_parameters(slurm, tmp_path):
    out = tmp_path / "fem1d_b.ipynb"
    program = ["papermill", "notebooks/01_fem1d_b_solve_and_verify.ipynb", str(out),
               "-p", "N_ELEM", "40", "--log-level", "WARNING"]
    result = submit(slurm, tmp_path, JobRequest(program=program, time="00:10:00", name="batch"),
                    timeout=300)
    assert result.ok, result.output[-3000:]
    nb = nbformat.read(out, as_version=4)
    injected = [c for c in nb.cells if "injected-parameters" in c.metadata.get("tags", [])]
    assert injected and "N_ELEM = 40" in injected[0].source
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
              if o.get("output_type") == "error"]
    assert not errors and nb.metadata["papermill"]["exception"] is None


def test_ipyparallel_engines_as_a_job(slurm, tmp_path, monkeypatch):
    """The controller here, two MPI engines as one Slurm job; a %%px-style computation on them."""
    monkeypatch.setenv("IPP_NONINTERACTIVE", "1")
    cluster, connection = start_controller(tmp_path)
    try:
        request = engines_request(connection, ranks=2)
        request.cores_per_node = slurm.cpus
        script = tmp_path / "engines.sh"
        script.write_text(jobscript.render(request))
        job = slurm.submit(script, cwd=tmp_path, env=env_with())
        client = cluster.connect_client_sync()
        client.wait_for_engines(2, timeout=120)
        view = client[:]
        view.execute("from mpi4py import MPI; import os; comm = MPI.COMM_WORLD; "
                     "total = comm.allreduce(comm.rank + 1); size = comm.size; "
                     "job = os.environ.get('SLURM_JOB_ID')", block=True)
        assert view.pull(["total", "size", "job"], block=True) == [[3, 2, str(job)]] * 2
        client.shutdown(hub=False, block=True)
        slurm.wait(job, timeout=60)                 # the engines' job ends with them
    finally:
        cluster.stop_controller_sync()


def test_doctor_inside_a_job_counts_the_cores_of_the_job(slurm, tmp_path):
    """Affinity-aware: a job granted 1 of the node's cores sees 1 core, and records the job."""
    result = submit(slurm, tmp_path, JobRequest(program=["python", "-m", "course", "doctor",
                                                         "--json"], time="00:05:00",
                                                name="doctor"))
    report = json.loads(result.output[result.output.index("{"):])
    assert report["cores"] == 1, report["cores"]
    assert report["job"]["scheduler"] == "slurm"
    assert report["job"]["job_id"] == str(result.job_id)
    assert report["job"]["binding"]["OMP_NUM_THREADS"] == "1"


def test_every_benchmark_records_the_job(tmp_path):
    """A benchmark run inside a batch job records the scheduler, job, node and binding. It runs as
    a job's program does, in a process of its own: OpenMP started under OMP_PROC_BIND binds it."""
    out = tmp_path / "fem1d.json"
    job_env = env_with(SLURM_JOB_ID=4242, SLURMD_NODENAME="node17", OMP_PROC_BIND="close")
    run_course("bench", "fem1d", "--json", out, "--sizes", "20", "--langs", "numpy", "--repeat", "1",
               check=True, env=job_env)
    job = json.loads(out.read_text())["machine"]["job"]
    assert (job["scheduler"], job["job_id"], job["node"]) == ("slurm", "4242", "node17")
    assert job["binding"]["OMP_PROC_BIND"] == "close"
