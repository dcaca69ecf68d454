"""course.toolchain inside batch jobs: usable_cores() honours the affinity mask (a real one, set
with taskset) and Slurm's SLURM_CPUS_PER_TASK, whichever is smaller; job_context() records the
scheduler, job, node, binding and modules, which report() (and so every benchmark's `machine`)
carries under `job`, and which `doctor` and the book's table show only inside a job."""

from __future__ import annotations

import os
import platform
import shutil
import sys

import pytest

from conftest import env_with, run
from course import toolchain

JOB_VARIABLES = ("SLURM_JOB_ID", "PJM_JOBID", "SLURMD_NODENAME", "LOADEDMODULES",
                 "OMP_NUM_THREADS", "OMP_PLACES", "OMP_PROC_BIND", "SLURM_CPU_BIND",
                 "SLURM_CPUS_PER_TASK")


@pytest.fixture
def no_job(monkeypatch):
    """An environment outside any batch job (the tests may themselves run inside one)."""
    for name in JOB_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def mask_size() -> int:
    return len(os.sched_getaffinity(0))


def cores_in_subprocess(cpus: str, **env) -> int:
    """usable_cores() of a Python started with the affinity mask `cpus` (taskset -c)."""
    if shutil.which("taskset") is None:
        pytest.skip("taskset (util-linux) is not installed")
    result = run(["taskset", "-c", cpus, sys.executable, "-c",
                  "from course import toolchain; print(toolchain.usable_cores())"],
                 env=env_with(**env))
    assert result.returncode == 0, result.stderr
    return int(result.stdout)


def test_usable_cores_is_the_affinity_mask(no_job):
    assert toolchain.usable_cores() == mask_size()
    first = min(os.sched_getaffinity(0))
    assert cores_in_subprocess(str(first)) == 1


@pytest.fixture
def wide_mask():
    """This process on every CPU of the machine for the test: an OpenMP runtime started earlier in
    the same test worker under OMP_PLACES/OMP_PROC_BIND (another test's) binds the worker's thread
    to one CPU, which would skip the test instead of running it."""
    if (os.cpu_count() or 1) < 2:
        pytest.skip("needs a machine with at least 2 CPUs")
    saved = os.sched_getaffinity(0)
    try:
        os.sched_setaffinity(0, range(os.cpu_count()))
    except OSError:                          # a cpuset that grants fewer CPUs than the machine has
        pass
    if mask_size() < 2:
        os.sched_setaffinity(0, saved)
        pytest.skip("needs at least 2 CPUs in the affinity mask")
    yield
    os.sched_setaffinity(0, saved)


def test_slurm_cpus_per_task_caps_a_wider_mask(no_job, wide_mask):
    no_job.setenv("SLURM_CPUS_PER_TASK", "1")
    assert toolchain.usable_cores() == 1
    no_job.setenv("SLURM_CPUS_PER_TASK", str(mask_size() + 7))     # the mask is the smaller
    assert toolchain.usable_cores() == mask_size()
    for junk in ("", "0", "two", "-3"):
        no_job.setenv("SLURM_CPUS_PER_TASK", junk)
        assert toolchain.usable_cores() == mask_size(), junk


def test_mask_narrower_than_slurm_cpus_per_task_wins(no_job):
    first = min(os.sched_getaffinity(0))
    assert cores_in_subprocess(str(first), SLURM_CPUS_PER_TASK="4") == 1


def test_job_context_outside_a_job(no_job):
    context = toolchain.job_context()
    assert context == {"scheduler": None, "node": platform.node()}
    assert toolchain.job_summary(context) is None


def test_job_context_in_a_slurm_job(no_job):
    no_job.setenv("SLURM_JOB_ID", "4242")
    no_job.setenv("SLURMD_NODENAME", "cn017")
    no_job.setenv("OMP_NUM_THREADS", "8")
    no_job.setenv("OMP_PROC_BIND", "close")
    no_job.setenv("OMP_PLACES", "cores")
    no_job.setenv("SLURM_CPU_BIND", "quiet,cores")
    no_job.setenv("LOADEDMODULES", "gcc/12.2.0:openmpi/4.1.5")
    context = toolchain.job_context()
    assert context == {
        "scheduler": "slurm", "node": "cn017", "job_id": "4242",
        "binding": {"OMP_NUM_THREADS": "8", "OMP_PLACES": "cores", "OMP_PROC_BIND": "close",
                    "SLURM_CPU_BIND": "quiet,cores"},
        "modules": ["gcc/12.2.0", "openmpi/4.1.5"]}
    summary = toolchain.job_summary(context)
    assert summary.startswith("slurm job 4242 on cn017")
    assert "OMP_PROC_BIND=close" in summary and "openmpi/4.1.5" in summary


def test_job_context_in_a_pjm_job(no_job):
    no_job.setenv("PJM_JOBID", "123456")
    no_job.setenv("OMP_NUM_THREADS", "12")
    no_job.setenv("LOADEDMODULES", "fj/1.2.39:")
    context = toolchain.job_context()
    assert context == {"scheduler": "pjm", "node": platform.node(), "job_id": "123456",
                       "binding": {"OMP_NUM_THREADS": "12"}, "modules": ["fj/1.2.39"]}


@pytest.fixture
def quick_report(no_job):
    """toolchain.report() without its slow probes (compilers, OpenMP, MPI)."""
    no_job.setattr(toolchain, "_first_line", lambda cmd: f"{cmd[0]} 1.0")
    no_job.setattr(toolchain, "openmp_threads", lambda lang: 2)
    no_job.setattr(toolchain, "mpi4py_library", lambda: ("4.0.0", "Open MPI v4.1.4"))
    return no_job


def test_report_and_its_table_carry_the_job(quick_report):
    info = toolchain.report()
    assert info["job"] == {"scheduler": None, "node": platform.node()}
    assert "Batch job" not in toolchain.markdown_table(info)
    quick_report.setenv("SLURM_JOB_ID", "77")
    quick_report.setenv("OMP_PLACES", "cores")
    info = toolchain.report()
    assert info["job"]["scheduler"] == "slurm" and info["job"]["job_id"] == "77"
    row = [line for line in toolchain.markdown_table(info).splitlines() if "Batch job" in line]
    assert row == [f"| Batch job | slurm job 77 on {platform.node()}; OMP_PLACES=cores |"]


def test_doctor_shows_the_job_only_inside_one(quick_report, capsys):
    from course import cli

    args = cli.parser().parse_args(["doctor"])
    cli._doctor(args)
    assert "job" not in capsys.readouterr().out.split()
    quick_report.setenv("PJM_JOBID", "99")
    cli._doctor(args)
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("job ")]
    assert len(lines) == 1 and lines[0].split(None, 1)[1].startswith("pjm job 99 on ")
