import pytest

from harness.kernel.rules import rule_for
from harness.kernel.types import GateParams


def test_rule_selection_by_config_name():
    for name in ("sequential", "accept_all", "gepa", "mcnemar"):
        assert rule_for(GateParams(rule=name)).name == name
    with pytest.raises(ValueError, match="gate.rule"):
        rule_for(GateParams(rule="magic"))


def test_gepa_needs_strictly_more_wins():
    params = GateParams(rule="gepa")
    rule = rule_for(params)
    assert rule.decide(5, 4, 11, params, final=False).action == "accept"
    assert rule.decide(4, 4, 12, params, final=False).action == "reject"


def test_accept_all():
    params = GateParams(rule="accept_all")
    assert rule_for(params).decide(0, 9, 11, params, final=False).action == "accept"


def test_fixed_n_mcnemar_waits_for_n_then_decides_once():
    params = GateParams.build(rule="mcnemar", mcnemar_n=40, mcnemar_alpha=0.05, undecided="probation")
    rule = rule_for(params)
    assert rule.decide(15, 0, 5, params, final=False).action == "continue"  # only 20 pairs
    assert rule.decide(15, 0, 5, params, final=True).action == "probation"
    assert rule.decide(12, 2, 26, params, final=False).action == "accept"  # P(Bin(14,.5) >= 12) = .0065
    assert rule.decide(6, 4, 30, params, final=False).action == "reject"


def test_minibatch_is_gepa_at_lambda_zero_and_lambda_raises_the_bar():
    """gate=minibatch: accept iff wins > losses and (wins - losses) / sqrt(wins + losses) >= sqrt(2 lambda)."""
    gepa = rule_for(GateParams(rule="gepa"))
    for lam in (0.0, 0.25, 0.5, 1.0, 2.0):
        params = GateParams(rule="minibatch", lambda_accept=lam)
        rule = rule_for(params)
        assert (rule.questions, rule.single_block, rule.sequential) == ("step_minibatch", True, False)
        for wins in range(8):
            for losses in range(8):
                got = rule.decide(wins, losses, 3, params, final=False).action
                d, n = wins - losses, wins + losses
                assert got == ("accept" if d > 0 and d * d >= 2 * lam * n else "reject"), (lam, wins, losses)
                if lam == 0.0:
                    assert got == gepa.decide(wins, losses, 3, GateParams(rule="gepa"), final=False).action
    # the same counts across lambda: 2-1 passes at 0.1 (z 0.58 >= 0.45), not at 0.25 (>= 0.71); 3-0 up to lambda 1.5
    assert [rule_for(GateParams(rule="minibatch")).decide(2, 1, 0, GateParams(rule="minibatch", lambda_accept=lam), final=False).action
            for lam in (0.1, 0.25)] == ["accept", "reject"]
    assert [rule_for(GateParams(rule="minibatch")).decide(3, 0, 0, GateParams(rule="minibatch", lambda_accept=lam), final=False).action
            for lam in (1.5, 1.6)] == ["accept", "reject"]
