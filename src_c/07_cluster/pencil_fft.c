/* Lecture 07_cluster, case study: the pencil-decomposed 3-D FFT of seed 003 (a DNS of
 * incompressible turbulence on SX-Aurora TSUBASA), with FFTW 3 and MPI_Alltoall.
 *
 * The n x n x n complex field is u[z][y][x] (x contiguous; Fortran's u(x, y, z)). The P = p1 p2
 * ranks form a grid, rank = r1 + p1 r2, and every rank holds one pencil, all n points along the
 * contiguous axis:
 *   x-pencil a[z][y][x]  z in block r2 (n/p2 points), y in block r1 (n/p1), all x   (input)
 *   y-pencil b[x][z][y]  x in block r1 (n/p1), z in block r2 (n/p2), all y
 *   z-pencil c[y][x][z]  y in block r2 (n/p2), x in block r1 (n/p1), all z       (spectrum)
 * Each layout is the previous one rotated, (A, B, C) -> (C, A, B), so both transposes are the
 * same pack, all-to-all and unpack, on comm1 (the p1 ranks with this r2) and then on comm2 (the
 * p2 ranks with this r1). Every rank holds rows = n^2/(p1 p2) lines of n points in every layout,
 * so one FFTW plan (rows transforms of length n, from data to work) serves all three FFT steps:
 * the data goes back and forth between two arrays, and each step reads one and writes the other. */

#include "pencil_fft.h"

/* [pencil_communicators]
 * The rows and columns of the p1 x p2 grid of comm: comm1 holds the p1 ranks with the same
 * r2 = rank / p1 (consecutive ranks), comm2 the p2 ranks with the same r1 = rank % p1 (equal
 * modulo p1), each ordered by the other coordinate: the seed's com1 and com2. */
void pencil_communicators(int p1, MPI_Comm comm, MPI_Comm *comm1, MPI_Comm *comm2)
{
    int rank;
    MPI_Comm_rank(comm, &rank);
    const int r1 = rank % p1, r2 = rank / p1;
    MPI_Comm_split(comm, r2, r1, comm1);      /* color: which row; key: the rank within it */
    MPI_Comm_split(comm, r1, r2, comm2);
}
/* [pencil_communicators] */

/* [pencil_pack]
 * send[d][r][l] = a[r][d*blk + l], blk = n/p: each of the `rows` lines of a (n points) is cut into
 * p blocks, and block d of every line goes to the part of send for rank d of the communicator
 * (MPI_Alltoall sends the d-th rows*blk elements to rank d). */
void pencil_pack(int rows, int n, int p, const double complex *restrict a,
                 double complex *restrict send)
{
    const int blk = n / p;
    for (int d = 0; d < p; d++)
        for (int r = 0; r < rows; r++)
            for (int l = 0; l < blk; l++)
                send[((long)d * rows + r) * blk + l] = a[(long)r * n + (long)d * blk + l];
}
/* [pencil_pack] */

/* [pencil_unpack]
 * out[l][o][s*m + i] = recv[s][o][i][l]: the blocks from the p sources s (each m points of the
 * axis that arrives whole) joined along that axis, which becomes contiguous; the axis that was
 * contiguous (this rank's blk points of it) becomes outermost. recv is p x outer x m x blk,
 * out is blk x outer x (p m). */
void pencil_unpack(int p, int outer, int m, int blk, const double complex *restrict recv,
                   double complex *restrict out)
{
    const long line = (long)p * m;           /* the length of the new contiguous axis: n */
    for (int s = 0; s < p; s++)
        for (int o = 0; o < outer; o++)
            for (int i = 0; i < m; i++)
                for (int l = 0; l < blk; l++)
                    out[((long)l * outer + o) * line + (long)s * m + i] =
                        recv[(((long)s * outer + o) * m + i) * blk + l];
}
/* [pencil_unpack] */

/* [pencil_fft_plan]
 * The forward FFT of `rows` contiguous lines of n points, from data to work (out of place;
 * FFTW_ESTIMATE: the arrays are not touched while planning), in *plan. */
void pencil_fft_plan(int n, int rows, double complex *data, double complex *work,
                     fftw_plan *plan)
{
    *plan = fftw_plan_many_dft(1, &n, rows, data, NULL, 1, n, work, NULL, 1, n, FFTW_FORWARD,
                               FFTW_ESTIMATE);
}
/* [pencil_fft_plan] */

static double elapsed(double *seconds, int phase, double start)
{
    const double now = MPI_Wtime();
    seconds[phase] += now - start;
    return now;
}

/* [pencil_fft_forward]
 * The 3-D FFT of the field whose x-pencil this rank holds in data (n^3/(p1 p2) elements); on
 * return work holds its z-pencil of the spectrum, c[ky][kx][kz] (ky in block r2, kx in block r1),
 * and data is overwritten. plan is pencil_fft_plan's for these two arrays. The time of each phase
 * is added to seconds[PHASE_FFT], seconds[PHASE_TRANSPOSE] (pack + unpack),
 * seconds[PHASE_ALLTOALL]. */
void pencil_fft_forward(int n, int p1, int p2, MPI_Comm comm1, MPI_Comm comm2, fftw_plan plan,
                        double complex *restrict data, double complex *restrict work,
                        double *restrict seconds)
{
    const int bx = n / p1, bz = n / p2;       /* the blocks of x (and y) and of z (and y) */
    const int rows = bx * bz;                 /* lines per rank in every layout: n^2/(p1 p2) */
    const int m1 = rows * bx, m2 = rows * bz; /* elements per message: n^3/(p1^2 p2), ... */
    double t = MPI_Wtime();
    fftw_execute_dft(plan, data, work);                                   /* (1) along x */
    t = elapsed(seconds, PHASE_FFT, t);
    pencil_pack(rows, n, p1, work, data);                                 /* (2) x in p1 blocks */
    t = elapsed(seconds, PHASE_TRANSPOSE, t);
    MPI_Alltoall(data, m1, MPI_C_DOUBLE_COMPLEX, work, m1, MPI_C_DOUBLE_COMPLEX, comm1); /* (3) */
    t = elapsed(seconds, PHASE_ALLTOALL, t);
    pencil_unpack(p1, bz, bx, bx, work, data);   /* (4) recv[s][z][y][x] -> b[x][z][y] */
    t = elapsed(seconds, PHASE_TRANSPOSE, t);
    fftw_execute_dft(plan, data, work);                                   /* (5) along y */
    t = elapsed(seconds, PHASE_FFT, t);
    pencil_pack(rows, n, p2, work, data);                                 /* (6) y in p2 blocks */
    t = elapsed(seconds, PHASE_TRANSPOSE, t);
    MPI_Alltoall(data, m2, MPI_C_DOUBLE_COMPLEX, work, m2, MPI_C_DOUBLE_COMPLEX, comm2); /* (7) */
    t = elapsed(seconds, PHASE_ALLTOALL, t);
    pencil_unpack(p2, bx, bz, bz, work, data);   /* (8) recv[s][x][z][y] -> c[y][x][z] */
    t = elapsed(seconds, PHASE_TRANSPOSE, t);
    fftw_execute_dft(plan, data, work);                                   /* (9) along z */
    elapsed(seconds, PHASE_FFT, t);
}
/* [pencil_fft_forward] */
