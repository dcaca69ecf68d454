/* STREAM-like kernels (after McCalpin's STREAM benchmark) to measure the memory bandwidth that the
 * sparse kernels can hope for. Every loop is split among the threads with schedule(static), so the
 * thread that initialises a[i] (and thus places its page in its NUMA node's memory, "first touch")
 * is the one that later reads and writes it. */
#include "course.h"

/* [stream_init]
 * a = 1, b = 2, c = 0.5, written in parallel: the first touch decides where the pages live. */
void stream_init(int n, double *restrict a, double *restrict b, double *restrict c)
{
#pragma omp parallel for schedule(static)
    for (int i = 0; i < n; i++) {
        a[i] = 1.0;
        b[i] = 2.0;
        c[i] = 0.5;
    }
}
/* [stream_init] */

/* [stream_copy]
 * a = b: 16 bytes moved per element (one read, one write). */
void stream_copy(int n, const double *restrict b, double *restrict a)
{
#pragma omp parallel for schedule(static)
    for (int i = 0; i < n; i++)
        a[i] = b[i];
}
/* [stream_copy] */

/* [stream_triad]
 * a = b + scalar c: 24 bytes moved and 2 flops per element. */
void stream_triad(int n, double scalar, const double *restrict b, const double *restrict c,
                  double *restrict a)
{
#pragma omp parallel for schedule(static)
    for (int i = 0; i < n; i++)
        a[i] = b[i] + scalar * c[i];
}
/* [stream_triad] */

/* [stream_sum]
 * s = a[0] + ... + a[n-1]: 8 bytes read and nothing written per element, the rate of loads alone
 * that a read-dominated kernel (the SpMV) can reach. The array is read as four streams at once
 * (its quarters), as the SpMV reads several arrays: one stream alone leaves a core's prefetchers
 * half idle and measures less than the memory gives. The threads share blocks of SUM_BLOCK
 * entries; inside a block `simd` lets the compiler reorder the additions into vector lanes (as
 * reduction(+ : s) does among the threads), so the loop vectorises without -ffast-math. (Blocks,
 * not one `parallel for simd`: clang cannot vectorise that combined reduction loop.) */
enum { SUM_BLOCK = 2048 };

double stream_sum(int n, const double *restrict a)
{
    const int q = n / 4;
    double s = 0.0;
#pragma omp parallel for schedule(static) reduction(+ : s)
    for (int start = 0; start < q; start += SUM_BLOCK) {
        const int end = start + SUM_BLOCK < q ? start + SUM_BLOCK : q;
        double block = 0.0;
#pragma omp simd reduction(+ : block)
        for (int i = start; i < end; i++)
            block += (a[i] + a[i + q]) + (a[i + 2 * q] + a[i + 3 * q]);
        s += block;
    }
    for (int i = 4 * q; i < n; i++)     /* the last n mod 4 entries */
        s += a[i];
    return s;
}
/* [stream_sum] */
