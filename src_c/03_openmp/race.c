/* Data races on purpose (lecture 03_openmp, part c): kernels that show what goes wrong when several
 * threads update one shared variable without a reduction or an `omp single`.
 *
 *   dot_racy       WRONG ON PURPOSE: `omp parallel for` adding into a shared s, no reduction.
 *   scalar_race    WRONG ON PURPOSE: one parallel region computing a dot product `rounds` times;
 *                  every thread zeroes the shared s before each reduction loop, with no
 *                  `omp single` (the pattern of the printed v3 of the seed course).
 *
 * The correct loop, with `reduction(+ : s)`, is dot_reduction in common/cg.c: every CG of
 * the course uses it.
 *
 * A race does not show on every run: how often these kernels go wrong depends on the machine, the
 * threads, the length of the vectors and luck. With one thread they are all correct. */
#include "course.h"

/* [dot_racy]
 * WRONG ON PURPOSE: every thread reads, adds to and writes the shared s with no ordering between
 * the threads, so an update made by one thread can be overwritten by another (a lost update). */
double dot_racy(int n, const double *restrict a, const double *restrict b)
{
    double s = 0.0;
#pragma omp parallel for schedule(static) shared(s)
    for (int i = 0; i < n; i++)
        s += a[i] * b[i];                        /* load s, add, store s: not atomic */
    return s;
}
/* [dot_racy] */

/* [scalar_race]
 * WRONG ON PURPOSE: out[k] should be a . b for every round k. The reduction itself is correct, but
 * EVERY thread executes `s = 0.0`. A thread that starts round k late may zero s after a faster
 * thread has already added its partial sum into it: that part of the sum is lost. The barrier at
 * the end of a round stands for the other loops of a CG iteration (their implied barriers), as in
 * the seed's v3. The fix: zero s in an `omp single` (its implied barrier keeps every thread from
 * adding before s is zero), as pcg_v3 does. */
void scalar_race(int n, const double *restrict a, const double *restrict b, int rounds,
                 double *restrict out)
{
    double s = 0.0;
#pragma omp parallel shared(s)
    for (int k = 0; k < rounds; k++) {
        s = 0.0;                                 /* every thread writes the shared s: RACE */
#pragma omp for schedule(static) reduction(+ : s)
        for (int i = 0; i < n; i++)
            s += a[i] * b[i];
        out[k] = s;                              /* every thread writes the same value here */
#pragma omp barrier
    }
}
/* [scalar_race] */
