/* fem3d's problem: the six lines of its input file and the exact solution (fem3d_problem.h) */
#include <limits.h>
#include <string.h>

#include "fem3d_problem.h"

const char *const FEM3D_FACES[6] = {"xmin", "xmax", "ymin", "ymax", "zmin", "zmax"};

const char *const FEM3D_SOURCES[2] = {"constant", "nakajima"};

const int FEM3D_CORNER[8][3] = {{0, 0, 0}, {1, 0, 0}, {1, 1, 0}, {0, 1, 0},
                                {0, 0, 1}, {1, 0, 1}, {1, 1, 1}, {0, 1, 1}};

/* Line 3, COND QVOL [SOURCE]: the optional third word is SOURCE if it starts with a lowercase
 * letter (the words of the choices do), else a comment (files written before the word existed
 * say "COND QVOL" there). */
static void read_material(input_file *restrict in, fem3d_problem *restrict p)
{
    const char *what = "COND QVOL: conductivity, heat source";
    char line[1024], word[128];
    input_line(in, line, sizeof line, what);
    char *cursor = line;
    double material[2];
    input_parse_reals(in, &cursor, 2, material, what);
    input_require_positive(in, material[0], "COND");
    p->cond = material[0];
    p->qvol = material[1];
    p->source = FEM3D_SOURCE_CONSTANT;
    if (!input_next_word(&cursor, word, sizeof word) || word[0] < 'a' || word[0] > 'z')
        return;
    for (int k = 0; k < 2; k++)
        if (strcmp(word, FEM3D_SOURCES[k]) == 0) {
            p->source = k;
            return;
        }
    input_fail(in, "unknown heat source '%s': expected constant or nakajima (COND QVOL SOURCE)",
               word);
}

void fem3d_read_problem(input_file *restrict in, fem3d_problem *restrict p)
{
    input_ints(in, 3, p->nel, "NX NY NZ: number of elements");
    input_require_positive(in, p->nel[0], "NX");
    input_require_positive(in, p->nel[1], "NY");
    input_require_positive(in, p->nel[2], "NZ");
    /* the nonzeros, in floating point: the product could overflow any integer */
    double nnz = (3.0 * p->nel[0] + 1) * (3.0 * p->nel[1] + 1) * (3.0 * p->nel[2] + 1);
    if (nnz > INT_MAX)
        input_fail(in, "mesh too large: more than %d nonzeros", INT_MAX);
    input_reals(in, 3, p->size, "DX DY DZ: element size");
    input_require_positive(in, p->size[0], "DX");
    input_require_positive(in, p->size[1], "DY");
    input_require_positive(in, p->size[2], "DZ");
    read_material(in, p);
    input_reals(in, 1, &p->qflux, "QFLUX: heat flux through the face opposite to the fixed one");
    p->fixed_face = input_choice(in, 6, FEM3D_FACES, "FIXED: the face with T = 0");
    input_reals(in, 1, &p->eps, "EPS: CG tolerance");
    input_require_positive(in, p->eps, "EPS");
}

/* s is the distance from the flux face, opposite to the fixed one, across a box of thickness Z:
 * T(s) = QVOL (Z^2 - s^2) / (2 COND) + QFLUX (Z - s) / COND */
double fem3d_exact_at(const fem3d_problem *p, const int i[3])
{
    const int axis = p->fixed_face / 2, n = p->nel[axis];
    const double h = p->size[axis], z = n * h;
    double s = (p->fixed_face % 2 ? i[axis] : n - i[axis]) * h;
    return p->qvol * (z * z - s * s) / (2.0 * p->cond) + p->qflux * (z - s) / p->cond;
}
