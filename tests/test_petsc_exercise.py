"""The checks of exercise 09_petsc (course.grading.petsc): the solution notebook's answers pass,
and each typical wrong answer fails with the message that names its mistake.

Task 1 (the options) runs PETSc in this process; task 2 (the distributed matrix) runs the
learner's file under mpiexec (course.grading.petsc_driver), where a collective call made on some
ranks only is stopped and named. The grading proof with nbgrader's gradebook is in
tests/test_nbgrader.py."""

from __future__ import annotations

import re
import shutil

import nbformat
import pytest

from conftest import ROOT
from course.grading import petsc as grading
from course.grading.exercise import reference
from course.grading.halo import Case
from course.parallel import petsc

SOLUTION = ROOT / "solutions" / "09_petsc" / "09_petsc_exercise.ipynb"
needs_mpiexec = pytest.mark.skipif(shutil.which("mpiexec") is None, reason="no mpiexec")


def _cell(grade_id: str) -> str:
    nb = nbformat.read(SOLUTION, as_version=4)
    return next(c.source for c in nb.cells
                if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id)


def solution_options():
    namespace = {}
    exec(_cell("petsc_options"), namespace)
    return namespace["petsc_options"]


TWIN = reference(petsc.options)


def without(*keys):
    return lambda a, p, s, t: {k: v for k, v in TWIN(a, p, s, t).items() if k not in keys}


def changed(**values):
    return lambda a, p, s, t: {**TWIN(a, p, s, t), **values}


def test_the_solution_and_the_course_twin_pass_every_configuration():
    grading.check_options(solution_options())
    grading.check_options(lambda a, p, s, t: TWIN(a, p, s, t))


@pytest.mark.parametrize("answer, text", [
    (without("ksp_norm_type"), "PRECONDITIONED residual"),
    (without("ksp_atol"), "atol must be 0"),
    (changed(ksp_rtol="1e-8"), "the relative tolerance is the tol"),
    (without("ksp_cg_single_reduction"), "single-reduction variant"),
    (lambda a, p, s, t: {**TWIN(a, p, s, t), **({"ksp_ksp_max_it": s - 1} if s else {})},
     "K sweeps are K iterations"),
    (without("ksp_ksp_norm_type"), "tests no norm"),
    (lambda a, p, s, t: TWIN(a, "bjacobi-ic0" if p == "asdd-ic0" else p, None, t),
     'reports "type: bjacobi" where the course\'s twin has "type: ksp"'),
    (changed(ksp_type="pcg"), "a type name PETSc does not know"),
    (changed(ksp_rtol="tol"), "a number where one is needed"),
    (lambda a, p, s, t: None, "must return a dictionary"),
    (lambda a, p, s, t: {1: "cg"}, "the option names are strings"),
], ids=["default-norm", "atol", "rtol-fixed", "no-single-reduction", "sweeps-1", "inner-norm",
        "asdd-as-bjacobi", "unknown-type", "not-a-number", "none", "not-a-name"])
def test_typical_wrong_options_fail_with_their_message(answer, text):
    with pytest.raises(AssertionError, match=re.escape(text)):
        grading.check_options(answer)


def test_pipelined_as_cg_fails_on_the_hidden_configurations():
    """The visible configurations have no pipelined CG: a wrong twin of it passes them and fails
    the hidden ones (the reason to have both)."""
    def answer(a, p, s, t):
        return TWIN("pcg" if a == "pipelined" else a, p, s, t)
    grading.check_options(answer, [c for c in grading.CONFIGURATIONS if c[0] != "pipelined"])
    with pytest.raises(AssertionError, match='reports "type: cg" where the course\'s twin has '
                                             '"type: pipecg"'):
        grading.check_options(answer)


def test_the_course_mapping_is_blocked_while_the_answer_runs():
    with pytest.raises(Exception, match="not available while your answer is checked"):
        grading.check_options(lambda a, p, s, t: petsc.options(a, p, s, t))


# --- task 2 ----------------------------------------------------------------------------------------

CASES = [Case(2, "blocks", (6, 4, 3)), Case(3, "metis", (5, 5, 4), seed=1)]


def _written(tmp_path, edits=()):
    """The solution's petsc_matrix.py (the %%writefile cell), with `edits` (old, new) made."""
    source = _cell("petsc_matrix").split("\n", 1)[1]
    for old, new in edits:
        assert old in source, old
        source = source.replace(old, new)
    path = tmp_path / "petsc_matrix.py"
    path.write_text(source)
    return path


@needs_mpiexec
@pytest.mark.timeout(120)
def test_the_solution_matrix_passes(tmp_path):
    grading.check_petsc_matrix(_written(tmp_path), CASES + [Case(4, "random", (4, 3, 3), seed=2)])


@needs_mpiexec
@pytest.mark.timeout(120)
def test_the_course_construction_passes_every_case():
    job = grading.run_matrix_job([("course", "-")], CASES)
    assert job.returncode == 0, job.output
    results = [e for e in job.events if e["event"] == "result"]
    assert [r["problem"] for r in results] == [None, None]
    assert all(r["mallocs"] == 0 and r["unneeded"] == 0 for r in results)


@needs_mpiexec
@pytest.mark.timeout(120)
@pytest.mark.parametrize("edits, text", [
    ([("columns = numbers.astype(PETSc.IntType)[col]", "columns = col.astype(PETSc.IntType)")],
     "the columns are the LOCAL numbers"),
    ([("    update(numbers)  ", "    pass  ")], "the matrix differs from the course's"),
    ([("first = comm.exscan(n_internal) or 0", "first = comm.scan(n_internal)")],
     "Row too large"),
    ([(", nnz=(d_nnz, o_nnz),", ",")], "PETSc crashed"),
    ([("nnz=(d_nnz, o_nnz),", "nnz=27,")], "had to allocate memory"),
    ([("    mat.assemble()        ", "    if comm.Get_rank() == 0:\n        mat.assemble()  ")],
     "every rank of the communicator must call every collective PETSc method"),
    ([("    mat.assemble()        ", "    pass  ")], "the matrix is not assembled"),
    ([("    return mat", "    return None")], "not a PETSc Mat"),
    ([("    ### BEGIN SOLUTION", "    raise NotImplementedError()")], "YOUR CODE HERE"),
], ids=["local-columns", "no-exchange", "scan", "no-preallocation", "guessed-preallocation",
        "assemble-on-rank-0", "not-assembled", "returns-none", "untouched"])
def test_typical_wrong_matrices_fail_with_their_message(tmp_path, edits, text):
    with pytest.raises(AssertionError, match=re.escape(text)):
        grading.check_petsc_matrix(_written(tmp_path, edits), CASES)
