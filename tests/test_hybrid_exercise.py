"""The exercise of lecture 08_hybrid and its checks (course.grading.hybrid): the solution notebook's
internal_block (Python, C, Fortran) and asdd_apply (C, Fortran, Python) pass every case of the
notebook, and the typical wrong answers fail, each with the message that says what is wrong.

Task 1: external columns kept (no filter, or `<= n_internal`), the diagonal dropped, the input's
row_ptr copied, the external nodes' rows copied too, the rows sorted, the course's own function
called; in Fortran 0-based offsets and `< n_internal` (1-based columns); a segfault and the
untouched stub in C. Task 2 (under mpiexec; the wrong answers of all three languages in ONE job,
as variants of the driver, to keep this file cheap): z = B t in place of z += B t, the correction
subtracted, K products from z = 0, K + 1 local solves, the first solve skipped, r overwritten (in
Python and through a cast in C), z added to while it holds garbage; a segfault, mpi4py, and the
course's preconditioner called; the PCG verdict on a synthetic result."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from conftest import solution_cell, written_file
from course.grading import hybrid, hybrid_driver
from course.grading.halo import Case

pytestmark = [pytest.mark.timeout(300)]
needs_mpi = pytest.mark.skipif(shutil.which("mpiexec") is None, reason="no mpiexec")

KEY = "08_hybrid"
SUFFIX = {"c": ".c", "fortran": ".f90", "python": ".py"}


def changed(text: str, old: str, new: str) -> str:
    assert old in text, f"{old!r} is not in the solution"
    return text.replace(old, new)


def cell_cases(grade_id: str) -> list:
    """The Case(...) expressions of a graded cell, in order (visible ones first)."""
    return [eval(text, {"Case": Case})                     # noqa: S307 - the course's own cell
            for text in re.findall(r"Case\((?:[^()]|\([^()]*\))*\)", solution_cell(KEY, grade_id))]


def apply_cases() -> list:
    """The (Case, sweeps) of the notebook's graded cell of task 2, visible ones first."""
    cell = solution_cell(KEY, "test_asdd_apply")
    return [eval(text, {"Case": Case})                     # noqa: S307 - the course's own cell
            for text in re.findall(r"\(Case\((?:[^()]|\([^()]*\))*\), \([\d, ]+\)\)", cell)]


BLOCK_CASES = cell_cases("test_internal_block")
APPLY_CASES = apply_cases()


def test_the_notebook_has_its_cases():
    assert len(BLOCK_CASES) == 4 and len(APPLY_CASES) == 6, (BLOCK_CASES, APPLY_CASES)
    assert {c.ranks for c, _ in APPLY_CASES} == {2, 3, 4}
    assert {c.partition for c, _ in APPLY_CASES} == {"blocks", "metis", "random"}
    assert all(sweeps == (1, 2, 3) for _, sweeps in APPLY_CASES[:3])       # visible: K = 1, 2, 3
    assert {k for _, sweeps in APPLY_CASES[3:] for k in sweeps} - {1, 2, 3}  # hidden: more K
    # some ranks give their external rows too, and the rows are shuffled
    (_, n, row_ptr, col, _, n_local), (_, n1, row_ptr1, *_) = hybrid.local_matrices(
        BLOCK_CASES[0])[:2]
    assert row_ptr.size - 1 == n_local > n and row_ptr1.size - 1 == n1
    first = col[row_ptr[0]:row_ptr[1]]
    assert not np.array_equal(first, np.sort(first))


# --- task 1 --------------------------------------------------------------------------------------

def python_internal_block(text: str | None = None):
    namespace = {"np": np}
    exec(text or solution_cell(KEY, "internal_block"), namespace)
    return namespace["internal_block"]


def test_internal_block_solution_passes():
    hybrid.check_internal_block(python_internal_block(), BLOCK_CASES)


PY_FILTER = "            if col[k] < n_internal:\n"


@pytest.mark.parametrize("old, new, expected", [
    (PY_FILTER, "            if True:\n",                                       # no filter
     "row 0 keeps column 3, an external node"),
    ("col[k] < n_internal", "col[k] <= n_internal",
     "keeps column 3, an external node (the internal nodes are the columns 0 .. 2, the external "
     "ones come after them): A_ii drops the couplings to external nodes (a test `<= n_internal`?"),
    (PY_FILTER, "            if col[k] < n_internal and col[k] != i:\n",       # no diagonal
     "row 0: the diagonal entry (column 0) is missing"),
    ("block_ptr[i + 1] = len(block_col)", "block_ptr[i + 1] = row_ptr[i + 1]",
     "block_ptr is the input's row_ptr: count the entries each row KEEPS instead"),
    ("    for i in range(n_internal):", "    for i in range(len(row_ptr) - 1):",
     "not part of the block"),
    ("        for k in range(row_ptr[i], row_ptr[i + 1]):",
     "        for k in sorted(range(row_ptr[i], row_ptr[i + 1]), key=lambda k: col[k]):",
     "keep the entries in the order of the input's row (do not sort them)"),
    ("    ### BEGIN SOLUTION\n",
     "    ### BEGIN SOLUTION\n    from course.parallel import precond, solve\n"
     "    n = n_internal\n    a = precond.internal_block(solve.LocalMatrix(row_ptr[:n + 1], "
     "col[:row_ptr[n]], val[:row_ptr[n]], len(row_ptr) - 1))\n"
     "    return a.row_ptr, a.col_idx, a.val\n",
     "the course's own course.parallel.precond.internal_block"),
])
def test_wrong_internal_block_fails(old, new, expected):
    if old == "    for i in range(n_internal):":           # the offsets of every row, too
        text = changed(changed(solution_cell(KEY, "internal_block"), old, new),
                       "np.zeros(n_internal + 1", "np.zeros(len(row_ptr)")
    else:
        text = changed(solution_cell(KEY, "internal_block"), old, new)
    with pytest.raises(AssertionError) as info:
        hybrid.check_internal_block(python_internal_block(text), BLOCK_CASES)
    assert expected in str(info.value), str(info.value)


def graded_internal_block(tmp_path, monkeypatch, lang: str, text: str) -> None:
    """The notebook's graded cell of task 1 (visible and hidden checks) on `text` in `lang`,
    written where the %%writefile cell writes it."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / hybrid.INTERNAL_BLOCK_FILES[lang]).write_text(text)
    exec(solution_cell(KEY, "test_internal_block"),
         {"hybrid": hybrid, "Case": Case, "TASK1_LANGUAGE": lang, "internal_block": None})


@pytest.mark.parametrize("lang", ["c", "fortran"])
def test_compiled_internal_block_solution_passes(tmp_path, monkeypatch, lang):
    graded_internal_block(tmp_path, monkeypatch, lang,
                          written_file(KEY, f"internal_block_{lang}"))


@pytest.mark.parametrize("lang, old, new, expected", [
    ("fortran", "if (col(k) <= n_internal) then", "if (col(k) < n_internal) then",
     "row 2 (1-based) misses column 3, an internal node (columns 1 .. 3)"),
    ("fortran", "block_ptr(1) = 1", "block_ptr(1) = 0",                # offsets from 0
     "block_ptr(1) is 0, expected 1 (in Fortran the offsets count from 1)"),
    ("c", "    return nnz;", "    *(volatile int *)0 = nnz;\n    return nnz;",
     "internal_block crashed with SIGSEGV"),
    ("c", None, None, "block_ptr[0] is never written"),                 # the untouched stub
])
def test_wrong_compiled_internal_block_fails(tmp_path, monkeypatch, lang, old, new, expected):
    text = written_file(KEY, f"internal_block_{lang}")
    if old is None:
        text = re.sub(r"/\* ### BEGIN SOLUTION.*END SOLUTION \*/", "", text, flags=re.S)
    else:
        text = changed(text, old, new)
    with pytest.raises(AssertionError) as info:
        graded_internal_block(tmp_path, monkeypatch, lang, text)
    assert expected in str(info.value), str(info.value)
    if "SIGSEGV" in expected:
        assert "the hand-made rank" in str(info.value), str(info.value)


def test_wrong_task1_language():
    with pytest.raises(AssertionError, match="TASK1_LANGUAGE must be"):
        hybrid.compiled_internal_block("julia")


# --- task 2 --------------------------------------------------------------------------------------

def solution_file(lang: str) -> str:
    return written_file(KEY, f"asdd_apply_{lang}")


def prepared(tmp_path: Path, lang: str, text: str, name: str) -> tuple[str, Path]:
    folder = tmp_path / name
    folder.mkdir()
    path = folder / ("asdd_apply" + SUFFIX[lang])
    path.write_text(text)
    return lang, hybrid.prepare_apply(path, lang)


@needs_mpi
def test_asdd_solutions_pass(tmp_path):
    """The three solutions on every case of the notebook, in one job: z is the course's to
    rounding (100 times below the check's bound: here bit for bit), the counts and the PCG's
    iterations the course's."""
    variants = [prepared(tmp_path, lang, solution_file(lang), lang)
                for lang in ("c", "fortran", "python")]
    job = hybrid.run_apply_job(variants, APPLY_CASES, timeout=200)
    for j, (lang, _) in enumerate(variants):
        hybrid.judge(job, APPLY_CASES, lang, 20.0, variant=j)
        results = [e for e in job.events if e["event"] == "result" and e["variant"] == j]
        assert len(results) == len(APPLY_CASES), job.output[-2000:]
        for result in results:
            assert result["iterations"] == result["reference_iterations"] > 3, result
            for app in result["applications"]:
                assert app["difference"] <= hybrid_driver.Z_RTOL / 100, (lang, app)


PY_SWEEP = "        z = z + local_solve(r - matvec(z))     # one halo exchange per extra sweep\n"
PY_FIRST = "    z = local_solve(r)                         # the first sweep: z = B r\n"
FROM_ZERO = "    z = np.zeros_like(r)\n"
# (lang, [(old, new), ...], what the message says): the typical wrong answers
WRONG = [
    ("python", [(PY_SWEEP, "        z = local_solve(r - matvec(z))\n")],        # z = B t
     "K = 2: z differs from the course's asdd-ic0 by"),
    ("python", [(PY_SWEEP, "        z = z - local_solve(r - matvec(z))\n")],    # subtracted
     "K = 1 is right, so look at the corrections"),
    ("python", [(PY_FIRST, FROM_ZERO), ("range(sweeps - 1)", "range(sweeps)")],  # K products
     "1 product for K = 1: the first sweep needs none, z starts as B r (K sweeps make K - 1 = 0 "
     "calls of matvec, each a halo exchange)"),
    ("python", [("range(sweeps - 1)", "range(sweeps)")],                        # K + 1 solves
     "2 local solves for K = 1, where K sweeps make exactly 1: one too many"),
    ("python", [(PY_FIRST, FROM_ZERO)],                                          # first skipped
     "0 local solves for K = 1, where K sweeps make exactly 1: one too few"),
    ("python", [(PY_SWEEP, "        r -= matvec(z)\n        z = z + local_solve(r)\n")],
     "K = 2: asdd_apply changed r, its input (r -= ..."),
    ("c", [("            t[i] = r[i] - t[i];\n        local_solve(t, bt);",
            "            ((double *)r)[i] -= t[i];\n        local_solve(r, bt);")],
     "K = 2: asdd_apply changed r, its input (r is const: a cast"),
    ("c", [("    local_solve(r, z);", "    local_solve(r, bt);\n"
            "    for (int i = 0; i < n; i++)\n        z[i] += bt[i];")],           # z += on garbage
     "K = 1: z holds NaN or infinity (rank 0: z[0] is NaN, expected "),
    ("fortran", [("do k = 2, sweeps", "do k = 1, sweeps")],                     # K + 1 solves
     "2 local solves for K = 1"),
]


@needs_mpi
def test_wrong_sweeps_fail_with_their_message(tmp_path):
    """Every typical wrong answer, in one job (each variant stops at its first wrong case)."""
    case = [(Case(2, "blocks", (4, 3, 2), seed=7), (1, 2, 3))]
    variants = []
    for j, (lang, edits, _) in enumerate(WRONG):
        text = solution_file(lang)
        for old, new in edits:
            text = changed(text, old, new)
        variants.append(prepared(tmp_path, lang, text, f"wrong{j}"))
    job = hybrid.run_apply_job(variants, case, timeout=200)
    for j, (lang, _, expected) in enumerate(WRONG):
        with pytest.raises(AssertionError) as info:
            hybrid.judge(job, case, lang, 20.0, variant=j)
        assert expected in str(info.value), (j, str(info.value))
        assert "on the 4 x 3 x 2 element mesh cut into 2 blocks (2 ranks)" in str(info.value)


@needs_mpi
@pytest.mark.parametrize("lang, old, new, expected", [
    ("c", "    free(t);\n", "    free(t);\n    *(volatile double *)0 = z[0];\n", "SIGSEGV"),
    ("python", "    ### BEGIN SOLUTION\n",
     "    ### BEGIN SOLUTION\n    from course.parallel.precond import preconditioner\n"
     "    preconditioner(None, 'asdd-ic0', matvec, sweeps)\n",
     "the course's own course.parallel.precond.preconditioner"),
])
def test_crash_and_the_course_preconditioner_fail(tmp_path, lang, old, new, expected):
    path = tmp_path / ("asdd_apply" + SUFFIX[lang])
    path.write_text(changed(solution_file(lang), old, new))
    with pytest.raises(AssertionError) as info:
        hybrid.check_asdd_apply(path, lang, [(Case(2, "blocks", (4, 3, 2)), (1,))])
    assert expected in str(info.value), str(info.value)


def test_mpi4py_is_refused(tmp_path):
    path = tmp_path / "asdd_apply.py"
    path.write_text(changed(solution_file("python"), "import numpy as np\n",
                            "import numpy as np\nfrom mpi4py import MPI\n"))
    with pytest.raises(AssertionError, match=r"imports mpi4py \(line 3\)"):
        hybrid.check_asdd_apply(path, "python", APPLY_CASES[:1])


def test_wrong_language_name():
    with pytest.raises(AssertionError, match="LANGUAGE must be one of"):
        hybrid.check_asdd_apply("x.jl", "julia", APPLY_CASES[:1])


def application(sweeps=2, solves=2, products=1, difference=0.0, **more) -> dict:
    return {"sweeps": sweeps, "solves": solves, "products": products, "same_on_all_ranks": True,
            "r_changed": False, "difference": difference, "worst": None, **more}


def test_verdicts():
    assert hybrid_driver.verdict(application()) is None
    assert hybrid_driver.verdict(application(products=2)) == "products"
    assert hybrid_driver.verdict(application(solves=3)) == "solves"
    assert hybrid_driver.verdict(application(r_changed=True)) == "r_changed"
    assert hybrid_driver.verdict(application(same_on_all_ranks=False)) == "uneven"
    assert hybrid_driver.verdict(application(difference=1e-11)) == "values"
    assert hybrid_driver.verdict(application(difference=float("nan"))) == "values"
    case = Case(2, "blocks", (4, 3, 2))
    right = {"applications": [application()], "iterations": 9, "reference_iterations": 9,
             "pcg_sweeps": 2}
    assert hybrid.message(right, case, "c") is None
    text = hybrid.message({**right, "iterations": 12}, case, "c")
    assert "PCG with your asdd_apply (K = 2) as preconditioner took 12 iterations where the " \
           "course's asdd-ic0 takes 9" in text, text


@needs_mpi
def test_endless_loop_is_stopped(tmp_path):
    path = tmp_path / "asdd_apply.py"
    path.write_text(changed(solution_file("python"), PY_FIRST,
                            PY_FIRST + "    while True:\n        __import__('time').sleep(0.1)\n"))
    with pytest.raises(AssertionError) as info:
        hybrid.check_asdd_apply(path, "python", [(Case(2, "blocks", (4, 3, 2)), (1,))],
                                apply_timeout=4.0)
    assert "did not finish within 4 s on the 4 x 3 x 2 element mesh" in str(info.value), \
        str(info.value)
