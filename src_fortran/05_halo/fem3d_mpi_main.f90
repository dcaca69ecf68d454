! fem3d_mpi: fem3d (02_fem3d/fem3d_main.f90) on P MPI ranks, GeoFEM style (Fortran twin of
! src_c/05_halo/fem3d_mpi_main.c).
!
!   usage: mpiexec -n P fem3d_mpi_f INPUT [OUTPUT.pvtu] [ALGORITHM] [blocking|iallreduce]
!                                     [replace=N]
!
! INPUT is fem3d's input file (NX NY NZ / DX DY DZ / COND QVOL [SOURCE] / QFLUX / FIXED / EPS;
! SOURCE constant or nakajima: with nakajima every rank adds the load of QVOL |x_c + y_c| on each
! of its local elements, and the summary gives max T, no error) with a 7th line that says how the
! nodes are shared among the ranks, either
!
!   PX PY PZ        blocks: the number of parts along x, y, z (PX * PY * PZ = P). Along x the NX+1
!                   node indices are cut into PX blocks, block b holding the indices
!                   start(b) <= i < start(b+1) with start(b) = (b (NX+1)) / PX; the same along y
!                   and z. Rank px + PX (py + PY pz) owns the nodes of block (px, py, pz).
!   local PREFIX    any partition (METIS's, say): rank r reads its local data from the file
!                   PREFIX.r (local_data.f90), which `python -m course partition` writes.
!
! and two optional lines after it (lecture 08_hybrid: the preconditioner; a file without them, or
! with blank lines there, runs with diagonal, as before):
!
!   PRECOND SWEEPS  diagonal 1 | bjacobi-ic0 1 | asdd-ic0 K   (K >= 1 additive Schwarz sweeps)
!   ORDERING COLORS natural 0 | cm 0 | rcm 0 | mc K | cm-rcm K (K >= 2; absent: natural 0): the
!                   ordering of each rank's internal block for IC(0) (lecture 04_iccg); diagonal
!                   takes natural 0 only, and no rank may have fewer internal nodes than colors
!                   (08_hybrid/precond_mpi.f90).
!
! Every rank has its own local data, and nothing global: the nodes it owns (internal), the elements
! that touch them (for blocks: the block plus one layer of elements where a neighbour lies), the
! other nodes of those elements (external, owned by a neighbour), and the tables of the halo
! exchange. For blocks it builds them itself; from files it reads them. From there on both go the
! same way: it assembles with the serial element kernel on its local elements, so that its internal
! rows are the serial ones (to rounding), and solves with cg_variant_mpi (06_pipecg/cg_mpi.f90).
! Hybrid MPI + OpenMP (lecture 08_hybrid): every rank assembles and solves with a team of
! OMP_NUM_THREADS threads: the elements by 8 colors (no two elements of a color share a node), the
! solve in one parallel region (cg_mpi.f90); MPI is called by the master thread only. ALGORITHM
! (pcg, chronopoulos-gear, gropp or pipelined: lecture 06_pipecg), blocking (MPI_Allreduce) or
! iallreduce (MPI_Iallreduce + MPI_Wait), and replace=N (residual replacement every N iterations,
! N > 0), in any order after INPUT, choose the variant; a missing one is pcg, blocking, or no
! replacement. Rank 0 prints fem3d's summary (global numbers), a line on the partition, and four
! lines on the solver: the algorithm, the reductions, the global sums counted per iteration; the
! true relative residual ||b - A x|| / ||b||; the preconditioner, its sweeps, ordering, the fewest
! and most colors over the ranks and the halo exchanges counted per iteration; the MPI thread level
! (the program asks for MPI_THREAD_FUNNELED and stops with status 2 if the library provides less)
! and the OpenMP threads per rank. Any other word after INPUT that does not end in .pvtu is an
! error. With OUTPUT.pvtu every rank writes its piece STEM_r.vtu and rank 0 the parallel file that
! lists them (ParaView). Exit status: 0 converged, 1 not converged (or out of memory), 2 bad input
! (an IC(0) breakdown included), local data, output file or MPI thread level; always the same on
! every rank.

! Ending MPI on every path out of the program, the input reader's `stop 2` included (a module
! procedure: a pointer to an internal procedure of the program would need gfortran's trampolines,
! and with them an executable stack).
module fem3d_mpi_exit
    use mpi_f08, only: MPI_Finalize, MPI_Finalized
    implicit none
    private
    public :: finalize_mpi

contains

    subroutine finalize_mpi()
        logical :: finalized

        call MPI_Finalized(finalized)
        if (.not. finalized) call MPI_Finalize()
    end subroutine finalize_mpi

end module fem3d_mpi_exit

program fem3d_mpi
    use, intrinsic :: iso_fortran_env, only: error_unit, output_unit, int64
    use, intrinsic :: iso_c_binding, only: c_int, c_double
    use mpi_f08, only: MPI_Comm, MPI_COMM_WORLD, MPI_Init_thread, MPI_Comm_rank, MPI_Comm_size, &
                       MPI_Allreduce, MPI_Bcast, MPI_INTEGER, MPI_DOUBLE_PRECISION, MPI_SUM, &
                       MPI_MIN, MPI_MAX, MPI_THREAD_SINGLE, MPI_THREAD_FUNNELED, &
                       MPI_THREAD_SERIALIZED, MPI_Barrier, MPI_Wtime, MPI_IN_PLACE
    use omp_lib, only: omp_get_max_threads
    use course_fem3d, only: fem3d_element, fem3d_face_flux, fem3d_nakajima_source, &
                            fem3d_element_source_load
    use course_crs, only: crs_dirichlet, crs_find
    use course_halo, only: halo_exchange
    use course_cg_mpi, only: cg_variant_mpi, cg_algorithm_name, cg_algorithm_from_name, CG_PCG
    use course_input, only: input_file, input_open, input_close, input_line, input_parse_ints, &
                            input_require_positive, input_fail, input_quiet, input_before_exit, &
                            read_line, max_line
    use course_precond_mpi, only: precond_mpi, precond_name, precond_from_name, precond_setup, &
                                  precond_free, PRECOND_DIAGONAL, PRECOND_ASDD_IC0, &
                                  PRECOND_OUT_OF_MEMORY, PRECOND_TOO_MANY_COLORS, &
                                  PRECOND_BREAKDOWN
    use course_fem3d_problem, only: fem3d_problem, FACES, fem3d_read_problem, axis_of, opposite, &
                                    face_index, exact_at, SOURCE_NAKAJIMA
    use course_local_data, only: local_data, read_local_data, check_local_tables, check_local_halo
    use course_cformat, only: c_d, c_e, c_f, c_g
    use fem3d_mpi_exit, only: finalize_mpi
    implicit none
    integer, parameter :: dp = c_double
    character(len=*), parameter :: PROG = 'fem3d_mpi_f'
    character(len=1), parameter :: AXES(3) = ['x', 'y', 'z']
    character(len=2), parameter :: PARTS_NAME(3) = ['PX', 'PY', 'PZ']
    ! what separates the words of line 7 `local PREFIX` and the first word of lines 8 and 9
    character(len=*), parameter :: BLANKS = ' ' // achar(9) // achar(13) // achar(10)
    ! the corners of an element (i, j, k): the bottom face counter-clockwise, then the top face
    integer, parameter :: CORNER(3, 8) = reshape([0, 0, 0, 1, 0, 0, 1, 1, 0, 0, 1, 0, &
                                                  0, 0, 1, 1, 0, 1, 1, 1, 1, 0, 1, 1], [3, 8])
    ! The blocks around this one, in the directions (dx, dy, dz) in {-1, 0, 1}^3, are numbered
    ! slot = 1 + (dx+1) + 3 (dy+1) + 9 (dz+1); slot 14 is this block itself.
    integer, parameter :: OWN_SLOT = 14

    ! 08_hybrid: the orderings of line 9 (C's ORDERINGS), the MPI thread levels by name
    character(len=*), parameter :: ORDERINGS(0:4) = [character(len=7) :: 'natural', 'cm', &
                                                     'rcm', 'mc', 'cm-rcm']
    character(len=*), parameter :: THREAD_LEVELS(0:3) = [character(len=10) :: 'SINGLE', &
                                                         'FUNNELED', 'SERIALIZED', 'MULTIPLE']

    type, extends(fem3d_problem) :: problem     ! fem3d's six lines, line 7, lines 8 and 9
        integer :: parts(3) = 0     ! PX PY PZ (blocks)
        character(len=:), allocatable :: prefix     ! PREFIX (local data files), else unallocated
        integer(c_int) :: precond = PRECOND_DIAGONAL, sweeps = 1    ! line 8 (absent: diagonal 1)
        integer(c_int) :: ordering = 0, colors = 0  ! line 9: ORDERINGS(ordering) COLORS
        character(len=:), allocatable :: path       ! the input file, for the messages on 8, 9
    end type problem

    type(MPI_Comm) :: comm
    integer :: rank, n_ranks
    type(problem) :: p
    character(len=:), allocatable :: input_path, output_path
    ! 06_pipecg: the CG variant from the command line (replace_every: N of replace=N, or 0), the
    ! reductions counted per iteration, the true relative residual
    character(len=*), parameter :: REDUCTION_NAMES(0:1) = [character(len=10) :: 'blocking', &
                                                           'iallreduce']
    character(len=*), parameter :: REPLACE_WORD = 'replace='
    integer(c_int) :: algorithm = CG_PCG, nonblocking = 0, replace_every = 0, per_iteration = 0
    real(c_double) :: true_relres = 0.0_c_double
    ! 08_hybrid: the preconditioner of lines 8 and 9, the halo exchanges it and A v make per
    ! iteration (counted), the MPI thread level that MPI_Init_thread provided
    type(precond_mpi) :: precond
    integer(c_int) :: exchanges_per_iteration = 0
    integer :: thread_level

    ! this rank's local data: its nodes, elements and halo tables (see local_data.f90, halo.f90)
    type(local_data) :: local
    integer, allocatable :: node_ijk(:, :)              ! grid indices (i, j, k) of a local node
    integer(c_int) :: n_quad, flux_face, max_iter, iters, alloc_stat, assembled
    ! blocks only: this rank's block, its position part(:) among the blocks, the node indices
    ! first..last it owns along each axis, and the nodes lo..hi of its local elements (elements
    ! lo..hi-1); the local number of each node of lo..hi, and the local nodes per slot
    integer :: part(3), first(3), last(3), lo(3), hi(3)
    integer(c_int), allocatable :: local_of(:, :, :)
    integer :: slot_count(27)
    ! the local system: the n_local x n_local CRS matrix; only its internal rows go to CG; the
    ! buffers of the halo exchange
    real(dp), allocatable :: xyz(:, :), val(:), rhs(:), q(:), g(:), t(:)
    real(dp), allocatable :: q_elem(:)                  ! nakajima's source on the local elements
    real(dp), allocatable, asynchronous :: send_buf(:), recv_buf(:)
    integer(c_int), allocatable :: quads(:, :), row_ptr(:), col_idx(:), fixed(:)
    real(dp) :: relres, started, solve_seconds
    integer :: exit_status
    character(len=:), allocatable :: name, message      ! this rank's local data, for messages

    ! MPI calls from the master thread only (08_hybrid): MPI_THREAD_FUNNELED at least
    call MPI_Init_thread(MPI_THREAD_FUNNELED, thread_level)
    comm = MPI_COMM_WORLD
    call MPI_Comm_rank(comm, rank)
    call MPI_Comm_size(comm, n_ranks)
    if (thread_level < MPI_THREAD_FUNNELED) then
        if (rank == 0) write(error_unit, '(a)') PROG // ': the MPI library provides thread ' // &
            'level ' // thread_level_name(thread_level) // ', this program needs FUNNELED'
        call stop_all(2)
    end if
    ! every rank reads the input and fails in the same way: one message (rank 0), and every rank
    ! finalizes MPI before it stops
    input_quiet = rank /= 0
    input_before_exit => finalize_mpi

    call read_arguments()
    p = read_input(input_path)
    deallocate(input_path)          ! main-program variables are never freed automatically
    flux_face = opposite(p%fixed_face)

    if (allocated(p%prefix)) then
        name = p%prefix // '.' // c_d(rank)
        call read_local_files()
    else
        name = 'the block of rank ' // c_d(rank)
        call build_blocks()
    end if
    call build_local_mesh()
    call build_pattern()
    ! zeros (t: the initial guess of CG; g = 0: T = 0 on the fixed face), a constant source q;
    ! val, rhs and t are first written by the threads that will use their rows (first_touch)
    allocate(val(row_ptr(local%n_local + 1) - 1), rhs(local%n_local), t(local%n_local), &
             stat=alloc_stat)
    call agree_allocation(alloc_stat)
    call first_touch()
    allocate(g(local%n_local), send_buf(local%export_ptr(local%n_neighbours + 1) - 1), &
             recv_buf(local%n_local - local%n_internal), source=0.0_dp, stat=alloc_stat)
    call agree_allocation(alloc_stat)
    ! the nodal source: QVOL, or 0 with nakajima's source, QVOL |x_c + y_c| on each local
    ! element (its load is added after the assembly)
    allocate(q(local%n_local), source=merge(0.0_dp, p%qvol, p%source == SOURCE_NAKAJIMA), &
             stat=alloc_stat)
    call agree_allocation(alloc_stat)
    allocate(q_elem(local%n_elem), source=0.0_dp, stat=alloc_stat)
    call agree_allocation(alloc_stat)
    if (p%source == SOURCE_NAKAJIMA) &
        call fem3d_nakajima_source(local%n_elem, local%elements, xyz, p%qvol, q_elem)
    ! one exchange of the global node numbers: do the ranks' tables fit together?
    call agree(check_local_halo(local, t, send_buf, recv_buf, name, comm, message), message)
    t = 0.0_dp

    ! the serial element kernel, on the local elements, by colors with the threads (08_hybrid):
    ! the internal rows come out as the serial ones, to rounding
    assembled = assemble_by_colors()
    if (assembled == 0 .and. p%source == SOURCE_NAKAJIMA) &      ! all local elements, as Python
        assembled = fem3d_element_source_load(local%n_elem, local%elements, xyz, q_elem, rhs)
    if (any_rank(assembled /= 0)) then
        if (rank == 0) write(error_unit, '(a)') PROG // &
            ': degenerate elements (det J <= 0): DX DY DZ too small'
        call stop_all(1)
    end if
    call fem3d_face_flux(n_quad, quads, xyz, p%qflux, rhs)
    call crs_dirichlet(local%n_local, fixed, g, row_ptr, col_idx, val, rhs)   ! g = 0: T = 0
    max_iter = iteration_limit()
    call setup_precond()
    call MPI_Barrier(comm)                        ! the solve timed from a common start
    started = MPI_Wtime()
    iters = cg_variant_mpi(algorithm, nonblocking, replace_every, local%n_internal, &
                           local%n_local, row_ptr, col_idx, val, precond, rhs, t, p%eps, &
                           max_iter, relres, local%n_neighbours, local%neighbours, &
                           local%import_ptr, local%import_index, local%export_ptr, &
                           local%export_index, comm, per_iteration, exchanges_per_iteration, &
                           true_relres)
    solve_seconds = MPI_Wtime() - started
    if (iters < 0) call out_of_memory()
    call MPI_Allreduce(MPI_IN_PLACE, solve_seconds, 1, MPI_DOUBLE_PRECISION, MPI_MAX, comm)

    if (relres <= p%eps) then
        exit_status = 0
    else
        exit_status = 1
    end if
    call print_summary()
    call print_variant()
    if (rank == 0) write(output_unit, '(a)') '  solve ' // c_f(solve_seconds, 6) // ' s, ' // &
        c_f(merge(1d6 * solve_seconds / max(iters, 1), 0.0_dp, iters > 0), 2) // &
        ' us per iteration (the slowest rank)'
    if (allocated(output_path)) then
        if (.not. write_output(output_path)) exit_status = 2
    end if
    deallocate(node_ijk, xyz, quads, row_ptr, col_idx, fixed, val, rhs, q, q_elem, g, t, send_buf, &
               recv_buf, name)
    call precond_free(precond)
    if (allocated(output_path)) deallocate(output_path)
    call stop_all(exit_status)      ! (local's arrays: freed with it at the end of the program)

contains

    ! --- MPI: every rank ends the same way -----------------------------------------------------

    ! MPI_Finalize, then exit with `status` (every rank calls it with the same status)
    subroutine stop_all(status)
        integer, intent(in) :: status

        call finalize_mpi()
        if (status /= 0) stop status, quiet=.true.
        stop
    end subroutine stop_all

    ! .true. on every rank if `failed` on any rank
    logical function any_rank(failed)
        logical, intent(in) :: failed
        integer :: mine, worst

        mine = merge(1, 0, failed)
        call MPI_Allreduce(mine, worst, 1, MPI_INTEGER, MPI_MAX, comm)
        any_rank = worst /= 0
    end function any_rank

    ! The lowest rank for which `failed` holds, on every rank; n_ranks if none.
    integer function first_failed_rank(failed)
        logical, intent(in) :: failed

        call MPI_Allreduce(merge(rank, n_ranks, failed), first_failed_rank, 1, MPI_INTEGER, &
                           MPI_MIN, comm)
    end function first_failed_rank

    ! The ranks agree on a step that may fail on some of them only (each reads its own file): the
    ! lowest rank that failed prints its message, one line, and every rank stops with its status.
    ! Nothing happens if no rank failed.
    subroutine agree(status, message)
        integer, intent(in) :: status
        character(len=*), intent(in) :: message
        integer :: first, agreed

        first = first_failed_rank(status /= 0)
        if (first == n_ranks) return
        if (first == rank) write(error_unit, '(a)') PROG // ': ' // message
        agreed = status
        call MPI_Bcast(agreed, 1, MPI_INTEGER, first, comm)
        call stop_all(agreed)
    end subroutine agree

    ! an allocation that failed on one rank stops all of them (the others would wait for it)
    subroutine agree_allocation(stat)
        integer, intent(in) :: stat

        if (any_rank(stat /= 0)) call out_of_memory()
    end subroutine agree_allocation

    subroutine out_of_memory()
        if (rank == 0) write(error_unit, '(a)') PROG // ': out of memory for NX NY NZ = ' // &
            c_d(p%nel(1)) // ' ' // c_d(p%nel(2)) // ' ' // c_d(p%nel(3))
        call stop_all(1)
    end subroutine out_of_memory


    ! --- input ---------------------------------------------------------------------------------

    ! INPUT, then the optional OUTPUT.pvtu, ALGORITHM, blocking|iallreduce and replace=N in any
    ! order, from the command line; a usage line, or one line on a bad word, and exit 2 otherwise
    subroutine read_arguments()
        character(len=*), parameter :: WHAT(0:3) = [character(len=24) :: 'the output file', &
            'the algorithm', 'the reduction mode', 'the residual replacement']
        integer :: arg_len, k, kind, given(0:3)
        character(len=:), allocatable :: prog_path, word

        if (command_argument_count() < 1 .or. command_argument_count() > 5) then
            call get_command_argument(0, length=arg_len)
            allocate(character(len=arg_len) :: prog_path)
            call get_command_argument(0, prog_path)
            if (rank == 0) write(error_unit, '(a)') 'usage: ' // prog_path // &
                ' INPUT [OUTPUT.pvtu] [pcg|chronopoulos-gear|gropp|pipelined] ' // &
                '[blocking|iallreduce] [replace=N]'
            deallocate(prog_path)
            call stop_all(2)
        end if
        call get_command_argument(1, length=arg_len)
        allocate(character(len=arg_len) :: input_path)
        call get_command_argument(1, input_path)
        given = 0
        do k = 2, command_argument_count()
            call get_command_argument(k, length=arg_len)
            if (allocated(word)) deallocate(word)
            allocate(character(len=arg_len) :: word)
            call get_command_argument(k, word)
            kind = read_word(word)
            if (given(kind) > 0) then
                if (rank == 0) write(error_unit, '(a)') PROG // ": argument '" // word // "': " // &
                    trim(WHAT(kind)) // ' is given twice'
                call stop_all(2)
            end if
            given(kind) = 1
        end do
        if (allocated(word)) deallocate(word)
    end subroutine read_arguments

    ! The kind of a word after INPUT (0 output, 1 algorithm, 2 reductions, 3 replacement), its
    ! value stored; one line and exit 2 if it is none of them or a bad replace=N
    integer function read_word(word) result(kind)
        character(len=*), intent(in) :: word

        if (cg_algorithm_from_name(word) >= 0) then
            kind = 1
            algorithm = cg_algorithm_from_name(word)
        else if (word == trim(REDUCTION_NAMES(0)) .or. word == trim(REDUCTION_NAMES(1))) then
            kind = 2
            nonblocking = merge(1, 0, word == trim(REDUCTION_NAMES(1)))
        else if (ends_with(word, '.pvtu')) then
            kind = 0
            output_path = word
        else if (starts_with(word, REPLACE_WORD)) then
            kind = 3
            replace_every = replace_count(word(len(REPLACE_WORD) + 1:))
            if (replace_every <= 0) then
                if (rank == 0) write(error_unit, '(a)') PROG // ": argument '" // word // &
                    "': N must be a positive integer (replace=N: residual replacement every " // &
                    'N iterations)'
                call stop_all(2)
            end if
        else
            if (rank == 0) write(error_unit, '(a)') PROG // ": unknown argument '" // word // &
                "': expected OUTPUT.pvtu, an algorithm (pcg, chronopoulos-gear, gropp, " // &
                'pipelined) or the reductions (blocking, iallreduce)'
            call stop_all(2)
        end if
    end function read_word

    ! N of replace=N from the text after '=': one or more decimal digits, 1 <= N <= huge(N);
    ! 0 if it is not that
    pure integer(c_int) function replace_count(digits) result(n)
        character(len=*), intent(in) :: digits
        integer(int64) :: value
        integer :: k

        n = 0
        if (len(digits) == 0 .or. verify(digits, '0123456789') /= 0) return
        value = 0
        do k = 1, len(digits)           ! stop as soon as it is too big: no overflow
            value = 10 * value + (iachar(digits(k:k)) - iachar('0'))
            if (value > huge(n)) return
        end do
        n = int(value, c_int)
    end function replace_count

    ! .true. if text starts with prefix
    pure logical function starts_with(text, prefix)
        character(len=*), intent(in) :: text, prefix

        starts_with = len(text) >= len(prefix)
        if (starts_with) starts_with = text(1:len(prefix)) == prefix
    end function starts_with

    ! .true. if text ends with suffix
    pure logical function ends_with(text, suffix)
        character(len=*), intent(in) :: text, suffix

        ends_with = len(text) >= len(suffix)
        if (ends_with) ends_with = text(len(text) - len(suffix) + 1:) == suffix
    end function ends_with


    ! fem3d's six lines (the same messages, from the same reader), then line 7
    function read_input(path) result(pr)
        character(len=*), intent(in) :: path
        type(problem) :: pr
        type(input_file) :: in
        character(len=:), allocatable :: line

        call input_open(in, PROG, path)
        pr%path = path
        call fem3d_read_problem(in, pr%fem3d_problem)
        call input_line(in, line, 'PX PY PZ (number of parts along x, y, z) or local PREFIX')
        if (.not. read_prefix(in, line, pr)) call read_parts(in, line, pr)
        if (optional_line(in, line)) then
            call read_precond(in, line, pr)
            if (optional_line(in, line)) call read_ordering(in, line, pr)
        end if
        call input_close(in)
    end function read_input

    ! The next line into `line`, if the file has one with a word on it: .true., or .false. (the
    ! line counts as absent) at the end of the file or on a blank line.
    logical function optional_line(in, line)
        type(input_file), intent(inout) :: in
        character(len=:), allocatable, intent(out) :: line
        integer :: ios

        in%line = in%line + 1
        call read_line(in%unit, line, ios, max_line)
        optional_line = .false.
        if (ios /= 0) return                      ! the end of the file (or a read error)
        if (len(line) > max_line) &
            call input_fail(in, 'line longer than ' // c_d(max_line) // ' characters')
        optional_line = verify(line, BLANKS) /= 0
    end function optional_line

    ! The first word of `line` (at most 63 characters, as in C) and the position after it.
    subroutine first_word(line, word, rest)
        character(len=*), intent(in) :: line
        character(len=:), allocatable, intent(out) :: word
        integer, intent(out) :: rest
        integer :: first, last

        first = verify(line, BLANKS)
        last = word_end(line, first)
        word = line(first:min(last, first + 62))
        rest = last + 1
    end subroutine first_word

    ! line 8: PRECOND SWEEPS
    subroutine read_precond(in, line, pr)
        type(input_file), intent(in) :: in
        character(len=*), intent(in) :: line
        type(problem), intent(inout) :: pr
        character(len=:), allocatable :: word
        integer :: rest, sweeps(1)

        call first_word(line, word, rest)
        pr%precond = precond_from_name(word)
        if (pr%precond < 0) &
            call input_fail(in, "unknown preconditioner '" // word // "': expected diagonal, " // &
                                'bjacobi-ic0 or asdd-ic0 (PRECOND SWEEPS)')
        call input_parse_ints(in, line(rest:), sweeps, 'SWEEPS: additive Schwarz sweeps')
        pr%sweeps = sweeps(1)
        if (pr%sweeps < 1) call input_fail(in, 'SWEEPS must be at least 1, got ' // c_d(pr%sweeps))
        if (pr%sweeps /= 1 .and. pr%precond /= PRECOND_ASDD_IC0) &
            call input_fail(in, 'SWEEPS = ' // c_d(pr%sweeps) // ' with ' // word // &
                                ': sweeps are for asdd-ic0 (diagonal and bjacobi-ic0 take 1)')
    end subroutine read_precond

    ! line 9: ORDERING COLORS
    subroutine read_ordering(in, line, pr)
        type(input_file), intent(in) :: in
        character(len=*), intent(in) :: line
        type(problem), intent(inout) :: pr
        character(len=:), allocatable :: word
        integer :: rest, colors(1), k

        call first_word(line, word, rest)
        pr%ordering = -1
        do k = 0, size(ORDERINGS) - 1
            if (word == trim(ORDERINGS(k)) .and. len(word) == len_trim(ORDERINGS(k))) &
                pr%ordering = k
        end do
        if (pr%ordering < 0) &
            call input_fail(in, "unknown ordering '" // word // "': expected natural, cm, " // &
                                'rcm, mc or cm-rcm (ORDERING COLORS)')
        call input_parse_ints(in, line(rest:), colors, 'COLORS: the number of colors')
        pr%colors = colors(1)
        if (pr%ordering < 3 .and. pr%colors /= 0) &             ! natural, cm, rcm
            call input_fail(in, 'COLORS = ' // c_d(pr%colors) // ' with ' // word // &
                                ': natural, cm and rcm take 0')
        if (pr%ordering >= 3 .and. pr%colors < 2) &             ! mc, cm-rcm
            call input_fail(in, 'COLORS = ' // c_d(pr%colors) // ' with ' // word // &
                                ': mc and cm-rcm take 2 or more')
        if (pr%ordering /= 0 .and. pr%precond == PRECOND_DIAGONAL) &
            call input_fail(in, 'ordering ' // word // ' with diagonal: the ordering is for ' // &
                                'the IC(0) preconditioners (bjacobi-ic0, asdd-ic0)')
    end subroutine read_ordering

    ! line 7 as PX PY PZ, which must make one block per rank, each with a node
    subroutine read_parts(in, line, pr)
        type(input_file), intent(in) :: in
        character(len=*), intent(in) :: line
        type(problem), intent(inout) :: pr
        integer(int64) :: n_parts
        integer :: axis

        call input_parse_ints(in, line, pr%parts, 'PX PY PZ: number of parts along x, y, z')
        call input_require_positive(in, real(pr%parts(1), dp), 'PX')
        call input_require_positive(in, real(pr%parts(2), dp), 'PY')
        call input_require_positive(in, real(pr%parts(3), dp), 'PZ')
        n_parts = product(int(pr%parts, int64))
        if (n_parts /= n_ranks) &
            call input_fail(in, 'PX PY PZ = ' // c_d(pr%parts(1)) // ' ' // c_d(pr%parts(2)) // &
                                ' ' // c_d(pr%parts(3)) // ' make ' // c_d(n_parts) // &
                                ' parts, but the job has ' // c_d(n_ranks) // ' ranks')
        do axis = 1, 3
            if (pr%parts(axis) > pr%nel(axis) + 1) &
                call input_fail(in, PARTS_NAME(axis) // ' = ' // c_d(pr%parts(axis)) // &
                                    ' parts but only ' // c_d(pr%nel(axis) + 1) // &
                                    ' nodes along ' // AXES(axis))
        end do
    end subroutine read_parts

    ! Line 7 as `local PREFIX` (words separated by blanks, tabs and line ends only: a path may
    ! hold a comma): .false. (and nothing read) if its first word is not `local`.
    logical function read_prefix(in, line, pr)
        type(input_file), intent(in) :: in
        character(len=*), intent(in) :: line
        type(problem), intent(inout) :: pr
        integer, parameter :: MAX_PREFIX = 1008        ! as in C: room for ".RANK" in 1024 bytes
        integer :: first, last

        first = verify(line, BLANKS)                   ! the first word: line(first:last)
        last = word_end(line, first)
        read_prefix = .false.
        if (first == 0) return
        if (line(first:last) /= 'local' .or. last - first + 1 /= 5) return
        read_prefix = .true.
        first = verify(line(last + 1:), BLANKS)        ! the second word
        if (first == 0) &
            call input_fail(in, "expected a path prefix after 'local' (local PREFIX: the " // &
                                'local data files PREFIX.0, PREFIX.1, ...)')
        first = first + last
        last = word_end(line, first)
        if (last - first + 1 > MAX_PREFIX) &
            call input_fail(in, 'the path prefix is longer than ' // c_d(MAX_PREFIX) // &
                                ' characters')
        pr%prefix = line(first:last)
    end function read_prefix

    ! the last character of the word that starts at line(first:first)
    pure integer function word_end(line, first)
        character(len=*), intent(in) :: line
        integer, intent(in) :: first

        word_end = len(line)
        if (first < 1) return
        word_end = scan(line(first:), BLANKS)
        if (word_end == 0) then
            word_end = len(line)
        else
            word_end = first + word_end - 2
        end if
    end function word_end

    ! --- local data from the files PREFIX.r ----------------------------------------------------

    ! This rank's local data from PREFIX.rank (`name`); the ranks agree on the outcome, and on
    ! whether the tables of all files fit together. A bad file: exit status 2 on every rank, after
    ! one line from the lowest rank that has one.
    subroutine read_local_files()
        character(len=:), allocatable :: message

        call agree(read_local_data(name, p%nel, p%size, rank, n_ranks, local, message), message)
        call agree(check_local_tables(local, name, comm, message), message)
    end subroutine read_local_files

    ! --- blocks: the partition and the local data, built on every rank ---------------------------

    ! this rank's local data for line 7 PX PY PZ: the same as Python's files of the same blocks
    ! (course.parallel.partition.block_partition, then local.local_data)
    subroutine build_blocks()
        call find_block()
        call number_nodes()
        call build_halo_tables()
        call build_block_elements()
        deallocate(local_of)
    end subroutine build_blocks

    ! first node index of block b along `axis`: (b (N+1)) / P, in 64 bits (b (N+1) may not fit)
    pure integer function part_start(b, axis)
        integer, intent(in) :: b, axis

        part_start = int(int(b, int64) * (p%nel(axis) + 1) / p%parts(axis))
    end function part_start

    ! this rank's block, its internal nodes first..last, and the node box lo..hi of the elements
    ! that touch them: one node (one element layer) further where a neighbouring block exists
    subroutine find_block()
        integer :: axis

        part = [mod(rank, p%parts(1)), mod(rank / p%parts(1), p%parts(2)), &
                rank / (p%parts(1) * p%parts(2))]
        do axis = 1, 3
            first(axis) = part_start(part(axis), axis)
            last(axis) = part_start(part(axis) + 1, axis) - 1
            lo(axis) = max(first(axis) - 1, 0)
            hi(axis) = min(last(axis) + 1, p%nel(axis))
        end do
    end subroutine find_block

    ! The slot (see OWN_SLOT) of the block that owns node ijk of the box lo..hi: along each axis
    ! the node lies before this block (-1), in it (0) or after it (+1).
    pure integer function slot_of(ijk)
        integer, intent(in) :: ijk(3)
        integer :: d(3), axis

        do axis = 1, 3
            if (ijk(axis) < first(axis)) then
                d(axis) = -1
            else if (ijk(axis) > last(axis)) then
                d(axis) = 1
            else
                d(axis) = 0
            end if
        end do
        slot_of = 1 + (d(1) + 1) + 3 * (d(2) + 1) + 9 * (d(3) + 1)
    end function slot_of

    ! the direction (dx, dy, dz) of a slot
    pure function direction(slot) result(d)
        integer, intent(in) :: slot
        integer :: d(3)

        d = [mod(slot - 1, 3), mod((slot - 1) / 3, 3), (slot - 1) / 9] - 1
    end function direction

    ! the rank of the block in the direction of `slot`
    pure integer function rank_of_slot(slot)
        integer, intent(in) :: slot
        integer :: b(3)

        b = part + direction(slot)
        rank_of_slot = b(1) + p%parts(1) * (b(2) + p%parts(2) * b(3))
    end function rank_of_slot

    ! Local numbers of the nodes of the box lo..hi: the internal nodes first, then the external
    ! ones grouped by owner, each group in ascending global number (the box is walked in that
    ! order, i fastest). The groups go in slot order, which is ascending owner rank: a step in z
    ! changes the rank by PX PY, one in y by PX, and the at most three blocks met along x differ
    ! by less than PX.
    subroutine number_nodes()
        integer :: next(27), i, j, k, s, n

        slot_count = 0
        do k = lo(3), hi(3)
            do j = lo(2), hi(2)
                do i = lo(1), hi(1)
                    s = slot_of([i, j, k])
                    slot_count(s) = slot_count(s) + 1
                end do
            end do
        end do
        local%n_internal = slot_count(OWN_SLOT)
        next(OWN_SLOT) = 1                               ! next local number of each group
        n = local%n_internal
        do s = 1, 27
            if (s == OWN_SLOT) cycle
            next(s) = n + 1
            n = n + slot_count(s)
        end do
        local%n_local = n
        allocate(local_of(lo(1):hi(1), lo(2):hi(2), lo(3):hi(3)), local%global_ids(n), &
                 stat=alloc_stat)
        call agree_allocation(alloc_stat)
        do k = lo(3), hi(3)
            do j = lo(2), hi(2)
                do i = lo(1), hi(1)
                    s = slot_of([i, j, k])
                    local_of(i, j, k) = next(s)
                    local%global_ids(next(s)) = i + (p%nel(1) + 1) * (j + (p%nel(2) + 1) * k)
                    next(s) = next(s) + 1
                end do
            end do
        end do
    end subroutine number_nodes

    ! The nodes this block sends to the neighbour in direction d, in ascending global number:
    ! the nodes of this block inside the neighbour's node box, i.e. along each axis all of
    ! first..last where d = 0, and the one layer next to the neighbour (first or last) otherwise.
    ! (They are exactly the nodes that the neighbour imports from this rank, in its order.)
    subroutine export_box(d, from, to)
        integer, intent(in) :: d(3)
        integer, intent(out) :: from(3), to(3)

        from = merge(last, first, d > 0)
        to = merge(first, last, d < 0)
    end subroutine export_box

    ! neighbours (ascending rank), and for each the external nodes it owns (import: this rank's
    ! nodes n_internal+1 .. n_local, already grouped by owner) and the internal nodes it needs
    ! (export)
    subroutine build_halo_tables()
        integer :: s, m, k, from(3), to(3), n_export(27), n_nb, n_external

        n_nb = count(slot_count > 0) - 1
        n_external = local%n_local - local%n_internal
        n_export = 0
        do s = 1, 27
            if (s == OWN_SLOT .or. slot_count(s) == 0) cycle
            call export_box(direction(s), from, to)
            n_export(s) = product(to - from + 1)
        end do
        local%n_neighbours = n_nb
        allocate(local%neighbours(n_nb), local%import_ptr(n_nb + 1), &
                 local%import_index(n_external), local%export_ptr(n_nb + 1), &
                 local%export_index(sum(n_export)), stat=alloc_stat)
        call agree_allocation(alloc_stat)
        associate (export_ptr => local%export_ptr, import_ptr => local%import_ptr)
            import_ptr(1) = 1
            export_ptr(1) = 1
            m = 0
            do s = 1, 27
                if (s == OWN_SLOT .or. slot_count(s) == 0) cycle
                m = m + 1
                local%neighbours(m) = rank_of_slot(s)
                import_ptr(m + 1) = import_ptr(m) + slot_count(s)
                export_ptr(m + 1) = export_ptr(m) + n_export(s)
                call export_box(direction(s), from, to)
                call list_nodes(from, to, local%export_index(export_ptr(m):export_ptr(m + 1) - 1))
            end do
        end associate
        do k = 1, n_external
            local%import_index(k) = local%n_internal + k
        end do
    end subroutine build_halo_tables

    ! the local elements (those with an internal node: the elements lo..hi-1) in ascending global
    ! number, with local corner numbers
    subroutine build_block_elements()
        integer :: i1, i2, i3, a, e, ijk(3)

        local%n_elem = product(hi - lo)
        allocate(local%element_ids(local%n_elem), local%elements(8, local%n_elem), &
                 stat=alloc_stat)
        call agree_allocation(alloc_stat)
        e = 0
        do i3 = lo(3), hi(3) - 1
            do i2 = lo(2), hi(2) - 1
                do i1 = lo(1), hi(1) - 1
                    e = e + 1
                    local%element_ids(e) = i1 + p%nel(1) * (i2 + p%nel(2) * i3)
                    do a = 1, 8
                        ijk = [i1, i2, i3] + CORNER(:, a)
                        local%elements(a, e) = local_of(ijk(1), ijk(2), ijk(3))
                    end do
                end do
            end do
        end do
    end subroutine build_block_elements

    ! the local numbers of the nodes of the box from..to (within lo..hi) in ascending global
    ! number, k outermost and i innermost, into list (as many entries as the box has nodes)
    subroutine list_nodes(from, to, list)
        integer, intent(in) :: from(3), to(3)
        integer(c_int), intent(out) :: list(:)
        integer :: i1, i2, i3, k

        k = 0
        do i3 = from(3), to(3)
            do i2 = from(2), to(2)
                do i1 = from(1), to(1)
                    k = k + 1
                    list(k) = local_of(i1, i2, i3)
                end do
            end do
        end do
    end subroutine list_nodes

    ! --- the local mesh and system, from the local data (blocks or files alike) -----------------

    ! The grid indices (i, j, k) of a global node number n = i + (NX+1) (j + (NY+1) k) (counts =
    ! NX+1, NY+1, NZ+1), or of a global element number e = i + NX (j + NY k) (counts = NX, NY, NZ).
    pure function grid_indices(n, counts) result(ijk)
        integer, intent(in) :: n, counts(3)
        integer :: ijk(3)

        ijk = [mod(n, counts(1)), mod(n / counts(1), counts(2)), n / (counts(1) * counts(2))]
    end function grid_indices

    ! grid indices, coordinates and fixed flags of the local nodes, from their global numbers; the
    ! quads of the flux face among the faces of the local elements
    subroutine build_local_mesh()
        integer :: a, on_face

        allocate(node_ijk(3, local%n_local), xyz(3, local%n_local), fixed(local%n_local), &
                 stat=alloc_stat)
        call agree_allocation(alloc_stat)
        on_face = face_index(p, p%fixed_face)
        do a = 1, local%n_local
            node_ijk(:, a) = grid_indices(local%global_ids(a), p%nel + 1)
            xyz(:, a) = real(node_ijk(:, a), dp) * p%size
            fixed(a) = merge(1, 0, node_ijk(axis_of(p%fixed_face), a) == on_face)
        end do
        call build_flux_quads()
    end subroutine build_local_mesh

    ! The local elements on the flux face (element index 0 or N-1 along its axis), and of each
    ! the 4 corners on that face in cyclic order (fem3d_face_flux needs the area and the shape
    ! functions only: the orientation does not matter). A quad whose corners are all external
    ! adds to external rows only, which the solver never uses.
    subroutine build_flux_quads()
        integer, parameter :: STEP(2, 4) = reshape([0, 0, 1, 0, 1, 1, 0, 1], [2, 4])
        integer :: face_corner(4), axis, u, v, side, at, a, c, e, f, offset(3)

        axis = axis_of(flux_face)
        u = mod(axis, 3) + 1
        v = mod(axis + 1, 3) + 1
        side = merge(1, 0, face_index(p, flux_face) > 0)    ! corner offset along axis: 0 or 1
        at = face_index(p, flux_face) - side                ! element index along axis
        do c = 1, 4                                         ! the element corners on the face
            offset(axis) = side
            offset(u) = STEP(1, c)
            offset(v) = STEP(2, c)
            do a = 1, 8
                if (all(CORNER(:, a) == offset)) face_corner(c) = a
            end do
        end do
        n_quad = 0
        do e = 1, local%n_elem
            if (on_face_layer(e, axis, at)) n_quad = n_quad + 1
        end do
        allocate(quads(4, n_quad), stat=alloc_stat)
        call agree_allocation(alloc_stat)
        f = 0
        do e = 1, local%n_elem
            if (.not. on_face_layer(e, axis, at)) cycle
            f = f + 1
            quads(:, f) = local%elements(face_corner, e)
        end do
    end subroutine build_flux_quads

    ! is local element e in the layer of elements with index `at` along `axis`?
    logical function on_face_layer(e, axis, at)
        integer, intent(in) :: e, axis, at
        integer :: ijk(3)

        ijk = grid_indices(local%element_ids(e), p%nel)
        on_face_layer = ijk(axis) == at
    end function on_face_layer

    ! The CRS pattern over all local rows and columns: row a holds every local node that shares a
    ! local element with node a, in ascending global number (an internal row gets all its 27 (or
    ! fewer at the boundary) columns in the serial order; an external row only those of its local
    ! elements). Through the elements of each node (elem_ptr, elem_list), twice: count, then fill.
    subroutine build_pattern()
        integer(c_int), allocatable :: elem_ptr(:), elem_list(:), mark(:)

        allocate(elem_ptr(local%n_local + 1), elem_list(8 * local%n_elem), mark(local%n_local), &
                 row_ptr(local%n_local + 1), stat=alloc_stat)
        call agree_allocation(alloc_stat)
        call node_elements(elem_ptr, elem_list, mark)
        call node_neighbours(elem_ptr, elem_list, mark, .false.)     ! row_ptr
        allocate(col_idx(row_ptr(local%n_local + 1) - 1), stat=alloc_stat)
        call agree_allocation(alloc_stat)
        call node_neighbours(elem_ptr, elem_list, mark, .true.)      ! col_idx
    end subroutine build_pattern

    ! the local elements of each local node a: elem_list(elem_ptr(a) : elem_ptr(a+1)-1), counted,
    ! then listed (next: where the next one of a node goes)
    subroutine node_elements(elem_ptr, elem_list, next)
        integer(c_int), intent(out) :: elem_ptr(:), elem_list(:), next(:)
        integer :: a, c, e

        elem_ptr = 0
        do e = 1, local%n_elem
            do c = 1, 8
                a = local%elements(c, e)
                elem_ptr(a + 1) = elem_ptr(a + 1) + 1
            end do
        end do
        elem_ptr(1) = 1
        do a = 1, local%n_local
            elem_ptr(a + 1) = elem_ptr(a + 1) + elem_ptr(a)
        end do
        next = elem_ptr(:local%n_local)
        do e = 1, local%n_elem
            do c = 1, 8
                a = local%elements(c, e)
                elem_list(next(a)) = e
                next(a) = next(a) + 1
            end do
        end do
    end subroutine node_elements

    ! Row a of the pattern: the corners of the elements of node a (elem_list(elem_ptr(a) :
    ! elem_ptr(a+1)-1)), each once (mark(b) = a: b is in row a already), sorted by global number;
    ! into row_ptr and col_idx if `fill`, else into row_ptr only.
    subroutine node_neighbours(elem_ptr, elem_list, mark, fill)
        integer(c_int), intent(in) :: elem_ptr(:), elem_list(:)
        integer(c_int), intent(out) :: mark(:)
        logical, intent(in) :: fill
        integer :: a, b, c, k, pos

        mark = 0
        pos = 1
        row_ptr(1) = 1
        do a = 1, local%n_local
            do k = elem_ptr(a), elem_ptr(a + 1) - 1
                do c = 1, 8
                    b = local%elements(c, elem_list(k))
                    if (mark(b) == a) cycle
                    mark(b) = a
                    if (fill) col_idx(pos) = b
                    pos = pos + 1
                end do
            end do
            row_ptr(a + 1) = pos
            if (fill) call sort_by_global_number(col_idx(row_ptr(a):pos - 1))
        end do
    end subroutine node_neighbours

    ! local node numbers in ascending global number (insertion sort: a row has at most 27)
    subroutine sort_by_global_number(list)
        integer(c_int), intent(inout) :: list(:)
        integer :: i, j, item

        do i = 2, size(list)
            item = list(i)
            j = i - 1
            do while (j >= 1)
                if (local%global_ids(list(j)) <= local%global_ids(item)) exit
                list(j + 1) = list(j)
                j = j - 1
            end do
            list(j + 1) = item
        end do
    end subroutine sort_by_global_number

    ! --- the threaded assembly (08_hybrid) -----------------------------------------------------

    ! First touch (lecture 03's v1) of what the threads of the solve work on by static shares of
    ! the internal rows: the matrix rows, the right-hand side and the solution, zeroed by the same
    ! static schedule, so that each thread's pages are placed in its NUMA node's memory. The
    ! external rows (assembled partly, never read by the solver) by a second loop.
    subroutine first_touch()
        integer :: i

        !$omp parallel
        !$omp do schedule(static)
        do i = 1, local%n_internal
            val(row_ptr(i):row_ptr(i + 1) - 1) = 0.0_dp
            rhs(i) = 0.0_dp
            t(i) = 0.0_dp
        end do
        !$omp end do
        !$omp do schedule(static)
        do i = local%n_internal + 1, local%n_local
            val(row_ptr(i):row_ptr(i + 1) - 1) = 0.0_dp
            rhs(i) = 0.0_dp
            t(i) = 0.0_dp
        end do
        !$omp end do
        !$omp end parallel
    end subroutine first_touch

    ! The color of local element e, 1 .. 8: 1 + mod(i, 2) + 2 mod(j, 2) + 4 mod(k, 2) for the grid
    ! indices (i, j, k) of its corner with the smallest indices. Two elements of one color are
    ! never neighbours (they differ by 2 or more along some axis), so they share no node.
    integer function element_color(e)
        integer, intent(in) :: e
        integer :: ijk(3)

        ijk = minval(node_ijk(:, local%elements(:, e)), dim=2)
        element_color = 1 + mod(ijk(1), 2) + 2 * mod(ijk(2), 2) + 4 * mod(ijk(3), 2)
    end function element_color

    ! The local elements by color: those of color c are color_elems(color_ptr(c) :
    ! color_ptr(c+1)-1), in increasing number.
    subroutine color_elements(color_ptr, color_elems)
        integer, intent(out) :: color_ptr(9), color_elems(:)
        integer :: e, c, next(8)

        next = 0
        do e = 1, local%n_elem                          ! count the elements of each color
            c = element_color(e)
            next(c) = next(c) + 1
        end do
        color_ptr(1) = 1
        do c = 1, 8
            color_ptr(c + 1) = color_ptr(c) + next(c)
        end do
        next = color_ptr(1:8)
        do e = 1, local%n_elem                          ! and list them
            c = element_color(e)
            color_elems(next(c)) = e
            next(c) = next(c) + 1
        end do
    end subroutine color_elements

    ! fem3d_assemble (02_fem3d) with the threads: one `omp do` over the elements of each color,
    ! each element added into the CRS rows (and rhs entries) of its 8 nodes, without atomics: no
    ! two elements of a color share a node, so no two threads write the same row at once. Every
    ! entry gets its elements' terms in the order of the colors (one element per color at most),
    ! whatever the number of threads; the serial order is that of the elements, so the sums agree
    ! with the serial assembly to rounding. Returns 0, or -e for the degenerate element e
    ! (det J <= 0) of the smallest number.
    integer(c_int) function assemble_by_colors() result(status)
        integer :: color_ptr(9), c, j, first_bad
        integer, allocatable :: color_elems(:)

        allocate(color_elems(local%n_elem), stat=alloc_stat)
        call agree_allocation(alloc_stat)
        call color_elements(color_ptr, color_elems)
        first_bad = huge(first_bad)
        !$omp parallel private(c)
        do c = 1, 8
            !$omp do schedule(static) reduction(min : first_bad)
            do j = color_ptr(c), color_ptr(c + 1) - 1
                if (.not. add_element(color_elems(j))) first_bad = min(first_bad, color_elems(j))
            end do
            !$omp end do
        end do
        !$omp end parallel
        status = 0
        if (first_bad < huge(first_bad)) status = -first_bad
    end function assemble_by_colors

    ! Adds the matrix and load of local element e into val and rhs (fem3d_assemble's loop body);
    ! .false. if its Jacobian is not positive
    logical function add_element(e)
        integer, intent(in) :: e
        real(dp) :: xyz_e(3, 8), q_e(8), ke(8, 8), fe(8)
        integer :: a, b, k, row

        do a = 1, 8                                     ! gather the element's corners
            xyz_e(:, a) = xyz(:, local%elements(a, e))
            q_e(a) = q(local%elements(a, e))
        end do
        add_element = fem3d_element(xyz_e, p%cond, q_e, ke, fe) == 0
        if (.not. add_element) return
        do a = 1, 8                                     ! scatter into the rows of its nodes
            row = local%elements(a, e)
            rhs(row) = rhs(row) + fe(a)
            do b = 1, 8
                k = crs_find(row_ptr, col_idx, row, local%elements(b, e))
                val(k) = val(k) + ke(b, a)
            end do
        end do
    end function add_element

    ! --- the preconditioner (08_hybrid) ---------------------------------------------------------

    ! precond_setup on the internal rows of every rank; the ranks agree on the outcome: an error
    ! is one line from the lowest failing rank, and exit status 2 on every rank (too many colors,
    ! an IC(0) breakdown), or 1 (out of memory)
    subroutine setup_precond()
        integer(c_int) :: status
        integer :: exit_status
        character(len=:), allocatable :: message

        status = precond_setup(p%precond, p%sweeps, trim(ORDERINGS(p%ordering)), p%colors, &
                               local%n_internal, local%n_local, row_ptr, col_idx, val, precond)
        exit_status = 0
        message = ''
        if (status == PRECOND_OUT_OF_MEMORY) then
            exit_status = 1
            message = 'out of memory for NX NY NZ = ' // c_d(p%nel(1)) // ' ' // &
                      c_d(p%nel(2)) // ' ' // c_d(p%nel(3))
        else if (status == PRECOND_TOO_MANY_COLORS) then
            exit_status = 2
            message = p%path // ':9: colors ' // c_d(p%colors) // ' exceed the ' // &
                      c_d(local%n_internal) // ' internal nodes of rank ' // c_d(rank)
        else if (status <= PRECOND_BREAKDOWN) then       ! the node as C counts it, from 0
            exit_status = 2
            message = precond_name(p%precond) // ': IC(0) breaks down on rank ' // c_d(rank) // &
                      ' at internal node ' // c_d(PRECOND_BREAKDOWN - status) // &
                      ' (a pivot <= 0): the internal block is not positive definite'
        else if (status /= 0) then
            exit_status = 2
            message = p%path // ':8: bad preconditioner choice'
        end if
        call agree(exit_status, message)
    end subroutine setup_precond

    ! CG's iteration limit: 10 times the global number of unknowns, if it fits
    integer function iteration_limit()
        integer(int64) :: n

        n = product(int(p%nel, int64) + 1)
        iteration_limit = int(min(10_int64 * n, int(huge(iteration_limit), int64)))
    end function iteration_limit

    ! --- output --------------------------------------------------------------------------------

    ! fem3d's summary with global numbers (sums, minima, maxima over the ranks) and a line on the
    ! partition, from rank 0
    subroutine print_summary()
        integer :: mine(3), sums(3), mins(1), maxs(2), a
        real(dp) :: local_max(3), global_max(3)
        character(len=:), allocatable :: status_text

        ! sums: unknowns, nonzeros of the internal rows, external nodes
        mine = [local%n_internal, row_ptr(local%n_internal + 1) - 1, &
                local%n_local - local%n_internal]
        call MPI_Allreduce(mine, sums, 3, MPI_INTEGER, MPI_SUM, comm)
        call MPI_Allreduce([local%n_internal], mins, 1, MPI_INTEGER, MPI_MIN, comm)
        call MPI_Allreduce([local%n_internal, local%n_neighbours], maxs, 2, MPI_INTEGER, MPI_MAX, &
                           comm)
        ! max T, max exact T, max nodal error over the internal nodes
        local_max = [-huge(1.0_dp), -huge(1.0_dp), 0.0_dp]
        do a = 1, local%n_internal
            local_max(1) = max(local_max(1), t(a))
            local_max(2) = max(local_max(2), exact_at(p, node_ijk(:, a)))
            local_max(3) = max(local_max(3), abs(t(a) - exact_at(p, node_ijk(:, a))))
        end do
        call MPI_Allreduce(local_max, global_max, 3, MPI_DOUBLE_PRECISION, MPI_MAX, comm)
        if (rank /= 0) return

        if (relres <= p%eps) then
            status_text = 'converged'
        else
            status_text = 'NOT converged'
        end if
        write(output_unit, '(a)') 'fem3d_mpi (Fortran): ' // c_d(p%nel(1)) // ' x ' // &
            c_d(p%nel(2)) // ' x ' // c_d(p%nel(3)) // ' elements, ' // c_d(sums(1)) // &
            ' unknowns, ' // c_d(sums(2)) // ' nonzeros'
        call print_problem(status_text, global_max)
        ! every external node is received once per exchange: 8 bytes each
        write(output_unit, '(a)') '  ranks ' // c_d(n_ranks) // ' (' // partition_name() // &
            '), internal nodes per rank min ' // c_d(mins(1)) // ' max ' // c_d(maxs(1)) // &
            ', neighbours max ' // c_d(maxs(2)) // ', external nodes total ' // c_d(sums(3)) // &
            ', bytes per exchange ' // c_d(8_int64 * sums(3))
        deallocate(status_text)
    end subroutine print_summary

    ! fem3d's lines 2 to 5: the problem, CG, and the temperature against the exact solution
    ! (constant source), or its maximum alone (nakajima: no exact solution). global_max: max T,
    ! max exact T and max nodal error.
    subroutine print_problem(status_text, global_max)
        character(len=*), intent(in) :: status_text
        real(dp), intent(in) :: global_max(3)
        character(len=:), allocatable :: source_text
        logical :: nakajima

        nakajima = p%source == SOURCE_NAKAJIMA
        source_text = c_g(p%qvol, 6)
        if (nakajima) source_text = source_text // ' |x_c + y_c| (nakajima)'
        write(output_unit, '(a)') '  T = 0 on ' // FACES(p%fixed_face) // ', heat flux ' // &
            c_g(p%qflux, 6) // ' into ' // FACES(flux_face) // ', source ' // source_text // &
            ', conductivity ' // c_g(p%cond, 6)
        write(output_unit, '(a)') '  CG: ' // c_d(iters) // ' iterations, relative residual ' // &
            c_e(relres, 3) // ' (' // status_text // ')'
        if (nakajima) then
            write(output_unit, '(a)') '  max T = ' // c_g(global_max(1), 10) // &
                '   (no exact solution for this source)'
            return
        end if
        write(output_unit, '(a)') '  max T = ' // c_g(global_max(1), 10) // '   should be ' // &
            c_g(global_max(2), 10)
        write(output_unit, '(a)') '  max nodal error ' // c_e(global_max(3), 3) // &
            ' (should be near round-off and the CG tolerance: the elements are nodally exact here)'
    end subroutine print_problem

    ! the four lines on the solver: the variant and its counted reductions, the true residual,
    ! the preconditioner (its colors: the fewest and the most over the ranks) with its counted halo
    ! exchanges, the MPI thread level (every rank calls: the colors are reduced; rank 0 prints)
    subroutine print_variant()
        integer :: fewest, most

        call MPI_Allreduce(precond%ncolor, fewest, 1, MPI_INTEGER, MPI_MIN, comm)
        call MPI_Allreduce(precond%ncolor, most, 1, MPI_INTEGER, MPI_MAX, comm)
        if (rank /= 0) return
        write(output_unit, '(a)') '  algorithm ' // cg_algorithm_name(algorithm) // ' (' // &
            trim(REDUCTION_NAMES(nonblocking)) // '), reductions per iteration ' // &
            c_d(per_iteration)
        write(output_unit, '(a)') '  true relative residual ' // c_e(true_relres, 3) // &
            ' (||b - A x|| / ||b||, recomputed)'
        write(output_unit, '(a)') '  preconditioner ' // precond_name(precond%kind) // &
            ', sweeps ' // c_d(precond%sweeps) // ', ordering ' // precond%ordering // &
            ', colors ' // c_d(fewest) // '..' // c_d(most) // ', halo exchanges per ' // &
            'iteration ' // c_d(exchanges_per_iteration) // ' (counted)'
        write(output_unit, '(a)') '  MPI thread level asked FUNNELED, provided ' // &
            thread_level_name(thread_level) // '; OpenMP threads per rank ' // &
            c_d(omp_get_max_threads())
    end subroutine print_variant

    ! the name of an MPI_THREAD_... level
    function thread_level_name(level) result(name)
        integer, intent(in) :: level
        character(len=:), allocatable :: name

        if (level == MPI_THREAD_SINGLE) then
            name = trim(THREAD_LEVELS(0))
        else if (level == MPI_THREAD_FUNNELED) then
            name = trim(THREAD_LEVELS(1))
        else if (level == MPI_THREAD_SERIALIZED) then
            name = trim(THREAD_LEVELS(2))
        else
            name = trim(THREAD_LEVELS(3))
        end if
    end function thread_level_name

    ! how the nodes are shared: "2 x 2 x 1 blocks" or "local data PREFIX.*"
    function partition_name() result(text)
        character(len=:), allocatable :: text

        if (allocated(p%prefix)) then
            text = 'local data ' // p%prefix // '.*'
        else
            text = c_d(p%parts(1)) // ' x ' // c_d(p%parts(2)) // ' x ' // c_d(p%parts(3)) // &
                   ' blocks'
        end if
    end function partition_name

    ! The pieces STEM_r.vtu (every rank) and OUTPUT.pvtu (rank 0), STEM = OUTPUT without ".pvtu".
    ! A file that cannot be written: one line from the first rank that failed, .false. on every
    ! rank. The halo exchange first makes the temperature right in the external nodes too.
    logical function write_output(path)
        character(len=*), intent(in) :: path
        character(len=:), allocatable :: stem, piece, message
        integer :: first_failed

        call halo_exchange(local%n_neighbours, local%neighbours, local%import_ptr, &
                           local%import_index, local%export_ptr, local%export_index, t, send_buf, &
                           recv_buf, comm)
        stem = path
        if (len(stem) >= 5) then
            if (stem(len(stem) - 4:) == '.pvtu') stem = stem(:len(stem) - 5)
        end if
        piece = stem // '_' // c_d(rank) // '.vtu'
        message = ''
        if (rank == 0) call write_pvtu(path, base_name(stem), message)
        if (len(message) == 0) call write_piece(piece, message)
        first_failed = first_failed_rank(len(message) > 0)   ! it reports (n_ranks: none failed)
        write_output = first_failed == n_ranks
        if (rank == first_failed) write(error_unit, '(a)') message
        if (write_output .and. rank == 0) &
            write(output_unit, '(a)') '  wrote ' // path // ' and ' // c_d(n_ranks) // ' pieces'
    end function write_output

    ! the file name without its folder
    function base_name(path) result(name)
        character(len=*), intent(in) :: path
        character(len=:), allocatable :: name

        name = path(index(path, '/', back=.true.) + 1:)
    end function base_name

    ! The parallel file: the arrays' names and types, and one piece per rank (names relative to
    ! the folder of the .pvtu, where the pieces are). message: '' or why it failed.
    subroutine write_pvtu(path, stem_name, message)
        character(len=*), intent(in) :: path, stem_name
        character(len=:), allocatable, intent(inout) :: message
        character(len=512) :: msg
        integer :: unit, ios, r

        if (.not. open_output(path, unit, message)) return
        write(unit, '(a)') '<?xml version="1.0"?>', &
            '<VTKFile type="PUnstructuredGrid" version="0.1" byte_order="LittleEndian">', &
            '<PUnstructuredGrid GhostLevel="0">', &
            '<PPointData Scalars="temperature">', &
            '<PDataArray type="Float64" Name="temperature"/>', &
            '</PPointData>', &
            '<PCellData Scalars="rank">', &
            '<PDataArray type="Int32" Name="rank"/>', &
            '</PCellData>', &
            '<PPoints>', &
            '<PDataArray type="Float64" NumberOfComponents="3"/>', &
            '</PPoints>'
        do r = 0, n_ranks - 1
            write(unit, '(a)') '<Piece Source="' // stem_name // '_' // c_d(r) // '.vtu"/>'
        end do
        write(unit, '(a)') '</PUnstructuredGrid>', '</VTKFile>'
        close(unit, iostat=ios, iomsg=msg)
        if (ios /= 0) message = write_error(path, msg)
    end subroutine write_pvtu

    ! This rank's piece: all its local nodes, with the temperature, and the local elements it owns
    ! (those whose corner 1 is internal: every element is in exactly one piece), with the rank.
    subroutine write_piece(path, message)
        character(len=*), intent(in) :: path
        character(len=:), allocatable, intent(inout) :: message
        character(len=512) :: msg
        character(len=:), allocatable :: line
        integer :: unit, ios, a, e, k, n_owned

        n_owned = 0
        do e = 1, local%n_elem
            if (local%elements(1, e) <= local%n_internal) n_owned = n_owned + 1
        end do
        if (.not. open_output(path, unit, message)) return
        write(unit, '(a)') '<?xml version="1.0"?>', &
            '<VTKFile type="UnstructuredGrid" version="0.1" byte_order="LittleEndian">', &
            '<UnstructuredGrid>', &
            '<Piece NumberOfPoints="' // c_d(local%n_local) // '" NumberOfCells="' // &
            c_d(n_owned) // '">', &
            '<PointData Scalars="temperature">', &
            '<DataArray type="Float64" Name="temperature" format="ascii">'
        do a = 1, local%n_local
            write(unit, '(a)') c_g(t(a), 15)
        end do
        write(unit, '(a)') '</DataArray>', '</PointData>', &
            '<CellData Scalars="rank">', &
            '<DataArray type="Int32" Name="rank" format="ascii">'
        do e = 1, n_owned
            write(unit, '(a)') c_d(rank)
        end do
        write(unit, '(a)') '</DataArray>', '</CellData>', '<Points>', &
            '<DataArray type="Float64" NumberOfComponents="3" format="ascii">'
        do a = 1, local%n_local
            write(unit, '(a)') c_g(xyz(1, a), 15) // ' ' // c_g(xyz(2, a), 15) // ' ' // &
                               c_g(xyz(3, a), 15)
        end do
        write(unit, '(a)') '</DataArray>', '</Points>', '<Cells>', &
            '<DataArray type="Int32" Name="connectivity" format="ascii">'
        do e = 1, local%n_elem                           ! VTK counts points from 0
            if (local%elements(1, e) > local%n_internal) cycle
            line = c_d(local%elements(1, e) - 1)
            do k = 2, 8
                line = line // ' ' // c_d(local%elements(k, e) - 1)
            end do
            write(unit, '(a)') line
        end do
        write(unit, '(a)') '</DataArray>', &
            '<DataArray type="Int32" Name="offsets" format="ascii">'
        do e = 1, n_owned
            write(unit, '(a)') c_d(8 * e)
        end do
        write(unit, '(a)') '</DataArray>', &
            '<DataArray type="UInt8" Name="types" format="ascii">'
        do e = 1, n_owned                                ! 12: VTK's hexahedron
            write(unit, '(a)') '12'
        end do
        write(unit, '(a)') '</DataArray>', '</Cells>', '</Piece>', &
            '</UnstructuredGrid>', '</VTKFile>'
        close(unit, iostat=ios, iomsg=msg)
        if (ios /= 0) message = write_error(path, msg)
    end subroutine write_piece

    ! Opens (replaces) path for writing on a new unit; .false., with message set, if it cannot.
    logical function open_output(path, unit, message)
        character(len=*), intent(in) :: path
        integer, intent(out) :: unit
        character(len=:), allocatable, intent(inout) :: message
        character(len=512) :: msg
        integer :: ios

        open(newunit=unit, file=path, status='replace', action='write', iostat=ios, iomsg=msg)
        open_output = ios == 0
        if (.not. open_output) message = write_error(path, msg)
    end function open_output

    ! "fem3d_mpi_f: PATH: cannot write output file: REASON", REASON as C's strerror(errno) says it
    ! (gfortran's message reads "Cannot open file 'PATH': REASON")
    function write_error(path, msg) result(line)
        character(len=*), intent(in) :: path, msg
        character(len=:), allocatable :: line, reason
        integer :: k

        reason = trim(msg)
        k = index(reason, "': ", back=.true.)
        if (k > 0) reason = reason(k + 3:)
        line = PROG // ': ' // path // ': cannot write output file: ' // reason
    end function write_error

end program fem3d_mpi
