#!/usr/bin/env bash
# Download everything pip needs to set up the course without a package index into a folder (a
# wheelhouse), for the Python that will install from it: the locked packages (requirements-lock.txt
# with the markers of that Python), mpi4py's source (it is compiled against the local MPI), what
# pip needs to build mpi4py and the course, and where PETSc is here petsc4py's source and the older
# build tools it needs (scripts/petsc.sh, setup.sh). Then: COURSE_WHEELHOUSE=DIR make setup (offline).
#
#   bash scripts/wheelhouse.sh DIR [PYTHON]     PYTHON: the participants' Python (default .venv's)
#
# Reused as it is when DIR already holds the downloads of this lock for this Python (a stamp file).
set -euo pipefail
cd "$(dirname "$0")/.."

dir=${1:?usage: scripts/wheelhouse.sh DIR [PYTHON]}
python=${2:-.venv/bin/python}
lock=requirements-lock.txt
command -v "$python" >/dev/null 2>&1 || { echo "wheelhouse: $python is not a Python here" >&2; exit 2; }
version=$("$python" -c 'import platform; print(platform.python_version())')
sha1() { if command -v sha1sum >/dev/null 2>&1; then sha1sum; else shasum -a 1; fi; }
# petsc4py's sources where PETSc is here (setup.sh compiles them against it)
petsc4py=$(bash scripts/petsc.sh petsc4py 2>/dev/null) || petsc4py=""
stamp="$dir/.downloaded-$version-$(sha1 < "$lock" | cut -c1-12)${petsc4py:+-${petsc4py#*==}}"
if [ -f "$stamp" ]; then
    echo "wheelhouse: $dir is up to date for Python $version"
    exit 0
fi

# pip of that Python: its own, or a throw-away virtual environment made from it (Debian's python3
# has no pip of its own)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if "$python" -m pip --version >/dev/null 2>&1; then
    pip=("$python" -m pip)
else
    "$python" -m venv "$work/venv"
    pip=("$work/venv/bin/python" -m pip)
fi

mkdir -p "$dir"
"${pip[@]}" download -q -r "$lock" -d "$dir"
"${pip[@]}" download -q --no-binary mpi4py --no-deps -d "$dir" "$(grep -i '^mpi4py==' "$lock")"
"${pip[@]}" download -q -d "$dir" pip "setuptools>=77" wheel build "cython>=3.0.1"
if [ -n "$petsc4py" ]; then                     # and the build tools of its day
    "${pip[@]}" download -q --no-binary petsc4py --no-deps -d "$dir" "$petsc4py"
    "${pip[@]}" download -q -d "$dir" "cython<3" "setuptools<70"
fi
rm -f "$dir"/.downloaded-*
touch "$stamp"
echo "wheelhouse: $(ls "$dir" | wc -l) files in $dir for Python $version"
