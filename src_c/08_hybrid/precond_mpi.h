/* Lecture 08_hybrid: the parallel preconditioners of GeoFEM for the distributed CG of 06_pipecg
 * (library course_halo_c, with halo.c and cg_mpi.c; the IC(0) kernels and orderings of 04_iccg
 * come from libcourse_c). The Fortran twin (src_fortran/08_hybrid/precond_mpi.f90, module
 * precond_mpi) has the same names and arguments, 1-based.
 *
 * Every rank preconditions its own n internal rows (the local CRS of halo.h: columns among the
 * n_local local nodes, internal ones 0 .. n-1 first):
 *   diagonal      z_i = r_i / a_ii (Jacobi), no communication
 *   bjacobi-ic0   localized IC(0), block Jacobi over the ranks: B = the IC(0) of the internal
 *                 block A_ii (the entries of the internal rows with a column < n), after an
 *                 ordering of lecture 04_iccg (natural, cm, rcm, mc K, cm-rcm K) on A_ii's graph:
 *                     B r = unpermute(backward(forward(permute(r)))), no communication
 *   asdd-ic0 K    additive Schwarz sweeps around the same B (K >= 1; K = 1 is bjacobi-ic0):
 *                     z = B r; K-1 times: halo exchange of z, t = r - A z, z += B t
 *                 (K-1 halo exchanges per application)
 * The loops of precond_apply are orphaned `omp for` (like ic0_forward): cg_variant_mpi calls it
 * from every thread of its parallel region (the whole solve), which share the rows; the halo
 * exchanges of asdd-ic0 are made by the master thread between barriers (MPI_THREAD_FUNNELED).
 * Outside a parallel region one thread does it all. */
#ifndef COURSE_PRECOND_MPI_H
#define COURSE_PRECOND_MPI_H
#include <mpi.h>

enum { PRECOND_DIAGONAL = 0, PRECOND_BJACOBI_IC0 = 1, PRECOND_ASDD_IC0 = 2, PRECOND_N_KINDS = 3 };

/* the statuses of precond_setup; a status <= PRECOND_BREAKDOWN is an IC(0) breakdown at the
 * internal row PRECOND_BREAKDOWN - status (the local number of the row, before the ordering) */
enum {
    PRECOND_OUT_OF_MEMORY = -1,
    PRECOND_TOO_MANY_COLORS = -2,   /* the ordering asks for more colors than internal nodes */
    PRECOND_BAD_ARGUMENT = -3,      /* an unknown kind or ordering, a bad sweeps or colors */
    PRECOND_BREAKDOWN = -4
};

enum { PRECOND_NAME_SIZE = 16 };

/* One rank's preconditioner. The IC(0) parts are set for bjacobi-ic0 and asdd-ic0 only, dinv for
 * diagonal only; the work vectors are written by precond_apply (through a const pointer: the
 * struct is the same, the vectors are scratch). */
typedef struct {
    int kind, sweeps;                      /* PRECOND_..., K (1 but for asdd-ic0) */
    char ordering[PRECOND_NAME_SIZE];      /* "natural", "cm", "rcm", "mc", "cm-rcm" */
    int requested_colors;                  /* K of mc and cm-rcm, else 0 */
    int ncolor;                            /* colors of the ordering (1 for natural, diagonal) */
    int n, n_local;                        /* internal rows, local nodes */
    const int *row_ptr, *col_idx;          /* the caller's local rows, for t = r - A z */
    const double *val;
    double *dinv;                          /* diagonal: 1 / a_ii */
    int *perm, *color_ptr;                 /* perm[new] = old; colors new color_ptr[c] .. */
    /* the permuted internal block split as in 04_iccg, and its IC(0) factor */
    double *diag, *lower_val, *upper_val;
    int *lower_ptr, *lower_col, *upper_ptr, *upper_col;
    double *fac_diag, *inv_diag, *fac_lower, *fac_upper;
    double *permuted, *solved, *t, *bt;    /* work vectors: r in the new numbering, B r there,
                                              the residual t, B t */
} precond_mpi;

/* "diagonal", "bjacobi-ic0", "asdd-ic0"; NULL for a kind outside 0 .. 2 */
const char *precond_name(int kind);

/* The kind called `name`, or -1 if there is none. */
int precond_from_name(const char *name);

/* Builds p for the n_internal internal rows (row_ptr, col_idx, val: the local CRS of halo.h).
 * ordering: "natural", "cm", "rcm" (colors 0) or "mc", "cm-rcm" (colors >= 2); diagonal takes
 * natural 0 only, and sweeps 1 but for asdd-ic0. Returns 0, or a negative status (enum above):
 * p is then freed. Local: no communication (the caller makes the ranks agree on the status). */
int precond_setup(int kind, int sweeps, const char *ordering, int colors, int n_internal,
                  int n_local, const int *restrict row_ptr, const int *restrict col_idx,
                  const double *restrict val, precond_mpi *p);

/* z = M^-1 r for the internal rows (r: n internal entries; z: n_local entries, its external ones
 * are overwritten by the halo exchanges of asdd-ic0). The halo arguments are those of
 * halo_exchange (halo.h). *exchanges += the halo exchanges made (K-1 for asdd-ic0, else 0; the
 * master thread counts). Inside a parallel region every thread of the team calls it, with the
 * same arguments (r and z complete: written before a barrier); z is complete on return. */
void precond_apply(const precond_mpi *p, const double *restrict r, double *restrict z,
                   int n_neighbours, const int *restrict neighbours,
                   const int *restrict import_ptr, const int *restrict import_index,
                   const int *restrict export_ptr, const int *restrict export_index,
                   double *restrict send_buf, double *restrict recv_buf, MPI_Comm comm,
                   long *restrict exchanges);

/* Frees what precond_setup allocated (p may be all zero). */
void precond_free(precond_mpi *p);

#endif
