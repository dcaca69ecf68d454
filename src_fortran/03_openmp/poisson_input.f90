! What the standalone programs of lecture 03's Poisson problem share (solf, and iccg_f of lecture
! 04_iccg; Fortran twin of src_c/03_openmp/poisson_input.c): the input file INPUT.DAT (NX NY NZ /
! DX DY DZ / EPSICCG, one group of values per line, anything after them a comment), the command
! line's INPUT.DAT, the matrix's nonzeros and CG's iteration limit, the limit on OMP_NUM_THREADS
! and running out of memory. PROG, the program's name, begins every message (as in
! "PROG: FILE:LINE: ...").
module course_poisson_input
    use, intrinsic :: iso_fortran_env, only: error_unit, int64
    use, intrinsic :: iso_c_binding, only: c_int, c_double
    use omp_lib, only: omp_get_max_threads, omp_get_num_procs
    use course_input, only: input_file, input_open, input_close, input_ints, input_reals, &
                            input_require_positive, input_fail
    use course_cformat, only: c_d
    implicit none
    private
    public :: THREADS_PER_CORE_MAX, poisson_problem, poisson_input_path, poisson_argument
    public :: poisson_read_input, poisson_nnz, poisson_max_iter, poisson_threads_ok
    public :: poisson_out_of_memory

    integer, parameter :: dp = c_double
    ! at most this many threads per core (the OpenMP runtime itself crashes when asked for tens of
    ! thousands; beyond the cores, threads only take turns); the same limit as course.problems
    integer, parameter :: THREADS_PER_CORE_MAX = 16

    type :: poisson_problem
        integer(c_int) :: nx, ny, nz        ! number of cells in x, y, z
        real(dp) :: dx, dy, dz, eps         ! cell size in x, y, z; CG tolerance on ||r|| / ||b||
    end type poisson_problem

contains

! INPUT.DAT's path from the command line: argument 1, default INPUT.DAT, for a program that takes
! at most one argument after it (`usage` names it); more: "usage: ARG0 [INPUT.DAT] USAGE", stop 2
subroutine poisson_input_path(usage, path)
    character(len=*), intent(in) :: usage
    character(len=:), allocatable, intent(out) :: path
    character(len=:), allocatable :: prog

    if (command_argument_count() > 2) then
        prog = poisson_argument(0)
        write(error_unit, '(a)') 'usage: ' // prog // ' [INPUT.DAT] ' // usage
        deallocate(prog)            ! STOP would leave it allocated (a leak for LeakSanitizer)
        stop 2, quiet=.true.
    end if
    if (command_argument_count() >= 1) then
        path = poisson_argument(1)
    else
        path = 'INPUT.DAT'
    end if
end subroutine poisson_input_path

! command-line argument i (0: the program), whole
function poisson_argument(i) result(word)
    integer, intent(in) :: i
    character(len=:), allocatable :: word
    integer :: arg_len

    call get_command_argument(i, length=arg_len)
    allocate(character(len=arg_len) :: word)
    call get_command_argument(i, word)
end function poisson_argument

! Reads and checks INPUT.DAT at `path`; the program's largest array holds per_cell N entries,
! N = NX NY NZ, which must fit a c_int. A bad line: "PROG: FILE:LINE: ..." and stop 2.
function poisson_read_input(prog, path, per_cell) result(pr)
    character(len=*), intent(in) :: prog, path
    integer, intent(in) :: per_cell
    type(poisson_problem) :: pr
    type(input_file) :: in
    integer(c_int) :: cells(3)
    real(dp) :: size(3), one(1)

    call input_open(in, prog, path)
    call input_ints(in, cells, 'NX NY NZ: number of cells')
    call input_require_positive(in, real(cells(1), dp), 'NX')
    call input_require_positive(in, real(cells(2), dp), 'NY')
    call input_require_positive(in, real(cells(3), dp), 'NZ')
    ! in floating point: no overflow here
    if (real(per_cell, dp) * cells(1) * cells(2) * cells(3) > huge(1_c_int)) &
        call input_fail(in, 'mesh too large: ' // c_d(per_cell) // ' NX NY NZ is more than ' // &
                            c_d(huge(1_c_int)))
    call input_reals(in, size, 'DX DY DZ: cell size')
    call input_require_positive(in, size(1), 'DX')
    call input_require_positive(in, size(2), 'DY')
    call input_require_positive(in, size(3), 'DZ')
    call input_reals(in, one, 'EPSICCG: CG tolerance')
    call input_require_positive(in, one(1), 'EPSICCG')
    call input_close(in)
    pr = poisson_problem(cells(1), cells(2), cells(3), size(1), size(2), size(3), one(1))
end function poisson_read_input

! the off-diagonal nonzeros of the matrix: two per face between two cells (in CRS), the faces
! normal to x, then y, then z
pure integer(c_int) function poisson_nnz(pr)
    type(poisson_problem), intent(in) :: pr

    poisson_nnz = 2 * ((pr%nx - 1) * pr%ny * pr%nz + pr%nx * (pr%ny - 1) * pr%nz &
                       + pr%nx * pr%ny * (pr%nz - 1))
end function poisson_nnz

! CG's iteration limit: 10 N, or huge(n) where 10 N does not fit
pure integer(c_int) function poisson_max_iter(n)
    integer(c_int), intent(in) :: n

    if (10_int64 * n <= huge(n)) then
        poisson_max_iter = 10 * n
    else
        poisson_max_iter = huge(n)
    end if
end function poisson_max_iter

! .true. if OMP_NUM_THREADS is within THREADS_PER_CORE_MAX per core of those this process may use
! (its affinity mask, as omp_get_num_procs counts them); else .false. after a one-line error (the
! program then frees what it holds and stops with status 2)
logical function poisson_threads_ok(prog)
    character(len=*), intent(in) :: prog
    integer :: cores, threads

    cores = omp_get_num_procs()
    threads = omp_get_max_threads()
    poisson_threads_ok = threads <= THREADS_PER_CORE_MAX * cores
    if (.not. poisson_threads_ok) &
        write(error_unit, '(a)') prog // ': OMP_NUM_THREADS=' // c_d(threads) // ' is more than ' &
            // c_d(THREADS_PER_CORE_MAX) // ' per core: this process may use ' // c_d(cores) &
            // ' core(s), so at most ' // c_d(THREADS_PER_CORE_MAX * cores) &
            // ' threads (more only take turns)'
end function poisson_threads_ok

! "PROG: out of memory" (with NX NY NZ if pr is present) and stop 1
subroutine poisson_out_of_memory(prog, pr)
    character(len=*), intent(in) :: prog
    type(poisson_problem), intent(in), optional :: pr

    if (present(pr)) then
        write(error_unit, '(a)') prog // ': out of memory for NX NY NZ = ' // c_d(pr%nx) // ' ' &
                                 // c_d(pr%ny) // ' ' // c_d(pr%nz)
    else
        write(error_unit, '(a)') prog // ': out of memory'
    end if
    stop 1, quiet=.true.
end subroutine poisson_out_of_memory

end module course_poisson_input
