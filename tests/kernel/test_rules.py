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
