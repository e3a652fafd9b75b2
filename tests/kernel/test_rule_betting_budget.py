"""gate.rule=betting_budget: early accept at gate.lambda, the sign of the gain estimate at the budget, curtailment."""

from __future__ import annotations

import numpy as np
import pytest

from harness.kernel.betting import betting_decision
from harness.kernel.gate import gate_decision
from harness.kernel.rule_betting_budget import budget_accepts, settled
from harness.kernel.rules import rule_for
from harness.kernel.types import GateParams, PairResult


def _pairs(signs: list[int], weight: float = 1.0) -> list[PairResult]:
    out = []
    for i, s in enumerate(signs):
        base, cand = {1: (False, True), -1: (True, False), 0: (True, True)}[s]
        out.append(PairResult(f"q{i}", base, cand, sample_index=i, weight=weight, weight_bound=2.0))
    return out


def _params(**kw) -> GateParams:
    return GateParams.build(**{"rule": "betting_budget", "fdr": "none", "max_pairs": 40, "block_size": 20, **kw})


def test_registered_and_reads_the_importance_weights() -> None:
    rule = rule_for(_params())
    assert rule.name == "betting_budget" and rule.weighted and rule.sequential and rule.questions == "sampling"


def test_gate_lambda_decides_on_the_same_pairs() -> None:
    # 4 early wins: log E 1.07 at pair 5 - crosses lambda 1, never lambda 3; then 2 losses: the estimate is +0.1
    pairs = _pairs([1, 1, 1, 0, 1, -1, 0, 0, -1] + [0] * 11)
    low = gate_decision(pairs, _params(lambda_accept=1.0), final=False)
    high = gate_decision(pairs, _params(lambda_accept=3.0), final=False)
    assert low.action == "accept" and "log E reached" in low.reason
    assert high.action == "reject" and "settled after 20 pairs" in high.reason  # +0.1 can no longer reach z = sqrt(6)


def test_at_the_budget_lambda_is_the_evidence_the_estimate_needs() -> None:
    # 12 wins, 6 losses, 22 ties over 40 pairs: z = 1.32 - enough at lambda 0.5 (sqrt(1) = 1), not at 2 (2.0)
    pairs = _pairs([0, 0, 0, 1, 1, -1, 0] * 5 + [1, 1, -1, 0, 0])
    assert sum(p.sign > 0 for p in pairs) == 12 and sum(p.sign < 0 for p in pairs) == 6 and len(pairs) == 40
    accept, score = budget_accepts([float(p.sign) for p in pairs], 0.5, 2.0)
    assert accept and 1.0 <= score < 2.0
    low, high = gate_decision(pairs, _params(lambda_accept=0.5), final=True), gate_decision(pairs, _params(lambda_accept=2.0), final=True)
    assert (low.action, high.action) == ("accept", "reject")
    even = _pairs([1, -1, 0, 0] * 10)  # estimate 0 (log E never above 0.25): rejected even at lambda 0.5
    assert gate_decision(even, _params(lambda_accept=0.5), final=True).action == "reject"
    # the plain betting rule rejects the undecided gate that lambda 0.5 accepts here: the difference is step 3
    plain = GateParams(fdr="none", max_pairs=40, lambda_accept=5.0, futility="none")
    assert betting_decision(pairs, plain, final=True).action == "reject"


def test_pairs_are_spent_only_while_they_can_change_the_decision() -> None:
    losing = _pairs([-1, 0, -1, 0, -1, -1, 0, 0, -1, 0, -1, 0, 0, -1, 0, -1, 0, 0, -1, 0])  # 9 losses, no win
    no_reject_side = {"lambda_accept": 1.0, "lambda_dir": -50.0}  # only step 4 may stop this gate
    stop = gate_decision(losing, _params(max_pairs=40, **no_reject_side), final=False)
    assert stop.action == "reject" and "settled after 20 pairs" in stop.reason
    assert gate_decision(losing, _params(max_pairs=4000, **no_reject_side), final=False).action == "continue"
    mixed = _pairs([1, -1, 0, 0, 1] * 4)  # +0.2 with 8 wins / 4 losses: 20 more pairs could change it
    assert gate_decision(mixed, _params(lambda_accept=1.0), final=False).action == "continue"


def test_settled_changes_rarely_when_it_decides() -> None:
    # the promise of step 4 checked by simulation: among null continuations of the gates it settles at 20 of 40 pairs
    # (target 0), the sign of the final sum differs from the settled one in < 5 % of cases (z = 1.645)
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
