"""Importance plan + betting e-process: exact properties and a seeded population-null check."""

from __future__ import annotations

import math

import numpy as np
import pytest

from harness.kernel.betting import (
    accept_bets,
    bet_limit,
    conservative_difference,
    log_wealth_path,
    reject_bets,
    weighted_differences,
)
from harness.kernel.importance_plan import ImportancePlanner, floor_probabilities, information_scores


def test_floor_probabilities_respect_the_floor_and_sum_to_one():
    scores = np.array([0.0, 0.01, 0.5, 0.5, 0.2, 0.0])
    for floor in (0.1, 0.3, 0.7, 1.0):
        pi = floor_probabilities(scores, floor)
        assert math.isclose(pi.sum(), 1.0)
        assert np.all(pi >= floor / scores.size - 1e-15)
    assert np.allclose(floor_probabilities(scores, 1.0), 1 / 6)
    # above the floor pi stays proportional to the score
    pi = floor_probabilities(scores, 0.3)
    assert math.isclose(pi[2] / pi[4], 0.5 / 0.2)


def test_floor_probabilities_reject_bad_floor():
    with pytest.raises(ValueError, match="importance_floor"):
        floor_probabilities([1.0, 2.0], 0.0)


def test_weighted_mean_is_the_population_gain_whatever_pi():
    rng = np.random.default_rng(3)
    p, q = rng.random(50), rng.random(50)
    pi = floor_probabilities(rng.random(50), 0.25)
    # E[Z] = sum_i pi_i (q_i - p_i) / (N pi_i)
    assert math.isclose(float(np.sum(pi * (q - p) / (50 * pi))), float(np.mean(q - p)))


def test_information_scores_favour_uncertain_questions():
    s = information_scores([(0.5, 4), (0.05, 4), (None, 0), (0.95, 100)], prior_obs=4)
    assert s[0] > s[2] > s[1]  # mid > unobserved > extreme
    assert math.isclose(s[1], s[3])  # symmetric in p, and n_obs capped at prior_obs
    assert math.isclose(s[2], math.sqrt(1 / 6))  # Beta(1, 1): E[p(1 - p)] = 1/6


def test_bet_limits_keep_wealth_positive_and_are_checked():
    assert math.isclose(bet_limit(4.0, 0.0, side=1), 0.25)
    assert math.isclose(bet_limit(4.0, 0.5, side=-1), 1 / 3.5)
    bets = accept_bets(4.0)
    assert np.all(bets > 0) and np.max(bets) < 0.25
    worst = np.full((1, 30), -4.0)
    assert np.all(np.isfinite(log_wealth_path(worst, bets, bound=4.0)))
    with pytest.raises(ValueError, match="wealth"):
        log_wealth_path(worst, [0.3], bound=4.0)
    rb = reject_bets(4.0, 0.03)
    assert np.all(rb < 0)
    assert np.all(np.isfinite(log_wealth_path(np.full((1, 30), 4.0), rb, null_mean=0.03, bound=4.0)))


def test_infra_is_imputed_against_the_candidate():
    assert conservative_difference(False, None) == 0
    assert conservative_difference(True, None) == -1
    assert conservative_difference(None, True) == 0
    assert conservative_difference(None, False) == -1
    z = weighted_differences([True, None, False], [None, True, True], [2.0, 1.0, 0.5], bound=4.0)
    assert list(z) == [-2.0, 0.0, 0.5]
    with pytest.raises(ValueError, match="floor"):
        weighted_differences([True], [True], [5.0], bound=4.0)


def test_planner_draws_from_pi_with_fresh_samples_and_weights():
    pool = [f"q{i}" for i in range(20)]
    prior = {q: (0.5 if i < 5 else 0.02, 8) for i, q in enumerate(pool)}
    informing = {"q0": {100, 101}}
    planner = ImportancePlanner(pool, block_size=10, max_pairs=4000, floor=0.3, seed=1, first_sample_index=100,
                                prior=prior, informing_samples=informing)
    items = []
    while (block := planner.next_block()) is not None:
        items += block
    assert planner.final and len(items) == 4000
    indices = [it.sample_index for it in items]
    assert len(set(indices)) == len(indices)
    assert not {100, 101} & {it.sample_index for it in items if it.qid == "q0"}  # never a sample that fed p_hat
    counts = np.array([sum(it.qid == q for it in items) for q in pool]) / len(items)
    assert np.max(np.abs(counts - planner.probabilities)) < 0.03
    for it in items[:50]:
        assert math.isclose(it.weight, 1 / (20 * planner.probabilities[pool.index(it.qid)]))
        assert it.weight <= planner.bound


def test_trade_off_null_is_not_accepted_more_than_alpha():
    """30 informative questions helped (+30 pts), 70 easy ones broken by the same total (population Delta = 0).

    The plan favours the helped questions; with the importance weights the false-accept rate stays <= alpha
    (seeded, 3-SE tolerance); the same draws without the weights (negative control) accept most of the time.
    """
    rng = np.random.default_rng(11)
    p = np.r_[np.full(30, 0.5), np.full(70, 0.99)]
    q = np.r_[np.full(30, 0.8), np.full(70, 0.99 - 30 * 0.3 / 70)]
    n = p.size
    assert abs(np.mean(q - p)) < 1e-12
    prior = {f"q{i}": (float(p[i]), 100) for i in range(n)}  # a prior that knows where the information is
    planner = ImportancePlanner([f"q{i}" for i in range(n)], block_size=20, max_pairs=1, floor=0.2, seed=0,
                                first_sample_index=0, prior=prior, prior_obs=100)
    pi, runs, horizon = planner.probabilities, 1500, 1000
    assert float(np.sum(pi * (q - p))) > 0.1  # what an unweighted test would see
    rows = np.stack([rng.choice(n, size=horizon, p=pi) for _ in range(runs)])
    diff = (rng.random(rows.shape) < q[rows]).astype(float) - (rng.random(rows.shape) < p[rows])
    z = diff / (n * pi[rows])
    accepted = np.max(log_wealth_path(z, accept_bets(planner.bound), bound=planner.bound), axis=1) >= 3.0
    alpha = math.exp(-3.0)
    assert accepted.mean() <= alpha + 3 * math.sqrt(alpha * (1 - alpha) / runs)
    unweighted = np.max(log_wealth_path(diff, accept_bets(1.0), bound=1.0), axis=1) >= 3.0
    assert unweighted.mean() > 0.5



def _soft_gates(rng, p, q, gates, pairs, *, values):
    """`gates` uniform-order gates of `pairs` pairs on a pool with baseline / candidate accuracies p / q; a rollout's
    soft score v ~ Beta(4 acc, 4 (1 - acc)); outcomes = v rounded with one uniform per pair (as the loop does). Each
    gate goes through the production `pair_block` + `betting_look`, with or without the values on its pairs."""
    from harness.kernel.betting import betting_look
    from harness.kernel.gate import pair_block
    from harness.kernel.types import BlockItem, GateParams

    params = GateParams()
    firsts = []
    for _ in range(gates):
        qi = rng.integers(0, p.size, pairs)
        vb, vc = rng.beta(4 * p[qi], 4 * (1 - p[qi])), rng.beta(4 * q[qi], 4 * (1 - q[qi]))
        u = rng.random(pairs)
        block = [BlockItem(f"q{i}", k) for k, i in enumerate(qi)]
        got = pair_block(block, [bool(x) for x in u < vb], [bool(x) for x in u < vc],
                         baseline_values=[float(v) for v in vb] if values else None,
                         candidate_values=[float(v) for v in vc] if values else None)
        look = betting_look(got, params)
        path = log_wealth_path(np.asarray(look.z), accept_bets(1.0), bound=1.0)
        crossed = np.flatnonzero(path >= params.lambda_accept)
        assert look.accept_crossed == bool(crossed.size)
        firsts.append(int(crossed[0]) + 1 if crossed.size else pairs + 1)
    return np.array(firsts)


def test_soft_values_on_the_pairs_are_bet_on_valid_under_the_null_and_cheaper_than_their_rounding():
    """A soft gate's pairs carry the metric's values: the e-process bets on v_C - v_B (same mean as the rounded
    outcomes, less variance). Strong null (candidate = baseline, 600 gates of 400 pairs): false accepts <= alpha
    (3-SE tolerance). +10 points: the same draws accept in fewer pairs with the values than with their rounding."""
    rng = np.random.default_rng(20261205)
    p = rng.beta(2, 2, 60)
    alpha = math.exp(-3.0)
    null = _soft_gates(rng, p, p, 600, 400, values=True)
    assert np.mean(null <= 400) <= alpha + 3 * math.sqrt(alpha * (1 - alpha) / 600)
    q = np.minimum(p + 0.10, 0.999)
    with_values = _soft_gates(np.random.default_rng(5), p, q, 200, 2000, values=True)
    rounded = _soft_gates(np.random.default_rng(5), p, q, 200, 2000, values=False)
    assert np.mean(with_values <= 2000) > 0.95 and np.mean(rounded <= 2000) > 0.95
    assert with_values.mean() < 0.8 * rounded.mean()  # soft_gate.md: 0.39x vs 0.64x the pairs of hard at k = 4


def test_pair_block_checks_the_values():
    from harness.kernel.gate import pair_block
    from harness.kernel.types import BlockItem

    block = [BlockItem("q1", 1), BlockItem("q2", 2)]
    pairs = pair_block(block, [True, None], [False, True], baseline_values=[0.75, None], candidate_values=[0.25, 0.5])
    assert (pairs[0].baseline_value, pairs[0].candidate_value, pairs[1].baseline_value) == (0.75, 0.25, None)
    assert conservative_difference(pairs[0].baseline_value, pairs[0].candidate_value) == -0.5
    with pytest.raises(ValueError, match="value of 'q2' must be a float in .0, 1. next to an outcome"):
        pair_block(block, [True, None], [False, True], baseline_values=[0.75, 0.5])  # a value for an infra failure
    with pytest.raises(ValueError, match="candidate value of 'q1'"):
        pair_block(block, [True, None], [False, True], candidate_values=[1.25, None])
    with pytest.raises(ValueError, match="2 items but 1 baseline"):
        pair_block(block, [True, None], [False, True], baseline_values=[0.5])
    with pytest.raises(ValueError, match="values in .0, 1."):
        conservative_difference(0.5, 1.5)
