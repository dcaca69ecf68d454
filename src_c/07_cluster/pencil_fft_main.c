/* pencil_fft: the pencil-decomposed 3-D FFT of lecture 07_cluster (pencil_fft.c) on a field whose
 * spectrum is known, timed.
 *
 *   usage: mpiexec -n P pencil_fft_c N [P1 P2] [REPEAT]
 *
 * N points per side (N^3 complex values), P = P1 x P2 ranks (default: the squarest grid with
 * P1 >= P2), N divisible by P1 and by P2; REPEAT timed transforms (default 5) after one untimed.
 * The field is a sum of four Fourier modes, u = sum of c exp(2 pi i (kx x + ky y + kz z) / N)
 * with (kx, ky, kz, c) = (1, 0, 0, 1), (0, 2, 1, 0.5 - 0.25i), (3, 1, N-2, -0.75i),
 * (N-1, N-3, N-1, 0.25) (indices modulo N; course.parallel.fft.known_modes), so the forward
 * transform is N^3 c at those wave numbers and zero elsewhere. Rank 0 prints the grid and the
 * message sizes, the largest error of the spectrum relative to N^3, and the best time of the
 * REPEAT runs split into FFT, transposes (pack + unpack) and all-to-alls (each phase the slowest
 * rank's). Exit status, the same on every rank: 0, 1 error above 1e-10, 2 bad arguments or out of
 * memory (one line on stderr from rank 0). */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "input.h"
#include "pencil_fft.h"

#define PROG "pencil_fft_c"

enum { N_MODES = 4, DEFAULT_REPEAT = 5 };

typedef struct {
    int n, p1, p2, repeat;
} options;

typedef struct {
    int k[3];                /* kx, ky, kz */
    double complex c;
} mode;

/* the modes of the header comment, wave numbers reduced modulo n */
static void known_modes(int n, mode modes[N_MODES])
{
    const int k[N_MODES][3] = {{1, 0, 0}, {0, 2, 1}, {3, 1, n - 2}, {n - 1, n - 3, n - 1}};
    const double complex c[N_MODES] = {1.0, 0.5 - 0.25 * I, -0.75 * I, 0.25};
    for (int j = 0; j < N_MODES; j++) {
        for (int d = 0; d < 3; d++)
            modes[j].k[d] = ((k[j][d] % n) + n) % n;
        modes[j].c = c[j];
    }
}

/* ---- the command line ------------------------------------------------------------------------ */

/* a positive int, or 0 after one line from rank 0 naming the argument */
static int positive_arg(const char *word, const char *what, int rank)
{
    int value;
    if (input_word_int(word, &value) && value > 0)
        return value;
    if (rank == 0)
        fprintf(stderr, PROG ": argument '%s': %s must be a positive integer\n", word, what);
    return 0;
}

/* the squarest grid: p2 the largest divisor of size with p2^2 <= size */
static void process_grid(int size, int *p1, int *p2)
{
    *p2 = 1;
    for (int d = 1; (long)d * d <= size; d++)
        if (size % d == 0)
            *p2 = d;
    *p1 = size / *p2;
}

/* Every rank reads the same words and takes the same decision: returns 0, or 2 after one line
 * from rank 0. */
static int read_options(int argc, char **argv, int rank, int n_ranks, options *o)
{
    if (argc < 2 || argc > 5) {
        if (rank == 0)
            fprintf(stderr, "usage: %s N [P1 P2] [REPEAT]\n", argv[0]);
        return 2;
    }
    o->repeat = DEFAULT_REPEAT;
    process_grid(n_ranks, &o->p1, &o->p2);
    if ((o->n = positive_arg(argv[1], "N", rank)) == 0)
        return 2;
    if (argc >= 4 && ((o->p1 = positive_arg(argv[2], "P1", rank)) == 0
                      || (o->p2 = positive_arg(argv[3], "P2", rank)) == 0))
        return 2;
    if ((argc == 3 || argc == 5)
        && (o->repeat = positive_arg(argv[argc - 1], "REPEAT", rank)) == 0)
        return 2;
    const char *msg = NULL;
    char text[256];
    if ((long)o->p1 * o->p2 != n_ranks) {
        snprintf(text, sizeof text, "P1 x P2 = %d x %d = %ld, but the job has %d ranks", o->p1,
                 o->p2, (long)o->p1 * o->p2, n_ranks);
        msg = text;
    } else if (o->n % o->p1 != 0 || o->n % o->p2 != 0) {
        snprintf(text, sizeof text, "N = %d is not divisible by %s = %d (P1 x P2 = %d x %d): "
                 "every pencil needs N/%s points", o->n, o->n % o->p1 ? "P1" : "P2",
                 o->n % o->p1 ? o->p1 : o->p2, o->p1, o->p2, o->n % o->p1 ? "P1" : "P2");
        msg = text;
    } else if ((double)o->n * o->n * o->n / n_ranks > INT_MAX) {
        snprintf(text, sizeof text, "N = %d: N^3/P = %.0f elements per rank do not fit an int",
                 o->n, (double)o->n * o->n * o->n / n_ranks);
        msg = text;
    }
    if (msg != NULL) {
        if (rank == 0)
            fprintf(stderr, PROG ": %s\n", msg);
        return 2;
    }
    return 0;
}

/* ---- the field and its spectrum -------------------------------------------------------------- */

/* this rank's x-pencil a[z][y][x] of the modes (z in block r2, y in block r1); the phase reduced
 * modulo n in integers, so that it is exact at any n */
static void fill_field(int n, int p1, int p2, int r1, int r2, const mode *modes,
                       double complex *restrict a)
{
    const int by = n / p1, bz = n / p2;
    const double two_pi = 8.0 * atan(1.0);
    for (int zl = 0; zl < bz; zl++)
        for (int yl = 0; yl < by; yl++)
            for (int x = 0; x < n; x++) {
                const long y = (long)r1 * by + yl, z = (long)r2 * bz + zl;
                double complex u = 0.0;
                for (int j = 0; j < N_MODES; j++) {
                    const long phase = (modes[j].k[0] * x + modes[j].k[1] * y
                                        + modes[j].k[2] * z) % n;
                    u += modes[j].c * cexp(I * two_pi * (double)phase / n);
                }
                a[((long)zl * by + yl) * n + x] = u;
            }
}

/* the largest |c - exact| / n^3 over this rank's z-pencil c[ky][kx][kz] (ky in block r2, kx in
 * block r1): exact is n^3 times the sum of the coefficients of the modes at (kx, ky, kz) */
static double spectrum_error(int n, int p1, int p2, int r1, int r2, const mode *modes,
                             const double complex *restrict c)
{
    const int bx = n / p1, by = n / p2;
    const double n3 = (double)n * n * n;
    double err = 0.0;
    for (int yl = 0; yl < by; yl++)
        for (int xl = 0; xl < bx; xl++)
            for (int z = 0; z < n; z++) {
                const int k[3] = {r1 * bx + xl, r2 * by + yl, z};
                double complex exact = 0.0;
                for (int j = 0; j < N_MODES; j++)
                    if (modes[j].k[0] == k[0] && modes[j].k[1] == k[1] && modes[j].k[2] == k[2])
                        exact += n3 * modes[j].c;
                err = fmax(err, cabs(c[((long)yl * bx + xl) * n + z] - exact) / n3);
            }
    return err;
}

/* ---- the program ----------------------------------------------------------------------------- */

/* one untimed transform, then `repeat` timed ones from a fresh field; the phases of the fastest
 * (each the slowest rank's), and the error of the last spectrum */
static void run(const options *o, int rank, MPI_Comm comm1, MPI_Comm comm2,
                double complex *data, double complex *work, double best[N_PHASES + 1],
                double *err)
{
    const int r1 = rank % o->p1, r2 = rank / o->p1;
    mode modes[N_MODES];
    known_modes(o->n, modes);
    fftw_plan plan;
    pencil_fft_plan(o->n, (o->n / o->p1) * (o->n / o->p2), data, work, &plan);
    for (int k = 0; k <= N_PHASES; k++)
        best[k] = k == 0 ? INFINITY : 0.0;
    for (int rep = 0; rep <= o->repeat; rep++) {
        fill_field(o->n, o->p1, o->p2, r1, r2, modes, data);
        double phases[N_PHASES + 1] = {0.0, 0.0, 0.0, 0.0}, slowest[N_PHASES + 1];
        MPI_Barrier(MPI_COMM_WORLD);
        const double start = MPI_Wtime();
        pencil_fft_forward(o->n, o->p1, o->p2, comm1, comm2, plan, data, work, phases + 1);
        phases[0] = MPI_Wtime() - start;
        MPI_Allreduce(phases, slowest, N_PHASES + 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        if (rep > 0 && slowest[0] < best[0])
            memcpy(best, slowest, sizeof slowest);
    }
    fftw_destroy_plan(plan);
    const double mine = spectrum_error(o->n, o->p1, o->p2, r1, r2, modes, work);
    MPI_Allreduce(&mine, err, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
}

static void print_summary(const options *o, int n_ranks, const double best[N_PHASES + 1],
                          double err)
{
    const double n3 = (double)o->n * o->n * o->n;
    printf("pencil_fft (C): n = %d, %d ranks as p1 x p2 = %d x %d, m1 = %.0f, m2 = %.0f "
           "elements per message\n", o->n, n_ranks, o->p1, o->p2,
           n3 / ((double)o->p1 * o->p1 * o->p2), n3 / ((double)o->p1 * o->p2 * o->p2));
    printf("  max error %.3e (|spectrum - exact| / n^3, %d known modes)\n", err, N_MODES);
    printf("  best of %d: total %.3e s, fft %.3e s, transpose %.3e s, alltoall %.3e s\n",
           o->repeat, best[0], best[1 + PHASE_FFT], best[1 + PHASE_TRANSPOSE],
           best[1 + PHASE_ALLTOALL]);
    fflush(stdout);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, n_ranks;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n_ranks);
    options o;
    int status = read_options(argc, argv, rank, n_ranks, &o);
    if (status == 0) {
        const size_t count = (size_t)o.n * o.n * o.n / (size_t)n_ranks;
        double complex *data = fftw_malloc(count * sizeof *data);
        double complex *work = fftw_malloc(count * sizeof *work);
        int failed = data == NULL || work == NULL, any;
        MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
        if (any) {
            if (rank == 0)
                fprintf(stderr, PROG ": out of memory for N = %d on %d ranks\n", o.n, n_ranks);
            status = 2;
        } else {
            MPI_Comm comm1, comm2;
            pencil_communicators(o.p1, MPI_COMM_WORLD, &comm1, &comm2);
            double best[N_PHASES + 1] = {0.0, 0.0, 0.0, 0.0}, err = 0.0;
            run(&o, rank, comm1, comm2, data, work, best, &err);
            if (rank == 0)
                print_summary(&o, n_ranks, best, err);
            status = err <= 1e-10 ? 0 : 1;
            MPI_Comm_free(&comm1);
            MPI_Comm_free(&comm2);
        }
        fftw_free(data);
        fftw_free(work);
    }
    fftw_cleanup();
    MPI_Finalize();
    return status;
}
