/* iccg_c: the finite-volume Poisson problem of lecture 03 solved by ICCG with a reordering
 * (lecture 04_iccg), standalone: the ordering, IC(0) and the colored parallel substitution all in C.
 *
 *   usage: iccg_c [INPUT.DAT] [NCOLORtot]      (defaults: INPUT.DAT, 1)
 *
 * INPUT.DAT is the file of solc (lecture 03): NX NY NZ / DX DY DZ / EPSICCG, one group per line.
 * NCOLORtot chooses the ordering as in Nakajima's ICCG codes: > 1 multicolor (MC) with that many
 * colors as a target, 1 natural (sequential substitution), 0 Cuthill-McKee, -1 reverse
 * Cuthill-McKee, <= -2 CM-RCM with |NCOLORtot| colors. The threads: OMP_NUM_THREADS. Prints the
 * colors, the iterations, the times and phi's largest value and sum in the original numbering.
 * Exit status: 0 converged, 1 not converged (or out of memory), 2 bad input or command line. */
#include <limits.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

#include "course.h"
#include "iccg.h"
#include "input.h"
#include "poisson_input.h"

/* malloc, or iccg_c's out-of-memory line and exit status 1 */
static void *checked_malloc(long count, size_t size)
{
    return poisson_malloc("iccg_c", NULL, count, size);
}

/* The ordering of NCOLORtot on the graph (index, item): perm[new] = old, the colors; returns
 * the number of colors and its name in *name. */
static int make_ordering(int n, const int *index, const int *item, int ncolortot, int *perm,
                         int **color_ptr, const char **name)
{
    int *color = checked_malloc(n, sizeof(int)), *within = checked_malloc(n, sizeof(int));
    int *level = checked_malloc(n, sizeof(int)), ncolor;
    if (ncolortot == 1) {                                 /* natural: one sequential sweep */
        *name = "natural";
        for (int i = 0; i < n; i++)
            within[i] = i, color[i] = 0;
        ncolor = 1;
    } else if (ncolortot > 1) {                           /* MC */
        *name = "MC";
        for (int i = 0; i < n; i++)
            within[i] = i;
        ncolor = multicolor(n, index, item, ncolortot, color);
    } else {
        int *cm = checked_malloc(n, sizeof(int)), max_level = 0;
        cuthill_mckee(n, index, item, cm, level);
        for (int k = 0; k < n; k++) {
            within[k] = ncolortot == 0 ? cm[k] : cm[n - 1 - k];
            if (level[k] > max_level)
                max_level = level[k];
        }
        free(cm);
        if (ncolortot >= -1) {                            /* CM, RCM: wavefronts as colors */
            *name = ncolortot == 0 ? "CM" : "RCM";
            wavefronts(n, index, item, within, color);
            ncolor = 0;
            for (int i = 0; i < n; i++)
                if (color[i] + 1 > ncolor)
                    ncolor = color[i] + 1;
        } else {                                          /* CM-RCM: levels of the RCM */
            *name = "CM-RCM";
            for (int i = 0; i < n; i++)
                level[i] = max_level - level[i];
            ncolor = cyclic_colors(n, index, item, within, level, -ncolortot, color);
            if (ncolor < 0)
                poisson_out_of_memory("iccg_c", NULL);
        }
    }
    *color_ptr = checked_malloc(ncolor + 1L, sizeof(int));
    color_permutation(n, ncolor, color, within, perm, *color_ptr);
    free(color), free(within), free(level);
    return ncolor;
}

int main(int argc, char **argv)
{
    const char *path = poisson_input_path(argc, argv, "[NCOLORtot]");
    int ncolortot = 1;
    if (argc > 2 && (!input_word_int(argv[2], &ncolortot) || ncolortot == INT_MIN)) {
        fprintf(stderr, "iccg_c: NCOLORtot must be an integer, got '%s'\n", argv[2]);
        return 2;
    }
    if (!poisson_threads_ok("iccg_c"))
        return 2;
    /* the CRS arrays hold up to 7 N entries, N = NX NY NZ */
    const poisson_problem pr = poisson_read_input("iccg_c", path, 7);
    const int n = pr.nx * pr.ny * pr.nz;
    const int nnz = poisson_nnz(&pr);
    const int nl = nnz / 2;                               /* entries of each triangle */
    double *d = checked_malloc(n, sizeof(double)), *b = checked_malloc(n, sizeof(double));
    int *index = checked_malloc(n + 1L, sizeof(int)), *item = checked_malloc(nnz, sizeof(int));
    double *amat = checked_malloc(nnz, sizeof(double));

    double t0 = omp_get_wtime();
    poi_gen_crs(pr.nx, pr.ny, pr.nz, pr.dx, pr.dy, pr.dz, 1, d, index, item, amat, b);
    double t1 = omp_get_wtime();

    /* the ordering, then A, b in the new numbering split into D, L_A, U_A (columns rising) */
    int *perm = checked_malloc(n, sizeof(int)), *iperm = checked_malloc(n, sizeof(int));
    int *color_ptr;
    const char *name;
    const int ncolor = make_ordering(n, index, item, ncolortot, perm, &color_ptr, &name);
    for (int i = 0; i < n; i++)
        iperm[perm[i]] = i;
    double *diag = checked_malloc(n, sizeof(double)), *bn = checked_malloc(n, sizeof(double));
    int *lower_ptr = checked_malloc(n + 1L, sizeof(int)), *upper_ptr = checked_malloc(n + 1L,
                                                                                     sizeof(int));
    int *lower_col = checked_malloc(nl, sizeof(int)), *upper_col = checked_malloc(nl, sizeof(int));
    double *lower_val = checked_malloc(nl, sizeof(double));
    double *upper_val = checked_malloc(nl, sizeof(double));
    lower_ptr[0] = upper_ptr[0] = 0;
    int incompatible = 0;
    for (int i = 0; i < n; i++) {
        const int old = perm[i];
        int nlow = lower_ptr[i], nup = upper_ptr[i];
        diag[i] = d[old];
        bn[i] = b[old];
        for (int k = index[old]; k < index[old + 1]; k++) {
            const int j = iperm[item[k]];
            int *col = j < i ? lower_col : upper_col, *count = j < i ? &nlow : &nup;
            double *val = j < i ? lower_val : upper_val;
            int pos = (*count)++;                         /* insertion: columns rising */
            const int start = j < i ? lower_ptr[i] : upper_ptr[i];
            while (pos > start && col[pos - 1] > j) {
                col[pos] = col[pos - 1];
                val[pos] = val[pos - 1];
                pos--;
            }
            col[pos] = j;
            val[pos] = amat[k];
        }
        lower_ptr[i + 1] = nlow, upper_ptr[i + 1] = nup;
        incompatible += nlow == lower_ptr[i];
    }
    double *fac_diag = checked_malloc(n, sizeof(double));
    double *fac_lower = checked_malloc(nl, sizeof(double));
    double *fac_upper = checked_malloc(nl, sizeof(double));
    const int status = ic0_factor(n, lower_ptr, lower_col, lower_val, diag, fac_lower, fac_diag);
    if (status < 0) {
        fprintf(stderr, "iccg_c: IC(0) broke down at row %d\n", -status - 1);
        return 1;
    }
    if (ic0_transpose(n, lower_ptr, lower_col, fac_lower, upper_ptr, fac_upper) < 0)
        poisson_out_of_memory("iccg_c", NULL);
    double *x = checked_malloc(n, sizeof(double));
#pragma omp parallel for schedule(static)
    for (int i = 0; i < n; i++)
        x[i] = 0.0;
    double t2 = omp_get_wtime();

    const int max_iter = poisson_max_iter(n);
    double relres = 0.0;
    const int iters = iccg(n, ncolor, color_ptr, diag, lower_ptr, lower_col, lower_val, upper_ptr,
                           upper_col, upper_val, fac_diag, fac_lower, fac_upper, bn, x, pr.eps,
                           max_iter, &relres);
    double t3 = omp_get_wtime();
    if (iters < 0)
        poisson_out_of_memory("iccg_c", NULL);

    int imax = 0;                  /* phi in the original numbering: phi[old] = x[iperm[old]] */
    double sum = 0.0;
    for (int i = 0; i < n; i++) {
        if (x[iperm[i]] > x[iperm[imax]])
            imax = i;
        sum += x[iperm[i]];
    }
    printf("iccg (C): %d x %d x %d cells, N = %d\n", pr.nx, pr.ny, pr.nz, n);
    printf("  ordering %s, NCOLORtot %d, colors %d, incompatible nodes %d, threads %d\n", name,
           ncolortot, ncolor, incompatible, omp_get_max_threads());
    printf("  ICCG: %d iterations, relative residual %.3e (%s)\n", iters, relres,
           relres <= pr.eps ? "converged" : "NOT converged");
    printf("  time: generate %.3e s, order+factor %.3e s, solve %.3e s, %.3e s per iteration\n",
           t1 - t0, t2 - t1, t3 - t2, iters > 0 ? (t3 - t2) / iters : 0.0);
    printf("  phi(max) = %.15e at cell %d\n", x[iperm[imax]], imax);
    printf("  phi(checksum) = %.15e\n", sum);
    free(d), free(b), free(index), free(item), free(amat), free(perm), free(iperm);
    free(color_ptr), free(diag), free(bn), free(lower_ptr), free(upper_ptr), free(lower_col);
    free(upper_col), free(lower_val), free(upper_val), free(fac_diag), free(fac_lower);
    free(fac_upper), free(x);
    return relres <= pr.eps ? 0 : 1;
}
