/* The halo exchange of lecture 05_halo and the distributed dot product: a CG on P ranks is the
 * serial one with the two operations that need the other ranks' data replaced by
 *   SpMV: halo_exchange (the external entries of the vector) + crs_matvec over the internal rows,
 *   dot:  dot_reduction over the internal entries + MPI_Allreduce(SUM).
 * Everything else (preconditioner, vector updates) is local: every rank updates its own entries.
 * That CG, in four variants, is cg_variant_mpi (06_pipecg/cg_mpi.c). */

#include "course.h"
#include "halo.h"

/* [halo_exchange]
 * Every rank posts all its receives first, then all its sends, and waits for all of them: no
 * blocking call is ever waiting for a partner that is itself blocked, so there is no deadlock
 * whatever the order of the neighbours. One tag is enough: between two ranks there is at most one
 * message in each direction per exchange, and MPI keeps messages between a pair in order. */
void halo_exchange(int n_neighbours, const int *restrict neighbours,
                   const int *restrict import_ptr, const int *restrict import_index,
                   const int *restrict export_ptr, const int *restrict export_index,
                   double *restrict x, double *restrict send_buf, double *restrict recv_buf,
                   MPI_Comm comm)
{
    enum { HALO_TAG = 5 };
    MPI_Request requests[2 * n_neighbours + 1];          /* + 1: never an empty array */
    for (int k = 0; k < export_ptr[n_neighbours]; k++)   /* pack what the neighbours need */
        send_buf[k] = x[export_index[k]];
    for (int m = 0; m < n_neighbours; m++)
        MPI_Irecv(recv_buf + import_ptr[m], import_ptr[m + 1] - import_ptr[m], MPI_DOUBLE,
                  neighbours[m], HALO_TAG, comm, &requests[m]);
    for (int m = 0; m < n_neighbours; m++)
        MPI_Isend(send_buf + export_ptr[m], export_ptr[m + 1] - export_ptr[m], MPI_DOUBLE,
                  neighbours[m], HALO_TAG, comm, &requests[n_neighbours + m]);
    MPI_Waitall(2 * n_neighbours, requests, MPI_STATUSES_IGNORE);
    for (int k = 0; k < import_ptr[n_neighbours]; k++)   /* unpack into the external entries */
        x[import_index[k]] = recv_buf[k];
}
/* [halo_exchange] */

/* [dot_mpi]
 * The global a . b: each rank's share over its internal entries, summed over the ranks. Every rank
 * gets the same sum (the same bits), so every rank takes the same decisions in CG. */
double dot_mpi(int n_internal, const double *restrict a, const double *restrict b,
                      MPI_Comm comm)
{
    double local = dot_reduction(n_internal, a, b), global;
    MPI_Allreduce(&local, &global, 1, MPI_DOUBLE, MPI_SUM, comm);
    return global;
}
/* [dot_mpi] */

/* The allocation status of every rank: nonzero on all ranks if it failed on any. */
int failed_anywhere(int failed, MPI_Comm comm)
{
    int any;
    MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, comm);
    return any;
}

/* [jacobi_inverse_diagonal]
 * dinv[i] = 1 / a_ii for the n rows (1 where the pattern has no diagonal entry): the Jacobi
 * preconditioner, M^-1 r = dinv * r, which needs no communication. */
void jacobi_inverse_diagonal(int n, const int *restrict row_ptr, const int *restrict col_idx,
                             const double *restrict val, double *restrict dinv)
{
    for (int i = 0; i < n; i++) {
        dinv[i] = 1.0;
        for (int k = row_ptr[i]; k < row_ptr[i + 1]; k++)
            if (col_idx[k] == i)
                dinv[i] = 1.0 / val[k];
    }
}
/* [jacobi_inverse_diagonal] */
