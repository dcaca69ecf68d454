/* solc: the finite-volume Poisson problem of lecture 03 solved by one version of the OpenMP CG
 * ladder, standalone.
 *
 *   usage: solc [INPUT.DAT] [v0|v1|v2|v3]      (defaults: INPUT.DAT, v3)
 *
 * INPUT.DAT, one group of values per line, anything after them is a comment:
 *   NX NY NZ        number of cells in x, y, z (> 0)
 *   DX DY DZ        cell size in x, y, z (> 0)
 *   EPSICCG         CG tolerance on ||r|| / ||b|| (> 0)
 * -div(grad phi) = x + y + z in the box, phi = 0 on the top face z = NZ DZ, the other faces
 * insulated. v0 generates the matrix (CRS) serially, v1 in parallel (first touch), v2 and v3 in
 * ELL, in parallel. The threads: OMP_NUM_THREADS. Prints a summary with phi's largest value and
 * the sum of phi (a checksum to compare versions, thread counts and languages). Exit status: 0
 * converged, 1 not converged (or out of memory), 2 bad input, command line or thread count. */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "course.h"
#include "poisson_input.h"

static const char *const VERSIONS[4] = {"v0", "v1", "v2", "v3"};

/* malloc, or solc's out-of-memory line (with NX NY NZ) and exit status 1 */
static void *checked_malloc(const poisson_problem *p, long count, size_t size)
{
    return poisson_malloc("solc", p, count, size);
}

int main(int argc, char **argv)
{
    const char *path = poisson_input_path(argc, argv, "[v0|v1|v2|v3]");
    const char *name = argc > 2 ? argv[2] : "v3";
    int version = -1;
    for (int v = 0; v < 4; v++)
        if (strcmp(name, VERSIONS[v]) == 0)
            version = v;
    if (version < 0) {
        fprintf(stderr, "solc: unknown version '%s' (expected v0, v1, v2 or v3)\n", name);
        return 2;
    }
    if (!poisson_threads_ok("solc"))
        return 2;
    /* the ELL arrays hold 6 N entries, N = NX NY NZ */
    const poisson_problem p = poisson_read_input("solc", path, 6);
    const int n = p.nx * p.ny * p.nz;
    const int nnz = poisson_nnz(&p);
    const int parallel = version > 0, ell = version >= 2;

    /* malloc'ed, not calloc'ed: the generator (and the loop below) touch the pages first */
    double *d = checked_malloc(&p, n, sizeof(double)), *b = checked_malloc(&p, n, sizeof(double));
    double *phi = checked_malloc(&p, n, sizeof(double));
    int *index = NULL, *item = NULL;
    double *amat = NULL;
    if (ell) {
        item = checked_malloc(&p, 6L * n, sizeof(int));
        amat = checked_malloc(&p, 6L * n, sizeof(double));
    } else {
        index = checked_malloc(&p, n + 1L, sizeof(int));
        item = checked_malloc(&p, nnz, sizeof(int));
        amat = checked_malloc(&p, nnz, sizeof(double));
    }

    double t0 = omp_get_wtime();
    if (ell)
        poi_gen_ell(p.nx, p.ny, p.nz, p.dx, p.dy, p.dz, parallel, d, item, amat, b);
    else
        poi_gen_crs(p.nx, p.ny, p.nz, p.dx, p.dy, p.dz, parallel, d, index, item, amat, b);
#pragma omp parallel for schedule(static) if (parallel)
    for (int i = 0; i < n; i++)                          /* initial guess 0 */
        phi[i] = 0.0;
    double t1 = omp_get_wtime();

    const int max_iter = poisson_max_iter(n);
    double relres = 0.0;
    int iters;
    switch (version) {
    case 0:
        iters = pcg_v0(n, d, index, item, amat, b, phi, p.eps, max_iter, &relres);
        break;
    case 1:
        iters = pcg_v1(n, d, index, item, amat, b, phi, p.eps, max_iter, &relres);
        break;
    case 2:
        iters = pcg_v2(n, d, item, amat, b, phi, p.eps, max_iter, &relres);
        break;
    default:
        iters = pcg_v3(n, d, item, amat, b, phi, p.eps, max_iter, &relres);
        break;
    }
    double t2 = omp_get_wtime();
    if (iters < 0)
        poisson_out_of_memory("solc", &p);

    int imax = 0;                                        /* the first cell with the largest phi */
    double sum = 0.0;
    for (int i = 0; i < n; i++) {
        if (phi[i] > phi[imax])
            imax = i;
        sum += phi[i];
    }
    printf("sol (C): %d x %d x %d cells, N = %d, %d off-diagonal nonzeros in %s\n", p.nx, p.ny,
           p.nz, n, nnz, ell ? "ELL (6 per row)" : "CRS");
    printf("  version %s, threads %d\n", VERSIONS[version], omp_get_max_threads());
    printf("  CG: %d iterations, relative residual %.3e (%s)\n", iters, relres,
           relres <= p.eps ? "converged" : "NOT converged");
    printf("  time: generate %.3e s, solve %.3e s\n", t1 - t0, t2 - t1);
    printf("  phi(max) = %.15e at cell %d (i j k = %d %d %d)\n", phi[imax], imax, imax % p.nx,
           imax / p.nx % p.ny, imax / (p.nx * p.ny));
    printf("  phi(checksum) = %.15e\n", sum);
    free(d), free(b), free(phi), free(index), free(item), free(amat);
    return relres <= p.eps ? 0 : 1;
}
