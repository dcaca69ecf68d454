/* Lecture 05_halo: the halo exchange and the pieces every distributed CG shares: the global dot
 * product, the agreement on a failure, the Jacobi preconditioner (library course_halo_c; not part
 * of libcourse_c, which Python loads without MPI). The distributed CG that plugs them in, in four
 * variants, is cg_variant_mpi (06_pipecg/cg_mpi.h): its pcg is the serial pcg_jacobi of
 * common/cg.c with SpMV = halo_exchange + crs_matvec and dot = dot_mpi.
 *
 * Local data, GeoFEM style: a rank numbers its n_internal internal (owned) nodes 0 .. n_internal-1
 * and its external (halo) nodes n_internal .. n_local-1, grouped by owner rank. For neighbour
 * m = 0 .. n_neighbours-1 (rank neighbours[m]):
 *   import_index[import_ptr[m] .. import_ptr[m+1]-1]  our external nodes that it owns,
 *   export_index[export_ptr[m] .. export_ptr[m+1]-1]  our internal nodes that are external on it,
 * both in the same order on the two sides (ascending global number for blocks), so the k-th value
 * one rank exports to a neighbour is the k-th value that neighbour imports from it.
 * The Fortran twin (src_fortran/05_halo/halo.f90) has the same names and arguments. */
#ifndef COURSE_HALO_H
#define COURSE_HALO_H
#include <mpi.h>

/* x[import_index] = the owners' values of the external nodes. send_buf holds
 * export_ptr[n_neighbours] values, recv_buf import_ptr[n_neighbours] values. */
void halo_exchange(int n_neighbours, const int *restrict neighbours,
                   const int *restrict import_ptr, const int *restrict import_index,
                   const int *restrict export_ptr, const int *restrict export_index,
                   double *restrict x, double *restrict send_buf, double *restrict recv_buf,
                   MPI_Comm comm);

/* The global a . b of the n_internal internal entries (local dot_reduction + MPI_Allreduce):
 * the same value, bit for bit, on every rank. */
double dot_mpi(int n_internal, const double *restrict a, const double *restrict b, MPI_Comm comm);

/* Nonzero on every rank if `failed` is nonzero on any rank (MPI_Allreduce with MPI_MAX): the
 * ranks agree on an allocation failure and return together. */
int failed_anywhere(int failed, MPI_Comm comm);

/* dinv[i] = 1 / a_ii of the n (internal) rows, 1 where the row has no diagonal entry. */
void jacobi_inverse_diagonal(int n, const int *restrict row_ptr, const int *restrict col_idx,
                             const double *restrict val, double *restrict dinv);

#endif
