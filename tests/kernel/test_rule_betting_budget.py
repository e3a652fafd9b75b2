"""gate.rule=betting_budget: early accept at gate.lambda, the sign of the gain estimate at the budget, curtailment."""

from __future__ import annotations

import numpy as np
import pytest

from harness.kernel.betting import betting_decision
from harness.kernel.gate import gate_decision
from harness.kernel.rule_betting_budget import settled
from harness.kernel.rules import rule_for
from harness.kernel.types import GateParams, PairResult


def _pairs(signs: list[int], weight: float = 1.0) -> list[PairResult]:
    out = []
    for i, s in enumerate(signs):
        base, cand = {1: (False, True), -1: (True, False), 0: (True, True)}[s]
        out.append(PairResult(f"q{i}", base, cand, sample_index=i, weight=weight, weight_bound=2.0))
    return out


def _params(**kw) -> GateParams:
    return GateParams(**{"rule": "betting_budget", "fdr": "none", "max_pairs": 40, "block_size": 20, **kw})


def test_registered_and_reads_the_importance_weights() -> None:
    rule = rule_for(_params())
    assert rule.name == "betting_budget" and rule.weighted and rule.sequential and rule.questions == "sampling"


def test_gate_lambda_decides_on_the_same_pairs() -> None:
    # 4 early wins: log E 1.07 at pair 5 - crosses lambda 1, never lambda 3; then 2 losses: the estimate (+0.1) settles nothing
    pairs = _pairs([1, 1, 1, 0, 1, -1, 0, 0, -1] + [0] * 11)
    low = gate_decision(pairs, _params(lambda_accept=1.0), final=False)
    high = gate_decision(pairs, _params(lambda_accept=3.0), final=False)
    assert low.action == "accept" and "log E reached" in low.reason
    assert high.action == "continue"


def test_at_the_budget_the_sign_of_the_estimate_decides() -> None:
    params = _params(lambda_accept=5.0)
    up = _pairs([1, -1, 0, 0] * 9 + [1, 0, 0, 0])  # 10 wins, 9 losses over 40 pairs: estimate +0.025
    down = _pairs([1, -1, 0, 0] * 10)  # 10 wins, 10 losses: estimate 0 -> reject
    assert gate_decision(up, params, final=True).action == "accept"
    assert gate_decision(down, params, final=True).action == "reject"
    assert "end of the budget" in gate_decision(down, params, final=True).reason
    # the plain betting rule rejects the same undecided gate: the difference is step 3 only
    assert betting_decision(up, GateParams(fdr="none", max_pairs=40, lambda_accept=5.0, futility="none"), final=True).action == "reject"


def test_pairs_are_spent_only_while_they_can_change_the_decision() -> None:
    params = _params(lambda_accept=8.0, max_pairs=400)  # an accept by crossing is out of reach here
    clear = _pairs([1, 1, 1, 0, 1, 0, 1, 1, 0, 1, 1, 0, 1, 0, 1, 1, 0, 1, 0, 1])  # 13 wins, 0 losses
    assert gate_decision(clear, _params(lambda_accept=8.0, max_pairs=40), final=False).action == "accept"
    assert "settled after 20 pairs" in gate_decision(clear, _params(lambda_accept=8.0, max_pairs=40), final=False).reason
    assert gate_decision(clear, params, final=False).action == "continue"  # 380 pairs left could still flip it
    mixed = _pairs([1, -1, 0, 0, 1] * 4)  # +0.2 with 8 wins / 4 losses: 20 more pairs could flip it
    assert gate_decision(mixed, _params(lambda_accept=8.0), final=False).action == "continue"


def test_settled_flips_rarely_when_it_decides() -> None:
    # the promise of step 4 checked by simulation: among null continuations of the gates it settles at 20 of 40 pairs,
    # the sign of the final sum differs from the settled one in < 5 % of cases (z = 1.645)
    rng = np.random.default_rng(7)
    flips = settled_n = 0
    for _ in range(4000):
        first = rng.choice([-1.0, 0.0, 1.0], p=[0.15, 0.6, 0.25], size=20)
        if not settled(first, 20, 1.645, 1.0):
            continue
        settled_n += 1
        rest = rng.choice(first, size=20)  # the same spread, then centred: mean 0 from here on
        rest = rest - rest.mean()
        flips += np.sign(first.sum()) != np.sign(first.sum() + rest.sum())
    assert settled_n > 200 and flips / settled_n < 0.05


def test_all_ties_are_not_taken_as_certain() -> None:
    assert not settled([0.0] * 20, 20, 1.645, 2.0)
    assert settled([0.0] * 20, 0, 1.645, 2.0)  # nothing left: the budget decides


def test_strict_mode_is_the_betting_rule() -> None:
    pairs = _pairs([1, -1, 0, 0] * 9 + [1, 0, 0, 0])
    for final in (False, True):
        ours = gate_decision(pairs, _params(fdr="elond", lambda_accept=5.0, futility="none"), final=final)
        plain = gate_decision(pairs, GateParams(rule="betting", fdr="elond", max_pairs=40, lambda_accept=5.0, futility="none"),
                              final=final)
        assert (ours.action, ours.reason, ours.log_e) == (plain.action, plain.reason, plain.log_e)
    assert ours.action == "reject"


def test_needs_the_pairs() -> None:
    with pytest.raises(ValueError, match="betting_budget rule: needs the pairs"):
        rule_for(_params()).decide(3, 1, 16, _params(), final=False)
