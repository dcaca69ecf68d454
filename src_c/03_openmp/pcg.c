/* The OpenMP ladder of lecture 03: diagonal-scaled conjugate gradients (z = r / d) for the
 * finite-volume Poisson matrix, four versions of the same algorithm.
 *
 *   v0  CRS; one `omp parallel for` per vector loop, `reduction` for the dot products; the work
 *       array is zeroed by a serial loop, so all its pages live where the master thread runs.
 *   v1  v0 with the work array zeroed in parallel, same static schedule as the solver's loops:
 *       first touch puts each thread's part of r, z, p, q in its own NUMA node's memory.
 *   v2  v1 with the matrix in ELL: 6 entries per row, a fixed inner trip count.
 *   v3  v2 in ONE parallel region for the whole solve: `omp for` loops inside it (their implied
 *       barriers order the steps), dot products by `reduction`, and every other shared scalar
 *       (alpha, beta, rho_old, the residual, the iteration count) written by one thread in an
 *       `omp single`; the barrier at its end publishes the value to all the threads.
 *
 * All stop when ||r|| / ||b|| <= eps (or after max_iter iterations) and return the iterations, or
 * -1 if the work array cannot be allocated; x holds the initial guess on entry. Each iteration
 * performs the same floating-point operations in every version, so with the same number of threads
 * the results agree (with one thread, bit for bit). */
#include <math.h>
#include <stdlib.h>
#include "course.h"

/* [pcg_v0] */
int pcg_v0(int n, const double *restrict d, const int *restrict index, const int *restrict item,
           const double *restrict amat, const double *restrict b, double *restrict x,
           double eps, int max_iter, double *restrict relres)
{
    double *w = malloc(4 * (size_t)n * sizeof *w);
    if (w == NULL)
        return -1;
    double *r = w, *z = r + n, *p = z + n, *q = p + n;
    for (int i = 0; i < n; i++)                  /* serial: thread 0 touches every page first */
        r[i] = z[i] = p[i] = q[i] = 0.0;

    offdiag_crs_matvec(n, d, index, item, amat, x, q);          /* r = b - A x */
#pragma omp parallel for schedule(static)
    for (int i = 0; i < n; i++)
        r[i] = b[i] - q[i];
    double bnorm = sqrt(dot_reduction(n, b, b));
    if (bnorm == 0.0)
        bnorm = 1.0;
    double res = sqrt(dot_reduction(n, r, r)) / bnorm, rho_old = 1.0;
    int iter = 0;
    while (res > eps && iter < max_iter) {
#pragma omp parallel for schedule(static)
        for (int i = 0; i < n; i++)                             /* z = D^-1 r */
            z[i] = r[i] / d[i];
        const double rho = dot_reduction(n, r, z);
        const double beta = iter == 0 ? 0.0 : rho / rho_old;
#pragma omp parallel for schedule(static)
        for (int i = 0; i < n; i++)                             /* p = z + beta p (p = 0 at first) */
            p[i] = z[i] + beta * p[i];
        offdiag_crs_matvec(n, d, index, item, amat, p, q);      /* q = A p */
        const double alpha = rho / dot_reduction(n, p, q);
#pragma omp parallel for schedule(static)
        for (int i = 0; i < n; i++) {
            x[i] += alpha * p[i];
            r[i] -= alpha * q[i];
        }
        rho_old = rho;
        iter++;
        res = sqrt(dot_reduction(n, r, r)) / bnorm;
    }
    *relres = res;
    free(w);
    return iter;
}
/* [pcg_v0] */

/* [pcg_v1] */
int pcg_v1(int n, const double *restrict d, const int *restrict index, const int *restrict item,
           const double *restrict amat, const double *restrict b, double *restrict x,
           double eps, int max_iter, double *restrict relres)
{
    double *w = malloc(4 * (size_t)n * sizeof *w);
    if (w == NULL)
        return -1;
    double *r = w, *z = r + n, *p = z + n, *q = p + n;
#pragma omp parallel for schedule(static)
    for (int i = 0; i < n; i++)                  /* first touch by the thread that will use i */
        r[i] = z[i] = p[i] = q[i] = 0.0;

    offdiag_crs_matvec(n, d, index, item, amat, x, q);          /* r = b - A x */
#pragma omp parallel for schedule(static)
    for (int i = 0; i < n; i++)
        r[i] = b[i] - q[i];
    double bnorm = sqrt(dot_reduction(n, b, b));
    if (bnorm == 0.0)
        bnorm = 1.0;
    double res = sqrt(dot_reduction(n, r, r)) / bnorm, rho_old = 1.0;
    int iter = 0;
    while (res > eps && iter < max_iter) {
#pragma omp parallel for schedule(static)
        for (int i = 0; i < n; i++)                             /* z = D^-1 r */
            z[i] = r[i] / d[i];
        const double rho = dot_reduction(n, r, z);
        const double beta = iter == 0 ? 0.0 : rho / rho_old;
#pragma omp parallel for schedule(static)
        for (int i = 0; i < n; i++)                             /* p = z + beta p (p = 0 at first) */
            p[i] = z[i] + beta * p[i];
        offdiag_crs_matvec(n, d, index, item, amat, p, q);      /* q = A p */
        const double alpha = rho / dot_reduction(n, p, q);
#pragma omp parallel for schedule(static)
        for (int i = 0; i < n; i++) {
            x[i] += alpha * p[i];
            r[i] -= alpha * q[i];
        }
        rho_old = rho;
        iter++;
        res = sqrt(dot_reduction(n, r, r)) / bnorm;
    }
    *relres = res;
    free(w);
    return iter;
}
/* [pcg_v1] */

/* [pcg_v2] */
int pcg_v2(int n, const double *restrict d, const int *restrict item_ell,
           const double *restrict amat_ell, const double *restrict b, double *restrict x,
           double eps, int max_iter, double *restrict relres)
{
    double *w = malloc(4 * (size_t)n * sizeof *w);
    if (w == NULL)
        return -1;
    double *r = w, *z = r + n, *p = z + n, *q = p + n;
#pragma omp parallel for schedule(static)
    for (int i = 0; i < n; i++)                  /* first touch by the thread that will use i */
        r[i] = z[i] = p[i] = q[i] = 0.0;

    ell_matvec(n, d, item_ell, amat_ell, x, q);                 /* r = b - A x */
#pragma omp parallel for schedule(static)
    for (int i = 0; i < n; i++)
        r[i] = b[i] - q[i];
    double bnorm = sqrt(dot_reduction(n, b, b));
    if (bnorm == 0.0)
        bnorm = 1.0;
    double res = sqrt(dot_reduction(n, r, r)) / bnorm, rho_old = 1.0;
    int iter = 0;
    while (res > eps && iter < max_iter) {
#pragma omp parallel for schedule(static)
        for (int i = 0; i < n; i++)                             /* z = D^-1 r */
            z[i] = r[i] / d[i];
        const double rho = dot_reduction(n, r, z);
        const double beta = iter == 0 ? 0.0 : rho / rho_old;
#pragma omp parallel for schedule(static)
        for (int i = 0; i < n; i++)                             /* p = z + beta p (p = 0 at first) */
            p[i] = z[i] + beta * p[i];
        ell_matvec(n, d, item_ell, amat_ell, p, q);             /* q = A p */
        const double alpha = rho / dot_reduction(n, p, q);
#pragma omp parallel for schedule(static)
        for (int i = 0; i < n; i++) {
            x[i] += alpha * p[i];
            r[i] -= alpha * q[i];
        }
        rho_old = rho;
        iter++;
        res = sqrt(dot_reduction(n, r, r)) / bnorm;
    }
    *relres = res;
    free(w);
    return iter;
}
/* [pcg_v2] */

/* [pcg_v3]
 * Shared scalars and who writes them: bb, rr, rho, pq are reduction targets (the runtime combines
 * the threads' partial sums into them; one thread zeroes each beforehand, with a barrier in
 * between); bnorm, res, beta, alpha, rho_old, iter are written in `omp single` only. Every thread
 * reads res and iter in the loop condition; the next write to them comes after several barriers. */
int pcg_v3(int n, const double *restrict d, const int *restrict item_ell,
           const double *restrict amat_ell, const double *restrict b, double *restrict x,
           double eps, int max_iter, double *restrict relres)
{
    double *w = malloc(4 * (size_t)n * sizeof *w);
    if (w == NULL)
        return -1;
    double *r = w, *z = r + n, *p = z + n, *q = p + n;
    double bb = 0.0, rr = 0.0, rho = 0.0, pq = 0.0;
    double bnorm = 1.0, res = 0.0, rho_old = 1.0, alpha = 0.0, beta = 0.0;
    int iter = 0;
#pragma omp parallel
    {
#pragma omp for schedule(static)
        for (int i = 0; i < n; i++)              /* first touch by the thread that will use i */
            r[i] = z[i] = p[i] = q[i] = 0.0;
#pragma omp for schedule(static) reduction(+ : bb, rr)
        for (int i = 0; i < n; i++) {                           /* r = b - A x, b.b, r.r */
            const int *restrict col = item_ell + 6 * (size_t)i;
            const double *restrict val = amat_ell + 6 * (size_t)i;
            double s = d[i] * x[i];
            for (int m = 0; m < 6; m++)
                s += val[m] * x[col[m]];
            r[i] = b[i] - s;
            bb += b[i] * b[i];
            rr += r[i] * r[i];
        }
#pragma omp single
        {
            bnorm = sqrt(bb);
            if (bnorm == 0.0)
                bnorm = 1.0;
            res = sqrt(rr) / bnorm;
        }
        while (res > eps && iter < max_iter) {
#pragma omp for schedule(static) reduction(+ : rho)
            for (int i = 0; i < n; i++) {                       /* z = D^-1 r, rho = r.z */
                z[i] = r[i] / d[i];
                rho += r[i] * z[i];
            }
#pragma omp single
            {
                beta = iter == 0 ? 0.0 : rho / rho_old;
                pq = 0.0;
            }
#pragma omp for schedule(static)
            for (int i = 0; i < n; i++)                         /* p = z + beta p (p = 0 at first) */
                p[i] = z[i] + beta * p[i];
#pragma omp for schedule(static) reduction(+ : pq)
            for (int i = 0; i < n; i++) {                       /* q = A p, pq = p.q */
                const int *restrict col = item_ell + 6 * (size_t)i;
                const double *restrict val = amat_ell + 6 * (size_t)i;
                double s = d[i] * p[i];
                for (int m = 0; m < 6; m++)
                    s += val[m] * p[col[m]];
                q[i] = s;
                pq += p[i] * s;
            }
#pragma omp single
            {
                alpha = rho / pq;
                rr = 0.0;
            }
#pragma omp for schedule(static) reduction(+ : rr)
            for (int i = 0; i < n; i++) {                       /* x, r updated, rr = r.r */
                x[i] += alpha * p[i];
                r[i] -= alpha * q[i];
                rr += r[i] * r[i];
            }
#pragma omp single
            {
                rho_old = rho;
                rho = 0.0;
                iter++;
                res = sqrt(rr) / bnorm;
            }
        }
    }
    *relres = res;
    free(w);
    return iter;
}
/* [pcg_v3] */
