"""course.cluster.check, the grader of exercise 07_cluster: a learner's job script read back and
checked against its target run. Right scripts in many styles (the generator's own among them) pass;
each typical mistake is rejected with a message that names the directive or line, what the run
needs and what the script has."""

from __future__ import annotations

import re

import pytest

from course.cluster import check as ck
from course.cluster import jobscript, local_slurm
from course.cluster.jobscript import JobRequest

HYBRID = dict(program=["fem3d_mpi_c", "cube_8.dat"], nodes=2, ranks_per_node=4, threads=12,
              time="00:20:00")
SLURM = JobRequest(**HYBRID, queue="cpu", cores_per_node=48)
PJM = JobRequest(**HYBRID, scheduler="pjm", system="odyssey", queue="debug-o", group="gz01")
OPENMP = JobRequest(program=["solc", "examples/04_openmp/INPUT.DAT"], threads=2, time="00:05:00",
                    cores_per_node=2)

SLURM_SCRIPT = """\
#!/bin/bash
#SBATCH --job-name=fem3d-hybrid
#SBATCH --partition=cpu
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=4        # MPI ranks per node
#SBATCH --cpus-per-task=12         # one core per OpenMP thread
#SBATCH --time=00:20:00

set -e
export OMP_NUM_THREADS=12
export OMP_PLACES=cores
export OMP_PROC_BIND=close
mpiexec -n 8 ./build/native/release/bin/fem3d_mpi_c cube_8.dat
"""

PJM_SCRIPT = """\
#!/bin/bash
#PJM -L rscgrp=debug-o
#PJM -L node=2
#PJM --mpi proc=8
#PJM --omp thread=12
#PJM -L elapse=00:20:00
#PJM -g gz01
module load fj
export OMP_NUM_THREADS=12
export OMP_PROC_BIND=close
mpiexec -n 8 ./build/native/release/bin/fem3d_mpi_c cube_8.dat
"""


# --- right scripts pass ---------------------------------------------------------------------------

GENERATED = {
    "generic slurm, mpiexec": SLURM,
    "generic slurm, srun": JobRequest(**HYBRID, queue="cpu", cores_per_node=48, launcher="srun"),
    "generic slurm, account": JobRequest(**HYBRID, group="proj"),
    "odyssey hybrid": PJM,
    "odyssey openmp (c12.sh)": JobRequest(program=["solc", "INPUT.DAT"], scheduler="pjm",
                                          system="odyssey", threads=12, time="00:15:00",
                                          group="gx12", name="c12"),
    "odyssey regular-o": JobRequest(program=["fem3d_mpi_c", "x.dat"], scheduler="pjm",
                                    system="odyssey", nodes=200, ranks_per_node=4, threads=12,
                                    time="12:00:00", queue="regular-o", group="g"),
    "obcx pure mpi": JobRequest(program=["fem3d_mpi_c", "x.dat"], scheduler="pjm", system="obcx",
                                nodes=2, ranks_per_node=56, group="g"),
    "generic pjm": JobRequest(**HYBRID, scheduler="pjm"),
    "local openmp": OPENMP,
    "python program": JobRequest(program=["python", "-c", "print(1)"]),
}


@pytest.mark.parametrize("name", GENERATED)
def test_the_generators_own_script_passes(name):
    target = GENERATED[name]
    assert ck.problems(jobscript.render(target), target) == []


@pytest.mark.parametrize("name", GENERATED)
def test_the_generators_script_cut_short_fails(name):
    """The check can fail on any of them: drop the launch line, or (where threads matter) the
    OMP_NUM_THREADS line."""
    target = GENERATED[name]
    lines = jobscript.render(target).rstrip("\n").splitlines()
    found = ck.problems("\n".join(lines[:-1]), target)
    assert any("the script never runs" in p for p in found), found
    if target.threads > 1:
        found = ck.problems("\n".join(ln for ln in lines if "OMP_NUM_THREADS" not in ln), target)
        assert any("OMP_NUM_THREADS is not exported" in p for p in found), found


STYLES = {
    "the plain one": (SLURM_SCRIPT, SLURM),
    "short options, separate and joined values, another order": ("""\
#!/bin/bash
# a comment
#SBATCH -t 20
#SBATCH -p cpu -N 2
#SBATCH -c12
#SBATCH --ntasks-per-node 4
#SBATCH -J hybrid -o out-%j.txt
#SBATCH --mem=0 --exclusive

module purge
module load gcc openmpi
set -euo pipefail
echo "starting on $(hostname)"
export OMP_NUM_THREADS=$SLURM_CPUS_PER_TASK OMP_PROC_BIND=spread
mpirun -np $SLURM_NTASKS fem3d_mpi_c cube_8.dat > log.txt 2>&1
""", SLURM),
    "ntasks for the whole job, time in D-HH:MM:SS, srun": ("""\
#!/bin/sh
#SBATCH --nodes=2 --ntasks=8 --cpus-per-task=12 --time=0-00:20:00 --partition=cpu
OMP_NUM_THREADS=12
export OMP_NUM_THREADS
srun --cpu-bind=cores ./fem3d_mpi_c ./cube_8.dat
""", SLURM),
    "Open MPI's binding flags instead of OMP_PROC_BIND": (SLURM_SCRIPT.replace(
        "export OMP_PLACES=cores\nexport OMP_PROC_BIND=close\nmpiexec -n 8",
        "mpiexec --map-by ppr:4:node:PE=12 --bind-to core -n 8"), SLURM),
    "the PJM one": (PJM_SCRIPT, PJM),
    "PJM: resources in one -L, quoted, ${PJM_MPI_PROC}, numbers as PJM writes them": ("""\
#!/bin/sh
#PJM -N "hybrid"
#PJM -L "rscgrp=debug-o,node=2,elapse=0:20:00"
#PJM --mpi "proc=8"
#PJM --omp thread=12
#PJM -g gz01 -j -o out.lst
set -e
module load fj
export OMP_NUM_THREADS=12 OMP_PLACES=cores
export XOS_MMM_L_PAGING_POLICY=demand:demand:demand
mpiexec -n ${PJM_MPI_PROC} /home/me/pfem/build/native/release/bin/fem3d_mpi_c cube_8.dat
""", PJM),
    "PJM elapse in minutes:seconds": (PJM_SCRIPT.replace("elapse=00:20:00", "elapse=20:00"),
                                      PJM),
    "OpenMP on the local Slurm, absolute paths, inline environment": ("""\
#!/bin/bash
#SBATCH -c 2
#SBATCH -t 00:05:00
OMP_NUM_THREADS=2 /work/pfem/build/native/release/bin/solc /work/pfem/examples/04_openmp/INPUT.DAT
""", OPENMP),
}


@pytest.mark.parametrize("style", STYLES)
def test_a_right_script_in_any_style_passes(style):
    text, target = STYLES[style]
    assert ck.problems(text, target) == []
    ck.check_script(text, target)                   # no exception


# --- wrong scripts fail, each with its message ----------------------------------------------------

def edit(text: str, old: str, new: str) -> str:
    assert old in text, old
    return text.replace(old, new)


WRONG = {
    "OMP_NUM_THREADS not the threads": (
        edit(SLURM_SCRIPT, "OMP_NUM_THREADS=12", "OMP_NUM_THREADS=4"), SLURM,
        ["OMP_NUM_THREADS: the run needs 12 thread(s) per rank, the script exports 4"]),
    "OMP_NUM_THREADS set but not exported": (
        edit(SLURM_SCRIPT, "export OMP_NUM_THREADS=12", "OMP_NUM_THREADS=12"), SLURM,
        ["OMP_NUM_THREADS is not exported"]),
    "no --cpus-per-task": (
        edit(SLURM_SCRIPT, "#SBATCH --cpus-per-task=12", "#"), SLURM,
        ["#SBATCH --cpus-per-task is missing: each task then gets 1 core"]),
    "--ntasks for the tasks per node": (
        edit(SLURM_SCRIPT, "--ntasks-per-node=4", "--ntasks=4"), SLURM,
        ["#SBATCH --ntasks-per-node: the run needs 4 rank(s) per node, 8 in all; found "
         "--ntasks=4, which is the number of tasks of the whole job"]),
    "--ntasks-per-node for all the tasks": (
        edit(SLURM_SCRIPT, "--ntasks-per-node=4", "--ntasks-per-node=8"), SLURM,
        ["found --ntasks-per-node=8, 16 in all",
         "8 rank(s) x 12 thread(s) = 96 per node, more than the 48 cores"]),
    "mpiexec -n of one node's ranks": (
        edit(SLURM_SCRIPT, "mpiexec -n 8", "mpiexec -n 4"), SLURM,
        ["mpiexec: the run needs 8 rank(s) in all (4 per node x 2 node(s)), the script starts "
         "4 ranks (line 13)"]),
    "mpiexec without a count": (
        edit(SLURM_SCRIPT, "mpiexec -n 8", "mpiexec"), SLURM,
        ["mpiexec without a rank count: the run needs `mpiexec -n 8`"]),
    "an MPI program without mpiexec": (
        edit(SLURM_SCRIPT, "mpiexec -n 8 ", ""), SLURM,
        ["is an MPI run of 8 rank(s): start it with `mpiexec -n 8 ...` (or srun)"]),
    "no binding in a hybrid run": (
        edit(SLURM_SCRIPT, "export OMP_PLACES=cores\nexport OMP_PROC_BIND=close\n", ""), SLURM,
        ["needs its threads bound to cores"]),
    "the wrong input": (
        edit(SLURM_SCRIPT, "cube_8.dat", "cube_4.dat"), SLURM,
        ["fem3d_mpi_c must run with the arguments `cube_8.dat`, found `cube_4.dat`"]),
    "another program": (
        edit(SLURM_SCRIPT, "fem3d_mpi_c", "fem3d_mpi_f"), SLURM,
        ["the script never runs fem3d_mpi_c"]),
    "a time limit not the run's": (
        edit(SLURM_SCRIPT, "--time=00:20:00", "--time=30"), SLURM,
        ["#SBATCH --time: the run needs 00:20:00, found 00:30:00"]),
    "the wrong partition": (
        edit(SLURM_SCRIPT, "--partition=cpu", "--partition=gpu"), SLURM,
        ["#SBATCH --partition: the run goes to the queue 'cpu', found 'gpu'"]),
    "a directive after the first command": (
        edit(SLURM_SCRIPT, "#SBATCH --time=00:20:00\n\nset -e\n",
             "set -e\n#SBATCH --time=00:20:00\n"),
        SLURM, ["sbatch stops reading #SBATCH lines at the first command (line 7)",
                "#SBATCH --time is missing"]),
    "a misspelt option": (
        edit(SLURM_SCRIPT, "--cpus-per-task=12", "--cpu-per-task=12"), SLURM,
        ["`--cpu-per-task` is not an sbatch option (did you mean --cpus-per-task?)"]),
    "no #! line": (SLURM_SCRIPT.split("\n", 1)[1], SLURM, ["the first line must name the shell"]),
    "a PJM script for a Slurm run": (PJM_SCRIPT, SLURM, ["this is a pjm script"]),
    "no directives at all": ("#!/bin/bash\nmpiexec -n 8 fem3d_mpi_c cube_8.dat\n", SLURM,
                             ["no #SBATCH lines"]),
    "PJM: Oakbridge-CX's queue name on Odyssey": (
        edit(PJM_SCRIPT, "rscgrp=debug-o", "rscgrp=debug"), PJM,
        ["#PJM -L rscgrp: the run goes to the queue 'debug-o', found 'debug' (odyssey has no "
         "queue 'debug')", "odyssey has no queue 'debug': debug-o, short-o"]),
    "PJM: elapse over the queue's limit": (
        edit(PJM_SCRIPT, "elapse=00:20:00", "elapse=01:00:00"), PJM,
        ["#PJM -L elapse: the run needs 00:20:00, found 01:00:00",
         "time 01:00:00 is over the limit 00:30:00 of queue debug-o at 2 node(s)"]),
    "PJM: no group": (
        edit(PJM_SCRIPT, "#PJM -g gz01\n", ""), PJM,
        ["#PJM -g: the run is paid by the group 'gz01'", "needs --group"]),
    "PJM: no --mpi proc": (
        edit(PJM_SCRIPT, "#PJM --mpi proc=8\n", ""), PJM,
        ["#PJM --mpi proc: the run needs 8 MPI processes in all (4 per node x 2 node(s)), "
         "found none"]),
    "PJM: --omp thread not the threads": (
        edit(PJM_SCRIPT, "--omp thread=12", "--omp thread=48"), PJM,
        ["#PJM --omp thread: the run needs 12 thread(s) per process, found 48",
         "4 rank(s) x 48 thread(s) = 192 per node, more than the 48 cores"]),
    "PJM: srun": (edit(PJM_SCRIPT, "mpiexec -n 8", "srun"), PJM,
                  ["srun launches only under Slurm"]),
    "PJM: an unknown resource": (edit(PJM_SCRIPT, "-L node=2", "-L nodes=2"), PJM,
                                 ["`-L nodes=` is not a resource of PJM (did you mean -L node=?)",
                                  "#PJM -L node: the run needs 2 node(s), found none"]),
    "OpenMP: run with 1 thread": (
        STYLES["OpenMP on the local Slurm, absolute paths, inline environment"][0].replace(
            "OMP_NUM_THREADS=2", "OMP_NUM_THREADS=1"), OPENMP,
        ["OMP_NUM_THREADS: the run needs 2 thread(s) per rank, the script exports 1"]),
    "OpenMP: two copies of the program": (
        edit(STYLES["OpenMP on the local Slurm, absolute paths, inline environment"][0],
             "OMP_NUM_THREADS=2 /work", "OMP_NUM_THREADS=2 srun -n 2 /work"), OPENMP,
        ["the script starts 2 copies of the program (it is OpenMP only)"]),
    "OpenMP: no thread count at all": (
        "#!/bin/bash\n#SBATCH -t 5\n./solc examples/04_openmp/INPUT.DAT\n", OPENMP,
        ["#SBATCH --cpus-per-task is missing", "OMP_NUM_THREADS is not exported"]),
    "unbalanced quotes": ('#!/bin/bash\n#SBATCH -J "x\n' + SLURM_SCRIPT.split("\n", 1)[1],
                          SLURM, ["line 2: cannot read"]),
}


@pytest.mark.parametrize("case", WRONG)
def test_a_wrong_script_is_rejected_with_its_message(case):
    text, target, phrases = WRONG[case]
    found = ck.problems(text, target)
    for phrase in phrases:
        assert any(phrase in p for p in found), (phrase, found)
    assert all("\n" not in p for p in found), found
    with pytest.raises(ck.ScriptError) as err:
        ck.check_script(text, target, "my_script")
    assert str(err.value).startswith(f"my_script has {len(found)} problem(s):")


def test_numbers_of_the_schedulers():
    assert [ck.slurm_seconds(t) for t in ("20", "20:30", "1:00:00", "2-0", "1-2:3", "0-0:0:5")] \
        == [1200, 1230, 3600, 172800, 93780, 5]
    assert [ck.pjm_seconds(t) for t in ("900", "15:00", "0:15:00", "24:00:00")] \
        == [900, 900, 900, 86400]
    for bad in ("x", "1:2:3:4", "-5"):
        with pytest.raises(ValueError):
            ck.slurm_seconds(bad)


def test_shell_syntax():
    assert ck.shell_syntax(SLURM_SCRIPT) is None
    assert "syntax error" in ck.shell_syntax(SLURM_SCRIPT + "if true; then\n")


# --- which queue ----------------------------------------------------------------------------------

@pytest.mark.parametrize("nodes, elapse, queue, runs_in", [
    (200, "12:00:00", "regular-o", "medium-o"),
    (4, "00:15:00", "debug-o", "debug-o"),
    (144, "00:30:00", "debug-o", "debug-o"),
    (145, "00:30:00", "regular-o", "medium-o"),
    (1, "00:30:01", "short-o", "short-o"),
    (73, "01:00:00", "regular-o", "small-o"),
    (1153, "24:00:00", "regular-o", "x-large-o"),
    (1153, "24:00:01", None, None),
    (2305, "00:10:00", None, None),
])
def test_the_queue_that_takes_a_job(nodes, elapse, queue, runs_in):
    got = ck.first_queue("odyssey", nodes, elapse)
    assert got == queue
    if got:
        assert ck.routed_queue("odyssey", got, nodes) == runs_in
        request = JobRequest(program=["fem3d_mpi_c"], scheduler="pjm", system="odyssey",
                             nodes=nodes, time=elapse, queue=got, group="g")
        jobscript.check(request)                # the generator's rules agree


def test_the_graders_answers_refuse_while_a_learner_is_graded():
    with ck.without_answers():
        with pytest.raises(AssertionError, match="must not call"):
            ck.first_queue("odyssey", 1, "00:10:00")
    assert ck.first_queue("odyssey", 1, "00:10:00") == "debug-o"


# --- on a real Slurm ------------------------------------------------------------------------------

LOCAL = f"""\
#!/bin/bash
#SBATCH -c 2 -t 5
cd {ck.COURSE}
export OMP_NUM_THREADS=2
./build/native/release/bin/solc examples/04_openmp/INPUT.DAT
"""


def test_local_job_runs_or_says_why_not():
    """Where Slurm runs, the OpenMP job completes with 2 threads; a script that follows the rules
    but never changes to the checkout fails there (its relative path is wrong in the job's
    folder). Where it cannot run, the rules alone grade, and the message says so."""
    reason = local_slurm.unavailable()
    message = ck.check_local_job(LOCAL, OPENMP, "slurm_openmp")
    if reason:
        assert "graded by the rules alone" in message and reason in message
        return
    assert "completed: threads 2, 208 iterations" in message
    no_cd = LOCAL.replace(f"cd {ck.COURSE}\n", "")
    assert ck.problems(no_cd, OPENMP) == []
    with pytest.raises(ck.ScriptError, match=re.escape("its job ended FAILED")):
        ck.check_local_job(no_cd, OPENMP, "slurm_openmp")
