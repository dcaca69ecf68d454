/* 1D steady heat conduction  -d/dx(cond dT/dx) = qvol  on [x_0, x_N] with linear elements:
 * element matrix, sparsity pattern, assembly into CRS, boundary conditions.
 * Nodes 0..n_elem, element e joins nodes e and e+1. */
#include "course.h"

/* [fem1d_element]
 * Linear element of length h:  ke = cond/h [ 1 -1; -1 1 ],  fe = qvol h/2 [ 1; 1 ].
 * ke is stored row by row (ke[0] = k11, ke[1] = k12, ke[2] = k21, ke[3] = k22). */
void fem1d_element(double h, double cond, double qvol, double *restrict ke, double *restrict fe)
{
    double k = cond / h;
    ke[0] = k;
    ke[1] = -k;
    ke[2] = -k;
    ke[3] = k;
    fe[0] = 0.5 * qvol * h;
    fe[1] = 0.5 * qvol * h;
}
/* [fem1d_element] */

/* [fem1d_pattern]
 * Node i is coupled to its neighbours i-1 and i+1: a tridiagonal pattern with 3 n_node - 2 entries.
 * row_ptr has n_node + 1 entries, col_idx 3 n_node - 2; columns are sorted within each row. */
void fem1d_pattern(int n_node, int *restrict row_ptr, int *restrict col_idx)
{
    int k = 0;
    for (int i = 0; i < n_node; i++) {
        row_ptr[i] = k;
        for (int j = i - 1; j <= i + 1; j++)
            if (j >= 0 && j < n_node)
                col_idx[k++] = j;
    }
    row_ptr[n_node] = k;
}
/* [fem1d_pattern] */

/* [fem1d_assemble]
 * Adds every element matrix into val (which must hold zeros, or a previous sum, on entry) and every
 * element load into rhs. Element e has the global nodes {e, e+1}. */
void fem1d_assemble(int n_elem, const double *restrict x, double cond, double qvol,
                    const int *restrict row_ptr, const int *restrict col_idx,
                    double *restrict val, double *restrict rhs)
{
    for (int e = 0; e < n_elem; e++) {
        double ke[4], fe[2];
        fem1d_element(x[e + 1] - x[e], cond, qvol, ke, fe);
        int node[2] = {e, e + 1};
        for (int a = 0; a < 2; a++) {
            rhs[node[a]] += fe[a];
            for (int b = 0; b < 2; b++)
                val[crs_find(row_ptr, col_idx, node[a], node[b])] += ke[2 * a + b];
        }
    }
}
/* [fem1d_assemble] */

/* [fem1d_boundary]
 * T = 0 at node 0: row 0 and column 0 become those of the identity, rhs[0] = 0 (zeroing the column
 * too keeps the matrix symmetric; since T_0 = 0 nothing moves to the right-hand side).
 * Heat flux qflux = cond dT/dx at the last node: a natural condition, added to the load. */
void fem1d_boundary(int n_node, double qflux, const int *restrict row_ptr,
                    const int *restrict col_idx, double *restrict val, double *restrict rhs)
{
    for (int i = 0; i < n_node; i++)
        for (int k = row_ptr[i]; k < row_ptr[i + 1]; k++)
            if (i == 0 || col_idx[k] == 0)
                val[k] = (i == col_idx[k]) ? 1.0 : 0.0;
    rhs[0] = 0.0;
    rhs[n_node - 1] += qflux;
}
/* [fem1d_boundary] */
