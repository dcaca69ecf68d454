/* fem3d_mpi: fem3d (lecture 02) on P MPI ranks, the nodes cut into PX x PY x PZ blocks.
 *
 *   usage: mpiexec -n P fem3d_mpi_c INPUT [OUTPUT.pvtu]
 *
 * INPUT is fem3d's input file (see src_c/02_fem3d/fem3d_main.c) with a 7th line
 *   PX PY PZ        number of parts along x, y, z (> 0, PX PY PZ = P, PX <= NX + 1, ...)
 * The NX + 1 node indices along x are cut into PX parts: part p holds i in [start(p), start(p+1)),
 * start(p) = p (NX + 1) / PX; the same along y and z. Rank px + PX (py + PY pz) owns the nodes of
 * block (px, py, pz). Each rank builds its local data by itself, GeoFEM style (there is no global
 * mesh anywhere):
 *   internal nodes   the nodes it owns, in ascending global number;
 *   local elements   the elements with an internal corner, in ascending global number: the block
 *                    plus one layer of elements towards every neighbouring block (the overlap);
 *   external nodes   the other corners of the local elements, by owner rank, then global number;
 * and the import/export tables of halo.h. It assembles with fem3d's kernels (its internal rows come
 * out equal to the serial ones) and solves with pcg_jacobi_mpi. Rank 0 prints fem3d's summary, with
 * global numbers, and a line on the partition. With OUTPUT.pvtu, rank r writes the piece STEM_r.vtu
 * (VTK XML: its local nodes and the elements whose corner 0 it owns, so that every element is in
 * exactly one piece) and rank 0 the file OUTPUT.pvtu that gathers the pieces (ParaView).
 * Exit status, the same on every rank: 0 converged, 1 not converged (or out of memory), 2 bad input
 * or output file. Only rank 0 prints, and an error is one line on stderr. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <mpi.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "course.h"
#include "fem3d_problem.h"
#include "halo.h"
#include "input.h"

#define PROG "fem3d_mpi_c"

static const char *const PART_NAMES[3] = {"PX", "PY", "PZ"};

typedef struct {
    fem3d_problem fem;   /* fem3d's six lines */
    int parts[3];        /* PX PY PZ */
} problem;

/* fem3d's input (the same messages, from the same reader) plus line 7, checked against the job */
static problem read_input(const char *path, int n_ranks)
{
    problem p;
    input_file in;
    input_open(&in, PROG, path);
    fem3d_read_problem(&in, &p.fem);
    input_ints(&in, 3, p.parts, "PX PY PZ: number of parts along x, y, z");
    for (int d = 0; d < 3; d++)
        input_require_positive(&in, p.parts[d], PART_NAMES[d]);
    double n_parts = (double)p.parts[0] * p.parts[1] * p.parts[2];   /* may overflow an int */
    if (n_parts != n_ranks)
        input_fail(&in, "PX PY PZ = %d %d %d make %.0f parts, but the job has %d ranks",
                   p.parts[0], p.parts[1], p.parts[2], n_parts, n_ranks);
    for (int d = 0; d < 3; d++)
        if (p.parts[d] > p.fem.nel[d] + 1)
            input_fail(&in, "%s = %d parts but only %d nodes along %c", PART_NAMES[d], p.parts[d],
                       p.fem.nel[d] + 1, "xyz"[d]);
    input_close(&in);
    return p;
}

/* ---- the partition: boxes of node indices ---------------------------------------------------- */

typedef struct {
    int lo[3], hi[3];    /* the nodes (i[0], i[1], i[2]) with lo[d] <= i[d] < hi[d] */
} box;

static long box_count(const box *b)
{
    long count = 1;
    for (int d = 0; d < 3; d++)
        count *= b->hi[d] > b->lo[d] ? b->hi[d] - b->lo[d] : 0;
    return count;
}

/* the nodes of part (part[0], part[1], part[2]): start(p) = p (N + 1) / P along each axis */
static box owned_box(const problem *p, const int part[3])
{
    box b;
    for (int d = 0; d < 3; d++) {
        long n_nodes = p->fem.nel[d] + 1;
        b.lo[d] = (int)(part[d] * n_nodes / p->parts[d]);
        b.hi[d] = (int)((part[d] + 1) * n_nodes / p->parts[d]);
    }
    return b;
}

/* b and one more layer of nodes on every side, within the mesh: the corners of the elements that
 * have a corner in b */
static box grown_box(const problem *p, const box *b)
{
    box g;
    for (int d = 0; d < 3; d++) {
        g.lo[d] = b->lo[d] > 0 ? b->lo[d] - 1 : 0;
        g.hi[d] = b->hi[d] <= p->fem.nel[d] ? b->hi[d] + 1 : p->fem.nel[d] + 1;
    }
    return g;
}

static box intersection(const box *a, const box *b)
{
    box c;
    for (int d = 0; d < 3; d++) {
        c.lo[d] = a->lo[d] > b->lo[d] ? a->lo[d] : b->lo[d];
        c.hi[d] = a->hi[d] < b->hi[d] ? a->hi[d] : b->hi[d];
    }
    return c;
}

static int rank_of(const problem *p, const int part[3])
{
    return part[0] + p->parts[0] * (part[1] + p->parts[1] * part[2]);
}

/* ---- the local data of one rank -------------------------------------------------------------- */

enum { MAX_NEIGHBOURS = 26 };    /* the blocks around a block */

typedef struct {
    box owned;           /* the internal nodes */
    box local;           /* all local nodes: the owned box grown by one layer */
    box elem;            /* local elements: element (i, j, k) has corners i..i+1, j..j+1, k..k+1 */
    int n_internal, n_local, n_elem, n_quad, n_export;
    int n_neighbours;
    int neighbours[MAX_NEIGHBOURS];              /* their ranks, ascending */
    int neighbour_part[MAX_NEIGHBOURS][3];
    int import_ptr[MAX_NEIGHBOURS + 1], export_ptr[MAX_NEIGHBOURS + 1];
    int *import_index, *export_index;
    int *local_of;       /* the local number of each node of the local box, by position in it */
    int *grid;           /* grid[3 a + d]: index along axis d of local node a */
    int *elements;       /* the 8 local corners of every local element, fem3d's corner order */
    int *quads;          /* the 4 local corners of every flux-face quad of a local element */
} local_mesh;

/* The sizes of rank `rank`'s local data, from the partition alone (no communication): the node
 * boxes, the neighbours and how many nodes go to and come from each of them. */
static void plan_local_mesh(const problem *p, int rank, local_mesh *m)
{
    int part[3] = {rank % p->parts[0], rank / p->parts[0] % p->parts[1],
                   rank / (p->parts[0] * p->parts[1])};
    m->owned = owned_box(p, part);
    m->local = grown_box(p, &m->owned);
    m->n_internal = (int)box_count(&m->owned);
    m->n_local = (int)box_count(&m->local);
    for (int d = 0; d < 3; d++) {           /* element i has corners i and i + 1 */
        m->elem.lo[d] = m->local.lo[d];
        m->elem.hi[d] = m->local.hi[d] - 1;
    }
    m->n_elem = (int)box_count(&m->elem);

    const int flux_face = p->fem.fixed_face ^ 1, axis = flux_face / 2;
    const int layer = flux_face % 2 ? p->fem.nel[axis] - 1 : 0; /* the elements at the face */
    box face_layer = {{0, 0, 0}, {p->fem.nel[0], p->fem.nel[1], p->fem.nel[2]}};
    face_layer.lo[axis] = layer;
    face_layer.hi[axis] = layer + 1;
    box on_face = intersection(&m->elem, &face_layer);    /* empty if the block is not there */
    m->n_quad = (int)box_count(&on_face);

    /* The neighbours: the existing blocks around this one, dz outermost and dx innermost, which
     * gives ascending ranks. Each owns some nodes of our grown box (we import them) and its grown
     * box holds some of our nodes (we export them): the relation is symmetric. */
    m->n_neighbours = 0;
    m->import_ptr[0] = m->export_ptr[0] = 0;
    int shift[3];
    for (shift[2] = -1; shift[2] <= 1; shift[2]++)
        for (shift[1] = -1; shift[1] <= 1; shift[1]++)
            for (shift[0] = -1; shift[0] <= 1; shift[0]++) {
                int other[3], exists = 1;
                for (int d = 0; d < 3; d++) {
                    other[d] = part[d] + shift[d];
                    exists = exists && other[d] >= 0 && other[d] < p->parts[d];
                }
                if (!exists || (shift[0] == 0 && shift[1] == 0 && shift[2] == 0))
                    continue;
                const int nb = m->n_neighbours++;
                box theirs = owned_box(p, other), their_local = grown_box(p, &theirs);
                box imported = intersection(&theirs, &m->local);
                box exported = intersection(&m->owned, &their_local);
                m->neighbours[nb] = rank_of(p, other);
                memcpy(m->neighbour_part[nb], other, sizeof other);
                m->import_ptr[nb + 1] = m->import_ptr[nb] + (int)box_count(&imported);
                m->export_ptr[nb + 1] = m->export_ptr[nb] + (int)box_count(&exported);
            }
    m->n_export = m->export_ptr[m->n_neighbours];
}

/* calloc that notes a failure in *failed instead of stopping: the ranks agree on it afterwards */
static void *alloc_zeroed(long count, size_t size, int *failed)
{
    void *mem = calloc(count > 0 ? (size_t)count : 1, size);
    if (mem == NULL)
        *failed = 1;
    return mem;
}

static void alloc_local_mesh(local_mesh *m, int *failed)
{
    m->import_index = alloc_zeroed(m->n_local - m->n_internal, sizeof(int), failed);
    m->export_index = alloc_zeroed(m->n_export, sizeof(int), failed);
    m->local_of = alloc_zeroed(m->n_local, sizeof(int), failed);
    m->grid = alloc_zeroed(3L * m->n_local, sizeof(int), failed);
    m->elements = alloc_zeroed(8L * m->n_elem, sizeof(int), failed);
    m->quads = alloc_zeroed(4L * m->n_quad, sizeof(int), failed);
}

static void free_local_mesh(local_mesh *m)
{
    free(m->import_index), free(m->export_index), free(m->local_of), free(m->grid);
    free(m->elements), free(m->quads);
}

/* position of node i in the local box (i must lie in it) */
static long local_position(const local_mesh *m, const int i[3])
{
    const box *b = &m->local;
    return (i[0] - b->lo[0])
           + (long)(b->hi[0] - b->lo[0])
                 * ((i[1] - b->lo[1]) + (long)(b->hi[1] - b->lo[1]) * (i[2] - b->lo[2]));
}

/* Gives the nodes of box b the local numbers next, next + 1, ... in ascending global number
 * (k outermost, i innermost); returns the next free number. */
static int number_nodes(local_mesh *m, const box *b, int next)
{
    int i[3];
    for (i[2] = b->lo[2]; i[2] < b->hi[2]; i[2]++)
        for (i[1] = b->lo[1]; i[1] < b->hi[1]; i[1]++)
            for (i[0] = b->lo[0]; i[0] < b->hi[0]; i[0]++, next++) {
                m->local_of[local_position(m, i)] = next;
                for (int d = 0; d < 3; d++)
                    m->grid[3L * next + d] = i[d];
            }
    return next;
}

/* The local numbers of the nodes of box b, ascending global number, into list; returns how many. */
static int list_nodes(const local_mesh *m, const box *b, int *restrict list)
{
    int i[3], count = 0;
    for (i[2] = b->lo[2]; i[2] < b->hi[2]; i[2]++)
        for (i[1] = b->lo[1]; i[1] < b->hi[1]; i[1]++)
            for (i[0] = b->lo[0]; i[0] < b->hi[0]; i[0]++)
                list[count++] = m->local_of[local_position(m, i)];
    return count;
}

/* Internal nodes first, then the external ones neighbour by neighbour (ascending rank), each
 * group in ascending global number; the import and export lists in the same orders. */
static void number_local_nodes(const problem *p, local_mesh *m)
{
    int next = number_nodes(m, &m->owned, 0);
    for (int nb = 0; nb < m->n_neighbours; nb++) {
        box theirs = owned_box(p, m->neighbour_part[nb]);
        box imported = intersection(&theirs, &m->local);
        next = number_nodes(m, &imported, next);
    }
    for (int k = 0; k < m->n_local - m->n_internal; k++)
        m->import_index[k] = m->n_internal + k;
    for (int nb = 0; nb < m->n_neighbours; nb++) {
        box theirs = owned_box(p, m->neighbour_part[nb]), their_local = grown_box(p, &theirs);
        box exported = intersection(&m->owned, &their_local);
        list_nodes(m, &exported, m->export_index + m->export_ptr[nb]);
    }
}

/* the local elements in ascending global number, with fem3d's corner order (build_mesh) */
static void build_local_elements(local_mesh *m)
{
    static const int CORNER[8][3] = {{0, 0, 0}, {1, 0, 0}, {1, 1, 0}, {0, 1, 0},
                                     {0, 0, 1}, {1, 0, 1}, {1, 1, 1}, {0, 1, 1}};
    const box *b = &m->elem;
    int i[3];
    long e = 0;
    for (i[2] = b->lo[2]; i[2] < b->hi[2]; i[2]++)
        for (i[1] = b->lo[1]; i[1] < b->hi[1]; i[1]++)
            for (i[0] = b->lo[0]; i[0] < b->hi[0]; i[0]++, e++)
                for (int a = 0; a < 8; a++) {
                    int corner[3] = {i[0] + CORNER[a][0], i[1] + CORNER[a][1], i[2] + CORNER[a][2]};
                    m->elements[8 * e + a] = m->local_of[local_position(m, corner)];
                }
}

/* The flux-face quads of the local elements, in fem3d's order (face_quads: cyclic axes u, v of the
 * face, v outermost), so that every internal node gets its loads in the serial order. */
static void build_local_flux_quads(const problem *p, local_mesh *m)
{
    static const int STEP[4][2] = {{0, 0}, {1, 0}, {1, 1}, {0, 1}};
    const int face = p->fem.fixed_face ^ 1, axis = face / 2;
    const int u = (axis + 1) % 3, v = (axis + 2) % 3;
    if (m->n_quad == 0)
        return;
    int i[3];
    long f = 0;
    i[axis] = face % 2 ? p->fem.nel[axis] : 0;
    for (i[v] = m->elem.lo[v]; i[v] < m->elem.hi[v]; i[v]++)
        for (i[u] = m->elem.lo[u]; i[u] < m->elem.hi[u]; i[u]++, f++)
            for (int c = 0; c < 4; c++) {
                int corner[3] = {i[0], i[1], i[2]};
                corner[u] += STEP[c][0];
                corner[v] += STEP[c][1];
                m->quads[4 * f + c] = m->local_of[local_position(m, corner)];
            }
}

/* ---- the local system ------------------------------------------------------------------------ */

typedef struct {
    long nnz;            /* of all n_local rows */
    int *row_ptr, *col_idx, *fixed;
    double *val, *rhs, *q, *g, *xyz, *t, *t_exact, *send_buf, *recv_buf;
} local_system;

/* the entries of the local rows: a node and its grid neighbours in the local box, which holds
 * w = hi - lo nodes along each axis: sum over the box of (1 + 2 + ... ) = prod (3 w - 2) */
static long local_nonzeros(const local_mesh *m)
{
    long nnz = 1;
    for (int d = 0; d < 3; d++)
        nnz *= 3L * (m->local.hi[d] - m->local.lo[d]) - 2;
    return nnz;
}

static void alloc_local_system(const local_mesh *m, local_system *s, int *failed)
{
    const long n = m->n_local;
    s->nnz = local_nonzeros(m);
    s->row_ptr = alloc_zeroed(n + 1, sizeof(int), failed);
    s->col_idx = alloc_zeroed(s->nnz, sizeof(int), failed);
    s->fixed = alloc_zeroed(n, sizeof(int), failed);
    s->val = alloc_zeroed(s->nnz, sizeof(double), failed);
    s->rhs = alloc_zeroed(n, sizeof(double), failed);
    s->q = alloc_zeroed(n, sizeof(double), failed);
    s->g = alloc_zeroed(n, sizeof(double), failed);
    s->xyz = alloc_zeroed(3 * n, sizeof(double), failed);
    s->t = alloc_zeroed(n, sizeof(double), failed);
    s->t_exact = alloc_zeroed(n, sizeof(double), failed);
    s->send_buf = alloc_zeroed(m->n_export, sizeof(double), failed);
    s->recv_buf = alloc_zeroed(n - m->n_internal, sizeof(double), failed);
}

static void free_local_system(local_system *s)
{
    free(s->row_ptr), free(s->col_idx), free(s->fixed), free(s->val), free(s->rhs), free(s->q);
    free(s->g), free(s->xyz), free(s->t), free(s->t_exact), free(s->send_buf), free(s->recv_buf);
}

/* [local_pattern]
 * The CRS pattern over all local rows and columns: row a holds every local node among the 27 grid
 * neighbours of node a (fem3d_pattern's rule, within the local box instead of the mesh). With dk
 * outermost and di innermost the columns are in ascending GLOBAL number, as in the serial matrix:
 * an internal row is the serial row, entry by entry. External rows lack the neighbours outside the
 * local box; they are assembled only partly and the solver never reads them. */
static void local_pattern(const local_mesh *m, int *restrict row_ptr, int *restrict col_idx)
{
    int pos = 0;
    for (int a = 0; a < m->n_local; a++) {
        const int *i = m->grid + 3L * a;
        int j[3];
        row_ptr[a] = pos;
        for (j[2] = i[2] - 1; j[2] <= i[2] + 1; j[2]++)
            for (j[1] = i[1] - 1; j[1] <= i[1] + 1; j[1]++)
                for (j[0] = i[0] - 1; j[0] <= i[0] + 1; j[0]++) {
                    int inside = 1;
                    for (int d = 0; d < 3; d++)
                        inside = inside && j[d] >= m->local.lo[d] && j[d] < m->local.hi[d];
                    if (inside)
                        col_idx[pos++] = m->local_of[local_position(m, j)];
                }
    }
    row_ptr[m->n_local] = pos;
}
/* [local_pattern] */

/* coordinates, source, fixed flags and the exact solution at the local nodes */
static void local_node_data(const problem *p, const local_mesh *m, local_system *s)
{
    const int axis = p->fem.fixed_face / 2;
    const int on_fixed_face = p->fem.fixed_face % 2 ? p->fem.nel[axis] : 0;
    for (int a = 0; a < m->n_local; a++) {
        const int *i = m->grid + 3L * a;
        for (int d = 0; d < 3; d++)
            s->xyz[3L * a + d] = i[d] * p->fem.size[d];
        s->q[a] = p->fem.qvol;
        s->fixed[a] = i[axis] == on_fixed_face;
        s->t_exact[a] = fem3d_exact_at(&p->fem, i);
    }
}

/* ---- agreeing across ranks ------------------------------------------------------------------- */

/* nonzero on every rank if flag is nonzero on any rank */
static int on_any_rank(int flag)
{
    int any;
    MPI_Allreduce(&flag, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    return any;
}

/* Registered with atexit: a rank that leaves through exit() (the input reader, when every rank
 * rejects the same file) still finalizes MPI, so the job ends as a normal exit with status 2 and
 * mpiexec does not abort it. */
static void finalize_mpi(void)
{
    int initialized, finalized;
    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);
    if (initialized && !finalized)
        MPI_Finalize();
}

/* ---- output: VTK XML pieces and the parallel file that gathers them -------------------------- */

/* "STEM_r.vtu" for OUTPUT = "STEM.pvtu" (the whole OUTPUT is the stem without that suffix) */
static char *piece_name(const char *output, int rank)
{
    size_t len = strlen(output);
    const char *suffix = ".pvtu";
    if (len >= strlen(suffix) && strcmp(output + len - strlen(suffix), suffix) == 0)
        len -= strlen(suffix);
    char *name = malloc(len + 32);
    if (name != NULL)
        sprintf(name, "%.*s_%d.vtu", (int)len, output, rank);
    return name;
}

/* This rank's piece: all local nodes with their temperature, the local elements whose corner 0 is
 * internal (VTK's hexahedron, type 12, numbers its corners as fem3d does) with the rank as cell
 * data. Returns 0, or -1 if the file cannot be written (errno says why). */
static int write_piece(const char *path, const local_mesh *m, const local_system *s, int rank)
{
    FILE *out = fopen(path, "w");
    if (out == NULL)
        return -1;
    int n_owned = 0;
    for (int e = 0; e < m->n_elem; e++)
        n_owned += m->elements[8 * e] < m->n_internal;
    fprintf(out, "<?xml version=\"1.0\"?>\n<VTKFile type=\"UnstructuredGrid\" version=\"0.1\""
                 " byte_order=\"LittleEndian\">\n<UnstructuredGrid>\n"
                 "<Piece NumberOfPoints=\"%d\" NumberOfCells=\"%d\">\n", m->n_local, n_owned);
    fprintf(out, "<PointData Scalars=\"temperature\">\n"
                 "<DataArray type=\"Float64\" Name=\"temperature\" format=\"ascii\">\n");
    for (int a = 0; a < m->n_local; a++)
        fprintf(out, "%.15g\n", s->t[a]);
    fprintf(out, "</DataArray>\n</PointData>\n<CellData Scalars=\"rank\">\n"
                 "<DataArray type=\"Int32\" Name=\"rank\" format=\"ascii\">\n");
    for (int e = 0; e < n_owned; e++)
        fprintf(out, "%d\n", rank);
    fprintf(out, "</DataArray>\n</CellData>\n<Points>\n"
                 "<DataArray type=\"Float64\" NumberOfComponents=\"3\" format=\"ascii\">\n");
    for (int a = 0; a < m->n_local; a++)
        fprintf(out, "%.15g %.15g %.15g\n", s->xyz[3L * a], s->xyz[3L * a + 1],
                s->xyz[3L * a + 2]);
    fprintf(out, "</DataArray>\n</Points>\n<Cells>\n"
                 "<DataArray type=\"Int32\" Name=\"connectivity\" format=\"ascii\">\n");
    for (long e = 0; e < m->n_elem; e++) {
        if (m->elements[8 * e] >= m->n_internal)
            continue;
        for (int a = 0; a < 8; a++)
            fprintf(out, a < 7 ? "%d " : "%d\n", m->elements[8 * e + a]);
    }
    fprintf(out, "</DataArray>\n<DataArray type=\"Int32\" Name=\"offsets\" format=\"ascii\">\n");
    for (int e = 0; e < n_owned; e++)
        fprintf(out, "%d\n", 8 * (e + 1));
    fprintf(out, "</DataArray>\n<DataArray type=\"UInt8\" Name=\"types\" format=\"ascii\">\n");
    for (int e = 0; e < n_owned; e++)
        fprintf(out, "12\n");
    fprintf(out, "</DataArray>\n</Cells>\n</Piece>\n</UnstructuredGrid>\n</VTKFile>\n");
    return fclose(out) == 0 ? 0 : -1;
}

/* OUTPUT.pvtu: the arrays of the pieces and their file names, relative to its own folder */
static int write_pvtu(const char *path, int n_ranks)
{
    FILE *out = fopen(path, "w");
    if (out == NULL)
        return -1;
    fprintf(out, "<?xml version=\"1.0\"?>\n<VTKFile type=\"PUnstructuredGrid\" version=\"0.1\""
                 " byte_order=\"LittleEndian\">\n<PUnstructuredGrid GhostLevel=\"0\">\n"
                 "<PPointData Scalars=\"temperature\">\n"
                 "<PDataArray type=\"Float64\" Name=\"temperature\"/>\n</PPointData>\n"
                 "<PCellData Scalars=\"rank\">\n<PDataArray type=\"Int32\" Name=\"rank\"/>\n"
                 "</PCellData>\n<PPoints>\n"
                 "<PDataArray type=\"Float64\" NumberOfComponents=\"3\"/>\n</PPoints>\n");
    const char *slash = strrchr(path, '/');
    const char *base = slash != NULL ? slash + 1 : path;
    int status = 0;
    for (int r = 0; r < n_ranks && status == 0; r++) {
        char *source = piece_name(base, r);
        if (source == NULL)
            status = -1;
        else
            fprintf(out, "<Piece Source=\"%s\"/>\n", source);
        free(source);
    }
    fprintf(out, "</PUnstructuredGrid>\n</VTKFile>\n");
    return fclose(out) == 0 ? status : -1;
}

/* Rank 0 writes OUTPUT.pvtu, then every rank its piece. The ranks agree on the outcome: the lowest
 * rank that failed prints the one line. Returns 0, or 2 on every rank if any rank failed. */
static int write_output(const char *output, const local_mesh *m, const local_system *s, int rank,
                        int n_ranks)
{
    const char *failed_path = NULL;
    char *piece = piece_name(output, rank);
    if (rank == 0 && write_pvtu(output, n_ranks) != 0)
        failed_path = output;
    else if (piece == NULL || write_piece(piece, m, s, rank) != 0)
        failed_path = piece != NULL ? piece : output;
    const int err = errno;                /* why it failed, if it did */
    int mine = failed_path != NULL ? rank : n_ranks, first;
    MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (first == rank)
        fprintf(stderr, PROG ": %s: cannot write output file: %s\n", failed_path, strerror(err));
    free(piece);
    return first < n_ranks ? 2 : 0;
}

/* ---- the summary ----------------------------------------------------------------------------- */

static double max_of(long n, const double *restrict v)
{
    double m = v[0];
    for (long i = 1; i < n; i++)
        m = fmax(m, v[i]);
    return m;
}

/* fem3d's summary with global numbers, and the partition (rank 0 prints) */
static void print_summary(const problem *p, const local_mesh *m, const local_system *s, int iters,
                          double relres, int rank, int n_ranks)
{
    const int n = m->n_internal, flux_face = p->fem.fixed_face ^ 1;
    double err = 0.0;
    for (int a = 0; a < n; a++)
        err = fmax(err, fabs(s->t[a] - s->t_exact[a]));
    double local_max[3] = {max_of(n, s->t), max_of(n, s->t_exact), err}, global_max[3];
    MPI_Allreduce(local_max, global_max, 3, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    /* min of n_internal as the max of -n_internal */
    int local_ints[3] = {n, -n, m->n_neighbours}, global_ints[3];
    MPI_Allreduce(local_ints, global_ints, 3, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    long local_sums[3] = {n, s->row_ptr[n], m->n_local - n}, global_sums[3];
    MPI_Allreduce(local_sums, global_sums, 3, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (rank != 0)
        return;
    printf("fem3d_mpi (C): %d x %d x %d elements, %ld unknowns, %ld nonzeros\n", p->fem.nel[0],
           p->fem.nel[1], p->fem.nel[2], global_sums[0], global_sums[1]);
    printf("  T = 0 on %s, heat flux %g into %s, source %g, conductivity %g\n",
           FEM3D_FACES[p->fem.fixed_face], p->fem.qflux, FEM3D_FACES[flux_face], p->fem.qvol,
           p->fem.cond);
    printf("  CG: %d iterations, relative residual %.3e (%s)\n", iters, relres,
           relres <= p->fem.eps ? "converged" : "NOT converged");
    printf("  max T = %.10g   should be %.10g\n", global_max[0], global_max[1]);
    printf("  max nodal error %.3e (should be near round-off and the CG tolerance: the elements"
           " are nodally exact here)\n", global_max[2]);
    /* every external node is received once per exchange: 8 bytes each */
    printf("  ranks %d (%d x %d x %d blocks), internal nodes per rank min %d max %d, neighbours max"
           " %d, external nodes total %ld, bytes per exchange %ld\n", n_ranks, p->parts[0],
           p->parts[1], p->parts[2], -global_ints[1], global_ints[0], global_ints[2],
           global_sums[2], 8 * global_sums[2]);
    fflush(stdout);
}

/* ---- the program ----------------------------------------------------------------------------- */

/* "PROG: message" (printf-like) on stderr, from rank 0 only: the ranks agreed on the failure */
static void report(int rank, const char *fmt, ...)
{
    if (rank != 0)
        return;
    va_list ap;
    fputs(PROG ": ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

static int out_of_memory(const problem *p, int rank)
{
    report(rank, "out of memory for NX NY NZ = %d %d %d", p->fem.nel[0], p->fem.nel[1],
           p->fem.nel[2]);
    return 1;
}

/* Local data, assembly, solution and output on one rank, from the sizes and arrays allocated by
 * run_rank; returns the exit status (the same on every rank). */
static int solve(const problem *p, local_mesh *m, local_system *s, const char *output, int rank,
                 int n_ranks)
{
    number_local_nodes(p, m);
    build_local_elements(m);
    build_local_flux_quads(p, m);
    local_pattern(m, s->row_ptr, s->col_idx);
    local_node_data(p, m, s);

    /* the unchanged serial kernels on the local elements, quads and rows */
    int bad = fem3d_assemble(m->n_elem, m->elements, s->xyz, p->fem.cond, s->q, s->row_ptr,
                             s->col_idx, s->val, s->rhs);
    if (on_any_rank(bad != 0)) {
        report(rank, "degenerate elements (det J <= 0): DX DY DZ too small");
        return 1;
    }
    fem3d_face_flux(m->n_quad, m->quads, s->xyz, p->fem.qflux, s->rhs);
    crs_dirichlet(m->n_local, s->fixed, s->g, s->row_ptr, s->col_idx, s->val, s->rhs);  /* g = 0 */

    const long n_global = (long)(p->fem.nel[0] + 1) * (p->fem.nel[1] + 1) * (p->fem.nel[2] + 1);
    const int max_iter = 10 * n_global <= INT_MAX ? 10 * (int)n_global : INT_MAX;
    double relres;
    int iters = pcg_jacobi_mpi(m->n_internal, m->n_local, s->row_ptr, s->col_idx, s->val, s->rhs,
                               s->t, p->fem.eps, max_iter, &relres, m->n_neighbours, m->neighbours,
                               m->import_ptr, m->import_index, m->export_ptr, m->export_index,
                               MPI_COMM_WORLD);
    if (iters < 0)
        return out_of_memory(p, rank);
    /* the external temperatures too (the solver updates the internal ones only) */
    halo_exchange(m->n_neighbours, m->neighbours, m->import_ptr, m->import_index, m->export_ptr,
                  m->export_index, s->t, s->send_buf, s->recv_buf, MPI_COMM_WORLD);
    print_summary(p, m, s, iters, relres, rank, n_ranks);
    int status = relres <= p->fem.eps ? 0 : 1;
    if (output != NULL) {
        if (write_output(output, m, s, rank, n_ranks) != 0)
            status = 2;
        else if (rank == 0)
            printf("  wrote %s and %d pieces\n", output, n_ranks);
    }
    return status;
}

/* Sizes, memory (agreed by all ranks), the solution; returns the exit status. */
static int run_rank(const problem *p, const char *output, int rank, int n_ranks)
{
    local_mesh m;
    local_system s;
    int failed = 0;
    plan_local_mesh(p, rank, &m);
    alloc_local_mesh(&m, &failed);
    alloc_local_system(&m, &s, &failed);
    int status = on_any_rank(failed) ? out_of_memory(p, rank)
                                     : solve(p, &m, &s, output, rank, n_ranks);
    free_local_mesh(&m);
    free_local_system(&s);
    return status;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    atexit(finalize_mpi);
    int rank, n_ranks;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n_ranks);
    input_quiet = rank != 0;              /* every rank reads the input; rank 0 reports */
    int status = 2;
    if (argc < 2 || argc > 3) {
        if (rank == 0)
            fprintf(stderr, "usage: %s INPUT [OUTPUT.pvtu]\n", argv[0]);
    } else {
        const problem p = read_input(argv[1], n_ranks);    /* exits with 2 on bad input */
        status = run_rank(&p, argc == 3 ? argv[2] : NULL, rank, n_ranks);
    }
    MPI_Finalize();
    return status;
}
