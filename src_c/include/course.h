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

/* ---- common/cg.c --------------------------------------------------------------------------- */
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

#endif
