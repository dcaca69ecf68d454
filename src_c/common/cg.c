/* Conjugate gradients with a diagonal (Jacobi) preconditioner for a symmetric positive definite
 * CRS matrix. Stops when ||b - A x|| <= tol * ||b|| (the recursive residual). */
#include <math.h>
#include <stdlib.h>
#include "course.h"

/* [dot_reduction]
 * a . b, correct with any number of threads: every thread sums its share into a private copy of s
 * (starting from 0); at the end of the loop the runtime adds the private copies into the shared s,
 * one thread at a time. The dot product of every CG in the course. */
double dot_reduction(int n, const double *restrict a, const double *restrict b)
{
    double s = 0.0;
#pragma omp parallel for schedule(static) reduction(+ : s)
    for (int i = 0; i < n; i++)
        s += a[i] * b[i];
    return s;
}
/* [dot_reduction] */

/* [pcg_jacobi]
 * Returns the number of iterations; *relres is the final ||r|| / ||b||. x holds the initial guess
 * on entry and the solution on exit. Returns -1 if the work vectors
 * cannot be allocated. */
int pcg_jacobi(int n, const int *restrict row_ptr, const int *restrict col_idx,
               const double *restrict val, const double *restrict b, double *restrict x,
               double tol, int max_iter, double *restrict relres)
{
    double *work = malloc(5 * (size_t)n * sizeof *work);
    if (work == NULL)
        return -1;
    double *r = work, *z = r + n, *p = z + n, *q = p + n, *dinv = q + n;

    for (int i = 0; i < n; i++) {                        /* Jacobi preconditioner: 1 / a_ii */
        dinv[i] = 1.0;
        for (int k = row_ptr[i]; k < row_ptr[i + 1]; k++)
            if (col_idx[k] == i)
                dinv[i] = 1.0 / val[k];
    }

    crs_matvec(n, row_ptr, col_idx, val, x, q);          /* r = b - A x */
    for (int i = 0; i < n; i++)
        r[i] = b[i] - q[i];
    double bnorm = sqrt(dot_reduction(n, b, b));
    if (bnorm == 0.0)
        bnorm = 1.0;

    double rho_old = 1.0;
    int iter = 0;
    *relres = sqrt(dot_reduction(n, r, r)) / bnorm;
    while (*relres > tol && iter < max_iter) {
        for (int i = 0; i < n; i++)                      /* z = M^-1 r */
            z[i] = dinv[i] * r[i];
        double rho = dot_reduction(n, r, z);
        double beta = (iter == 0) ? 0.0 : rho / rho_old;
        for (int i = 0; i < n; i++)                      /* p = z + beta p (p = z at first) */
            p[i] = (iter == 0) ? z[i] : z[i] + beta * p[i];
        crs_matvec(n, row_ptr, col_idx, val, p, q);      /* q = A p */
        double alpha = rho / dot_reduction(n, p, q);
        for (int i = 0; i < n; i++) {
            x[i] += alpha * p[i];
            r[i] -= alpha * q[i];
        }
        rho_old = rho;
        iter++;
        *relres = sqrt(dot_reduction(n, r, r)) / bnorm;
    }
    free(work);
    return iter;
}
/* [pcg_jacobi] */
