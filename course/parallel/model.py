"""A performance model of one CG iteration on P ranks (lecture 06_pipecg):

    T(P) = T_compute(N / P) + T_halo(P) + exposed reductions

    T_compute = rows * (nnz_per_row * t_nnz + (updates + dots) * t_vector) + T_precond   per rank;
                every dot product and vector update one vector operation
    T_precond = one vector operation (Jacobi), or for IC(0) localized per rank with K additive
                Schwarz sweeps (lecture 08_hybrid): K local solves, each a forward and a backward
                substitution over the two triangles of the matrix priced at s SpMVs (s = 1: the
                nonzeros of one SpMV; lecture 08 measures s) with a barrier per color in each
                (2 colors t_barrier: threads share a color's rows), and K - 1 SpMVs with their
                halo exchanges between them. K = 1, s = 1, one color, no barrier cost: "about one
                SpMV", the model of lecture 06
    T_halo    = neighbours * t_message + halo_bytes * t_byte       the ping-pong model per message:
                                                                   t = t_message + t_byte x
    reduction = a * log2(P) + c                                    a tree of log2 P steps

Blocking reductions are exposed whole; a non-blocking one is exposed only where it outlasts the
work placed between its start and its wait (the preconditioner for Gropp's first, the SpMV for
his second, both for the pipelined one). Assumptions, stated once: the matrix is a 27-point
stencil on a cube of nodes cut into cubes (every rank has 26 neighbours, a halo one node deep);
the local work runs at the speed measured at one rank; the MPI library progresses non-blocking
reductions in the background (the best case). The constants come from `calibrate`, i.e. from the
bench pipecg and bench halo results of this machine, never from the seed.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace

import numpy as np

from ..solvers import VECTOR_UPDATES

DOTS = 3                                  # dot products per iteration in every variant
REDUCTIONS = {"pcg": 2, "chronopoulos-gear": 1, "gropp": 2, "pipelined": 1}

# seed 004 (HPCAsia 2022 workshop paper): GeoFEM/Cube on Oakforest-PACS, strong scaling
SEED_DOF = 100_663_296                    # (512 x 256 x 256) nodes x 3 DOF
SEED_DOF_PER_NODE = 3
SEED_RANKS_PER_NODE = 8                   # 8 MPI ranks x 8 OpenMP threads per node
SEED_NODES = (128, 256, 512, 1024, 2048, 4096)
# CG-loop seconds, Linux 2019 (Table 7) and Nov 2021 (Table 8); columns as the paper labels them.
# The body printed as "Alg. 3" is Gropp's CG, the one printed as "Alg. 4" pipelined CG.
SEED_TABLE_7 = {"Alg.1": (13.9, 9.21, 6.37, 5.00, 4.51, 4.50),
                "Alg.2": (13.7, 9.01, 6.10, 4.69, 4.16, 4.03),
                "Alg.3": (14.2, 9.34, 6.24, 4.75, 4.22, 4.91),
                "Alg.3i": (13.8, 9.01, 5.95, 4.49, 3.89, 4.14),
                "Alg.4": (14.2, 9.39, 6.40, 4.91, 4.58, 4.55),
                "Alg.4i": (13.4, 8.47, 5.33, 3.93, 3.41, 3.29)}
SEED_TABLE_8 = {"Alg.1": (13.9, 9.15, 6.49, 4.91, 5.09, 3.60),
                "Alg.2": (13.8, 9.06, 6.24, 4.68, 4.74, 3.34),
                "Alg.3": (14.3, 9.35, 6.43, 4.80, 4.82, 3.36),
                "Alg.3i": (14.2, 9.58, 6.78, 5.50, 6.88, 6.33),
                "Alg.4": (14.3, 9.47, 6.56, 4.88, 5.05, 3.54),
                "Alg.4i": (13.5, 8.92, 6.08, 4.79, 6.27, 5.89)}
# which of our variants each column is (by the printed bodies, see the docstring above)
SEED_COLUMNS = {"Alg.1": ("pcg", False), "Alg.2": ("chronopoulos-gear", False),
                "Alg.3": ("gropp", False), "Alg.3i": ("gropp", True),
                "Alg.4": ("pipelined", False), "Alg.4i": ("pipelined", True)}
SEED_ALLREDUCE_SHARE = {128: 0.15, 2048: 0.59}     # of Alg. 1's CG loop, from profiling


@dataclass
class Constants:
    t_nnz: float           # seconds per nonzero of the local SpMV
    t_vector: float        # seconds per row of one vector operation (update, dot, Jacobi)
    t_byte: float          # seconds per byte of a message (Hockney's beta)
    t_message: float       # seconds per message, its latency (Hockney's alpha)
    allreduce_a: float     # seconds per tree level of a small Allreduce
    allreduce_c: float     # seconds of a small Allreduce, independent of P

    def allreduce(self, ranks) -> np.ndarray:
        return self.allreduce_a * np.log2(np.maximum(ranks, 1)) + self.allreduce_c

    def as_dict(self) -> dict:
        return asdict(self)


def cube_halo_nodes(nodes_per_rank) -> np.ndarray:
    """Halo nodes of a cube of n^3 nodes inside a bigger cube: 6 faces, 12 edges, 8 corners."""
    n = np.cbrt(np.asarray(nodes_per_rank, float))
    return 6 * n**2 + 12 * n + 8


def iteration(constants: Constants, algorithm: str, iallreduce: bool, rows, ranks,
              dof_per_node: int = 1, nnz_per_row: int = 27, precond: str = "jacobi",
              sweeps: int = 1, colors: int = 1, t_barrier: float = 0.0,
              solve_spmvs: float = 1.0) -> dict:
    """Seconds of one CG iteration per part: compute, halo, reductions (exposed), total, and the
    preconditioner's share of compute + halo (precond), for `rows` matrix rows on `ranks` ranks
    (arrays allowed). sweeps, colors, t_barrier, solve_spmvs (s, one local solve in SpMVs): of
    IC(0) (see T_precond above)."""
    if precond not in ("jacobi", "ic0"):
        raise ValueError(f"precond must be jacobi or ic0, got {precond!r}")
    if sweeps < 1 or colors < 1 or t_barrier < 0 or not solve_spmvs > 0:
        raise ValueError(f"need sweeps >= 1, colors >= 1, t_barrier >= 0, solve_spmvs > 0; got "
                         f"{sweeps}, {colors}, {t_barrier}, {solve_spmvs}")
    rows, ranks = np.asarray(rows, float), np.asarray(ranks, float)
    c = constants
    per_rank = rows / ranks
    spmv = per_rank * nnz_per_row * c.t_nnz
    vector = per_rank * c.t_vector
    neighbours = np.where(ranks > 1, np.minimum(26, ranks - 1), 0)
    halo_bytes = 8 * dof_per_node * cube_halo_nodes(per_rank / dof_per_node)
    exchange = np.where(ranks > 1, neighbours * c.t_message + halo_bytes * c.t_byte, 0.0)
    if precond == "ic0":                               # K local solves, K - 1 products between
        prec = sweeps * (solve_spmvs * spmv + 2 * colors * t_barrier) + (sweeps - 1) * spmv
        prec_halo = (sweeps - 1) * exchange
    else:
        prec, prec_halo = vector, 0.0 * exchange
    compute = spmv + (VECTOR_UPDATES[algorithm] + DOTS) * vector + prec
    halo = exchange + prec_halo                        # the product's exchange and M^-1's
    one = np.where(ranks > 1, c.allreduce(ranks), 0.0)
    if not iallreduce or algorithm in ("pcg", "chronopoulos-gear"):
        exposed = REDUCTIONS[algorithm] * one          # nothing stands between start and wait
    elif algorithm == "gropp":                         # one behind M^-1, one behind the SpMV
        exposed = np.maximum(one - prec - prec_halo, 0) + np.maximum(one - spmv - exchange, 0)
    else:                                              # one behind M^-1 and the SpMV
        exposed = np.maximum(one - prec - spmv - halo, 0)
    return {"compute": compute, "halo": halo, "reductions": exposed,
            "total": compute + halo + exposed, "precond": prec + prec_halo}


def calibrate(pipecg: dict) -> Constants:
    """The constants from one `bench pipecg` result: t_nnz and t_vector from the one-rank
    blocking PCG split; t_message and t_byte from the ping-pong fit of the first run with 2 or more
    ranks; the Allreduce fit from the 1-double latencies of the rank counts above one (a
    least-squares line in log2 P; oversubscribed runs only where there is nothing else)."""
    runs = {run["ranks"]: run for run in pipecg["runs"]}
    if 1 not in runs:
        raise ValueError("calibrate needs the one-rank run of bench pipecg")
    pcg = next(v for v in runs[1]["variants"] if v["algorithm"] == "pcg" and not v["iallreduce"])
    t_nnz = pcg["spmv_s"] / pcg["nnz_max_rank"]
    t_vector = max(pcg["rest_s"], 0.0) / pcg["rows_max_rank"] / (VECTOR_UPDATES["pcg"] + DOTS + 1)
    more = sorted(p for p in runs if p > 1 and not runs[p]["oversubscribed"]) or \
        sorted(p for p in runs if p > 1)
    if not more:
        raise ValueError("calibrate needs a run of bench pipecg on 2 or more ranks")
    levels = np.log2(more)
    seconds = np.array([runs[p]["allreduce"]["one_double_s"] for p in more])
    if len(more) > 1:
        a, c = np.polyfit(levels, seconds, 1)
        a, c = max(a, 0.0), max(c, 0.0)
    else:
        a, c = seconds[0], 0.0                         # one point: all of it per level
    pair = runs[more[0]]["model"]
    return Constants(t_nnz, t_vector, pair["s_per_byte"], pair["latency_s"], float(a),
                     float(c))


def seed_prediction(constants: Constants, algorithm: str, iallreduce: bool,
                    nodes=SEED_NODES, sweeps: int = 1, colors: int = 1,
                    t_barrier: float = 0.0, solve_spmvs: float = 1.0) -> dict:
    """The model for the seed's runs: SEED_DOF rows (3 x 3 blocks of a 27-node stencil: 81
    nonzeros per row), IC(0) (sweeps, colors, t_barrier, solve_spmvs: see iteration; the seed
    states neither the sweeps nor the ordering), 8 ranks per node."""
    ranks = np.asarray(nodes) * SEED_RANKS_PER_NODE
    return iteration(constants, algorithm, iallreduce, SEED_DOF, ranks, SEED_DOF_PER_NODE,
                     nnz_per_row=27 * SEED_DOF_PER_NODE, precond="ic0", sweeps=sweeps,
                     colors=colors, t_barrier=t_barrier, solve_spmvs=solve_spmvs)


def match_seed_share(constants: Constants, share: float = SEED_ALLREDUCE_SHARE[128],
                     nodes: int = 128, **ic0) -> tuple[Constants, float]:
    """The constants with the Allreduce (a and c) scaled by one factor so that the model gives
    blocking PCG the seed's Allreduce share of the CG loop at `nodes` nodes; returns (constants,
    factor). What a machine whose reductions cost that much would do elsewhere is then a
    prediction (the seed measured the share at 2,048 nodes too). ic0: the preconditioner's
    sweeps, colors, t_barrier and solve_spmvs (seed_prediction)."""
    if not 0 < share < 1:
        raise ValueError(f"share must be between 0 and 1, got {share}")
    base = seed_prediction(constants, "pcg", False, [nodes], **ic0)
    others = float(base["compute"][0] + base["halo"][0])
    reductions = float(base["reductions"][0])
    if reductions <= 0:
        raise ValueError("the calibrated Allreduce takes no time: nothing to scale")
    factor = share / (1 - share) * others / reductions
    return replace(constants, allreduce_a=constants.allreduce_a * factor,
                   allreduce_c=constants.allreduce_c * factor), factor
