/* Four CG variants on P ranks (lecture 06_pipecg): course/solvers/krylov.py line by line, with
 * the pieces of course/parallel/fem3d.py and course/parallel/reductions.py:
 *   A v     halo_exchange of v (its external entries) + crs_matvec over the internal rows
 *   M^-1 r  precond_apply of 08_hybrid/precond_mpi.h: Jacobi (dinv * r, local), localized IC(0)
 *           (local) or additive Schwarz sweeps with IC(0) (K-1 halo exchanges in each)
 *   sums    the local dot_reduction of each dot product, then ONE global sum of all of them:
 *           MPI_Allreduce, or MPI_Iallreduce started early and MPI_Wait'ed for late, so that
 *           the work in between can hide it.
 * The variants differ only in where their reductions go (u = M^-1 r, w = A u):
 *   pcg                (p, q), then (r, u) with (r, r): 2 reductions per iteration
 *   chronopoulos-gear  (r, u), (w, u), (r, r) fused: 1 reduction
 *   gropp              (p, s) behind M^-1 s, (r, u), (r, r) behind A u: 2 reductions
 *   pipelined          (r, u), (w, u), (r, r) behind M^-1 w and A m: 1 reduction
 * Every variant stops when the recursive residual has ||r|| <= tol ||b||; an iteration is one
 * update of x; the reductions started and the halo exchanges made inside each iteration are
 * counted (A v makes one; M^-1 r K-1 with asdd-ic0 K, none with the others). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cg_mpi.h"
#include "course.h"
#include "halo.h"
#include "precond_mpi.h"

static const char *const ALGORITHM_NAMES[CG_N_ALGORITHMS] = {"pcg", "chronopoulos-gear", "gropp",
                                                             "pipelined"};

const char *cg_algorithm_name(int algorithm)
{
    return algorithm >= 0 && algorithm < CG_N_ALGORITHMS ? ALGORITHM_NAMES[algorithm] : NULL;
}

int cg_algorithm_from_name(const char *name)
{
    for (int a = 0; a < CG_N_ALGORITHMS; a++)
        if (strcmp(name, ALGORITHM_NAMES[a]) == 0)
            return a;
    return -1;
}

/* One rank's share of the system and the bookkeeping every variant shares (krylov.py's _Run). */
typedef struct {
    int n, n_local;                                   /* internal rows, local nodes */
    const int *row_ptr, *col_idx;
    const double *val, *b;
    const precond_mpi *precond;                       /* M */
    int n_neighbours;
    const int *neighbours, *import_ptr, *import_index, *export_ptr, *export_index;
    double *send_buf, *recv_buf;
    MPI_Comm comm;
    int nonblocking, replace_every, max_iter;
    double tol, bnorm;
    double relres;             /* the last recorded ||r|| / ||b|| */
    int iterations;
    long reductions;           /* global sums started so far */
    long count_at_start;       /* ... when the current iteration began */
    int per_iteration;         /* the count of every iteration; -1 once two differ */
    long exchanges;            /* halo exchanges made so far */
    long exchanges_at_start;   /* ... when the current iteration began */
    int exchanges_per_iteration;   /* the count of every iteration; -1 once two differ */
} cg_run;

/* ---- the pluggable pieces -------------------------------------------------------------------- */

/* out = A v: v must have n_local entries (its external ones are overwritten by the exchange). */
static void matvec(cg_run *c, double *restrict v, double *restrict out)
{
    halo_exchange(c->n_neighbours, c->neighbours, c->import_ptr, c->import_index, c->export_ptr,
                  c->export_index, v, c->send_buf, c->recv_buf, c->comm);
    c->exchanges++;
    crs_matvec(c->n, c->row_ptr, c->col_idx, c->val, v, out);
}

/* u = M^-1 r: u must have n_local entries (asdd-ic0 exchanges its external ones) */
static void precond(cg_run *c, const double *restrict r, double *restrict u)
{
    precond_apply(c->precond, r, u, c->n_neighbours, c->neighbours, c->import_ptr,
                  c->import_index, c->export_ptr, c->export_index, c->send_buf, c->recv_buf,
                  c->comm, &c->exchanges);
}

/* r = b - A x */
static void residual(cg_run *c, double *restrict x, double *restrict r)
{
    matvec(c, x, r);
    for (int i = 0; i < c->n; i++)
        r[i] = c->b[i] - r[i];
}

/* A global sum of up to 3 local partial sums, in one message: started by reduction_start,
 * complete after reduction_wait. Blocking: MPI_Allreduce inside start (nothing can overlap);
 * non-blocking: MPI_Iallreduce inside start, MPI_Wait inside wait. sums is the buffer MPI works
 * on: it must stay in place until the wait. */
typedef struct {
    double sums[3];
    MPI_Request request;
} reduction;

static void reduction_start(cg_run *c, reduction *red, int count, const double *local_sums)
{
    memcpy(red->sums, local_sums, (size_t)count * sizeof(double));
    c->reductions++;
    if (c->nonblocking) {
        MPI_Iallreduce(MPI_IN_PLACE, red->sums, count, MPI_DOUBLE, MPI_SUM, c->comm,
                       &red->request);
    } else {
        MPI_Allreduce(MPI_IN_PLACE, red->sums, count, MPI_DOUBLE, MPI_SUM, c->comm);
        red->request = MPI_REQUEST_NULL;
    }
}

static const double *reduction_wait(reduction *red)
{
    MPI_Wait(&red->request, MPI_STATUS_IGNORE);      /* returns at once for MPI_REQUEST_NULL */
    return red->sums;
}

/* the local share of a . b (the internal entries) */
static double dot(const cg_run *c, const double *restrict a, const double *restrict b)
{
    return dot_reduction(c->n, a, b);
}

/* y += alpha x */
static void axpy(int n, double alpha, const double *restrict x, double *restrict y)
{
    for (int i = 0; i < n; i++)
        y[i] += alpha * x[i];
}

/* y = x + beta y */
static void xpby(int n, const double *restrict x, double beta, double *restrict y)
{
    for (int i = 0; i < n; i++)
        y[i] = x[i] + beta * y[i];
}

/* ---- the bookkeeping: stopping test, counting, residual replacement -------------------------- */

/* Records ||r|| / ||b|| from the reduced (r, r); nonzero once it is at most tol. */
static int converged(cg_run *c, double rr)
{
    c->relres = sqrt(fmax(rr, 0.0)) / c->bnorm;
    return c->relres <= c->tol;
}

static int more(const cg_run *c)
{
    return c->iterations < c->max_iter && isfinite(c->relres);
}

/* The iterations start: the reductions and exchanges from here on are counted per iteration. */
static void begin(cg_run *c)
{
    c->count_at_start = c->reductions;
    c->exchanges_at_start = c->exchanges;
}

/* nonzero in every replace_every-th iteration: recompute the recursive vectors from x */
static int replace_now(const cg_run *c)
{
    return c->replace_every > 0 && (c->iterations + 1) % c->replace_every == 0;
}

/* *per_iteration = count in the first iteration; -1 once an iteration counts differently */
static void tally(int iteration, int count, int *per_iteration)
{
    if (iteration == 0)
        *per_iteration = count;
    else if (count != *per_iteration)
        *per_iteration = -1;
}

/* An iteration ended: its reductions and halo exchanges are counted, and must be as many as in
 * every other. */
static void iteration_done(cg_run *c)
{
    tally(c->iterations, (int)(c->reductions - c->count_at_start), &c->per_iteration);
    tally(c->iterations, (int)(c->exchanges - c->exchanges_at_start),
          &c->exchanges_per_iteration);
    c->iterations++;
    c->count_at_start = c->reductions;
    c->exchanges_at_start = c->exchanges;
}

/* ---- the four variants (the vectors have n_local entries; x is the caller's) ----------------- */

/* [pcg] */
static void pcg(cg_run *c, double *restrict x, double *restrict r, double *restrict u,
                double *restrict p, double *restrict q)
{
    const int n = c->n;
    reduction red;
    residual(c, x, r);
    precond(c, r, u);
    memcpy(p, u, (size_t)n * sizeof *p);
    reduction_start(c, &red, 2, (double[]){dot(c, r, u), dot(c, r, r)});
    const double *sums = reduction_wait(&red);
    double gamma = sums[0], rr = sums[1];
    begin(c);
    while (!converged(c, rr) && more(c)) {
        matvec(c, p, q);
        reduction_start(c, &red, 1, (double[]){dot(c, p, q)});   /* needed on the next line */
        const double delta = reduction_wait(&red)[0];
        const double alpha = gamma / delta;
        axpy(n, alpha, p, x);
        if (replace_now(c))
            residual(c, x, r);
        else
            axpy(n, -alpha, q, r);
        precond(c, r, u);
        reduction_start(c, &red, 2, (double[]){dot(c, r, u), dot(c, r, r)});
        sums = reduction_wait(&red);
        const double gamma_new = sums[0];
        rr = sums[1];
        iteration_done(c);
        xpby(n, u, gamma_new / gamma, p);
        gamma = gamma_new;
    }
}
/* [pcg] */

/* [chronopoulos_gear] */
static void chronopoulos_gear(cg_run *c, double *restrict x, double *restrict r,
                              double *restrict u, double *restrict w, double *restrict p,
                              double *restrict s)
{
    const int n = c->n;
    reduction red;
    residual(c, x, r);
    precond(c, r, u);
    matvec(c, u, w);
    reduction_start(c, &red, 3, (double[]){dot(c, r, u), dot(c, w, u), dot(c, r, r)});
    const double *sums = reduction_wait(&red);
    double gamma = sums[0], delta = sums[1], rr = sums[2];
    double alpha = gamma / delta, beta = 0.0;
    memset(p, 0, (size_t)n * sizeof *p);
    memset(s, 0, (size_t)n * sizeof *s);                          /* s = A p */
    begin(c);
    while (!converged(c, rr) && more(c)) {
        xpby(n, u, beta, p);
        xpby(n, w, beta, s);
        axpy(n, alpha, p, x);
        axpy(n, -alpha, s, r);
        if (replace_now(c)) {
            residual(c, x, r);
            matvec(c, p, s);
        }
        precond(c, r, u);
        matvec(c, u, w);
        reduction_start(c, &red, 3, (double[]){dot(c, r, u), dot(c, w, u), dot(c, r, r)});
        sums = reduction_wait(&red);
        const double gamma_new = sums[0];
        delta = sums[1];
        rr = sums[2];
        iteration_done(c);
        beta = gamma_new / gamma;
        alpha = gamma_new / (delta - beta * gamma_new / alpha);
        gamma = gamma_new;
    }
}
/* [chronopoulos_gear] */

/* [gropp] */
static void gropp(cg_run *c, double *restrict x, double *restrict r, double *restrict u,
                  double *restrict p, double *restrict s, double *restrict m, double *restrict w)
{
    const int n = c->n;
    reduction red;
    residual(c, x, r);
    precond(c, r, u);
    memcpy(p, u, (size_t)n * sizeof *p);
    matvec(c, p, s);                                              /* s = A p */
    reduction_start(c, &red, 2, (double[]){dot(c, r, u), dot(c, r, r)});
    const double *sums = reduction_wait(&red);
    double gamma = sums[0], rr = sums[1];
    begin(c);
    while (!converged(c, rr) && more(c)) {
        reduction_start(c, &red, 1, (double[]){dot(c, p, s)});
        precond(c, s, m);                                         /* hides (p, s) */
        const double delta = reduction_wait(&red)[0];
        const double alpha = gamma / delta;
        axpy(n, alpha, p, x);
        axpy(n, -alpha, s, r);
        axpy(n, -alpha, m, u);
        if (replace_now(c)) {
            residual(c, x, r);
            matvec(c, p, s);
            precond(c, r, u);
        }
        reduction_start(c, &red, 2, (double[]){dot(c, r, u), dot(c, r, r)});
        matvec(c, u, w);                                          /* hides (r, u), (r, r) */
        sums = reduction_wait(&red);
        const double gamma_new = sums[0];
        rr = sums[1];
        iteration_done(c);
        const double beta = gamma_new / gamma;
        xpby(n, u, beta, p);
        xpby(n, w, beta, s);
        gamma = gamma_new;
    }
}
/* [gropp] */

/* [pipelined] */
static void pipelined(cg_run *c, double *restrict x, double *restrict r, double *restrict u,
                      double *restrict w, double *restrict m, double *restrict nv,
                      double *restrict z, double *restrict q, double *restrict s,
                      double *restrict p)
{
    const int n = c->n;
    reduction red;
    residual(c, x, r);
    precond(c, r, u);
    matvec(c, u, w);
    for (int i = 0; i < n; i++)              /* z = A q, q = M^-1 s, s = A p */
        z[i] = q[i] = s[i] = p[i] = 0.0;
    double alpha = 0.0, gamma_old = 0.0;
    begin(c);
    for (;;) {
        reduction_start(c, &red, 3, (double[]){dot(c, r, u), dot(c, w, u), dot(c, r, r)});
        precond(c, w, m);                    /* hide the reduction behind */
        matvec(c, m, nv);                    /* M^-1 w and A m */
        const double *sums = reduction_wait(&red);
        const double gamma = sums[0], delta = sums[1], rr = sums[2];
        if (converged(c, rr) || !more(c))
            return;
        double beta;
        if (c->iterations == 0) {            /* (gamma_old == 0 in krylov.py) */
            beta = 0.0;
            alpha = gamma / delta;
        } else {
            beta = gamma / gamma_old;
            alpha = gamma / (delta - beta * gamma / alpha);
        }
        xpby(n, nv, beta, z);
        xpby(n, m, beta, q);
        xpby(n, w, beta, s);
        xpby(n, u, beta, p);
        axpy(n, alpha, p, x);
        axpy(n, -alpha, s, r);
        axpy(n, -alpha, q, u);
        axpy(n, -alpha, z, w);
        gamma_old = gamma;
        if (replace_now(c)) {                /* every recurrence from x and p */
            residual(c, x, r);
            matvec(c, p, s);
            precond(c, r, u);
            precond(c, s, q);
            matvec(c, u, w);
            matvec(c, q, z);
        }
        iteration_done(c);
    }
}
/* [pipelined] */

/* [cg_variant_mpi] */
int cg_variant_mpi(int algorithm, int nonblocking, int replace_every, int n_internal,
                   int n_local, const int *restrict row_ptr, const int *restrict col_idx,
                   const double *restrict val, const precond_mpi *precond,
                   const double *restrict b, double *restrict x, double tol, int max_iter,
                   double *restrict relres, int n_neighbours, const int *restrict neighbours,
                   const int *restrict import_ptr, const int *restrict import_index,
                   const int *restrict export_ptr, const int *restrict export_index,
                   MPI_Comm comm, int *restrict reductions_per_iteration,
                   int *restrict halo_exchanges_per_iteration, double *restrict true_relres)
{
    enum { N_VECTORS = 9 };                  /* the most a variant needs: pipelined */
    if (cg_algorithm_name(algorithm) == NULL)
        return -2;
    const int n = n_internal, n_send = export_ptr[n_neighbours], n_recv = import_ptr[n_neighbours];
    const size_t stride = (size_t)n_local + 1;    /* + 1: never a zero-sized block */
    double *work = malloc((N_VECTORS * stride + n_send + n_recv + 1) * sizeof *work);
    if (failed_anywhere(work == NULL, comm)) {    /* all ranks return together */
        free(work);
        return -1;
    }
    double *v[N_VECTORS];
    for (int k = 0; k < N_VECTORS; k++)
        v[k] = work + k * stride;
    double *send_buf = work + N_VECTORS * stride, *recv_buf = send_buf + n_send;

    cg_run c = {.n = n, .n_local = n_local, .row_ptr = row_ptr, .col_idx = col_idx, .val = val,
                .precond = precond, .b = b, .n_neighbours = n_neighbours, .neighbours = neighbours,
                .import_ptr = import_ptr, .import_index = import_index,
                .export_ptr = export_ptr, .export_index = export_index, .send_buf = send_buf,
                .recv_buf = recv_buf, .comm = comm, .nonblocking = nonblocking != 0,
                .replace_every = replace_every > 0 ? replace_every : 0, .max_iter = max_iter,
                .tol = tol};
    c.bnorm = sqrt(dot_mpi(n, b, b, comm));
    if (c.bnorm == 0.0)
        c.bnorm = 1.0;

    switch (algorithm) {
    case CG_PCG:
        pcg(&c, x, v[0], v[1], v[2], v[3]);
        break;
    case CG_CHRONOPOULOS_GEAR:
        chronopoulos_gear(&c, x, v[0], v[1], v[2], v[3], v[4]);
        break;
    case CG_GROPP:
        gropp(&c, x, v[0], v[1], v[2], v[3], v[4], v[5]);
        break;
    default:
        pipelined(&c, x, v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8]);
        break;
    }
    *relres = c.relres;
    *reductions_per_iteration = c.iterations > 0 ? c.per_iteration : 0;
    *halo_exchanges_per_iteration = c.iterations > 0 ? c.exchanges_per_iteration : 0;
    residual(&c, x, v[0]);                   /* the true residual b - A x */
    *true_relres = sqrt(dot_mpi(n, v[0], v[0], comm)) / c.bnorm;
    free(work);
    return c.iterations;
}
/* [cg_variant_mpi] */
