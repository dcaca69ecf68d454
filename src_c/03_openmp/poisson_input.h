/* What the standalone programs of lecture 03's Poisson problem share (solc, and iccg_c of lecture
 * 04_iccg): the input file INPUT.DAT (NX NY NZ / DX DY DZ / EPSICCG, one group of values per line,
 * anything after them a comment), the command line's INPUT.DAT, the matrix's nonzeros and CG's
 * iteration limit, the limit on OMP_NUM_THREADS and running out of memory. PROG, the program's
 * name, begins every message (as in "PROG: FILE:LINE: ..."). */
#ifndef COURSE_POISSON_INPUT_H
#define COURSE_POISSON_INPUT_H
#include <stddef.h>

/* at most this many threads per core (the OpenMP runtime itself crashes when asked for tens of
 * thousands; beyond the cores, threads only take turns); the same limit as course.problems */
#define THREADS_PER_CORE_MAX 16

typedef struct {
    int nx, ny, nz;              /* number of cells in x, y, z */
    double dx, dy, dz, eps;      /* cell size in x, y, z; CG tolerance on ||r|| / ||b|| */
} poisson_problem;

/* INPUT.DAT's path from the command line: argv[1], default INPUT.DAT, for a program that takes at
 * most one argument after it (`usage` names it); more: "usage: ARGV0 [INPUT.DAT] USAGE", exit 2 */
const char *poisson_input_path(int argc, char **argv, const char *usage);

/* Reads and checks INPUT.DAT at `path`; the program's largest array holds per_cell N entries,
 * N = NX NY NZ, which must fit an int. A bad line: "PROG: FILE:LINE: ..." and exit status 2. */
poisson_problem poisson_read_input(const char *prog, const char *path, int per_cell);

/* the off-diagonal nonzeros of the matrix: two per face between two cells (in CRS) */
int poisson_nnz(const poisson_problem *p);

/* CG's iteration limit: 10 N, or INT_MAX where 10 N does not fit */
int poisson_max_iter(int n);

/* 1 if OMP_NUM_THREADS is within THREADS_PER_CORE_MAX per core of those this process may use (its
 * affinity mask, as omp_get_num_procs counts them); else 0 after a one-line error on stderr (the
 * program then exits with status 2) */
int poisson_threads_ok(const char *prog);

/* "PROG: out of memory" (with NX NY NZ unless p is NULL) on stderr and exit status 1 */
void poisson_out_of_memory(const char *prog, const poisson_problem *p);

/* malloc of count (at least 1) elements of `size` bytes, or poisson_out_of_memory(prog, p) */
void *poisson_malloc(const char *prog, const poisson_problem *p, long count, size_t size);

#endif
