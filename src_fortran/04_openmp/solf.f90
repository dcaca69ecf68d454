! solf: the finite-volume Poisson problem of lecture 04 solved by one version of the OpenMP CG
! ladder, standalone (Fortran twin of src_c/04_openmp/solc.c).
!
!   usage: solf [INPUT.DAT] [v0|v1|v2|v3]      (defaults: INPUT.DAT, v3)
!
! INPUT.DAT, one group of values per line, anything after them is a comment:
!   NX NY NZ        number of cells in x, y, z (> 0)
!   DX DY DZ        cell size in x, y, z (> 0)
!   EPSICCG         CG tolerance on ||r|| / ||b|| (> 0)
! -div(grad phi) = x + y + z in the box, phi = 0 on the top face z = NZ DZ, the other faces
! insulated. v0 generates the matrix (CRS) serially, v1 in parallel (first touch), v2 and v3 in
! ELL, in parallel. The threads: OMP_NUM_THREADS. Prints a summary with phi's largest value and
! the sum of phi (a checksum to compare versions, thread counts and languages). Exit status: 0
! converged, 1 not converged (or out of memory), 2 bad input, command line or thread count.
program solf
    use, intrinsic :: iso_fortran_env, only: error_unit, output_unit, int64
    use, intrinsic :: iso_c_binding, only: c_int, c_double
    use omp_lib, only: omp_get_wtime, omp_get_max_threads, omp_get_num_procs
    use course_poisson, only: poi_gen_crs, poi_gen_ell
    use course_pcg_ladder, only: pcg_v0, pcg_v1, pcg_v2, pcg_v3
    use course_input, only: input_file, input_open, input_close, input_ints, input_reals, &
                            input_require_positive, input_fail
    use course_cformat, only: c_d, c_e
    implicit none
    integer, parameter :: dp = c_double
    character(len=2), parameter :: VERSIONS(0:3) = ['v0', 'v1', 'v2', 'v3']
    ! at most this many threads per core (the OpenMP runtime itself crashes when asked for tens of
    ! thousands; beyond the cores, threads only take turns); the same limit as course.problems
    integer, parameter :: THREADS_PER_CORE_MAX = 16

    character(len=:), allocatable :: input_path, name, format_text, status_text
    integer :: version, v, exit_status, alloc_stat
    integer(c_int) :: cells(3), n, nnz, max_iter, iters, parallel, i, imax
    real(dp) :: size(3), eps, relres, total, t0, t1, t2
    real(dp), allocatable :: d(:), b(:), phi(:), amat(:)
    integer(c_int), allocatable :: index(:), item(:)
    logical :: ell

    call read_arguments()
    version = -1
    do v = 0, 3
        if (len(name) == len(VERSIONS(v)) .and. name == VERSIONS(v)) version = v  ! no blank padding
    end do
    if (version < 0) then
        write(error_unit, '(a)') "solf: unknown version '" // name // &
                                 "' (expected v0, v1, v2 or v3)"
        deallocate(input_path, name)
        stop 2, quiet=.true.
    end if
    call check_threads()
    call read_input(input_path)
    deallocate(input_path)          ! main-program variables are never freed automatically
    n = cells(1) * cells(2) * cells(3)
    nnz = 2 * ((cells(1) - 1) * cells(2) * cells(3) + cells(1) * (cells(2) - 1) * cells(3) &
               + cells(1) * cells(2) * (cells(3) - 1))
    parallel = merge(1, 0, version > 0)
    ell = version >= 2

    ! allocate does not touch the memory: the generator (and the loop below) touch the pages first
    if (ell) then
        allocate(d(n), b(n), phi(n), item(6 * n), amat(6 * n), stat=alloc_stat)
    else
        allocate(d(n), b(n), phi(n), index(n + 1), item(nnz), amat(nnz), stat=alloc_stat)
    end if
    if (alloc_stat /= 0) call out_of_memory()

    t0 = omp_get_wtime()
    if (ell) then
        call poi_gen_ell(cells(1), cells(2), cells(3), size(1), size(2), size(3), parallel, d, &
                         item, amat, b)
    else
        call poi_gen_crs(cells(1), cells(2), cells(3), size(1), size(2), size(3), parallel, d, &
                         index, item, amat, b)
    end if
    !$omp parallel do schedule(static) if (parallel /= 0)
    do i = 1, n                                          ! initial guess 0
        phi(i) = 0.0_dp
    end do
    !$omp end parallel do
    t1 = omp_get_wtime()

    if (10_int64 * n <= huge(n)) then                    ! 10 N, if it fits
        max_iter = 10 * n
    else
        max_iter = huge(n)
    end if
    relres = 0.0_dp
    select case (version)
    case (0)
        iters = pcg_v0(n, d, index, item, amat, b, phi, eps, max_iter, relres)
    case (1)
        iters = pcg_v1(n, d, index, item, amat, b, phi, eps, max_iter, relres)
    case (2)
        iters = pcg_v2(n, d, item, amat, b, phi, eps, max_iter, relres)
    case default
        iters = pcg_v3(n, d, item, amat, b, phi, eps, max_iter, relres)
    end select
    t2 = omp_get_wtime()
    if (iters < 0) call out_of_memory()

    imax = 1                                             ! the first cell with the largest phi
    total = 0.0_dp
    do i = 1, n
        if (phi(i) > phi(imax)) imax = i
        total = total + phi(i)
    end do
    if (ell) then
        format_text = 'ELL (6 per row)'
    else
        format_text = 'CRS'
    end if
    if (relres <= eps) then
        status_text = 'converged'
        exit_status = 0
    else
        status_text = 'NOT converged'
        exit_status = 1
    end if
    write(output_unit, '(a)') 'sol (Fortran): ' // c_d(cells(1)) // ' x ' // c_d(cells(2)) // &
        ' x ' // c_d(cells(3)) // ' cells, N = ' // c_d(n) // ', ' // c_d(nnz) // &
        ' off-diagonal nonzeros in ' // format_text
    write(output_unit, '(a)') '  version ' // VERSIONS(version) // ', threads ' // &
        c_d(omp_get_max_threads())
    write(output_unit, '(a)') '  CG: ' // c_d(iters) // ' iterations, relative residual ' // &
        c_e(relres, 3) // ' (' // status_text // ')'
    write(output_unit, '(a)') '  time: generate ' // c_e(t1 - t0, 3) // ' s, solve ' // &
        c_e(t2 - t1, 3) // ' s'
    write(output_unit, '(a)') '  phi(max) = ' // c_e(phi(imax), 15) // ' at cell ' // &
        c_d(imax - 1) // ' (i j k = ' // c_d(mod(imax - 1, cells(1))) // ' ' // &
        c_d(mod((imax - 1) / cells(1), cells(2))) // ' ' // c_d((imax - 1) / (cells(1) * cells(2))) &
        // ')'
    write(output_unit, '(a)') '  phi(checksum) = ' // c_e(total, 15)
    deallocate(d, b, phi, item, amat, name, format_text, status_text)
    if (allocated(index)) deallocate(index)
    if (exit_status /= 0) stop exit_status, quiet=.true.

contains

    ! INPUT.DAT and the version from the command line (defaults INPUT.DAT, v3); a usage line and
    ! exit 2 for more than two arguments
    subroutine read_arguments()
        integer :: arg_len
        character(len=:), allocatable :: prog

        if (command_argument_count() > 2) then
            call get_command_argument(0, length=arg_len)
            allocate(character(len=arg_len) :: prog)
            call get_command_argument(0, prog)
            write(error_unit, '(a)') 'usage: ' // prog // ' [INPUT.DAT] [v0|v1|v2|v3]'
            deallocate(prog)        ! STOP would leave it allocated (a leak for LeakSanitizer)
            stop 2, quiet=.true.
        end if
        if (command_argument_count() >= 1) then
            call get_command_argument(1, length=arg_len)
            allocate(character(len=arg_len) :: input_path)
            call get_command_argument(1, input_path)
        else
            input_path = 'INPUT.DAT'
        end if
        if (command_argument_count() == 2) then
            call get_command_argument(2, length=arg_len)
            allocate(character(len=arg_len) :: name)
            call get_command_argument(2, name)
        else
            name = 'v3'
        end if
    end subroutine read_arguments

    subroutine read_input(path)
        character(len=*), intent(in) :: path
        type(input_file) :: in
        real(dp) :: one(1)

        call input_open(in, 'solf', path)
        call input_ints(in, cells, 'NX NY NZ: number of cells')
        call input_require_positive(in, real(cells(1), dp), 'NX')
        call input_require_positive(in, real(cells(2), dp), 'NY')
        call input_require_positive(in, real(cells(3), dp), 'NZ')
        ! the ELL arrays hold 6 N entries, N = NX NY NZ (in floating point: no overflow here)
        if (6.0_dp * cells(1) * cells(2) * cells(3) > huge(1_c_int)) &
            call input_fail(in, 'mesh too large: 6 NX NY NZ is more than ' // c_d(huge(1_c_int)))
        call input_reals(in, size, 'DX DY DZ: cell size')
        call input_require_positive(in, size(1), 'DX')
        call input_require_positive(in, size(2), 'DY')
        call input_require_positive(in, size(3), 'DZ')
        call input_reals(in, one, 'EPSICCG: CG tolerance')
        call input_require_positive(in, one(1), 'EPSICCG')
        eps = one(1)
        call input_close(in)
    end subroutine read_input

    ! OMP_NUM_THREADS within THREADS_PER_CORE_MAX per core of those this process may use (its
    ! affinity mask, as omp_get_num_procs counts them), or a one-line error and exit status 2
    subroutine check_threads()
        integer :: cores, threads

        cores = omp_get_num_procs()
        threads = omp_get_max_threads()
        if (threads > THREADS_PER_CORE_MAX * cores) then
            write(error_unit, '(a)') 'solf: OMP_NUM_THREADS=' // c_d(threads) // ' is more than ' &
                // c_d(THREADS_PER_CORE_MAX) // ' per core: this process may use ' // c_d(cores) &
                // ' core(s), so at most ' // c_d(THREADS_PER_CORE_MAX * cores) &
                // ' threads (more only take turns)'
            deallocate(input_path, name)
            stop 2, quiet=.true.
        end if
    end subroutine check_threads

    subroutine out_of_memory()
        write(error_unit, '(a)') 'solf: out of memory for NX NY NZ = ' // c_d(cells(1)) // ' ' // &
                                 c_d(cells(2)) // ' ' // c_d(cells(3))
        stop 1, quiet=.true.
    end subroutine out_of_memory

end program solf
