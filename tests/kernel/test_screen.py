"""Screen and futility (harness.kernel.screen) and the two comparison rules (skillopt, cap_evolve)."""

from __future__ import annotations

import math

import pytest

from harness.kernel.rule_cap_evolve import cap_evolve_decide, paired_gain_and_se
from harness.kernel.rule_skillopt import selection_split, skillopt_decide
from harness.kernel.screen import screen_verdict


def test_screen_is_gepas_rule_and_infra_cannot_buy_a_pass():
    r = screen_verdict([False, False, True, True], [True, False, True, False])
    assert (r.wins, r.losses, r.ties, r.passed) == (1, 1, 2, False)
    r = screen_verdict([False, False, True], [True, True, True])
    assert r.passed and r.wins == 2
    # the candidate's infra failure on a question the baseline got right is a loss
    r = screen_verdict([False, True], [True, None])
    assert (r.wins, r.losses, r.candidate_infra, r.passed) == (1, 1, 1, False)
    # a baseline failure carries no evidence
    r = screen_verdict([None, False], [False, True])
    assert (r.n_pairs, r.passed) == (1, True)
    assert not screen_verdict([], []).passed
    with pytest.raises(ValueError, match="screen_margin"):
        screen_verdict([True], [True], margin=-1)
    assert screen_verdict([True, False], [False, True], margin=0).passed  # margin 0: not worse passes
    with pytest.raises(ValueError, match="2 baseline outcomes but 1"):
        screen_verdict([True, True], [True])


def test_skillopt_split_is_fixed_and_decision_is_strict():
    pool = [f"q{i}" for i in range(30)]
    a = selection_split(pool, 10, seed=3)
    assert a == selection_split(list(reversed(pool)), 10, seed=3) and len(a) == 10
    assert a != selection_split(pool, 10, seed=4)
    assert skillopt_decide(3, 3, 4, 10, final=False)[0] == "reject"
    assert skillopt_decide(4, 3, 3, 10, final=False)[0] == "accept"
    assert skillopt_decide(4, 0, 1, 10, final=False)[0] == "continue"
    with pytest.raises(ValueError, match="selection_n"):
        selection_split(pool, 0, seed=1)


def test_cap_evolve_one_standard_error():
    mean, se = paired_gain_and_se(6, 2, 12)  # Y: six +1, two -1, twelve 0
    ys = [1] * 6 + [-1] * 2 + [0] * 12
    m = sum(ys) / 20
    sd = math.sqrt(sum((y - m) ** 2 for y in ys) / 19)
    assert mean == pytest.approx(m) and se == pytest.approx(sd / math.sqrt(20))
    assert cap_evolve_decide(6, 2, 12, 20, final=False)[0] == ("accept" if m > sd / math.sqrt(20) else "reject")
    assert cap_evolve_decide(3, 2, 15, 20, final=False)[0] == "reject"
    assert cap_evolve_decide(3, 2, 5, 20, final=False)[0] == "continue"
    assert paired_gain_and_se(0, 0, 0) == (0.0, math.inf)
