/* The finite-volume Poisson problem of lecture 03: -div(grad phi) = f on a box of NX x NY x NZ cells
 * of size DX x DY x DZ, 7-point stencil. Cell (i, j, k) has the number c = i + NX (j + NY k) and its
 * centre at ((i + 1/2) DX, (j + 1/2) DY, (k + 1/2) DZ). Two neighbouring cells are coupled by
 * a = face area / centre distance: a_x = DY DZ / DX, a_y = DX DZ / DY, a_z = DX DY / DZ. phi = 0 on
 * the top face z = NZ DZ, half a cell away from the top cells (2 a_z on their diagonal); the other
 * faces are insulated. f = x + y + z at the centre, times the cell volume.
 *
 * Storage: the diagonal d[N] and the OFF-DIAGONAL part only (entries -a), in CRS (index[N+1],
 * item, amat; each row in increasing column order) or in ELL (6 entries per row, row-major, short
 * rows padded with the column of the row itself and the coefficient 0).
 *
 * parallel != 0: every loop over the cells is `omp parallel for schedule(static)`, so the pages of
 * d, b and the matrix are first touched by the threads that later use them in the solver (same
 * static schedule over the same rows). parallel == 0: the same loops run on one thread. */
#include <stddef.h>
#include "course.h"

/* The neighbours of cell c in increasing order of their numbers: columns and coefficients a > 0;
 * returns how many (3 to 6, fewer on tiny boxes). */
static int neighbours(int nx, int ny, int nz, double ax, double ay, double az, int c,
                      int *restrict col, double *restrict coef)
{
    const int nxy = nx * ny, i = c % nx, j = (c / nx) % ny, k = c / nxy;
    int m = 0;
    if (k > 0)      col[m] = c - nxy, coef[m++] = az;
    if (j > 0)      col[m] = c - nx,  coef[m++] = ay;
    if (i > 0)      col[m] = c - 1,   coef[m++] = ax;
    if (i < nx - 1) col[m] = c + 1,   coef[m++] = ax;
    if (j < ny - 1) col[m] = c + nx,  coef[m++] = ay;
    if (k < nz - 1) col[m] = c + nxy, coef[m++] = az;
    return m;
}

/* diagonal of cell c: the sum of its coefficients, plus 2 a_z on the top layer (phi = 0 there) */
static double diagonal(int nz, double az, int k, int m, const double *restrict coef)
{
    double s = 0.0;
    for (int l = 0; l < m; l++)
        s += coef[l];
    if (k == nz - 1)
        s += 2.0 * az;
    return s;
}

/* right-hand side of cell (i, j, k): (x + y + z) at the centre times the volume */
static double source(int i, int j, int k, double dx, double dy, double dz)
{
    const double xc = (i + 0.5) * dx, yc = (j + 0.5) * dy, zc = (k + 0.5) * dz;
    return (xc + yc + zc) * (dx * dy * dz);
}

/* [poi_gen_crs]
 * D, the off-diagonal part in CRS and b. Three sweeps over the cells: count the neighbours of
 * every row into index[c+1], add them up (a short serial prefix sum), fill the rows. */
void poi_gen_crs(int nx, int ny, int nz, double dx, double dy, double dz, int parallel,
                 double *restrict d, int *restrict index, int *restrict item,
                 double *restrict amat, double *restrict b)
{
    const int n = nx * ny * nz;
    const double ax = dy * dz / dx, ay = dx * dz / dy, az = dx * dy / dz;
#pragma omp parallel for schedule(static) if (parallel)
    for (int c = 0; c < n; c++) {
        int col[6];
        double coef[6];
        index[c + 1] = neighbours(nx, ny, nz, ax, ay, az, c, col, coef);
    }
    index[0] = 0;
    for (int c = 0; c < n; c++)
        index[c + 1] += index[c];
#pragma omp parallel for schedule(static) if (parallel)
    for (int c = 0; c < n; c++) {
        const int i = c % nx, j = (c / nx) % ny, k = c / (nx * ny);
        int col[6];
        double coef[6];
        const int m = neighbours(nx, ny, nz, ax, ay, az, c, col, coef);
        for (int l = 0; l < m; l++) {
            item[index[c] + l] = col[l];
            amat[index[c] + l] = -coef[l];
        }
        d[c] = diagonal(nz, az, k, m, coef);
        b[c] = source(i, j, k, dx, dy, dz);
    }
}
/* [poi_gen_crs] */

/* [poi_gen_ell]
 * The same matrix in ELL: row c is item_ell/amat_ell[6c .. 6c+5], padded with (c, 0.0). */
void poi_gen_ell(int nx, int ny, int nz, double dx, double dy, double dz, int parallel,
                 double *restrict d, int *restrict item_ell, double *restrict amat_ell,
                 double *restrict b)
{
    const int n = nx * ny * nz;
    const double ax = dy * dz / dx, ay = dx * dz / dy, az = dx * dy / dz;
#pragma omp parallel for schedule(static) if (parallel)
    for (int c = 0; c < n; c++) {
        const int i = c % nx, j = (c / nx) % ny, k = c / (nx * ny);
        int col[6];
        double coef[6];
        const int m = neighbours(nx, ny, nz, ax, ay, az, c, col, coef);
        for (int l = 0; l < 6; l++) {
            item_ell[6 * (size_t)c + l] = l < m ? col[l] : c;
            amat_ell[6 * (size_t)c + l] = l < m ? -coef[l] : 0.0;
        }
        d[c] = diagonal(nz, az, k, m, coef);
        b[c] = source(i, j, k, dx, dy, dz);
    }
}
/* [poi_gen_ell] */
