! fem1d: 1D steady heat conduction with linear elements, standalone (Fortran twin of
! src_c/01_fem1d/fem1d_main.c).
!
!   usage: fem1d_f [INPUT]      (default INPUT: input.dat)
!
! INPUT, one group of values per line, anything after them is a comment:
!   NE            number of elements (> 0)
!   LENGTH COND   length of the bar (> 0), thermal conductivity (> 0)
!   QVOL QFLUX    volumetric heat source, heat flux COND dT/dx at x = LENGTH
!   EPS           CG tolerance on ||r|| / ||b|| (> 0)
! T = 0 at x = 0. Prints a summary and checks the nodal values against the exact solution.
! Exit status: 0 converged, 1 not converged, 2 bad input.
program fem1d
    use, intrinsic :: iso_fortran_env, only: error_unit, output_unit
    use, intrinsic :: iso_c_binding, only: c_int, c_double
    use course_fem1d, only: fem1d_pattern, fem1d_assemble, fem1d_boundary
    use course_cg, only: pcg_jacobi
    use course_input, only: input_file, input_open, input_close, input_ints, input_reals, &
                            input_require_positive
    use course_cformat, only: c_d, c_e, c_g
    implicit none
    integer, parameter :: dp = c_double

    character(len=:), allocatable :: path, prog
    integer :: arg_len, alloc_stat
    type(input_file) :: in
    integer :: ne_in(1)
    real(dp) :: geom(2), load(2), eps_in(1)
    real(dp) :: length, cond, qvol, qflux, eps, relres, err
    integer(c_int) :: ne, n, nnz, iters, i
    real(dp), allocatable :: x(:), t(:), rhs(:), val(:)
    integer(c_int), allocatable :: row_ptr(:), col_idx(:)
    character(len=:), allocatable :: status

    if (command_argument_count() > 1) then
        call get_command_argument(0, length=arg_len)
        allocate(character(len=arg_len) :: prog)
        call get_command_argument(0, prog)
        write(error_unit, '(a)') 'usage: ' // prog // ' [INPUT]'
        deallocate(prog)
        stop 2, quiet=.true.
    end if
    if (command_argument_count() == 1) then
        call get_command_argument(1, length=arg_len)
        allocate(character(len=arg_len) :: path)
        call get_command_argument(1, path)
    else
        path = 'input.dat'
    end if

    call input_open(in, 'fem1d', path)
    deallocate(path)                ! in keeps its own copy, for messages
    call input_ints(in, ne_in, 'NE: number of elements')
    call input_require_positive(in, real(ne_in(1), dp), 'NE')
    call input_reals(in, geom, 'LENGTH COND: length, conductivity')
    call input_require_positive(in, geom(1), 'LENGTH')
    call input_require_positive(in, geom(2), 'COND')
    call input_reals(in, load, 'QVOL QFLUX: heat source, flux at x = LENGTH')
    call input_reals(in, eps_in, 'EPS: CG tolerance')
    call input_require_positive(in, eps_in(1), 'EPS')
    call input_close(in)
    ne = ne_in(1)
    length = geom(1)
    cond = geom(2)
    qvol = load(1)
    qflux = load(2)
    eps = eps_in(1)

    n = ne + 1                      ! nodes = unknowns
    nnz = 3 * n - 2                 ! tridiagonal
    allocate(x(n), t(n), rhs(n), val(nnz), row_ptr(n + 1), col_idx(nnz), stat=alloc_stat)
    if (alloc_stat /= 0) then
        write(error_unit, '(a)') 'fem1d: out of memory for NE = ' // c_d(ne)
        stop 1, quiet=.true.
    end if
    t = 0.0_dp                      ! initial guess of CG
    rhs = 0.0_dp
    val = 0.0_dp
    do i = 1, n                     ! node i sits at x = LENGTH (i-1) / NE
        x(i) = length * real(i - 1, dp) / real(ne, dp)
    end do

    call fem1d_pattern(n, row_ptr, col_idx)
    call fem1d_assemble(ne, x, cond, qvol, row_ptr, col_idx, val, rhs)
    call fem1d_boundary(n, qflux, row_ptr, col_idx, val, rhs)
    iters = pcg_jacobi(n, row_ptr, col_idx, val, rhs, t, eps, 10 * n, relres)
    if (iters < 0) then             ! CG could not allocate its work vectors
        write(error_unit, '(a)') 'fem1d: out of memory for NE = ' // c_d(ne)
        stop 1, quiet=.true.
    end if

    err = 0.0_dp
    do i = 1, n
        err = max(err, abs(t(i) - exact(x(i))))
    end do
    if (relres <= eps) then
        status = 'converged'
    else
        status = 'NOT converged'
    end if
    write(output_unit, '(a)') 'fem1d (Fortran): ' // c_d(ne) // ' elements, ' // c_d(n) // &
                              ' unknowns, ' // c_d(nnz) // ' nonzeros'
    write(output_unit, '(a)') '  CG: ' // c_d(iters) // ' iterations, relative residual ' // &
                              c_e(relres, 3) // ' (' // status // ')'
    write(output_unit, '(a)') '  T(LENGTH) = ' // c_g(t(n), 10) // '   exact ' // c_g(exact(length), 10)
    write(output_unit, '(a)') '  max nodal error ' // c_e(err, 3) // &
                              ' (should be near round-off: linear elements are nodally exact)'
    deallocate(x, t, rhs, val, row_ptr, col_idx, status)
    if (.not. (relres <= eps)) stop 1, quiet=.true.

contains

    ! exact solution: T(x) = -qvol x^2 / (2 cond) + (qflux + qvol L) x / cond
    pure function exact(xp) result(tx)
        real(dp), intent(in) :: xp
        real(dp) :: tx

        tx = (-0.5_dp * qvol * xp * xp + (qflux + qvol * length) * xp) / cond
    end function exact

end program fem1d
