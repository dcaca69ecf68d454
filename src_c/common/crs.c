/* Sparse matrix-vector product in CRS storage. */
#include "course.h"

/* [crs_matvec] */
void crs_matvec(int n, const int *restrict row_ptr, const int *restrict col_idx,
                const double *restrict val, const double *restrict x, double *restrict y)
{
#pragma omp parallel for schedule(static)
    for (int i = 0; i < n; i++) {
        double sum = 0.0;
        for (int k = row_ptr[i]; k < row_ptr[i + 1]; k++)
            sum += val[k] * x[col_idx[k]];
        y[i] = sum;
    }
}
/* [crs_matvec] */

/* [crs_find]
 * Position k of the entry (row, col) in col_idx and val, or -1 if the pattern lacks it: a search
 * along row `row` (assembly uses it to find where an element entry goes). */
int crs_find(const int *restrict row_ptr, const int *restrict col_idx, int row, int col)
{
    for (int k = row_ptr[row]; k < row_ptr[row + 1]; k++)
        if (col_idx[k] == col)
            return k;
    return -1;
}
/* [crs_find] */

/* [crs_dirichlet]
 * Prescribed values T_i = g[i] on the rows with fixed[i] != 0. A fixed row becomes a row of the
 * identity with rhs_i = g_i. In a free row the known terms a_ij g_j of the fixed columns j move to
 * the right-hand side and a_ij is cleared: clearing the columns as well as the rows keeps a
 * symmetric matrix symmetric (and positive definite), so CG still applies. Every row only touches its own
 * entries, so the rows are shared among threads. */
void crs_dirichlet(int n, const int *restrict fixed, const double *restrict g,
                   const int *restrict row_ptr, const int *restrict col_idx,
                   double *restrict val, double *restrict rhs)
{
#pragma omp parallel for schedule(static)
    for (int i = 0; i < n; i++) {
        if (fixed[i] != 0) {
            for (int k = row_ptr[i]; k < row_ptr[i + 1]; k++)
                val[k] = (col_idx[k] == i) ? 1.0 : 0.0;
            rhs[i] = g[i];
        } else {
            for (int k = row_ptr[i]; k < row_ptr[i + 1]; k++) {
                int j = col_idx[k];
                if (fixed[j] != 0) {
                    rhs[i] -= val[k] * g[j];
                    val[k] = 0.0;
                }
            }
        }
    }
}
/* [crs_dirichlet] */
