/* mpi_hello: every rank reports itself; rank 0 checks the sum of the ranks with MPI_Reduce. */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size, sum = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    printf("hello from rank %d of %d (C)\n", rank, size);
    MPI_Reduce(&rank, &sum, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0)
        printf("sum of ranks %d (should be %d)\n", sum, size * (size - 1) / 2);
    MPI_Finalize();
    return 0;
}
