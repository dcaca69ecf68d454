! Lecture 07_cluster, case study: the pencil-decomposed 3-D FFT of seed 003 (a DNS of
! incompressible turbulence on SX-Aurora TSUBASA), with FFTW 3 (its Fortran 2003 interface) and
! MPI_Alltoall (Fortran twin of src_c/07_cluster/pencil_fft.c; module mpi_f08).
!
! The n x n x n complex field is u(x, y, z) (x contiguous; C's u[z][y][x]). The P = p1 p2 ranks
! form a grid, rank = r1 + p1 r2 (0-based, as MPI numbers ranks), and every rank holds one pencil,
! all n points along the contiguous axis:
!   x-pencil a(x, y, z)  y in block r1 (n/p1 points), z in block r2 (n/p2), all x   (input)
!   y-pencil b(y, z, x)  z in block r2 (n/p2), x in block r1 (n/p1), all y
!   z-pencil c(z, x, y)  x in block r1 (n/p1), y in block r2 (n/p2), all z       (spectrum)
! Each layout is the previous one rotated, so both transposes are the same pack, all-to-all and
! unpack, on comm1 (the p1 ranks with this r2) and then on comm2 (the p2 ranks with this r1).
! Every rank holds rows = n^2/(p1 p2) lines of n points in every layout, so one FFTW plan (rows
! transforms of length n, from data to work) serves all three FFT steps: the data goes back and
! forth between two arrays, and each step reads one and writes the other. The arrays are those of the C
! version, element for element; Fortran's index order is C's reversed.

! FFTW's Fortran 2003 interface in a module of its own, everything public: the programs take what
! they use with `only` (included into a scope of its own, every unused constant would be a warning)
module course_fftw
    use, intrinsic :: iso_c_binding     ! all of it: fftw3.f03 names c_intptr_t, c_funptr, ...
    implicit none
    include 'fftw3.f03'
end module course_fftw

module course_pencil_fft
    use, intrinsic :: iso_c_binding, only: c_int, c_double, c_double_complex, c_ptr
    use mpi_f08, only: MPI_Comm, MPI_Comm_rank, MPI_Comm_split, MPI_Alltoall, MPI_Wtime, &
                       MPI_DOUBLE_COMPLEX
    use course_fftw, only: fftw_plan_many_dft, fftw_execute_dft, FFTW_FORWARD, FFTW_ESTIMATE
    implicit none
    private
    public :: pencil_communicators, pencil_pack, pencil_unpack, pencil_fft_plan, &
              pencil_fft_forward, PHASE_FFT, PHASE_TRANSPOSE, PHASE_ALLTOALL, N_PHASES

    ! seconds(PHASE_...) of pencil_fft_forward: the phases it adds its times to
    integer, parameter :: PHASE_FFT = 1, PHASE_TRANSPOSE = 2, PHASE_ALLTOALL = 3, N_PHASES = 3

contains

! [pencil_communicators]
! The rows and columns of the p1 x p2 grid of comm: comm1 holds the p1 ranks with the same
! r2 = rank / p1 (consecutive ranks), comm2 the p2 ranks with the same r1 = mod(rank, p1) (equal
! modulo p1), each ordered by the other coordinate: the seed's com1 and com2.
subroutine pencil_communicators(p1, comm, comm1, comm2)
    integer(c_int), intent(in) :: p1
    type(MPI_Comm), intent(in) :: comm
    type(MPI_Comm), intent(out) :: comm1, comm2
    integer :: rank, r1, r2

    call MPI_Comm_rank(comm, rank)
    r1 = mod(rank, p1)
    r2 = rank / p1
    call MPI_Comm_split(comm, r2, r1, comm1)     ! color: which row; key: the rank within it
    call MPI_Comm_split(comm, r1, r2, comm2)
end subroutine pencil_communicators
! [pencil_communicators]

! [pencil_pack]
! send(l, r, d) = a((d-1)*blk + l, r), blk = n/p: each of the `rows` lines of a (n points) is
! cut into p blocks, and block d of every line goes to the part of send for the d-th rank of the
! communicator (MPI_Alltoall sends the d-th rows*blk elements to it).
subroutine pencil_pack(rows, n, p, a, send)
    integer(c_int), intent(in) :: rows, n, p
    complex(c_double_complex), intent(in) :: a(n, rows)
    complex(c_double_complex), intent(out) :: send(n / p, rows, p)
    integer :: blk, d, r, l

    blk = n / p
    do d = 1, p
        do r = 1, rows
            do l = 1, blk
                send(l, r, d) = a((d - 1) * blk + l, r)
            end do
        end do
    end do
end subroutine pencil_pack
! [pencil_pack]

! [pencil_unpack]
! out((s-1)*m + i, o, l) = recv(l, i, o, s): the blocks from the p sources s (each m points of
! the axis that arrives whole) joined along that axis, which becomes contiguous; the axis that
! was contiguous (this rank's blk points of it) becomes the last.
subroutine pencil_unpack(p, outer, m, blk, recv, out)
    integer(c_int), intent(in) :: p, outer, m, blk
    complex(c_double_complex), intent(in) :: recv(blk, m, outer, p)
    complex(c_double_complex), intent(out) :: out(p * m, outer, blk)
    integer :: s, o, i, l

    do s = 1, p
        do o = 1, outer
            do i = 1, m
                do l = 1, blk
                    out((s - 1) * m + i, o, l) = recv(l, i, o, s)
                end do
            end do
        end do
    end do
end subroutine pencil_unpack
! [pencil_unpack]

! [pencil_fft_plan]
! The forward FFT of `rows` contiguous lines of n points, from data to work (out of place;
! FFTW_ESTIMATE: the arrays are not touched while planning), in plan.
subroutine pencil_fft_plan(n, rows, data, work, plan)
    integer(c_int), intent(in) :: n, rows
    complex(c_double_complex), intent(inout) :: data(n, rows), work(n, rows)
    type(c_ptr), intent(out) :: plan

    plan = fftw_plan_many_dft(1, [n], rows, data, [n], 1, n, work, [n], 1, n, FFTW_FORWARD, &
                              FFTW_ESTIMATE)
end subroutine pencil_fft_plan
! [pencil_fft_plan]

! [pencil_fft_forward]
! The 3-D FFT of the field whose x-pencil this rank holds in data (n^3/(p1 p2) elements); on
! return work holds its z-pencil of the spectrum, c(kz, kx, ky) (kx in block r1, ky in block r2),
! and data is overwritten. plan is pencil_fft_plan's for these two arrays. The time of each phase
! is added to seconds(PHASE_FFT), seconds(PHASE_TRANSPOSE) (pack + unpack),
! seconds(PHASE_ALLTOALL).
subroutine pencil_fft_forward(n, p1, p2, comm1, comm2, plan, data, work, seconds)
    integer(c_int), intent(in) :: n, p1, p2
    type(MPI_Comm), intent(in) :: comm1, comm2
    type(c_ptr), intent(in) :: plan
    complex(c_double_complex), intent(inout) :: data(n * (n / p1) * (n / p2))
    complex(c_double_complex), intent(inout) :: work(n * (n / p1) * (n / p2))
    real(c_double), intent(inout) :: seconds(N_PHASES)
    integer(c_int) :: bx, bz, rows, m1, m2
    real(c_double) :: t

    bx = n / p1                      ! the blocks of x (and y) and of z (and y)
    bz = n / p2
    rows = bx * bz                   ! lines per rank in every layout: n^2/(p1 p2)
    m1 = rows * bx                   ! elements per message: n^3/(p1^2 p2), n^3/(p1 p2^2)
    m2 = rows * bz
    t = MPI_Wtime()
    call fftw_execute_dft(plan, data, work)                              ! (1) along x
    call elapsed(PHASE_FFT)
    call pencil_pack(rows, n, p1, work, data)                            ! (2) x in p1 blocks
    call elapsed(PHASE_TRANSPOSE)
    call MPI_Alltoall(data, m1, MPI_DOUBLE_COMPLEX, work, m1, MPI_DOUBLE_COMPLEX, comm1) ! (3)
    call elapsed(PHASE_ALLTOALL)
    call pencil_unpack(p1, bz, bx, bx, work, data)   ! (4) recv(x, y, z, s) -> b(y, z, x)
    call elapsed(PHASE_TRANSPOSE)
    call fftw_execute_dft(plan, data, work)                              ! (5) along y
    call elapsed(PHASE_FFT)
    call pencil_pack(rows, n, p2, work, data)                            ! (6) y in p2 blocks
    call elapsed(PHASE_TRANSPOSE)
    call MPI_Alltoall(data, m2, MPI_DOUBLE_COMPLEX, work, m2, MPI_DOUBLE_COMPLEX, comm2) ! (7)
    call elapsed(PHASE_ALLTOALL)
    call pencil_unpack(p2, bx, bz, bz, work, data)   ! (8) recv(y, z, x, s) -> c(z, x, y)
    call elapsed(PHASE_TRANSPOSE)
    call fftw_execute_dft(plan, data, work)                              ! (9) along z
    call elapsed(PHASE_FFT)

contains

    subroutine elapsed(phase)
        integer, intent(in) :: phase
        real(c_double) :: now

        now = MPI_Wtime()
        seconds(phase) = seconds(phase) + (now - t)
        t = now
    end subroutine elapsed

end subroutine pencil_fft_forward
! [pencil_fft_forward]

end module course_pencil_fft
