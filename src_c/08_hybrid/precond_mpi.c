/* The parallel preconditioners of lecture 08_hybrid (precond_mpi.h): Jacobi, localized IC(0)
 * (block Jacobi over the ranks) and additive Schwarz sweeps (ASDD) around it. The IC(0) of a rank
 * is 04_iccg's: the internal block A_ii ordered (ordering.c), permuted, split into D, L, U,
 * factored once (ic0_factor, ic0_transpose) and applied with the colored sweeps ic0_forward,
 * ic0_backward. On one rank A_ii is the whole matrix: bjacobi-ic0 is the serial ICCG of 04_iccg. */
#include <stdlib.h>
#include <string.h>

#include "course.h"
#include "halo.h"
#include "iccg.h"
#include "precond_mpi.h"

static const char *const KIND_NAMES[PRECOND_N_KINDS] = {"diagonal", "bjacobi-ic0", "asdd-ic0"};
static const char *const ORDERING_NAMES[5] = {"natural", "cm", "rcm", "mc", "cm-rcm"};

const char *precond_name(int kind)
{
    return kind >= 0 && kind < PRECOND_N_KINDS ? KIND_NAMES[kind] : NULL;
}

int precond_from_name(const char *name)
{
    for (int k = 0; k < PRECOND_N_KINDS; k++)
        if (strcmp(name, KIND_NAMES[k]) == 0)
            return k;
    return -1;
}

/* the position of the ordering in ORDERING_NAMES, or -1 */
static int ordering_index(const char *name)
{
    for (int k = 0; k < 5; k++)
        if (strcmp(name, ORDERING_NAMES[k]) == 0)
            return k;
    return -1;
}

/* nonzero if (kind, sweeps, ordering, colors) is a valid combination (precond_mpi.h) */
static int valid_choice(int kind, int sweeps, int ordering, int colors)
{
    if (precond_name(kind) == NULL || ordering < 0 || sweeps < 1)
        return 0;
    if (kind != PRECOND_ASDD_IC0 && sweeps != 1)
        return 0;
    if (kind == PRECOND_DIAGONAL && (ordering != 0 || colors != 0))
        return 0;
    return ordering < 3 ? colors == 0 : colors >= 2;       /* mc and cm-rcm take K >= 2 */
}

static void *alloc_array(long count, size_t size, int *failed)
{
    void *mem = malloc((count > 0 ? (size_t)count : 1) * size);
    if (mem == NULL)
        *failed = 1;
    return mem;
}

/* ---- the internal block and its ordering ----------------------------------------------------- */

/* The graph of A_ii: (ptr, adj) = the columns < n of the internal rows but the diagonal, in
 * their CRS order (the pattern, zeros of the Dirichlet rows included, as
 * course.solvers.ordering.adjacency). adj holds row_ptr[n] entries at most. */
static void block_graph(int n, const int *restrict row_ptr, const int *restrict col_idx,
                        int *restrict ptr, int *restrict adj)
{
    ptr[0] = 0;
    for (int i = 0; i < n; i++) {
        int count = ptr[i];
        for (int k = row_ptr[i]; k < row_ptr[i + 1]; k++)
            if (col_idx[k] < n && col_idx[k] != i)
                adj[count++] = col_idx[k];
        ptr[i + 1] = count;
    }
}

/* The colors of the ordering (index in ORDERING_NAMES) with target K, and the order `within`
 * that numbers the unknowns inside a color (course.solvers.ordering.order). Returns the number
 * of colors, -1 out of memory. */
static int color_unknowns(int n, const int *restrict ptr, const int *restrict adj, int ordering,
                          int colors, int *restrict color, int *restrict within)
{
    if (ordering == 0 || ordering == 3) {                 /* natural, mc: the given numbering */
        for (int i = 0; i < n; i++)
            within[i] = i, color[i] = 0;
        return ordering == 0 ? 1 : multicolor(n, ptr, adj, colors, color);
    }
    int *cm = malloc(((size_t)n + 1) * sizeof *cm);
    int *level = malloc(((size_t)n + 1) * sizeof *level);
    if (cm == NULL || level == NULL) {
        free(cm), free(level);
        return -1;
    }
    cuthill_mckee(n, ptr, adj, cm, level);
    int max_level = 0, ncolor = 0;
    for (int k = 0; k < n; k++) {
        within[k] = ordering == 1 ? cm[k] : cm[n - 1 - k];      /* cm, or reversed: rcm */
        if (level[k] > max_level)
            max_level = level[k];
    }
    if (ordering != 4) {                                  /* cm, rcm: wavefronts as colors */
        wavefronts(n, ptr, adj, within, color);
        for (int i = 0; i < n; i++)
            if (color[i] + 1 > ncolor)
                ncolor = color[i] + 1;
    } else {                                              /* cm-rcm: the levels of the RCM */
        for (int i = 0; i < n; i++)
            level[i] = max_level - level[i];
        ncolor = cyclic_colors(n, ptr, adj, within, level, colors, color);
    }
    free(cm), free(level);
    return ncolor;
}

/* p->perm, p->color_ptr, p->ncolor for the ordering of A_ii; 0 or PRECOND_OUT_OF_MEMORY */
static int order_block(precond_mpi *p, int ordering, int colors)
{
    const int n = p->n;
    int failed = 0;
    int *ptr = alloc_array(n + 1L, sizeof(int), &failed);
    int *adj = alloc_array(p->row_ptr[n], sizeof(int), &failed);
    int *color = alloc_array(n, sizeof(int), &failed), *within = alloc_array(n, sizeof(int),
                                                                             &failed);
    p->perm = alloc_array(n, sizeof(int), &failed);
    if (!failed) {
        block_graph(n, p->row_ptr, p->col_idx, ptr, adj);
        p->ncolor = color_unknowns(n, ptr, adj, ordering, colors, color, within);
        failed = p->ncolor < 0;
    }
    if (!failed)
        p->color_ptr = alloc_array(p->ncolor + 1L, sizeof(int), &failed);
    if (!failed)
        color_permutation(n, p->ncolor, color, within, p->perm, p->color_ptr);
    free(ptr), free(adj), free(color), free(within);
    return failed ? PRECOND_OUT_OF_MEMORY : 0;
}

/* ---- the permuted block, split, and its IC(0) ------------------------------------------------ */

/* Puts column j (new numbering) with value v into row i of the part (ptr, col, val) that holds
 * *count entries of row i so far: insertion keeps the columns increasing. */
static void insert_sorted(int start, int *restrict count, int *restrict col, double *restrict val,
                          int j, double v)
{
    int pos = (*count)++;
    while (pos > start && col[pos - 1] > j) {
        col[pos] = col[pos - 1];
        val[pos] = val[pos - 1];
        pos--;
    }
    col[pos] = j;
    val[pos] = v;
}

/* The strict lower and upper parts' row pointers of P A_ii P^T (iperm[old] = new). */
static void count_split(const precond_mpi *p, const int *restrict iperm)
{
    p->lower_ptr[0] = p->upper_ptr[0] = 0;
    for (int i = 0; i < p->n; i++) {
        const int old = p->perm[i];
        int low = 0, up = 0;
        for (int k = p->row_ptr[old]; k < p->row_ptr[old + 1]; k++) {
            const int c = p->col_idx[k];
            if (c < p->n && iperm[c] != i) {
                low += iperm[c] < i;
                up += iperm[c] > i;
            }
        }
        p->lower_ptr[i + 1] = p->lower_ptr[i] + low;
        p->upper_ptr[i + 1] = p->upper_ptr[i] + up;
    }
}

/* Row and column `new` of P A_ii P^T are row and column perm[new] of A_ii: D, L, U with the
 * columns of every row increasing (04_iccg's split). */
static void fill_split(const precond_mpi *p, const int *restrict iperm)
{
    for (int i = 0; i < p->n; i++) {
        const int old = p->perm[i];
        int low = p->lower_ptr[i], up = p->upper_ptr[i];
        p->diag[i] = 0.0;
        for (int k = p->row_ptr[old]; k < p->row_ptr[old + 1]; k++) {
            const int c = p->col_idx[k];
            if (c >= p->n)
                continue;                                  /* an external column: not in A_ii */
            const int j = iperm[c];
            if (j == i)
                p->diag[i] = p->val[k];
            else if (j < i)
                insert_sorted(p->lower_ptr[i], &low, p->lower_col, p->lower_val, j, p->val[k]);
            else
                insert_sorted(p->upper_ptr[i], &up, p->upper_col, p->upper_val, j, p->val[k]);
        }
    }
}

/* Split P A_ii P^T and factor it; 0 or a negative status */
static int factor_block(precond_mpi *p)
{
    const int n = p->n;
    int failed = 0;
    int *iperm = alloc_array(n, sizeof(int), &failed);
    p->lower_ptr = alloc_array(n + 1L, sizeof(int), &failed);
    p->upper_ptr = alloc_array(n + 1L, sizeof(int), &failed);
    if (failed) {
        free(iperm);
        return PRECOND_OUT_OF_MEMORY;
    }
    for (int i = 0; i < n; i++)
        iperm[p->perm[i]] = i;
    count_split(p, iperm);
    const int nl = p->lower_ptr[n], nu = p->upper_ptr[n];
    p->diag = alloc_array(n, sizeof(double), &failed);
    p->lower_col = alloc_array(nl, sizeof(int), &failed);
    p->lower_val = alloc_array(nl, sizeof(double), &failed);
    p->upper_col = alloc_array(nu, sizeof(int), &failed);
    p->upper_val = alloc_array(nu, sizeof(double), &failed);
    p->fac_diag = alloc_array(n, sizeof(double), &failed);
    p->inv_diag = alloc_array(n, sizeof(double), &failed);
    p->fac_lower = alloc_array(nl, sizeof(double), &failed);
    p->fac_upper = alloc_array(nu, sizeof(double), &failed);
    if (failed) {
        free(iperm);
        return PRECOND_OUT_OF_MEMORY;
    }
    fill_split(p, iperm);
    free(iperm);
    const int status = ic0_factor(n, p->lower_ptr, p->lower_col, p->lower_val, p->diag,
                                  p->fac_lower, p->fac_diag);
    if (status < 0)                                        /* pivot -status-1, new numbering */
        return PRECOND_BREAKDOWN - p->perm[-status - 1];
    if (ic0_transpose(n, p->lower_ptr, p->lower_col, p->fac_lower, p->upper_ptr, p->fac_upper))
        return PRECOND_OUT_OF_MEMORY;
    for (int i = 0; i < n; i++)
        p->inv_diag[i] = 1.0 / p->fac_diag[i];             /* the sweeps multiply by 1/d */
    return 0;
}

/* ---- setup ----------------------------------------------------------------------------------- */

/* First touch of a vector of n entries that the solve's threads work on by static shares of the
 * rows: zeroed by the same static schedule, so that each thread's pages are placed in its NUMA
 * node's memory (lecture 03's v1). NULL (not allocated) is skipped. */
static void first_touch(int n, double *restrict v)
{
    if (v == NULL)
        return;
#pragma omp parallel for schedule(static)
    for (int i = 0; i < n; i++)
        v[i] = 0.0;
}

int precond_setup(int kind, int sweeps, const char *ordering, int colors, int n_internal,
                  int n_local, const int *restrict row_ptr, const int *restrict col_idx,
                  const double *restrict val, precond_mpi *p)
{
    memset(p, 0, sizeof *p);
    const int which = ordering_index(ordering);
    if (!valid_choice(kind, sweeps, which, colors))
        return PRECOND_BAD_ARGUMENT;
    if (colors > n_internal)
        return PRECOND_TOO_MANY_COLORS;
    p->kind = kind;
    p->sweeps = sweeps;
    strcpy(p->ordering, ORDERING_NAMES[which]);
    p->requested_colors = colors;
    p->ncolor = 1;
    p->n = n_internal;
    p->n_local = n_local;
    p->row_ptr = row_ptr, p->col_idx = col_idx, p->val = val;
    int failed = 0, status = 0;
    if (kind == PRECOND_DIAGONAL) {
        p->dinv = alloc_array(n_internal, sizeof(double), &failed);
        first_touch(n_internal, p->dinv);
        if (!failed)
            jacobi_inverse_diagonal(n_internal, row_ptr, col_idx, val, p->dinv);
    } else {
        p->permuted = alloc_array(n_internal, sizeof(double), &failed);
        p->solved = alloc_array(n_internal, sizeof(double), &failed);
        p->t = alloc_array(n_internal, sizeof(double), &failed);
        p->bt = alloc_array(n_internal, sizeof(double), &failed);
        status = failed ? PRECOND_OUT_OF_MEMORY : order_block(p, which, colors);
        if (status == 0)
            status = factor_block(p);
    }
    if (failed && status == 0)
        status = PRECOND_OUT_OF_MEMORY;
    if (status != 0) {
        precond_free(p);
        return status;
    }
    first_touch(n_internal, p->permuted), first_touch(n_internal, p->solved);
    first_touch(n_internal, p->t), first_touch(n_internal, p->bt);
    return 0;
}

void precond_free(precond_mpi *p)
{
    free(p->dinv), free(p->perm), free(p->color_ptr);
    free(p->diag), free(p->lower_val), free(p->upper_val);
    free(p->lower_ptr), free(p->lower_col), free(p->upper_ptr), free(p->upper_col);
    free(p->fac_diag), free(p->inv_diag), free(p->fac_lower), free(p->fac_upper);
    free(p->permuted), free(p->solved), free(p->t), free(p->bt);
    memset(p, 0, sizeof *p);
}

/* ---- the application ------------------------------------------------------------------------- */

/* z = B r = unpermute(backward(forward(permute(r)))) on the internal rows: the IC(0) of A_ii,
 * no communication. */
static void block_solve(const precond_mpi *p, const double *restrict r, double *restrict z)
{
    const int n = p->n;
    double *restrict y = p->permuted, *restrict w = p->solved;
#pragma omp for schedule(static)
    for (int i = 0; i < n; i++)
        y[i] = r[p->perm[i]];                  /* permute: y[new] = r[perm[new]] */
    ic0_forward(n, p->ncolor, p->color_ptr, p->lower_ptr, p->lower_col, p->fac_lower,
                p->inv_diag, y, w);
    ic0_backward(n, p->ncolor, p->color_ptr, p->upper_ptr, p->upper_col, p->fac_upper,
                 p->inv_diag, w);
#pragma omp for schedule(static)
    for (int i = 0; i < n; i++)
        z[p->perm[i]] = w[i];                  /* unpermute: z[perm[new]] = w[new] */
}

/* t = r - A z on the internal rows, over all local columns (z's external entries are current) */
static void local_residual(const precond_mpi *p, const double *restrict r,
                           const double *restrict z, double *restrict t)
{
#pragma omp for schedule(static)
    for (int i = 0; i < p->n; i++) {
        double s = r[i];
        for (int k = p->row_ptr[i]; k < p->row_ptr[i + 1]; k++)
            s -= p->val[k] * z[p->col_idx[k]];
        t[i] = s;
    }
}

/* [precond_apply] */
void precond_apply(const precond_mpi *p, const double *restrict r, double *restrict z,
                   int n_neighbours, const int *restrict neighbours,
                   const int *restrict import_ptr, const int *restrict import_index,
                   const int *restrict export_ptr, const int *restrict export_index,
                   double *restrict send_buf, double *restrict recv_buf, MPI_Comm comm,
                   long *restrict exchanges)
{
    const int n = p->n;
    if (p->kind == PRECOND_DIAGONAL) {
#pragma omp for schedule(static)
        for (int i = 0; i < n; i++)
            z[i] = p->dinv[i] * r[i];
        return;
    }
    block_solve(p, r, z);
    /* ASDD: each sweep corrects z by B applied to the residual of the whole local rows, whose
     * external columns hold the neighbours' latest z: the ranks' blocks talk through the halo. */
    for (int sweep = 1; sweep < p->sweeps; sweep++) {
        /* z is complete: the implied barrier of the `omp for` that wrote it last */
#pragma omp master
        {                                      /* MPI_THREAD_FUNNELED: the master thread only */
            halo_exchange(n_neighbours, neighbours, import_ptr, import_index, export_ptr,
                          export_index, z, send_buf, recv_buf, comm);
            (*exchanges)++;
        }
#pragma omp barrier                            /* every thread sees the received entries */
        local_residual(p, r, z, p->t);
        block_solve(p, p->t, p->bt);
#pragma omp for schedule(static)
        for (int i = 0; i < n; i++)
            z[i] += p->bt[i];
    }
}
/* [precond_apply] */
