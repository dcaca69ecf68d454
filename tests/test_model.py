"""The performance model of lecture 06_pipecg (course.parallel.model): its parts add up as the
formulas say, hidden reductions are hidden only behind the work placed before their wait, the
calibration reads the benchmark's figures, and the seed's tables are transcribed consistently."""

from __future__ import annotations

import numpy as np
import pytest

from course.parallel import model
from course.solvers import ALGORITHMS

C = model.Constants(t_nnz=1e-9, t_vector=1e-9, t_byte=1e-10, t_message=1e-6, allreduce_a=2e-6,
                    allreduce_c=1e-6)


def test_iteration_adds_up_its_parts():
    part = model.iteration(C, "pcg", False, rows=1e6, ranks=8)
    per_rank = 1e6 / 8
    assert part["compute"] == pytest.approx(per_rank * (27e-9 + (3 + 3 + 1) * 1e-9))
    halo_nodes = 6 * 50**2 + 12 * 50 + 8                       # a cube of 125,000 = 50^3 nodes
    assert part["halo"] == pytest.approx(7 * 1e-6 + 8 * halo_nodes * 1e-10)
    assert part["reductions"] == pytest.approx(2 * (2e-6 * 3 + 1e-6))
    assert part["total"] == pytest.approx(part["compute"] + part["halo"] + part["reductions"])
    alone = model.iteration(C, "pcg", False, rows=1e6, ranks=1)
    assert alone["halo"] == 0 and alone["reductions"] == 0


def test_localized_ic0_costs_its_sweeps_and_barriers():
    """IC(0) (lecture 08): K local solves of two colored substitutions (one SpMV of nonzeros and
    2 colors barriers each) and K - 1 products with their exchanges; K = 1 without barriers is
    lecture 06's "about one SpMV"."""
    per_rank, ranks = 1e6 / 8, 8
    spmv = per_rank * 27e-9
    exchange = model.iteration(C, "pcg", False, 1e6, ranks)["halo"]
    one = model.iteration(C, "pcg", False, 1e6, ranks, precond="ic0")
    assert one["precond"] == pytest.approx(spmv)
    three = model.iteration(C, "pcg", False, 1e6, ranks, precond="ic0", sweeps=3, colors=10,
                            t_barrier=1e-6)
    assert three["precond"] == pytest.approx(3 * (spmv + 20e-6) + 2 * (spmv + exchange))
    assert three["halo"] == pytest.approx(3 * exchange)
    assert three["compute"] - one["compute"] == pytest.approx(three["precond"] - spmv - 2 * exchange)
    # more work before the wait hides more of the pipelined reduction, never less
    many = np.array([2, 64, 4096, 2**20])
    hidden = [model.iteration(C, "pipelined", True, 1e8, many, precond="ic0", sweeps=k)["reductions"]
              for k in (1, 2, 3)]
    assert np.all(hidden[1] <= hidden[0]) and np.all(hidden[2] <= hidden[1])
    assert np.any(hidden[2] < hidden[0])
    for bad in ({"sweeps": 0}, {"colors": 0}, {"t_barrier": -1.0}, {"solve_spmvs": 0.0},
                {"solve_spmvs": float("nan")}):
        with pytest.raises(ValueError, match="need sweeps >= 1"):
            model.iteration(C, "pcg", False, 1e6, ranks, precond="ic0", **bad)


def test_a_measured_solve_cost_prices_each_local_solve():
    """Lecture 08 feeds the model the measured cost of one local solve in SpMVs (s): each of the K
    solves costs s SpMVs, the K - 1 products between them one each; s = 1 is the default."""
    per_rank, ranks = 1e6 / 8, 8
    spmv = per_rank * 27e-9
    exchange = model.iteration(C, "pcg", False, 1e6, ranks)["halo"]
    two = model.iteration(C, "pcg", False, 1e6, ranks, precond="ic0", sweeps=2, colors=10,
                          t_barrier=1e-6, solve_spmvs=2.5)
    assert two["precond"] == pytest.approx(2 * (2.5 * spmv + 20e-6) + (spmv + exchange))
    default = model.iteration(C, "pcg", False, 1e6, ranks, precond="ic0", sweeps=2)
    assert default["precond"] == pytest.approx(2 * spmv + spmv + exchange)
    seed = model.seed_prediction(C, "pcg", False, [128], sweeps=2, solve_spmvs=2.5)
    plain = model.seed_prediction(C, "pcg", False, [128], sweeps=2)
    seed_spmv = model.SEED_DOF / (128 * model.SEED_RANKS_PER_NODE) * 81 * 1e-9
    assert seed["precond"][0] - plain["precond"][0] == pytest.approx(2 * 1.5 * seed_spmv)


def test_only_hidden_reductions_shrink_with_iallreduce():
    many = np.array([2, 64, 4096, 2**20])
    for algorithm in ALGORITHMS:
        blocking = model.iteration(C, algorithm, False, 1e8, many)
        hidden = model.iteration(C, algorithm, True, 1e8, many)
        assert np.all(blocking["reductions"] == model.REDUCTIONS[algorithm] * C.allreduce(many))
        if algorithm in ("pcg", "chronopoulos-gear"):
            assert np.array_equal(hidden["total"], blocking["total"])
        else:
            assert np.all(hidden["reductions"] <= blocking["reductions"])
            assert hidden["reductions"][0] == 0.0                   # big parts hide it all
            assert hidden["reductions"][-1] > 0.0                   # tiny parts cannot
    # the pipelined reduction hides behind more work than either of Gropp's
    gropp = model.iteration(C, "gropp", True, 1e8, many)["reductions"]
    pipelined = model.iteration(C, "pipelined", True, 1e8, many)["reductions"]
    assert np.all(pipelined <= gropp)


def bench_result(one_double):
    def variant(algorithm, iallreduce):
        return {"algorithm": algorithm, "iallreduce": iallreduce, "spmv_s": 2.7e-3,
                "rest_s": 7e-3, "rows_max_rank": 100_000, "nnz_max_rank": 2_700_000}
    pair = {"s_per_byte": 1e-10, "latency_s": 5e-7}
    return {"n": 46, "runs": [
        {"ranks": p, "oversubscribed": p > 2, "allreduce": {"one_double_s": t},
         "model": pair if p > 1 else None,
         "variants": [variant(a, i) for a in ALGORITHMS for i in (False, True)]}
        for p, t in one_double.items()]}


def test_calibrate_reads_the_benchmark():
    c = model.calibrate(bench_result({1: 1e-7, 2: 3e-6, 4: 5e-6}))
    assert c.t_nnz == pytest.approx(1e-9)
    assert c.t_vector == pytest.approx(7e-3 / 100_000 / 7)
    assert c.allreduce_a == pytest.approx(3e-6) and c.allreduce_c == 0.0     # one level: 2 ranks
    assert c.t_byte == 1e-10 and c.t_message == 5e-7
    c = model.calibrate(bench_result({1: 1e-7, 2: 3e-6, 3: 4e-6, 4: 5e-6}))
    assert c.allreduce(np.array([2]))[0] > 0
    with pytest.raises(ValueError, match="2 or more ranks"):
        model.calibrate(bench_result({1: 1e-7}))
    with pytest.raises(ValueError, match="one-rank run"):
        model.calibrate(bench_result({2: 1e-6}))


def test_match_seed_share():
    scaled, factor = model.match_seed_share(C, 0.15, 128)
    part = model.seed_prediction(scaled, "pcg", False, [128])
    assert part["reductions"][0] / part["total"][0] == pytest.approx(0.15)
    assert factor > 0 and scaled.allreduce_a == pytest.approx(C.allreduce_a * factor)
    with pytest.raises(ValueError):
        model.match_seed_share(C, 1.5)
    ic0 = {"sweeps": 2, "colors": 10, "t_barrier": 1e-6}       # matched with its preconditioner
    scaled, _ = model.match_seed_share(C, 0.15, 128, **ic0)
    part = model.seed_prediction(scaled, "pcg", False, [128], **ic0)
    assert part["reductions"][0] / part["total"][0] == pytest.approx(0.15)


def test_seed_tables_reproduce_the_papers_ratio_tables():
    """Tables 3 and 4 of the paper are ratios of Tables 7 and 8 (SEED-NOTES 3.1): a typo in the
    transcription would show here."""
    t7, t8 = model.SEED_TABLE_7, model.SEED_TABLE_8
    table_3 = {"Alg.3": (1.03, 1.04, 1.05, 1.06, 1.08, 1.19),
               "Alg.4": (1.06, 1.11, 1.20, 1.25, 1.34, 1.38)}
    table_4_alg3 = (1.01, 0.98, 0.95, 0.87, 0.70, 0.53)
    for alg, ratios in table_3.items():
        assert np.allclose(np.divide(t7[alg], t7[alg + "i"]), ratios, atol=0.006), alg
    assert np.allclose(np.divide(t8["Alg.3"], t8["Alg.3i"]), table_4_alg3, atol=0.006)
    assert set(t7) == set(t8) == set(model.SEED_COLUMNS)
    assert all(len(v) == len(model.SEED_NODES) for v in [*t7.values(), *t8.values()])
