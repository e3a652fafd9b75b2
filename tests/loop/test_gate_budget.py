"""gate.step_gates: a step gates at most K candidates (those whose screen is nearest the boundary); the screen decides the rest."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import make_runner, tiny_cfg
from test_gating import _ctx, _record, ws  # noqa: F401  (ws: the real-workspace fixture)

from harness import workspace as wsp
from harness.kernel.screen import ScreenResult, allot_gates, screen_decides
from harness.loop.checkpoint import TrainState
from harness.loop.gating import Candidate, gate_batch_skills


def _sr(wins: int, losses: int, ties: int = 2, margin: int = 0) -> ScreenResult:
    return ScreenResult(wins - losses >= margin, wins, losses, ties, 0, "test")


def test_allot_gates_spends_the_budget_nearest_the_boundary():
    screens = {"clear": _sr(4, 0), "tie": _sr(1, 1), "one_up": _sr(2, 1), "failed": _sr(0, 3), "none": None}
    assert allot_gates(screens, 2) == {"none", "tie"}  # no evidence first, then |2(w-l)-1| = 1 with fewer pairs
    assert allot_gates(screens, 3) == {"none", "tie", "one_up"}
    assert "failed" not in allot_gates(screens, 10) and "clear" in allot_gates(screens, 10)
    assert allot_gates(screens, -1) == set(screens)  # off: every candidate goes on as before
    assert allot_gates(screens, 0) == set()
    assert screen_decides(_sr(2, 1)) and not screen_decides(_sr(1, 1)) and not screen_decides(None)


def _three(ws):  # noqa: F811
    good = Candidate("alpha", ["alpha"], "alpha/SKILL.md", _record("alpha/SKILL.md", "alpha skill\n", "alpha skill\n- GOOD\n"))
    bad = Candidate("beta", ["beta"], "beta/SKILL.md", _record("beta/SKILL.md", "beta skill\n", "beta skill\n- BAD\n"))
    neutral = Candidate("gamma", ["gamma"], "default-strategy/SKILL.md",
                        _record("default-strategy/SKILL.md", "default\n", "default\n- neutral\n"))
    return [good, bad, neutral]


def _batch() -> dict[str, bool]:  # the step rollout: half right on every type's first 10 questions
    return {f"{t}-{i}": i % 2 == 0 for t in ("alpha", "beta", "gamma") for i in range(10)}


def test_step_gates_zero_lets_the_screen_decide_and_installs_no_harmful_edit(ws):  # noqa: F811
    calls: list = []
    gc, pools = _ctx(ws, calls, step_gates=0, fdr="none")
    gc.batch_outcomes = _batch()
    rows, _ = gate_batch_skills(gc, TrainState(), _three(ws), pools)
    by = {r["task_type"]: r for r in rows}
    assert not [c for c in calls if c.endswith(("_base", "_cand"))]  # no gate pair was run
    assert by["alpha"]["action"] == "accept" and by["alpha"]["screen"] == "decided"
    assert by["alpha"]["wins"] > by["alpha"]["losses"] and by["alpha"]["rollouts"] == by["alpha"]["n_pairs"] == 10
    assert by["beta"]["action"] == "reject"
    view = wsp.harness_view(ws)
    assert "GOOD" in view["skills/alpha/SKILL.md"] and "BAD" not in view["skills/beta/SKILL.md"]


def test_step_gates_one_gates_only_the_closest_candidate(ws):  # noqa: F811
    calls: list = []
    gc, pools = _ctx(ws, calls, step_gates=1, fdr="none")
    gc.batch_outcomes = _batch()
    rows, _ = gate_batch_skills(gc, TrainState(), _three(ws), pools)
    gated = [r for r in rows if r.get("screen") == "passed"]
    decided = [r for r in rows if r.get("screen") == "decided"]
    assert len(gated) == 1 and gated[0]["rollouts"] > 10  # gate pairs beyond the 10 screen rollouts
    margin = {r["task_type"]: abs(2 * (r["wins"] - r["losses"]) - 1) for r in decided}
    assert decided and all(m >= 1 for m in margin.values())
    assert {c.split("_gate_")[1].rsplit("_", 1)[0] for c in calls if c.endswith("_cand")} == {gated[0]["skill_file"].split("/")[0]}
    assert "BAD" not in wsp.harness_view(ws)["skills/beta/SKILL.md"]


def _gate_rows(state: Path) -> list[dict]:
    rows = []
    for rep in sorted(state.glob("e*/s*/gate/report.json")):
        rows += json.loads(rep.read_text())["skills"]
    return rows


def test_step_gates_takes_effect_in_a_training_run(tmp_path):
    runner, _, cache = make_runner(tmp_path, tiny_cfg("gate.step_gates=0"))
    runner.train()
    cache.close()
    rows = _gate_rows(tmp_path / "state")
    assert any(r.get("screen") == "decided" for r in rows)
    assert all(r.get("screen") != "passed" for r in rows)  # no candidate went on to a gate
    for r in rows:
        if r.get("screen") == "decided":
            assert r["rollouts"] == r["n_pairs"] and (r["action"] == "accept") == (r["wins"] > r["losses"])


def test_step_gates_refuses_a_value_below_minus_one():
    with pytest.raises(Exception, match="step_gates"):
        tiny_cfg("gate.step_gates=-2")




def test_a_screen_accept_takes_no_share_of_the_budget():
    screens = {"one_up": _sr(1, 0), "even": _sr(1, 1)}  # equally near the boundary, one_up with fewer pairs
    assert allot_gates(screens, 1) == {"one_up"}
    assert allot_gates(screens, 1, accept_at=1) == {"even"}  # one_up is installed by gate.screen_accept=1 anyway
    assert allot_gates(screens, 5, accept_at=1) == {"even"}
