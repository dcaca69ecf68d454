/* fem3d: 3D steady heat conduction on a box of tri-linear hexahedra, standalone.
 *
 *   usage: fem3d_c INPUT [OUTPUT.vtk]
 *
 * INPUT, one group of values per line, anything after them is a comment:
 *   NX NY NZ        number of elements in x, y, z (> 0)
 *   DX DY DZ        element size in x, y, z (> 0)
 *   COND QVOL       thermal conductivity (> 0), volumetric heat source, and optionally the word
 *                   constant (the default: QVOL everywhere) or nakajima (QVOL |x_c + y_c| on
 *                   each element, (x_c, y_c) its centroid: the heat generation of Nakajima's FEM
 *                   course code); another word in lowercase there is an error, any other word
 *                   a comment
 *   QFLUX           heat flux into the body through the face opposite to the fixed one
 *   FIXED           the face with T = 0: xmin, xmax, ymin, ymax, zmin or zmax
 *   EPS             CG tolerance on ||r|| / ||b|| (> 0)
 * The other four faces are insulated. The exact solution depends only on the distance s from the
 * flux face (the box is Z thick in that direction):
 *   T(s) = QVOL (Z^2 - s^2) / (2 COND) + QFLUX (Z - s) / COND.
 * Prints a summary that checks the nodal values against it (with nakajima, which has no exact
 * solution: the largest temperature only); with OUTPUT.vtk also writes the
 * temperature as a legacy VTK file (ParaView, meshio). Exit status: 0 converged, 1 not converged
 * (or out of memory), 2 bad input or output file. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "course.h"
#include "fem3d_problem.h"
#include "input.h"

typedef fem3d_problem problem;

static problem read_input(const char *path)
{
    problem p;
    input_file in;
    input_open(&in, "fem3d", path);
    fem3d_read_problem(&in, &p);
    input_close(&in);
    return p;
}

static long count_nodes(const problem *p)
{
    return (long)(p->nel[0] + 1) * (p->nel[1] + 1) * (p->nel[2] + 1);
}

static long count_elements(const problem *p)
{
    return (long)p->nel[0] * p->nel[1] * p->nel[2];
}

/* global number of node (i[0], i[1], i[2]) */
static int node_number(const problem *p, const int i[3])
{
    return i[0] + (p->nel[0] + 1) * (i[1] + (p->nel[1] + 1) * i[2]);
}

/* coordinates xyz[3n + d] of every node n, and the 8 corners of every element (local order: the
 * bottom face k counter-clockwise, then the top face k+1) */
static void build_mesh(const problem *p, double *restrict xyz, int *restrict elements)
{
    int i[3];
    for (i[2] = 0; i[2] <= p->nel[2]; i[2]++)
        for (i[1] = 0; i[1] <= p->nel[1]; i[1]++)
            for (i[0] = 0; i[0] <= p->nel[0]; i[0]++)
                for (int d = 0; d < 3; d++)
                    xyz[3 * (long)node_number(p, i) + d] = i[d] * p->size[d];
    long e = 0;
    for (i[2] = 0; i[2] < p->nel[2]; i[2]++)
        for (i[1] = 0; i[1] < p->nel[1]; i[1]++)
            for (i[0] = 0; i[0] < p->nel[0]; i[0]++, e++)
                for (int a = 0; a < 8; a++) {
                    int corner[3] = {i[0] + FEM3D_CORNER[a][0], i[1] + FEM3D_CORNER[a][1],
                                     i[2] + FEM3D_CORNER[a][2]};
                    elements[8 * e + a] = node_number(p, corner);
                }
}

/* index of a node along the axis of `face` at which the face lies: 0 or nel[axis] */
static int face_index(const problem *p, int face)
{
    return face % 2 ? p->nel[face / 2] : 0;
}

/* The boundary quads of `face` in cyclic order, in the plane of the two other axes u, v (cyclic:
 * x -> (y, z), y -> (z, x), z -> (x, y)). Returns their number. */
static long face_quads(const problem *p, int face, int *restrict quads)
{
    const int axis = face / 2, u = (axis + 1) % 3, v = (axis + 2) % 3;
    static const int STEP[4][2] = {{0, 0}, {1, 0}, {1, 1}, {0, 1}};
    int i[3];
    long f = 0;
    i[axis] = face_index(p, face);
    for (i[v] = 0; i[v] < p->nel[v]; i[v]++)
        for (i[u] = 0; i[u] < p->nel[u]; i[u]++, f++)
            for (int c = 0; c < 4; c++) {
                int corner[3] = {i[0], i[1], i[2]};
                corner[u] += STEP[c][0];
                corner[v] += STEP[c][1];
                quads[4 * f + c] = node_number(p, corner);
            }
    return f;
}

/* The exact solution at every node */
static void exact_solution(const problem *p, double *restrict t_exact)
{
    int i[3];
    for (i[2] = 0; i[2] <= p->nel[2]; i[2]++)
        for (i[1] = 0; i[1] <= p->nel[1]; i[1]++)
            for (i[0] = 0; i[0] <= p->nel[0]; i[0]++)
                t_exact[node_number(p, i)] = fem3d_exact_at(p, i);
}

/* 0/1 flags of the nodes on the fixed face */
static void fixed_nodes(const problem *p, int *restrict fixed)
{
    const int axis = p->fixed_face / 2, on_face = face_index(p, p->fixed_face);
    int i[3];
    for (i[2] = 0; i[2] <= p->nel[2]; i[2]++)
        for (i[1] = 0; i[1] <= p->nel[1]; i[1]++)
            for (i[0] = 0; i[0] <= p->nel[0]; i[0]++)
                fixed[node_number(p, i)] = i[axis] == on_face;
}

/* legacy ASCII VTK, unstructured grid of hexahedra (VTK's cell type 12 numbers its corners as we
 * do) with the temperature as point data. Returns 0, or -1 if the file cannot be written. */
static int write_vtk(const char *path, long n_node, long n_elem, const double *restrict xyz,
                     const int *restrict elements, const double *restrict t)
{
    FILE *out = fopen(path, "w");
    if (out == NULL)
        return -1;
    fprintf(out, "# vtk DataFile Version 3.0\nfem3d temperature\nASCII\n"
                 "DATASET UNSTRUCTURED_GRID\nPOINTS %ld double\n", n_node);
    for (long n = 0; n < n_node; n++)
        fprintf(out, "%.15g %.15g %.15g\n", xyz[3 * n], xyz[3 * n + 1], xyz[3 * n + 2]);
    fprintf(out, "CELLS %ld %ld\n", n_elem, 9 * n_elem);
    for (long e = 0; e < n_elem; e++) {
        fprintf(out, "8");
        for (int a = 0; a < 8; a++)
            fprintf(out, " %d", elements[8 * e + a]);
        fprintf(out, "\n");
    }
    fprintf(out, "CELL_TYPES %ld\n", n_elem);
    for (long e = 0; e < n_elem; e++)
        fprintf(out, "12\n");
    fprintf(out, "POINT_DATA %ld\nSCALARS temperature double 1\nLOOKUP_TABLE default\n", n_node);
    for (long n = 0; n < n_node; n++)
        fprintf(out, "%.15g\n", t[n]);
    return fclose(out) == 0 ? 0 : -1;
}

static void out_of_memory(const problem *p)
{
    fprintf(stderr, "fem3d: out of memory for NX NY NZ = %d %d %d\n", p->nel[0], p->nel[1],
            p->nel[2]);
    exit(1);
}

static void *checked_alloc(const problem *p, long count, size_t size)
{
    void *mem = calloc((size_t)count, size);
    if (mem == NULL)
        out_of_memory(p);
    return mem;
}

static double max_of(long n, const double *restrict v)
{
    double m = v[0];
    for (long i = 1; i < n; i++)
        m = fmax(m, v[i]);
    return m;
}

/* The load of Nakajima's source, QVOL |x_c + y_c| on each element, added into rhs; returns
 * nonzero for a degenerate element. */
static int add_nakajima_load(const problem *p, long n_elem, const int *restrict elements,
                             const double *restrict xyz, double *restrict rhs)
{
    double *q_elem = checked_alloc(p, n_elem, sizeof(double));
    fem3d_nakajima_source((int)n_elem, elements, xyz, p->qvol, q_elem);
    int status = fem3d_element_source_load((int)n_elem, elements, xyz, q_elem, rhs);
    free(q_elem);
    return status;
}

/* The summary: sizes, problem, CG, and the temperature against the exact solution (constant
 * source), or its maximum alone (nakajima: no exact solution) */
static void print_summary(const problem *p, long n, long nnz, int iters, double relres,
                          const double *restrict t, const double *restrict t_exact)
{
    const int flux_face = p->fixed_face ^ 1;
    printf("fem3d (C): %d x %d x %d elements, %ld unknowns, %ld nonzeros\n", p->nel[0], p->nel[1],
           p->nel[2], n, nnz);
    if (p->source == FEM3D_SOURCE_NAKAJIMA)
        printf("  T = 0 on %s, heat flux %g into %s, source %g |x_c + y_c| (nakajima), "
               "conductivity %g\n", FEM3D_FACES[p->fixed_face], p->qflux, FEM3D_FACES[flux_face],
               p->qvol, p->cond);
    else
        printf("  T = 0 on %s, heat flux %g into %s, source %g, conductivity %g\n",
               FEM3D_FACES[p->fixed_face], p->qflux, FEM3D_FACES[flux_face], p->qvol, p->cond);
    printf("  CG: %d iterations, relative residual %.3e (%s)\n", iters, relres,
           relres <= p->eps ? "converged" : "NOT converged");
    if (p->source == FEM3D_SOURCE_NAKAJIMA) {
        printf("  max T = %.10g   (no exact solution for this source)\n", max_of(n, t));
        return;
    }
    double err = 0.0;
    for (long i = 0; i < n; i++)
        err = fmax(err, fabs(t[i] - t_exact[i]));
    printf("  max T = %.10g   should be %.10g\n", max_of(n, t), max_of(n, t_exact));
    printf("  max nodal error %.3e (should be near round-off and the CG tolerance: the elements"
           " are nodally exact here)\n", err);
}

int main(int argc, char **argv)
{
    if (argc < 2 || argc > 3) {
        fprintf(stderr, "usage: %s INPUT [OUTPUT.vtk]\n", argv[0]);
        return 2;
    }
    const problem p = read_input(argv[1]);
    const long n = count_nodes(&p), n_elem = count_elements(&p);
    const int flux_face = p.fixed_face ^ 1;                    /* the opposite face */
    const long nnz = (3L * p.nel[0] + 1) * (3L * p.nel[1] + 1) * (3L * p.nel[2] + 1);
    const long n_quad = count_elements(&p) / p.nel[flux_face / 2];

    double *xyz = checked_alloc(&p, 3 * n, sizeof(double));
    int *elements = checked_alloc(&p, 8 * n_elem, sizeof(int));
    int *quads = checked_alloc(&p, 4 * n_quad, sizeof(int));
    int *row_ptr = checked_alloc(&p, n + 1, sizeof(int));
    int *col_idx = checked_alloc(&p, nnz, sizeof(int));
    int *fixed = checked_alloc(&p, n, sizeof(int));
    double *val = checked_alloc(&p, nnz, sizeof(double));
    double *rhs = checked_alloc(&p, n, sizeof(double));
    double *q = checked_alloc(&p, n, sizeof(double)), *g = checked_alloc(&p, n, sizeof(double));
    double *t = checked_alloc(&p, n, sizeof(double));
    double *t_exact = checked_alloc(&p, n, sizeof(double));

    build_mesh(&p, xyz, elements);
    const int nakajima = p.source == FEM3D_SOURCE_NAKAJIMA;
    for (long i = 0; i < n; i++)              /* a constant source, or nakajima's (below) */
        q[i] = nakajima ? 0.0 : p.qvol;
    fem3d_pattern(p.nel[0], p.nel[1], p.nel[2], row_ptr, col_idx);
    if (fem3d_assemble((int)n_elem, elements, xyz, p.cond, q, row_ptr, col_idx, val, rhs) != 0
        || (nakajima && add_nakajima_load(&p, n_elem, elements, xyz, rhs) != 0)) {
        fprintf(stderr, "fem3d: degenerate elements (det J <= 0): DX DY DZ too small\n");
        return 1;
    }
    face_quads(&p, flux_face, quads);
    fem3d_face_flux((int)n_quad, quads, xyz, p.qflux, rhs);
    fixed_nodes(&p, fixed);
    crs_dirichlet((int)n, fixed, g, row_ptr, col_idx, val, rhs);  /* g = 0: T = 0 there */
    double relres;
    int max_iter = 10 * n <= INT_MAX ? 10 * (int)n : INT_MAX;  /* 10 n, if it fits */
    int iters = pcg_jacobi((int)n, row_ptr, col_idx, val, rhs, t, p.eps, max_iter, &relres);
    if (iters < 0)
        out_of_memory(&p);

    exact_solution(&p, t_exact);
    print_summary(&p, n, nnz, iters, relres, t, t_exact);
    int status = relres <= p.eps ? 0 : 1;
    if (argc == 3) {
        if (write_vtk(argv[2], n, n_elem, xyz, elements, t) != 0) {
            fprintf(stderr, "fem3d: %s: cannot write output file: %s\n", argv[2], strerror(errno));
            status = 2;
        } else {
            printf("  wrote %s\n", argv[2]);
        }
    }
    free(xyz), free(elements), free(quads), free(row_ptr), free(col_idx), free(fixed);
    free(val), free(rhs), free(q), free(g), free(t), free(t_exact);
    return status;
}
