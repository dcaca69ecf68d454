/* Lecture 04_iccg: orderings for the colored substitution, IC(0) and ICCG (libcourse_c; the
 * Fortran twins in libcourse_fortran have the same names and arguments, 1-based).
 *
 * A symmetric matrix is split as in Nakajima's codes: its diagonal diag[n], the strict lower part
 * (lower_ptr[n+1], lower_col, lower_val) and the strict upper part (upper_ptr, upper_col,
 * upper_val) in CRS, columns increasing. A graph is the off-diagonal pattern (ptr[n+1], adj).
 * Colors: the unknowns are numbered color by color, color c = rows color_ptr[c] ..
 * color_ptr[c+1]-1, no two unknowns of a color coupled; ncolor == 1 means the sequential sweep. */
#ifndef COURSE_ICCG_H
#define COURSE_ICCG_H

/* ---- ordering.c ------------------------------------------------------------------------------ */
/* breadth-first (Cuthill-McKee) numbering: order[k] = k-th unknown visited, level[v] its level */
void cuthill_mckee(int n, const int *restrict ptr, const int *restrict adj, int *restrict order,
                   int *restrict level);
/* level[v] = 1 + the largest level of a neighbour numbered before v in `order` (0 if none) */
void wavefronts(int n, const int *restrict ptr, const int *restrict adj,
                const int *restrict order, int *restrict level);
/* greedy multicoloring with the target of K colors; returns the number of colors (>= K) */
int multicolor(int n, const int *restrict ptr, const int *restrict adj, int target_colors,
               int *restrict color);
/* CM-RCM: level mod K, or the next free color; returns the number of colors, -1 out of memory */
int cyclic_colors(int n, const int *restrict ptr, const int *restrict adj,
                  const int *restrict order, const int *restrict level, int target_colors,
                  int *restrict color);
/* perm: the unknowns sorted by color, in the order `within` inside a color; color_ptr */
void color_permutation(int n, int ncolor, const int *restrict color, const int *restrict within,
                       int *restrict perm, int *restrict color_ptr);

/* ---- ic0.c ----------------------------------------------------------------------------------- */
/* IC(0): fac_lower (pattern of the lower part) and fac_diag; 0, or -(i+1) if pivot i <= 0 */
int ic0_factor(int n, const int *restrict lower_ptr, const int *restrict lower_col,
               const double *restrict lower_val, const double *restrict diag,
               double *restrict fac_lower, double *restrict fac_diag);
/* fac_upper = fac_lower on the transposed pattern (upper_ptr); 0, or -1 out of memory */
int ic0_transpose(int n, const int *restrict lower_ptr, const int *restrict lower_col,
                  const double *restrict fac_lower, const int *restrict upper_ptr,
                  double *restrict fac_upper);
/* the sweeps, with orphaned `omp for` loops (inside a parallel region they share out the rows of
 * a color; outside one, one thread does them): z = (D + L)^-1 r, then z = (I + D^-1 L^T)^-1 z,
 * with inv_diag = 1 / fac_diag */
void ic0_forward(int n, int ncolor, const int *restrict color_ptr, const int *restrict lower_ptr,
                 const int *restrict lower_col, const double *restrict fac_lower,
                 const double *restrict inv_diag, const double *restrict r, double *restrict z);
void ic0_backward(int n, int ncolor, const int *restrict color_ptr, const int *restrict upper_ptr,
                  const int *restrict upper_col, const double *restrict fac_upper,
                  const double *restrict inv_diag, double *restrict z);
/* z = M^-1 r in a parallel region of its own; 0, or -1 out of memory */
int ic0_apply(int n, int ncolor, const int *restrict color_ptr, const int *restrict lower_ptr,
              const int *restrict lower_col, const double *restrict fac_lower,
              const int *restrict upper_ptr, const int *restrict upper_col,
              const double *restrict fac_upper, const double *restrict fac_diag,
              const double *restrict r, double *restrict z);
/* y = (D + L_A + U_A) x, orphaned `omp for` */
void split_matvec(int n, const double *restrict diag, const int *restrict lower_ptr,
                  const int *restrict lower_col, const double *restrict lower_val,
                  const int *restrict upper_ptr, const int *restrict upper_col,
                  const double *restrict upper_val, const double *restrict x, double *restrict y);
/* ICCG, one parallel region for the whole solve; returns the iterations, -1 out of memory */
int iccg(int n, int ncolor, const int *restrict color_ptr, const double *restrict diag,
         const int *restrict lower_ptr, const int *restrict lower_col,
         const double *restrict lower_val, const int *restrict upper_ptr,
         const int *restrict upper_col, const double *restrict upper_val,
         const double *restrict fac_diag, const double *restrict fac_lower,
         const double *restrict fac_upper, const double *restrict b, double *restrict x,
         double eps, int max_iter, double *restrict relres);

#endif
