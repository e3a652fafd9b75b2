"""Probation settlement as an e-process on fresh anchor-vs-installed pairs (kernel.probation.probation_settlement)."""

from __future__ import annotations

import numpy as np

from harness.kernel.probation import probation_settlement, probation_verdict
from harness.kernel.types import GateParams, Probation

P = GateParams()


def _p(kind, snapshot=None):
    return Probation("t", "t/SKILL.md", "v0", 1, 1, correctness_snapshot=snapshot or {}, kind=kind)


def test_kinds_and_conservative_missing_outcomes():
    qids = [f"q{i}" for i in range(40)]
    anchor = {q: False for q in qids}
    better = {q: True for q in qids}  # 40 wins: certified
    assert probation_settlement(_p("probation"), anchor, better, P).action == "keep"
    assert probation_settlement(_p("accepted"), better, anchor, P).action == "rollback"  # 40 losses: harm certified
    few = {q: (i < 3) for i, q in enumerate(qids)}  # 3 wins, no losses: not certified
    assert probation_settlement(_p("probation"), anchor, few, P).action == "rollback"
    assert probation_settlement(_p("accepted"), anchor, few, P).action == "keep"
    # an infra failure of the installed version counts against it
    v = probation_settlement(_p("probation"), {"a": True}, {"a": None}, P)
    assert (v.losses, v.action) == (1, "rollback")
    assert probation_settlement(_p("accepted"), {}, {"a": True}, P).action == "keep"
    assert probation_settlement(_p("probation"), {}, {"a": True}, P).action == "rollback"


def test_a_null_edit_on_probation_is_kept_at_most_alpha_the_old_rule_keeps_most():
    rng = np.random.default_rng(3)
    n, sims = 45, 1500
    keep_new = keep_old = 0
    for _ in range(sims):
        p = rng.beta(2, 2, size=n)
        qids = [f"q{i}" for i in range(n)]
        snapshot = {q: bool(rng.random() < p[i]) for i, q in enumerate(qids)}
        anchor = {q: bool(rng.random() < p[i]) for i, q in enumerate(qids)}
        rerun = {q: bool(rng.random() < p[i]) for i, q in enumerate(qids)}  # the strong null: nothing changed
        keep_new += probation_settlement(_p("probation", snapshot), anchor, rerun, P).action == "keep"
        keep_old += probation_verdict(_p("probation", snapshot), rerun).action == "keep"
    alpha = float(np.exp(-P.lambda_accept))
    se = (alpha * (1 - alpha) / sims) ** 0.5
    assert keep_new / sims <= alpha + 2 * se
    assert keep_old / sims > 0.4  # the negative control: losses > wins keeps about half of null edits
