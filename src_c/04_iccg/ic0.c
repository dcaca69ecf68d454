/* IC(0) and ICCG of lecture 04_iccg (twin: src_fortran/04_iccg/ic0.f90). The root-free IC(0)
 * M = (D + L) D^-1 (D + L^T) keeps the pattern of A's strict lower part (no fill-in):
 *
 *     l_ij = a_ij - sum_{k < j} l_ik l_jk / d_k      (k coupled to both i and j)
 *     d_i  = a_ii - sum_{j < i} l_ij^2 / d_j
 *
 * For the 7-point stencil no two neighbours of a cell are coupled (the grid has no triangles),
 * so l_ij = a_ij and only the diagonal d changes; the 27-point FEM matrix has triangles.
 *
 * The substitutions go color by color (course/ordering.py): the rows of one color are not coupled,
 * so an `omp for` shares them out, and its implied barrier ends the color. With one color the
 * sweep is sequential (`omp single`: the natural ordering). A row's arithmetic does not depend on
 * the threads, so z is bitwise the same for any number of them.
 *
 * In the sequential sweep row i waits for row i-1 (its neighbour along x): the time of a row is
 * the latency of the operations from z[i-1] to z[i], not the bytes it reads. So the sweeps
 * multiply by 1/d (computed once) instead of dividing by d (a division takes several times as
 * long as a multiplication), and the product with the row just computed is the last one added
 * (the others do not wait for it). */
#include <math.h>
#include <stdlib.h>
#include "iccg.h"

/* [ic0_factor] */
int ic0_factor(int n, const int *restrict lower_ptr, const int *restrict lower_col,
               const double *restrict lower_val, const double *restrict diag,
               double *restrict fac_lower, double *restrict fac_diag)
{
    for (int i = 0; i < n; i++) {
        for (int p = lower_ptr[i]; p < lower_ptr[i + 1]; p++) {
            const int j = lower_col[p];
            double s = lower_val[p];
            int q = lower_ptr[j];             /* k < j coupled to i and j: merge rows i and j */
            for (int pk = lower_ptr[i]; pk < p; pk++) {
                const int k = lower_col[pk];
                while (q < lower_ptr[j + 1] && lower_col[q] < k)
                    q++;
                if (q < lower_ptr[j + 1] && lower_col[q] == k)
                    s -= fac_lower[pk] * fac_lower[q] / fac_diag[k];
            }
            fac_lower[p] = s;
        }
        double s = diag[i];
        for (int p = lower_ptr[i]; p < lower_ptr[i + 1]; p++)
            s -= fac_lower[p] * fac_lower[p] / fac_diag[lower_col[p]];
        if (!(s > 0.0))
            return -(i + 1);                  /* breakdown: not an M-matrix / not SPD */
        fac_diag[i] = s;
    }
    return 0;
}
/* [ic0_factor] */

int ic0_transpose(int n, const int *restrict lower_ptr, const int *restrict lower_col,
                  const double *restrict fac_lower, const int *restrict upper_ptr,
                  double *restrict fac_upper)
{
    int *next = malloc(((size_t)n + 1) * sizeof *next);
    if (next == NULL)
        return -1;
    for (int i = 0; i < n; i++)
        next[i] = upper_ptr[i];
    for (int i = 0; i < n; i++)               /* rising i: every upper row fills in order */
        for (int p = lower_ptr[i]; p < lower_ptr[i + 1]; p++)
            fac_upper[next[lower_col[p]]++] = fac_lower[p];
    free(next);
    return 0;
}

/* [ic0_forward] */
void ic0_forward(int n, int ncolor, const int *restrict color_ptr, const int *restrict lower_ptr,
                 const int *restrict lower_col, const double *restrict fac_lower,
                 const double *restrict inv_diag, const double *restrict r, double *restrict z)
{
    if (ncolor == 1) {                        /* one color: the sequential sweep */
#pragma omp single
        for (int i = 0; i < n; i++) {
            double s = r[i];
            for (int k = lower_ptr[i]; k < lower_ptr[i + 1]; k++)
                s -= fac_lower[k] * z[lower_col[k]];      /* z[i-1], just written, comes last */
            z[i] = s * inv_diag[i];
        }
        return;
    }
    for (int c = 0; c < ncolor; c++) {        /* rows of a color: independent */
#pragma omp for schedule(static)
        for (int i = color_ptr[c]; i < color_ptr[c + 1]; i++) {
            double s = r[i];
            for (int k = lower_ptr[i]; k < lower_ptr[i + 1]; k++)
                s -= fac_lower[k] * z[lower_col[k]];      /* z of earlier colors only */
            z[i] = s * inv_diag[i];
        }                                     /* implied barrier: the color is done */
    }
}
/* [ic0_forward] */

/* [ic0_backward] */
void ic0_backward(int n, int ncolor, const int *restrict color_ptr, const int *restrict upper_ptr,
                  const int *restrict upper_col, const double *restrict fac_upper,
                  const double *restrict inv_diag, double *restrict z)
{
    if (ncolor == 1) {
#pragma omp single
        for (int i = n - 1; i >= 0; i--) {
            double s = 0.0;
            for (int k = upper_ptr[i + 1] - 1; k >= upper_ptr[i]; k--)
                s += fac_upper[k] * z[upper_col[k]];      /* columns falling: z[i+1] last */
            z[i] -= s * inv_diag[i];
        }
        return;
    }
    for (int c = ncolor - 1; c >= 0; c--) {   /* the colors backwards */
#pragma omp for schedule(static)
        for (int i = color_ptr[c]; i < color_ptr[c + 1]; i++) {
            double s = 0.0;
            for (int k = upper_ptr[i + 1] - 1; k >= upper_ptr[i]; k--)
                s += fac_upper[k] * z[upper_col[k]];      /* z of later colors only */
            z[i] -= s * inv_diag[i];
        }
    }
}
/* [ic0_backward] */

int ic0_apply(int n, int ncolor, const int *restrict color_ptr, const int *restrict lower_ptr,
              const int *restrict lower_col, const double *restrict fac_lower,
              const int *restrict upper_ptr, const int *restrict upper_col,
              const double *restrict fac_upper, const double *restrict fac_diag,
              const double *restrict r, double *restrict z)
{
    double *inv_diag = malloc(((size_t)n + 1) * sizeof *inv_diag);
    if (inv_diag == NULL)
        return -1;
#pragma omp parallel
    {
#pragma omp for schedule(static)
        for (int i = 0; i < n; i++)
            inv_diag[i] = 1.0 / fac_diag[i];
        ic0_forward(n, ncolor, color_ptr, lower_ptr, lower_col, fac_lower, inv_diag, r, z);
        ic0_backward(n, ncolor, color_ptr, upper_ptr, upper_col, fac_upper, inv_diag, z);
    }
    free(inv_diag);
    return 0;
}

void split_matvec(int n, const double *restrict diag, const int *restrict lower_ptr,
                  const int *restrict lower_col, const double *restrict lower_val,
                  const int *restrict upper_ptr, const int *restrict upper_col,
                  const double *restrict upper_val, const double *restrict x, double *restrict y)
{
#pragma omp for schedule(static)
    for (int i = 0; i < n; i++) {
        double s = diag[i] * x[i];
        for (int k = lower_ptr[i]; k < lower_ptr[i + 1]; k++)
            s += lower_val[k] * x[lower_col[k]];
        for (int k = upper_ptr[i]; k < upper_ptr[i + 1]; k++)
            s += upper_val[k] * x[upper_col[k]];
        y[i] = s;
    }
}

/* [iccg] */
int iccg(int n, int ncolor, const int *restrict color_ptr, const double *restrict diag,
         const int *restrict lower_ptr, const int *restrict lower_col,
         const double *restrict lower_val, const int *restrict upper_ptr,
         const int *restrict upper_col, const double *restrict upper_val,
         const double *restrict fac_diag, const double *restrict fac_lower,
         const double *restrict fac_upper, const double *restrict b, double *restrict x,
         double eps, int max_iter, double *restrict relres)
{
    double *w = malloc(5 * ((size_t)n + 1) * sizeof *w);
    if (w == NULL)
        return -1;
    double *r = w, *z = r + n, *p = z + n, *q = p + n, *inv_diag = q + n;
    double bb = 0.0, rr = 0.0, rho = 0.0, rho_old = 1.0, pq = 0.0, bnorm = 1.0, res = 0.0;
    int iter = 0;
#pragma omp parallel
    {
#pragma omp for schedule(static)
        for (int i = 0; i < n; i++) {         /* first touch */
            r[i] = z[i] = p[i] = q[i] = 0.0;
            inv_diag[i] = 1.0 / fac_diag[i];
        }
        split_matvec(n, diag, lower_ptr, lower_col, lower_val, upper_ptr, upper_col, upper_val,
                     x, q);
#pragma omp for schedule(static) reduction(+ : bb, rr)
        for (int i = 0; i < n; i++) {         /* r = b - A x */
            r[i] = b[i] - q[i];
            bb += b[i] * b[i];
            rr += r[i] * r[i];
        }
#pragma omp single
        {
            bnorm = bb > 0.0 ? sqrt(bb) : 1.0;
            res = sqrt(rr) / bnorm;
            rr = 0.0;
        }
        while (res > eps && iter < max_iter) {
            /* z = M^-1 r: 2 ncolor barriers */
            ic0_forward(n, ncolor, color_ptr, lower_ptr, lower_col, fac_lower, inv_diag, r, z);
            ic0_backward(n, ncolor, color_ptr, upper_ptr, upper_col, fac_upper, inv_diag, z);
#pragma omp for schedule(static) reduction(+ : rho)
            for (int i = 0; i < n; i++)
                rho += r[i] * z[i];
            const double beta = iter == 0 ? 0.0 : rho / rho_old;
#pragma omp for schedule(static)
            for (int i = 0; i < n; i++)
                p[i] = z[i] + beta * p[i];
            split_matvec(n, diag, lower_ptr, lower_col, lower_val, upper_ptr, upper_col,
                         upper_val, p, q);
#pragma omp for schedule(static) reduction(+ : pq)
            for (int i = 0; i < n; i++)
                pq += p[i] * q[i];
            const double alpha = rho / pq;
#pragma omp for schedule(static) reduction(+ : rr)
            for (int i = 0; i < n; i++) {
                x[i] += alpha * p[i];
                r[i] -= alpha * q[i];
                rr += r[i] * r[i];
            }
#pragma omp single
            {                                 /* every thread has used rho, pq: reset them */
                res = sqrt(rr) / bnorm;
                rho_old = rho;
                rho = pq = rr = 0.0;
                iter++;
            }
        }
    }
    *relres = res;
    free(w);
    return iter;
}
/* [iccg] */
