! pencil_fft: the pencil-decomposed 3-D FFT of lecture 07_cluster (pencil_fft.f90) on a field whose
! spectrum is known, timed (Fortran twin of src_c/07_cluster/pencil_fft_main.c).
!
!   usage: mpiexec -n P pencil_fft_f N [P1 P2] [REPEAT]
!
! N points per side (N^3 complex values), P = P1 x P2 ranks (default: the squarest grid with
! P1 >= P2), N divisible by P1 and by P2; REPEAT timed transforms (default 5) after one untimed.
! The field is a sum of four Fourier modes, u = sum of c exp(2 pi i (kx x + ky y + kz z) / N)
! with (kx, ky, kz, c) = (1, 0, 0, 1), (0, 2, 1, 0.5 - 0.25i), (3, 1, N-2, -0.75i),
! (N-1, N-3, N-1, 0.25) (indices modulo N; course.parallel.fft.known_modes), so the forward
! transform is N^3 c at those wave numbers and zero elsewhere. Rank 0 prints the grid and the
! message sizes, the largest error of the spectrum relative to N^3, and the best time of the
! REPEAT runs split into FFT, transposes (pack + unpack) and all-to-alls (each phase the slowest
! rank's). Exit status, the same on every rank: 0, 1 error above 1e-10, 2 bad arguments or out of
! memory (one line on stderr from rank 0).
program pencil_fft
    use, intrinsic :: iso_c_binding, only: c_int, c_long, c_double, c_double_complex, c_ptr, &
                                           c_size_t, c_associated, c_f_pointer
    use, intrinsic :: iso_fortran_env, only: error_unit, output_unit
    use mpi_f08, only: MPI_Comm, MPI_COMM_WORLD, MPI_Init, MPI_Finalize, MPI_Comm_rank, &
                       MPI_Comm_size, MPI_Comm_free, MPI_Allreduce, MPI_Barrier, MPI_Wtime, &
                       MPI_DOUBLE_PRECISION, MPI_INTEGER, MPI_MAX
    use course_pencil_fft, only: pencil_communicators, pencil_fft_plan, pencil_fft_forward, &
                                 N_PHASES
    use course_fftw, only: fftw_alloc_complex, fftw_free, fftw_destroy_plan, fftw_cleanup
    use course_input, only: parse_int
    use course_cformat, only: c_d, c_e
    implicit none
    character(len=*), parameter :: PROG = 'pencil_fft_f'
    integer, parameter :: dp = c_double, N_MODES = 4, DEFAULT_REPEAT = 5

    integer :: rank, n_ranks, status, failed, any_failed
    integer(c_int) :: n, p1, p2, repeat
    integer :: modes(3, N_MODES)                ! (kx, ky, kz) of each mode, modulo n
    complex(dp) :: coef(N_MODES)
    type(c_ptr) :: data_ptr, work_ptr
    complex(c_double_complex), pointer :: data(:), work(:)
    type(MPI_Comm) :: comm1, comm2
    real(dp) :: best(0:N_PHASES), err
    integer(c_size_t) :: count

    call MPI_Init()
    call MPI_Comm_rank(MPI_COMM_WORLD, rank)
    call MPI_Comm_size(MPI_COMM_WORLD, n_ranks)
    status = read_options()
    if (status == 0) then
        count = int(n, c_size_t) * n * n / n_ranks
        data_ptr = fftw_alloc_complex(count)
        work_ptr = fftw_alloc_complex(count)
        failed = 0
        if (.not. c_associated(data_ptr) .or. .not. c_associated(work_ptr)) failed = 1
        call MPI_Allreduce(failed, any_failed, 1, MPI_INTEGER, MPI_MAX, MPI_COMM_WORLD)
        if (any_failed /= 0) then
            if (rank == 0) write(error_unit, '(a)') PROG // ': out of memory for N = ' // &
                c_d(n) // ' on ' // c_d(n_ranks) // ' ranks'
            status = 2
        else
            call c_f_pointer(data_ptr, data, [count])
            call c_f_pointer(work_ptr, work, [count])
            call known_modes()
            call pencil_communicators(p1, MPI_COMM_WORLD, comm1, comm2)
            call run()
            if (rank == 0) call print_summary()
            status = 0
            if (.not. err <= 1.0e-10_dp) status = 1
            call MPI_Comm_free(comm1)
            call MPI_Comm_free(comm2)
        end if
        if (c_associated(data_ptr)) call fftw_free(data_ptr)
        if (c_associated(work_ptr)) call fftw_free(work_ptr)
    end if
    call fftw_cleanup()
    call MPI_Finalize()
    if (status /= 0) stop status, quiet=.true.

contains

    ! the modes of the header comment, wave numbers reduced modulo n
    subroutine known_modes()
        integer :: j, d

        modes = reshape([1, 0, 0, 0, 2, 1, 3, 1, n - 2, n - 1, n - 3, n - 1], [3, N_MODES])
        do j = 1, N_MODES
            do d = 1, 3
                modes(d, j) = modulo(modes(d, j), n)
            end do
        end do
        coef = [(1.0_dp, 0.0_dp), (0.5_dp, -0.25_dp), (0.0_dp, -0.75_dp), (0.25_dp, 0.0_dp)]
    end subroutine known_modes

    ! ---- the command line ---------------------------------------------------------------------

    ! a positive integer, or 0 after one line from rank 0 naming the argument
    integer function positive_arg(k, what)
        integer, intent(in) :: k
        character(len=*), intent(in) :: what
        character(len=:), allocatable :: word
        integer :: length, value

        call get_command_argument(k, length=length)
        allocate(character(len=length) :: word)
        call get_command_argument(k, word)
        positive_arg = 0
        if (parse_int(word, value)) then
            if (value > 0) positive_arg = value
        end if
        if (positive_arg == 0 .and. rank == 0) write(error_unit, '(a)') PROG // ": argument '" &
            // word // "': " // what // ' must be a positive integer'
    end function positive_arg

    ! the squarest grid: p2 the largest divisor of size with p2^2 <= size
    subroutine process_grid(size)
        integer, intent(in) :: size
        integer :: d

        p2 = 1
        d = 1
        do while (int(d, c_long) * d <= size)
            if (mod(size, d) == 0) p2 = d
            d = d + 1
        end do
        p1 = size / p2
    end subroutine process_grid

    ! Every rank reads the same words and takes the same decision: returns 0, or 2 after one line
    ! from rank 0.
    integer function read_options()
        integer :: argc, length
        character(len=:), allocatable :: prog_path, msg, which
        integer :: bad

        read_options = 2
        argc = command_argument_count()
        if (argc < 1 .or. argc > 4) then
            call get_command_argument(0, length=length)
            allocate(character(len=length) :: prog_path)
            call get_command_argument(0, prog_path)
            if (rank == 0) write(error_unit, '(a)') 'usage: ' // prog_path // &
                ' N [P1 P2] [REPEAT]'
            return
        end if
        repeat = DEFAULT_REPEAT
        call process_grid(n_ranks)
        n = positive_arg(1, 'N')
        if (n == 0) return
        if (argc >= 3) then
            p1 = positive_arg(2, 'P1')
            if (p1 == 0) return
            p2 = positive_arg(3, 'P2')
            if (p2 == 0) return
        end if
        if (argc == 2 .or. argc == 4) then
            repeat = positive_arg(argc, 'REPEAT')
            if (repeat == 0) return
        end if
        msg = ''
        if (int(p1, c_long) * p2 /= n_ranks) then
            msg = 'P1 x P2 = ' // c_d(p1) // ' x ' // c_d(p2) // ' = ' // &
                  c_d(int(p1, c_long) * p2) // ', but the job has ' // c_d(n_ranks) // ' ranks'
        else if (mod(n, p1) /= 0 .or. mod(n, p2) /= 0) then
            which = 'P2'
            bad = p2
            if (mod(n, p1) /= 0) then
                which = 'P1'
                bad = p1
            end if
            msg = 'N = ' // c_d(n) // ' is not divisible by ' // which // ' = ' // c_d(bad) // &
                  ' (P1 x P2 = ' // c_d(p1) // ' x ' // c_d(p2) // &
                  '): every pencil needs N/' // which // ' points'
        else if (real(n, dp)**3 / n_ranks > huge(n)) then
            msg = 'N = ' // c_d(n) // ': N^3/P = ' // c_d(int(real(n, dp)**3 / n_ranks, c_long)) &
                  // ' elements per rank do not fit an int'
        end if
        if (len(msg) > 0) then
            if (rank == 0) write(error_unit, '(a)') PROG // ': ' // msg
            return
        end if
        read_options = 0
    end function read_options

    ! ---- the field and its spectrum -----------------------------------------------------------

    ! this rank's x-pencil a(x, y, z) of the modes (y in block r1, z in block r2); the phase
    ! reduced modulo n in integers, so that it is exact at any n (x, y, z are 0-based here)
    subroutine fill_field(a)
        complex(dp), intent(out) :: a(0:n - 1, 0:n / p1 - 1, 0:n / p2 - 1)
        real(dp), parameter :: TWO_PI = 8.0_dp * atan(1.0_dp)
        integer :: x, yl, zl, j, r1, r2
        integer(c_long) :: y, z, phase

        r1 = mod(rank, p1)
        r2 = rank / p1
        do zl = 0, n / p2 - 1
            do yl = 0, n / p1 - 1
                do x = 0, n - 1
                    y = int(r1, c_long) * (n / p1) + yl
                    z = int(r2, c_long) * (n / p2) + zl
                    a(x, yl, zl) = (0.0_dp, 0.0_dp)
                    do j = 1, N_MODES
                        phase = mod(modes(1, j) * x + modes(2, j) * y + modes(3, j) * z, &
                                    int(n, c_long))
                        a(x, yl, zl) = a(x, yl, zl) + coef(j) &
                                       * exp(cmplx(0.0_dp, TWO_PI * real(phase, dp) / n, dp))
                    end do
                end do
            end do
        end do
    end subroutine fill_field

    ! the largest |c - exact| / n^3 over this rank's z-pencil c(kz, kx, ky) (kx in block r1, ky in
    ! block r2): exact is n^3 times the sum of the coefficients of the modes at (kx, ky, kz)
    real(dp) function spectrum_error(c)
        complex(dp), intent(in) :: c(0:n - 1, 0:n / p1 - 1, 0:n / p2 - 1)
        real(dp) :: n3
        complex(dp) :: exact
        integer :: k(3), xl, yl, z, j

        n3 = real(n, dp)**3
        spectrum_error = 0.0_dp
        do yl = 0, n / p2 - 1
            do xl = 0, n / p1 - 1
                do z = 0, n - 1
                    k = [mod(rank, p1) * (n / p1) + xl, rank / p1 * (n / p2) + yl, z]
                    exact = (0.0_dp, 0.0_dp)
                    do j = 1, N_MODES
                        if (all(modes(:, j) == k)) exact = exact + n3 * coef(j)
                    end do
                    spectrum_error = max(spectrum_error, abs(c(z, xl, yl) - exact) / n3)
                end do
            end do
        end do
    end function spectrum_error

    ! ---- the program --------------------------------------------------------------------------

    ! one untimed transform, then `repeat` timed ones from a fresh field; the phases of the
    ! fastest (each the slowest rank's), and the error of the last spectrum
    subroutine run()
        type(c_ptr) :: plan
        real(dp) :: phases(0:N_PHASES), slowest(0:N_PHASES), start
        integer :: rep

        call pencil_fft_plan(n, (n / p1) * (n / p2), data, work, plan)
        best = huge(1.0_dp)
        do rep = 0, repeat
            call fill_field(data)
            phases = 0.0_dp
            call MPI_Barrier(MPI_COMM_WORLD)
            start = MPI_Wtime()
            call pencil_fft_forward(n, p1, p2, comm1, comm2, plan, data, work, phases(1:))
            phases(0) = MPI_Wtime() - start
            call MPI_Allreduce(phases, slowest, N_PHASES + 1, MPI_DOUBLE_PRECISION, MPI_MAX, &
                               MPI_COMM_WORLD)
            if (rep > 0 .and. slowest(0) < best(0)) best = slowest
        end do
        call fftw_destroy_plan(plan)
        call MPI_Allreduce(spectrum_error(work), err, 1, MPI_DOUBLE_PRECISION, MPI_MAX, &
                           MPI_COMM_WORLD)
    end subroutine run

    subroutine print_summary()
        real(dp) :: n3

        n3 = real(n, dp)**3
        write(output_unit, '(a)') 'pencil_fft (Fortran): n = ' // c_d(n) // ', ' // &
            c_d(n_ranks) // ' ranks as p1 x p2 = ' // c_d(p1) // ' x ' // c_d(p2) // &
            ', m1 = ' // c_d(nint(n3 / (real(p1, dp)**2 * p2), c_long)) // ', m2 = ' // &
            c_d(nint(n3 / (real(p2, dp)**2 * p1), c_long)) // ' elements per message'
        write(output_unit, '(a)') '  max error ' // c_e(err, 3) // ' (|spectrum - exact| / n^3, ' &
            // c_d(N_MODES) // ' known modes)'
        write(output_unit, '(a)') '  best of ' // c_d(repeat) // ': total ' // c_e(best(0), 3) &
            // ' s, fft ' // c_e(best(1), 3) // ' s, transpose ' // c_e(best(2), 3) // &
            ' s, alltoall ' // c_e(best(3), 3) // ' s'
        flush(output_unit)
    end subroutine print_summary

end program pencil_fft
