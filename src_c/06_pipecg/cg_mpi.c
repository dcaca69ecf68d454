/* Four CG variants on P ranks x T threads (lectures 06_pipecg and 08_hybrid):
 * course/solvers/krylov.py line by line, with the pieces of course/parallel/fem3d.py and
 * course/parallel/reductions.py:
 *   A v     halo_exchange of v (its external entries) + the product over the internal rows
 *   M^-1 r  precond_apply of 08_hybrid/precond_mpi.h: Jacobi (dinv * r, local), localized IC(0)
 *           (local) or additive Schwarz sweeps with IC(0) (K-1 halo exchanges in each)
 *   sums    the local share of each dot product, then ONE global sum of all of them:
 *           MPI_Allreduce, or MPI_Iallreduce started early and MPI_Wait'ed for late, so that
 *           the work in between can hide it.
 * The variants differ only in where their reductions go (u = M^-1 r, w = A u):
 *   pcg                (p, q), then (r, u) with (r, r): 2 reductions per iteration
 *   chronopoulos-gear  (r, u), (w, u), (r, r) fused: 1 reduction
 *   gropp              (p, s) behind M^-1 s, (r, u), (r, r) behind A u: 2 reductions
 *   pipelined          (r, u), (w, u), (r, r) behind M^-1 w and A m: 1 reduction
 * Every variant stops when the recursive residual has ||r|| <= tol ||b||; an iteration is one
 * update of x; the reductions started and the halo exchanges made inside each iteration are
 * counted (A v makes one; M^-1 r K-1 with asdd-ic0 K, none with the others).
 *
 * Hybrid MPI + OpenMP (08_hybrid, the discipline of lecture 03's pcg_v3): every rank runs the
 * whole solve in ONE parallel region of OMP_NUM_THREADS threads. Every thread runs the variant's
 * code; every loop over the rows is an orphaned `omp for schedule(static)` (its implied barrier
 * orders the steps); the scalars (alpha, beta, gamma, the residual, the iteration count) are
 * private, and every thread computes the same values from the same global sums. MPI is called by
 * the master thread only (MPI_THREAD_FUNNELED), between barriers:
 *   halo exchange   barrier (v is complete), master exchanges, barrier (every thread sees it);
 *   global sums     each thread sums its static share of the rows, barrier, the master adds the
 *                   shares in thread order (so a run gives the same bits every time for a given
 *                   number of threads) and starts the global sum; the other threads go on with
 *                   the work the variant overlaps; at the wait the master waits for MPI, and a
 *                   barrier hands the sums to every thread. */
#include <math.h>
#include <omp.h>
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

enum {
    MAX_SUMS = 3,           /* the most dot products in one global sum */
    SHARE_STRIDE = 8        /* doubles between two threads' shares: one cache line each */
};

/* What the threads of a rank share while they iterate. The master thread alone writes the
 * global sums, the request and the counters (it makes every MPI call); thread t writes only its
 * shares, shares[SHARE_STRIDE t + k]. */
typedef struct {
    double *shares;                /* each thread's share of each dot product */
    double sums[MAX_SUMS];         /* the global sum in flight: MPI works on it until the wait */
    MPI_Request request;
    long reductions;               /* global sums started so far */
    long reductions_at_start;      /* ... when the current iteration began */
    int per_iteration;             /* the count of every iteration; -1 once two differ */
    long exchanges;                /* halo exchanges made so far */
    long exchanges_at_start;       /* ... when the current iteration began */
    int exchanges_per_iteration;   /* the count of every iteration; -1 once two differ */
    int iterations;                /* the results, copied from the master's cg_run at the end */
    double relres, true_relres;
} team_state;

/* One rank's share of the system and the bookkeeping every variant shares (krylov.py's _Run).
 * Every thread has its own copy (private: its iteration count and residual, the same values in
 * every thread); what the threads share is behind the pointers. */
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
    team_state *team;
    double relres;             /* the last recorded ||r|| / ||b|| */
    int iterations;
} cg_run;

/* ---- the pluggable pieces -------------------------------------------------------------------- */

/* The halo exchange of v (its external entries) by the master thread. The barrier before: every
 * thread has written its rows of v; the barrier after: every thread sees the received values
 * (and the master's send and receive buffers are free again). */
static void exchange(cg_run *c, double *restrict v)
{
#pragma omp barrier
#pragma omp master
    {
        halo_exchange(c->n_neighbours, c->neighbours, c->import_ptr, c->import_index,
                      c->export_ptr, c->export_index, v, c->send_buf, c->recv_buf, c->comm);
        c->team->exchanges++;
    }
#pragma omp barrier
}

/* out = A v: v must have n_local entries (its external ones are overwritten by the exchange);
 * the internal rows shared out among the threads. */
static void matvec(cg_run *c, double *restrict v, double *restrict out)
{
    exchange(c, v);
    const int *restrict row_ptr = c->row_ptr, *restrict col_idx = c->col_idx;
    const double *restrict val = c->val;
#pragma omp for schedule(static)
    for (int i = 0; i < c->n; i++) {
        double sum = 0.0;
        for (int k = row_ptr[i]; k < row_ptr[i + 1]; k++)
            sum += val[k] * v[col_idx[k]];
        out[i] = sum;
    }
}

/* u = M^-1 r: u must have n_local entries (asdd-ic0 exchanges its external ones) */
static void precond(cg_run *c, const double *restrict r, double *restrict u)
{
    precond_apply(c->precond, r, u, c->n_neighbours, c->neighbours, c->import_ptr,
                  c->import_index, c->export_ptr, c->export_index, c->send_buf, c->recv_buf,
                  c->comm, &c->team->exchanges);
}

/* r = b - A x */
static void residual(cg_run *c, double *restrict x, double *restrict r)
{
    matvec(c, x, r);
#pragma omp for schedule(static)
    for (int i = 0; i < c->n; i++)
        r[i] = c->b[i] - r[i];
}

/* [reduction_start] */
/* A global sum of up to 3 dot products, in one message: started by reduction_start, complete
 * after reduction_wait; every thread calls both. Blocking: MPI_Allreduce inside start (nothing
 * can overlap it but the other threads' work); non-blocking: MPI_Iallreduce inside start,
 * MPI_Wait inside wait. shares: this thread's shares of the local dot products (dot below). */
static void reduction_start(cg_run *c, int count, const double *shares)
{
    team_state *team = c->team;
    const int me = omp_get_thread_num();
    for (int k = 0; k < count; k++)
        team->shares[SHARE_STRIDE * me + k] = shares[k];
#pragma omp barrier
#pragma omp master
    {                                  /* the shares in thread order: the same bits every run */
        const int threads = omp_get_num_threads();
        for (int k = 0; k < count; k++) {
            double sum = 0.0;
            for (int t = 0; t < threads; t++)
                sum += team->shares[SHARE_STRIDE * t + k];
            team->sums[k] = sum;
        }
        team->reductions++;
        if (c->nonblocking) {
            MPI_Iallreduce(MPI_IN_PLACE, team->sums, count, MPI_DOUBLE, MPI_SUM, c->comm,
                           &team->request);
        } else {
            MPI_Allreduce(MPI_IN_PLACE, team->sums, count, MPI_DOUBLE, MPI_SUM, c->comm);
            team->request = MPI_REQUEST_NULL;
        }
    }                                  /* no barrier: the others go on with the overlapped work */
}
/* [reduction_start] */

/* The global sums into sums[0 .. count-1] (this thread's copy); returns sums. The master waits
 * for MPI, the barrier publishes team->sums to every thread; the master overwrites them only in
 * the next reduction_start, after its barrier, when every thread has copied them. */
static const double *reduction_wait(cg_run *c, int count, double *restrict sums)
{
    team_state *team = c->team;
#pragma omp master
    MPI_Wait(&team->request, MPI_STATUS_IGNORE);   /* returns at once for MPI_REQUEST_NULL */
#pragma omp barrier
    for (int k = 0; k < count; k++)
        sums[k] = team->sums[k];
    return sums;
}

/* this thread's share of the local a . b: its static share of the internal entries, summed in
 * order (no barrier: reduction_start has one before the shares are read) */
static double dot(const cg_run *c, const double *restrict a, const double *restrict b)
{
    double share = 0.0;
#pragma omp for schedule(static) nowait
    for (int i = 0; i < c->n; i++)
        share += a[i] * b[i];
    return share;
}

/* y += alpha x */
static void axpy(int n, double alpha, const double *restrict x, double *restrict y)
{
#pragma omp for schedule(static)
    for (int i = 0; i < n; i++)
        y[i] += alpha * x[i];
}

/* y = x + beta y */
static void xpby(int n, const double *restrict x, double beta, double *restrict y)
{
#pragma omp for schedule(static)
    for (int i = 0; i < n; i++)
        y[i] = x[i] + beta * y[i];
}

/* y = x */
static void copy(int n, const double *restrict x, double *restrict y)
{
#pragma omp for schedule(static)
    for (int i = 0; i < n; i++)
        y[i] = x[i];
}

/* y = 0 */
static void zero(int n, double *restrict y)
{
#pragma omp for schedule(static)
    for (int i = 0; i < n; i++)
        y[i] = 0.0;
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

/* The iterations start: the reductions and exchanges from here on are counted per iteration
 * (the master counts: it alone makes the MPI calls). */
static void begin(cg_run *c)
{
#pragma omp master
    {
        c->team->reductions_at_start = c->team->reductions;
        c->team->exchanges_at_start = c->team->exchanges;
    }
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
    team_state *team = c->team;
#pragma omp master
    {
        tally(c->iterations, (int)(team->reductions - team->reductions_at_start),
              &team->per_iteration);
        tally(c->iterations, (int)(team->exchanges - team->exchanges_at_start),
              &team->exchanges_per_iteration);
        team->reductions_at_start = team->reductions;
        team->exchanges_at_start = team->exchanges;
    }
    c->iterations++;
}

/* ---- the four variants (the vectors have n_local entries; x is the caller's) ----------------- */

/* [pcg] */
static void pcg(cg_run *c, double *restrict x, double *restrict r, double *restrict u,
                double *restrict p, double *restrict q)
{
    const int n = c->n;
    double sums[MAX_SUMS];
    residual(c, x, r);
    precond(c, r, u);
    copy(n, u, p);
    reduction_start(c, 2, (double[]){dot(c, r, u), dot(c, r, r)});
    reduction_wait(c, 2, sums);
    double gamma = sums[0], rr = sums[1];
    begin(c);
    while (!converged(c, rr) && more(c)) {
        matvec(c, p, q);
        reduction_start(c, 1, (double[]){dot(c, p, q)});         /* needed on the next line */
        const double delta = reduction_wait(c, 1, sums)[0];
        const double alpha = gamma / delta;
        axpy(n, alpha, p, x);
        if (replace_now(c))
            residual(c, x, r);
        else
            axpy(n, -alpha, q, r);
        precond(c, r, u);
        reduction_start(c, 2, (double[]){dot(c, r, u), dot(c, r, r)});
        reduction_wait(c, 2, sums);
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
    double sums[MAX_SUMS];
    residual(c, x, r);
    precond(c, r, u);
    matvec(c, u, w);
    reduction_start(c, 3, (double[]){dot(c, r, u), dot(c, w, u), dot(c, r, r)});
    reduction_wait(c, 3, sums);
    double gamma = sums[0], delta = sums[1], rr = sums[2];
    double alpha = gamma / delta, beta = 0.0;
    zero(n, p);
    zero(n, s);                                                   /* s = A p */
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
        reduction_start(c, 3, (double[]){dot(c, r, u), dot(c, w, u), dot(c, r, r)});
        reduction_wait(c, 3, sums);
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
    double sums[MAX_SUMS];
    residual(c, x, r);
    precond(c, r, u);
    copy(n, u, p);
    matvec(c, p, s);                                              /* s = A p */
    reduction_start(c, 2, (double[]){dot(c, r, u), dot(c, r, r)});
    reduction_wait(c, 2, sums);
    double gamma = sums[0], rr = sums[1];
    begin(c);
    while (!converged(c, rr) && more(c)) {
        reduction_start(c, 1, (double[]){dot(c, p, s)});
        precond(c, s, m);                                         /* hides (p, s) */
        const double delta = reduction_wait(c, 1, sums)[0];
        const double alpha = gamma / delta;
        axpy(n, alpha, p, x);
        axpy(n, -alpha, s, r);
        axpy(n, -alpha, m, u);
        if (replace_now(c)) {
            residual(c, x, r);
            matvec(c, p, s);
            precond(c, r, u);
        }
        reduction_start(c, 2, (double[]){dot(c, r, u), dot(c, r, r)});
        matvec(c, u, w);                                          /* hides (r, u), (r, r) */
        reduction_wait(c, 2, sums);
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
    double sums[MAX_SUMS];
    residual(c, x, r);
    precond(c, r, u);
    matvec(c, u, w);
#pragma omp for schedule(static)
    for (int i = 0; i < n; i++)              /* z = A q, q = M^-1 s, s = A p */
        z[i] = q[i] = s[i] = p[i] = 0.0;
    double alpha = 0.0, gamma_old = 0.0;
    begin(c);
    for (;;) {
        reduction_start(c, 3, (double[]){dot(c, r, u), dot(c, w, u), dot(c, r, r)});
        precond(c, w, m);                    /* hide the reduction behind */
        matvec(c, m, nv);                    /* M^-1 w and A m */
        reduction_wait(c, 3, sums);
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

/* ---- the team's solve ------------------------------------------------------------------------ */

enum { N_VECTORS = 9 };                      /* the most a variant needs: pipelined */

/* First touch (lecture 03's v1): each thread zeroes its static share of the internal entries of
 * every work vector, the rows its loops will use, so that their pages are placed in its NUMA
 * node's memory; the external entries, which only the master's halo exchanges write, are the
 * master's. */
static void first_touch(const cg_run *c, double *const *v)
{
#pragma omp for schedule(static)
    for (int i = 0; i < c->n; i++)
        for (int k = 0; k < N_VECTORS; k++)
            v[k][i] = 0.0;
#pragma omp master
    for (int k = 0; k < N_VECTORS; k++)
        for (int i = c->n; i < c->n_local; i++)
            v[k][i] = 0.0;
}

/* sqrt of the global a . a (deterministic, as every global sum here) */
static double global_norm(cg_run *c, const double *restrict a)
{
    double sums[1];
    reduction_start(c, 1, (double[]){dot(c, a, a)});
    return sqrt(reduction_wait(c, 1, sums)[0]);
}

/* What every thread of a rank runs, in the one parallel region: its private copy of the run,
 * the variant, the true residual; the master hands the results over in run->team. */
static void team_solve(const cg_run *run, int algorithm, double *restrict x, double *const *v)
{
    cg_run c = *run;
    first_touch(&c, v);
    c.bnorm = global_norm(&c, c.b);
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
    residual(&c, x, v[0]);                   /* the true residual b - A x */
    const double true_relres = global_norm(&c, v[0]) / c.bnorm;
#pragma omp master
    {
        c.team->iterations = c.iterations;
        c.team->relres = c.relres;
        c.team->true_relres = true_relres;
    }
}

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
    if (cg_algorithm_name(algorithm) == NULL)
        return -2;
    const int n_send = export_ptr[n_neighbours], n_recv = import_ptr[n_neighbours];
    const int threads = omp_get_max_threads();    /* the team of the parallel region below */
    const size_t stride = (size_t)n_local + 1;    /* + 1: never a zero-sized block */
    double *work = malloc((N_VECTORS * stride + n_send + n_recv + SHARE_STRIDE * (size_t)threads
                           + 1) * sizeof *work);
    if (failed_anywhere(work == NULL, comm)) {    /* all ranks return together */
        free(work);
        return -1;
    }
    double *v[N_VECTORS];                         /* not touched yet: see first_touch */
    for (int k = 0; k < N_VECTORS; k++)
        v[k] = work + k * stride;
    double *send_buf = work + N_VECTORS * stride, *recv_buf = send_buf + n_send;

    team_state team = {.shares = recv_buf + n_recv, .request = MPI_REQUEST_NULL};
    const cg_run run = {.n = n_internal, .n_local = n_local, .row_ptr = row_ptr,
                        .col_idx = col_idx, .val = val, .precond = precond, .b = b,
                        .n_neighbours = n_neighbours, .neighbours = neighbours,
                        .import_ptr = import_ptr, .import_index = import_index,
                        .export_ptr = export_ptr, .export_index = export_index,
                        .send_buf = send_buf, .recv_buf = recv_buf, .comm = comm,
                        .nonblocking = nonblocking != 0,
                        .replace_every = replace_every > 0 ? replace_every : 0,
                        .max_iter = max_iter, .tol = tol, .team = &team};
#pragma omp parallel
    team_solve(&run, algorithm, x, v);

    *relres = team.relres;
    *true_relres = team.true_relres;
    *reductions_per_iteration = team.iterations > 0 ? team.per_iteration : 0;
    *halo_exchanges_per_iteration = team.iterations > 0 ? team.exchanges_per_iteration : 0;
    free(work);
    return team.iterations;
}
/* [cg_variant_mpi] */
