! Conjugate gradients with a diagonal (Jacobi) preconditioner for a symmetric positive definite
! CRS matrix (Fortran twin of src_c/common/cg.c). Stops when ||b - A x|| <= tol * ||b|| (the
! recursive residual). Indices are 1-based (see crs.f90).
module course_cg
    use, intrinsic :: iso_c_binding, only: c_int, c_double
    use course_crs, only: crs_matvec
    implicit none
    private
    public :: pcg_jacobi, dot_reduction

contains

! [dot_reduction]
! a . b, correct with any number of threads: every thread sums its share into a private copy of s
! (starting from 0); at the end of the loop the runtime adds the private copies into the shared s,
! one thread at a time. The dot product of every CG in the course.
function dot_reduction(n, a, b) result(s) bind(C, name="dot_reduction")
    integer(c_int), value, intent(in) :: n
    real(c_double), intent(in) :: a(n), b(n)
    real(c_double) :: s
    integer(c_int) :: i

    s = 0.0_c_double
    !$omp parallel do schedule(static) reduction(+ : s)
    do i = 1, n
        s = s + a(i) * b(i)
    end do
    !$omp end parallel do
end function dot_reduction
! [dot_reduction]

! [pcg_jacobi]
! Returns the number of iterations; relres is the final ||r|| / ||b||. x holds the initial guess
! on entry and the solution on exit. Returns -1 if the work vectors cannot be allocated.
function pcg_jacobi(n, row_ptr, col_idx, val, b, x, tol, max_iter, relres) result(iter) &
        bind(C, name="pcg_jacobi")
    integer(c_int), value, intent(in) :: n
    integer(c_int), intent(in) :: row_ptr(n + 1), col_idx(*)
    real(c_double), intent(in) :: val(*), b(n)
    real(c_double), intent(inout) :: x(n)
    real(c_double), value, intent(in) :: tol
    integer(c_int), value, intent(in) :: max_iter
    real(c_double), intent(out) :: relres
    integer(c_int) :: iter
    real(c_double), allocatable :: r(:), z(:), p(:), q(:), dinv(:)
    real(c_double) :: bnorm, rho, rho_old, alpha, beta
    integer(c_int) :: i, k
    integer :: alloc_stat

    iter = -1
    allocate(r(n), z(n), p(n), q(n), dinv(n), stat=alloc_stat)
    if (alloc_stat /= 0) return

    do i = 1, n                                          ! Jacobi preconditioner: 1 / a_ii
        dinv(i) = 1.0_c_double
        do k = row_ptr(i), row_ptr(i + 1) - 1
            if (col_idx(k) == i) dinv(i) = 1.0_c_double / val(k)
        end do
    end do

    call crs_matvec(n, row_ptr, col_idx, val, x, q)      ! r = b - A x
    do i = 1, n
        r(i) = b(i) - q(i)
    end do
    bnorm = sqrt(dot_reduction(n, b, b))
    ! b = 0: measure the residual itself. (bnorm is never negative; "<=" rather than "==" because
    ! gfortran -Wextra warns about equality tests between reals.)
    if (bnorm <= 0.0_c_double) bnorm = 1.0_c_double

    rho_old = 1.0_c_double
    iter = 0
    relres = sqrt(dot_reduction(n, r, r)) / bnorm
    do while (relres > tol .and. iter < max_iter)
        do i = 1, n                                      ! z = M^-1 r
            z(i) = dinv(i) * r(i)
        end do
        rho = dot_reduction(n, r, z)
        if (iter == 0) then                              ! first direction: p = z
            do i = 1, n
                p(i) = z(i)
            end do
        else                                             ! p = z + beta p
            beta = rho / rho_old
            do i = 1, n
                p(i) = z(i) + beta * p(i)
            end do
        end if
        call crs_matvec(n, row_ptr, col_idx, val, p, q)  ! q = A p
        alpha = rho / dot_reduction(n, p, q)
        do i = 1, n
            x(i) = x(i) + alpha * p(i)
            r(i) = r(i) - alpha * q(i)
        end do
        rho_old = rho
        iter = iter + 1
        relres = sqrt(dot_reduction(n, r, r)) / bnorm
    end do
    ! r, z, p, q, dinv are deallocated automatically on return
end function pcg_jacobi
! [pcg_jacobi]

end module course_cg
