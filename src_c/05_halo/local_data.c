/* Reading and checking the local data of one rank (local_data.h). A bad file gives one line naming
 * the file and the line, never a crash: every count is checked (against the mesh, or the file's own
 * totals) before anything is allocated for it, every index against its range before it is used. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fem3d_problem.h"
#include "halo.h"
#include "input.h"
#include "local_data.h"

static const char MAGIC[] = "# course local data (05_halo)";   /* the first line of a file */

enum { LINE_SIZE = 1024, PER_LINE = 10 };    /* a block of numbers: 10 to a line */

void local_data_free(local_data *d)
{
    int **arrays[] = {&d->global_ids, &d->element_ids, &d->elements, &d->neighbours,
                      &d->import_ptr, &d->import_index, &d->export_ptr, &d->export_index};
    for (size_t k = 0; k < sizeof arrays / sizeof *arrays; k++) {
        free(*arrays[k]);
        *arrays[k] = NULL;
    }
}

/* ---- a line reader that keeps its first failure ---------------------------------------------- */

typedef struct {
    FILE *file;
    const char *path;
    int line;              /* the number of the line read last */
    int status;            /* LOCAL_OK until the first failure; after it every read does nothing */
    char *msg;
    int msg_size;
    char *cursor;          /* what is left of the line read last */
    char buf[LINE_SIZE];
} reader;

#define READ_OK(r) ((r)->status == LOCAL_OK)

/* records the first failure as "PATH:LINE: message" */
static void fail(reader *r, int status, const char *fmt, ...)
{
    if (!READ_OK(r))
        return;
    r->status = status;
    int n = snprintf(r->msg, r->msg_size, "%s:%d: ", r->path, r->line);
    if (n < 0 || n >= r->msg_size)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->msg + n, r->msg_size - n, fmt, ap);
    va_end(ap);
}

/* count zeroed ints (at least one), or NULL after recording a failure */
static int *alloc_ints(reader *r, long count)
{
    if (!READ_OK(r))
        return NULL;
    int *a = calloc(count > 0 ? (size_t)count : 1, sizeof(int));
    if (a == NULL)
        fail(r, LOCAL_NO_MEMORY, "out of memory for %ld numbers", count);
    return a;
}

/* the next line into r->buf; 0 (and a failure, unless one came before) if there is none */
static int next_line(reader *r, const char *what)
{
    if (!READ_OK(r))
        return 0;
    r->line++;
    if (fgets(r->buf, sizeof r->buf, r->file) == NULL)
        fail(r, LOCAL_BAD, "the file ends; expected %s", what);
    else if (strchr(r->buf, '\n') == NULL && !feof(r->file))
        fail(r, LOCAL_BAD, "line longer than %d characters", LINE_SIZE - 2);
    r->cursor = r->buf;
    return READ_OK(r);
}

/* the next word of the line into tok (cut to size - 1 characters); 0 if there is none */
static int next_word(reader *r, char *tok, size_t size)
{
    char *s = r->cursor + strspn(r->cursor, " \t\r\n");
    size_t len = strcspn(s, " \t\r\n");
    if (len == 0)
        return 0;
    r->cursor = s + len;
    if (len >= size)
        len = size - 1;
    memcpy(tok, s, len);
    tok[len] = '\0';
    return 1;
}

/* value k of the `count` on the current line: an integer into *iv, or (iv NULL) a real into *dv */
static int next_value(reader *r, int k, int count, const char *what, int *iv, double *dv)
{
    char tok[64];
    if (!next_word(r, tok, sizeof tok))
        fail(r, LOCAL_BAD, "expected %d number(s) (%s), found %d", count, what, k);
    else if (iv != NULL ? !input_word_int(tok, iv) : !input_word_real(tok, dv))
        fail(r, LOCAL_BAD, "expected %s (%s), got '%s'", iv != NULL ? "an integer" : "a number",
             what, tok);
    return READ_OK(r);
}

/* `count` integers from the next line; `exact`: nothing may follow them, else the rest of the line
 * is a comment (as after "1 3    RANK SIZE") */
static void read_ints(reader *r, int count, int *restrict values, int exact, const char *what)
{
    if (!next_line(r, what))
        return;
    for (int k = 0; k < count; k++)
        if (!next_value(r, k, count, what, values + k, NULL))
            return;
    char tok[64];
    if (exact && next_word(r, tok, sizeof tok))
        fail(r, LOCAL_BAD, "expected %d number(s) (%s), found more", count, what);
}

static void check_range(reader *r, const int *restrict values, int count, long low, long high,
                        const char *what)
{
    for (int k = 0; k < count && READ_OK(r); k++)
        if (values[k] < low || values[k] >= high)
            fail(r, LOCAL_BAD, "%s: %d is outside %ld .. %ld", what, values[k], low, high - 1);
}

/* count integers in low .. high-1, PER_LINE to a line (no line at all when count is 0) */
static void read_block(reader *r, int *restrict out, int count, long low, long high,
                       const char *what)
{
    for (long start = 0; start < count && READ_OK(r); start += PER_LINE) {
        const int n = count - start < PER_LINE ? (int)(count - start) : PER_LINE;
        read_ints(r, n, out + start, 1, what);
        check_range(r, out + start, n, low, high, what);
    }
}

/* ---- the groups of the file ------------------------------------------------------------------ */

static int same_real(double a, double b)
{
    return fabs(a - b) <= 1e-12 * fmax(fabs(a), fabs(b));
}

/* the first line; RANK SIZE; NX NY NZ DX DY DZ, which must be the input's */
static void read_header(reader *r, const int nel[3], const double size[3], local_data *d)
{
    r->line = 1;                          /* an empty file is not a local data file either */
    if (fgets(r->buf, sizeof r->buf, r->file) == NULL)
        r->buf[0] = '\0';
    r->buf[strcspn(r->buf, "\r\n")] = '\0';
    if (strcmp(r->buf, MAGIC) != 0)
        fail(r, LOCAL_BAD, "not a local data file (the first line must be '%s')", MAGIC);
    int rank_size[2];
    read_ints(r, 2, rank_size, 0, "RANK SIZE");
    if (READ_OK(r) && (rank_size[0] != d->rank || rank_size[1] != d->size))
        fail(r, LOCAL_BAD, "RANK SIZE = %d %d, but this is rank %d of %d", rank_size[0],
             rank_size[1], d->rank, d->size);

    const char *what = "NX NY NZ DX DY DZ";
    int file_nel[3];
    double file_size[3];
    if (!next_line(r, what))
        return;
    for (int k = 0; k < 6; k++)
        if (!next_value(r, k, 6, what, k < 3 ? file_nel + k : NULL, file_size + k % 3))
            return;
    if (file_nel[0] != nel[0] || file_nel[1] != nel[1] || file_nel[2] != nel[2])
        fail(r, LOCAL_BAD, "the mesh %d %d %d does not match the input's NX NY NZ = %d %d %d",
             file_nel[0], file_nel[1], file_nel[2], nel[0], nel[1], nel[2]);
    for (int k = 0; k < 3; k++)
        if (!same_real(file_size[k], size[k]))
            fail(r, LOCAL_BAD, "the element size %.15g %.15g %.15g does not match the input's "
                 "DX DY DZ = %.15g %.15g %.15g", file_size[0], file_size[1], file_size[2],
                 size[0], size[1], size[2]);
}

/* N_INTERNAL N_EXTERNAL and the global numbers of the local nodes */
static void read_nodes(reader *r, const int nel[3], local_data *d)
{
    const long n_node = (nel[0] + 1L) * (nel[1] + 1L) * (nel[2] + 1L);
    int counts[2];
    read_ints(r, 2, counts, 0, "N_INTERNAL N_EXTERNAL");
    if (READ_OK(r) && (counts[0] < 1 || counts[1] < 0))
        fail(r, LOCAL_BAD, "N_INTERNAL must be positive and N_EXTERNAL not negative, got %d %d",
             counts[0], counts[1]);
    if (READ_OK(r) && (long)counts[0] + counts[1] > n_node)
        fail(r, LOCAL_BAD, "N_INTERNAL + N_EXTERNAL = %ld local nodes, more than the %ld nodes "
             "of the mesh", (long)counts[0] + counts[1], n_node);
    if (!READ_OK(r))
        return;
    d->n_internal = counts[0];
    d->n_local = counts[0] + counts[1];
    d->global_ids = alloc_ints(r, d->n_local);
    read_block(r, d->global_ids, d->n_local, 0, n_node, "global node numbers");
}

/* The corners of local element e must be the nodes of its global element (so the element data
 * agree with the node data: coordinates, fixed nodes, flux faces all come from global numbers). */
static void check_corners(reader *r, const int nel[3], const local_data *d, long e)
{
    const int id = d->element_ids[e];
    const int i[3] = {id % nel[0], id / nel[0] % nel[1], id / nel[0] / nel[1]};
    for (int a = 0; a < 8 && READ_OK(r); a++) {
        const int *c = FEM3D_CORNER[a], local = d->elements[8 * e + a];
        const long node = (i[0] + c[0]) + (nel[0] + 1L) * ((i[1] + c[1]) + (nel[1] + 1L) * (i[2]
                                                                                         + c[2]));
        if (d->global_ids[local] != node)
            fail(r, LOCAL_BAD, "element %d: corner %d is local node %d = global node %d, but "
                 "should be global node %ld", id, a, local, d->global_ids[local], node);
    }
}

/* N_ELEMENTS, their global numbers and their local corners */
static void read_elements(reader *r, const int nel[3], local_data *d)
{
    const long n_mesh = (long)nel[0] * nel[1] * nel[2];
    int n_elem;
    read_ints(r, 1, &n_elem, 0, "N_ELEMENTS");
    if (READ_OK(r) && (n_elem < 0 || n_elem > n_mesh))
        fail(r, LOCAL_BAD, "N_ELEMENTS = %d is outside 0 .. %ld (the elements of the mesh)",
             n_elem, n_mesh);
    if (!READ_OK(r))
        return;
    d->n_elem = n_elem;
    d->element_ids = alloc_ints(r, n_elem);
    d->elements = alloc_ints(r, 8L * n_elem);
    read_block(r, d->element_ids, n_elem, 0, n_mesh, "global element numbers");
    for (long e = 0; e < n_elem && READ_OK(r); e++) {
        read_ints(r, 8, d->elements + 8 * e, 1, "the 8 local corners of an element");
        check_range(r, d->elements + 8 * e, 8, 0, d->n_local, "local corners");
        check_corners(r, nel, d, e);
    }
}

/* n_nb + 1 offsets: from 0, never decreasing, at most max_count for one neighbour */
static void read_offsets(reader *r, int *restrict ptr, int n_nb, int max_count,
                         const char *max_name, const char *what)
{
    read_block(r, ptr, n_nb + 1, 0, INT_MAX, what);
    if (READ_OK(r) && ptr[0] != 0)
        fail(r, LOCAL_BAD, "%s must start at 0 and never decrease", what);
    for (int m = 0; m < n_nb && READ_OK(r); m++) {
        if (ptr[m + 1] < ptr[m])
            fail(r, LOCAL_BAD, "%s must start at 0 and never decrease", what);
        else if (ptr[m + 1] - ptr[m] > max_count)
            fail(r, LOCAL_BAD, "%s: %d nodes for one neighbour, more than %s = %d", what,
                 ptr[m + 1] - ptr[m], max_name, max_count);
    }
}

/* import_ptr (ending at N_EXTERNAL) and import_index, which the format fixes (as read_local in
 * course/parallel/local.py): the external nodes in their order, N_INTERNAL .. N_LOCAL-1 */
static void read_imports(reader *r, local_data *d)
{
    const int n_nb = d->n_neighbours, n_external = d->n_local - d->n_internal;
    read_offsets(r, d->import_ptr, n_nb, n_external, "N_EXTERNAL", "import_ptr");
    if (READ_OK(r) && d->import_ptr[n_nb] != n_external)
        fail(r, LOCAL_BAD, "import_ptr ends at %d, but N_EXTERNAL = %d", d->import_ptr[n_nb],
             n_external);
    d->import_index = alloc_ints(r, n_external);
    for (int start = 0; start < n_external && READ_OK(r); start += PER_LINE) {
        const int n = n_external - start < PER_LINE ? n_external - start : PER_LINE;
        read_block(r, d->import_index + start, n, d->n_internal, d->n_local, "import_index");
        for (int k = start; k < start + n && READ_OK(r); k++)
            if (d->import_index[k] != d->n_internal + k)
                fail(r, LOCAL_BAD, "import_index must list the external nodes in order: "
                     "N_INTERNAL .. N_LOCAL-1");
    }
}

/* N_NEIGHBOURS, the neighbour ranks, the import and the export table */
static void read_tables(reader *r, local_data *d)
{
    int n_nb;
    read_ints(r, 1, &n_nb, 0, "N_NEIGHBOURS");
    if (READ_OK(r) && (n_nb < 0 || n_nb >= d->size))
        fail(r, LOCAL_BAD, "N_NEIGHBOURS = %d is outside 0 .. %d (SIZE - 1)", n_nb, d->size - 1);
    if (!READ_OK(r))
        return;
    d->n_neighbours = n_nb;
    d->neighbours = alloc_ints(r, n_nb);
    d->import_ptr = alloc_ints(r, n_nb + 1L);
    d->export_ptr = alloc_ints(r, n_nb + 1L);
    read_block(r, d->neighbours, n_nb, 0, d->size, "neighbour ranks");
    for (int m = 0; m < n_nb && READ_OK(r); m++)
        if (d->neighbours[m] == d->rank || (m > 0 && d->neighbours[m] <= d->neighbours[m - 1]))
            fail(r, LOCAL_BAD, "the neighbour ranks must be ascending and other than RANK = %d",
                 d->rank);
    read_imports(r, d);
    read_offsets(r, d->export_ptr, n_nb, d->n_internal, "N_INTERNAL", "export_ptr");
    if (!READ_OK(r))
        return;
    d->export_index = alloc_ints(r, d->export_ptr[n_nb]);
    read_block(r, d->export_index, d->export_ptr[n_nb], 0, d->n_internal, "export_index");
}

/* [read_local_data]
 * The groups of the file in their order (course/parallel/local.py, FILE_FORMAT), each checked as it
 * comes; after the first failure nothing more is read or allocated. */
int read_local_data(const char *path, const int nel[3], const double size[3], int rank,
                    int n_ranks, local_data *d, char *msg, int msg_size)
{
    reader r = {.path = path, .msg = msg, .msg_size = msg_size};
    r.file = fopen(path, "r");
    if (r.file == NULL) {
        snprintf(msg, msg_size, "%s: cannot open local data file: %s", path, strerror(errno));
        return LOCAL_BAD;
    }
    d->rank = rank;
    d->size = n_ranks;
    read_header(&r, nel, size, d);
    read_nodes(&r, nel, d);
    read_elements(&r, nel, d);
    read_tables(&r, d);
    fclose(r.file);
    return r.status;
}
/* [read_local_data] */

/* ---- do the ranks' tables fit together? ------------------------------------------------------ */

/* [check_local_tables]
 * Every rank sends every other one what it will send it per exchange (1 + the count for a
 * neighbour, 0 otherwise) and compares with what it expects to receive from it. */
int check_local_tables(const local_data *d, const char *name, MPI_Comm comm, char *msg,
                       int msg_size)
{
    int *counts = calloc(2 * (size_t)d->size, sizeof(int)), failed = counts == NULL, any;
    MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, comm);      /* all take part, or none */
    if (any) {
        free(counts);
        snprintf(msg, msg_size, "%s: out of memory", name);
        return failed ? LOCAL_NO_MEMORY : LOCAL_OK;
    }
    int status = LOCAL_OK, *sends = counts, *theirs = counts + d->size;
    for (int m = 0; m < d->n_neighbours; m++)
        sends[d->neighbours[m]] = 1 + d->export_ptr[m + 1] - d->export_ptr[m];
    MPI_Alltoall(sends, 1, MPI_INT, theirs, 1, MPI_INT, comm);
    for (int m = 0, q = 0; q < d->size && status == LOCAL_OK; q++) {
        const int listed = m < d->n_neighbours && d->neighbours[m] == q;
        const int imports = listed ? d->import_ptr[m + 1] - d->import_ptr[m] : 0;
        m += listed;
        status = LOCAL_BAD;
        if (listed && theirs[q] == 0)
            snprintf(msg, msg_size, "%s: rank %d is a neighbour here, but rank %d does not list "
                     "rank %d (the local data files do not fit together)", name, q, q, d->rank);
        else if (!listed && theirs[q] > 0)
            snprintf(msg, msg_size, "%s: rank %d lists rank %d as a neighbour, but it is not one "
                     "here (the local data files do not fit together)", name, q, d->rank);
        else if (listed && theirs[q] - 1 != imports)
            snprintf(msg, msg_size, "%s: rank %d imports %d node(s) from rank %d, which exports "
                     "%d to it (the local data files do not fit together)", name, d->rank,
                     imports, q, theirs[q] - 1);
        else
            status = LOCAL_OK;
    }
    free(counts);
    return status;
}
/* [check_local_tables] */

/* the neighbour whose import range holds import k */
static int owner_of_import(const local_data *d, int k)
{
    int m = 0;
    while (m + 1 < d->n_neighbours && d->import_ptr[m + 1] <= k)
        m++;
    return d->neighbours[m];
}

int check_local_halo(const local_data *d, double *restrict x, double *restrict send_buf,
                     double *restrict recv_buf, const char *name, MPI_Comm comm, char *msg,
                     int msg_size)
{
    for (int a = 0; a < d->n_local; a++)
        x[a] = a < d->n_internal ? d->global_ids[a] : -1.0;
    halo_exchange(d->n_neighbours, d->neighbours, d->import_ptr, d->import_index, d->export_ptr,
                  d->export_index, x, send_buf, recv_buf, comm);
    for (int k = 0; k < d->n_local - d->n_internal; k++) {
        const int a = d->import_index[k];
        if (x[a] != d->global_ids[a]) {
            snprintf(msg, msg_size, "%s: local node %d is global node %d, but rank %d sends global "
                     "node %.0f for it (the local data files do not fit together)", name, a,
                     d->global_ids[a], owner_of_import(d, k), x[a]);
            return LOCAL_BAD;
        }
    }
    return LOCAL_OK;
}
