! Lecture 05_halo: the halo exchange and the pieces every distributed CG shares: the global dot
! product, the agreement on a failure, the Jacobi preconditioner (Fortran twin of
! src_c/05_halo/halo.c, with the Fortran 2008 bindings: module mpi_f08; library course_halo_fortran,
! not part of libcourse_fortran, which Python loads without MPI). A CG on P ranks is the serial one
! with the two operations that need the other ranks' data replaced by
!   SpMV: halo_exchange (the external entries of the vector) + crs_matvec over the internal rows,
!   dot:  dot_reduction over the internal entries + MPI_Allreduce(SUM) (dot_mpi).
! Everything else (preconditioner, vector updates) is local: every rank updates its own entries.
! That CG, in four variants, is cg_variant_mpi (06_pipecg/cg_mpi.f90).
!
! Local data of one rank: the internal nodes 1 .. n_internal (the rank owns them), then the external
! (halo) nodes n_internal+1 .. n_local, grouped by the neighbour that owns them. For the m-th
! neighbour, neighbours(m) is its rank,
!   import_index(import_ptr(m) : import_ptr(m+1)-1)   the local indices of the external nodes it
!                                                      owns (their values come from it),
!   export_index(export_ptr(m) : export_ptr(m+1)-1)   the local indices of the internal nodes that
!                                                      are external on it (their values go to it),
! both in the order in which the other side lists them, so a message needs no further addressing.
! Indices and offsets are 1-based (import_ptr(1) = export_ptr(1) = 1).
module course_halo
    use, intrinsic :: iso_c_binding, only: c_int, c_double
    use mpi_f08, only: MPI_Comm, MPI_Request, MPI_Irecv, MPI_Isend, MPI_Waitall, MPI_Allreduce, &
                       MPI_DOUBLE_PRECISION, MPI_INTEGER, MPI_SUM, MPI_MAX, MPI_STATUSES_IGNORE
    use course_cg, only: dot_reduction
    implicit none
    private
    public :: halo_exchange, dot_mpi, failed_anywhere, jacobi_inverse_diagonal

    integer, parameter :: HALO_TAG = 5           ! every halo message carries this tag

contains

! [halo_exchange]
! x(import_index) = the owners' values of the external nodes. send_buf holds
! export_ptr(n_neighbours+1)-1 values, recv_buf import_ptr(n_neighbours+1)-1.
! Every rank posts all its receives first, then all its sends, and waits for all of them: no
! blocking call is ever waiting for a partner that is itself blocked, so there is no deadlock
! whatever the order of the neighbours. One tag is enough: between two ranks there is at most one
! message in each direction per exchange, and MPI keeps messages between a pair in order.
! (ASYNCHRONOUS: MPI reads and writes the buffers between Irecv/Isend and Waitall, behind the
! compiler's back.)
subroutine halo_exchange(n_neighbours, neighbours, import_ptr, import_index, export_ptr, &
                         export_index, x, send_buf, recv_buf, comm)
    integer(c_int), intent(in) :: n_neighbours
    integer(c_int), intent(in) :: neighbours(n_neighbours)
    integer(c_int), intent(in) :: import_ptr(n_neighbours + 1), import_index(*)
    integer(c_int), intent(in) :: export_ptr(n_neighbours + 1), export_index(*)
    real(c_double), intent(inout) :: x(*)
    real(c_double), intent(inout), asynchronous :: send_buf(*), recv_buf(*)
    type(MPI_Comm), intent(in) :: comm
    type(MPI_Request) :: requests(2 * n_neighbours)
    integer(c_int) :: m, k, first, last

    do k = 1, export_ptr(n_neighbours + 1) - 1           ! pack what the neighbours need
        send_buf(k) = x(export_index(k))
    end do
    do m = 1, n_neighbours
        first = import_ptr(m)
        last = import_ptr(m + 1) - 1
        call MPI_Irecv(recv_buf(first:last), last - first + 1, MPI_DOUBLE_PRECISION, &
                       neighbours(m), HALO_TAG, comm, requests(m))
    end do
    do m = 1, n_neighbours
        first = export_ptr(m)
        last = export_ptr(m + 1) - 1
        call MPI_Isend(send_buf(first:last), last - first + 1, MPI_DOUBLE_PRECISION, &
                       neighbours(m), HALO_TAG, comm, requests(n_neighbours + m))
    end do
    call MPI_Waitall(2 * n_neighbours, requests, MPI_STATUSES_IGNORE)
    do k = 1, import_ptr(n_neighbours + 1) - 1           ! unpack into the external nodes
        x(import_index(k)) = recv_buf(k)
    end do
end subroutine halo_exchange
! [halo_exchange]

! [dot_mpi]
! The global a . b: each rank's share over its internal entries, summed over the ranks. Every rank
! gets the same sum (the same bits), so every rank takes the same decisions in CG.
function dot_mpi(n_internal, a, b, comm) result(global)
    integer(c_int), intent(in) :: n_internal
    real(c_double), intent(in) :: a(n_internal), b(n_internal)
    type(MPI_Comm), intent(in) :: comm
    real(c_double) :: global
    real(c_double) :: local

    local = dot_reduction(n_internal, a, b)
    call MPI_Allreduce(local, global, 1, MPI_DOUBLE_PRECISION, MPI_SUM, comm)
end function dot_mpi
! [dot_mpi]

! The allocation status of every rank: .true. on all ranks if it failed on any.
logical function failed_anywhere(alloc_stat, comm)
    integer, intent(in) :: alloc_stat
    type(MPI_Comm), intent(in) :: comm
    integer :: worst

    call MPI_Allreduce(alloc_stat, worst, 1, MPI_INTEGER, MPI_MAX, comm)
    failed_anywhere = worst /= 0
end function failed_anywhere

! [jacobi_inverse_diagonal]
! dinv(i) = 1 / a_ii for the n rows (1 where the pattern has no diagonal entry): the Jacobi
! preconditioner, M^-1 r = dinv * r, which needs no communication.
subroutine jacobi_inverse_diagonal(n, row_ptr, col_idx, val, dinv)
    integer(c_int), intent(in) :: n
    integer(c_int), intent(in) :: row_ptr(n + 1), col_idx(*)
    real(c_double), intent(in) :: val(*)
    real(c_double), intent(out) :: dinv(n)
    integer(c_int) :: i, k

    do i = 1, n
        dinv(i) = 1.0_c_double
        do k = row_ptr(i), row_ptr(i + 1) - 1
            if (col_idx(k) == i) dinv(i) = 1.0_c_double / val(k)
        end do
    end do
end subroutine jacobi_inverse_diagonal
! [jacobi_inverse_diagonal]

end module course_halo
