! y = A x with A = D + the off-diagonal part, in three storage formats (Fortran twin of
! src_c/03_openmp/spmv.c; indices 1-based). Every loop over rows (or slices of rows) is shared among
! the threads with schedule(static).
module course_spmv
    use, intrinsic :: iso_c_binding, only: c_int, c_double
    implicit none
    private
    public :: offdiag_crs_matvec, ell_matvec, sell_matvec

    integer, parameter :: SELL_BLOCK = 64      ! rows of a slice summed at once (a local buffer)

contains

! [offdiag_crs_matvec]
! CRS: row i holds amat(index(i) .. index(i+1)-1) in the columns item(same range).
subroutine offdiag_crs_matvec(n, d, index, item, amat, x, y) bind(C, name="offdiag_crs_matvec")
    integer(c_int), value, intent(in) :: n
    real(c_double), intent(in) :: d(n), amat(*), x(n)
    integer(c_int), intent(in) :: index(n + 1), item(*)
    real(c_double), intent(out) :: y(n)
    integer(c_int) :: i, k
    real(c_double) :: s

    !$omp parallel do schedule(static) private(k, s)
    do i = 1, n
        s = d(i) * x(i)
        do k = index(i), index(i + 1) - 1
            s = s + amat(k) * x(item(k))
        end do
        y(i) = s
    end do
    !$omp end parallel do
end subroutine offdiag_crs_matvec
! [offdiag_crs_matvec]

! [ell_matvec]
! ELL: 6 entries per row (padding: coefficient 0), a fixed inner trip count.
subroutine ell_matvec(n, d, item_ell, amat_ell, x, y) bind(C, name="ell_matvec")
    integer(c_int), value, intent(in) :: n
    real(c_double), intent(in) :: d(n), amat_ell(6, n), x(n)
    integer(c_int), intent(in) :: item_ell(6, n)
    real(c_double), intent(out) :: y(n)
    integer(c_int) :: i
    integer :: m
    real(c_double) :: s

    !$omp parallel do schedule(static) private(m, s)
    do i = 1, n
        s = d(i) * x(i)
        do m = 1, 6
            s = s + amat_ell(m, i) * x(item_ell(m, i))
        end do
        y(i) = s
    end do
    !$omp end parallel do
end subroutine ell_matvec
! [ell_matvec]

! [sell_matvec]
! SELL-C-sigma: slice k holds the sorted rows (k-1) C + 1 .. k C, column-major: entry j of its row
! r at val(slice_ptr(k) + (j-1) C + r), slice_ptr holding 0-based offsets. The inner loop runs over
! the rows of the slice (unit stride in col and val: SIMD lanes), the outer one over its width.
subroutine sell_matvec(n, chunk, d, perm, slice_ptr, col, val, x, y) bind(C, name="sell_matvec")
    integer(c_int), value, intent(in) :: n, chunk
    real(c_double), intent(in) :: d(n), val(*), x(n)
    integer(c_int), intent(in) :: perm(n), slice_ptr(*), col(*)
    real(c_double), intent(out) :: y(n)
    integer(c_int) :: k, n_slices, first, rows, width, r0, nr, r, j, row, start
    real(c_double) :: acc(SELL_BLOCK)

    n_slices = (n + chunk - 1) / chunk
    !$omp parallel do schedule(static) &
    !$omp private(first, rows, width, r0, nr, r, j, row, start, acc)
    do k = 1, n_slices
        first = (k - 1) * chunk                  ! sorted rows first+1 .. first+rows
        rows = min(chunk, n - first)
        width = (slice_ptr(k + 1) - slice_ptr(k)) / chunk
        do r0 = 0, rows - 1, SELL_BLOCK
            nr = min(SELL_BLOCK, rows - r0)
            do r = 1, nr
                row = perm(first + r0 + r)
                acc(r) = d(row) * x(row)
            end do
            do j = 1, width
                start = slice_ptr(k) + (j - 1) * chunk + r0
                do r = 1, nr
                    acc(r) = acc(r) + val(start + r) * x(col(start + r))
                end do
            end do
            do r = 1, nr
                y(perm(first + r0 + r)) = acc(r)
            end do
        end do
    end do
    !$omp end parallel do
end subroutine sell_matvec
! [sell_matvec]

end module course_spmv
