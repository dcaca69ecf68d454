/* Kernels of the course library (libcourse_c), callable from C programs and from Python (ctypes).
 *
 * Conventions: indices are 0-based `int`; values are `double`; a sparse matrix is stored in CRS
 * (compressed row storage): row i holds the entries val[row_ptr[i] .. row_ptr[i+1]-1] in the columns
 * col_idx[same range]. The Fortran library (libcourse_fortran) has the same names and arguments,
 * with 1-based indices.
 */
#ifndef COURSE_H
#define COURSE_H

/* ---- common/crs.c -------------------------------------------------------------------------- */
void crs_matvec(int n, const int *restrict row_ptr, const int *restrict col_idx,
                const double *restrict val, const double *restrict x, double *restrict y);

/* Position of the entry (row, col) in col_idx and val, or -1 if the pattern lacks it. */
int crs_find(const int *restrict row_ptr, const int *restrict col_idx, int row, int col);

/* Prescribed values T_i = g[i] where fixed[i] != 0 (fixed: 0/1 flags, not indices): fixed rows
 * become identity rows with rhs_i = g_i; in free rows the fixed columns move to the right-hand side
 * (rhs_i -= a_ij g_j) and are cleared, so a symmetric matrix stays symmetric. */
void crs_dirichlet(int n, const int *restrict fixed, const double *restrict g,
                   const int *restrict row_ptr, const int *restrict col_idx,
                   double *restrict val, double *restrict rhs);

/* ---- common/stream.c (memory bandwidth, OpenMP schedule(static)) -------------------------- */
void stream_init(int n, double *restrict a, double *restrict b, double *restrict c);
void stream_copy(int n, const double *restrict b, double *restrict a);
void stream_triad(int n, double scalar, const double *restrict b, const double *restrict c,
                  double *restrict a);
/* the sum of a[0..n-1]: a read-only kernel, the rate of loads alone (timing.least_seconds) */
double stream_sum(int n, const double *restrict a);

/* ---- common/cg.c --------------------------------------------------------------------------- */
/* a . b with `reduction(+ : s)`: the dot product of every CG in the course */
double dot_reduction(int n, const double *restrict a, const double *restrict b);
int pcg_jacobi(int n, const int *restrict row_ptr, const int *restrict col_idx,
               const double *restrict val, const double *restrict b, double *restrict x,
               double tol, int max_iter, double *restrict relres);

/* ---- 01_fem1d/fem1d.c ---------------------------------------------------------------------- */
void fem1d_element(double h, double cond, double qvol, double *restrict ke, double *restrict fe);
void fem1d_pattern(int n_node, int *restrict row_ptr, int *restrict col_idx);
void fem1d_assemble(int n_elem, const double *restrict x, double cond, double qvol,
                    const int *restrict row_ptr, const int *restrict col_idx,
                    double *restrict val, double *restrict rhs);
void fem1d_boundary(int n_node, double qflux, const int *restrict row_ptr,
                    const int *restrict col_idx, double *restrict val, double *restrict rhs);

/* ---- 02_fem3d/fem3d.c ---------------------------------------------------------------------- */
/* Structured box of tri-linear hexahedra: xyz[3*n + d] are node coordinates, elements[8*e + a]
 * the global node of local node a, faces[4*f + c] the nodes of a boundary quad in cyclic order. */
int fem3d_element(const double *restrict xyz, double cond, const double *restrict q,
                  double *restrict ke, double *restrict fe);
void fem3d_pattern(int nx, int ny, int nz, int *restrict row_ptr, int *restrict col_idx);
int fem3d_assemble(int n_elem, const int *restrict elements, const double *restrict xyz,
                   double cond, const double *restrict q, const int *restrict row_ptr,
                   const int *restrict col_idx, double *restrict val, double *restrict rhs);
void fem3d_face_flux(int n_face, const int *restrict faces, const double *restrict xyz,
                     double qflux, double *restrict rhs);
void fem3d_nakajima_source(int n_elem, const int *restrict elements, const double *restrict xyz,
                           double qvol, double *restrict q_elem);
int fem3d_element_source_load(int n_elem, const int *restrict elements, const double *restrict xyz,
                              const double *restrict q_elem, double *restrict rhs);

/* ---- 03_openmp (finite-volume Poisson problem, 7-point stencil; the OpenMP ladder) ---------- */
/* Cell (i, j, k) of an NX x NY x NZ box is c = i + NX (j + NY k). The matrix is stored as its
 * diagonal d[N] plus the OFF-DIAGONAL part only: CRS (index[N+1], item, amat; 2 ((NX-1) NY NZ +
 * NX (NY-1) NZ + NX NY (NZ-1)) entries) or ELL (item_ell, amat_ell: 6 per row, row-major, short
 * rows padded with the row's own column and 0.0). parallel != 0: loops over cells are
 * `omp parallel for schedule(static)` (first touch); parallel == 0: serial. */
void poi_gen_crs(int nx, int ny, int nz, double dx, double dy, double dz, int parallel,
                 double *restrict d, int *restrict index, int *restrict item,
                 double *restrict amat, double *restrict b);
void poi_gen_ell(int nx, int ny, int nz, double dx, double dy, double dz, int parallel,
                 double *restrict d, int *restrict item_ell, double *restrict amat_ell,
                 double *restrict b);
/* Diagonal-scaled CG, stops when ||r|| / ||b|| <= eps; returns the iterations (*relres the final
 * relative residual), -1 if its work array cannot be allocated. x: initial guess on entry.
 * v0: CRS, serial first touch; v1: CRS, parallel first touch; v2: ELL; v3: ELL, one parallel
 * region. */
int pcg_v0(int n, const double *restrict d, const int *restrict index, const int *restrict item,
           const double *restrict amat, const double *restrict b, double *restrict x,
           double eps, int max_iter, double *restrict relres);
int pcg_v1(int n, const double *restrict d, const int *restrict index, const int *restrict item,
           const double *restrict amat, const double *restrict b, double *restrict x,
           double eps, int max_iter, double *restrict relres);
int pcg_v2(int n, const double *restrict d, const int *restrict item_ell,
           const double *restrict amat_ell, const double *restrict b, double *restrict x,
           double eps, int max_iter, double *restrict relres);
int pcg_v3(int n, const double *restrict d, const int *restrict item_ell,
           const double *restrict amat_ell, const double *restrict b, double *restrict x,
           double eps, int max_iter, double *restrict relres);
/* y = (D + off-diagonal part) x */
void offdiag_crs_matvec(int n, const double *restrict d, const int *restrict index,
                        const int *restrict item, const double *restrict amat,
                        const double *restrict x, double *restrict y);
void ell_matvec(int n, const double *restrict d, const int *restrict item_ell,
                const double *restrict amat_ell, const double *restrict x, double *restrict y);
/* SELL-C-sigma with C = chunk: perm[s] = original row of sorted row s; slice k of C sorted rows
 * holds col/val[slice_ptr[k] .. slice_ptr[k+1]-1], column-major (entry j of its row r at
 * slice_ptr[k] + j C + r), padded with value 0 (rows past n in the last slice too). */
void sell_matvec(int n, int chunk, const double *restrict d, const int *restrict perm,
                 const int *restrict slice_ptr, const int *restrict col,
                 const double *restrict val, const double *restrict x, double *restrict y);
/* omp_set_num_threads(n): the threads of the next parallel regions */
void course_set_threads(int n);

/* ---- 03_openmp/race.c (data races ON PURPOSE, for the lecture; see the comments there) ------- */
/* a . b with a race: every thread adds into one shared sum without a reduction (WRONG). */
double dot_racy(int n, const double *restrict a, const double *restrict b);
/* out[k] = a . b for k < rounds, in one parallel region where every thread zeroes the shared
 * sum before the reduction, with no `omp single` (WRONG). */
void scalar_race(int n, const double *restrict a, const double *restrict b, int rounds,
                 double *restrict out);

#endif
