/* fem3d's problem: the six lines of its input file (see fem3d_main.c), read for fem3d_c and for
 * fem3d_mpi_c, which reads a 7th line after them, and the exact solution. */
#ifndef COURSE_FEM3D_PROBLEM_H
#define COURSE_FEM3D_PROBLEM_H
#include "input.h"

/* the faces of the box, in the order of fem3d_problem.fixed_face */
extern const char *const FEM3D_FACES[6];

/* the heat sources that line 3 may name after COND QVOL, in the order of fem3d_problem.source:
 * QVOL everywhere (the default), or Nakajima's QVOL |x_c + y_c| on each element (fem3d.c's
 * fem3d_nakajima_source), which has no exact solution */
extern const char *const FEM3D_SOURCES[2];
enum { FEM3D_SOURCE_CONSTANT, FEM3D_SOURCE_NAKAJIMA };

/* the 8 corners of an element (i, j, k) in fem3d's order, as offsets from node (i, j, k): the
 * bottom face counter-clockwise, then the top face (VTK's hexahedron numbers them alike) */
extern const int FEM3D_CORNER[8][3];

typedef struct {
    int nel[3];          /* elements in x, y, z */
    double size[3];      /* element size in x, y, z */
    double cond, qvol, qflux, eps;
    int source;          /* index into FEM3D_SOURCES */
    int fixed_face;      /* index into FEM3D_FACES: axis = face / 2, the max side if face is odd */
} fem3d_problem;

/* Reads lines 1-6 (NX NY NZ, DX DY DZ, COND QVOL [SOURCE], QFLUX, FIXED, EPS) from the open file
 * `in` and checks them; a bad line exits with status 2 through the reader. Leaves `in` open.
 * SOURCE: a third word on line 3 that starts with a lowercase letter names the source (constant
 * or nakajima; another such word is an error); anything else there is a comment, as on every
 * line. */
void fem3d_read_problem(input_file *restrict in, fem3d_problem *restrict p);

/* The exact solution (of the constant source) at node (i[0], i[1], i[2]) */
double fem3d_exact_at(const fem3d_problem *p, const int i[3]);

#endif
