! The OpenMP ladder of lecture 03 (Fortran twin of src_c/03_openmp/pcg.c): diagonal-scaled
! conjugate gradients (z = r / d) for the finite-volume Poisson matrix, four versions of the same
! algorithm. Indices are 1-based.
!
!   v0  CRS; one `omp parallel do` per vector loop, `reduction` for the dot products; the work
!       array is zeroed by a serial loop, so all its pages live where the master thread runs.
!   v1  v0 with the work array zeroed in parallel, same static schedule as the solver's loops:
!       first touch puts each thread's part of r, z, p, q in its own NUMA node's memory.
!   v2  v1 with the matrix in ELL: 6 entries per row, a fixed inner trip count.
!   v3  v2 in ONE parallel region for the whole solve: `omp do` loops inside it (their implied
!       barriers order the steps), dot products by `reduction`, and every other shared scalar
!       (alpha, beta, rho_old, the residual, the iteration count) written by one thread in an
!       `omp single`; the barrier at its end publishes the value to all the threads.
!
! All stop when ||r|| / ||b|| <= eps (or after max_iter iterations) and return the iterations, or
! -1 if the work array cannot be allocated; x holds the initial guess on entry. The work array w
! holds r, z, p, q one after the other (pointers into it). Each iteration performs the same
! floating-point operations in every version (and as in C), so with the same number of threads the
! results agree (with one thread, bit for bit).
module course_pcg_ladder
    use, intrinsic :: iso_c_binding, only: c_int, c_double
    use course_spmv, only: offdiag_crs_matvec, ell_matvec
    use course_cg, only: dot_reduction
    implicit none
    private
    public :: pcg_v0, pcg_v1, pcg_v2, pcg_v3

contains

! [pcg_v0]
function pcg_v0(n, d, index, item, amat, b, x, eps, max_iter, relres) result(iter) &
        bind(C, name="pcg_v0")
    integer(c_int), value, intent(in) :: n
    integer(c_int), intent(in) :: index(n + 1), item(*)
    real(c_double), intent(in) :: d(n), amat(*), b(n)
    real(c_double), intent(inout) :: x(n)
    real(c_double), value, intent(in) :: eps
    integer(c_int), value, intent(in) :: max_iter
    real(c_double), intent(out) :: relres
    integer(c_int) :: iter
    real(c_double), allocatable, target :: w(:)
    real(c_double), pointer, contiguous :: r(:), z(:), p(:), q(:)
    real(c_double) :: bnorm, res, rho, rho_old, alpha, beta
    integer(c_int) :: i
    integer :: alloc_stat

    iter = -1
    allocate(w(4 * n), stat=alloc_stat)
    if (alloc_stat /= 0) return
    r(1:n) => w(1:n)
    z(1:n) => w(n + 1:2 * n)
    p(1:n) => w(2 * n + 1:3 * n)
    q(1:n) => w(3 * n + 1:4 * n)
    do i = 1, n                                  ! serial: thread 0 touches every page first
        r(i) = 0.0_c_double
        z(i) = 0.0_c_double
        p(i) = 0.0_c_double
        q(i) = 0.0_c_double
    end do

    call offdiag_crs_matvec(n, d, index, item, amat, x, q)   ! r = b - A x
    !$omp parallel do schedule(static)
    do i = 1, n
        r(i) = b(i) - q(i)
    end do
    !$omp end parallel do
    bnorm = sqrt(dot_reduction(n, b, b))
    if (bnorm <= 0.0_c_double) bnorm = 1.0_c_double      ! b = 0: the residual itself
    res = sqrt(dot_reduction(n, r, r)) / bnorm
    rho_old = 1.0_c_double
    iter = 0
    do while (res > eps .and. iter < max_iter)
        !$omp parallel do schedule(static)
        do i = 1, n                                          ! z = D^-1 r
            z(i) = r(i) / d(i)
        end do
        !$omp end parallel do
        rho = dot_reduction(n, r, z)
        if (iter == 0) then
            beta = 0.0_c_double
        else
            beta = rho / rho_old
        end if
        !$omp parallel do schedule(static)
        do i = 1, n                                          ! p = z + beta p (p = 0 at first)
            p(i) = z(i) + beta * p(i)
        end do
        !$omp end parallel do
        call offdiag_crs_matvec(n, d, index, item, amat, p, q)   ! q = A p
        alpha = rho / dot_reduction(n, p, q)
        !$omp parallel do schedule(static)
        do i = 1, n
            x(i) = x(i) + alpha * p(i)
            r(i) = r(i) - alpha * q(i)
        end do
        !$omp end parallel do
        rho_old = rho
        iter = iter + 1
        res = sqrt(dot_reduction(n, r, r)) / bnorm
    end do
    relres = res
    ! w is deallocated automatically on return
end function pcg_v0
! [pcg_v0]

! [pcg_v1]
function pcg_v1(n, d, index, item, amat, b, x, eps, max_iter, relres) result(iter) &
        bind(C, name="pcg_v1")
    integer(c_int), value, intent(in) :: n
    integer(c_int), intent(in) :: index(n + 1), item(*)
    real(c_double), intent(in) :: d(n), amat(*), b(n)
    real(c_double), intent(inout) :: x(n)
    real(c_double), value, intent(in) :: eps
    integer(c_int), value, intent(in) :: max_iter
    real(c_double), intent(out) :: relres
    integer(c_int) :: iter
    real(c_double), allocatable, target :: w(:)
    real(c_double), pointer, contiguous :: r(:), z(:), p(:), q(:)
    real(c_double) :: bnorm, res, rho, rho_old, alpha, beta
    integer(c_int) :: i
    integer :: alloc_stat

    iter = -1
    allocate(w(4 * n), stat=alloc_stat)
    if (alloc_stat /= 0) return
    r(1:n) => w(1:n)
    z(1:n) => w(n + 1:2 * n)
    p(1:n) => w(2 * n + 1:3 * n)
    q(1:n) => w(3 * n + 1:4 * n)
    !$omp parallel do schedule(static)
    do i = 1, n                                  ! first touch by the thread that will use i
        r(i) = 0.0_c_double
        z(i) = 0.0_c_double
        p(i) = 0.0_c_double
        q(i) = 0.0_c_double
    end do
    !$omp end parallel do

    call offdiag_crs_matvec(n, d, index, item, amat, x, q)   ! r = b - A x
    !$omp parallel do schedule(static)
    do i = 1, n
        r(i) = b(i) - q(i)
    end do
    !$omp end parallel do
    bnorm = sqrt(dot_reduction(n, b, b))
    if (bnorm <= 0.0_c_double) bnorm = 1.0_c_double      ! b = 0: the residual itself
    res = sqrt(dot_reduction(n, r, r)) / bnorm
    rho_old = 1.0_c_double
    iter = 0
    do while (res > eps .and. iter < max_iter)
        !$omp parallel do schedule(static)
        do i = 1, n                                          ! z = D^-1 r
            z(i) = r(i) / d(i)
        end do
        !$omp end parallel do
        rho = dot_reduction(n, r, z)
        if (iter == 0) then
            beta = 0.0_c_double
        else
            beta = rho / rho_old
        end if
        !$omp parallel do schedule(static)
        do i = 1, n                                          ! p = z + beta p (p = 0 at first)
            p(i) = z(i) + beta * p(i)
        end do
        !$omp end parallel do
        call offdiag_crs_matvec(n, d, index, item, amat, p, q)   ! q = A p
        alpha = rho / dot_reduction(n, p, q)
        !$omp parallel do schedule(static)
        do i = 1, n
            x(i) = x(i) + alpha * p(i)
            r(i) = r(i) - alpha * q(i)
        end do
        !$omp end parallel do
        rho_old = rho
        iter = iter + 1
        res = sqrt(dot_reduction(n, r, r)) / bnorm
    end do
    relres = res
    ! w is deallocated automatically on return
end function pcg_v1
! [pcg_v1]

! [pcg_v2]
function pcg_v2(n, d, item_ell, amat_ell, b, x, eps, max_iter, relres) result(iter) &
        bind(C, name="pcg_v2")
    integer(c_int), value, intent(in) :: n
    integer(c_int), intent(in) :: item_ell(6 * n)
    real(c_double), intent(in) :: d(n), amat_ell(6 * n), b(n)
    real(c_double), intent(inout) :: x(n)
    real(c_double), value, intent(in) :: eps
    integer(c_int), value, intent(in) :: max_iter
    real(c_double), intent(out) :: relres
    integer(c_int) :: iter
    real(c_double), allocatable, target :: w(:)
    real(c_double), pointer, contiguous :: r(:), z(:), p(:), q(:)
    real(c_double) :: bnorm, res, rho, rho_old, alpha, beta
    integer(c_int) :: i
    integer :: alloc_stat

    iter = -1
    allocate(w(4 * n), stat=alloc_stat)
    if (alloc_stat /= 0) return
    r(1:n) => w(1:n)
    z(1:n) => w(n + 1:2 * n)
    p(1:n) => w(2 * n + 1:3 * n)
    q(1:n) => w(3 * n + 1:4 * n)
    !$omp parallel do schedule(static)
    do i = 1, n                                  ! first touch by the thread that will use i
        r(i) = 0.0_c_double
        z(i) = 0.0_c_double
        p(i) = 0.0_c_double
        q(i) = 0.0_c_double
    end do
    !$omp end parallel do

    call ell_matvec(n, d, item_ell, amat_ell, x, q)   ! r = b - A x
    !$omp parallel do schedule(static)
    do i = 1, n
        r(i) = b(i) - q(i)
    end do
    !$omp end parallel do
    bnorm = sqrt(dot_reduction(n, b, b))
    if (bnorm <= 0.0_c_double) bnorm = 1.0_c_double      ! b = 0: the residual itself
    res = sqrt(dot_reduction(n, r, r)) / bnorm
    rho_old = 1.0_c_double
    iter = 0
    do while (res > eps .and. iter < max_iter)
        !$omp parallel do schedule(static)
        do i = 1, n                                          ! z = D^-1 r
            z(i) = r(i) / d(i)
        end do
        !$omp end parallel do
        rho = dot_reduction(n, r, z)
        if (iter == 0) then
            beta = 0.0_c_double
        else
            beta = rho / rho_old
        end if
        !$omp parallel do schedule(static)
        do i = 1, n                                          ! p = z + beta p (p = 0 at first)
            p(i) = z(i) + beta * p(i)
        end do
        !$omp end parallel do
        call ell_matvec(n, d, item_ell, amat_ell, p, q)   ! q = A p
        alpha = rho / dot_reduction(n, p, q)
        !$omp parallel do schedule(static)
        do i = 1, n
            x(i) = x(i) + alpha * p(i)
            r(i) = r(i) - alpha * q(i)
        end do
        !$omp end parallel do
        rho_old = rho
        iter = iter + 1
        res = sqrt(dot_reduction(n, r, r)) / bnorm
    end do
    relres = res
    ! w is deallocated automatically on return
end function pcg_v2
! [pcg_v2]

! [pcg_v3]
! Shared scalars and who writes them: bb, rr, rho, pq are reduction targets (the runtime combines
! the threads' partial sums into them; one thread zeroes each beforehand, with a barrier in
! between); bnorm, res, beta, alpha, rho_old, iter are written in `omp single` only. Every thread
! reads res and iter in the loop condition; the next write to them comes after several barriers.
function pcg_v3(n, d, item_ell, amat_ell, b, x, eps, max_iter, relres) result(iter) &
        bind(C, name="pcg_v3")
    integer(c_int), value, intent(in) :: n
    integer(c_int), intent(in) :: item_ell(6, n)
    real(c_double), intent(in) :: d(n), amat_ell(6, n), b(n)
    real(c_double), intent(inout) :: x(n)
    real(c_double), value, intent(in) :: eps
    integer(c_int), value, intent(in) :: max_iter
    real(c_double), intent(out) :: relres
    integer(c_int) :: iter
    real(c_double), allocatable, target :: w(:)
    real(c_double), pointer, contiguous :: r(:), z(:), p(:), q(:)
    real(c_double) :: bb, rr, rho, pq, bnorm, res, rho_old, alpha, beta, s
    integer(c_int) :: i
    integer :: m, alloc_stat

    iter = -1
    allocate(w(4 * n), stat=alloc_stat)
    if (alloc_stat /= 0) return
    r(1:n) => w(1:n)
    z(1:n) => w(n + 1:2 * n)
    p(1:n) => w(2 * n + 1:3 * n)
    q(1:n) => w(3 * n + 1:4 * n)
    bb = 0.0_c_double
    rr = 0.0_c_double
    rho = 0.0_c_double
    pq = 0.0_c_double
    bnorm = 1.0_c_double
    res = 0.0_c_double
    rho_old = 1.0_c_double
    alpha = 0.0_c_double
    beta = 0.0_c_double
    iter = 0
    !$omp parallel private(i, m, s)
    !$omp do schedule(static)
    do i = 1, n                                  ! first touch by the thread that will use i
        r(i) = 0.0_c_double
        z(i) = 0.0_c_double
        p(i) = 0.0_c_double
        q(i) = 0.0_c_double
    end do
    !$omp end do
    !$omp do schedule(static) reduction(+ : bb, rr)
    do i = 1, n                                              ! r = b - A x, b.b, r.r
        s = d(i) * x(i)
        do m = 1, 6
            s = s + amat_ell(m, i) * x(item_ell(m, i))
        end do
        r(i) = b(i) - s
        bb = bb + b(i) * b(i)
        rr = rr + r(i) * r(i)
    end do
    !$omp end do
    !$omp single
    bnorm = sqrt(bb)
    if (bnorm <= 0.0_c_double) bnorm = 1.0_c_double          ! b = 0: the residual itself
    res = sqrt(rr) / bnorm
    !$omp end single
    do while (res > eps .and. iter < max_iter)
        !$omp do schedule(static) reduction(+ : rho)
        do i = 1, n                                          ! z = D^-1 r, rho = r.z
            z(i) = r(i) / d(i)
            rho = rho + r(i) * z(i)
        end do
        !$omp end do
        !$omp single
        if (iter == 0) then
            beta = 0.0_c_double
        else
            beta = rho / rho_old
        end if
        pq = 0.0_c_double
        !$omp end single
        !$omp do schedule(static)
        do i = 1, n                                          ! p = z + beta p (p = 0 at first)
            p(i) = z(i) + beta * p(i)
        end do
        !$omp end do
        !$omp do schedule(static) reduction(+ : pq)
        do i = 1, n                                          ! q = A p, pq = p.q
            s = d(i) * p(i)
            do m = 1, 6
                s = s + amat_ell(m, i) * p(item_ell(m, i))
            end do
            q(i) = s
            pq = pq + p(i) * s
        end do
        !$omp end do
        !$omp single
        alpha = rho / pq
        rr = 0.0_c_double
        !$omp end single
        !$omp do schedule(static) reduction(+ : rr)
        do i = 1, n                                          ! x, r updated, rr = r.r
            x(i) = x(i) + alpha * p(i)
            r(i) = r(i) - alpha * q(i)
            rr = rr + r(i) * r(i)
        end do
        !$omp end do
        !$omp single
        rho_old = rho
        rho = 0.0_c_double
        iter = iter + 1
        res = sqrt(rr) / bnorm
        !$omp end single
    end do
    !$omp end parallel
    relres = res
    ! w is deallocated automatically on return
end function pcg_v3
! [pcg_v3]

end module course_pcg_ladder
