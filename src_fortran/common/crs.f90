! Sparse matrix-vector product and prescribed values in CRS storage (Fortran twin of
! src_c/common/crs.c).
!
! Indices are 1-based: row i holds the entries val(row_ptr(i) : row_ptr(i+1)-1) in the columns
! col_idx(same range); row_ptr(1) = 1 and col_idx values lie in 1..n. The routine is exported to C
! (and to Python's ctypes) under the same name and with the same arguments as the C kernel:
! scalars by value, arrays by address.
module course_crs
    use, intrinsic :: iso_c_binding, only: c_int, c_double
    implicit none
    private
    public :: crs_matvec, crs_find, crs_dirichlet

contains

! [crs_matvec]
! y = A x for the n x n CRS matrix A (rows are independent, so they are shared among threads).
subroutine crs_matvec(n, row_ptr, col_idx, val, x, y) bind(C, name="crs_matvec")
    integer(c_int), value, intent(in) :: n
    integer(c_int), intent(in) :: row_ptr(n + 1), col_idx(*)
    ! x(*): the columns may reach beyond the n rows (the external nodes of 05_halo)
    real(c_double), intent(in) :: val(*), x(*)
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

! [crs_find]
! Position k of the entry (row, col) in col_idx and val, or 0 if the pattern lacks it: a search
! along row `row` (assembly uses it to find where an element entry goes).
function crs_find(row_ptr, col_idx, row, col) result(pos)
    integer(c_int), intent(in) :: row_ptr(*), col_idx(*)
    integer(c_int), intent(in) :: row, col
    integer(c_int) :: pos
    integer(c_int) :: k

    pos = 0
    do k = row_ptr(row), row_ptr(row + 1) - 1
        if (col_idx(k) == col) then
            pos = k
            return
        end if
    end do
end function crs_find
! [crs_find]

! [crs_dirichlet]
! Prescribed values T_i = g(i) on the rows with fixed(i) /= 0 (0/1 flags, not indices, so there is
! nothing to shift between C and Fortran). A fixed row becomes a row of the identity with
! rhs(i) = g(i). In a free row the known terms a_ij g(j) of the fixed columns j move to the
! right-hand side and a_ij is cleared: clearing the columns as well as the rows keeps a symmetric
! matrix symmetric (and positive definite), so CG still applies. Every row only touches its own
! entries, so the rows are shared among threads.
subroutine crs_dirichlet(n, fixed, g, row_ptr, col_idx, val, rhs) bind(C, name="crs_dirichlet")
    integer(c_int), value, intent(in) :: n
    integer(c_int), intent(in) :: fixed(n)
    real(c_double), intent(in) :: g(n)
    integer(c_int), intent(in) :: row_ptr(n + 1), col_idx(*)
    real(c_double), intent(inout) :: val(*), rhs(n)
    integer(c_int) :: i, j, k

    !$omp parallel do schedule(static) private(j, k)
    do i = 1, n
        if (fixed(i) /= 0) then
            do k = row_ptr(i), row_ptr(i + 1) - 1
                if (col_idx(k) == i) then
                    val(k) = 1.0_c_double
                else
                    val(k) = 0.0_c_double
                end if
            end do
            rhs(i) = g(i)
        else
            do k = row_ptr(i), row_ptr(i + 1) - 1
                j = col_idx(k)
                if (fixed(j) /= 0) then
                    rhs(i) = rhs(i) - val(k) * g(j)
                    val(k) = 0.0_c_double
                end if
            end do
        end if
    end do
    !$omp end parallel do
end subroutine crs_dirichlet
! [crs_dirichlet]

end module course_crs
