"""course.exercise: learner kernels are compiled and run in a child process, so that a wrong, a
crashing, an endless or a non-compiling kernel each becomes a clear AssertionError."""

from __future__ import annotations

import numpy as np
import pytest

from course import exercise

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
    result, arrays = exercise.call_isolated(lib, "axpy", [4, 0.5, x, y], returns_int=True)
    assert result == 5
    np.testing.assert_array_equal(arrays[3], 1.0 + 0.5 * x)
    np.testing.assert_array_equal(y, np.ones(4))        # the caller's arrays are not touched
