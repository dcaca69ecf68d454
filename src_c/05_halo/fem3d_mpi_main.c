/* fem3d_mpi: fem3d (lecture 02) on P MPI ranks, the nodes cut into PX x PY x PZ blocks or into any
 * parts given as local data files.
 *
 *   usage: mpiexec -n P fem3d_mpi_c INPUT [OUTPUT.pvtu] [ALGORITHM] [blocking|iallreduce]
 *                                     [replace=N]
 *
 * INPUT is fem3d's input file (see src_c/02_fem3d/fem3d_main.c: its line 3 may name the source,
 * constant or nakajima; with nakajima every rank adds the load of QVOL |x_c + y_c| on each of its
 * local elements, and the summary gives max T, no error) with a 7th line, one of
 *   PX PY PZ        number of parts along x, y, z (> 0, PX PY PZ = P, PX <= NX + 1, ...)
 *   local PREFIX    rank r reads its local data from the file PREFIX.r (relative to the current
 *                   folder, or absolute), which `python -m course partition ... --out PREFIX`
 *                   writes for any partition, METIS's included (local_data.h)
 * and two optional lines after it (lecture 08_hybrid: the preconditioner; a file without them
 * runs with diagonal, as before):
 *   PRECOND SWEEPS  diagonal 1 | bjacobi-ic0 1 | asdd-ic0 K   (K >= 1 additive Schwarz sweeps)
 *   ORDERING COLORS natural 0 | cm 0 | rcm 0 | mc K | cm-rcm K (K >= 2; absent: natural 0), the
 *                   ordering of each rank's internal block for IC(0) (lecture 04_iccg); diagonal
 *                   takes natural 0 only, and no rank may have fewer internal nodes than colors
 * (08_hybrid/precond_mpi.h). Blocks: the NX + 1 node indices along x are cut into PX parts: part
 * p holds i in [start(p), start(p+1)), start(p) = p (NX + 1) / PX; the same along y and z. Rank
 * px + PX (py + PY pz) owns the nodes of block (px, py, pz). Each rank builds its local data by
 * itself, GeoFEM style (there is no global mesh anywhere), the same data as the files hold:
 *   internal nodes   the nodes it owns, in ascending global number;
 *   local elements   the elements with an internal corner, in ascending global number: the block
 *                    plus one layer of elements towards every neighbouring block (the overlap);
 *   external nodes   the other corners of the local elements, by owner rank, then global number;
 * and the import/export tables of halo.h. From there on blocks and files take one path: the node
 * data from the global numbers, the local matrix over the local elements assembled with fem3d's
 * element kernel by the rank's threads, color by color (its internal rows come out equal to the
 * serial ones up to rounding: the same sums in another order), and the solution with
 * cg_variant_mpi (06_pipecg/cg_mpi.h). ALGORITHM (pcg, chronopoulos-gear, gropp or pipelined:
 * lecture 06_pipecg), blocking (MPI_Allreduce) or iallreduce (MPI_Iallreduce + MPI_Wait), and
 * replace=N (residual replacement every N iterations, N > 0), in any order after INPUT, choose
 * the variant; a missing one is pcg, blocking, or no replacement. Rank 0 prints fem3d's
 * summary, with global numbers, a line on the partition, and four lines on the solver: the
 * algorithm, the reductions, the global sums counted per iteration; the true relative
 * residual ||b - A x|| / ||b||; the preconditioner, its sweeps, ordering, the fewest and most
 * colors over the ranks and the halo exchanges counted per iteration; the MPI thread level
 * (the program asks for MPI_THREAD_FUNNELED and stops with status 2 if the library provides
 * less) and the OpenMP threads per rank. Hybrid MPI + OpenMP (lecture 08_hybrid): every rank
 * assembles and solves with a team of OMP_NUM_THREADS threads (the solve in one parallel region,
 * cg_mpi.c; MPI called by the master thread only). Any other word after INPUT that does not
 * end in .pvtu is an error. With OUTPUT.pvtu, rank r writes the piece STEM_r.vtu (VTK XML: its
 * local nodes and the elements whose corner 0 it owns, so that every element is in exactly one
 * piece) and rank 0 the file OUTPUT.pvtu that gathers the pieces (ParaView).
 * Exit status, the same on every rank: 0 converged, 1 not converged (or out of memory), 2 bad
 * input (an IC(0) breakdown included), local data, output file or MPI thread level. An error is
 * one line on stderr, from the lowest rank that found it. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <mpi.h>
#include <omp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cg_mpi.h"
#include "course.h"
#include "fem3d_problem.h"
#include "halo.h"
#include "input.h"
#include "local_data.h"
#include "precond_mpi.h"

#define PROG "fem3d_mpi_c"

enum { PATH_SIZE = 1024, MSG_SIZE = 2 * PATH_SIZE };

static const char *const PART_NAMES[3] = {"PX", "PY", "PZ"};
static const char *const REDUCTION_NAMES[2] = {"blocking", "iallreduce"};
static const char *const REPLACE_WORD = "replace=";   /* replace=N on the command line */
static const char *const ORDERINGS[5] = {"natural", "cm", "rcm", "mc", "cm-rcm"};
static const char *const THREAD_LEVELS[4] = {"SINGLE", "FUNNELED", "SERIALIZED", "MULTIPLE"};

/* the command line after INPUT */
typedef struct {
    const char *output;            /* OUTPUT.pvtu, or NULL */
    int algorithm;                 /* CG_PCG, ... (cg_mpi.h) */
    int nonblocking;               /* 1: iallreduce, 0: blocking */
    int replace_every;             /* N of replace=N, or 0: no residual replacement */
    int thread_level;              /* MPI_THREAD_... that MPI_Init_thread provided */
} options;

typedef struct {
    fem3d_problem fem;             /* fem3d's six lines */
    int parts[3];                  /* PX PY PZ, or 0 0 0 with local data files */
    char prefix[PATH_SIZE];        /* PREFIX of `local PREFIX`, or "" for blocks */
    int precond, sweeps;           /* line 8: PRECOND_DIAGONAL, ... (precond_mpi.h) and K */
    int ordering, colors;          /* line 9: ORDERINGS[ordering] and K */
    const char *path;              /* the input file, for the messages on lines 8 and 9 */
} problem;

/* line 7 as PX PY PZ, checked against the job */
static void read_parts(input_file *in, char *line, int n_ranks, problem *p)
{
    input_parse_ints(in, line, 3, p->parts, "PX PY PZ: number of parts along x, y, z");
    for (int d = 0; d < 3; d++)
        input_require_positive(in, p->parts[d], PART_NAMES[d]);
    double n_parts = (double)p->parts[0] * p->parts[1] * p->parts[2];   /* may overflow an int */
    if (n_parts != n_ranks)
        input_fail(in, "PX PY PZ = %d %d %d make %.0f parts, but the job has %d ranks",
                   p->parts[0], p->parts[1], p->parts[2], n_parts, n_ranks);
    for (int d = 0; d < 3; d++)
        if (p->parts[d] > p->fem.nel[d] + 1)
            input_fail(in, "%s = %d parts but only %d nodes along %c", PART_NAMES[d], p->parts[d],
                       p->fem.nel[d] + 1, "xyz"[d]);
}

/* line 7 as `local PREFIX`: returns 0 (and reads nothing) if its first word is not `local` */
static int read_prefix(const input_file *in, const char *line, problem *p)
{
    const char *word = line + strspn(line, " \t\r\n");
    size_t len = strcspn(word, " \t\r\n");
    if (len != 5 || strncmp(word, "local", 5) != 0)
        return 0;
    const char *prefix = word + len + strspn(word + len, " \t\r\n");
    len = strcspn(prefix, " \t\r\n");
    if (len == 0)
        input_fail(in, "expected a path prefix after 'local' (local PREFIX: the local data files "
                   "PREFIX.0, PREFIX.1, ...)");
    if (len + 16 > sizeof p->prefix)       /* room for ".RANK" */
        input_fail(in, "the path prefix is longer than %d characters", (int)sizeof p->prefix - 16);
    memcpy(p->prefix, prefix, len);
    p->prefix[len] = '\0';
    return 1;
}

/* The next line into line, if the file has one with a word on it: returns 1, or 0 (and the line
 * is counted as absent) at the end of the file or on a blank line. */
static int optional_line(input_file *in, char *line, int size, const char *what)
{
    if (feof(in->file))
        return 0;
    int c = getc(in->file);
    if (c == EOF)
        return 0;
    ungetc(c, in->file);
    input_line(in, line, size, what);
    return line[strspn(line, " \t\r\n")] != '\0';
}

/* The first word of line (at most size - 1 characters) into word; the rest of the line after it
 * in *rest. */
static void first_word(char *line, char *word, int size, char **rest)
{
    char *start = line + strspn(line, " \t\r\n");
    size_t len = strcspn(start, " \t\r\n");
    if (len >= (size_t)size)
        len = (size_t)size - 1;
    memcpy(word, start, len);
    word[len] = '\0';
    *rest = start + strcspn(start, " \t\r\n");
}

/* line 8: PRECOND SWEEPS */
static void read_precond(input_file *in, char *line, problem *p)
{
    char word[64], *rest;
    first_word(line, word, sizeof word, &rest);
    p->precond = precond_from_name(word);
    if (p->precond < 0)
        input_fail(in, "unknown preconditioner '%s': expected diagonal, bjacobi-ic0 or asdd-ic0 "
                   "(PRECOND SWEEPS)", word);
    input_parse_ints(in, rest, 1, &p->sweeps, "SWEEPS: additive Schwarz sweeps");
    if (p->sweeps < 1)
        input_fail(in, "SWEEPS must be at least 1, got %d", p->sweeps);
    if (p->sweeps != 1 && p->precond != PRECOND_ASDD_IC0)
        input_fail(in, "SWEEPS = %d with %s: sweeps are for asdd-ic0 (diagonal and bjacobi-ic0 "
                   "take 1)", p->sweeps, word);
}

/* line 9: ORDERING COLORS */
static void read_ordering(input_file *in, char *line, problem *p)
{
    char word[64], *rest;
    first_word(line, word, sizeof word, &rest);
    p->ordering = -1;
    for (int k = 0; k < 5; k++)
        if (strcmp(word, ORDERINGS[k]) == 0)
            p->ordering = k;
    if (p->ordering < 0)
        input_fail(in, "unknown ordering '%s': expected natural, cm, rcm, mc or cm-rcm (ORDERING "
                   "COLORS)", word);
    input_parse_ints(in, rest, 1, &p->colors, "COLORS: the number of colors");
    if (p->ordering < 3 && p->colors != 0)
        input_fail(in, "COLORS = %d with %s: natural, cm and rcm take 0", p->colors, word);
    if (p->ordering >= 3 && p->colors < 2)
        input_fail(in, "COLORS = %d with %s: mc and cm-rcm take 2 or more", p->colors, word);
    if (p->ordering != 0 && p->precond == PRECOND_DIAGONAL)
        input_fail(in, "ordering %s with diagonal: the ordering is for the IC(0) preconditioners "
                   "(bjacobi-ic0, asdd-ic0)", word);
}

/* fem3d's input (the same messages, from the same reader) plus line 7 and the optional lines 8
 * and 9 */
static problem read_input(const char *path, int n_ranks)
{
    problem p;
    memset(&p, 0, sizeof p);
    p.path = path;
    p.precond = PRECOND_DIAGONAL, p.sweeps = 1;           /* absent lines 8, 9: as before */
    p.ordering = 0, p.colors = 0;
    input_file in;
    char line[PATH_SIZE];
    input_open(&in, PROG, path);
    fem3d_read_problem(&in, &p.fem);
    input_line(&in, line, sizeof line, "PX PY PZ (number of parts along x, y, z) or local PREFIX");
    if (!read_prefix(&in, line, &p))
        read_parts(&in, line, n_ranks, &p);
    if (optional_line(&in, line, sizeof line, "PRECOND SWEEPS")) {
        read_precond(&in, line, &p);
        if (optional_line(&in, line, sizeof line, "ORDERING COLORS"))
            read_ordering(&in, line, &p);
    }
    input_close(&in);
    return p;
}

/* ---- the command line ---------------------------------------------------------------------- */

static int ends_with(const char *text, const char *suffix)
{
    size_t n = strlen(text), k = strlen(suffix);
    return n >= k && strcmp(text + n - k, suffix) == 0;
}

/* N of the word replace=N: one or more decimal digits, 1 <= N <= INT_MAX; 0 if it is not that */
static int replace_count(const char *word)
{
    const char *digits = word + strlen(REPLACE_WORD);
    size_t len = strlen(digits);
    if (len == 0 || strspn(digits, "0123456789") != len)
        return 0;
    errno = 0;
    long n = strtol(digits, NULL, 10);
    return errno == 0 && n > 0 && n <= INT_MAX ? (int)n : 0;
}

/* The kind of word (0 output, 1 algorithm, 2 reductions, 3 replacement) and its value in o;
 * -1 after one line from rank 0 if it is none of them or a bad replace=N. */
static int read_word(const char *word, int rank, options *o)
{
    if (cg_algorithm_from_name(word) >= 0) {
        o->algorithm = cg_algorithm_from_name(word);
        return 1;
    }
    if (strcmp(word, REDUCTION_NAMES[0]) == 0 || strcmp(word, REDUCTION_NAMES[1]) == 0) {
        o->nonblocking = strcmp(word, REDUCTION_NAMES[1]) == 0;
        return 2;
    }
    if (ends_with(word, ".pvtu")) {
        o->output = word;
        return 0;
    }
    if (strncmp(word, REPLACE_WORD, strlen(REPLACE_WORD)) == 0) {
        o->replace_every = replace_count(word);
        if (o->replace_every > 0)
            return 3;
        if (rank == 0)
            fprintf(stderr, PROG ": argument '%s': N must be a positive integer (replace=N: "
                    "residual replacement every N iterations)\n", word);
        return -1;
    }
    if (rank == 0)
        fprintf(stderr, PROG ": unknown argument '%s': expected OUTPUT.pvtu, an algorithm (pcg, "
                "chronopoulos-gear, gropp, pipelined) or the reductions (blocking, iallreduce)\n",
                word);
    return -1;
}

/* The words after INPUT (every rank reads the same): returns 0, or 2 after one line from
 * rank 0. */
static int read_options(int argc, char **argv, int rank, options *o)
{
    static const char *const WHAT[4] = {"the output file", "the algorithm", "the reduction mode",
                                        "the residual replacement"};
    o->output = NULL;
    o->algorithm = CG_PCG;
    o->nonblocking = 0;
    o->replace_every = 0;
    int given[4] = {0, 0, 0, 0};
    for (int k = 2; k < argc; k++) {
        const int kind = read_word(argv[k], rank, o);
        if (kind < 0)
            return 2;
        if (given[kind]++) {
            if (rank == 0)
                fprintf(stderr, PROG ": argument '%s': %s is given twice\n", argv[k], WHAT[kind]);
            return 2;
        }
    }
    return 0;
}

/* ---- agreeing across ranks ------------------------------------------------------------------- */

/* nonzero on every rank if flag is nonzero on any rank */
static int on_any_rank(int flag)
{
    int any;
    MPI_Allreduce(&flag, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    return any;
}

/* The ranks agree on a step that may fail on some of them only (each reads its own file): the
 * lowest rank that failed prints its message, one line, and every rank returns its status (0 if
 * no rank failed). */
static int agree(int status, const char *msg, int rank, int n_ranks)
{
    int mine = status != 0 ? rank : n_ranks, first;
    MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (first == n_ranks)
        return 0;
    if (first == rank)
        fprintf(stderr, PROG ": %s\n", msg);
    MPI_Bcast(&status, 1, MPI_INT, first, MPI_COMM_WORLD);
    return status;
}

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

/* calloc that notes a failure in *failed instead of stopping: the ranks agree on it afterwards */
static void *alloc_zeroed(long count, size_t size, int *failed)
{
    void *mem = calloc(count > 0 ? (size_t)count : 1, size);
    if (mem == NULL)
        *failed = 1;
    return mem;
}

/* ---- the local data of the blocks: boxes of node indices ------------------------------------- */

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

/* global number of node (i[0], i[1], i[2]) */
static int node_number(const problem *p, const int i[3])
{
    return i[0] + (p->fem.nel[0] + 1) * (i[1] + (p->fem.nel[1] + 1) * i[2]);
}

enum { MAX_NEIGHBOURS = 26 };    /* the blocks around a block */

typedef struct {
    box owned;           /* the internal nodes */
    box local;           /* all local nodes: the owned box grown by one layer */
    box elem;            /* local elements: element (i, j, k) has corners i..i+1, j..j+1, k..k+1 */
    int n_neighbours;
    int neighbours[MAX_NEIGHBOURS];              /* their ranks, ascending */
    int neighbour_part[MAX_NEIGHBOURS][3];
    int import_ptr[MAX_NEIGHBOURS + 1], export_ptr[MAX_NEIGHBOURS + 1];
    int *local_of;       /* the local number of each node of the local box, by position in it */
} block_plan;

/* The boxes of rank `rank`, its neighbours and how many nodes go to and come from each of them,
 * from the partition alone (no communication). */
static void plan_blocks(const problem *p, int rank, block_plan *b)
{
    int part[3] = {rank % p->parts[0], rank / p->parts[0] % p->parts[1],
                   rank / (p->parts[0] * p->parts[1])};
    b->owned = owned_box(p, part);
    b->local = grown_box(p, &b->owned);
    for (int d = 0; d < 3; d++) {           /* element i has corners i and i + 1 */
        b->elem.lo[d] = b->local.lo[d];
        b->elem.hi[d] = b->local.hi[d] - 1;
    }
    /* The neighbours: the existing blocks around this one, dz outermost and dx innermost, which
     * gives ascending ranks. Each owns some nodes of our grown box (we import them) and its grown
     * box holds some of our nodes (we export them): the relation is symmetric. */
    b->n_neighbours = 0;
    b->import_ptr[0] = b->export_ptr[0] = 0;
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
                const int nb = b->n_neighbours++;
                box theirs = owned_box(p, other), their_local = grown_box(p, &theirs);
                box imported = intersection(&theirs, &b->local);
                box exported = intersection(&b->owned, &their_local);
                b->neighbours[nb] = rank_of(p, other);
                memcpy(b->neighbour_part[nb], other, sizeof other);
                b->import_ptr[nb + 1] = b->import_ptr[nb] + (int)box_count(&imported);
                b->export_ptr[nb + 1] = b->export_ptr[nb] + (int)box_count(&exported);
            }
}

/* the sizes of the local data from the plan, and its arrays */
static void alloc_block_data(block_plan *b, local_data *d, int *failed)
{
    const int n_nb = b->n_neighbours;
    d->n_internal = (int)box_count(&b->owned);
    d->n_local = (int)box_count(&b->local);
    d->n_elem = (int)box_count(&b->elem);
    d->n_neighbours = n_nb;
    d->global_ids = alloc_zeroed(d->n_local, sizeof(int), failed);
    d->element_ids = alloc_zeroed(d->n_elem, sizeof(int), failed);
    d->elements = alloc_zeroed(8L * d->n_elem, sizeof(int), failed);
    d->neighbours = alloc_zeroed(n_nb, sizeof(int), failed);
    d->import_ptr = alloc_zeroed(n_nb + 1, sizeof(int), failed);
    d->import_index = alloc_zeroed(d->n_local - d->n_internal, sizeof(int), failed);
    d->export_ptr = alloc_zeroed(n_nb + 1, sizeof(int), failed);
    d->export_index = alloc_zeroed(b->export_ptr[n_nb], sizeof(int), failed);
    b->local_of = alloc_zeroed(d->n_local, sizeof(int), failed);
}

/* position of node i in the local box (i must lie in it) */
static long local_position(const block_plan *b, const int i[3])
{
    const box *l = &b->local;
    return (i[0] - l->lo[0])
           + (long)(l->hi[0] - l->lo[0])
                 * ((i[1] - l->lo[1]) + (long)(l->hi[1] - l->lo[1]) * (i[2] - l->lo[2]));
}

/* Gives the nodes of box c the local numbers next, next + 1, ... in ascending global number
 * (k outermost, i innermost); returns the next free number. */
static int number_nodes(const problem *p, block_plan *b, local_data *d, const box *c, int next)
{
    int i[3];
    for (i[2] = c->lo[2]; i[2] < c->hi[2]; i[2]++)
        for (i[1] = c->lo[1]; i[1] < c->hi[1]; i[1]++)
            for (i[0] = c->lo[0]; i[0] < c->hi[0]; i[0]++, next++) {
                b->local_of[local_position(b, i)] = next;
                d->global_ids[next] = node_number(p, i);
            }
    return next;
}

/* The local numbers of the nodes of box c, ascending global number, into list. */
static void list_nodes(const block_plan *b, const box *c, int *restrict list)
{
    int i[3], count = 0;
    for (i[2] = c->lo[2]; i[2] < c->hi[2]; i[2]++)
        for (i[1] = c->lo[1]; i[1] < c->hi[1]; i[1]++)
            for (i[0] = c->lo[0]; i[0] < c->hi[0]; i[0]++)
                list[count++] = b->local_of[local_position(b, i)];
}

/* Internal nodes first, then the external ones neighbour by neighbour (ascending rank), each
 * group in ascending global number; the import and export lists in the same orders. */
static void number_block_nodes(const problem *p, block_plan *b, local_data *d)
{
    int next = number_nodes(p, b, d, &b->owned, 0);
    for (int nb = 0; nb < b->n_neighbours; nb++) {
        box theirs = owned_box(p, b->neighbour_part[nb]);
        box imported = intersection(&theirs, &b->local);
        next = number_nodes(p, b, d, &imported, next);
    }
    for (int k = 0; k < d->n_local - d->n_internal; k++)
        d->import_index[k] = d->n_internal + k;
    for (int nb = 0; nb < b->n_neighbours; nb++) {
        box theirs = owned_box(p, b->neighbour_part[nb]), their_local = grown_box(p, &theirs);
        box exported = intersection(&b->owned, &their_local);
        list_nodes(b, &exported, d->export_index + b->export_ptr[nb]);
    }
    memcpy(d->neighbours, b->neighbours, b->n_neighbours * sizeof(int));
    memcpy(d->import_ptr, b->import_ptr, (b->n_neighbours + 1) * sizeof(int));
    memcpy(d->export_ptr, b->export_ptr, (b->n_neighbours + 1) * sizeof(int));
}

/* the local elements in ascending global number, with fem3d's corner order */
static void build_block_elements(const problem *p, const block_plan *b, local_data *d)
{
    const box *c = &b->elem;
    int i[3];
    long e = 0;
    for (i[2] = c->lo[2]; i[2] < c->hi[2]; i[2]++)
        for (i[1] = c->lo[1]; i[1] < c->hi[1]; i[1]++)
            for (i[0] = c->lo[0]; i[0] < c->hi[0]; i[0]++, e++) {
                d->element_ids[e] = i[0] + p->fem.nel[0] * (i[1] + p->fem.nel[1] * i[2]);
                for (int a = 0; a < 8; a++) {
                    int corner[3];
                    for (int k = 0; k < 3; k++)
                        corner[k] = i[k] + FEM3D_CORNER[a][k];
                    d->elements[8 * e + a] = b->local_of[local_position(b, corner)];
                }
            }
}

/* The local data of this rank's block, built by itself; returns the exit status (agreed). */
static int build_blocks(const problem *p, int rank, int n_ranks, local_data *d)
{
    block_plan b;
    int failed = 0;
    d->rank = rank;
    d->size = n_ranks;
    plan_blocks(p, rank, &b);
    alloc_block_data(&b, d, &failed);
    if (on_any_rank(failed)) {
        free(b.local_of);
        return out_of_memory(p, rank);
    }
    number_block_nodes(p, &b, d);
    build_block_elements(p, &b, d);
    free(b.local_of);
    return 0;
}

/* ---- the local data from a file -------------------------------------------------------------- */

/* Rank r reads PREFIX.r (name: its path, for messages); the ranks agree on the outcome, and on
 * whether the tables of all files fit together. Returns the exit status. */
static int read_local_files(const problem *p, int rank, int n_ranks, local_data *d,
                            const char *name)
{
    char msg[MSG_SIZE];
    int status = read_local_data(name, p->fem.nel, p->fem.size, rank, n_ranks, d, msg,
                                 sizeof msg);
    status = agree(status, msg, rank, n_ranks);
    if (status == 0)
        status = agree(check_local_tables(d, name, MPI_COMM_WORLD, msg, sizeof msg), msg, rank,
                       n_ranks);
    return status;
}

/* ---- the local mesh: what the local data give, the same for blocks and files ----------------- */

enum { ELEMENT_COLORS = 8 };    /* the parities of an element's (i, j, k): see element_color */

typedef struct {
    int *grid;           /* grid[3 a + d]: index along axis d of local node a */
    int n_quad;
    int *quads;          /* the 4 local corners of every flux-face quad of a local element */
    int *elem_ptr, *elem_list;   /* the local elements around each local node (CRS) */
    int *mark;           /* work array of local_pattern */
    int color_ptr[ELEMENT_COLORS + 1];   /* the local elements by color: by_color[color_ptr[c] */
    int *by_color;                       /* .. color_ptr[c+1]-1] are those of color c */
} local_mesh;

static void local_grid(const problem *p, const local_data *d, int *restrict grid)
{
    const int nx = p->fem.nel[0] + 1, ny = p->fem.nel[1] + 1;
    for (int a = 0; a < d->n_local; a++) {
        const int n = d->global_ids[a];
        grid[3L * a] = n % nx;
        grid[3L * a + 1] = n / nx % ny;
        grid[3L * a + 2] = n / nx / ny;
    }
}

/* 1 if local element e lies at the flux face (the face opposite to the fixed one) */
static int at_flux_face(const problem *p, const local_data *d, int e)
{
    const int face = p->fem.fixed_face ^ 1, axis = face / 2, *nel = p->fem.nel;
    const int id = d->element_ids[e];
    const int i[3] = {id % nel[0], id / nel[0] % nel[1], id / nel[0] / nel[1]};
    return i[axis] == (face % 2 ? nel[axis] - 1 : 0);
}

static int count_flux_quads(const problem *p, const local_data *d)
{
    int n = 0;
    for (int e = 0; e < d->n_elem; e++)
        n += at_flux_face(p, d, e);
    return n;
}

/* The flux-face quads of the local elements at that face, in ascending element number: the 4
 * corners of the element on the face, in cyclic order in the plane of the other two axes u, v
 * (cyclic: u = axis + 1, v = axis + 2), as fem3d's face_quads. Quads with no internal corner are
 * harmless: they only load external rows. */
static void build_flux_quads(const problem *p, const local_data *d, int *restrict quads)
{
    static const int STEP[4][2] = {{0, 0}, {1, 0}, {1, 1}, {0, 1}};
    const int face = p->fem.fixed_face ^ 1, axis = face / 2;
    const int u = (axis + 1) % 3, v = (axis + 2) % 3;
    int corner_of_step[4];               /* the element corner at each step around the face */
    for (int c = 0; c < 4; c++) {
        int offset[3];
        offset[axis] = face % 2;
        offset[u] = STEP[c][0];
        offset[v] = STEP[c][1];
        for (int a = 0; a < 8; a++)
            if (memcmp(FEM3D_CORNER[a], offset, sizeof offset) == 0)
                corner_of_step[c] = a;
    }
    long f = 0;
    for (int e = 0; e < d->n_elem; e++)
        if (at_flux_face(p, d, e)) {
            for (int c = 0; c < 4; c++)
                quads[4 * f + c] = d->elements[8L * e + corner_of_step[c]];
            f++;
        }
}

/* elem_list[elem_ptr[a] .. elem_ptr[a+1]-1]: the local elements that have local node a as a
 * corner (elem_ptr zeroed on entry) */
static void node_elements(const local_data *d, int *restrict elem_ptr, int *restrict elem_list)
{
    for (long k = 0; k < 8L * d->n_elem; k++)
        elem_ptr[d->elements[k] + 1]++;
    for (int a = 0; a < d->n_local; a++)
        elem_ptr[a + 1] += elem_ptr[a];
    for (long k = 0; k < 8L * d->n_elem; k++)           /* elem_ptr[a] moves to elem_ptr[a+1] */
        elem_list[elem_ptr[d->elements[k]]++] = (int)(k / 8);
    for (int a = d->n_local; a > 0; a--)
        elem_ptr[a] = elem_ptr[a - 1];
    elem_ptr[0] = 0;
}

/*
 * The CRS pattern over all local rows and columns: row a holds every local node that shares a
 * local element with a. Its columns are sorted by GLOBAL number, as in the serial matrix: an
 * internal row (all the elements around an internal node are local) is the serial row, entry by
 * entry. External rows lack the elements of other ranks; they are assembled only partly and the
 * solver never reads them. */

/* The columns of row a, unsorted, into cols (if not NULL); returns how many. mark: n_local ints,
 * none equal to a + 1 on entry. */
static int row_columns(const local_data *d, const local_mesh *m, int a, int *restrict mark,
                       int *restrict cols)
{
    int n = 0;
    for (int k = m->elem_ptr[a]; k < m->elem_ptr[a + 1]; k++)
        for (int c = 0; c < 8; c++) {
            const int b = d->elements[8L * m->elem_list[k] + c];
            if (mark[b] != a + 1) {
                mark[b] = a + 1;
                if (cols != NULL)
                    cols[n] = b;
                n++;
            }
        }
    return n;
}

/* row_ptr of the pattern; returns its nonzeros (a long: a bad file may exceed an int) */
static long count_pattern(const local_data *d, local_mesh *m, int *restrict row_ptr)
{
    long nnz = 0;
    memset(m->mark, 0, d->n_local * sizeof(int));
    for (int a = 0; a < d->n_local; a++) {
        row_ptr[a] = nnz <= INT_MAX ? (int)nnz : INT_MAX;
        nnz += row_columns(d, m, a, m->mark, NULL);
    }
    row_ptr[d->n_local] = nnz <= INT_MAX ? (int)nnz : INT_MAX;
    return nnz;
}

static void fill_pattern(const local_data *d, local_mesh *m, const int *restrict row_ptr,
                         int *restrict col_idx)
{
    memset(m->mark, 0, d->n_local * sizeof(int));
    for (int a = 0; a < d->n_local; a++) {
        int *cols = col_idx + row_ptr[a];
        const int n = row_columns(d, m, a, m->mark, cols);
        for (int k = 1; k < n; k++) {               /* insertion sort by global number */
            const int b = cols[k];
            int j = k;
            for (; j > 0 && d->global_ids[cols[j - 1]] > d->global_ids[b]; j--)
                cols[j] = cols[j - 1];
            cols[j] = b;
        }
    }
}

/* ---- the local system ------------------------------------------------------------------------ */

typedef struct {
    long nnz;            /* of all n_local rows */
    int *row_ptr, *col_idx, *fixed;
    double *val, *rhs, *q, *g, *xyz, *t, *t_exact, *send_buf, *recv_buf;
    double *q_elem;      /* nakajima's source on each local element (line 3's SOURCE) */
} local_system;

static void alloc_local_mesh(const problem *p, const local_data *d, local_mesh *m, int *failed)
{
    const long n = d->n_local;
    m->grid = alloc_zeroed(3 * n, sizeof(int), failed);
    m->n_quad = count_flux_quads(p, d);
    m->quads = alloc_zeroed(4L * m->n_quad, sizeof(int), failed);
    m->elem_ptr = alloc_zeroed(n + 1, sizeof(int), failed);
    m->elem_list = alloc_zeroed(8L * d->n_elem, sizeof(int), failed);
    m->mark = alloc_zeroed(n, sizeof(int), failed);
    m->by_color = alloc_zeroed(d->n_elem, sizeof(int), failed);
}

static void free_local_mesh(local_mesh *m)
{
    free(m->grid), free(m->quads), free(m->elem_ptr), free(m->elem_list), free(m->mark);
    free(m->by_color);
}

/* the vectors (the pattern's columns and values come once the pattern is counted) */
static void alloc_local_vectors(const local_data *d, local_system *s, int *failed)
{
    const long n = d->n_local;
    s->row_ptr = alloc_zeroed(n + 1, sizeof(int), failed);
    s->fixed = alloc_zeroed(n, sizeof(int), failed);
    s->rhs = alloc_zeroed(n, sizeof(double), failed);
    s->q = alloc_zeroed(n, sizeof(double), failed);
    s->q_elem = alloc_zeroed(d->n_elem, sizeof(double), failed);
    s->g = alloc_zeroed(n, sizeof(double), failed);
    s->xyz = alloc_zeroed(3 * n, sizeof(double), failed);
    s->t = alloc_zeroed(n, sizeof(double), failed);
    s->t_exact = alloc_zeroed(n, sizeof(double), failed);
    s->send_buf = alloc_zeroed(d->export_ptr[d->n_neighbours], sizeof(double), failed);
    s->recv_buf = alloc_zeroed(n - d->n_internal, sizeof(double), failed);
}

static void free_local_system(local_system *s)
{
    free(s->row_ptr), free(s->col_idx), free(s->fixed), free(s->val), free(s->rhs), free(s->q);
    free(s->g), free(s->xyz), free(s->t), free(s->t_exact), free(s->send_buf), free(s->recv_buf);
    free(s->q_elem);
}

/* coordinates, source, fixed flags and the exact solution at the local nodes; nakajima's source
 * on the local elements (the nodal source is 0 then) */
static void local_node_data(const problem *p, const local_data *d, const local_mesh *m,
                            local_system *s)
{
    const int nakajima = p->fem.source == FEM3D_SOURCE_NAKAJIMA;
    const int axis = p->fem.fixed_face / 2;
    const int on_fixed_face = p->fem.fixed_face % 2 ? p->fem.nel[axis] : 0;
    for (int a = 0; a < d->n_local; a++) {
        const int *i = m->grid + 3L * a;
        for (int k = 0; k < 3; k++)
            s->xyz[3L * a + k] = i[k] * p->fem.size[k];
        s->q[a] = nakajima ? 0.0 : p->fem.qvol;
        s->fixed[a] = i[axis] == on_fixed_face;
        s->t_exact[a] = fem3d_exact_at(&p->fem, i);
    }
    if (nakajima)
        fem3d_nakajima_source(d->n_elem, d->elements, s->xyz, p->fem.qvol, s->q_elem);
}

/* The color of local element e (08_hybrid): the parities of its indices (i, j, k) along x, y, z,
 * i%2 + 2 (j%2) + 4 (k%2). Two elements that share a node differ by at most 1 in every index, so
 * two different elements with the same three parities share no node: the elements of one color
 * add into disjoint rows, and threads may assemble them at once without atomics. */
static int element_color(const problem *p, const local_data *d, int e)
{
    const int id = d->element_ids[e], *nel = p->fem.nel;
    const int i = id % nel[0], j = id / nel[0] % nel[1], k = id / nel[0] / nel[1];
    return i % 2 + 2 * (j % 2) + 4 * (k % 2);
}

/* m->color_ptr, m->by_color: the local elements grouped by color, ascending inside a color */
static void color_elements(const problem *p, const local_data *d, local_mesh *m)
{
    int next[ELEMENT_COLORS] = {0};
    for (int e = 0; e < d->n_elem; e++)
        next[element_color(p, d, e)]++;
    m->color_ptr[0] = 0;
    for (int c = 0; c < ELEMENT_COLORS; c++) {
        m->color_ptr[c + 1] = m->color_ptr[c] + next[c];
        next[c] = m->color_ptr[c];
    }
    for (int e = 0; e < d->n_elem; e++)
        m->by_color[next[element_color(p, d, e)]++] = e;
}

/* First touch (lecture 03's v1) of what the threads of the solve work on by static shares of the
 * internal rows: the matrix rows, the right-hand side and the solution, zeroed by the same static
 * schedule, so that each thread's pages are placed in its NUMA node's memory. The external rows
 * (assembled partly, never read by the solver) by a second loop. */
static void first_touch_rows(const local_data *d, local_system *s)
{
    const int *restrict row_ptr = s->row_ptr;
#pragma omp parallel
    {
#pragma omp for schedule(static)
        for (int i = 0; i < d->n_internal; i++) {
            for (int k = row_ptr[i]; k < row_ptr[i + 1]; k++)
                s->val[k] = 0.0;
            s->rhs[i] = s->t[i] = 0.0;
        }
#pragma omp for schedule(static)
        for (int i = d->n_internal; i < d->n_local; i++) {
            for (int k = row_ptr[i]; k < row_ptr[i + 1]; k++)
                s->val[k] = 0.0;
            s->rhs[i] = s->t[i] = 0.0;
        }
    }
}

/* The local mesh and system of the local data, allocated (the ranks agree on the memory) and
 * built up to the assembly; returns the exit status. */
static int build_system(const problem *p, const local_data *d, local_mesh *m, local_system *s,
                        int rank)
{
    int failed = 0;
    alloc_local_mesh(p, d, m, &failed);
    alloc_local_vectors(d, s, &failed);
    if (on_any_rank(failed))
        return out_of_memory(p, rank);
    local_grid(p, d, m->grid);
    build_flux_quads(p, d, m->quads);
    node_elements(d, m->elem_ptr, m->elem_list);
    s->nnz = count_pattern(d, m, s->row_ptr);
    failed = s->nnz > INT_MAX;
    if (!failed) {
        s->col_idx = alloc_zeroed(s->nnz, sizeof(int), &failed);
        s->val = alloc_zeroed(s->nnz, sizeof(double), &failed);
    }
    if (on_any_rank(failed))
        return out_of_memory(p, rank);
    fill_pattern(d, m, s->row_ptr, s->col_idx);
    first_touch_rows(d, s);
    local_node_data(p, d, m, s);
    color_elements(p, d, m);
    return 0;
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
static int write_piece(const char *path, const local_data *d, const local_system *s, int rank)
{
    FILE *out = fopen(path, "w");
    if (out == NULL)
        return -1;
    int n_owned = 0;
    for (int e = 0; e < d->n_elem; e++)
        n_owned += d->elements[8L * e] < d->n_internal;
    fprintf(out, "<?xml version=\"1.0\"?>\n<VTKFile type=\"UnstructuredGrid\" version=\"0.1\""
                 " byte_order=\"LittleEndian\">\n<UnstructuredGrid>\n"
                 "<Piece NumberOfPoints=\"%d\" NumberOfCells=\"%d\">\n", d->n_local, n_owned);
    fprintf(out, "<PointData Scalars=\"temperature\">\n"
                 "<DataArray type=\"Float64\" Name=\"temperature\" format=\"ascii\">\n");
    for (int a = 0; a < d->n_local; a++)
        fprintf(out, "%.15g\n", s->t[a]);
    fprintf(out, "</DataArray>\n</PointData>\n<CellData Scalars=\"rank\">\n"
                 "<DataArray type=\"Int32\" Name=\"rank\" format=\"ascii\">\n");
    for (int e = 0; e < n_owned; e++)
        fprintf(out, "%d\n", rank);
    fprintf(out, "</DataArray>\n</CellData>\n<Points>\n"
                 "<DataArray type=\"Float64\" NumberOfComponents=\"3\" format=\"ascii\">\n");
    for (int a = 0; a < d->n_local; a++)
        fprintf(out, "%.15g %.15g %.15g\n", s->xyz[3L * a], s->xyz[3L * a + 1],
                s->xyz[3L * a + 2]);
    fprintf(out, "</DataArray>\n</Points>\n<Cells>\n"
                 "<DataArray type=\"Int32\" Name=\"connectivity\" format=\"ascii\">\n");
    for (long e = 0; e < d->n_elem; e++) {
        if (d->elements[8 * e] >= d->n_internal)
            continue;
        for (int a = 0; a < 8; a++)
            fprintf(out, a < 7 ? "%d " : "%d\n", d->elements[8 * e + a]);
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

/* Rank 0 writes OUTPUT.pvtu, then every rank its piece. Returns 0, or 2 on every rank if any rank
 * failed (the lowest such rank prints the one line). */
static int write_output(const char *output, const local_data *d, const local_system *s, int rank,
                        int n_ranks)
{
    char msg[MSG_SIZE] = "";
    const char *failed_path = NULL;
    char *piece = piece_name(output, rank);
    if (rank == 0 && write_pvtu(output, n_ranks) != 0)
        failed_path = output;
    else if (piece == NULL || write_piece(piece, d, s, rank) != 0)
        failed_path = piece != NULL ? piece : output;
    if (failed_path != NULL)
        snprintf(msg, sizeof msg, "%s: cannot write output file: %s", failed_path,
                 strerror(errno));
    free(piece);
    return agree(failed_path != NULL ? 2 : 0, msg, rank, n_ranks);
}

/* ---- the summary ----------------------------------------------------------------------------- */

static double max_of(long n, const double *restrict v)
{
    double m = v[0];
    for (long i = 1; i < n; i++)
        m = fmax(m, v[i]);
    return m;
}

/* fem3d's lines 2 to 5: the problem, CG, and the temperature against the exact solution
 * (constant source), or its maximum alone (nakajima: no exact solution). max: the global max T,
 * max exact T and max nodal error. */
static void print_problem(const problem *p, int iters, double relres, const double max[3])
{
    const int flux_face = p->fem.fixed_face ^ 1;
    const char *face = FEM3D_FACES[p->fem.fixed_face], *flux = FEM3D_FACES[flux_face];
    if (p->fem.source == FEM3D_SOURCE_NAKAJIMA)
        printf("  T = 0 on %s, heat flux %g into %s, source %g |x_c + y_c| (nakajima), "
               "conductivity %g\n", face, p->fem.qflux, flux, p->fem.qvol, p->fem.cond);
    else
        printf("  T = 0 on %s, heat flux %g into %s, source %g, conductivity %g\n", face,
               p->fem.qflux, flux, p->fem.qvol, p->fem.cond);
    printf("  CG: %d iterations, relative residual %.3e (%s)\n", iters, relres,
           relres <= p->fem.eps ? "converged" : "NOT converged");
    if (p->fem.source == FEM3D_SOURCE_NAKAJIMA) {
        printf("  max T = %.10g   (no exact solution for this source)\n", max[0]);
        return;
    }
    printf("  max T = %.10g   should be %.10g\n", max[0], max[1]);
    printf("  max nodal error %.3e (should be near round-off and the CG tolerance: the elements"
           " are nodally exact here)\n", max[2]);
}

/* fem3d's summary with global numbers, and the partition (rank 0 prints) */
static void print_summary(const problem *p, const local_data *d, const local_system *s,
                          const char *partition, int iters, double relres, int rank, int n_ranks)
{
    const int n = d->n_internal;
    double err = 0.0;
    for (int a = 0; a < n; a++)
        err = fmax(err, fabs(s->t[a] - s->t_exact[a]));
    double local_max[3] = {max_of(n, s->t), max_of(n, s->t_exact), err}, global_max[3];
    MPI_Allreduce(local_max, global_max, 3, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    /* min of n_internal as the max of -n_internal */
    int local_ints[3] = {n, -n, d->n_neighbours}, global_ints[3];
    MPI_Allreduce(local_ints, global_ints, 3, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    /* every imported value is received once per exchange: 8 bytes each */
    long local_sums[4] = {n, s->row_ptr[n], d->n_local - n, d->import_ptr[d->n_neighbours]};
    long global_sums[4];
    MPI_Allreduce(local_sums, global_sums, 4, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (rank != 0)
        return;
    printf("fem3d_mpi (C): %d x %d x %d elements, %ld unknowns, %ld nonzeros\n", p->fem.nel[0],
           p->fem.nel[1], p->fem.nel[2], global_sums[0], global_sums[1]);
    print_problem(p, iters, relres, global_max);
    printf("  ranks %d (%s), internal nodes per rank min %d max %d, neighbours max %d, external "
           "nodes total %ld, bytes per exchange %ld\n", n_ranks, partition, -global_ints[1],
           global_ints[0], global_ints[2], global_sums[2], 8 * global_sums[3]);
    fflush(stdout);
}

/* the name of an MPI_THREAD_... level */
static const char *thread_level_name(int level)
{
    if (level == MPI_THREAD_SINGLE)
        return THREAD_LEVELS[0];
    if (level == MPI_THREAD_FUNNELED)
        return THREAD_LEVELS[1];
    return level == MPI_THREAD_SERIALIZED ? THREAD_LEVELS[2] : THREAD_LEVELS[3];
}

/* the four lines on the solver: the variant and its counted reductions, the true residual, the
 * preconditioner (its colors: the fewest and the most over the ranks) with its counted halo
 * exchanges, the MPI thread level and the OpenMP threads per rank (every rank calls: the colors
 * are reduced; rank 0 prints) */
static void print_variant(const options *o, const precond_mpi *m, int per_iteration,
                          int exchanges_per_iteration, double true_relres, int rank)
{
    int local[2] = {m->ncolor, -m->ncolor}, global[2];           /* min as the max of -ncolor */
    MPI_Allreduce(local, global, 2, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (rank != 0)
        return;
    printf("  algorithm %s (%s), reductions per iteration %d\n", cg_algorithm_name(o->algorithm),
           REDUCTION_NAMES[o->nonblocking], per_iteration);
    printf("  true relative residual %.3e (||b - A x|| / ||b||, recomputed)\n", true_relres);
    printf("  preconditioner %s, sweeps %d, ordering %s, colors %d..%d, halo exchanges per "
           "iteration %d (counted)\n", precond_name(m->kind), m->sweeps, m->ordering, -global[1],
           global[0], exchanges_per_iteration);
    printf("  MPI thread level asked FUNNELED, provided %s; OpenMP threads per rank %d\n",
           thread_level_name(o->thread_level), omp_get_max_threads());
    fflush(stdout);
}

/* ---- the preconditioner ---------------------------------------------------------------------- */

/* precond_setup on the internal rows of every rank; the ranks agree on the outcome. Returns 0,
 * or the exit status after one line from the lowest failing rank (2 for too many colors and an
 * IC(0) breakdown, 1 out of memory). */
static int setup_precond(const problem *p, const local_data *d, const local_system *s,
                         precond_mpi *m, int rank, int n_ranks)
{
    char msg[MSG_SIZE] = "";
    const int status = precond_setup(p->precond, p->sweeps, ORDERINGS[p->ordering], p->colors,
                                     d->n_internal, d->n_local, s->row_ptr, s->col_idx, s->val,
                                     m);
    int exit_status = status == PRECOND_OUT_OF_MEMORY ? 1 : status != 0 ? 2 : 0;
    if (status == PRECOND_OUT_OF_MEMORY)
        snprintf(msg, sizeof msg, "out of memory for NX NY NZ = %d %d %d", p->fem.nel[0],
                 p->fem.nel[1], p->fem.nel[2]);
    else if (status == PRECOND_TOO_MANY_COLORS)
        snprintf(msg, sizeof msg, "%s:9: colors %d exceed the %d internal nodes of rank %d",
                 p->path, p->colors, d->n_internal, rank);
    else if (status <= PRECOND_BREAKDOWN)
        snprintf(msg, sizeof msg, "%s: IC(0) breaks down on rank %d at internal node %d (a pivot "
                 "<= 0): the internal block is not positive definite", precond_name(p->precond),
                 rank, PRECOND_BREAKDOWN - status);
    else if (status != 0)
        snprintf(msg, sizeof msg, "%s:8: bad preconditioner choice", p->path);
    return agree(exit_status, msg, rank, n_ranks);
}

/* ---- the threaded assembly (08_hybrid) ------------------------------------------------------- */

/* Adds the matrix and load of local element e into the rows of its corners (fem3d_assemble's
 * loop body, lecture 02's kernels); returns nonzero if its Jacobian is not positive. */
static int add_element(const local_data *d, local_system *s, double cond, int e)
{
    const int *node = d->elements + 8L * e;
    double xyz_e[24], q_e[8], ke[64], fe[8];
    for (int a = 0; a < 8; a++) {                     /* gather the element's corners */
        for (int k = 0; k < 3; k++)
            xyz_e[3 * a + k] = s->xyz[3L * node[a] + k];
        q_e[a] = s->q[node[a]];
    }
    if (fem3d_element(xyz_e, cond, q_e, ke, fe) != 0)
        return 1;
    for (int a = 0; a < 8; a++) {                     /* scatter into the local system */
        s->rhs[node[a]] += fe[a];
        for (int b = 0; b < 8; b++)
            s->val[crs_find(s->row_ptr, s->col_idx, node[a], node[b])] += ke[8 * a + b];
    }
    return 0;
}

/* The local matrix and load over the local elements (val and rhs hold zeros on entry), by the
 * team of threads: color by color, one `omp for` over the elements of a color, whose implied
 * barrier ends it. No two elements of a color share a row (element_color), so the threads never
 * add into the same entry at once. Every entry gets at most one element of each color, added
 * color by color: the same sums as fem3d_assemble's element by element, in another order (equal
 * to rounding), and the same bits for any number of threads. Returns nonzero if an element is
 * degenerate. */
static int assemble_by_colors(const problem *p, const local_data *d, const local_mesh *m,
                              local_system *s)
{
    int bad = 0;
#pragma omp parallel
    for (int c = 0; c < ELEMENT_COLORS; c++) {
#pragma omp for schedule(static) reduction(| : bad)
        for (int k = m->color_ptr[c]; k < m->color_ptr[c + 1]; k++)
            bad |= add_element(d, s, p->fem.cond, m->by_color[k]);
    }
    return bad;
}

/* ---- the program ----------------------------------------------------------------------------- */

/* The check of the tables, assembly, solution and output on one rank; returns the exit status
 * (the same on every rank). */
static int solve(const problem *p, const local_data *d, const local_mesh *m, local_system *s,
                 const char *name, const char *partition, const options *o, int rank,
                 int n_ranks)
{
    const char *output = o->output;
    char msg[MSG_SIZE];
    int status = check_local_halo(d, s->t, s->send_buf, s->recv_buf, name, MPI_COMM_WORLD, msg,
                                  sizeof msg);
    if (agree(status, msg, rank, n_ranks) != 0)
        return 2;
    memset(s->t, 0, d->n_local * sizeof(double));          /* the initial guess */

    /* fem3d's element kernel on the local elements by a team of threads, color by color; the
     * serial kernels on the flux-face quads (few) and the rows */
    int bad = assemble_by_colors(p, d, m, s);
    if (bad == 0 && p->fem.source == FEM3D_SOURCE_NAKAJIMA)   /* all local elements, as Python */
        bad = fem3d_element_source_load(d->n_elem, d->elements, s->xyz, s->q_elem, s->rhs);
    if (on_any_rank(bad != 0)) {
        report(rank, "degenerate elements (det J <= 0): DX DY DZ too small");
        return 1;
    }
    fem3d_face_flux(m->n_quad, m->quads, s->xyz, p->fem.qflux, s->rhs);
    crs_dirichlet(d->n_local, s->fixed, s->g, s->row_ptr, s->col_idx, s->val, s->rhs);  /* g = 0 */

    const long n_global = (long)(p->fem.nel[0] + 1) * (p->fem.nel[1] + 1) * (p->fem.nel[2] + 1);
    const int max_iter = 10 * n_global <= INT_MAX ? 10 * (int)n_global : INT_MAX;
    precond_mpi pc;
    status = setup_precond(p, d, s, &pc, rank, n_ranks);
    if (status != 0) {
        precond_free(&pc);
        return status;
    }
    double relres, true_relres;
    int per_iteration, exchanges_per_iteration;
    MPI_Barrier(MPI_COMM_WORLD);                  /* the solve timed from a common start */
    const double started = MPI_Wtime();
    int iters = cg_variant_mpi(o->algorithm, o->nonblocking, o->replace_every, d->n_internal,
                               d->n_local, s->row_ptr, s->col_idx, s->val, &pc, s->rhs, s->t,
                               p->fem.eps, max_iter, &relres, d->n_neighbours, d->neighbours,
                               d->import_ptr, d->import_index, d->export_ptr, d->export_index,
                               MPI_COMM_WORLD, &per_iteration, &exchanges_per_iteration,
                               &true_relres);
    double solve_seconds = MPI_Wtime() - started;
    if (iters < 0) {
        precond_free(&pc);
        return out_of_memory(p, rank);
    }
    MPI_Allreduce(MPI_IN_PLACE, &solve_seconds, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    /* the external temperatures too (the solver updates the internal ones only) */
    halo_exchange(d->n_neighbours, d->neighbours, d->import_ptr, d->import_index, d->export_ptr,
                  d->export_index, s->t, s->send_buf, s->recv_buf, MPI_COMM_WORLD);
    print_summary(p, d, s, partition, iters, relres, rank, n_ranks);
    print_variant(o, &pc, per_iteration, exchanges_per_iteration, true_relres, rank);
    if (rank == 0)
        printf("  solve %.6f s, %.2f us per iteration (the slowest rank)\n", solve_seconds,
               iters > 0 ? 1e6 * solve_seconds / iters : 0.0);
    precond_free(&pc);
    status = relres <= p->fem.eps ? 0 : 1;
    if (output != NULL) {
        if (write_output(output, d, s, rank, n_ranks) != 0)
            status = 2;
        else if (rank == 0)
            printf("  wrote %s and %d pieces\n", output, n_ranks);
    }
    return status;
}

/* The local data (blocks or file), the local system, the solution; returns the exit status. */
static int run_rank(const problem *p, const options *o, int rank, int n_ranks)
{
    local_data d;
    local_mesh m;
    local_system s;
    memset(&d, 0, sizeof d), memset(&m, 0, sizeof m), memset(&s, 0, sizeof s);
    char name[MSG_SIZE], partition[MSG_SIZE];        /* for messages, and the summary */
    if (p->prefix[0] != '\0') {
        snprintf(name, sizeof name, "%s.%d", p->prefix, rank);
        snprintf(partition, sizeof partition, "local data %s.*", p->prefix);
    } else {
        snprintf(name, sizeof name, "the block of rank %d", rank);
        snprintf(partition, sizeof partition, "%d x %d x %d blocks", p->parts[0], p->parts[1],
                 p->parts[2]);
    }
    int status = p->prefix[0] != '\0' ? read_local_files(p, rank, n_ranks, &d, name)
                                      : build_blocks(p, rank, n_ranks, &d);
    if (status == 0)
        status = build_system(p, &d, &m, &s, rank);
    if (status == 0)
        status = solve(p, &d, &m, &s, name, partition, o, rank, n_ranks);
    local_data_free(&d);
    free_local_mesh(&m);
    free_local_system(&s);
    return status;
}

int main(int argc, char **argv)
{
    int provided;                         /* MPI calls from the master thread only (08_hybrid) */
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
    atexit(finalize_mpi);
    int rank, n_ranks;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n_ranks);
    input_quiet = rank != 0;              /* every rank reads the input; rank 0 reports */
    int status = 2;
    options o;
    o.thread_level = provided;
    if (provided < MPI_THREAD_FUNNELED) {
        if (rank == 0)
            fprintf(stderr, PROG ": the MPI library provides thread level %s, this program needs "
                    "FUNNELED\n", thread_level_name(provided));
    } else if (argc < 2 || argc > 6) {
        if (rank == 0)
            fprintf(stderr, "usage: %s INPUT [OUTPUT.pvtu] [pcg|chronopoulos-gear|gropp|pipelined] "
                    "[blocking|iallreduce] [replace=N]\n", argv[0]);
    } else if (read_options(argc, argv, rank, &o) == 0) {
        const problem p = read_input(argv[1], n_ranks);    /* exits with 2 on bad input */
        status = run_rank(&p, &o, rank, n_ranks);
    }
    MPI_Finalize();
    return status;
}
