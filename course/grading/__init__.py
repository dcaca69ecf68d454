"""How an exercise is checked and graded: everything the exercises' hidden and visible tests call,
and nbgrader's customisation. One module per concern or per exercise:

    exercise       a learner's C or Fortran kernel compiled and run in a child process (01, 02,
                   03): values, crashes, endless loops; the course's references blocked while a
                   learner's code runs (references_blocked), the course's versions of earlier
                   tasks provided (provided)
    fem3d          exercise 02, tasks 1 to 3 in Python, C or Fortran: the shape derivatives, the
                   Jacobian and gradients, the element matrix (a compiled answer served by one
                   child process, call after call)
    race_check     the OpenMP kernels of 03 and 04 under ThreadSanitizer + Archer, and under an
                   OMPT tool that counts the parallel regions and each thread's work
    iccg           exercise 04: the multicoloring, the colored IC(0) substitution, incompatible
                   nodes
    halo           exercise 05: the local tables, and the halo exchange run under mpiexec by
                   halo_driver (its messages to the learner: halo_messages), the MPI calls
                   watched by mpi_monitor (a PMPI library preloaded into the ranks)
    pipecg         exercise 06: the alpha recurrence, and Chronopoulos-Gear CG run under mpiexec by
                   pipecg_driver
    hybrid         exercise 08: the internal block of localized IC(0), and the ASDD
                   sweeps run under mpiexec by hybrid_driver (the local solve and the product
                   counted)
    cluster        exercise 07: a job script read back, checked against the run and the system's
                   rules, and submitted to a local Slurm
    petsc          exercise 09: a course configuration as PETSc's options (what PETSc says it
                   built, compared with the twin), and a rank's rows of PETSc's distributed matrix
                   built by petsc_driver under mpiexec

The drivers run under mpiexec only (they import mpi4py); the only other MPI in a notebook's
kernel is PETSc's own on one process (exercise 09's first check: petsc4py starts MPI as a
singleton, and the jobs started after it get a clean environment, mpi_job.mpi_environment).
Grading sits above the solvers, the distributed track and the cluster tools
(it checks a learner's answer against them) and beside the benchmarks; nothing below it imports
it (tests/test_layers.py).

nbgrader's customisation (stubs in the language of the cell, feedback without hidden tests) is
in nbgrader_hooks; its names are this package's too (course.grading.ClearSolutionsByCellLanguage,
HideHiddenTests, for nbgrader_config.py), imported when first asked for: the MPI drivers import
this package in every rank, and nbgrader takes longer to import than all the rest of it.
"""

import importlib.util
import os
import shutil

_HOOKS = ("ClearSolutionsByCellLanguage", "HideHiddenTests", "HIDDEN", "HIDDEN_NOTE")


def __getattr__(name: str):
    """The names of nbgrader_hooks, imported (with nbgrader) when first asked for."""
    if name in _HOOKS:
        from . import nbgrader_hooks
        return getattr(nbgrader_hooks, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# --- can this machine grade the exercises? (course doctor --grading) ---------------------------

# the seconds a cell may run before nbgrader interrupts it and the cell loses its points (endless
# loops), in autograding and in a learner's Validate alike (nbgrader_config.py, the learner copy's)
CELL_TIMEOUT = 60


def autograding() -> bool:
    """True while nbgrader's autograder runs the notebook (it sets NBGRADER_EXECUTION; a
    learner's Validate sets "validate"): a cell that earns no points, a demonstration, may then
    skip its work, which a wrong answer can make last until CELL_TIMEOUT."""
    return os.environ.get("NBGRADER_EXECUTION") == "autograde"


def readiness() -> dict[str, tuple[str, str]]:
    """For each exercise, (verdict, reason): "fully" (every hidden check can run here), "partly"
    (one check is replaced by a weaker one, the reason says which), or "no" (checks would fail for
    a missing tool, and right answers lose points: the reason says what to install)."""
    from .. import toolchain
    from . import race_check
    from ..cluster import local_slurm

    missing = [c for c in ("cc", "gfortran") if shutil.which(c) is None]
    compilers = f"missing {', '.join(missing)} (C and Fortran kernels)" if missing else None
    try:
        race_check.tools()
        races = None
    except race_check.RaceCheckUnavailable as err:
        races = str(err).splitlines()[0]
    missing = [c for c in ("mpicc", "mpif90", "mpiexec") if shutil.which(c) is None]
    mpi = (f"missing {', '.join(missing)} (an MPI library with its compilers)" if missing
           else toolchain.mpi4py_problem())
    slurm = local_slurm.unavailable()

    def verdict(*problems):
        found = [p for p in problems if p]
        return ("no", "; ".join(found)) if found else ("fully", "")

    result = {"01_fem1d": verdict(compilers), "02_fem3d": verdict(compilers),
              "03_openmp": verdict(compilers, races), "04_iccg": verdict(compilers, races),
              "05_halo": verdict(compilers, mpi), "06_pipecg": verdict(compilers, mpi)}
    result["07_cluster"] = (("partly", f"the OpenMP job script is checked by its rules, not run "
                                       f"on a local Slurm: {slurm}") if slurm else ("fully", ""))
    result["08_hybrid"] = verdict(compilers, mpi)
    petsc = (None if importlib.util.find_spec("petsc4py") else
             "missing petsc4py (PETSc for Python: `make setup` installs it with PETSc on Debian)")
    result["09_petsc"] = verdict(mpi, petsc)
    return result
