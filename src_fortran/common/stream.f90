! STREAM-like kernels (after McCalpin's STREAM benchmark) to measure the memory bandwidth that the
! sparse kernels can hope for (Fortran twin of src_c/common/stream.c). Every loop is split among the
! threads with schedule(static), so the thread that initialises a(i) (and thus places its page in
! its NUMA node's memory, "first touch") is the one that later reads and writes it.
module course_stream
    use, intrinsic :: iso_c_binding, only: c_int, c_double
    implicit none
    private
    public :: stream_init, stream_copy, stream_triad, stream_sum

contains

! [stream_init]
! a = 1, b = 2, c = 0.5, written in parallel: the first touch decides where the pages live.
subroutine stream_init(n, a, b, c) bind(C, name="stream_init")
    integer(c_int), value, intent(in) :: n
    real(c_double), intent(out) :: a(n), b(n), c(n)
    integer(c_int) :: i

    !$omp parallel do schedule(static)
    do i = 1, n
        a(i) = 1.0_c_double
        b(i) = 2.0_c_double
        c(i) = 0.5_c_double
    end do
    !$omp end parallel do
end subroutine stream_init
! [stream_init]

! [stream_copy]
! a = b: 16 bytes moved per element (one read, one write).
subroutine stream_copy(n, b, a) bind(C, name="stream_copy")
    integer(c_int), value, intent(in) :: n
    real(c_double), intent(in) :: b(n)
    real(c_double), intent(out) :: a(n)
    integer(c_int) :: i

    !$omp parallel do schedule(static)
    do i = 1, n
        a(i) = b(i)
    end do
    !$omp end parallel do
end subroutine stream_copy
! [stream_copy]

! [stream_triad]
! a = b + scalar c: 24 bytes moved and 2 flops per element.
subroutine stream_triad(n, scalar, b, c, a) bind(C, name="stream_triad")
    integer(c_int), value, intent(in) :: n
    real(c_double), value, intent(in) :: scalar
    real(c_double), intent(in) :: b(n), c(n)
    real(c_double), intent(out) :: a(n)
    integer(c_int) :: i

    !$omp parallel do schedule(static)
    do i = 1, n
        a(i) = b(i) + scalar * c(i)
    end do
    !$omp end parallel do
end subroutine stream_triad
! [stream_triad]

! [stream_sum]
! s = a(1) + ... + a(n): 8 bytes read and nothing written per element, the rate of loads alone
! that a read-dominated kernel (the SpMV) can reach. The array is read as four streams at once
! (its quarters), as the SpMV reads several arrays: one stream alone leaves a core's prefetchers
! half idle and measures less than the memory gives. `simd` lets the compiler reorder the
! additions into vector lanes (as reduction(+ : s) does among the threads), so the loop
! vectorises without -ffast-math.
function stream_sum(n, a) result(s) bind(C, name="stream_sum")
    integer(c_int), value, intent(in) :: n
    real(c_double), intent(in) :: a(n)
    real(c_double) :: s
    integer(c_int) :: i, q

    q = n / 4
    s = 0.0_c_double
    !$omp parallel do simd schedule(static) reduction(+ : s)
    do i = 1, q
        s = s + ((a(i) + a(i + q)) + (a(i + 2 * q) + a(i + 3 * q)))
    end do
    !$omp end parallel do simd
    do i = 4 * q + 1, n     ! the last mod(n, 4) entries
        s = s + a(i)
    end do
end function stream_sum
! [stream_sum]

end module course_stream
