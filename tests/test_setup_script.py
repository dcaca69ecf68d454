"""scripts/setup.sh chooses the lock or pyproject.toml's ranges for the Python it finds, and says why
in one line; it builds petsc4py against the PETSc it finds, and a failed build stops only the
tests' set-up: run for real, in a copy of the repository's scripts, with stand-ins for the
toolchain, for Python and for pip (which records what it was asked to install or build)."""

import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# the venv's python: answers setup.sh's questions, records every `pip install`
FAKE_VENV_PYTHON = r"""#!/bin/bash
case "$*" in
    "-m pip install -q --upgrade pip") exit 0 ;;
    "-m pip install"*)
        echo "$*" >> "$PIP_LOG"
        if [ "${FAIL_LOCK:-}" = build ]; then
            echo "src/mpi4py/MPI.c: fatal error: Python.h: No such file or directory" >&2; exit 1
        elif [ -n "${FAIL_LOCK:-}" ] && [[ "$*" == *" -r "* ]]; then
            echo "ERROR: No matching distribution found for soupsieve==4.1.3" >&2; exit 1
        fi
        exit 0 ;;
    "-m pip wheel"*)
        echo "$*" >> "$PIP_LOG"
        [ -n "${FAIL_PETSC4PY:-}" ] && { echo "error: failed-wheel-build" >&2; exit 1; }
        wheels=$(echo "$*" | sed -n 's/.* -w \([^ ]*\) .*/\1/p')
        mkdir -p "$wheels" && touch "$wheels/petsc4py-3.18.5-cp311-cp311-linux_x86_64.whl"
        exit 0 ;;
    "-m venv "*) mkdir -p "$3/bin" && cp "$0" "$3/bin/python"; exit 0 ;;
    *"import petsc4py"*) [ -z "${NO_PETSC4PY:-}" ] ;;
    *"import numpy"*) echo 2.4.6 ;;
    *version_info*) echo "$FAKE_PYTHON" ;;
    *mpi4py_problem*) echo "" ;;
    *) echo "unexpected: $*" >&2; exit 3 ;;
esac
"""
FAKE_PYTHON3 = r"""#!/bin/bash
if [ "$1" = -m ] && [ "$2" = venv ]; then
    mkdir -p "$3/bin" && cp "$(dirname "$0")/venv-python" "$3/bin/python"; exit 0
fi
[ "$1" = -c ] && exit 0          # import venv, ensurepip
exit 3
"""


def _executable(path: Path, text: str) -> None:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


@pytest.fixture
def repo(tmp_path):
    """A copy of what setup.sh reads, and a folder of stand-in commands first on the PATH."""
    copy = tmp_path / "repo"
    (copy / "scripts").mkdir(parents=True)
    shutil.copy(ROOT / "scripts" / "setup.sh", copy / "scripts")
    shutil.copy(ROOT / "scripts" / "petsc.sh", copy / "scripts")
    shutil.copy(ROOT / "pyproject.toml", copy)
    shutil.copy(ROOT / "requirements-lock.txt", copy)
    shims = tmp_path / "bin"
    shims.mkdir()
    for command in ("cc", "c++", "gfortran", "cmake", "make", "mpicc", "mpif90", "mpiexec",
                    "lscpu"):
        _executable(shims / command, "#!/bin/sh\nexit 0\n")
    _executable(shims / "id", "#!/bin/sh\necho 1000\n")      # not root: no apt-get
    _executable(shims / "python3", FAKE_PYTHON3)                # (it has venv and Python.h)
    _executable(shims / "venv-python", FAKE_VENV_PYTHON)
    return copy, shims


def _setup(repo, python: str, **env) -> tuple[subprocess.CompletedProcess, list[str]]:
    copy, shims = repo
    log = copy / "pip.log"
    environment = {"PATH": f"{shims}:/usr/bin:/bin", "HOME": str(copy), "PIP_LOG": str(log),
                   "FAKE_PYTHON": python, **env}
    done = subprocess.run(["bash", "scripts/setup.sh"], cwd=copy, env=environment,
                          capture_output=True, text=True, timeout=60)
    return done, (log.read_text().splitlines() if log.exists() else [])


def _pythons() -> list[str]:
    line = next(l for l in (ROOT / "requirements-lock.txt").read_text().splitlines()
                if l.startswith("# python "))
    return line.split()[2:]


@pytest.mark.parametrize("python", _pythons())
def test_a_supported_python_installs_the_lock(repo, python):
    done, installs = _setup(repo, python)
    assert done.returncode == 0, done.stdout + done.stderr
    assert installs == ['-m pip install -q -r requirements-lock.txt -e .[test]'], installs
    assert "setup: ready (.venv)" in done.stdout


def test_another_python_gets_the_ranges_and_one_line_why(repo):
    done, installs = _setup(repo, "3.14")
    assert done.returncode == 0, done.stdout + done.stderr
    assert installs == ["-m pip install -q -e .[test]"], installs
    assert f"requirements-lock.txt is made for Python {', '.join(_pythons())}, this is 3.14" \
        in done.stdout


def test_a_lock_that_does_not_install_falls_back_and_says_so(repo):
    """What Debian 12's Python 3.11.2 met with a lock made on 3.11.7 (soupsieve needs 3.11.5)."""
    done, installs = _setup(repo, "3.11", FAIL_LOCK="1")
    assert done.returncode == 0, done.stdout + done.stderr
    assert installs == ["-m pip install -q -r requirements-lock.txt -e .[test]",
                        "-m pip install -q -e .[test]"], installs
    assert "the locked versions do not install on this Python" in done.stdout


def test_a_failed_build_is_no_reason_to_leave_the_lock(repo):
    """mpi4py that does not compile (no Python.h) fails the same with any version: set-up stops
    with pip's message instead of trying again without the lock."""
    done, installs = _setup(repo, "3.11", FAIL_LOCK="build")
    assert done.returncode != 0 and len(installs) == 1, installs
    assert "Python.h" in done.stderr and "do not install on this Python" not in done.stdout


def test_insisting_on_the_lock_fails_where_it_does_not_install(repo):
    done, installs = _setup(repo, "3.11", FAIL_LOCK="1", COURSE_LOCK="1")
    assert done.returncode != 0 and len(installs) == 1
    assert "No matching distribution" in done.stderr


def test_course_lock_0_installs_the_ranges(repo):
    done, installs = _setup(repo, "3.11", COURSE_LOCK="0")
    assert done.returncode == 0 and installs == ["-m pip install -q -e .[test]"], installs


def test_an_unknown_option_is_refused(repo):
    copy, shims = repo
    done = subprocess.run(["bash", "scripts/setup.sh", "--tset"], cwd=copy, capture_output=True,
                          text=True, timeout=60, env={**os.environ, "PATH": f"{shims}:/usr/bin:/bin"})
    assert done.returncode == 2 and "unknown option --tset" in done.stderr


@pytest.fixture
def petsc(tmp_path) -> Path:
    """A folder that looks like PETSc 3.18.5 (its version header)."""
    folder = tmp_path / "petsc"
    (folder / "include").mkdir(parents=True)
    (folder / "include" / "petscversion.h").write_text(
        "#define PETSC_VERSION_MAJOR      3\n#define PETSC_VERSION_MINOR      18\n"
        "#define PETSC_VERSION_SUBMINOR   5\n")
    return folder


def test_petsc4py_is_built_against_the_petsc_found(repo, petsc):
    """PETSc's version picks petsc4py's; its old build tools go into a throw-away environment,
    only the wheel into .venv."""
    done, installs = _setup(repo, _pythons()[0], PETSC_DIR=str(petsc), NO_PETSC4PY="1")
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"building petsc4py==3.18.5 against the PETSc in {petsc}" in done.stdout
    tools, wheel, install = installs[1:]
    assert tools == "-m pip install -q cython<3 setuptools<70 wheel numpy==2.4.6", installs
    assert wheel.startswith("-m pip wheel -q --no-build-isolation --no-deps -w ") and \
        wheel.endswith(" petsc4py==3.18.5"), wheel
    assert install.startswith("-m pip install -q --no-deps ") and \
        install.endswith("/wheels/petsc4py-3.18.5-cp311-cp311-linux_x86_64.whl"), install


def test_a_petsc4py_that_does_not_build_is_one_line_not_a_failed_setup(repo, petsc):
    done, installs = _setup(repo, _pythons()[0], PETSC_DIR=str(petsc), NO_PETSC4PY="1",
                            FAIL_PETSC4PY="1")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "petsc4py did not build (pip's messages above): lecture 09_petsc's cells will skip" \
        in done.stdout
    assert not any("--no-deps" in line and line.endswith(".whl") for line in installs), installs
    assert "setup: ready (.venv)" in done.stdout


def test_petsc4py_already_there_is_left_alone(repo, petsc):
    done, installs = _setup(repo, _pythons()[0], PETSC_DIR=str(petsc))
    assert done.returncode == 0 and len(installs) == 1, installs
    assert "petsc4py" not in done.stdout
