! IC(0) and ICCG of lecture 04_iccg (Fortran twin of src_c/04_iccg/ic0.c; the formulas and the
! colors are explained there and in course/solvers/iccg.py). Indices number from 1: the rows of
! color c are color_ptr(c) .. color_ptr(c+1)-1. The sweeps use orphaned `omp do` loops: inside a
! parallel region they share out the rows of a color (the implied barrier ends the color);
! outside one, one thread does them. One color means the sequential sweep (`omp single`).
module course_ic0
    use, intrinsic :: iso_c_binding, only: c_int, c_double
    implicit none
    private
    public :: ic0_factor, ic0_transpose, ic0_forward, ic0_backward, ic0_apply, split_matvec, iccg

contains

! [ic0_factor]
function ic0_factor(n, lower_ptr, lower_col, lower_val, diag, fac_lower, fac_diag) &
        result(status) bind(C, name="ic0_factor")
    integer(c_int), value, intent(in) :: n
    integer(c_int), intent(in) :: lower_ptr(n + 1), lower_col(*)
    real(c_double), intent(in) :: lower_val(*), diag(n)
    real(c_double), intent(inout) :: fac_lower(*)
    real(c_double), intent(inout) :: fac_diag(n)
    integer(c_int) :: status
    integer(c_int) :: i, j, k, p, pk, q
    real(c_double) :: s

    status = 0
    do i = 1, n
        do p = lower_ptr(i), lower_ptr(i + 1) - 1
            j = lower_col(p)
            s = lower_val(p)
            q = lower_ptr(j)                      ! k < j coupled to i and j: merge rows i and j
            do pk = lower_ptr(i), p - 1
                k = lower_col(pk)
                do while (q < lower_ptr(j + 1))
                    if (lower_col(q) >= k) exit
                    q = q + 1
                end do
                if (q < lower_ptr(j + 1)) then
                    if (lower_col(q) == k) s = s - fac_lower(pk) * fac_lower(q) / fac_diag(k)
                end if
            end do
            fac_lower(p) = s
        end do
        s = diag(i)
        do p = lower_ptr(i), lower_ptr(i + 1) - 1
            s = s - fac_lower(p) * fac_lower(p) / fac_diag(lower_col(p))
        end do
        if (.not. s > 0.0_c_double) then
            status = -i                           ! breakdown at row i (C: -(i0 + 1), the same)
            return
        end if
        fac_diag(i) = s
    end do
end function ic0_factor
! [ic0_factor]

function ic0_transpose(n, lower_ptr, lower_col, fac_lower, upper_ptr, fac_upper) &
        result(status) bind(C, name="ic0_transpose")
    integer(c_int), value, intent(in) :: n
    integer(c_int), intent(in) :: lower_ptr(n + 1), lower_col(*), upper_ptr(n + 1)
    real(c_double), intent(in) :: fac_lower(*)
    real(c_double), intent(inout) :: fac_upper(*)
    integer(c_int) :: status
    integer(c_int), allocatable :: next(:)
    integer(c_int) :: i, p, j
    integer :: alloc_stat

    status = -1
    allocate(next(n), stat=alloc_stat)
    if (alloc_stat /= 0) return
    next = upper_ptr(1:n)
    do i = 1, n                                   ! rising i: every upper row fills in order
        do p = lower_ptr(i), lower_ptr(i + 1) - 1
            j = lower_col(p)
            fac_upper(next(j)) = fac_lower(p)
            next(j) = next(j) + 1
        end do
    end do
    status = 0
end function ic0_transpose

! [ic0_forward]
subroutine ic0_forward(n, ncolor, color_ptr, lower_ptr, lower_col, fac_lower, inv_diag, r, z) &
        bind(C, name="ic0_forward")
    integer(c_int), value, intent(in) :: n, ncolor
    integer(c_int), intent(in) :: color_ptr(ncolor + 1), lower_ptr(n + 1), lower_col(*)
    real(c_double), intent(in) :: fac_lower(*), inv_diag(n), r(n)
    real(c_double), intent(inout) :: z(n)
    integer(c_int) :: c, i, k
    real(c_double) :: s

    if (ncolor == 1) then                         ! one color: the sequential sweep
        !$omp single
        do i = 1, n
            s = r(i)
            do k = lower_ptr(i), lower_ptr(i + 1) - 1
                s = s - fac_lower(k) * z(lower_col(k))    ! z(i-1), just written, comes last
            end do
            z(i) = s * inv_diag(i)
        end do
        !$omp end single
        return
    end if
    do c = 1, ncolor                              ! rows of a color: independent
        !$omp do schedule(static) private(s, k)
        do i = color_ptr(c), color_ptr(c + 1) - 1
            s = r(i)
            do k = lower_ptr(i), lower_ptr(i + 1) - 1
                s = s - fac_lower(k) * z(lower_col(k))    ! z of earlier colors only
            end do
            z(i) = s * inv_diag(i)
        end do
        !$omp end do
    end do
end subroutine ic0_forward
! [ic0_forward]

! [ic0_backward]
subroutine ic0_backward(n, ncolor, color_ptr, upper_ptr, upper_col, fac_upper, inv_diag, z) &
        bind(C, name="ic0_backward")
    integer(c_int), value, intent(in) :: n, ncolor
    integer(c_int), intent(in) :: color_ptr(ncolor + 1), upper_ptr(n + 1), upper_col(*)
    real(c_double), intent(in) :: fac_upper(*), inv_diag(n)
    real(c_double), intent(inout) :: z(n)
    integer(c_int) :: c, i, k
    real(c_double) :: s

    if (ncolor == 1) then
        !$omp single
        do i = n, 1, -1
            s = 0.0_c_double
            do k = upper_ptr(i + 1) - 1, upper_ptr(i), -1
                s = s + fac_upper(k) * z(upper_col(k))    ! columns falling: z(i+1) last
            end do
            z(i) = z(i) - s * inv_diag(i)
        end do
        !$omp end single
        return
    end if
    do c = ncolor, 1, -1                          ! the colors backwards
        !$omp do schedule(static) private(s, k)
        do i = color_ptr(c), color_ptr(c + 1) - 1
            s = 0.0_c_double
            do k = upper_ptr(i + 1) - 1, upper_ptr(i), -1
                s = s + fac_upper(k) * z(upper_col(k))    ! z of later colors only
            end do
            z(i) = z(i) - s * inv_diag(i)
        end do
        !$omp end do
    end do
end subroutine ic0_backward
! [ic0_backward]

function ic0_apply(n, ncolor, color_ptr, lower_ptr, lower_col, fac_lower, upper_ptr, &
                   upper_col, fac_upper, fac_diag, r, z) result(status) bind(C, name="ic0_apply")
    integer(c_int), value, intent(in) :: n, ncolor
    integer(c_int), intent(in) :: color_ptr(ncolor + 1), lower_ptr(n + 1), lower_col(*)
    integer(c_int), intent(in) :: upper_ptr(n + 1), upper_col(*)
    real(c_double), intent(in) :: fac_lower(*), fac_upper(*), fac_diag(n), r(n)
    real(c_double), intent(inout) :: z(n)
    integer(c_int) :: status
    real(c_double), allocatable :: inv_diag(:)
    integer(c_int) :: i
    integer :: alloc_stat

    status = -1
    allocate(inv_diag(n), stat=alloc_stat)
    if (alloc_stat /= 0) return
    !$omp parallel
    !$omp do schedule(static)
    do i = 1, n
        inv_diag(i) = 1.0_c_double / fac_diag(i)
    end do
    !$omp end do
    call ic0_forward(n, ncolor, color_ptr, lower_ptr, lower_col, fac_lower, inv_diag, r, z)
    call ic0_backward(n, ncolor, color_ptr, upper_ptr, upper_col, fac_upper, inv_diag, z)
    !$omp end parallel
    status = 0
end function ic0_apply

subroutine split_matvec(n, diag, lower_ptr, lower_col, lower_val, upper_ptr, upper_col, &
                        upper_val, x, y) bind(C, name="split_matvec")
    integer(c_int), value, intent(in) :: n
    integer(c_int), intent(in) :: lower_ptr(n + 1), lower_col(*), upper_ptr(n + 1), upper_col(*)
    real(c_double), intent(in) :: diag(n), lower_val(*), upper_val(*), x(n)
    real(c_double), intent(inout) :: y(n)
    integer(c_int) :: i, k
    real(c_double) :: s

    !$omp do schedule(static) private(s, k)
    do i = 1, n
        s = diag(i) * x(i)
        do k = lower_ptr(i), lower_ptr(i + 1) - 1
            s = s + lower_val(k) * x(lower_col(k))
        end do
        do k = upper_ptr(i), upper_ptr(i + 1) - 1
            s = s + upper_val(k) * x(upper_col(k))
        end do
        y(i) = s
    end do
    !$omp end do
end subroutine split_matvec

! [iccg]
function iccg(n, ncolor, color_ptr, diag, lower_ptr, lower_col, lower_val, upper_ptr, upper_col, &
              upper_val, fac_diag, fac_lower, fac_upper, b, x, eps, max_iter, relres) &
        result(iter) bind(C, name="iccg")
    integer(c_int), value, intent(in) :: n, ncolor
    integer(c_int), intent(in) :: color_ptr(ncolor + 1), lower_ptr(n + 1), lower_col(*)
    integer(c_int), intent(in) :: upper_ptr(n + 1), upper_col(*)
    real(c_double), intent(in) :: diag(n), lower_val(*), upper_val(*), fac_diag(n)
    real(c_double), intent(in) :: fac_lower(*), fac_upper(*), b(n)
    real(c_double), intent(inout) :: x(n)
    real(c_double), value, intent(in) :: eps
    integer(c_int), value, intent(in) :: max_iter
    real(c_double), intent(out) :: relres
    integer(c_int) :: iter
    real(c_double), allocatable :: r(:), z(:), p(:), q(:), inv_diag(:)
    real(c_double) :: bb, rr, rho, rho_old, pq, bnorm, res, alpha, beta
    integer(c_int) :: i
    integer :: alloc_stat

    iter = -1
    allocate(r(n), z(n), p(n), q(n), inv_diag(n), stat=alloc_stat)
    if (alloc_stat /= 0) return
    bb = 0.0_c_double
    rr = 0.0_c_double
    rho = 0.0_c_double
    rho_old = 1.0_c_double
    pq = 0.0_c_double
    bnorm = 1.0_c_double
    res = 0.0_c_double
    iter = 0
    !$omp parallel private(alpha, beta)
    !$omp do schedule(static)
    do i = 1, n                                   ! first touch
        r(i) = 0.0_c_double
        z(i) = 0.0_c_double
        p(i) = 0.0_c_double
        q(i) = 0.0_c_double
        inv_diag(i) = 1.0_c_double / fac_diag(i)
    end do
    !$omp end do
    call split_matvec(n, diag, lower_ptr, lower_col, lower_val, upper_ptr, upper_col, upper_val, &
                      x, q)
    !$omp do schedule(static) reduction(+ : bb, rr)
    do i = 1, n                                   ! r = b - A x
        r(i) = b(i) - q(i)
        bb = bb + b(i) * b(i)
        rr = rr + r(i) * r(i)
    end do
    !$omp end do
    !$omp single
    if (bb > 0.0_c_double) bnorm = sqrt(bb)
    res = sqrt(rr) / bnorm
    rr = 0.0_c_double
    !$omp end single
    do while (res > eps .and. iter < max_iter)
        ! z = M^-1 r: 2 ncolor barriers
        call ic0_forward(n, ncolor, color_ptr, lower_ptr, lower_col, fac_lower, inv_diag, r, z)
        call ic0_backward(n, ncolor, color_ptr, upper_ptr, upper_col, fac_upper, inv_diag, z)
        !$omp do schedule(static) reduction(+ : rho)
        do i = 1, n
            rho = rho + r(i) * z(i)
        end do
        !$omp end do
        if (iter == 0) then
            beta = 0.0_c_double
        else
            beta = rho / rho_old
        end if
        !$omp do schedule(static)
        do i = 1, n
            p(i) = z(i) + beta * p(i)
        end do
        !$omp end do
        call split_matvec(n, diag, lower_ptr, lower_col, lower_val, upper_ptr, upper_col, &
                          upper_val, p, q)
        !$omp do schedule(static) reduction(+ : pq)
        do i = 1, n
            pq = pq + p(i) * q(i)
        end do
        !$omp end do
        alpha = rho / pq
        !$omp do schedule(static) reduction(+ : rr)
        do i = 1, n
            x(i) = x(i) + alpha * p(i)
            r(i) = r(i) - alpha * q(i)
            rr = rr + r(i) * r(i)
        end do
        !$omp end do
        !$omp single
        res = sqrt(rr) / bnorm                    ! every thread has used rho, pq: reset them
        rho_old = rho
        rho = 0.0_c_double
        pq = 0.0_c_double
        rr = 0.0_c_double
        iter = iter + 1
        !$omp end single
    end do
    !$omp end parallel
    relres = res
end function iccg
! [iccg]

end module course_ic0
