! Data races on purpose (lecture 03_openmp, part c; Fortran twin of src_c/03_openmp/race.c):
! kernels that show what goes wrong when several threads update one shared variable without a
! reduction or an `omp single`.
!
!   dot_racy       WRONG ON PURPOSE: `omp parallel do` adding into a shared s, no reduction.
!   scalar_race    WRONG ON PURPOSE: one parallel region computing a dot product `rounds` times;
!                  every thread zeroes the shared s before each reduction loop, with no
!                  `omp single` (the pattern of the printed v3 of the seed course).
!
! The correct loop, with `reduction(+ : s)`, is dot_reduction in common/cg.f90: every CG of
! the course uses it.
!
! A race does not show on every run: how often these kernels go wrong depends on the machine, the
! threads, the length of the vectors and luck. With one thread they are all correct.
module course_race
    use, intrinsic :: iso_c_binding, only: c_int, c_double
    implicit none
    private
    public :: dot_racy, scalar_race

contains

! [dot_racy]
! WRONG ON PURPOSE: every thread reads, adds to and writes the shared s with no ordering between
! the threads, so an update made by one thread can be overwritten by another (a lost update).
function dot_racy(n, a, b) result(s) bind(C, name="dot_racy")
    integer(c_int), value, intent(in) :: n
    real(c_double), intent(in) :: a(n), b(n)
    real(c_double) :: s
    integer(c_int) :: i

    s = 0.0_c_double
    !$omp parallel do schedule(static) shared(s)
    do i = 1, n
        s = s + a(i) * b(i)                      ! load s, add, store s: not atomic
    end do
    !$omp end parallel do
end function dot_racy
! [dot_racy]

! [scalar_race]
! WRONG ON PURPOSE: out(k) should be a . b for every round k. The reduction itself is correct, but
! EVERY thread executes `s = 0`. A thread that starts round k late may zero s after a faster
! thread has already added its partial sum into it: that part of the sum is lost. The barrier at
! the end of a round stands for the other loops of a CG iteration (their implied barriers), as in
! the seed's v3. The fix: zero s in an `omp single` (its implied barrier keeps every thread from
! adding before s is zero), as pcg_v3 does.
subroutine scalar_race(n, a, b, rounds, out) bind(C, name="scalar_race")
    integer(c_int), value, intent(in) :: n, rounds
    real(c_double), intent(in) :: a(n), b(n)
    real(c_double), intent(out) :: out(rounds)
    real(c_double) :: s
    integer(c_int) :: i, k

    s = 0.0_c_double
    !$omp parallel shared(s) private(i, k)
    do k = 1, rounds
        s = 0.0_c_double                         ! every thread writes the shared s: RACE
        !$omp do schedule(static) reduction(+ : s)
        do i = 1, n
            s = s + a(i) * b(i)
        end do
        !$omp end do
        out(k) = s                               ! every thread writes the same value here
        !$omp barrier
    end do
    !$omp end parallel
end subroutine scalar_race
! [scalar_race]

end module course_race
