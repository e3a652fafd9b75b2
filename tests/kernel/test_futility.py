"""Futility stopping of the betting gate (harness/kernel/futility.py), through the real gate path:
SAMPLING_PLANS -> ImportancePlanner -> pair_block -> gate_decision, outcomes simulated per slot and seeded.

The gates of one comparison are paired: gate g of every futility rule sees the same pool, prior, questions and
outcomes (one generator per gate, drawn block by block), so a rule that stops earlier sees a prefix of the same
sequence. That makes the main claims exact, pathwise properties (no tolerance): `estimate`'s exact bound gives the same decision
with no more pairs, and every futility rule accepts only where `none` accepts - so it cannot raise the
false-accept rate, whatever the population.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from benchmarks import fdr
from harness.kernel.betting import accept_bets, log_wealth_path
from harness.kernel.futility import FUTILITY_RULES, EstimateParams, FutilityView, _first_passage, conditional_power, gain_upper_bound, reachable_log_e
from harness.kernel.gate import gate_decision, pair_block
from harness.kernel.ladder import GatePools
from harness.kernel.plans import SAMPLING_PLANS, PlanRequest
from harness.kernel.registry import params_of
from harness.kernel.types import GateParams

N = 60


def _world(seed: int) -> tuple[np.ndarray, GatePools]:
    """A 60-question pool (40 % easy, 30 % hard, 30 % mid: discordance ~0.15) and GatePools fed by 4 non-gate runs."""
    rng = np.random.default_rng([seed, 0])
    kind = rng.choice(3, size=N, p=[0.4, 0.3, 0.3])
    p = np.where(kind == 0, rng.beta(19, 1, N), np.where(kind == 1, rng.beta(1, 19, N), rng.beta(2, 2, N)))
    qids = [f"q{i}" for i in range(N)]
    pools = GatePools.build({"t": qids})
    for epoch in range(4):
        seen = rng.random(N) < p
        pools.update_from_run(f"pre_e{epoch}_slowR", [(qids[i], 1000 * epoch + i, bool(seen[i])) for i in range(N)], gamma=0.3)
    return p, pools


def _shifted(p: np.ndarray, points: float) -> np.ndarray:
    """One log-odds shift giving the pool exactly `points` more accuracy (benchmarks/fdr.py; 0: the strong null)."""

    return fdr.shifted(p, points)


def _gate(params: GateParams, seed: int, points: float) -> tuple[str, int, str]:
    """(action, pairs, reason) of one gate through the registered plan and rule."""
    p, pools = _world(seed)
    q = _shifted(p, points)
    index = {f"q{i}": i for i in range(N)}
    planner = SAMPLING_PLANS.get(params.plan).planner(PlanRequest(pools=pools, task_types=["t"], params=params, seed=seed,
                                                                      first_sample_index=10_000_000, warm=True))
    rng = np.random.default_rng([seed, 1])
    pairs: list = []
    baseline: list = []
    while (block := planner.next_block(baseline)) is not None:
        rows = np.array([index[item.qid] for item in block])
        base = [bool(v) for v in rng.random(rows.size) < p[rows]]
        cand = [bool(v) for v in rng.random(rows.size) < q[rows]]
        baseline += base
        pairs += pair_block(block, base, cand, informing_samples=planner.informing_samples())
        verdict = gate_decision(pairs, params, final=planner.final)
        if verdict.action != "continue":
            return verdict.action, len(pairs), verdict.reason
    raise AssertionError("the plan ran out before a decision")


def test_the_default_gate_stops_for_futility() -> None:
    params = GateParams()
    assert (params.futility, params_of(EstimateParams, params).futility_gain, params_of(EstimateParams, params).futility_power, params_of(EstimateParams, params).futility_z) == ("estimate", 0.10, 0.05, 1.645)
    assert set(FUTILITY_RULES.names()) == {"none", "estimate", "soft_estimate"}  # bound / power removed (issue 29)


def _bound_only(params: GateParams) -> GateParams:
    """`estimate` reduced to its exact bound: no power stop (futility_power 0), no gain bound (min_n above the cap)."""
    return params.with_values(futility="estimate", futility_power=0.0, futility_min_n=params.max_pairs + 1)


def _fixed_gain(params: GateParams) -> GateParams:
    """`estimate` at the fixed futility_gain (the removed `power` rule): the gain bound never replaces it."""
    return params.with_values(futility="estimate", futility_min_n=params.max_pairs + 1)


def test_reachable_log_e_is_the_all_wins_path() -> None:
    rng = np.random.default_rng(3)
    bound = 1.7
    bets = accept_bets(bound)
    z = rng.choice([-1.3, 0.0, 0.0, 0.9, 1.7], size=57)
    wealth = np.sum(np.log1p(np.outer(z, bets)), axis=0)
    for remaining in (0, 1, 13):
        best = log_wealth_path(np.concatenate([z, np.full(remaining, bound)]), bets, 0.0, bound)
        assert reachable_log_e(wealth, bets, bound, remaining) == pytest.approx(float(best[-1]), abs=1e-9)
        # the all-wins path rises at every pair: no earlier pair of it is higher than its end
        assert float(np.max(best[z.size - 1:])) == pytest.approx(float(best[-1]), abs=1e-9)


def test_the_exact_bound_gives_the_same_decisions_with_no_more_pairs() -> None:
    """Exact property on 120 paired gates (null, +5, +10 points; the e-LOND first-gate level and exp(-3))."""
    saved = 0
    fired = 0
    for lam in (3.0, 6.7):
        none = GateParams(futility="none", lambda_accept=lam)
        bound = _bound_only(none)
        for points in (0.0, 5.0, 10.0):
            for seed in range(20):
                a_none, n_none, _ = _gate(none, seed, points)
                a_bound, n_bound, reason = _gate(bound, seed, points)
                assert a_bound == a_none and n_bound <= n_none, (lam, points, seed)
                saved += n_none - n_bound
                fired += reason.startswith("futility (bound)")
    assert fired > 0 and saved > 0  # the bound does stop some gates before the cap in these cells


def test_fixed_gain_futility_accepts_only_where_none_accepts_and_keeps_false_accepts_below_alpha() -> None:
    """Pathwise: accept with the fixed-gain power stop implies accept with `none` on the same outcomes (so the false-accept rate cannot
    rise); and on 200 strong-null gates at alpha = e^-3 both rates are <= alpha + 2 SE."""
    none = GateParams(futility="none")
    power = _fixed_gain(none)
    alpha = math.exp(-none.lambda_accept)
    fa_none = fa_power = 0
    pairs_none = pairs_power = 0
    for seed in range(200):
        a_none, n_none, _ = _gate(none, seed, 0.0)
        a_power, n_power, _ = _gate(power, seed, 0.0)
        assert a_power != "accept" or a_none == "accept", seed
        assert n_power <= n_none, seed
        fa_none += a_none == "accept"
        fa_power += a_power == "accept"
        pairs_none += n_none
        pairs_power += n_power
    tolerance = alpha + 2 * math.sqrt(alpha * (1 - alpha) / 200)
    assert fa_power <= fa_none and fa_none / 200 <= tolerance
    assert pairs_power < 0.9 * pairs_none  # null edits stop earlier (measured 0.83 of the pairs at this level, gain 0.10)
    for seed in range(25):  # and the subset property holds for real edits too
        for points in (5.0, 10.0):
            a_none, _, _ = _gate(none, 1000 + seed, points)
            a_power, _, _ = _gate(power, 1000 + seed, points)
            assert a_power != "accept" or a_none == "accept"


def test_first_passage_matches_a_seeded_random_walk() -> None:
    """The Brownian first-passage formula against 20,000 Gaussian random walks of 200 steps (3 SE + discretisation 0.02)."""
    rng = np.random.default_rng(11)
    for drift, gap in ((0.01, 3.0), (-0.005, 2.0), (0.03, 6.0)):
        steps = rng.normal(drift, 0.15, size=(20_000, 200))
        hit = float(np.mean(np.max(np.cumsum(steps, axis=1), axis=1) >= gap))
        formula = _first_passage(gap, drift, 0.15**2, 200)
        assert hit <= formula + 3 * math.sqrt(formula * (1 - formula) / 20_000) + 0.002
        assert formula - hit <= 0.02 + 3 * math.sqrt(formula * (1 - formula) / 20_000)  # a walk is checked at steps only


def test_conditional_power_reads_the_evidence() -> None:
    bets = accept_bets(2.0)
    start = FutilityView(bets, np.zeros(bets.size), [], 2.0, 400, 3.0)
    bad = FutilityView(bets, np.array([-3.0, -6.0, -12.0]), [-1.0] * 30 + [0.0] * 170, 2.0, 200, 3.0)
    assert conditional_power(bad, 0.05) < conditional_power(start, 0.05)
    assert conditional_power(start, 0.10) > conditional_power(start, 0.05)
    assert conditional_power(FutilityView(bets, np.array([3.1, 3.1, 3.1]), [1.0], 2.0, 10, 3.0), 0.05) == 1.0


def _only_rejects_and_saves_null_pairs(gate, futility: str, cheaper_than: GateParams, ratio: float) -> None:
    """`futility` accepts only where `none` accepts on the same draws (200 strong nulls, 25 seeds at +5 and +10 points),
    never spends more pairs than `none`, keeps false accepts <= alpha (2 SE), and on the nulls spends less than
    `ratio` times the pairs of the `cheaper_than` gate. `gate(params, seed, points)` -> (action, pairs, reason)."""
    none = GateParams(futility="none")
    rule = dataclasses.replace(none, futility=futility)
    reference = cheaper_than
    pairs_reference = pairs_rule = false_accepts = 0
    for seed in range(200):
        a_none, n_none, _ = gate(none, seed, 0.0)
        _, n_reference, _ = gate(reference, seed, 0.0)
        a_rule, n_rule, _ = gate(rule, seed, 0.0)
        assert a_rule != "accept" or a_none == "accept", seed
        assert n_rule <= n_none, seed
        false_accepts += a_rule == "accept"
        pairs_reference += n_reference
        pairs_rule += n_rule
    alpha = math.exp(-none.lambda_accept)
    assert false_accepts / 200 <= alpha + 2 * math.sqrt(alpha * (1 - alpha) / 200)
    assert pairs_rule < ratio * pairs_reference, (pairs_rule, pairs_reference)
    for seed in range(25):
        for points in (5.0, 10.0):
            a_none, _, _ = gate(none, 2000 + seed, points)
            a_rule, _, _ = gate(rule, 2000 + seed, points)
            assert a_rule != "accept" or a_none == "accept"


def test_estimate_futility_accepts_only_where_none_accepts_and_stops_null_edits_sooner_than_fixed_gain() -> None:
    """Pathwise subset property for `estimate` (null, +5, +10 points), and on 200 strong-null gates it spends fewer
    pairs than at the fixed +10 points (the removed `power`: why it went) with no more false accepts."""
    _only_rejects_and_saves_null_pairs(_gate, "estimate", cheaper_than=_fixed_gain(GateParams()), ratio=0.9)


def test_gain_upper_bound_is_the_one_sided_normal_bound_and_covers_at_its_level() -> None:
    z = [1.0, -1.0, 0.0, 0.0, 2.0]
    assert gain_upper_bound(z, 1.645) == pytest.approx(0.4 + 1.645 * float(np.std(z, ddof=1)) / math.sqrt(5))
    with pytest.raises(ValueError, match="at least 2"):
        gain_upper_bound([0.5], 1.645)
    # coverage: importance-weight-like differences (values in {-2,-1,0,1,2}, mean +0.05), 4000 samples of 100
    rng = np.random.default_rng(5)
    values = np.array([-2.0, -1.0, 0.0, 1.0, 2.0])
    probs = np.array([0.05, 0.15, 0.55, 0.15, 0.10])
    mean = float(values @ probs)
    covered = sum(gain_upper_bound(rng.choice(values, size=100, p=probs), 1.645) >= mean for _ in range(4000))
    assert abs(covered / 4000 - 0.95) <= 3 * math.sqrt(0.95 * 0.05 / 4000) + 0.01  # CLT error at n = 100: <= 1 point


def test_soft_estimate_accepts_only_where_none_accepts_and_stops_null_edits_sooner_on_soft_evidence() -> None:
    """`soft_estimate` sizes the gain bound from the soft scores: pathwise it accepts only where `none` accepts (null,
    +5, +10 points), on 200 strong-null gates with soft scores (k = 4; benchmarks/fdr.run_gate_verdict, the gate
    benchmarks/futility.py measures) it spends fewer pairs than `estimate` on the same draws, and without soft scores
    it is `estimate` exactly."""


    def soft_gate(params: GateParams, seed: int, points: float) -> tuple[str, int, str]:
        rng = np.random.default_rng([seed, 0])
        world = fdr.make_world(rng, params)
        verdict, n, _ = fdr.run_gate_verdict(np.random.default_rng([seed, 1]), world, fdr.shifted(world.p, points), params,
                                             seed=seed, soft_k=4.0)
        return verdict.action, n, verdict.reason

    _only_rejects_and_saves_null_pairs(soft_gate, "soft_estimate", cheaper_than=dataclasses.replace(GateParams(), futility="estimate"), ratio=0.85)
    estimate = GateParams(futility="estimate")
    soft = dataclasses.replace(estimate, futility="soft_estimate")
    for seed in range(20):  # no soft scores: the same gate as `estimate`
        got_est, got_soft = _gate(estimate, seed, 0.0), _gate(soft, seed, 0.0)
        assert got_est[:2] == got_soft[:2] and got_soft[2].replace("soft_estimate", "estimate") == got_est[2]
