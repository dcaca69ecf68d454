#!/usr/bin/env bash
# Set up everything the course needs, idempotently (shared by `make book`, `make test`, `make lab`).
#
#  1. the system toolchain: C and Fortran compilers with OpenMP, CMake, an MPI library with its
#     compiler wrappers and mpiexec; with --grader also what the hidden checks of the exercises
#     need (Clang's ThreadSanitizer, LLVM's OpenMP, a one-node Slurm); with --test all of that,
#     Chromium for the browser tests and FFTW:
#       - already there: nothing to do;
#       - inside a conda environment: `conda env update -f environment.yml` provides them;
#       - root on Debian/Ubuntu: installed with apt-get;
#       - otherwise: a message naming what to install, and exit 1.
#  2. a virtual environment .venv with the Python packages of pyproject.toml at the exact versions
#     of requirements-lock.txt (`make lock` refreshes it), and the course itself, editable;
#     reinstalled only when pyproject.toml or the lock file changes. mpi4py is compiled against the
#     MPI library that `mpicc` belongs to, so that it matches the `mpiexec` on the PATH.
#  3. petsc4py (lecture 09_petsc), compiled against the PETSc found here (PETSC_DIR, Debian's
#     libpetsc-real-dev, or conda's): optional like FFTW (installed with apt-get as root on Debian,
#     else named), needed by the tests.
#
# Environment:
#   COURSE_LOCK=0          install from pyproject.toml's version ranges instead of the lock file
#                          (the default under conda, whose environment.yml provides the packages,
#                          on a Python the lock was not made for, and where the lock does not
#                          install); COURSE_LOCK=1 insists on the lock
#   COURSE_WHEELHOUSE=DIR  install without any package index, from DIR only (see `make wheelhouse`)
set -euo pipefail
cd "$(dirname "$0")/.."

# --grader: also what grading the exercises needs; --test: that and what the tests need
want_grader=0 want_test=0
case "${1:-}" in
    "") ;;
    --grader) want_grader=1 ;;
    --test) want_grader=1 want_test=1 ;;
    *) echo "setup: unknown option ${1} (use --grader or --test)" >&2; exit 2 ;;
esac

say() { printf 'setup: %s\n' "$*"; }

# --- 1. system toolchain -------------------------------------------------------------------------
# command -> Debian package that provides it (a function, not an associative array: macOS's bash 3.2)
apt_pkg() {
    case "$1" in
        cc) echo gcc ;; c++) echo g++ ;; mpicc | mpif90) echo libopenmpi-dev ;;
        mpiexec) echo openmpi-bin ;; lscpu) echo util-linux ;; fftw3.h) echo libfftw3-dev ;;
        munged) echo munge ;; sbatch) echo slurm-client ;; slurmctld | slurmd) echo "$1" ;;
        clang-openmp) echo libomp-dev ;; clang-tsan) echo libclang-rt-dev ;;
        llvm-symbolizer) echo llvm ;; petsc) echo libpetsc-real-dev ;; *) echo "$1" ;;
    esac
}
# what an optional one is for
purpose() {
    case "$1" in
        petsc) echo "lecture 09_petsc; with conda: conda install -c conda-forge petsc4py" ;;
        *) echo "the 07_cluster FFT programs" ;;
    esac
}
# a command, or (not a command) the FFTW 3 header, Clang's OpenMP and PETSc
have() {
    case "$1" in
        fftw3.h) for d in /usr/include /usr/local/include /opt/homebrew/include \
                          "${CONDA_PREFIX:-/nonexistent}/include"; do
                     [ -f "$d/fftw3.h" ] && return 0
                 done; return 1 ;;
        clang-openmp) echo 'int main(void){return 0;}' |
                          clang -fopenmp -x c - -o /dev/null >/dev/null 2>&1 ;;
        clang-tsan) echo 'int main(void){return 0;}' |
                        clang -fsanitize=thread -x c - -o /dev/null >/dev/null 2>&1 ;;
        petsc) bash scripts/petsc.sh dir >/dev/null ;;
        *) command -v "$1" >/dev/null 2>&1 ;;
    esac
}
needed=(cc c++ gfortran cmake make mpicc mpif90 mpiexec)
if [ "$(uname -s)" = Linux ]; then needed+=(lscpu); fi   # cores, sockets and NUMA nodes on Linux
# FFTW 3: the pencil-FFT programs of 07_cluster (the build skips them without it); PETSc: lecture
# 09_petsc (its cells say how to get it and skip without it)
optional=(fftw3.h petsc)
# grading (exercises 03 and 04: their race and work-sharing checks; 07: its job on a one-node
# Slurm) also needs: Clang with LLVM's OpenMP and ThreadSanitizer (a second compiler; the data-race
# detector, with llvm-symbolizer for its line numbers), Slurm with munge, numactl (PJM launch lines)
if [ "$want_grader" = 1 ]; then
    needed+=(munged slurmctld slurmd sbatch clang clang-openmp clang-tsan llvm-symbolizer numactl)
fi
# the tests also need a browser for the book, FFTW for the pencil-FFT programs, and npm for the
# proxy of the JupyterHub classroom
if [ "$want_test" = 1 ]; then
    needed+=(chromium fftw3.h npm petsc)
    optional=()
fi

missing=()
for c in "${needed[@]}"; do
    have "$c" || missing+=("$c")
done
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    for c in "${optional[@]}"; do have "$c" || missing+=("$c"); done
else
    for c in "${optional[@]}"; do
        have "$c" || say "optional, not found: $(apt_pkg "$c") ($(purpose "$c"))"
    done
fi
python3 -c 'import venv, ensurepip' 2>/dev/null || missing+=(python3-venv)
# mpi4py is compiled against the MPI library here: it needs Python's C headers (Debian's python3
# comes without them)
python3 -c 'import os, sysconfig; assert os.path.exists(sysconfig.get_paths()["include"] + "/Python.h")' \
    2>/dev/null || missing+=(python3-dev)

if [ "${#missing[@]}" -gt 0 ]; then
    pkgs=$(for c in "${missing[@]}"; do apt_pkg "$c"; done | sort -u | tr '\n' ' ')
    if [ -n "${CONDA_PREFIX:-}" ]; then
        say "missing in the conda environment: ${missing[*]}"
        say "run: conda env update -n \"$(basename "$CONDA_PREFIX")\" -f environment.yml"
        exit 1
    elif [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        say "installing with apt-get: $pkgs"
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq
        # shellcheck disable=SC2086
        apt-get install -y -qq --no-install-recommends $pkgs >/dev/null
    else
        say "missing: ${missing[*]}"
        say "install them, e.g. on Debian/Ubuntu: sudo apt-get install $pkgs"
        say "or with conda: conda env create -f environment.yml && conda activate pfem"
        exit 1
    fi
fi

# --- 2. Python virtual environment ---------------------------------------------------------------
venv=.venv
lock=requirements-lock.txt
sha1() { if command -v sha1sum >/dev/null 2>&1; then sha1sum; else shasum -a 1; fi; }
stamp="$venv/.installed-$(cat pyproject.toml "$lock" 2>/dev/null | sha1 | cut -c1-12)"
if [ -n "${COURSE_WHEELHOUSE:-}" ]; then
    if [ ! -d "$COURSE_WHEELHOUSE" ]; then
        say "COURSE_WHEELHOUSE=$COURSE_WHEELHOUSE is not a folder (make it with: make wheelhouse)"
        exit 1
    fi
    # every pip below, and the ones that build mpi4py and the course, look there and nowhere else
    export PIP_NO_INDEX=1 PIP_FIND_LINKS="$(cd "$COURSE_WHEELHOUSE" && pwd)"
    say "installing from the wheelhouse $PIP_FIND_LINKS only (no package index)"
fi
if [ ! -x "$venv/bin/python" ]; then
    say "creating the virtual environment $venv"
    if [ -n "${CONDA_PREFIX:-}" ]; then
        # inside conda: see conda's packages (mpi4py built against conda's MPI, numba, ...)
        python3 -m venv --system-site-packages "$venv"
    else
        python3 -m venv "$venv"
    fi
fi
if [ ! -f "$stamp" ]; then
    say "installing the Python packages into $venv (a few minutes the first time)"
    "$venv/bin/python" -m pip install -q --upgrade pip
    # the exact versions of the lock file, unless told otherwise or not made for this Python
    locked=(-r "$lock")
    lock_pythons=$(sed -n 's/^# python \([0-9. ]*\).*/\1/p' "$lock" 2>/dev/null | head -n 1)
    venv_python=$("$venv/bin/python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
    if [ "${COURSE_LOCK:-}" = 0 ]; then
        locked=()
    elif [ ! -f "$lock" ]; then
        say "no $lock: installing the versions pyproject.toml allows"
        locked=()
    elif [ -n "${CONDA_PREFIX:-}" ] && [ "${COURSE_LOCK:-}" != 1 ]; then
        say "conda: its packages stay; $lock is not used (COURSE_LOCK=1 to use it)"
        locked=()
    elif [[ " $lock_pythons " != *" $venv_python "* ]] && [ "${COURSE_LOCK:-}" != 1 ]; then
        say "$lock is made for Python ${lock_pythons// /, }, this is $venv_python: installing the"
        say "newest versions pyproject.toml allows instead (COURSE_LOCK=1 to try the lock anyway)"
        locked=()
    fi
    # mpi4py is compiled from source against the MPI library of `mpicc` (the one mpiexec belongs to)
    # (pip's messages are kept: a lock that does not fit this Python is told from a failed build)
    pip_log=$(mktemp)
    trap 'rm -f "$pip_log"' EXIT
    install() {
        local status=0
        MPICC=$(command -v mpicc) PIP_NO_BINARY=mpi4py "$venv/bin/python" -m pip install -q "$@" \
            -e ".[test]" 2>"$pip_log" || status=$?
        cat "$pip_log" >&2
        return "$status"
    }
    if ! install ${locked[@]+"${locked[@]}"}; then
        if [ "${#locked[@]}" -eq 0 ] || [ "${COURSE_LOCK:-}" = 1 ] ||
           ! grep -q -E "No matching distribution|Could not find a version|ResolutionImpossible" \
               "$pip_log"; then
            exit 1
        fi
        say "the locked versions do not install on this Python (pip's message above): installing"
        say "the newest versions pyproject.toml allows instead"
        install
    fi
    rm -f "$venv"/.installed-*
    touch "$stamp"
fi
# mpi4py must belong to the MPI library of the mpiexec on the PATH, which may have changed since it
# was built (another conda environment, a module system): rebuild it when it does not
mpi4py_problem() {
    "$venv/bin/python" -c 'from course.toolchain import mpi4py_problem; print(mpi4py_problem() or "")'
}
problem=$(mpi4py_problem)
if [ -n "$problem" ]; then
    say "$problem"
    say "rebuilding mpi4py against $(command -v mpicc)"
    # the same version again (the locked one), compiled anew
    version=$("$venv/bin/python" -c 'from importlib.metadata import version; print(version("mpi4py"))')
    MPICC=$(command -v mpicc) "$venv/bin/python" -m pip install -q --force-reinstall --no-deps \
        --no-binary mpi4py "mpi4py==$version"
    problem=$(mpi4py_problem)
    if [ -n "$problem" ]; then
        say "$problem"
        exit 1
    fi
fi
# --- 3. petsc4py, compiled against the PETSc found here ---------------------------------------------
# The petsc4py of the PETSc version found (3.18 on Debian 12) needs the build tools of its day
# (Cython < 3, setuptools < 70): it is built in a throw-away environment with the NumPy of .venv,
# and only the wheel goes into .venv. Without it lecture 09_petsc's cells skip, so a failed build
# stops only the set-up of the tests.
build_petsc4py() {
    local dir=$1 petsc4py numpy build status=0
    petsc4py=$(bash scripts/petsc.sh petsc4py)
    say "building $petsc4py against the PETSc in $dir (two minutes)"
    numpy=$("$venv/bin/python" -c 'import numpy; print(numpy.__version__)')
    build=$(mktemp -d)
    "$venv/bin/python" -m venv "$build/venv" &&
        "$build/venv/bin/python" -m pip install -q "cython<3" "setuptools<70" wheel \
            "numpy==$numpy" &&
        PETSC_DIR=$dir "$build/venv/bin/python" -m pip wheel -q --no-build-isolation --no-deps \
            -w "$build/wheels" "$petsc4py" &&
        "$venv/bin/python" -m pip install -q --no-deps "$build"/wheels/petsc4py-*.whl || status=$?
    rm -rf "$build"
    return "$status"
}
if dir=$(bash scripts/petsc.sh dir) && ! "$venv/bin/python" -c 'import petsc4py' >/dev/null 2>&1
then
    if ! build_petsc4py "$dir"; then
        say "petsc4py did not build (pip's messages above): lecture 09_petsc's cells will skip"
        [ "$want_test" = 1 ] && exit 1
    fi
fi
# the tests set up a classroom and a new machine offline, with Debian's own Python: a wheelhouse
# for it (reused while the lock is unchanged), with the hub's proxy from npm
if [ "$want_test" = 1 ] && [ -x /usr/bin/python3 ] && [ -z "${COURSE_WHEELHOUSE:-}" ]; then
    bash scripts/wheelhouse.sh build/wheelhouse /usr/bin/python3
    [ -d build/wheelhouse/npm-cache ] || "$venv/bin/python" -m course hub download build/wheelhouse
fi
say "ready ($venv)"
