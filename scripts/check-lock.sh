#!/usr/bin/env bash
# Prove that requirements-lock.txt installs on each Python given (default: every python3.X on the
# PATH and /usr/bin/python3): a fresh virtual environment per interpreter, the lock installed from
# wheels only (mpi4py is compiled against the MPI of `mpicc`, as scripts/setup.sh does), the course
# itself, and its main modules imported. `make lock` runs it; it prints one line per Python.
#
#   bash scripts/check-lock.sh [PYTHON ...]
set -euo pipefail
cd "$(dirname "$0")/.."

lock=requirements-lock.txt
pythons=("$@")
if [ "${#pythons[@]}" -eq 0 ]; then
    for candidate in /usr/bin/python3 python3.10 python3.11 python3.12 python3.13; do
        command -v "$candidate" >/dev/null 2>&1 && pythons+=("$(command -v "$candidate")")
    done
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failed=0
for python in "${pythons[@]}"; do
    version=$("$python" -c 'import platform; print(platform.python_version())')
    venv="$work/venv-$version"
    log="$work/pip-$version.log"
    if "$python" -m venv "$venv" >"$log" 2>&1 &&
       "$venv/bin/python" -m pip install -q --upgrade pip >>"$log" 2>&1 &&
       MPICC=$(command -v mpicc) "$venv/bin/python" -m pip install -q --only-binary=:all: \
           --no-binary=mpi4py -r "$lock" -e . >>"$log" 2>&1 &&
       "$venv/bin/python" -c 'import course.cli, numba, scipy, mpi4py.MPI, nbgrader, jupyter_book' \
           >>"$log" 2>&1; then
        echo "check-lock: Python $version ($python): the lock installs"
    else
        echo "check-lock: Python $version ($python): the lock does NOT install or import:" \
             "$(grep -m1 '^ERROR' "$log" || tail -n 1 "$log")"
        failed=1
    fi
    rm -rf "$venv"
done
exit "$failed"
