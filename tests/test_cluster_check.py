"""course.grading.cluster, the grader of exercise 07_cluster: a learner's job script read back and
checked against its target run. Right scripts in many styles (the generator's own among them) pass;
each typical mistake is rejected with a message that names the directive or line, what the run
needs and what the script has."""

from __future__ import annotations

import re

import pytest

from course.grading import cluster as ck
from course.cluster import jobscript, local_slurm
from course.cluster.jobscript import JobRequest

HYBRID = dict(program=["fem3d_mpi_c", "cube_8.dat"], nodes=2, ranks_per_node=4, threads=12,
              time="00:20:00")
SLURM = JobRequest(**HYBRID, queue="cpu", cores_per_node=48)
PJM = JobRequest(**HYBRID, scheduler="pjm", system="odyssey", queue="debug-o", group="gz01")
OPENMP = JobRequest(program=["solc", "examples/03_openmp/INPUT.DAT"], threads=2, time="00:05:00",
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
mpiexec -n 8 --map-by ppr:4:node:PE=12 --bind-to core ./build/native/release/bin/fem3d_mpi_c cube_8.dat
"""
# Open MPI's launch of the run: 4 ranks per node, each bound to 12 cores of its own
OPEN_MPI = "mpiexec -n 8 --map-by ppr:4:node:PE=12 --bind-to core"
# the same script launched by a bare `mpiexec -n 8`: wrong, as Open MPI binds each rank to a
# socket by default (more than 2 ranks), and two ranks on a socket then run their threads on the
# same cores whatever OMP_PROC_BIND says (the wrong cases of the launcher edit this one)
BARE = SLURM_SCRIPT.replace(OPEN_MPI, "mpiexec -n 8")
NO_CORES = ("gives a rank no cores of its own (no PE=12 in --map-by, no --cpus-per-rank 12): "
            "Open MPI binds each rank to a socket by default, and two ranks on a socket then run "
            "their 12 threads on the same cores of it; give each rank its cores with --map-by "
            "ppr:4:node:PE=12 --bind-to core")

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
mpiexec -n 8 ./build/native/release-a64fx-fujitsu/bin/fem3d_mpi_c cube_8.dat
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
mpirun -np $SLURM_NTASKS --map-by ppr:4:node:PE=$SLURM_CPUS_PER_TASK --bind-to core \\
    fem3d_mpi_c cube_8.dat > log.txt 2>&1
""", SLURM),
    "ntasks for the whole job, time in D-HH:MM:SS, srun": ("""\
#!/bin/sh
#SBATCH --nodes=2 --ntasks=8 --cpus-per-task=12 --time=0-00:20:00 --partition=cpu
OMP_NUM_THREADS=12
export OMP_NUM_THREADS
srun --cpu-bind=cores ./fem3d_mpi_c ./cube_8.dat
""", SLURM),
    "Open MPI's binding flags instead of OMP_PROC_BIND": (BARE.replace(
        "export OMP_PLACES=cores\nexport OMP_PROC_BIND=close\nmpiexec -n 8",
        "mpiexec --map-by ppr:4:node:PE=12 --bind-to core -n 8"), SLURM),
    "Open MPI: ranks per node and cores per rank by --map-by ppr, no -n, no OpenMP binding": (
        BARE.replace("export OMP_PLACES=cores\nexport OMP_PROC_BIND=close\nmpiexec -n 8",
                     "mpiexec --map-by ppr:4:node:PE=12 --bind-to core"), SLURM),
    "Open MPI: -npernode and --cpus-per-rank, an OpenMP binding list": (BARE.replace(
        "OMP_PROC_BIND=close\nmpiexec -n 8",
        "OMP_PROC_BIND=spread,close\nmpirun -np 8 -npernode 4 --cpus-per-rank 12 --bind-to core"),
        SLURM),
    "Open MPI: --cpus-per-proc and the default mapping, OMP_PLACES alone": (BARE.replace(
        "export OMP_PROC_BIND=close\nmpiexec -n 8", "mpiexec -n 8 --cpus-per-proc 12"), SLURM),
    "Open MPI: the cores of a rank by --map-by socket:PE=, mapped by socket": (BARE.replace(
        "mpiexec -n 8", "mpiexec -n 8 --map-by socket:PE=12 --bind-to core"), SLURM),
    "MPICH: -ppn and -bind-to core:T": (BARE.replace(
        "mpiexec -n 8", "mpiexec -n 8 -ppn 4 -bind-to core:12"), SLURM),
    "srun: the tasks per node and the cores of a task on its line, OMP_PLACES alone": (
        BARE.replace("export OMP_PROC_BIND=close\nmpiexec -n 8",
                     "srun --ntasks-per-node=4 -c 12 --cpu-bind=verbose,cores"), SLURM),
    "the PJM one": (PJM_SCRIPT, PJM),
    "PJM: the A64FX build on the PATH, a module's version, Lmod's ml": (PJM_SCRIPT.replace(
        "module load fj\n", "ml fj/4.10.0\nexport PATH=$HOME/pfem/build/native/"
        "release-a64fx-fujitsu/bin:$PATH\n").replace(
        "./build/native/release-a64fx-fujitsu/bin/fem3d_mpi_c", "fem3d_mpi_c"), PJM),
    "PJM: cd to the build folder, the module swapped to a version": (
        PJM_SCRIPT.replace("module load fj\n", "module load fj\nmodule swap fj fj/1.2.38\n"
                           "cd build/native/release-a64fx-fujitsu/bin\n").replace(
        "mpiexec -n 8 ./build/native/release-a64fx-fujitsu/bin/fem3d_mpi_c cube_8.dat",
        "mpiexec -n 8 ./fem3d_mpi_c ../../../../cube_8.dat"), PJM),
    "PJM: the module loaded on the launch line, a continued line": (PJM_SCRIPT.replace(
        "module load fj\n", "").replace("mpiexec -n 8", "module purge && module load fj && \\\n"
                                         "    mpiexec -n 8"), PJM),
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
mpiexec -n ${PJM_MPI_PROC} /home/me/pfem/build/native/release-a64fx-fujitsu/bin/fem3d_mpi_c \\
    cube_8.dat
""", PJM),
    "PJM elapse in minutes:seconds": (PJM_SCRIPT.replace("elapse=00:20:00", "elapse=20:00"),
                                      PJM),
    "OpenMP on the local Slurm, absolute paths, inline environment": ("""\
#!/bin/bash
#SBATCH -c 2
#SBATCH -t 00:05:00
OMP_NUM_THREADS=2 /work/pfem/build/native/release/bin/solc /work/pfem/examples/03_openmp/INPUT.DAT
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
        edit(BARE, "mpiexec -n 8", "mpiexec"), SLURM,
        ["mpiexec without a rank count: the run needs `mpiexec -n 8`"]),
    "an MPI program without mpiexec": (
        edit(BARE, "mpiexec -n 8 ", ""), SLURM,
        ["is an MPI run of 8 rank(s): start it with `mpiexec -n 8 ...` (or srun)"]),
    "binding switched off: OMP_PROC_BIND=false": (
        edit(BARE, "OMP_PROC_BIND=close", "OMP_PROC_BIND=false"), SLURM,
        ["OMP_PROC_BIND=false switches the threads' binding off (OMP_PLACES is then ignored), "
         "and mpiexec (line 13) is given no binding of its own: nothing binds the 12 threads of "
         "a rank to cores; give each rank its 12 cores (--map-by ppr:4:node:PE=12 --bind-to "
         "core), and export OMP_PROC_BIND=close and OMP_PLACES=cores to bind each thread to one "
         "of them"]),
    "an OMP_PROC_BIND that OpenMP does not know": (
        edit(BARE, "OMP_PROC_BIND=close", "OMP_PROC_BIND=yes"), SLURM,
        ["OMP_PROC_BIND=yes is not a setting the OpenMP runtime knows: it ignores it, and binds "
         "nothing when mpiexec starts the program (line 13)"]),
    "an OMP_PLACES that OpenMP does not know": (
        edit(BARE, "export OMP_PLACES=cores\nexport OMP_PROC_BIND=close\n",
             "export OMP_PLACES=core\n"), SLURM, ["OMP_PLACES=core is not a setting"]),
    "binding switched off: --bind-to none": (
        edit(BARE, "export OMP_PLACES=cores\nexport OMP_PROC_BIND=close\nmpiexec -n 8",
             "mpiexec -n 8 --bind-to none"), SLURM,
        ["mpiexec --bind-to none (line 11) switches the ranks' binding off: nothing binds the 12 "
         "threads of a rank to cores"]),
    "binding switched off: srun --cpu-bind=none": (
        edit(BARE, "export OMP_PLACES=cores\nexport OMP_PROC_BIND=close\nmpiexec -n 8",
             "srun --cpu-bind=none"), SLURM,
        ["srun --cpu-bind=none (line 11) switches the ranks' binding off"]),
    "--bind-to none under OpenMP binding: every rank's threads on the same cores": (
        edit(BARE, "mpiexec -n 8", "mpiexec --bind-to=none -n 8"), SLURM,
        ["mpiexec --bind-to=none (line 13) leaves every rank the whole node, and "
         "OMP_PROC_BIND=close then binds the threads of every rank of a node to the same first "
         "cores"]),
    "--bind-to core without the cores of a rank": (
        edit(BARE, "export OMP_PLACES=cores\nexport OMP_PROC_BIND=close\nmpiexec -n 8",
             "mpiexec -n 8 --bind-to core"), SLURM,
        ["mpiexec --bind-to core (line 11) binds each rank to one core, so its 12 threads share "
         "it: give each rank 12 cores, --map-by ppr:4:node:PE=12"]),
    "Open MPI: a bare mpiexec -n 8 under OpenMP binding alone": (
        BARE, SLURM, [f"mpiexec (line 13) {NO_CORES}"]),
    "Open MPI: mpirun -np $SLURM_NTASKS under OMP_PROC_BIND=spread alone": (
        edit(STYLES["short options, separate and joined values, another order"][0],
             " --map-by ppr:4:node:PE=$SLURM_CPUS_PER_TASK --bind-to core \\\n   ", ""), SLURM,
        [f"mpirun (line 15) {NO_CORES}"]),
    "Open MPI: OMP_PLACES alone, mpiexec -n 8": (
        edit(BARE, "export OMP_PROC_BIND=close\n", ""), SLURM, [f"mpiexec (line 12) {NO_CORES}"]),
    "Open MPI: -npernode 4 places the ranks but gives them no cores": (
        edit(BARE, "mpiexec -n 8", "mpirun -npernode 4"), SLURM, [f"mpirun (line 13) {NO_CORES}"]),
    "Open MPI: --map-by ppr without PE=": (
        edit(BARE, "mpiexec -n 8", "mpiexec -n 8 --map-by ppr:4:node"), SLURM,
        [f"mpiexec (line 13) {NO_CORES}"]),
    "Open MPI: --bind-to socket, the ranks of a socket on its same cores": (
        edit(BARE, "mpiexec -n 8", "mpiexec -n 8 --bind-to socket"), SLURM,
        ["mpiexec --bind-to socket (line 13) gives a rank no cores of its own (no PE=12 in "
         "--map-by, no --cpus-per-rank 12): --bind-to socket binds each rank to a whole socket, "
         "and two ranks on a socket then run their 12 threads on the same cores of it; give "
         "each rank its cores with --map-by ppr:4:node:PE=12 --bind-to core"]),
    "Open MPI: --bind-to socket, no OpenMP binding": (
        edit(BARE, "export OMP_PLACES=cores\nexport OMP_PROC_BIND=close\nmpiexec -n 8",
             "mpiexec -n 8 --bind-to socket"), SLURM,
        ["mpiexec --bind-to socket (line 11) gives a rank no cores of its own"]),
    "Open MPI: 8 ranks of 12 cores on a 48-core node": (
        edit(SLURM_SCRIPT, "--map-by ppr:4:node:PE=12", "--map-by ppr:8:node:PE=12"),
        SLURM, ["mpiexec --map-by ppr:8:node:PE=12 (line 13) puts 8 rank(s) on each node, 8 x 12 "
                "= 96 cores, more than the 48 of a node; the run needs 4 rank(s) per node x 12 "
                "thread(s)"]),
    "Open MPI: the cores of a rank not its threads": (
        edit(BARE, "mpiexec -n 8", "mpiexec --map-by slot:PE=6 -n 8"), SLURM,
        ["mpiexec --map-by slot:PE=6 (line 13) gives each rank 6 core(s), but a rank runs 12 "
         "thread(s)"]),
    "Open MPI: all the ranks on each node by -npernode": (
        edit(BARE, "mpiexec -n 8", "mpiexec -npernode 8"), SLURM,
        ["mpiexec -npernode 8 (line 13) puts 8 rank(s) on each node, 8 x 12 = 96 cores",
         "the script starts 16 ranks"]),
    "srun: the tasks per node of the whole job": (
        edit(BARE, "mpiexec -n 8", "srun --ntasks-per-node=8"), SLURM,
        ["srun --ntasks-per-node=8 (line 13) puts 8 rank(s) on each node"]),
    "the A64FX build on a generic cluster": (
        edit(SLURM_SCRIPT, "release/bin", "release-a64fx-fujitsu/bin"), SLURM,
        ["`./build/native/release-a64fx-fujitsu/bin/fem3d_mpi_c` (line 13) is the build made with "
         "cmake/a64fx-fujitsu.cmake, for another processor"]),
    "no binding in a hybrid run": (
        edit(BARE, "export OMP_PLACES=cores\nexport OMP_PROC_BIND=close\n", ""), SLURM,
        ["a hybrid run (12 threads per rank) needs its threads bound to cores: give each rank its "
         "12 cores (--map-by ppr:4:node:PE=12 --bind-to core)"]),
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
    "PJM: the x86-64 build on Odyssey's A64FX nodes": (
        edit(PJM_SCRIPT, "release-a64fx-fujitsu/bin", "release/bin"), PJM,
        ["`./build/native/release/bin/fem3d_mpi_c` (line 11) is the build in build/native/"
         "release, made for the machine that built it (x86-64), which Wisteria/BDEC-01 Odyssey's "
         "A64FX nodes cannot run: start the A64FX build, "
         "`./build/native/release-a64fx-fujitsu/bin/fem3d_mpi_c`"]),
    "PJM: the x86-64 build on the PATH": (
        edit(edit(PJM_SCRIPT, "./build/native/release-a64fx-fujitsu/bin/fem3d_mpi_c",
                  "fem3d_mpi_c"), "module load fj\n",
             "module load fj\nexport PATH=/home/me/pfem/build/native/release/bin:$PATH\n"), PJM,
        ["`fem3d_mpi_c` (line 12) is the build in build/native/release"]),
    "PJM: a program by its name alone, no build on the PATH": (
        edit(PJM_SCRIPT, "./build/native/release-a64fx-fujitsu/bin/fem3d_mpi_c", "fem3d_mpi_c"),
        PJM, ["`fem3d_mpi_c` (line 11): which build of fem3d_mpi_c is this?"]),
    "PJM: no module load fj": (
        edit(PJM_SCRIPT, "module load fj\n", "module load gcc\n"), PJM,
        ["`module load fj` is missing before fem3d_mpi_c starts (line 11)"]),
    "PJM: module load fj after the launch": (
        edit(PJM_SCRIPT, "module load fj\n", "") + "module load fj\n", PJM,
        ["`module load fj` is missing before fem3d_mpi_c starts (line 10)"]),
    "PJM: module load fj swapped out": (
        edit(PJM_SCRIPT, "module load fj\n", "module load fj\nmodule swap fj gcc\n"), PJM,
        ["`module load fj` is missing"]),
    "PJM: module load fj undone": (
        edit(PJM_SCRIPT, "module load fj\n", "module load fj\nmodule purge\n"), PJM,
        ["`module load fj` is missing"]),
    "PJM: OMP_PROC_BIND=false": (
        edit(PJM_SCRIPT, "OMP_PROC_BIND=close", "OMP_PROC_BIND=false"), PJM,
        ["OMP_PROC_BIND=false switches the threads' binding off, and mpiexec (line 11) is given "
         "no binding of its own: nothing binds the 12 threads of a rank to cores; export "
         "OMP_PROC_BIND=close and OMP_PLACES=cores"]),
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
        "#!/bin/bash\n#SBATCH -t 5\n./solc examples/03_openmp/INPUT.DAT\n", OPENMP,
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


def test_only_a_hybrid_open_mpi_launch_under_slurm_must_be_given_the_cores_of_a_rank():
    """Open MPI binds each rank to a socket by default (more than 2 ranks), so a hybrid mpiexec
    under Slurm needs PE=T or --cpus-per-rank T; PJM's mpiexec (its --mpi proc and --omp thread
    place the ranks), srun with -c T, and a pure MPI run do not."""
    assert any(NO_CORES in p for p in ck.problems(BARE, SLURM))
    assert ck.problems(PJM_SCRIPT, PJM) == []                  # the same bare line under PJM
    generic_pjm = GENERATED["generic pjm"]
    assert "mpiexec -n 8 " in jobscript.render(generic_pjm)
    assert ck.problems(jobscript.render(generic_pjm), generic_pjm) == []
    srun = edit(BARE, "mpiexec -n 8", "srun -c 12 --cpu-bind=cores")
    assert ck.problems(srun, SLURM) == []
    pure = JobRequest(program=["fem3d_mpi_c", "cube_8.dat"], nodes=2, ranks_per_node=48,
                      time="00:20:00", queue="cpu", cores_per_node=48)
    text = edit(edit(edit(BARE, "--ntasks-per-node=4", "--ntasks-per-node=48"),
                     "#SBATCH --cpus-per-task=12         # one core per OpenMP thread\n", ""),
                "OMP_NUM_THREADS=12", "OMP_NUM_THREADS=1").replace("mpiexec -n 8", "mpiexec -n 96")
    assert ck.problems(text, pure) == []
    for right in ("--map-by ppr:4:node:PE=12 --bind-to core", "--cpus-per-rank 12",
                  "-npernode 4 --cpus-per-proc=12", "--map-by numa:PE=12"):
        assert ck.problems(edit(BARE, "mpiexec -n 8", f"mpiexec -n 8 {right}"), SLURM) == [], right


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


def _queue_by_the_rules(nodes, elapse):
    """A learner's answer to task 4 that asks the generator's rule check which queue takes the
    job: right answers, none of them its own."""
    for name in ("debug-o", "short-o", "regular-o"):
        try:
            jobscript.check(JobRequest(program=["x"], scheduler="pjm", system="odyssey",
                                       nodes=nodes, time=elapse, queue=name, group="g"))
        except jobscript.JobScriptError:
            continue
        return name, ck.routed_queue("odyssey", name, nodes)
    return None, None


def test_the_graders_answers_refuse_while_a_learner_is_graded():
    """Every function that answers "which queue" refuses inside without_answers, the rule checks
    and the private helpers among them, and answers again after it."""
    assert _queue_by_the_rules(200, "12:00:00") == ("regular-o", "medium-o")
    with pytest.raises(AssertionError, match="course.cluster.jobscript.check"):
        ck.call_without_answers(_queue_by_the_rules, 200, "12:00:00")
    request = JobRequest(program=["x"], scheduler="pjm", system="odyssey", group="g")
    calls = {ck.first_queue: ("odyssey", 1, "00:10:00"), ck.routed_queue: ("odyssey", "short-o", 1),
             jobscript.check: (request,), jobscript.render: (request,),
             jobscript._check_queue: (jobscript.SYSTEMS["odyssey"], request, 600),
             ck.problems: (PJM_SCRIPT, PJM), ck.check_script: (PJM_SCRIPT, PJM),
             ck.local_problems: (LOCAL, OPENMP), ck._rules: (ck.Asked(), PJM, [])}
    assert set(calls) | {ck._examine, ck.check_local_job} == set(ck.answers())
    with ck.without_answers():
        for function, args in calls.items():
            with pytest.raises(AssertionError, match="not available while your answer is checked"):
                function(*args)
        assert ck.slurm_seconds("20") == 1200          # what answers nothing stays
        assert systems_queue_limit() == "00:30:00"
    assert ck.first_queue("odyssey", 1, "00:10:00") == "debug-o"
    assert ck.problems(PJM_SCRIPT, PJM) == [] and jobscript.check(request).name == "odyssey"


def systems_queue_limit() -> str:
    from course.cluster.systems import SYSTEMS
    return SYSTEMS["odyssey"].queue("debug-o").elapse_limit(1)


# --- on the local Slurm (task 3): by the rules, and on a real Slurm -------------------------------

LOCAL = f"""\
#!/bin/bash
#SBATCH -c 2 -t 5
cd {ck.COURSE}
export OMP_NUM_THREADS=2
./build/native/release/bin/solc examples/03_openmp/INPUT.DAT
"""
COURSE = ck.COURSE

LOCAL_RIGHT = {
    "cd to the checkout": LOCAL,
    "--chdir, the partition named, memory within the node's": edit(
        LOCAL, f"-t 5\ncd {COURSE}\n", f"-t 5 -p debug --mem=1GB\n#SBATCH --chdir={COURSE}\n"),
    "full paths, memory per CPU": edit(
        edit(LOCAL, f"-t 5\ncd {COURSE}\n", "-t 5 --mem-per-cpu=1G\n"),
        "./build/native/release/bin/solc examples",
        f"{COURSE}/build/native/release/bin/solc {COURSE}/examples"),
    "the program on the PATH": edit(edit(
        LOCAL, "export OMP", f"export PATH={COURSE}/build/native/release/bin:$PATH\nexport OMP"),
        "./build/native/release/bin/solc", "solc"),
}

LOCAL_WRONG = {
    "no cd: the job starts where it was submitted": (
        edit(LOCAL, f"cd {COURSE}\n", ""),
        "the job runs `./build/native/release/bin/solc` and `examples/03_openmp/INPUT.DAT` "
        "(line 4) from the folder it was submitted from"),
    "cd to the folder the job was submitted from": (
        edit(LOCAL, f"cd {COURSE}", "cd $SLURM_SUBMIT_DIR"), "from the folder it was submitted"),
    "cd elsewhere": (edit(LOCAL, f"cd {COURSE}", "cd /tmp"),
                     "(line 5) in /tmp, where its `cd` (or --chdir) took it"),
    "cd to a variable nothing sets": (edit(LOCAL, f"cd {COURSE}", "cd $PFEM"),
                                      "the script changes to a folder this check cannot tell"),
    "--chdir to a folder that does not exist": (
        edit(LOCAL, f"cd {COURSE}\n", "#SBATCH --chdir=/no/such/folder\n"),
        "#SBATCH --chdir=/no/such/folder (line 3): no such folder on this machine"),
    "another checkout's paths": (
        edit(edit(LOCAL, f"cd {COURSE}\n", ""), "./build/native/release/bin/solc examples",
             "/work/pfem/build/native/release/bin/solc /work/pfem/examples"),
        "`/work/pfem/build/native/release/bin/solc` and `/work/pfem/examples/03_openmp/INPUT.DAT` "
        "(line 4): not the course's solc and its input"),
    "the program by its name, not on the PATH": (
        edit(LOCAL, "./build/native/release/bin/solc", "solc"),
        "`solc` (line 5) is looked up on the job's PATH, where the course's programs are not"),
    "more memory than the node has": (
        edit(LOCAL, "-t 5", "-t 5 --mem=64G"),
        f"#SBATCH --mem=64G (line 2) asks a node for 65536 MB, more than the "
        f"{local_slurm.MEMORY_MB} MB of the local Slurm's node"),
    "more memory per CPU than the node has for the job's CPUs": (
        edit(LOCAL, "-t 5", "-t 5 --mem-per-cpu=2G"),
        "asks a node for 2048 MB x 2 CPU(s) = 4096 MB, more than the"),
    "--mem and --mem-per-cpu": (edit(LOCAL, "-t 5", "-t 5 --mem=1G --mem-per-cpu=500"),
                                "sbatch takes only one of them"),
    "a memory size Slurm cannot read": (edit(LOCAL, "-t 5", "-t 5 --mem=lots"),
                                        "#SBATCH --mem=lots (line 2) is not a memory size"),
    "a partition the local Slurm lacks": (
        edit(LOCAL, "-t 5", "-t 5 --partition=cpu"),
        "#SBATCH --partition=cpu (line 2): the local Slurm has one partition, `debug`"),
}


@pytest.mark.parametrize("case", LOCAL_RIGHT)
def test_a_right_local_job_passes_the_rules(case):
    assert ck.local_problems(LOCAL_RIGHT[case], OPENMP) == []


@pytest.mark.parametrize("case", LOCAL_WRONG)
def test_a_wrong_local_job_fails_by_the_rules_alone(case, monkeypatch):
    """Where no Slurm can run (here: made to look so), a wrong working directory, memory or
    partition still fails, with its message; problems() alone does not see them."""
    text, phrase = LOCAL_WRONG[case]
    found = ck.local_problems(text, OPENMP)
    assert any(phrase in p for p in found), (phrase, found)
    assert all("\n" not in p for p in found), found
    monkeypatch.setattr(local_slurm, "unavailable", lambda: "Slurm is not installed (test)")
    with pytest.raises(ck.ScriptError, match=re.escape(phrase)):
        ck.check_local_job(text, OPENMP, "slurm_openmp")


def test_without_slurm_the_grade_says_it_rests_on_the_rules(monkeypatch):
    monkeypatch.setattr(local_slurm, "unavailable", lambda: "a local Slurm needs root (test)")
    message = ck.check_local_job(LOCAL, OPENMP, "slurm_openmp")
    assert message.startswith("slurm_openmp follows the rules. It was graded by the rules alone, "
                              "not run: this machine cannot run the local Slurm (a local Slurm "
                              "needs root (test))")
    assert "whether the job really completes with threads 2 and 208 iterations was not" in message


def test_local_job_runs_or_says_why_not():
    """Where Slurm runs, the OpenMP job completes with 2 threads. Where it cannot run, the rules
    alone grade, and the message says so."""
    reason = local_slurm.unavailable()
    message = ck.check_local_job(LOCAL, OPENMP, "slurm_openmp")
    if reason:
        assert "graded by the rules alone" in message and reason in message
        return
    assert "completed: threads 2, 208 iterations" in message


def test_the_rules_agree_with_a_real_slurm(tmp_path):
    """Each right local job completes on a real Slurm, and each wrong one is refused by sbatch or
    fails there, as the rules say (so the rules alone grade it as Slurm would)."""
    if local_slurm.unavailable():
        pytest.skip(local_slurm.unavailable())
    output = f"--output={tmp_path / 'job-%j.out'}"
    scripts = {**{case: (text, True) for case, text in LOCAL_RIGHT.items()},
               **{case: (text, False) for case, (text, _) in LOCAL_WRONG.items()}}
    with local_slurm.LocalSlurm(tmp_path / "slurm") as slurm:
        jobs = {}
        for number, (case, (text, right)) in enumerate(scripts.items()):
            (tmp_path / f"job{number}.sh").write_text(text)
            try:                                    # all submitted first: they queue
                jobs[case] = slurm.submit(tmp_path / f"job{number}.sh", cwd=tmp_path,
                                          options=(output, output.replace("--output", "--error")))
            except RuntimeError as err:             # sbatch refused it
                assert not right, (case, err)
        for case, job in jobs.items():
            result = slurm.wait(job, timeout=120)
            ran = result.ok and "threads 2" in result.output and "208 iterations" in result.output
            assert ran == scripts[case][1], (case, result)
