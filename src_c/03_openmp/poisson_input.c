/* The input file, command line and checks that solc and iccg_c share (see poisson_input.h). */
#include "poisson_input.h"

#include <limits.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

#include "input.h"

/* INPUT.DAT's path (argv[1] or INPUT.DAT), or the usage line and exit status 2 */
const char *poisson_input_path(int argc, char **argv, const char *usage)
{
    if (argc > 3) {
        fprintf(stderr, "usage: %s [INPUT.DAT] %s\n", argv[0], usage);
        exit(2);
    }
    return argc > 1 ? argv[1] : "INPUT.DAT";
}

/* NX NY NZ / DX DY DZ / EPSICCG, all > 0, per_cell NX NY NZ within int */
poisson_problem poisson_read_input(const char *prog, const char *path, int per_cell)
{
    poisson_problem p;
    input_file in;
    int cells[3];
    double size[3];
    input_open(&in, prog, path);
    input_ints(&in, 3, cells, "NX NY NZ: number of cells");
    input_require_positive(&in, cells[0], "NX");
    input_require_positive(&in, cells[1], "NY");
    input_require_positive(&in, cells[2], "NZ");
    /* in floating point: no overflow here */
    if ((double)per_cell * cells[0] * cells[1] * cells[2] > INT_MAX)
        input_fail(&in, "mesh too large: %d NX NY NZ is more than %d", per_cell, INT_MAX);
    input_reals(&in, 3, size, "DX DY DZ: cell size");
    input_require_positive(&in, size[0], "DX");
    input_require_positive(&in, size[1], "DY");
    input_require_positive(&in, size[2], "DZ");
    input_reals(&in, 1, &p.eps, "EPSICCG: CG tolerance");
    input_require_positive(&in, p.eps, "EPSICCG");
    input_close(&in);
    p.nx = cells[0], p.ny = cells[1], p.nz = cells[2];
    p.dx = size[0], p.dy = size[1], p.dz = size[2];
    return p;
}

/* 2 per face: the faces normal to x, then y, then z */
int poisson_nnz(const poisson_problem *p)
{
    return 2 * ((p->nx - 1) * p->ny * p->nz + p->nx * (p->ny - 1) * p->nz
                + p->nx * p->ny * (p->nz - 1));
}

/* 10 N, if it fits */
int poisson_max_iter(int n)
{
    return 10L * n <= INT_MAX ? 10 * n : INT_MAX;
}

/* OMP_NUM_THREADS against THREADS_PER_CORE_MAX per usable core, with the error line if over */
int poisson_threads_ok(const char *prog)
{
    const int cores = omp_get_num_procs(), threads = omp_get_max_threads();
    if (threads <= THREADS_PER_CORE_MAX * cores)
        return 1;
    fprintf(stderr, "%s: OMP_NUM_THREADS=%d is more than %d per core: this process may use %d "
            "core(s), so at most %d threads (more only take turns)\n", prog, threads,
            THREADS_PER_CORE_MAX, cores, THREADS_PER_CORE_MAX * cores);
    return 0;
}

/* the out-of-memory line and exit status 1 */
void poisson_out_of_memory(const char *prog, const poisson_problem *p)
{
    if (p != NULL)
        fprintf(stderr, "%s: out of memory for NX NY NZ = %d %d %d\n", prog, p->nx, p->ny, p->nz);
    else
        fprintf(stderr, "%s: out of memory\n", prog);
    exit(1);
}

/* malloc, at least one element (malloc(0) may be NULL), or out of memory */
void *poisson_malloc(const char *prog, const poisson_problem *p, long count, size_t size)
{
    void *mem = malloc((size_t)(count > 0 ? count : 1) * size);
    if (mem == NULL)
        poisson_out_of_memory(prog, p);
    return mem;
}
