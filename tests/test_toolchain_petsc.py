"""The toolchain table of the book's first page (course.toolchain) names PETSc, petsc4py and hypre
(lecture 09), as petsc4py finds them; where petsc4py does not import, they are missing."""

import re

import pytest

from course import toolchain


def test_petsc_versions_are_what_petsc4py_reports():
    petsc4py = pytest.importorskip("petsc4py")
    petsc4py.init([])
    from petsc4py import PETSc

    petsc, bindings, hypre = toolchain.petsc_versions()
    assert petsc == ".".join(map(str, PETSc.Sys.getVersion()))
    assert bindings == petsc4py.__version__
    if PETSc.Sys.hasExternalPackage("hypre"):
        assert hypre == "in PETSc" or re.fullmatch(r"\d+\.\d+\.\d+", hypre), hypre
    else:
        assert hypre == "not in PETSc"


def test_the_table_has_a_petsc_row(monkeypatch, tmp_path):
    info = {"python": "CPython 3.11", "numpy": "1", "numba": "1", "c_compiler": "cc",
            "fortran_compiler": "gfortran", "openmp_c_threads": 2, "openmp_fortran_threads": 2,
            "numba_threads": "2 threads", "mpiexec": "mpiexec", "mpi4py": "4", "mpi4py_library":
            "Open MPI", "cores": 2, "sockets": 1, "numa_nodes": 1, "platform": "Linux",
            "petsc": "3.18.5", "petsc4py": "3.18.5", "hypre": "2.26.0"}
    assert "| PETSc / petsc4py / hypre (lecture 09) | 3.18.5 / 3.18.5 / 2.26.0 |" in \
        toolchain.markdown_table(info).splitlines()
    info.update(petsc=None, petsc4py=None, hypre=None)
    assert "| PETSc / petsc4py / hypre (lecture 09) | missing |" in \
        toolchain.markdown_table(info).splitlines()
    # a petsc4py that does not import: nothing to report
    (tmp_path / "petsc4py").mkdir()
    (tmp_path / "petsc4py" / "__init__.py").write_text("raise ImportError('not here')\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    assert toolchain.petsc_versions() == (None, None, None)
