/* Lecture 07_cluster, case study: the pencil-decomposed 3-D FFT of seed 003 with FFTW and
 * MPI_Alltoall on split communicators (pencil_fft.c; the Fortran twin is
 * src_fortran/07_cluster/pencil_fft.f90, the Python one course/parallel/fft.py). */
#ifndef COURSE_PENCIL_FFT_H
#define COURSE_PENCIL_FFT_H
#include <complex.h>
#include <mpi.h>

#include <fftw3.h>

/* seconds[PHASE_...] of pencil_fft_forward: the phases it adds its times to */
enum { PHASE_FFT = 0, PHASE_TRANSPOSE = 1, PHASE_ALLTOALL = 2, N_PHASES = 3 };

void pencil_communicators(int p1, MPI_Comm comm, MPI_Comm *comm1, MPI_Comm *comm2);
void pencil_pack(int rows, int n, int p, const double complex *restrict a,
                 double complex *restrict send);
void pencil_unpack(int p, int outer, int m, int blk, const double complex *restrict recv,
                   double complex *restrict out);
void pencil_fft_plan(int n, int rows, double complex *data, double complex *work,
                     fftw_plan *plan);
void pencil_fft_forward(int n, int p1, int p2, MPI_Comm comm1, MPI_Comm comm2, fftw_plan plan,
                        double complex *restrict data, double complex *restrict work,
                        double *restrict seconds);

#endif
