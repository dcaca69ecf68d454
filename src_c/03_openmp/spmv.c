/* y = A x with A = D + the off-diagonal part, in three storage formats (lecture 03). Every loop over
 * rows (or slices of rows) is shared among the threads with schedule(static). */
#include <stddef.h>
#include "course.h"

/* [offdiag_crs_matvec]
 * CRS: row i holds amat[index[i] .. index[i+1]-1] in the columns item[same range]. */
void offdiag_crs_matvec(int n, const double *restrict d, const int *restrict index,
                        const int *restrict item, const double *restrict amat,
                        const double *restrict x, double *restrict y)
{
#pragma omp parallel for schedule(static)
    for (int i = 0; i < n; i++) {
        double s = d[i] * x[i];
        for (int k = index[i]; k < index[i + 1]; k++)
            s += amat[k] * x[item[k]];
        y[i] = s;
    }
}
/* [offdiag_crs_matvec] */

/* [ell_matvec]
 * ELL: 6 entries per row (padding: coefficient 0), a fixed inner trip count. */
void ell_matvec(int n, const double *restrict d, const int *restrict item_ell,
                const double *restrict amat_ell, const double *restrict x, double *restrict y)
{
#pragma omp parallel for schedule(static)
    for (int i = 0; i < n; i++) {
        const int *restrict col = item_ell + 6 * (size_t)i;
        const double *restrict val = amat_ell + 6 * (size_t)i;
        double s = d[i] * x[i];
        for (int m = 0; m < 6; m++)
            s += val[m] * x[col[m]];
        y[i] = s;
    }
}
/* [ell_matvec] */

enum { SELL_BLOCK = 64 };       /* rows of a slice summed at once (a stack buffer) */

/* [sell_matvec]
 * SELL-C-sigma: slice k holds the sorted rows s = k C .. k C + C - 1, column-major: entry j of its
 * row r at slice_ptr[k] + j C + r. The inner loop runs over the rows of the slice (unit stride in
 * col and val: SIMD lanes), the outer one over the slice's width. */
void sell_matvec(int n, int chunk, const double *restrict d, const int *restrict perm,
                 const int *restrict slice_ptr, const int *restrict col,
                 const double *restrict val, const double *restrict x, double *restrict y)
{
    const int n_slices = (n + chunk - 1) / chunk;
#pragma omp parallel for schedule(static)
    for (int k = 0; k < n_slices; k++) {
        const int first = k * chunk, rows = n - first < chunk ? n - first : chunk;
        const int width = (slice_ptr[k + 1] - slice_ptr[k]) / chunk;
        for (int r0 = 0; r0 < rows; r0 += SELL_BLOCK) {
            const int nr = rows - r0 < SELL_BLOCK ? rows - r0 : SELL_BLOCK;
            double sum[SELL_BLOCK];
            for (int r = 0; r < nr; r++) {
                const int row = perm[first + r0 + r];
                sum[r] = d[row] * x[row];
            }
            for (int j = 0; j < width; j++) {
                const long start = slice_ptr[k] + (long)j * chunk + r0;
                for (int r = 0; r < nr; r++)
                    sum[r] += val[start + r] * x[col[start + r]];
            }
            for (int r = 0; r < nr; r++)
                y[perm[first + r0 + r]] = sum[r];
        }
    }
}
/* [sell_matvec] */
