! Lecture 06_pipecg: four CG variants on P ranks (Fortran twin of src_c/06_pipecg/cg_mpi.c, with
! the Fortran 2008 bindings: module mpi_f08; library course_halo_fortran, with halo.f90).
! course/solvers/krylov.py line by line, with the pieces of course/parallel/fem3d.py and
! course/parallel/reductions.py:
!   A v     halo_exchange of v (its external entries) + crs_matvec over the internal rows
!   M^-1 r  precond_apply of 08_hybrid/precond_mpi.f90: Jacobi (dinv * r, local), localized
!           IC(0) (local) or additive Schwarz sweeps with IC(0) (K-1 halo exchanges in each)
!   sums    the local share of each dot product (every thread's rows, added in thread order),
!           then ONE global sum of all of them: MPI_Allreduce, or MPI_Iallreduce started early
!           and MPI_Wait'ed for late, so that the work in between can hide it.
! The variants differ only in where their reductions go (u = M^-1 r, w = A u):
!   pcg                (p, q), then (r, u) with (r, r): 2 reductions per iteration
!   chronopoulos-gear  (r, u), (w, u), (r, r) fused: 1 reduction
!   gropp              (p, s) behind M^-1 s, (r, u), (r, r) behind A u: 2 reductions
!   pipelined          (r, u), (w, u), (r, r) behind M^-1 w and A m: 1 reduction
! Every variant stops when the recursive residual has ||r|| <= tol ||b||; an iteration is one
! update of x; the reductions started and the halo exchanges made inside each iteration are
! counted (A v makes one; M^-1 r K-1 with asdd-ic0 K, none with the others).
! Every rank is a team of OMP_NUM_THREADS OpenMP threads (lecture 08_hybrid, MPI + OpenMP): one
! parallel region for the whole solve, see cg_variant_mpi.
! Indices are 1-based, the local data as in halo.f90.
module course_cg_mpi
    use, intrinsic :: iso_c_binding, only: c_int, c_long, c_double
    use, intrinsic :: ieee_arithmetic, only: ieee_is_finite
    use mpi_f08, only: MPI_Comm, MPI_Request, MPI_Allreduce, MPI_Iallreduce, MPI_Wait, &
                       MPI_IN_PLACE, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_REQUEST_NULL, &
                       MPI_STATUS_IGNORE
    use omp_lib, only: omp_get_max_threads, omp_get_num_threads, omp_get_thread_num
    use course_halo, only: halo_exchange, failed_anywhere
    use course_precond_mpi, only: precond_mpi, precond_apply
    implicit none
    private
    public :: cg_variant_mpi, cg_algorithm_name, cg_algorithm_from_name
    public :: CG_PCG, CG_CHRONOPOULOS_GEAR, CG_GROPP, CG_PIPELINED, CG_N_ALGORITHMS

    ! the algorithms, numbered as in C; their names are those of course.solvers.ALGORITHMS
    integer(c_int), parameter :: CG_PCG = 0               ! Hestenes-Stiefel: 2 reductions
    integer(c_int), parameter :: CG_CHRONOPOULOS_GEAR = 1 ! 1 fused reduction
    integer(c_int), parameter :: CG_GROPP = 2             ! 2 hidden behind M^-1 s and A u
    integer(c_int), parameter :: CG_PIPELINED = 3         ! 1 hidden behind M^-1 w and A m
    integer(c_int), parameter :: CG_N_ALGORITHMS = 4
    character(len=*), parameter :: ALGORITHM_NAMES(0:CG_N_ALGORITHMS - 1) = &
        [character(len=17) :: 'pcg', 'chronopoulos-gear', 'gropp', 'pipelined']

contains

! "pcg", "chronopoulos-gear", "gropp", "pipelined"; '' for a number outside 0 .. 3
function cg_algorithm_name(algorithm) result(name)
    integer(c_int), intent(in) :: algorithm
    character(len=:), allocatable :: name

    name = ''
    if (algorithm >= 0 .and. algorithm < CG_N_ALGORITHMS) name = trim(ALGORITHM_NAMES(algorithm))
end function cg_algorithm_name

! The number of the algorithm called `name`, or -1 if there is none.
integer(c_int) function cg_algorithm_from_name(name)
    character(len=*), intent(in) :: name
    integer(c_int) :: a

    cg_algorithm_from_name = -1
    do a = 0, CG_N_ALGORITHMS - 1
        if (len(name) == len_trim(ALGORITHM_NAMES(a)) .and. name == ALGORITHM_NAMES(a)) &
            cg_algorithm_from_name = a
    end do
end function cg_algorithm_from_name

! [cg_variant_mpi]
! Solves A x = b (A symmetric positive definite, distributed by rows: row_ptr, col_idx, val hold
! the n_internal internal rows, with columns among the n_local local nodes; b has n_internal
! entries, x n_local; the halo tables are those of halo.f90) with the CG variant `algorithm`
! preconditioned by `preconditioner` (08_hybrid/precond_mpi.f90: diagonal, bjacobi-ic0 or
! asdd-ic0, set up by precond_setup on the same rows; each variant applies it where krylov.py
! applies M^-1, the pipelined one to w; C calls this argument `precond`). nonblocking /= 0: every
! global sum is MPI_Iallreduce + MPI_Wait, else MPI_Allreduce. replace_every N > 0: every N-th
! iteration the recursively updated vectors are recomputed from x (residual replacement); 0:
! never. x: the initial guess in its internal entries on entry, the solution there on exit (its
! external entries are scratch).
! Returns the iterations (the same on every rank); relres the recursive ||r|| / ||b|| at the end,
! true_relres ||b - A x|| / ||b|| recomputed at the end, reductions_per_iteration the global sums
! started in each iteration, counted (0 if no iteration ran, -1 if two iterations counted
! differently), halo_exchanges_per_iteration the halo exchanges made in each iteration, counted
! the same way (1 in A v, K-1 in M^-1 with asdd-ic0 K: K for every variant, 1 with diagonal; an
! iteration with residual replacement makes more). Returns -1 on every rank if the work vectors
! cannot be allocated on some rank, -2 if `algorithm` is not one of the four.
!
! Threads (lecture 08_hybrid, the discipline of 03_openmp's pcg_v3): the whole solve is ONE
! parallel region of OMP_NUM_THREADS threads per rank. Every thread runs the variant: its scalars
! (alpha, gamma, ...) are local to the variant, so private, and every thread computes the same
! values from the same global sums. Every vector loop is an orphaned `omp do` with a static
! schedule (the same rows to the same thread in every loop, as at the first touch); a dot product
! is each thread's sum over its rows, and the rank's sum adds the threads' sums in thread order
! (reduction_start), so a run repeats bit for bit with the same number of threads. MPI is called
! by the master thread only (MPI_THREAD_FUNNELED), between barriers; the bookkeeping (counts,
! relres) is written by the master too, with a barrier before the others read it.
function cg_variant_mpi(algorithm, nonblocking, replace_every, n_internal, n_local, row_ptr, &
                        col_idx, val, preconditioner, b, x, tol, max_iter, relres, n_neighbours, &
                        neighbours, import_ptr, import_index, export_ptr, export_index, comm, &
                        reductions_per_iteration, halo_exchanges_per_iteration, true_relres) &
        result(iter)
    integer(c_int), intent(in) :: algorithm, nonblocking, replace_every
    integer(c_int), intent(in) :: n_internal, n_local
    integer(c_int), intent(in) :: row_ptr(n_internal + 1), col_idx(*)
    real(c_double), intent(in) :: val(*)
    type(precond_mpi), intent(inout) :: preconditioner     ! M (its work vectors change)
    real(c_double), intent(in) :: b(n_internal)
    real(c_double), intent(inout) :: x(n_local)
    real(c_double), intent(in) :: tol
    integer(c_int), intent(in) :: max_iter
    real(c_double), intent(out) :: relres
    integer(c_int), intent(in) :: n_neighbours
    integer(c_int), intent(in) :: neighbours(n_neighbours)
    integer(c_int), intent(in) :: import_ptr(n_neighbours + 1), import_index(*)
    integer(c_int), intent(in) :: export_ptr(n_neighbours + 1), export_index(*)
    type(MPI_Comm), intent(in) :: comm
    integer(c_int), intent(out) :: reductions_per_iteration, halo_exchanges_per_iteration
    real(c_double), intent(out) :: true_relres
    integer(c_int) :: iter
    integer, parameter :: N_VECTORS = 9          ! the most a variant needs: pipelined
    real(c_double), allocatable :: v(:, :)
    real(c_double), allocatable, asynchronous :: send_buf(:), recv_buf(:)
    ! the global sums: the buffer MPI works on between MPI_Iallreduce and MPI_Wait
    real(c_double), asynchronous :: sums(3)
    ! each thread's shares of the (up to 3) dot products of one reduction: partial(1:3, thread),
    ! SHARE_STRIDE doubles per thread (one cache line: the threads do not write the same line)
    integer, parameter :: SHARE_STRIDE = 8
    real(c_double), allocatable :: partial(:, :)
    type(MPI_Request) :: request
    ! the bookkeeping every variant shares (krylov.py's _Run), written by the master thread
    real(c_double) :: bnorm
    integer :: n, iterations, reductions, count_at_start, per_iteration, alloc_stat
    ! the halo exchanges, counted like the reductions (C: long)
    integer(c_long) :: exchanges, exchanges_at_start
    integer :: exchanges_per_iteration

    iter = -2
    relres = huge(relres)
    true_relres = huge(true_relres)
    reductions_per_iteration = 0
    halo_exchanges_per_iteration = 0
    if (algorithm < 0 .or. algorithm >= CG_N_ALGORITHMS) return
    n = n_internal
    iter = -1
    allocate(v(n_local, N_VECTORS), send_buf(export_ptr(n_neighbours + 1) - 1), &
             recv_buf(import_ptr(n_neighbours + 1) - 1), &
             partial(SHARE_STRIDE, 0:omp_get_max_threads() - 1), stat=alloc_stat)
    if (failed_anywhere(alloc_stat, comm)) return        ! all ranks return together
    bnorm = 1.0_c_double
    iterations = 0
    reductions = 0
    count_at_start = 0
    per_iteration = 0
    exchanges = 0
    exchanges_at_start = 0
    exchanges_per_iteration = 0
    request = MPI_REQUEST_NULL

    !$omp parallel
    call solve()
    !$omp end parallel
    if (iterations > 0) then
        reductions_per_iteration = per_iteration
        halo_exchanges_per_iteration = exchanges_per_iteration
    end if
    iter = iterations
    ! the work vectors are deallocated automatically on return

contains

    ! The body of the parallel region: every thread runs it. (Its locals, and those of the
    ! variants, are private; the variables of cg_variant_mpi are shared.)
    subroutine solve()
        real(c_double) :: s(3)

        call first_touch()
        call reduction_start([dot(b, b)])
        s = reduction_wait()
        !$omp master
        bnorm = sqrt(s(1))
        if (bnorm <= 0.0_c_double) bnorm = 1.0_c_double  ! b = 0: measure the residual itself
        !$omp end master
        !$omp barrier
        select case (algorithm)
        case (CG_PCG)
            call pcg(v(:, 1), v(:, 2), v(:, 3), v(:, 4))
        case (CG_CHRONOPOULOS_GEAR)
            call chronopoulos_gear(v(:, 1), v(:, 2), v(:, 3), v(:, 4), v(:, 5))
        case (CG_GROPP)
            call gropp(v(:, 1), v(:, 2), v(:, 3), v(:, 4), v(:, 5), v(:, 6))
        case default
            call pipelined(v(:, 1), v(:, 2), v(:, 3), v(:, 4), v(:, 5), v(:, 6), v(:, 7), &
                           v(:, 8), v(:, 9))
        end select
        call residual(x, v(:, 1))                        ! the true residual b - A x
        call reduction_start([dot(v(:, 1), v(:, 1))])
        s = reduction_wait()
        !$omp master
        true_relres = sqrt(s(1)) / bnorm
        !$omp end master
    end subroutine solve

    ! First touch (lecture 03's v1): each thread zeroes its static share of the internal entries
    ! of every work vector, the rows its loops will use, so that their pages are placed in its
    ! NUMA node's memory; the external entries, which only the master's halo exchanges write, are
    ! the master's.
    subroutine first_touch()
        integer :: i

        !$omp do schedule(static)
        do i = 1, n
            v(i, :) = 0.0_c_double
        end do
        !$omp end do
        !$omp master
        v(n + 1:n_local, :) = 0.0_c_double
        !$omp end master
    end subroutine first_touch

    ! ---- the pluggable pieces ------------------------------------------------------------------

    ! out = A vec: vec has n_local entries (its external ones are overwritten by the exchange)
    subroutine matvec(vec, out)
        real(c_double), intent(inout) :: vec(n_local), out(n_local)

        call exchange(vec)
        call local_matvec(vec, out)
    end subroutine matvec

    ! The halo exchange of vec (its external entries) by the master thread. The barrier before:
    ! every thread has written its rows of vec; the barrier after: every thread sees the received
    ! values (and the master's send and receive buffers are free again).
    subroutine exchange(vec)
        real(c_double), intent(inout) :: vec(n_local)

        !$omp barrier
        !$omp master
        call halo_exchange(n_neighbours, neighbours, import_ptr, import_index, export_ptr, &
                           export_index, vec, send_buf, recv_buf, comm)
        exchanges = exchanges + 1
        !$omp end master
        !$omp barrier
    end subroutine exchange

    ! out = A vec over the internal rows (crs_matvec, its rows shared out by an orphaned `omp do`)
    subroutine local_matvec(vec, out)
        real(c_double), intent(in) :: vec(n_local)
        real(c_double), intent(inout) :: out(n_local)
        integer :: i, k
        real(c_double) :: row_sum

        !$omp do schedule(static)
        do i = 1, n
            row_sum = 0.0_c_double
            do k = row_ptr(i), row_ptr(i + 1) - 1
                row_sum = row_sum + val(k) * vec(col_idx(k))
            end do
            out(i) = row_sum
        end do
        !$omp end do
    end subroutine local_matvec

    ! u = M^-1 r: u has n_local entries (asdd-ic0 exchanges its external ones)
    subroutine precond(r, u)
        real(c_double), intent(in) :: r(n_local)
        real(c_double), intent(inout) :: u(n_local)

        call precond_apply(preconditioner, r, u, n_neighbours, neighbours, import_ptr, &
                           import_index, export_ptr, export_index, send_buf, recv_buf, comm, &
                           exchanges)
    end subroutine precond

    ! r = b - A xv
    subroutine residual(xv, r)
        real(c_double), intent(inout) :: xv(n_local), r(n_local)
        integer :: i

        call matvec(xv, r)
        !$omp do schedule(static)
        do i = 1, n
            r(i) = b(i) - r(i)
        end do
        !$omp end do
    end subroutine residual

    ! y = y + alpha xv (the internal entries)
    subroutine axpy(alpha, xv, y)
        real(c_double), intent(in) :: alpha, xv(n_local)
        real(c_double), intent(inout) :: y(n_local)
        integer :: i

        !$omp do schedule(static)
        do i = 1, n
            y(i) = y(i) + alpha * xv(i)
        end do
        !$omp end do
    end subroutine axpy

    ! y = xv + beta y (the internal entries)
    subroutine xpby(xv, beta, y)
        real(c_double), intent(in) :: xv(n_local), beta
        real(c_double), intent(inout) :: y(n_local)
        integer :: i

        !$omp do schedule(static)
        do i = 1, n
            y(i) = xv(i) + beta * y(i)
        end do
        !$omp end do
    end subroutine xpby

    ! y = 0 (the internal entries)
    subroutine zero(y)
        real(c_double), intent(inout) :: y(n_local)
        integer :: i

        !$omp do schedule(static)
        do i = 1, n
            y(i) = 0.0_c_double
        end do
        !$omp end do
    end subroutine zero

    ! y = xv (the internal entries)
    subroutine copy(xv, y)
        real(c_double), intent(in) :: xv(n_local)
        real(c_double), intent(inout) :: y(n_local)
        integer :: i

        !$omp do schedule(static)
        do i = 1, n
            y(i) = xv(i)
        end do
        !$omp end do
    end subroutine copy

    ! [reduction_start]
    ! The global sums of the local partial sums (up to 3, one message). Every thread passes its
    ! own shares (dot); after a barrier the master adds them in thread order (the same bits in
    ! every run) and starts the global sum. Blocking: MPI_Allreduce, the other threads wait at
    ! the barrier; non-blocking: MPI_Iallreduce, the others go on with the work that hides it, and
    ! the master joins them; MPI_Wait in reduction_wait.
    subroutine reduction_start(thread_sums)
        real(c_double), intent(in) :: thread_sums(:)
        integer :: k, t

        partial(1:size(thread_sums), omp_get_thread_num()) = thread_sums
        !$omp barrier
        !$omp master
        do k = 1, size(thread_sums)
            sums(k) = 0.0_c_double
            do t = 0, omp_get_num_threads() - 1
                sums(k) = sums(k) + partial(k, t)
            end do
        end do
        reductions = reductions + 1
        if (nonblocking /= 0) then
            call MPI_Iallreduce(MPI_IN_PLACE, sums, size(thread_sums), MPI_DOUBLE_PRECISION, &
                                MPI_SUM, comm, request)
        else
            call MPI_Allreduce(MPI_IN_PLACE, sums, size(thread_sums), MPI_DOUBLE_PRECISION, &
                               MPI_SUM, comm)
            request = MPI_REQUEST_NULL
        end if
        !$omp end master
        if (nonblocking == 0) then
            !$omp barrier
        end if
    end subroutine reduction_start
    ! [reduction_start]

    ! The global sums, in every thread: the master waits for them, the barrier publishes them.
    function reduction_wait() result(global_sums)
        real(c_double) :: global_sums(3)

        !$omp master
        call MPI_Wait(request, MPI_STATUS_IGNORE)       ! returns at once for MPI_REQUEST_NULL
        !$omp end master
        !$omp barrier
        global_sums = sums
    end function reduction_wait

    ! this thread's share of the local a . c: the sum over its rows (of the internal entries)
    real(c_double) function dot(a, c)
        real(c_double), intent(in) :: a(n), c(n)
        integer :: i

        dot = 0.0_c_double
        !$omp do schedule(static)
        do i = 1, n
            dot = dot + a(i) * c(i)
        end do
        !$omp end do
    end function dot

    ! ---- the bookkeeping: stopping test, counting, residual replacement -------------------------

    ! Records ||r|| / ||b|| from the reduced (r, r) (the master; the barrier publishes it for
    ! more()); .true. once it is at most tol.
    logical function converged(rr)
        real(c_double), intent(in) :: rr
        real(c_double) :: res

        res = sqrt(max(rr, 0.0_c_double)) / bnorm
        !$omp master
        relres = res
        !$omp end master
        !$omp barrier
        converged = res <= tol
    end function converged

    logical function more()
        more = iterations < max_iter .and. ieee_is_finite(relres)
    end function more

    ! The iterations start: the reductions and exchanges from here on are counted per iteration.
    subroutine begin()
        !$omp master
        count_at_start = reductions
        exchanges_at_start = exchanges
        !$omp end master
    end subroutine begin

    ! .true. in every replace_every-th iteration: recompute the recursive vectors from x
    logical function replace_now()
        replace_now = replace_every > 0
        if (replace_now) replace_now = mod(iterations + 1, replace_every) == 0
    end function replace_now

    ! An iteration ended: its reductions and halo exchanges are counted, and must be as many as in
    ! every other. (The master counts, after every thread has read `iterations` in this
    ! iteration; the second barrier shows the new count to all.)
    subroutine iteration_done()
        !$omp barrier
        !$omp master
        call tally(reductions - count_at_start, per_iteration)
        call tally(int(exchanges - exchanges_at_start), exchanges_per_iteration)
        iterations = iterations + 1
        count_at_start = reductions
        exchanges_at_start = exchanges
        !$omp end master
        !$omp barrier
    end subroutine iteration_done

    ! counted = the count of the first iteration; -1 once an iteration counts differently
    subroutine tally(count, counted)
        integer, intent(in) :: count
        integer, intent(inout) :: counted

        if (iterations == 0) then
            counted = count
        else if (count /= counted) then
            counted = -1
        end if
    end subroutine tally

    ! ---- the four variants (the vectors have n_local entries; x is the caller's) ---------------

    ! [pcg]
    subroutine pcg(r, u, p, q)
        real(c_double), intent(inout) :: r(n_local), u(n_local), p(n_local), q(n_local)
        real(c_double) :: s(3), gamma, gamma_new, delta, alpha, rr

        call residual(x, r)
        call precond(r, u)
        call copy(u, p)
        call reduction_start([dot(r, u), dot(r, r)])
        s = reduction_wait()
        gamma = s(1)
        rr = s(2)
        call begin()
        do while (.not. converged(rr))
            if (.not. more()) exit
            call matvec(p, q)
            call reduction_start([dot(p, q)])                  ! needed on the next line
            s = reduction_wait()
            delta = s(1)
            alpha = gamma / delta
            call axpy(alpha, p, x)
            if (replace_now()) then
                call residual(x, r)
            else
                call axpy(-alpha, q, r)
            end if
            call precond(r, u)
            call reduction_start([dot(r, u), dot(r, r)])
            s = reduction_wait()
            gamma_new = s(1)
            rr = s(2)
            call iteration_done()
            call xpby(u, gamma_new / gamma, p)
            gamma = gamma_new
        end do
    end subroutine pcg
    ! [pcg]

    ! [chronopoulos_gear]
    subroutine chronopoulos_gear(r, u, w, p, s)
        real(c_double), intent(inout) :: r(n_local), u(n_local), w(n_local), p(n_local), &
                                         s(n_local)
        real(c_double) :: g(3), gamma, gamma_new, delta, alpha, beta, rr

        call residual(x, r)
        call precond(r, u)
        call matvec(u, w)
        call reduction_start([dot(r, u), dot(w, u), dot(r, r)])
        g = reduction_wait()
        gamma = g(1)
        delta = g(2)
        rr = g(3)
        alpha = gamma / delta
        beta = 0.0_c_double
        call zero(p)
        call zero(s)                                           ! s = A p
        call begin()
        do while (.not. converged(rr))
            if (.not. more()) exit
            call xpby(u, beta, p)
            call xpby(w, beta, s)
            call axpy(alpha, p, x)
            call axpy(-alpha, s, r)
            if (replace_now()) then
                call residual(x, r)
                call matvec(p, s)
            end if
            call precond(r, u)
            call matvec(u, w)
            call reduction_start([dot(r, u), dot(w, u), dot(r, r)])
            g = reduction_wait()
            gamma_new = g(1)
            delta = g(2)
            rr = g(3)
            call iteration_done()
            beta = gamma_new / gamma
            alpha = gamma_new / (delta - beta * gamma_new / alpha)
            gamma = gamma_new
        end do
    end subroutine chronopoulos_gear
    ! [chronopoulos_gear]

    ! [gropp]
    subroutine gropp(r, u, p, s, m, w)
        real(c_double), intent(inout) :: r(n_local), u(n_local), p(n_local), s(n_local), &
                                         m(n_local), w(n_local)
        real(c_double) :: g(3), gamma, gamma_new, delta, alpha, beta, rr

        call residual(x, r)
        call precond(r, u)
        call copy(u, p)
        call matvec(p, s)                                      ! s = A p
        call reduction_start([dot(r, u), dot(r, r)])
        g = reduction_wait()
        gamma = g(1)
        rr = g(2)
        call begin()
        do while (.not. converged(rr))
            if (.not. more()) exit
            call reduction_start([dot(p, s)])
            call precond(s, m)                                 ! hides (p, s)
            g = reduction_wait()
            delta = g(1)
            alpha = gamma / delta
            call axpy(alpha, p, x)
            call axpy(-alpha, s, r)
            call axpy(-alpha, m, u)
            if (replace_now()) then
                call residual(x, r)
                call matvec(p, s)
                call precond(r, u)
            end if
            call reduction_start([dot(r, u), dot(r, r)])
            call matvec(u, w)                                  ! hides (r, u), (r, r)
            g = reduction_wait()
            gamma_new = g(1)
            rr = g(2)
            call iteration_done()
            beta = gamma_new / gamma
            call xpby(u, beta, p)
            call xpby(w, beta, s)
            gamma = gamma_new
        end do
    end subroutine gropp
    ! [gropp]

    ! [pipelined]
    subroutine pipelined(r, u, w, m, nv, z, q, s, p)
        real(c_double), intent(inout) :: r(n_local), u(n_local), w(n_local), m(n_local), &
                                         nv(n_local), z(n_local), q(n_local), s(n_local), &
                                         p(n_local)
        real(c_double) :: g(3), gamma, gamma_old, delta, alpha, beta, rr

        call residual(x, r)
        call precond(r, u)
        call matvec(u, w)
        call zero(z)                                           ! z = A q, q = M^-1 s, s = A p
        call zero(q)
        call zero(s)
        call zero(p)
        alpha = 0.0_c_double
        gamma_old = 0.0_c_double
        call begin()
        do
            call reduction_start([dot(r, u), dot(w, u), dot(r, r)])
            call precond(w, m)                                 ! hide the reduction behind
            call matvec(m, nv)                                 ! M^-1 w and A m
            g = reduction_wait()
            gamma = g(1)
            delta = g(2)
            rr = g(3)
            if (converged(rr)) return
            if (.not. more()) return
            if (iterations == 0) then                          ! (gamma_old = 0 in krylov.py)
                beta = 0.0_c_double
                alpha = gamma / delta
            else
                beta = gamma / gamma_old
                alpha = gamma / (delta - beta * gamma / alpha)
            end if
            call xpby(nv, beta, z)
            call xpby(m, beta, q)
            call xpby(w, beta, s)
            call xpby(u, beta, p)
            call axpy(alpha, p, x)
            call axpy(-alpha, s, r)
            call axpy(-alpha, q, u)
            call axpy(-alpha, z, w)
            gamma_old = gamma
            if (replace_now()) then                            ! every recurrence from x and p
                call residual(x, r)
                call matvec(p, s)
                call precond(r, u)
                call precond(s, q)
                call matvec(u, w)
                call matvec(q, z)
            end if
            call iteration_done()
        end do
    end subroutine pipelined
    ! [pipelined]

end function cg_variant_mpi
! [cg_variant_mpi]

end module course_cg_mpi
