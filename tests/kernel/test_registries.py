"""Strategies are registered objects: every registered entry resolves, and a new gate rule is one object
plus one registry line, run through the real gate path (kernel gate_decision)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from harness.config.registries import CHOICE_REGISTRIES, PROPOSER_NAMES
from harness.kernel.gate import gate_decision
from harness.kernel.ladder import GatePools
from harness.kernel.plans import SAMPLING_PLANS, FixedBlocks, PlanRequest
from harness.kernel.registry import UnknownStrategyError
from harness.kernel.rules import RULES, RuleDecision, rule_for
from harness.kernel.types import GateParams, PairResult
from harness.loop.proposers import PROPOSERS


def test_every_registered_strategy_resolves() -> None:
    for key, registry in CHOICE_REGISTRIES.items():
        if registry is RULES or registry is SAMPLING_PLANS:
            for name in registry.names():
                assert registry.get(name).name == name, f"{key}={name}"
    assert PROPOSERS.names() == PROPOSER_NAMES == CHOICE_REGISTRIES["evolve.method"].names()
    assert all(callable(PROPOSERS.get(name)) for name in PROPOSER_NAMES)


def test_unknown_name_lists_the_valid_ones() -> None:
    with pytest.raises(UnknownStrategyError, match="gate.rule: unknown 'magic'; expected one of accept_all"):
        rule_for(GateParams(rule="magic"))


@dataclass(frozen=True)
class MajorityOfTenRule:
    """Test-local rule: decides at 10 pairs, accept iff wins > losses + 2."""

    name: str = "majority10"
    questions: str = "sampling"
    single_block: bool = False
    sequential: bool = False
    weighted: bool = False

    def decide(self, wins, losses, ties, params, *, final, pairs=()):
        if wins + losses + ties < 10 and not final:
            return RuleDecision("continue", "fewer than 10 pairs")
        return RuleDecision("accept" if wins > losses + 2 else "reject", f"{wins} vs {losses}")


def test_a_new_rule_is_one_object_and_one_registry_line() -> None:
    RULES.register("majority10", MajorityOfTenRule())
    try:
        params = GateParams(rule="majority10", block_size=5, max_pairs=20)
        win = [PairResult(f"q{i}", False, True, sample_index=i) for i in range(5)]
        assert gate_decision(win, params, final=False).action == "continue"
        assert gate_decision(win * 2, params, final=False).action == "accept"
        lose = [PairResult(f"q{i}", True, False, sample_index=i) for i in range(10)]
        assert gate_decision(lose, params, final=False).action == "reject"
    finally:
        RULES.unregister("majority10")
    assert "majority10" not in RULES


@pytest.mark.parametrize("plan", SAMPLING_PLANS.names())
def test_every_sampling_plan_gives_fresh_samples_within_budget(plan: str) -> None:
    pools = GatePools.build({"t": [f"q{i}" for i in range(30)]})
    params = GateParams(plan=plan, block_size=10, max_pairs=60)
    request = PlanRequest(pools=pools, task_types=["t"], params=params, seed=3, first_sample_index=1000,
                          exclude=frozenset({"q0"}))
    planner = SAMPLING_PLANS.get(plan).planner(request)
    seen: list[int] = []
    outcomes: list[bool] = []
    while True:
        block = planner.next_block(outcomes)
        if block is None:
            break
        assert 0 < len(block) <= params.block_size
        seen.extend(item.sample_index for item in block)
        outcomes.extend(True for _ in block)
        if planner.final:
            break
    assert 0 < len(seen) <= params.max_pairs
    assert len(set(seen)) == len(seen)


def test_fixed_blocks_refuses_reused_samples_and_empty_plans() -> None:
    from harness.kernel.types import BlockItem

    with pytest.raises(ValueError, match="reuses a sample index"):
        FixedBlocks([[BlockItem("a", 1), BlockItem("b", 1)]])
    with pytest.raises(ValueError, match="empty"):
        FixedBlocks([])


def test_every_strategy_owns_a_params_type_whose_defaults_pass_its_check() -> None:
    """Issue 29: a strategy's settings are its own frozen params dataclass (fields named as the gate keys) with check();
    the defaults GateParams carries pass every check, and a broken value is reported under its own key."""
    import dataclasses

    from harness.kernel.registry import params_of, strategy_problems

    owners = {}
    for key in ("gate.rule", "gate.plan", "gate.futility"):
        registry = CHOICE_REGISTRIES[key]
        for name in registry.names():
            params_type = getattr(registry.get(name), "params_type", None)
            if params_type is not None:
                assert dataclasses.is_dataclass(params_type) and params_type.__dataclass_params__.frozen, name
                assert params_of(params_type, GateParams()).check() == [], name
                owners.update({f.name: name for f in dataclasses.fields(params_type)})
        assert strategy_problems(registry, GateParams()) == []
    assert {"bet_low", "mcnemar_n", "selection_n", "cap_evolve_n", "importance_floor", "futility_z"} <= set(owners)
    broken = GateParams.build(bet_low=0.7, bet_high=0.6)
    assert [(f, v) for f, v, _ in strategy_problems(CHOICE_REGISTRIES["gate.rule"], broken)] == [("bet_high", 0.6)]
