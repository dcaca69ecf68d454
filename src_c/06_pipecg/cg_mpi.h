/* Lecture 06_pipecg: four CG variants on the distributed operators of 05_halo, with blocking
 * (MPI_Allreduce) or non-blocking (MPI_Iallreduce + MPI_Wait) global sums (library course_halo_c,
 * with halo.c; not part of libcourse_c, which Python loads without MPI).
 *
 * The C twin of course/solvers/krylov.py plugged with course/parallel/reductions.py: the same
 * operations in the same order, so the same iterates up to rounding, and the same dot products in
 * each reduction. The Fortran twin (src_fortran/06_pipecg/cg_mpi.f90) has the same names and
 * arguments.
 *
 * Hybrid MPI + OpenMP (lecture 08_hybrid): cg_variant_mpi runs the solve in ONE parallel region
 * of omp_get_max_threads() threads per rank (OMP_NUM_THREADS), every loop over the rows an
 * `omp for schedule(static)`, MPI called by the master thread only (MPI_THREAD_FUNNELED, which
 * the caller must have asked MPI_Init_thread for). The dot products are summed in thread order:
 * for a given number of threads (and ranks) a run gives the same bits every time. Call it outside
 * a parallel region. */
#ifndef COURSE_CG_MPI_H
#define COURSE_CG_MPI_H
#include <mpi.h>

#include "precond_mpi.h"

/* the algorithms; cg_algorithm_name gives the names of course.solvers.ALGORITHMS */
enum {
    CG_PCG = 0,               /* Hestenes-Stiefel: 2 reductions per iteration */
    CG_CHRONOPOULOS_GEAR = 1, /* one fused reduction of (r, u), (w, u), (r, r) */
    CG_GROPP = 2,             /* 2 reductions, hidden behind M^-1 s and A u */
    CG_PIPELINED = 3,         /* Ghysels-Vanroose: one reduction hidden behind M^-1 w and A m */
    CG_N_ALGORITHMS = 4
};

/* "pcg", "chronopoulos-gear", "gropp", "pipelined"; NULL for a number outside 0 .. 3 */
const char *cg_algorithm_name(int algorithm);

/* The number of the algorithm called `name`, or -1 if there is none. */
int cg_algorithm_from_name(const char *name);

/* Solves A x = b (A symmetric positive definite, distributed by rows: the local CRS holds the
 * n_internal internal rows, with columns among the n_local local nodes; b has n_internal
 * entries, x n_local; the halo tables are those of halo.h) with the CG variant `algorithm`
 * preconditioned by `precond` (08_hybrid/precond_mpi.h: diagonal, bjacobi-ic0 or asdd-ic0, set up
 * by precond_setup on the same rows; each variant applies it where krylov.py applies M^-1, the
 * pipelined one to w). nonblocking != 0: every global sum is MPI_Iallreduce + MPI_Wait, else
 * MPI_Allreduce. replace_every N > 0: every N-th iteration the recursively updated vectors are
 * recomputed from x (residual replacement); 0: never. x: the initial guess in its internal
 * entries on entry, the solution there on exit (its external entries are scratch).
 * Stops when the recursive residual has ||r|| <= tol ||b|| or after max_iter iterations.
 * Returns the iterations (the same on every rank); *relres the recursive ||r|| / ||b|| at the
 * end, *true_relres ||b - A x|| / ||b|| recomputed at the end, *reductions_per_iteration the
 * global sums started in each iteration, counted (0 if no iteration ran, -1 if two iterations
 * counted differently), *halo_exchanges_per_iteration the halo exchanges made in each iteration,
 * counted the same way (1 in A v, K-1 in M^-1 with asdd-ic0 K: K for every variant, 1 with
 * diagonal; an iteration with residual replacement makes more). Returns -1 on every rank if the
 * work vectors cannot be allocated on some rank, -2 if `algorithm` is not one of the four. */
int cg_variant_mpi(int algorithm, int nonblocking, int replace_every, int n_internal,
                   int n_local, const int *restrict row_ptr, const int *restrict col_idx,
                   const double *restrict val, const precond_mpi *precond,
                   const double *restrict b, double *restrict x, double tol, int max_iter,
                   double *restrict relres, int n_neighbours, const int *restrict neighbours,
                   const int *restrict import_ptr, const int *restrict import_index,
                   const int *restrict export_ptr, const int *restrict export_index,
                   MPI_Comm comm, int *restrict reductions_per_iteration,
                   int *restrict halo_exchanges_per_iteration, double *restrict true_relres);

#endif
