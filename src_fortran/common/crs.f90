! Sparse matrix-vector product in CRS storage (Fortran twin of src_c/common/crs.c).
!
! Indices are 1-based: row i holds the entries val(row_ptr(i) : row_ptr(i+1)-1) in the columns
! col_idx(same range); row_ptr(1) = 1 and col_idx values lie in 1..n. The routine is exported to C
! (and to Python's ctypes) under the same name and with the same arguments as the C kernel:
! scalars by value, arrays by address.
module course_crs
    use, intrinsic :: iso_c_binding, only: c_int, c_double
    implicit none
    private
    public :: crs_matvec

contains

! [crs_matvec]
! y = A x for the n x n CRS matrix A (rows are independent, so they are shared among threads).
subroutine crs_matvec(n, row_ptr, col_idx, val, x, y) bind(C, name="crs_matvec")
    integer(c_int), value, intent(in) :: n
    integer(c_int), intent(in) :: row_ptr(n + 1), col_idx(*)
    real(c_double), intent(in) :: val(*), x(n)
    real(c_double), intent(out) :: y(n)
    integer(c_int) :: i, k
    real(c_double) :: row_sum

    !$omp parallel do schedule(static) private(k, row_sum)
    do i = 1, n
        row_sum = 0.0_c_double
        do k = row_ptr(i), row_ptr(i + 1) - 1
            row_sum = row_sum + val(k) * x(col_idx(k))
        end do
        y(i) = row_sum
    end do
    !$omp end parallel do
end subroutine crs_matvec
! [crs_matvec]

end module course_crs
