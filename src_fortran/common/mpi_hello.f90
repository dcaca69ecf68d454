! mpi_hello: every rank reports itself; rank 0 checks the sum of the ranks with MPI_Reduce
! (Fortran twin of src_c/common/mpi_hello.c, with the Fortran 2008 bindings: module mpi_f08).
program mpi_hello
    use mpi_f08
    implicit none
    integer :: rank, nproc, total

    call MPI_Init()
    call MPI_Comm_rank(MPI_COMM_WORLD, rank)
    call MPI_Comm_size(MPI_COMM_WORLD, nproc)
    write(*, '(a, i0, a, i0, a)') 'hello from rank ', rank, ' of ', nproc, ' (Fortran)'
    total = 0
    call MPI_Reduce(rank, total, 1, MPI_INTEGER, MPI_SUM, 0, MPI_COMM_WORLD)
    if (rank == 0) write(*, '(a, i0, a, i0, a)') 'sum of ranks ', total, ' (should be ', &
                                                 nproc * (nproc - 1) / 2, ')'
    call MPI_Finalize()
end program mpi_hello
