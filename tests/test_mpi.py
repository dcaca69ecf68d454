"""MPI: the C, Fortran and Python (mpi4py) hello programs under mpiexec with 2, 3 and 4 ranks (more
ranks than cores: oversubscribed), and mpi4py built against the same MPI family as mpiexec.

Every mpiexec call has a timeout, so that a deadlock fails the test instead of hanging the run."""

from __future__ import annotations

import re
import shutil

import pytest

from conftest import PYTHON, ROOT, run
from course import native, toolchain

pytestmark = [pytest.mark.timeout(300),
              pytest.mark.skipif(shutil.which("mpiexec") is None, reason="no mpiexec")]

MPI_TIMEOUT = 120

# Each line goes out in one write (print() writes the text and the newline separately when Python
# runs unbuffered, and mpiexec may then interleave the ranks' lines).
HELLO_PY = """\
import sys
from mpi4py import MPI

def say(line):
    sys.stdout.write(line + "\\n")
    sys.stdout.flush()

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
say(f"hello from rank {rank} of {size} (Python)")
total = comm.reduce(rank, op=MPI.SUM, root=0)
if rank == 0:
    say(f"sum of ranks {total} (should be {size * (size - 1) // 2})")
"""

LABELS = {"mpi_hello_c": "C", "mpi_hello_f": "Fortran", "python": "Python"}


@pytest.fixture(scope="module")
def commands(tmp_path_factory):
    script = tmp_path_factory.mktemp("mpi") / "hello.py"
    script.write_text(HELLO_PY)
    return {"mpi_hello_c": [native.binary("mpi_hello_c")],
            "mpi_hello_f": [native.binary("mpi_hello_f")],
            "python": [PYTHON, script]}


def mpiexec(n, command):
    return run(["mpiexec", "-n", str(n), *command], timeout=MPI_TIMEOUT, cwd=ROOT)


@pytest.mark.parametrize("n", [2, 3, 4])
@pytest.mark.parametrize("program", list(LABELS))
def test_hello(commands, program, n):
    result = mpiexec(n, commands[program])
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    label = LABELS[program]
    hellos = [line for line in lines if line.startswith("hello from rank")]
    matches = [re.fullmatch(rf"hello from rank (\d+) of {n} \({label}\)", line) for line in hellos]
    assert all(matches), lines
    ranks = sorted(int(m[1]) for m in matches)
    assert ranks == list(range(n)), lines
    sums = [line for line in lines if line.startswith("sum of ranks")]
    expected = n * (n - 1) // 2
    assert sums == [f"sum of ranks {expected} (should be {expected})"], lines
    assert len(lines) == n + 1, lines


def test_mpi4py_matches_mpiexec():
    banner = run(["mpiexec", "--version"], timeout=MPI_TIMEOUT)
    assert banner.returncode == 0
    mpiexec_family = toolchain.mpi_family(banner.stdout + banner.stderr)
    assert mpiexec_family is not None, banner.stdout
    lib = run([PYTHON, "-c", "from mpi4py import MPI; print(MPI.Get_library_version())"],
              timeout=MPI_TIMEOUT)
    assert lib.returncode == 0, lib.stderr
    assert toolchain.mpi_family(lib.stdout) == mpiexec_family, (lib.stdout, banner.stdout)


def test_toolchain_mpi4py_library_agrees():
    version, library = toolchain.mpi4py_library()
    assert version is not None and library is not None
    banner = run(["mpiexec", "--version"], timeout=MPI_TIMEOUT)
    assert toolchain.mpi_family(library) == toolchain.mpi_family(banner.stdout)


@pytest.mark.parametrize("text, family", [
    ("mpiexec (OpenRTE) 4.1.4", "Open MPI"),
    ("mpirun (Open MPI) 5.0.3", "Open MPI"),
    ("prterun (PMIx Reference RunTime Environment) 3.0", "Open MPI"),
    ("Open MPI v4.1.4, package: Debian OpenMPI", "Open MPI"),
    ("HYDRA build details:\n    Version: 4.1.2", "MPICH"),
    ("MPICH Version: 4.1.2", "MPICH"),
    ("Intel(R) MPI Library 2021.10 for Linux* OS", "Intel MPI"),
    ("something else", None),
    ("", None),
    (None, None),
])
def test_mpi_family(text, family):
    assert toolchain.mpi_family(text) == family


@pytest.mark.parametrize("library, fits", [
    ("Open MPI v4.1.4, package: Debian OpenMPI", True),
    ("Open MPI v5.0.3, package: Open MPI conda-forge", False),     # another version
    ("MPICH Version: 4.1.4", False),                                 # another family
])
def test_mpi4py_problem_names_a_mismatch(library, fits):
    problem = toolchain.mpi4py_problem("mpiexec (OpenRTE) 4.1.4", "4.1.2", library)
    assert (problem is None) == fits, problem
    if not fits:
        assert library in problem and "--no-binary mpi4py" in problem


def test_mpi4py_problem_here_is_none():
    assert toolchain.mpi4py_problem() is None


def test_mpi_env_allows_oversubscription():
    env = toolchain.mpi_env()
    assert env["OMPI_MCA_rmaps_base_oversubscribe"] == "1"
