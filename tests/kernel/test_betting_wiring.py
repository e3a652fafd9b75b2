"""The betting rule and the importance plan as registered strategies, run through the real gate path
(SAMPLING_PLANS -> planner -> pair_block -> gate_decision), plus the run-level FDR registry and the
rule/plan combinations that config validation refuses."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from harness.kernel.betting import accept_bets, betting_look, log_wealth_path
from harness.kernel.fdr import FDR_PROCEDURES, FdrState, elond_level, level_lambda
from harness.kernel.gate import LeakError, gate_decision, pair_block
from harness.kernel.ladder import GatePools
from harness.kernel.plans import SAMPLING_PLANS, PlanRequest
from harness.kernel.registry import params_of
from harness.kernel.rules import RULES, BettingParams, SequentialParams
from harness.kernel.stats import log_e_accept_path
from harness.kernel.types import GateParams, PairResult


def _pools(n: int = 40) -> GatePools:
    pools = GatePools.build({"t": [f"q{i}" for i in range(n)]})
    rng = random.Random(0)
    # two non-gate runs give every question a pre-gate p_hat (the importance plan's prior)
    for epoch in range(2):
        pools.update_from_run(f"r_e{epoch}_slowR", [(f"q{i}", 100 * epoch, rng.random() < 0.6) for i in range(n)], gamma=0.3)
    return pools


def _run_gate(params: GateParams, p_base: float, p_cand: float, seed: int):
    """One gate through the registered plan and rule, outcomes drawn per slot; returns (verdict, pairs)."""
    pools = _pools()
    request = PlanRequest(pools=pools, task_types=["t"], params=params, seed=seed, first_sample_index=10_000)
    planner = SAMPLING_PLANS.get(params.plan).planner(request)
    rng = random.Random(seed)
    pairs: list[PairResult] = []
    outcomes: list = []
    while True:
        block = planner.next_block(outcomes)
        base = [rng.random() < p_base for _ in block]
        cand = [rng.random() < p_cand for _ in block]
        outcomes.extend(base)
        pairs.extend(pair_block(block, base, cand, informing_samples=planner.informing_samples()))
        verdict = gate_decision(pairs, params, final=planner.final)
        if verdict.action != "continue":
            return verdict, pairs


def test_betting_on_the_importance_plan_is_registered_and_decides() -> None:
    assert RULES.get("betting").weighted and RULES.get("betting").sequential
    plan = SAMPLING_PLANS.get("importance")
    assert plan.population_valid and plan.weighted
    assert SAMPLING_PLANS.get("random").population_valid and not SAMPLING_PLANS.get("static").population_valid
    params = GateParams()  # the product default: betting on the importance plan
    assert (params.rule, params.plan) == ("betting", "importance")
    accepts = sum(_run_gate(params, 0.4, 0.8, seed)[0].action == "accept" for seed in range(10))
    rejects = sum(_run_gate(params, 0.8, 0.4, seed)[0].action == "reject" for seed in range(10))
    # a +40-point edit is accepted and a -40-point one rejected in every one of 10 seeded gates (no tolerance needed:
    # the e-processes cross within a few blocks; P(miss) per gate is far below 1e-3 at these effects)
    assert accepts == 10 and rejects == 10


def test_recorded_log_e_of_an_accept_is_the_value_that_triggered_it() -> None:
    params = GateParams(block_size=20)
    # 14 wins then 6 losses in one block: the e-process crosses lambda at pair 11 and ends the block below it
    signs = [1] * 14 + [-1] * 6
    pairs = [PairResult(f"q{i}", s < 0, s > 0, sample_index=i) for i, s in enumerate(signs)]
    verdict = gate_decision(pairs, params, final=False)
    z = np.array(signs, dtype=float)
    path = log_wealth_path(z, accept_bets(1.0, params_of(BettingParams, params).bet_low, params_of(BettingParams, params).bet_high, params_of(BettingParams, params).bet_points), 0.0, 1.0)
    crossing = int(np.flatnonzero(path >= params.lambda_accept)[0])
    assert verdict.action == "accept" and path[-1] < params.lambda_accept
    assert verdict.log_e == float(path[crossing]) >= params.lambda_accept
    # and on the registered plan + rule: the recorded value is the first crossing, never the last value
    for seed in range(10):
        verdict, pairs = _run_gate(params, 0.3, 0.9, seed)
        look = betting_look(pairs, params)
        assert verdict.action == "accept" and verdict.log_e == look.log_e_trigger >= params.lambda_accept


def test_sequential_rule_records_the_first_crossing_inside_the_block() -> None:
    params = GateParams.build(rule="sequential", plan="static", block_size=20, accept_within_block=True)
    signs = [1] * 12 + [1, 1, 1, 1, 1, 1, 1, 1]  # crosses lambda = 3 well before the block end
    pairs = [PairResult(f"q{i}", s < 0, s > 0, sample_index=i) for i, s in enumerate(signs)]
    verdict = gate_decision(pairs, params, final=False)
    path = log_e_accept_path(signs, params_of(SequentialParams, params))
    first = float(path[np.flatnonzero(path >= params.lambda_accept)[0]])
    assert verdict.action == "accept"
    assert verdict.log_e == first < float(path[-1])


def test_betting_rule_refuses_counts_without_pairs() -> None:
    with pytest.raises(ValueError, match="needs the pairs"):
        RULES.get("betting").decide(5, 0, 0, GateParams(), final=False)


@pytest.mark.parametrize("plan", SAMPLING_PLANS.names())
def test_every_plan_skips_the_samples_that_informed_the_prior(plan: str) -> None:
    """Leak guard by construction: no plan ever issues a sample index that fed p_hat, and pair_block refuses one."""
    pools = GatePools.build({"t": [f"q{i}" for i in range(10)]})
    pools.update_from_run("r_e0_slowR", [(f"q{i}", 10_000 + i, True) for i in range(10)], gamma=0.3)
    informing = pools.informing_samples("t")
    assert any(informing.values())
    params = GateParams(plan=plan, block_size=10, max_pairs=40)
    request = PlanRequest(pools=pools, task_types=["t"], params=params, seed=1, first_sample_index=10_000)
    planner = SAMPLING_PLANS.get(plan).planner(request)
    issued = []
    while (block := planner.next_block([True] * len(issued))) is not None:
        issued.extend(block)
        if planner.final:
            break
    assert all(item.sample_index not in informing.get(item.qid, ()) for item in issued)
    leaked = type(issued[0])(issued[0].qid, next(iter(informing[issued[0].qid])))
    with pytest.raises(LeakError):
        pair_block([leaked], [True], [True], informing_samples=informing)


def test_fdr_procedures_registry() -> None:
    params = GateParams.build(fdr_level=0.1, fdr_horizon=50, lambda_accept=3.0)
    state = FdrState(tests=3, discoveries=1, spent=0.01)
    elond = FDR_PROCEDURES.get("elond").level(state, params)
    assert math.isclose(elond.lambda_accept, level_lambda(elond_level(state, 0.1, 50)))
    after = FDR_PROCEDURES.get("elond").record(state, params, discovered=True)
    assert (after.tests, after.discoveries) == (4, 2) and after.spent > state.spent
    none = FDR_PROCEDURES.get("none")
    assert none.level(state, params).lambda_accept == 3.0
    assert none.record(state, params, discovered=True) == state and none.report(state) == {}
    assert FDR_PROCEDURES.names() == ("elond", "none")
