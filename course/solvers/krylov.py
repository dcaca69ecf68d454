"""Preconditioned conjugate gradients, four ways, on one code path (lectures 01 .. 06).

An algorithm sees the operator and the vectors only through three pluggable pieces, so that the
serial solver is the one-process case of the distributed one:

    matvec(v)                 A v      distributed: halo exchange + local CRS product
    precond(r)                M^-1 r   Jacobi here: no communication
    reductions.start(a, b..)  global sums of the local partial sums a, b, ...; returns a pending
                              reduction whose wait() gives the sums. Serial: the values
                              themselves; distributed: MPI_Allreduce, or MPI_Iallreduce whose
                              wait() is MPI_Wait (course.parallel.reductions)

The variants differ in where their reductions go (u = M^-1 r, w = A u; every one computes the
same iterates in exact arithmetic):

    pcg                Hestenes-Stiefel: (p, q) is needed at once, then (r, u) with (r, r):
                       2 reductions per iteration, nothing to hide them behind
    chronopoulos-gear  w = A u computed ahead, so (r, u), (w, u), (r, r) go in ONE reduction;
                       alpha comes from a recurrence (CGPOP's ChronGear)
    gropp              2 non-blocking reductions: (p, s) hidden behind M^-1 s, and
                       (r, u), (r, r) hidden behind A u
    pipelined          Ghysels-Vanroose: ONE non-blocking reduction of (r, u), (w, u), (r, r)
                       hidden behind both M^-1 w and A m; more vectors to update

Every variant stops when the recursively updated residual has ||r|| <= tol ||b|| and counts as an
iteration one update of x. The reductions started inside each iteration are counted (not declared):
SolveResult.reductions_per_iteration.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

ALGORITHMS = ("pcg", "chronopoulos-gear", "gropp", "pipelined")
VECTOR_UPDATES = {"pcg": 3, "chronopoulos-gear": 4, "gropp": 5, "pipelined": 8}


def check_algorithm(algorithm: str) -> str:
    if algorithm not in ALGORITHMS:
        raise ValueError(f"cg must be one of {', '.join(ALGORITHMS)}; got {algorithm!r}")
    return algorithm


@dataclass
class SolveResult:
    x: np.ndarray
    iterations: int
    relative_residual: float                # recursive residual ||r_k|| / ||b||
    converged: bool
    residuals: list[float] | None = None   # ||r_k|| / ||b|| per iteration (numpy path only)
    algorithm: str = "pcg"
    reductions_per_iteration: list[int] = field(default_factory=list)   # counted per iteration
    true_relative_residual: float | None = None                          # ||b - A x|| / ||b||
    true_residuals: list[float] | None = None                            # per iteration, if asked
    exchanges_per_iteration: list[int] = field(default_factory=list)     # counted, if asked


class Ready:
    """A reduction that is already complete."""

    def __init__(self, sums: np.ndarray):
        self.sums = sums

    def wait(self) -> np.ndarray:
        return self.sums


class Reductions:
    """Global sums on one process: the local sums are the global ones. Counts the reductions, as
    the MPI versions in course.parallel.reductions do."""

    def __init__(self):
        self.count = 0

    def start(self, *local_sums: float):
        self.count += 1
        return Ready(np.array(local_sums, dtype=float))


class _Run:
    """The bookkeeping every variant shares: the stopping test, the residual history, the count
    of reductions per iteration, residual replacement and the true residual."""

    def __init__(self, algorithm, matvec, b, reductions, tol, max_iter, replace_every,
                 monitor_true_residual, exchanges=None):
        self.algorithm, self.matvec, self.b, self.reductions = algorithm, matvec, b, reductions
        self.exchanges = exchanges                      # () -> halo exchanges so far, or None
        self.exchanges_per_iteration: list[int] = []
        self._exchanges_at_start = 0
        self.tol, self.max_iter, self.replace_every = tol, max_iter, replace_every
        self.bnorm = np.sqrt(reductions.start(np.dot(b, b)).wait()[0]) or 1.0
        self.residuals: list[float] = []
        self.per_iteration: list[int] = []
        self.true_residuals = [] if monitor_true_residual else None
        self._count_at_start = 0

    def true_residual(self, x) -> float:
        r = self.b - self.matvec(x)
        return float(np.sqrt(self.reductions.start(np.dot(r, r)).wait()[0]) / self.bnorm)

    def converged(self, rr: float) -> bool:
        """Record ||r|| / ||b|| from the reduced (r, r); True once it is at most tol."""
        self.residuals.append(float(np.sqrt(max(rr, 0.0))) / self.bnorm)
        return self.residuals[-1] <= self.tol

    def more(self) -> bool:
        return len(self.per_iteration) < self.max_iter and np.isfinite(self.residuals[-1])

    def begin(self) -> None:
        """The iterations start: reductions from here on are counted per iteration."""
        self._count_at_start = self.reductions.count
        self._exchanges_at_start = self.exchanges() if self.exchanges else 0

    def replace_now(self) -> bool:
        """True in every replace_every-th iteration: recompute the recursive vectors from x."""
        k = len(self.per_iteration) + 1
        return self.replace_every > 0 and k % self.replace_every == 0

    def iteration_done(self, x) -> None:
        """Count the reductions of the iteration that just ended (not those of the monitor)."""
        self.per_iteration.append(self.reductions.count - self._count_at_start)
        if self.exchanges:
            self.exchanges_per_iteration.append(self.exchanges() - self._exchanges_at_start)
        if self.true_residuals is not None:
            self.true_residuals.append(self.true_residual(x))
        self._count_at_start = self.reductions.count
        self._exchanges_at_start = self.exchanges() if self.exchanges else 0

    def result(self, x) -> SolveResult:
        return SolveResult(x, len(self.per_iteration), self.residuals[-1],
                           self.residuals[-1] <= self.tol, self.residuals, self.algorithm,
                           self.per_iteration, self.true_residual(x), self.true_residuals,
                           self.exchanges_per_iteration)


# [pcg]
def _pcg(run, matvec, precond, dot, x):
    r = run.b - matvec(x)
    u = precond(r)
    p = u.copy()
    gamma, rr = run.reductions.start(dot(r, u), dot(r, r)).wait()
    run.begin()
    while not run.converged(rr) and run.more():
        q = matvec(p)
        (delta,) = run.reductions.start(dot(p, q)).wait()     # needed on the next line
        alpha = gamma / delta
        x += alpha * p
        r = run.b - matvec(x) if run.replace_now() else r - alpha * q
        u = precond(r)
        gamma_new, rr = run.reductions.start(dot(r, u), dot(r, r)).wait()
        run.iteration_done(x)
        p = u + (gamma_new / gamma) * p
        gamma = gamma_new
# [pcg]


# [chronopoulos_gear]
def _chronopoulos_gear(run, matvec, precond, dot, x):
    r = run.b - matvec(x)
    u = precond(r)
    w = matvec(u)
    gamma, delta, rr = run.reductions.start(dot(r, u), dot(w, u), dot(r, r)).wait()
    alpha, beta = gamma / delta, 0.0
    p, s = np.zeros_like(x), np.zeros_like(x)                  # s = A p
    run.begin()
    while not run.converged(rr) and run.more():
        p = u + beta * p
        s = w + beta * s
        x += alpha * p
        r -= alpha * s
        if run.replace_now():
            r, s = run.b - matvec(x), matvec(p)
        u = precond(r)
        w = matvec(u)
        gamma_new, delta, rr = run.reductions.start(dot(r, u), dot(w, u), dot(r, r)).wait()
        run.iteration_done(x)
        beta = gamma_new / gamma
        alpha = gamma_new / (delta - beta * gamma_new / alpha)
        gamma = gamma_new
# [chronopoulos_gear]


# [gropp]
def _gropp(run, matvec, precond, dot, x):
    r = run.b - matvec(x)
    u = precond(r)
    p = u.copy()
    s = matvec(p)                                              # s = A p
    gamma, rr = run.reductions.start(dot(r, u), dot(r, r)).wait()
    run.begin()
    while not run.converged(rr) and run.more():
        pending = run.reductions.start(dot(p, s))
        m = precond(s)                                         # hides (p, s)
        (delta,) = pending.wait()
        alpha = gamma / delta
        x += alpha * p
        r -= alpha * s
        u -= alpha * m
        if run.replace_now():
            r, s = run.b - matvec(x), matvec(p)
            u = precond(r)
        pending = run.reductions.start(dot(r, u), dot(r, r))
        w = matvec(u)                                          # hides (r, u), (r, r)
        gamma_new, rr = pending.wait()
        run.iteration_done(x)
        beta = gamma_new / gamma
        p = u + beta * p
        s = w + beta * s
        gamma = gamma_new
# [gropp]


# [pipelined]
def _pipelined(run, matvec, precond, dot, x):
    r = run.b - matvec(x)
    u = precond(r)
    w = matvec(u)
    z, q, s, p = (np.zeros_like(x) for _ in range(4))        # z = A q, q = M^-1 s, s = A p
    alpha = gamma_old = 0.0
    run.begin()
    while True:
        pending = run.reductions.start(dot(r, u), dot(w, u), dot(r, r))
        m = precond(w)                                         # hide the reduction behind
        n = matvec(m)                                          # M^-1 w and A m
        gamma, delta, rr = pending.wait()
        if run.converged(rr) or not run.more():
            return
        if gamma_old == 0.0:
            beta, alpha = 0.0, gamma / delta
        else:
            beta = gamma / gamma_old
            alpha = gamma / (delta - beta * gamma / alpha)
        z = n + beta * z
        q = m + beta * q
        s = w + beta * s
        p = u + beta * p
        x += alpha * p
        r -= alpha * s
        u -= alpha * q
        w -= alpha * z
        gamma_old = gamma
        if run.replace_now():                                  # every recurrence from x and p
            r, s = run.b - matvec(x), matvec(p)
            u, q = precond(r), precond(s)
            w, z = matvec(u), matvec(q)
        run.iteration_done(x)
# [pipelined]


_VARIANTS = {"pcg": _pcg, "chronopoulos-gear": _chronopoulos_gear, "gropp": _gropp,
             "pipelined": _pipelined}


def krylov(matvec: Callable, b: np.ndarray, precond: Callable = lambda r: r,
           reductions: Reductions | None = None, algorithm: str = "pcg",
           x0: np.ndarray | None = None, tol: float = 1e-10, max_iter: int | None = None,
           replace_every: int = 0, monitor_true_residual: bool = False,
           exchanges: Callable[[], int] | None = None) -> SolveResult:
    """Solve A x = b (A symmetric positive definite) with the CG variant `algorithm`.

    reductions: the global sums (default: one process). replace_every N > 0: every N iterations
    the recursively updated vectors are recomputed from x (residual replacement, Cools et al.).
    monitor_true_residual: also compute ||b - A x|| / ||b|| after every iteration (costs a
    product and a reduction each, not counted in reductions_per_iteration). exchanges(): the
    halo exchanges made so far, to count them per iteration (SolveResult.exchanges_per_iteration),
    as the reductions are."""
    check_algorithm(algorithm)
    if int(replace_every) != replace_every or replace_every < 0:
        raise ValueError(f"residual replacement period must be an integer >= 0, got "
                         f"{replace_every!r}")
    reductions = Reductions() if reductions is None else reductions
    x = np.zeros_like(b) if x0 is None else x0.astype(float, copy=True)
    max_iter = 10 * b.shape[0] if max_iter is None else max_iter
    run = _Run(algorithm, matvec, b, reductions, tol, max_iter, int(replace_every),
               monitor_true_residual, exchanges)
    _VARIANTS[algorithm](run, matvec, precond, np.dot, x)
    return run.result(x)


def cg(matvec: Callable, b: np.ndarray, precond: Callable = lambda r: r,
       reductions: Reductions | None = None, x0: np.ndarray | None = None, tol: float = 1e-10,
       max_iter: int | None = None) -> SolveResult:
    """Preconditioned conjugate gradients (Hestenes-Stiefel): krylov(..., algorithm="pcg").
    Stops when ||r|| <= tol ||b|| (recursive residual). `precond(r)` returns M^-1 r."""
    return krylov(matvec, b, precond, reductions, "pcg", x0, tol, max_iter)
