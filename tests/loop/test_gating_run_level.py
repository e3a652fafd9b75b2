"""Issue 13 in the per-skill gate: e-LOND levels over the run, the pre-gate screen, baseline reuse, skillopt / cap_evolve."""

from __future__ import annotations

import math

import pytest

from harness import workspace as wsp
from harness.kernel.fdr import FdrState, elond_level, level_lambda
from harness.loop.checkpoint import TrainState
from harness.loop.gating import Candidate, gate_batch_skills
from tests.loop import test_gating
from tests.loop.test_gating import _ctx, _record

ws = test_gating.ws  # the workspace fixture of test_gating.py


def _cand(tt, marker):
    return Candidate(tt, [tt], f"{tt}/SKILL.md", _record(f"{tt}/SKILL.md", f"{tt} skill\n", f"{tt} skill\n- {marker}\n"))


def test_elond_sets_each_gates_level_and_the_state_carries_the_sequence(ws):
    calls: list = []
    gc, pools = _ctx(ws, calls, fdr="elond", fdr_level=0.1, fdr_horizon=10, max_pairs=400)
    state = TrainState(gate_fdr=FdrState(tests=3, discoveries=1, spent=0.02))
    rows, _ = gate_batch_skills(gc, state, [_cand("alpha", "GOOD"), _cand("beta", "BAD")], pools)
    by = {r["task_type"]: r for r in rows}
    first = elond_level(FdrState(3, 1, 0.02), 0.1, 10)  # gamma_4 * alpha * (1 + 1)
    assert by["alpha"]["fdr_test"] == 4 and math.isclose(by["alpha"]["fdr_level"], first)
    assert by["alpha"]["action"] == "accept" and by["alpha"]["log_e"] >= level_lambda(first) > 3.0
    # alpha accepted -> one more discovery: beta's level is alpha * gamma_5 * 3
    assert by["beta"]["fdr_test"] == 5 and math.isclose(by["beta"]["fdr_level"], 0.1 * 6 / (math.pi**2 * 10) * 3)
    assert by["beta"]["action"] == "reject"
    assert (state.gate_fdr.tests, state.gate_fdr.discoveries) == (5, 2)
    assert math.isclose(state.gate_fdr.spent, 0.02 + 2 * 0.1 * 6 / (math.pi**2 * 10))
    assert math.isclose(by["beta"]["fdr_spent"], state.gate_fdr.spent)


def test_without_fdr_the_level_is_gate_lambda(ws):
    gc, pools = _ctx(ws, [], max_pairs=400, fdr="none")
    state = TrainState()
    rows, _ = gate_batch_skills(gc, state, [_cand("alpha", "GOOD")], pools)
    assert math.isclose(rows[0]["fdr_level"], math.exp(-3.0)) and rows[0]["fdr_test"] is None
    assert state.gate_fdr == FdrState()


def test_screen_rejects_a_useless_edit_on_the_steps_questions_without_a_gate(ws):
    calls: list = []
    gc, pools = _ctx(ws, calls, screen=True, fdr="elond")
    gc.batch_outcomes = {f"beta-{i}": True for i in range(6)} | {"alpha-0": False}
    state = TrainState()
    rows, _ = gate_batch_skills(gc, state, [_cand("beta", "BAD")], pools)
    row = rows[0]
    assert row["action"] == "reject" and row["screen"] == "failed" and row["rollouts"] == 6
    assert calls == ["r_e1_s1_gate_beta_screen"]  # no baseline, no gate
    assert state.gate_fdr == FdrState()  # a screened-out candidate spends no level
    assert "screen failed" in state.rejected_buffer["beta"][-1].reason
    assert wsp.read_manifest(ws).skills_version == "v0"


def test_screen_passes_a_real_edit_to_the_gate(ws):
    calls: list = []
    gc, pools = _ctx(ws, calls, screen=True, max_pairs=400)
    gc.batch_outcomes = {f"alpha-{i}": False for i in range(6)}
    rows, _ = gate_batch_skills(gc, TrainState(), [_cand("alpha", "GOOD")], pools)
    assert rows[0]["screen"] == "passed" and rows[0]["action"] == "accept"
    assert calls[0] == "r_e1_s1_gate_alpha_screen" and "r_e1_s1_gate_alpha_cand" in calls


@pytest.mark.parametrize("rule, n", [("skillopt", 15), ("cap_evolve", 30)])
def test_skillopt_and_cap_evolve_decide_once_on_a_fixed_n(ws, rule, n):
    gc, pools = _ctx(ws, [], rule=rule, selection_n=15, cap_evolve_n=30)
    rows, _ = gate_batch_skills(gc, TrainState(), [_cand("alpha", "GOOD"), _cand("beta", "BAD")], pools)
    by = {r["task_type"]: r for r in rows}
    assert by["alpha"]["action"] == "accept" and by["beta"]["action"] == "reject"
    assert by["alpha"]["n_pairs"] == n and by["beta"]["n_pairs"] == n
    assert by["alpha"]["fdr_level"] is None
