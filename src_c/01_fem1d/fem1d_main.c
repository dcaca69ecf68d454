/* fem1d: 1D steady heat conduction with linear elements, standalone.
 *
 *   usage: fem1d_c [INPUT]      (default INPUT: input.dat)
 *
 * INPUT, one group of values per line, anything after them is a comment:
 *   NE            number of elements (> 0)
 *   LENGTH COND   length of the bar (> 0), thermal conductivity (> 0)
 *   QVOL QFLUX    volumetric heat source, heat flux COND dT/dx at x = LENGTH
 *   EPS           CG tolerance on ||r|| / ||b|| (> 0)
 * T = 0 at x = 0. Prints a summary and checks the nodal values against the exact solution. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "course.h"
#include "input.h"

/* exact solution: T(x) = -qvol x^2 / (2 cond) + (qflux + qvol L) x / cond */
static double exact(double x, double len, double cond, double qvol, double qflux)
{
    return (-0.5 * qvol * x * x + (qflux + qvol * len) * x) / cond;
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : "input.dat";
    if (argc > 2) {
        fprintf(stderr, "usage: %s [INPUT]\n", argv[0]);
        return 2;
    }
    int ne;
    double geom[2], load[2], eps;
    input_file in;
    input_open(&in, "fem1d", path);
    input_ints(&in, 1, &ne, "NE: number of elements");
    input_require_positive(&in, ne, "NE");
    input_reals(&in, 2, geom, "LENGTH COND: length, conductivity");
    input_require_positive(&in, geom[0], "LENGTH");
    input_require_positive(&in, geom[1], "COND");
    input_reals(&in, 2, load, "QVOL QFLUX: heat source, flux at x = LENGTH");
    input_reals(&in, 1, &eps, "EPS: CG tolerance");
    input_require_positive(&in, eps, "EPS");
    input_close(&in);
    const double len = geom[0], cond = geom[1], qvol = load[0], qflux = load[1];

    int n = ne + 1, nnz = 3 * n - 2;
    double *x = malloc(n * sizeof *x), *t = calloc(n, sizeof *t), *rhs = calloc(n, sizeof *rhs);
    double *val = calloc(nnz, sizeof *val);
    int *row_ptr = malloc((n + 1) * sizeof *row_ptr), *col_idx = malloc(nnz * sizeof *col_idx);
    if (!x || !t || !rhs || !val || !row_ptr || !col_idx) {
        fprintf(stderr, "fem1d: out of memory for NE = %d\n", ne);
        return 1;
    }
    for (int i = 0; i < n; i++)
        x[i] = len * i / ne;

    fem1d_pattern(n, row_ptr, col_idx);
    fem1d_assemble(ne, x, cond, qvol, row_ptr, col_idx, val, rhs);
    fem1d_boundary(n, qflux, row_ptr, col_idx, val, rhs);
    double relres;
    int iters = pcg_jacobi(n, row_ptr, col_idx, val, rhs, t, eps, 10 * n, &relres);

    double err = 0.0;
    for (int i = 0; i < n; i++)
        err = fmax(err, fabs(t[i] - exact(x[i], len, cond, qvol, qflux)));
    printf("fem1d (C): %d elements, %d unknowns, %d nonzeros\n", ne, n, nnz);
    printf("  CG: %d iterations, relative residual %.3e (%s)\n", iters, relres,
           relres <= eps ? "converged" : "NOT converged");
    printf("  T(LENGTH) = %.10g   exact %.10g\n", t[n - 1], exact(len, len, cond, qvol, qflux));
    printf("  max nodal error %.3e (should be near round-off: linear elements are nodally exact)\n",
           err);
    free(x), free(t), free(rhs), free(val), free(row_ptr), free(col_idx);
    return relres <= eps ? 0 : 1;
}
