! solf: the finite-volume Poisson problem of lecture 03 solved by one version of the OpenMP CG
! ladder, standalone (Fortran twin of src_c/03_openmp/solc.c).
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
    use, intrinsic :: iso_fortran_env, only: error_unit, output_unit
    use, intrinsic :: iso_c_binding, only: c_int, c_double
    use omp_lib, only: omp_get_wtime, omp_get_max_threads
    use course_poisson, only: poi_gen_crs, poi_gen_ell
    use course_pcg_ladder, only: pcg_v0, pcg_v1, pcg_v2, pcg_v3
    use course_poisson_input, only: poisson_problem, poisson_input_path, poisson_argument, &
                                    poisson_read_input, poisson_nnz, poisson_max_iter, &
                                    poisson_threads_ok, poisson_out_of_memory
    use course_cformat, only: c_d, c_e
    implicit none
    integer, parameter :: dp = c_double
    character(len=2), parameter :: VERSIONS(0:3) = ['v0', 'v1', 'v2', 'v3']

    character(len=:), allocatable :: input_path, name, format_text, status_text
    integer :: version, v, exit_status, alloc_stat
    integer(c_int) :: n, nnz, max_iter, iters, parallel, i, imax
    real(dp) :: relres, total, t0, t1, t2
    type(poisson_problem) :: pr
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
    if (.not. poisson_threads_ok('solf')) then
        deallocate(input_path, name)
        stop 2, quiet=.true.
    end if
    ! the ELL arrays hold 6 N entries, N = NX NY NZ
    pr = poisson_read_input('solf', input_path, 6)
    deallocate(input_path)          ! main-program variables are never freed automatically
    n = pr%nx * pr%ny * pr%nz
    nnz = poisson_nnz(pr)
    parallel = merge(1, 0, version > 0)
    ell = version >= 2

    ! allocate does not touch the memory: the generator (and the loop below) touch the pages first
    if (ell) then
        allocate(d(n), b(n), phi(n), item(6 * n), amat(6 * n), stat=alloc_stat)
    else
        allocate(d(n), b(n), phi(n), index(n + 1), item(nnz), amat(nnz), stat=alloc_stat)
    end if
    if (alloc_stat /= 0) call poisson_out_of_memory('solf', pr)

    t0 = omp_get_wtime()
    if (ell) then
        call poi_gen_ell(pr%nx, pr%ny, pr%nz, pr%dx, pr%dy, pr%dz, parallel, d, item, amat, b)
    else
        call poi_gen_crs(pr%nx, pr%ny, pr%nz, pr%dx, pr%dy, pr%dz, parallel, d, index, item, &
                         amat, b)
    end if
    !$omp parallel do schedule(static) if (parallel /= 0)
    do i = 1, n                                          ! initial guess 0
        phi(i) = 0.0_dp
    end do
    !$omp end parallel do
    t1 = omp_get_wtime()

    max_iter = poisson_max_iter(n)
    relres = 0.0_dp
    select case (version)
    case (0)
        iters = pcg_v0(n, d, index, item, amat, b, phi, pr%eps, max_iter, relres)
    case (1)
        iters = pcg_v1(n, d, index, item, amat, b, phi, pr%eps, max_iter, relres)
    case (2)
        iters = pcg_v2(n, d, item, amat, b, phi, pr%eps, max_iter, relres)
    case default
        iters = pcg_v3(n, d, item, amat, b, phi, pr%eps, max_iter, relres)
    end select
    t2 = omp_get_wtime()
    if (iters < 0) call poisson_out_of_memory('solf', pr)

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
    if (relres <= pr%eps) then
        status_text = 'converged'
        exit_status = 0
    else
        status_text = 'NOT converged'
        exit_status = 1
    end if
    write(output_unit, '(a)') 'sol (Fortran): ' // c_d(pr%nx) // ' x ' // c_d(pr%ny) // &
        ' x ' // c_d(pr%nz) // ' cells, N = ' // c_d(n) // ', ' // c_d(nnz) // &
        ' off-diagonal nonzeros in ' // format_text
    write(output_unit, '(a)') '  version ' // VERSIONS(version) // ', threads ' // &
        c_d(omp_get_max_threads())
    write(output_unit, '(a)') '  CG: ' // c_d(iters) // ' iterations, relative residual ' // &
        c_e(relres, 3) // ' (' // status_text // ')'
    write(output_unit, '(a)') '  time: generate ' // c_e(t1 - t0, 3) // ' s, solve ' // &
        c_e(t2 - t1, 3) // ' s'
    write(output_unit, '(a)') '  phi(max) = ' // c_e(phi(imax), 15) // ' at cell ' // &
        c_d(imax - 1) // ' (i j k = ' // c_d(mod(imax - 1, pr%nx)) // ' ' // &
        c_d(mod((imax - 1) / pr%nx, pr%ny)) // ' ' // c_d((imax - 1) / (pr%nx * pr%ny)) &
        // ')'
    write(output_unit, '(a)') '  phi(checksum) = ' // c_e(total, 15)
    deallocate(d, b, phi, item, amat, name, format_text, status_text)
    if (allocated(index)) deallocate(index)
    if (exit_status /= 0) stop exit_status, quiet=.true.

contains

    ! INPUT.DAT and the version from the command line (defaults INPUT.DAT, v3); a usage line and
    ! exit 2 for more than two arguments
    subroutine read_arguments()
        call poisson_input_path('[v0|v1|v2|v3]', input_path)
        if (command_argument_count() == 2) then
            name = poisson_argument(2)
        else
            name = 'v3'
        end if
    end subroutine read_arguments

end program solf
