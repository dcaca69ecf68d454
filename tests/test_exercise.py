"""course.grading.exercise: learner kernels are compiled and run in a child process, so that a wrong, a
crashing, an endless or a non-compiling kernel each becomes a clear AssertionError."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from conftest import solution_cell
from course.grading import exercise

pytestmark = pytest.mark.timeout(300)

MATVEC_C = """
void crs_matvec(int n, const int *row_ptr, const int *col_idx, const double *val,
                const double *x, double *y)
{
    for (int i = 0; i < n; i++) {
        double sum = 0.0;
        for (int k = row_ptr[i]; k < row_ptr[i + 1]; k++)
            sum += val[k] * x[col_idx[k]];
        y[i] = %s;
    }
}
"""

MATVEC_F = """
subroutine crs_matvec(n, row_ptr, col_idx, val, x, y) bind(C, name="crs_matvec")
  use iso_c_binding, only: c_int, c_double
  implicit none
  integer(c_int), value, intent(in) :: n
  integer(c_int), intent(in) :: row_ptr(n + 1), col_idx(*)
  real(c_double), intent(in) :: val(*), x(n)
  real(c_double), intent(out) :: y(n)
  integer :: i, k
  do i = 1, n
    y(i) = 0.0_c_double
    do k = row_ptr(i), row_ptr(i + 1) - 1
      y(i) = y(i) + val(k) * x(col_idx(k))
    end do
  end do
end subroutine crs_matvec
"""


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_a_correct_c_kernel_passes(tmp_path):
    exercise.check_crs_matvec(write(tmp_path, "ok.c", MATVEC_C % "sum"), "c")


def test_a_correct_fortran_kernel_passes(tmp_path):
    exercise.check_crs_matvec(write(tmp_path, "ok.f90", MATVEC_F), "fortran")


@pytest.mark.parametrize("body, message", [
    ("2.0 * sum", "crs_matvec is wrong"),
    ("sum; *(volatile double *)0 = sum", "SIGSEGV"),
    ("sum; for (volatile int spin = 1; spin; ) {}", "did not finish"),
    ("sum +", "does not compile"),
])
def test_a_broken_kernel_fails_with_a_clear_message(tmp_path, body, message):
    source = write(tmp_path, "broken.c", MATVEC_C % body)
    with pytest.raises(AssertionError, match=message):
        exercise.check_crs_matvec(source, "c", timeout=3.0)


def test_missing_source_and_wrong_suffix(tmp_path):
    with pytest.raises(AssertionError, match="run the %%writefile cell"):
        exercise.check_crs_matvec(tmp_path / "absent.c", "c")
    with pytest.raises(AssertionError, match="must end in .f90"):
        exercise.check_crs_matvec(write(tmp_path, "k.c", MATVEC_F), "fortran")


def test_call_isolated_passes_scalars_arrays_and_the_result(tmp_path):
    source = write(tmp_path, "axpy.c", """
int axpy(int n, double a, const double *x, double *y)
{
    for (int i = 0; i < n; i++)
        y[i] += a * x[i];
    return n + 1;
}
""")
    lib = exercise.compile_kernel(source, "c")
    x, y = np.arange(4.0), np.ones(4)
    result, arrays = exercise.call_isolated(lib, "axpy", [4, 0.5, x, y], returns="int")
    assert result == 5
    np.testing.assert_array_equal(arrays[3], 1.0 + 0.5 * x)
    np.testing.assert_array_equal(y, np.ones(4))        # the caller's arrays are not touched


SCALARS_C = """
#include <stdio.h>
double scaled(int k, double x)
{
    printf("a learner's debugging output\\n");
    fflush(stdout);
    if (k < 0)
        *(volatile double *)0 = x;
    return k * x;
}
"""


def test_a_double_result_comes_back_exactly(tmp_path):
    lib = exercise.compile_kernel(write(tmp_path, "scaled.c", SCALARS_C), "c")
    result, _ = exercise.call_isolated(lib, "scaled", [3, 0.1], returns="double")
    assert result == 3 * 0.1 and isinstance(result, float)
    with pytest.raises(ValueError, match="returns must be one of"):
        exercise.call_isolated(lib, "scaled", [3, 0.1], returns="float")


def test_a_served_function_answers_every_call_in_one_child(tmp_path):
    """Exact doubles both ways, what the function prints kept out of the answers; a crash is an
    AssertionError, and the next call gets a fresh child."""
    lib = exercise.compile_kernel(write(tmp_path, "scaled.c", SCALARS_C), "c")
    with exercise.ServedFunction(lib, "scaled", "id", "double") as scaled:
        assert [scaled(k, 0.1) for k in range(50)] == [k * 0.1 for k in range(50)]
        first = scaled._process.pid
        assert scaled(7, 1e-300) == 7e-300 and scaled._process.pid == first
        with pytest.raises(AssertionError, match="scaled crashed with SIGSEGV"):
            scaled(-1, 1.0)
        assert scaled(2, 0.25) == 0.5
    with pytest.raises(AssertionError, match="could not be called: .*undefined symbol: absent"):
        exercise.ServedFunction(lib, "absent", "d", "double")(1.0)


# --- lecture 03_openmp: OpenMP kernels, several threads, repeated runs ----------------------------

SOLUTION_03 = (Path(__file__).resolve().parent.parent / "solutions" / "03_openmp"
               / "03_openmp_exercise.ipynb")


def notebook_file(grade_id: str) -> str:
    """The file that the %%writefile cell `grade_id` of the 03_openmp solution notebook writes."""
    import nbformat

    nb = nbformat.read(SOLUTION_03, as_version=4)
    cell = next(c for c in nb.cells
                if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id)
    first, rest = cell.source.split("\n", 1)
    assert first.startswith("%%writefile"), first
    return rest + "\n"


THREADS_C = """
#ifdef _OPENMP
#include <omp.h>
#endif
int threads(double *count)
{
    count[0] += 1.0;                       /* a fresh copy in every run: always 1 */
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return -1;
#endif
}
"""


def test_openmp_is_a_compile_option_and_threads_reach_the_child(tmp_path):
    source = write(tmp_path, "threads.c", THREADS_C)
    serial = exercise.compile_kernel(source, "c")
    parallel = exercise.compile_kernel(source, "c", openmp=True)
    assert serial != parallel, "the cache must tell the OpenMP build from the plain one"
    assert exercise.call_isolated(serial, "threads", [np.zeros(1)], returns="int",
                                  threads=3)[0] == -1
    assert not exercise.uses_openmp(serial)
    for t in (1, 3):
        assert exercise.call_isolated(parallel, "threads", [np.zeros(1)], returns="int",
                                      threads=t)[0] == t


def test_run_isolated_repeats_on_fresh_copies_and_keeps_what_is_asked(tmp_path):
    lib = exercise.compile_kernel(write(tmp_path, "threads.c", THREADS_C), "c", openmp=True)
    runs = exercise.run_isolated(lib, "threads", [np.zeros(1)], returns="int", threads=2,
                                 repeat=4, env={"OMP_WAIT_POLICY": "passive"})
    assert [r.result for r in runs] == [2] * 4
    assert [r.arrays[0][0] for r in runs] == [1.0] * 4
    assert all(r.seconds >= 0.0 for r in runs)
    (run,) = exercise.run_isolated(lib, "threads", [np.zeros(1)], returns="int", keep=[])
    assert run.arrays == [None]


def test_a_crash_in_a_repeated_run_names_the_run(tmp_path):
    source = write(tmp_path, "third.c", """
void third(double *calls)
{
    static int count = 0;
    if (++count == 3)
        *(volatile double *)0 = calls[0];
}
""")
    lib = exercise.compile_kernel(source, "c")
    with pytest.raises(AssertionError, match="SIGSEGV in run 3 of 5"):
        exercise.run_isolated(lib, "third", [np.zeros(1)], repeat=5)


def test_random_ell_has_rows_of_every_length_and_the_course_padding():
    d, item, amat, x = exercise.random_ell(200, seed=5)
    item, amat = item.reshape(200, 6), amat.reshape(200, 6)
    real = (item != np.arange(200)[:, None]) | (amat != 0.0)
    assert set(real.sum(axis=1)) == set(range(7))
    assert np.all(d > 0) and x.shape == (200,)
    assert exercise.random_ell(1, seed=5)[1].tolist() == [0] * 6


ELL_C = """
void ell_matvec(int n, const double *d, const int *item_ell, const double *amat_ell,
                const double *x, double *y)
{
#pragma omp parallel for
    for (int i = 0; i < %s; i++) {
        double s = %s;
        for (int m = 0; m < 6; m++)
            s += amat_ell[6 * i + m] * x[item_ell[6 * i + m]]%s;
        y[i] = s;
    }
}
"""
ELL_C_OK = ("n", "d[i] * x[i]", "")

# rows split by hand: with 2 threads on 7 rows, the last row belongs to no thread
ELL_C_SPLIT = """
#include <omp.h>
void ell_matvec(int n, const double *d, const int *item_ell, const double *amat_ell,
                const double *x, double *y)
{
#pragma omp parallel
    {
        const int chunk = n / omp_get_num_threads(), first = chunk * omp_get_thread_num();
        for (int i = first; i < first + chunk; i++) {
            double s = d[i] * x[i];
            for (int m = 0; m < 6; m++)
                s += amat_ell[6 * i + m] * x[item_ell[6 * i + m]];
            y[i] = s;
        }
    }
}
"""


def test_the_solution_ell_kernels_pass(tmp_path):
    for lang, grade_id, suffix in (("c", "ell_matvec_c", ".c"),
                                   ("fortran", "ell_matvec_fortran", ".f90")):
        exercise.check_ell_matvec(write(tmp_path, f"ell_matvec{suffix}", notebook_file(grade_id)),
                                  lang)


@pytest.mark.parametrize("source, message", [
    (ELL_C % ("n - 1", "d[i] * x[i]", ""), "OMP_NUM_THREADS=1 is wrong .* row 6 gives nan"),
    (ELL_C % ("n", "0.0", ""), "OMP_NUM_THREADS=1 is wrong"),                 # no diagonal
    (ELL_C % ("n", "d[i] * x[i]", " * (item_ell[6 * i + m] != 0)"),           # column 0 skipped
     "OMP_NUM_THREADS=1 is wrong"),
    (ELL_C_SPLIT, "OMP_NUM_THREADS=2 is wrong .* right with OMP_NUM_THREADS=1"),
    ((ELL_C % ELL_C_OK).replace("#pragma omp parallel for", ""), "runs on one thread only"),
    ((ELL_C % ELL_C_OK).replace("y[i] = s;", "y[i] = s;  for (volatile int k = 1; k; ) {}"),
     "did not finish"),
])
def test_a_wrong_ell_kernel_fails_with_a_clear_message(tmp_path, source, message):
    with pytest.raises(AssertionError, match=message):
        exercise.check_ell_matvec(write(tmp_path, "ell.c", source), "c", seeds=(1,),
                                  sizes=(7,), poisson=(), timeout=3.0)


def test_a_fortran_ell_kernel_that_misses_the_sixth_entry_fails(tmp_path):
    source = notebook_file("ell_matvec_fortran").replace("do m = 1, 6", "do m = 1, 5")
    with pytest.raises(AssertionError, match=r"is wrong for .* \(1-based\)"):
        exercise.check_ell_matvec(write(tmp_path, "ell.f90", source), "fortran")


def test_the_course_library_can_be_called_in_a_child():
    d, item, amat, x = exercise.random_ell(30, seed=2)
    _, arrays = exercise.call_isolated(exercise.course_library("c"), "ell_matvec",
                                       [30, d, item, amat, x, np.zeros(30)], threads=2)
    expected = d * x + (amat.reshape(30, 6) * x[item.reshape(30, 6)]).sum(axis=1)
    np.testing.assert_allclose(arrays[5], expected, rtol=1e-12)


@pytest.mark.parametrize("lang, suffix", [("c", ".c"), ("fortran", ".f90")])
def test_the_solution_cg_passes(tmp_path, lang, suffix):
    exercise.check_race_free_cg(write(tmp_path, f"cg{suffix}", notebook_file(f"cg_fixed_{lang}")),
                                lang, sizes=((6, 5, 4), (5, 4, 3, 0.5, 1.0, 2.0)), repeat=4)


def test_the_racy_and_fixed_cg_are_twins_in_c_and_fortran():
    """The Fortran racy CG races in the same places as the C one: every shared scalar is written
    between the loops by every thread, the loop counter is private."""
    racy_f, fixed_f = notebook_file("cg_racy_fortran"), notebook_file("cg_fixed_fortran")
    assert "!$omp parallel private(i, m, s, k)" in racy_f and "!$omp single" not in racy_f
    assert racy_f.count("!$omp do ") == notebook_file("cg_racy_c").count("#pragma omp for ") == 6
    assert fixed_f.count("!$omp single") == 4 == notebook_file("cg_fixed_c").count("omp single")


@pytest.mark.parametrize("old, new, message", [
    ("beta = iter == 0 ? 0.0 : rho / rho_old;", "beta = 0.0;",           # steepest descent
     "returned [0-9]+ iterations .* OMP_NUM_THREADS=1, run 1 of 3; the course's pcg_v3 needs"),
    ("return iter;", "return iter + 1;", "returned [0-9]+ iterations"),
    ("alpha = rho / pq;", "alpha = rho / pq;\n                for (volatile int s = 1; s; ) {}",
     "did not finish within 3 s"),
    ("*relres = res;", "*relres = res;\n    static int calls = 0;\n    x[0] += 1e-14 * ++calls;",
     "different result in .* OMP_NUM_THREADS=1, run 2 of 3 than in run 1"),
])
def test_a_wrong_cg_fails_with_a_clear_message(tmp_path, old, new, message):
    source = notebook_file("cg_fixed_c")
    assert old in source
    with pytest.raises(AssertionError, match=message):
        exercise.check_race_free_cg(write(tmp_path, "cg.c", source.replace(old, new)), "c",
                                    threads=(1, 2), repeat=3, timeout=3.0)


@pytest.mark.parametrize("lang, name, old, new", [
    ("c", "cg.c", "#pragma omp for schedule(static) reduction(+ : rr)\n",
     "#pragma omp for schedule(dynamic, 4) \\\n    reduction(+ : rr)\n"),
    ("fortran", "cg.f90", "!$omp do schedule(static) reduction(+ : pq)",
     "!$omp do schedule(guided) &\n    !$omp& reduction(+ : pq)"),
])
def test_a_dynamic_schedule_on_a_reduction_fails_every_time(tmp_path, lang, name, old, new):
    """Its rounding changes from run to run, so it would fail the bitwise check now and then:
    it is refused from the source, every time, with the line; elsewhere it is fine."""
    source = notebook_file(f"cg_fixed_{lang}")
    assert old in source
    wrong = write(tmp_path, name, source.replace(old, new, 1))
    line = source[:source.index(old)].count("\n") + 1
    with pytest.raises(AssertionError, match=rf"{name}, line {line}: a loop with a reduction and "
                                             "a dynamic or guided schedule"):
        exercise.check_race_free_cg(wrong, lang, threads=(1,), repeat=1)
    right = source.replace("schedule(static)\n", "schedule(dynamic)\n", 1)    # no reduction
    assert right != source and not exercise.unreproducible_reductions(write(tmp_path, name, right),
                                                                      lang)


@pytest.mark.parametrize("old, new, message", [
    ("beta = rho / rho_old", "beta = 0.0_c_double",                      # steepest descent
     "returned [0-9]+ iterations .* OMP_NUM_THREADS=1, run 1 of 3; the course's pcg_v3 needs"),
    ("x(i) = x(i) + alpha * p(i)", "x(i) = x(i) + alpha * p(i) * merge(2, 1, i == 7)",
     None),                                  # iterations may still agree: checked below
    ("relres = res", "relres = 2 * res", r"relative residual [0-9.e-]+ for"),
])
def test_a_wrong_fortran_cg_fails_with_a_clear_message(tmp_path, old, new, message):
    source = notebook_file("cg_fixed_fortran")
    assert old in source
    with pytest.raises(AssertionError) as err:
        exercise.check_race_free_cg(write(tmp_path, "cg.f90", source.replace(old, new)),
                                    "fortran", threads=(1, 2), repeat=3, timeout=5.0)
    text = str(err.value)
    if message:
        assert re.search(message, text), text
    assert "np.float64(" not in text and "np.int" not in text, text


def test_the_racy_cg_is_right_with_one_thread_and_any_failure_names_the_threads(tmp_path):
    """The racy CG given to learners is the right algorithm on one thread. With more, a race may
    or may not strike in a given run (it does on most machines, not on all): when the check
    fails, it must say with how many threads."""
    for lang, suffix in (("c", ".c"), ("fortran", ".f90")):
        racy = write(tmp_path, f"cg_racy{suffix}", notebook_file(f"cg_racy_{lang}"))
        exercise.check_race_free_cg(racy, lang, threads=(1,), repeat=3)
        try:
            exercise.check_race_free_cg(racy, lang, threads=(2, 4, 8), repeat=10, timeout=5.0)
        except AssertionError as err:
            assert re.search(r"OMP_NUM_THREADS=[248]", str(err)), str(err)


# --- messages in the learner's language ----------------------------------------------------------

def test_plain_numbers_and_indices_in_the_learners_language():
    assert exercise.plain(np.float64(1.5)) == "1.5"
    assert exercise.plain(np.array([2.25])[0]) == "2.25"
    assert exercise.plain(np.int32(3)) == "3" and exercise.plain(7) == "7"
    assert exercise.plain(np.float64("nan")) == "nan"
    assert exercise.entry("y", 3, "c") == "y[3]" and exercise.entry("y", 3, "fortran") == "y(4)"
    assert exercise.row_label(0, "c") == "row 0"
    assert exercise.row_label(0, "fortran") == "row 1 (1-based)"


def test_a_wrong_fortran_crs_matvec_names_a_1_based_row(tmp_path):
    """Only the last row is wrong: C would call it row n-1, Fortran row n."""
    source = MATVEC_F.replace("  end do\nend subroutine",
                              "  end do\n  y(n) = y(n) + 1.0_c_double\nend subroutine")
    assert source != MATVEC_F
    with pytest.raises(AssertionError) as err:
        exercise.check_crs_matvec(write(tmp_path, "last.f90", source), "fortran", seeds=(1,),
                                  sizes=(7,))
    text = str(err.value)
    assert "row 7 (1-based) gives" in text, text
    assert "np.float64(" not in text, text


def test_a_wrong_c_crs_matvec_names_a_0_based_row_and_plain_numbers(tmp_path):
    source = (MATVEC_C % "sum").replace("y[i] = sum;", "y[i] = sum + (i == n - 1);")
    with pytest.raises(AssertionError) as err:
        exercise.check_crs_matvec(write(tmp_path, "last.c", source), "c", seeds=(1,), sizes=(7,))
    text = str(err.value)
    assert re.search(r"row 6 gives -?[0-9.e+-]+, expected -?[0-9.e+-]+$", text), text
    assert "np.float64(" not in text, text


def test_a_wrong_fortran_ell_matvec_names_a_1_based_row(tmp_path):
    source = notebook_file("ell_matvec_fortran").replace("y(i) = s", "y(i) = s + merge(1, 0, i == n)")
    with pytest.raises(AssertionError) as err:
        exercise.check_ell_matvec(write(tmp_path, "ell.f90", source), "fortran", seeds=(1,),
                                  sizes=(7,), poisson=(), threads=(1,))
    text = str(err.value)
    assert "row 7 (1-based) gives" in text and "np.float64(" not in text, text


def test_a_wrong_fortran_cg_names_a_1_based_entry_of_x(tmp_path):
    """A solver that spoils x(1) after converging: the message names x(1), as Fortran does."""
    source = notebook_file("cg_fixed_fortran").replace(
        "relres = res", "relres = res\n  x(1) = x(1) + 1.0_c_double")
    with pytest.raises(AssertionError) as err:
        exercise.check_race_free_cg(write(tmp_path, "cg.f90", source), "fortran", threads=(1,),
                                    repeat=1)
    text = str(err.value)
    assert "x(1) = " in text and "pcg_v3 gives" in text, text
    assert "np.float64(" not in text, text


FEM3D_SOLUTION = (Path(__file__).resolve().parent.parent / "solutions" / "02_fem3d"
                  / "02_fem3d_exercise.ipynb")


@pytest.mark.parametrize("lang", ["c", "fortran"])
def test_a_wrong_fem3d_assemble_names_the_entry_in_the_learners_language(tmp_path, lang):
    """rhs doubled: the first wrong entry is rhs[k] in C, rhs(k+1) in Fortran; no NumPy reprs."""
    import nbformat

    nb = nbformat.read(FEM3D_SOLUTION, as_version=4)
    cell = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id")
                == f"fem3d_assemble_{lang}")
    source = cell.source.split("\n", 1)[1]
    suffix = {"c": ".c", "fortran": ".f90"}[lang]
    broken = {"c": ("rhs[node[a]] += fe[a];", "rhs[node[a]] += 2.0 * fe[a];"),
              "fortran": ("rhs(elements(a, e)) + fe(a)", "rhs(elements(a, e)) + 2 * fe(a)")}[lang]
    assert broken[0] in source, broken
    with pytest.raises(AssertionError) as err:
        exercise.check_fem3d_assemble(write(tmp_path, f"fem{suffix}", source.replace(*broken)),
                                      lang, sizes=((1, 1, 1),))
    text = str(err.value)
    expected = r"rhs\(\d+\) is" if lang == "fortran" else r"rhs\[\d+\] is"
    assert re.search(expected, text), text
    assert "np.float64(" not in text, text


def test_references_are_blocked_however_they_are_reached_and_restored_after():
    """While a learner's answer runs, the course's reference raises by module attribute, by a
    name imported earlier, as a classmethod, and through exercise.reference; afterwards (also
    after an error inside) everything works again."""
    from course import sparse
    from course.fem import assembly
    from course.grading import exercise
    from course.fem.assembly import fem1d_element

    ways = {"attribute": lambda: assembly.fem1d_element(1.0, 1.0, 0.0),
            "imported name": lambda: fem1d_element(1.0, 1.0, 0.0),
            "classmethod": lambda: sparse.ELL.from_crs(sparse.CRS(np.zeros(2, np.int32),
                                                                  np.zeros(0, np.int32),
                                                                  np.zeros(0)), 2),
            "exercise.reference": lambda: exercise.reference(assembly.fem1d_element)}
    kept = exercise.course_versions("01_fem1d", "element_matrix")["element_matrix"]
    with pytest.raises(RuntimeError):
        with exercise.references_blocked(assembly.fem1d_element, sparse.ELL.from_crs):
            for way, call in ways.items():
                with pytest.raises(exercise.ReferenceUsed):
                    call()
            assert np.allclose(kept(0.5, 1.0), [[2, -2], [-2, 2]])   # made before: works
            raise RuntimeError("the learner's code fails inside")
    for call in ways.values():
        call()


# --- 03_openmp task 1: crs_to_ell in Python, C or Fortran, one check for all -----------------------

CRS_TO_ELL_FILES = {"c": "crs_to_ell.c", "fortran": "crs_to_ell.f90"}
UNSEEN_CRS = {"random": ((43, 5), (44, 40)), "poisson": ((3, 3, 2),)}   # small and quick


def crs_to_ell_answer(tmp_path, lang: str, old=(), new=()):
    """The solution's crs_to_ell in `lang`, with each text of `old` (one, or a tuple) replaced by
    the text of `new` at its place: the Python function, or the compiled one as the test cell
    gets it."""
    text = solution_cell("03_openmp", "crs_to_ell") if lang == "python" else \
        notebook_file(f"crs_to_ell_{lang}")
    old, new = ((old,), (new,)) if isinstance(old, str) else (old, new)
    for before, after in zip(old, new):
        assert before in text, before
        text = text.replace(before, after)
    if lang == "python":
        namespace = {"np": np}
        exec(text, namespace)
        return namespace["crs_to_ell"]
    source = write(tmp_path, CRS_TO_ELL_FILES[lang], text)
    return exercise.compiled_crs_to_ell(source, lang, timeout=5.0)


@pytest.mark.parametrize("lang", ["python", "c", "fortran"])
def test_the_crs_to_ell_test_cell_gives_the_solution_full_marks(tmp_path, monkeypatch, lang):
    """The test cell, hidden tests included, picks the answer by TASK1_LANGUAGE and passes the
    solution of every language (the C and Fortran files where the %%writefile cells put them)."""
    from course import sparse
    from course.fem import fvm

    monkeypatch.chdir(tmp_path)
    for other, name in CRS_TO_ELL_FILES.items():
        write(tmp_path, name, notebook_file(f"crs_to_ell_{other}"))
    namespace = {"np": np, "exercise": exercise, "sparse": sparse, "fvm": fvm,
                 "TASK1_LANGUAGE": lang, "crs_to_ell": crs_to_ell_answer(tmp_path, "python")}
    exec(solution_cell("03_openmp", "test_crs_to_ell"), namespace)


def test_the_crs_to_ell_test_cell_refuses_an_unknown_language(tmp_path):
    namespace = {"np": np, "exercise": exercise, "TASK1_LANGUAGE": "rust", "crs_to_ell": None}
    with pytest.raises(AssertionError, match="TASK1_LANGUAGE must be 'python', 'c' or 'fortran'"):
        exec(solution_cell("03_openmp", "test_crs_to_ell"), namespace)


@pytest.mark.parametrize("lang, old, new, example, message", [
    # padding that points at column 0 (an unrelated entry) instead of the row itself
    ("python", "item_ell = np.repeat(np.arange(n, dtype=np.int32), width)",
     "item_ell = np.zeros(n * width, dtype=np.int32)", True,
     r"item_ell\[\d+\] \(row \d+, slot \d+\) is 0, expected \d+ \(a padding slot: its column "
     r"is the row's own index i"),
    ("c", ": i;", ": 0;", True,
     r"item_ell\[\d+\] \(row \d+, slot \d+\) is 0, expected \d+ \(a padding slot"),
    ("fortran", "item_ell(length + 1 :, i) = i", "item_ell(length + 1 :, i) = 1", True,
     r"item_ell\(\d+, \d+\) \(row \d+, slot \d+\) is 1, expected \d+ \(a padding slot: its "
     r"column is the row's own number i \(1-based\)"),
    # padding values not zero
    ("c", ": 0.0;", ": 1.0;", True, r"row 0: amat_ell\[0:6\] is \[-1.0, -1.0, -1.0, 1.0, 1.0, "
                                    r"1.0\], .*padding values are 0.0"),
    ("fortran", "amat_ell(length + 1 :, i) = 0.0_c_double",
     "amat_ell(length + 1 :, i) = amat(index(i))", True,
     r"row 1 \(1-based\): amat_ell\(1:6, 1\) is \[-1.0, -1.0, -1.0, -1.0, -1.0, -1.0\]"),
    # rows and slots swapped: the ELL stored slot by slot
    ("c", "[width * i + m]", "[n * m + i]", True, r"row 0: item_ell\[0:6\] is \[1, 0, 1, 0, 1, 2\], expected \[1, 3, 6, 0, 0, 0\]"),
    ("c", "[width * i + m]", "[n * m + i]", False, "slot by slot instead of row by row: row i "
                                                   "occupies the slots width"),
    ("fortran", ("(width, n)", "(1:length, i)", "(length + 1 :, i)"),
     ("(n, width)", "(i, 1:length)", "(i, length + 1 :)"), False,
     r"slot by slot instead of row by row: item_ell\(width, n\) holds row i in its column i"),
    # a row's last entry dropped
    ("c", "m < length ?", "m < length - 1 ?", True,
     r"row 0: item_ell\[0:6\] is \[1, 3, 0, 0, 0, 0\], expected \[1, 3, 6, 0, 0, 0\]"),
    ("fortran", ("(1:length, i) = item(index(i) : index(i + 1) - 1)",
                 "(1:length, i) = amat(index(i) : index(i + 1) - 1)"),
     ("(1:length - 1, i) = item(index(i) : index(i + 1) - 2)",
      "(1:length - 1, i) = amat(index(i) : index(i + 1) - 2)"), True,
     r"item_ell\(3, 1\) \(row 1, slot 3\) or its amat_ell is never written"),
    # 0-based columns in Fortran
    ("fortran", "item_ell(1:length, i) = item(index(i) : index(i + 1) - 1)",
     "item_ell(1:length, i) = item(index(i) : index(i + 1) - 1) - 1", True,
     r"row 1 \(1-based\): item_ell\(1:6, 1\) is \[1, 3, 6, 1, 1, 1\], expected \[2, 4, 7, 1, "),
    ("fortran", "item_ell(length + 1 :, i) = i", "item_ell(length + 1 :, i) = i - 1", False,
     r"\(row 2, slot 5\) is 1, expected 2 \(a padding slot"),
    ("fortran", "item(index(i) : index(i + 1) - 1)\n    amat_ell(1:length, i) = amat(index(i) : "
     "index(i + 1) - 1)\n    item_ell(length + 1 :, i) = i\n",
     "item(index(i) : index(i + 1) - 1) - 1\n    amat_ell(1:length, i) = amat(index(i) : "
     "index(i + 1) - 1)\n    item_ell(length + 1 :, i) = i - 1\n", True,
     r"is \[1, 3, 6, 0, 0, 0\], expected \[2, 4, 7, 1, 1, 1\].*\(0-based\? in Fortran the "
     r"columns count from 1\)"),
    # a row too long not refused; nothing written (as the stubs); past the end; a crash
    ("c", "return -(i + 1);", ";", True, "width 2: no refusal .*must return a negative value"),
    ("c", "    /* ### BEGIN SOLUTION */", "    return 0;\n    /* ### BEGIN SOLUTION */", True,
     "never written"),
    ("fortran", "  ! ### BEGIN SOLUTION", "  return\n  ! ### BEGIN SOLUTION", True,
     "never written"),
    ("c", "m < width; m++", "m <= width; m++", True, r"wrote past them, into item_ell\[72\]"),
    ("c", "if (length > width)", "item_ell[-100000000] = 1;\n        if (length > width)", True,
     "crs_to_ell crashed with SIGSEGV"),
])
def test_a_wrong_crs_to_ell_fails_with_a_message_in_its_language(tmp_path, lang, old, new,
                                                                  example, message):
    answer = crs_to_ell_answer(tmp_path, lang, old, new)
    with pytest.raises(AssertionError, match=message):
        exercise.check_crs_to_ell(answer, example=example, **UNSEEN_CRS)


def test_a_compiled_refusal_names_the_row_and_other_results_fail(tmp_path):
    small = exercise.random_crs(5, 0.8, 43)[:3]
    fortran = crs_to_ell_answer(tmp_path, "fortran")
    with pytest.raises(ValueError, match=r"returned -1: row 1 \(1-based\) has more than width"):
        fortran(*small, 0)
    odd = crs_to_ell_answer(tmp_path, "c", "    /* ### END SOLUTION */\n    return 0;",
                            "    /* ### END SOLUTION */\n    return 7;")
    with pytest.raises(AssertionError, match="returned 7: it returns 0 when every row fits"):
        exercise.check_crs_to_ell(odd)
