/* The halo exchange and the distributed CG of lecture 05_halo: the serial pcg_jacobi of
 * common/cg.c, with the two operations that need the other ranks' data replaced by
 *   SpMV: halo_exchange (the external entries of the vector) + crs_matvec over the internal rows,
 *   dot:  dot_reduction over the internal entries + MPI_Allreduce(SUM).
 * Everything else (preconditioner, vector updates) is local: every rank updates its own entries. */
#include <math.h>
#include <stdlib.h>

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

/* [pcg_jacobi_mpi]
 * pcg_jacobi line by line; p lives on all n_local nodes because A p needs the external entries. */
int pcg_jacobi_mpi(int n_internal, int n_local, const int *restrict row_ptr,
                   const int *restrict col_idx, const double *restrict val,
                   const double *restrict b, double *restrict x, double tol, int max_iter,
                   double *restrict relres, int n_neighbours, const int *restrict neighbours,
                   const int *restrict import_ptr, const int *restrict import_index,
                   const int *restrict export_ptr, const int *restrict export_index,
                   MPI_Comm comm)
{
    const int n = n_internal, n_send = export_ptr[n_neighbours], n_recv = import_ptr[n_neighbours];
    double *work = malloc(((size_t)4 * n + n_local + n_send + n_recv + 1) * sizeof *work);
    if (failed_anywhere(work == NULL, comm)) {          /* all ranks return together */
        free(work);
        return -1;
    }
    double *r = work, *z = r + n, *q = z + n, *dinv = q + n, *p = dinv + n;
    double *send_buf = p + n_local, *recv_buf = send_buf + n_send;

    jacobi_inverse_diagonal(n, row_ptr, col_idx, val, dinv);    /* Jacobi: 1 / a_ii */

    halo_exchange(n_neighbours, neighbours, import_ptr, import_index, export_ptr, export_index,
                  x, send_buf, recv_buf, comm);          /* r = b - A x */
    crs_matvec(n, row_ptr, col_idx, val, x, q);
    for (int i = 0; i < n; i++)
        r[i] = b[i] - q[i];
    double bnorm = sqrt(dot_mpi(n, b, b, comm));
    if (bnorm == 0.0)
        bnorm = 1.0;

    double rho_old = 1.0;
    int iter = 0;
    *relres = sqrt(dot_mpi(n, r, r, comm)) / bnorm;
    while (*relres > tol && iter < max_iter) {
        for (int i = 0; i < n; i++)                      /* z = M^-1 r */
            z[i] = dinv[i] * r[i];
        double rho = dot_mpi(n, r, z, comm);
        double beta = (iter == 0) ? 0.0 : rho / rho_old;
        for (int i = 0; i < n; i++)                      /* p = z + beta p (p = z at first) */
            p[i] = (iter == 0) ? z[i] : z[i] + beta * p[i];
        halo_exchange(n_neighbours, neighbours, import_ptr, import_index, export_ptr,
                      export_index, p, send_buf, recv_buf, comm);   /* q = A p */
        crs_matvec(n, row_ptr, col_idx, val, p, q);
        double alpha = rho / dot_mpi(n, p, q, comm);
        for (int i = 0; i < n; i++) {
            x[i] += alpha * p[i];
            r[i] -= alpha * q[i];
        }
        rho_old = rho;
        iter++;
        *relres = sqrt(dot_mpi(n, r, r, comm)) / bnorm;
    }
    free(work);
    return iter;
}
/* [pcg_jacobi_mpi] */
