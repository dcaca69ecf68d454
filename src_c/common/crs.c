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
