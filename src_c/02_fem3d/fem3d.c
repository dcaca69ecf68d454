/* 3D steady heat conduction  -div(cond grad T) = Q  on a box of tri-linear hexahedra (8 nodes):
 * element matrix by 2x2x2 Gauss quadrature, the 27-point sparsity pattern of the structured mesh,
 * assembly into CRS and the load of a heat flux through boundary faces.
 *
 * Reference element [-1,1]^3; local node a sits at the corner (XI[a], ETA[a], ZETA[a]) and has the
 * shape function N_a = (1 + xi XI[a]) (1 + eta ETA[a]) (1 + zeta ZETA[a]) / 8. */
#include <math.h>

#include "course.h"

static const double XI[8] = {-1.0, 1.0, 1.0, -1.0, -1.0, 1.0, 1.0, -1.0};
static const double ETA[8] = {-1.0, -1.0, 1.0, 1.0, -1.0, -1.0, 1.0, 1.0};
static const double ZETA[8] = {-1.0, -1.0, -1.0, -1.0, 1.0, 1.0, 1.0, 1.0};

/* N_a and its derivatives with respect to (xi, eta, zeta) at one point: dn[a][k] = dN_a / dxi_k */
static void hex8_shape(double xi, double eta, double zeta, double n[8], double dn[8][3])
{
    for (int a = 0; a < 8; a++) {
        double fx = 1.0 + xi * XI[a], fy = 1.0 + eta * ETA[a], fz = 1.0 + zeta * ZETA[a];
        n[a] = 0.125 * fx * fy * fz;
        dn[a][0] = 0.125 * XI[a] * fy * fz;
        dn[a][1] = 0.125 * ETA[a] * fx * fz;
        dn[a][2] = 0.125 * ZETA[a] * fx * fy;
    }
}

/* Jacobian of the map from the reference element:
 * jac[i][k] = dx_i / dxi_k = sum_a x_a,i dN_a/dxi_k */
static void hex8_jacobian(const double *restrict xyz, double dn[8][3], double jac[3][3])
{
    for (int i = 0; i < 3; i++)
        for (int k = 0; k < 3; k++) {
            double s = 0.0;
            for (int a = 0; a < 8; a++)
                s += xyz[3 * a + i] * dn[a][k];
            jac[i][k] = s;
        }
}

/* Determinant and inverse of a 3x3 matrix by cofactors: inv = adj(m) / det(m). The inverse is
 * computed only when det > 0 (the caller rejects the element otherwise). */
static double invert3(double m[3][3], double inv[3][3])
{
    double c00 = m[1][1] * m[2][2] - m[1][2] * m[2][1];
    double c01 = m[1][2] * m[2][0] - m[1][0] * m[2][2];
    double c02 = m[1][0] * m[2][1] - m[1][1] * m[2][0];
    double det = m[0][0] * c00 + m[0][1] * c01 + m[0][2] * c02;
    if (!(det > 0.0))
        return det;
    /* inv[i][j] = cofactor(j, i) / det */
    inv[0][0] = c00 / det;
    inv[1][0] = c01 / det;
    inv[2][0] = c02 / det;
    inv[0][1] = (m[0][2] * m[2][1] - m[0][1] * m[2][2]) / det;
    inv[1][1] = (m[0][0] * m[2][2] - m[0][2] * m[2][0]) / det;
    inv[2][1] = (m[0][1] * m[2][0] - m[0][0] * m[2][1]) / det;
    inv[0][2] = (m[0][1] * m[1][2] - m[0][2] * m[1][1]) / det;
    inv[1][2] = (m[0][2] * m[1][0] - m[0][0] * m[1][2]) / det;
    inv[2][2] = (m[0][0] * m[1][1] - m[0][1] * m[1][0]) / det;
    return det;
}

/* [fem3d_element]
 * Element conductivity matrix ke (8x8, row-major: ke[8*a + b]) and load fe (8) of one tri-linear
 * hexahedron with corners xyz[3*a + d] and nodal heat source q[a], by 2x2x2 Gauss quadrature
 * (points +-1/sqrt(3), weights 1; zeta outermost, xi innermost):
 *   ke_ab = sum_g cond (grad N_a . grad N_b) det J,   fe_a = sum_g N_a (sum_c N_c q_c) det J.
 * The chain rule dN/dxi_k = sum_i (dx_i/dxi_k) dN/dx_i says grad_xi N = J^T grad_x N, hence the
 * physical gradient grad_x N = J^-T grad_xi N, i.e. dN/dx_i = sum_k inv(J)[k][i] dN/dxi_k.
 * Returns 0, or -1 if det J <= 0 at a Gauss point (an inverted or degenerate element). */
int fem3d_element(const double *restrict xyz, double cond, const double *restrict q,
                  double *restrict ke, double *restrict fe)
{
    const double gp = 1.0 / sqrt(3.0);
    const double pts[2] = {-gp, gp};
    for (int a = 0; a < 64; a++)
        ke[a] = 0.0;
    for (int a = 0; a < 8; a++)
        fe[a] = 0.0;

    for (int gz = 0; gz < 2; gz++)
        for (int gy = 0; gy < 2; gy++)
            for (int gx = 0; gx < 2; gx++) {
                double n[8], dn[8][3], jac[3][3], jinv[3][3], grad[8][3];
                hex8_shape(pts[gx], pts[gy], pts[gz], n, dn);
                hex8_jacobian(xyz, dn, jac);
                double det = invert3(jac, jinv);
                if (!(det > 0.0))
                    return -1;
                double q_here = 0.0;            /* the source at this point, interpolated */
                for (int a = 0; a < 8; a++) {
                    q_here += n[a] * q[a];
                    for (int i = 0; i < 3; i++)
                        grad[a][i] = dn[a][0] * jinv[0][i] + dn[a][1] * jinv[1][i]
                                     + dn[a][2] * jinv[2][i];
                }
                for (int a = 0; a < 8; a++) {
                    fe[a] += n[a] * q_here * det;
                    for (int b = 0; b < 8; b++)
                        ke[8 * a + b] += cond * (grad[a][0] * grad[b][0] + grad[a][1] * grad[b][1]
                                                 + grad[a][2] * grad[b][2]) * det;
                }
            }
    return 0;
}
/* [fem3d_element] */

/* [fem3d_pattern]
 * Node (i,j,k) = i + (nx+1) (j + (ny+1) k) shares an element with the nodes (i+di, j+dj, k+dk),
 * di, dj, dk in {-1, 0, 1}, that lie in the box: up to 27 per row. With dk outermost and di
 * innermost the columns come out sorted. row_ptr has n_node + 1 entries. */
void fem3d_pattern(int nx, int ny, int nz, int *restrict row_ptr, int *restrict col_idx)
{
    const int px = nx + 1, py = ny + 1, pz = nz + 1;     /* nodes per direction */
    int pos = 0;
    for (int k = 0; k < pz; k++)
        for (int j = 0; j < py; j++)
            for (int i = 0; i < px; i++) {
                row_ptr[i + px * (j + py * k)] = pos;
                for (int kk = k - 1; kk <= k + 1; kk++)
                    for (int jj = j - 1; jj <= j + 1; jj++)
                        for (int ii = i - 1; ii <= i + 1; ii++)
                            if (ii >= 0 && ii < px && jj >= 0 && jj < py && kk >= 0 && kk < pz)
                                col_idx[pos++] = ii + px * (jj + py * kk);
            }
    row_ptr[px * py * pz] = pos;
}
/* [fem3d_pattern] */

/* [fem3d_assemble]
 * Adds every element matrix into val and every element load into rhs (both hold zeros, or a
 * previous sum, on entry). elements[8*e + a] is the global node of local node a of element e.
 * Returns 0, or -(e+1) for the first element e whose Jacobian is not positive. */
int fem3d_assemble(int n_elem, const int *restrict elements, const double *restrict xyz,
                   double cond, const double *restrict q, const int *restrict row_ptr,
                   const int *restrict col_idx, double *restrict val, double *restrict rhs)
{
    for (int e = 0; e < n_elem; e++) {
        const int *node = elements + 8 * (long)e;
        double xyz_e[24], q_e[8], ke[64], fe[8];
        for (int a = 0; a < 8; a++) {                 /* gather the element's corners */
            for (int d = 0; d < 3; d++)
                xyz_e[3 * a + d] = xyz[3 * (long)node[a] + d];
            q_e[a] = q[node[a]];
        }
        if (fem3d_element(xyz_e, cond, q_e, ke, fe) != 0)
            return -(e + 1);
        for (int a = 0; a < 8; a++) {                 /* scatter into the global system */
            rhs[node[a]] += fe[a];
            for (int b = 0; b < 8; b++)
                val[crs_find(row_ptr, col_idx, node[a], node[b])] += ke[8 * a + b];
        }
    }
    return 0;
}
/* [fem3d_assemble] */

/* [fem3d_nakajima_source]
 * The heat generation of Nakajima's FEM course code, constant on each element:
 *   q_elem[e] = qvol |x_c + y_c|,  (x_c, y_c, z_c) the centroid of element e (the mean of its 8
 * corners). */
void fem3d_nakajima_source(int n_elem, const int *restrict elements, const double *restrict xyz,
                           double qvol, double *restrict q_elem)
{
    for (int e = 0; e < n_elem; e++) {
        const int *node = elements + 8 * (long)e;
        double x_sum = 0.0, y_sum = 0.0;
        for (int a = 0; a < 8; a++) {
            x_sum += xyz[3 * (long)node[a]];
            y_sum += xyz[3 * (long)node[a] + 1];
        }
        q_elem[e] = qvol * fabs(x_sum / 8.0 + y_sum / 8.0);
    }
}
/* [fem3d_nakajima_source] */

/* [fem3d_element_source_load]
 * Adds the load of a heat source constant on each element, q_elem[e] on element e, into rhs:
 *   rhs_a += q_elem[e] * integral of N_a over element e,
 * which is fem3d_element's load fe with the nodal source q_elem[e] at all 8 corners (the N_c sum
 * to 1). Returns 0, or -(e+1) for the first element e whose Jacobian is not positive. */
int fem3d_element_source_load(int n_elem, const int *restrict elements, const double *restrict xyz,
                              const double *restrict q_elem, double *restrict rhs)
{
    for (int e = 0; e < n_elem; e++) {
        const int *node = elements + 8 * (long)e;
        double xyz_e[24], q_e[8], ke[64], fe[8];
        for (int a = 0; a < 8; a++) {                 /* gather the element's corners */
            for (int d = 0; d < 3; d++)
                xyz_e[3 * a + d] = xyz[3 * (long)node[a] + d];
            q_e[a] = q_elem[e];
        }
        if (fem3d_element(xyz_e, 0.0, q_e, ke, fe) != 0)
            return -(e + 1);
        for (int a = 0; a < 8; a++)
            rhs[node[a]] += fe[a];
    }
    return 0;
}
/* [fem3d_element_source_load] */

/* [fem3d_face_flux]
 * Load of a heat flux qflux into the body through n_face bilinear quadrilaterals with the corners
 * faces[4*f + c] (cyclic order), by 2x2 Gauss quadrature on the reference square [-1,1]^2, whose
 * corner c sits at (S[c], T[c]) with N_c = (1 + s S[c]) (1 + t T[c]) / 4. The surface element
 * dA = |dx/ds x dx/dt| ds dt is the area of the parallelogram spanned by the two tangent vectors:
 *   rhs_c += sum_g N_c qflux |dx/ds x dx/dt|. */
void fem3d_face_flux(int n_face, const int *restrict faces, const double *restrict xyz,
                     double qflux, double *restrict rhs)
{
    static const double S[4] = {-1.0, 1.0, 1.0, -1.0};
    static const double T[4] = {-1.0, -1.0, 1.0, 1.0};
    const double gp = 1.0 / sqrt(3.0);
    const double pts[2] = {-gp, gp};
    for (int f = 0; f < n_face; f++) {
        const int *node = faces + 4 * (long)f;
        for (int gt = 0; gt < 2; gt++)
            for (int gs = 0; gs < 2; gs++) {
                double s = pts[gs], t = pts[gt], n[4], ds[3] = {0.0, 0.0, 0.0},
                       dt[3] = {0.0, 0.0, 0.0};
                for (int c = 0; c < 4; c++) {         /* the tangents dx/ds and dx/dt */
                    n[c] = 0.25 * (1.0 + s * S[c]) * (1.0 + t * T[c]);
                    for (int d = 0; d < 3; d++) {
                        double x = xyz[3 * (long)node[c] + d];
                        ds[d] += x * 0.25 * S[c] * (1.0 + t * T[c]);
                        dt[d] += x * 0.25 * T[c] * (1.0 + s * S[c]);
                    }
                }
                double cx = ds[1] * dt[2] - ds[2] * dt[1];
                double cy = ds[2] * dt[0] - ds[0] * dt[2];
                double cz = ds[0] * dt[1] - ds[1] * dt[0];
                double area = sqrt(cx * cx + cy * cy + cz * cz);
                for (int c = 0; c < 4; c++)
                    rhs[node[c]] += n[c] * qflux * area;
            }
    }
}
/* [fem3d_face_flux] */
