"""benchmarks/evidence_floor.py: the KL_inf dual, the floor as a lower bound, the subset bound, the ideal-path pricing."""

from __future__ import annotations

import math

import numpy as np
import pytest

from benchmarks import evidence_floor as ef


def _kl3(p: tuple[float, float, float], q: tuple[float, float, float]) -> float:
    return sum(a * math.log(a / b) for a, b in zip(p, q) if a > 0)


@pytest.mark.parametrize("plus,minus", [(0.125, 0.075), (0.3, 0.1), (0.05, 0.0), (0.45, 0.4), (0.2, 0.2)])
def test_kl_inf_is_the_closest_null_law_and_the_best_constant_bet(plus, minus):
    value = ef.kl_inf(plus, minus)
    # primal: the smallest KL(P1 || P0) over laws P0 on {-1, 0, +1} with mean <= 0, by brute force on a fine grid
    p1 = (minus, 1 - plus - minus, plus)
    grid = np.linspace(1e-4, 1 - 1e-4, 800)
    best = math.inf
    for q_plus in grid:
        for q_minus in grid[(grid >= q_plus) & (grid <= 1 - q_plus)]:
            best = min(best, _kl3(p1, (q_minus, max(1 - q_plus - q_minus, 1e-12), q_plus)))
    assert value == pytest.approx(best, abs=2e-4)
    # dual: no constant bet in [0, 1] grows faster
    lams = np.linspace(0, 0.999, 2000)
    growth = plus * np.log1p(lams) + minus * np.log1p(-lams)
    assert value >= growth.max() - 1e-9
    assert value == pytest.approx(max(growth.max(), 0.0), abs=1e-3)


def test_the_floor_is_below_what_the_product_and_the_best_constant_bet_spend():
    rng = np.random.default_rng(11)
    alpha = 0.05
    for d, gain in ((0.2, 0.10), (0.1, 0.05)):
        res = ef.simulate_cell(rng, d, gain, runs=400, cap=2000, threshold=math.log(1 / alpha))
        for name, cell in res.items():
            floor = ef.floor_pairs((d + gain) / 2, (d - gain) / 2, alpha, cell["power"])
            assert cell["power"] > 0.9, (name, cell)
            assert cell["mean_stop"] >= floor - 3 * cell["se_stop"], (d, gain, name, cell, floor)
        # and the product's grid is not far above it either (gate.md-scale efficiency, not a tautology)
        grid = res["product grid"]
        assert grid["mean_stop"] <= 2.0 * ef.floor_pairs((d + gain) / 2, (d - gain) / 2, alpha, grid["power"])


def test_floor_edge_cases():
    assert ef.floor_pairs(0.1, 0.1, 0.05, 0.8) == math.inf  # no gain: no test has power
    assert ef.floor_pairs(0.1, 0.0, 0.05, 0.05) == 0.0
    with pytest.raises(ValueError, match="not a pair law"):
        ef.kl_inf(0.7, 0.5)
    # smaller level or more discordance at the same gain: more pairs
    assert ef.floor_pairs(0.15, 0.05, 0.01, 0.8) > ef.floor_pairs(0.15, 0.05, 0.05, 0.8)
    assert ef.floor_pairs(0.25, 0.15, 0.05, 0.8) > ef.floor_pairs(0.15, 0.05, 0.05, 0.8)


def test_cheapest_reaching_is_the_fractional_knapsack():
    items = [(0.02, 100.0), (0.05, 1000.0), (0.01, 10.0)]  # cost per point: 5000, 20000, 1000
    assert ef.cheapest_reaching(items, 0.0) == 0.0
    assert ef.cheapest_reaching(items, 0.01) == pytest.approx(10.0)
    assert ef.cheapest_reaching(items, 0.02) == pytest.approx(10.0 + 50.0)
    assert ef.cheapest_reaching(items, 0.05) == pytest.approx(10.0 + 100.0 + 1000.0 * 0.02 / 0.05)
    assert ef.cheapest_reaching(items, 0.09) is None
    assert ef.cheapest_reaching([(-0.01, 1.0)], 0.001) is None


def _edit(epoch, effect, plus, minus, share=0.2):
    return {"epoch": epoch, "effect": effect, "test_share": share, "action": "accept",
            "discordance": {"plus": plus, "minus": minus, "shared_plus": max(plus - minus, 0.0), "shared_minus": 0.0}}


def test_ideal_path_prices_the_installs_up_to_the_epoch_that_reached_gepa():
    run = {"rule": "oracle", "seed": 7, "base_test": 0.50, "tradeoff": False,
           "curve": [{"epoch": 1, "rollouts": 1000, "best_test": 0.55}, {"epoch": 2, "rollouts": 2000, "best_test": 0.62},
                     {"epoch": 3, "rollouts": 3000, "best_test": 0.70}],
           "edits": [_edit(1, 0.10, 0.30, 0.20), _edit(2, 0.20, 0.25, 0.05), _edit(2, 0.0, 0.1, 0.1), _edit(3, 0.3, 0.3, 0.0)]}
    doc = {"cmd": "python benchmarks/e2e.py", "runs": [run],
           "summary": {"reach_gepa": {"oracle": [{"seed": 7, "gepa_acc": 0.60, "gepa_rollouts": 1500}]}}}
    (row,) = ef.ideal_path_floor(doc, 0.05)
    assert row["epoch"] == 2 and row["nongate"] == 2000 and row["edits"] == 2  # the null edit and epoch 3 are not counted
    expected = ef.floor_pairs(0.30, 0.20, 0.05, ef.POWER) + ef.floor_pairs(0.25, 0.05, 0.05, ef.POWER)
    assert row["floor_pairs"] == pytest.approx(expected)
    assert row["needed_pts"] == pytest.approx(10.0) and row["summed_pts"] == pytest.approx(6.0)
    assert row["subset_total"] is None  # the two edits' test gains (2 + 4 pts) fall short of 10: additivity fails, said so
    # coupled world: shared draws lower the discordance, so the floor falls
    coupled = dict(doc, cmd="python benchmarks/e2e.py --arm-coupling 0.74")
    (low,) = ef.ideal_path_floor(coupled, 0.05)
    assert low["floor_pairs"] < row["floor_pairs"]
