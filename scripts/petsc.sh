#!/usr/bin/env bash
# PETSc as the course finds it (lecture 09_petsc; scripts/setup.sh and scripts/wheelhouse.sh):
#
#   bash scripts/petsc.sh dir        its folder: PETSC_DIR if that holds PETSc, else Debian's
#                                    (libpetsc-real-dev), else the conda environment's; exit 1 if
#                                    there is none
#   bash scripts/petsc.sh petsc4py   the petsc4py that belongs to it: petsc4py==X.Y.Z, its version
#                                    (3.18.5 for Debian 12's PETSc 3.18.5)
set -euo pipefail

petsc_dir() {
    local d
    for d in "${PETSC_DIR:-}" /usr/lib/petscdir/petsc*/*-real "${CONDA_PREFIX:-}"; do
        [ -n "$d" ] && [ -f "$d/include/petscversion.h" ] && { echo "$d"; return 0; }
    done
    return 1
}

case "${1:-}" in
    dir) petsc_dir ;;
    petsc4py)
        header="$(petsc_dir)/include/petscversion.h" || { echo "petsc.sh: no PETSc here" >&2; exit 1; }
        part() { sed -n "s/^#define PETSC_VERSION_$1 *\([0-9]*\).*/\1/p" "$header"; }
        echo "petsc4py==$(part MAJOR).$(part MINOR).$(part SUBMINOR)" ;;
    *) echo "usage: scripts/petsc.sh dir|petsc4py" >&2; exit 2 ;;
esac
