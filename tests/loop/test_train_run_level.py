"""A tiny training run with the run-level gate (issue 13): e-LOND levels persist across stages and resume."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import Interrupt, make_runner, tiny_cfg

from harness.kernel.fdr import FdrState, elond_level
from harness.kernel.schedule import full_schedule
from harness.loop.checkpoint import load_checkpoint

RUN_LEVEL = ("gate.fdr=elond", "gate.screen=true", "gate.screen_margin=0", "gate.undecided=reject",
             "gate.probation_settlement=eprocess")


def _gate_rows(state: Path) -> list[dict]:
    rows = []
    for rep in sorted(state.glob("e*/s*/gate/report.json")):
        rows += json.loads(rep.read_text())["skills"]
    return sorted(rows, key=lambda r: (r["epoch"], r["step"], r["task_type"]))


def _replay(rows: list[dict], alpha: float, horizon: int) -> FdrState:
    """Recompute the e-LOND sequence from the step reports alone; checks every level the loop handed out."""
    state = FdrState()
    for row in rows:
        if row["fdr_test"] is None:
            continue
        assert row["fdr_test"] == state.tests + 1
        assert row["fdr_level"] == pytest.approx(elond_level(state, alpha, horizon))
        state = FdrState(state.tests + 1, state.discoveries + (row["action"] == "accept"), row["fdr_spent"])
    return state


@pytest.fixture(scope="module")
def run_level(tmp_path_factory):
    root = tmp_path_factory.mktemp("run_level")
    cfg = tiny_cfg(*RUN_LEVEL)
    runner, counting, cache = make_runner(root, cfg)
    result = runner.train()
    cache.close()
    return {"root": root, "cfg": cfg, "result": result, "calls": counting.calls}


def test_levels_follow_elond_across_stages_and_land_in_the_checkpoint(run_level):
    state_dir = run_level["root"] / "state"
    rows = _gate_rows(state_dir)
    gated = [r for r in rows if r["fdr_test"] is not None]
    assert gated, "the tiny run gated nothing"
    replayed = _replay(rows, 0.1, int(run_level["cfg"].gate.fdr_horizon))
    last = sorted(state_dir.glob("e*/slow/checkpoint.json"))[-1]
    saved = load_checkpoint(last).state.gate_fdr
    assert (saved.tests, saved.discoveries) == (replayed.tests, replayed.discoveries)
    assert saved.spent == pytest.approx(replayed.spent)
    assert all(r["action"] != "probation" for r in rows)  # undecided -> reject
    for r in rows:  # a screened-out candidate spent no level
        if r.get("screen") == "failed":
            assert r["fdr_test"] is None and r["action"] == "reject"


def test_resume_continues_the_same_sequence(run_level, tmp_path):
    cfg = tiny_cfg(*RUN_LEVEL)
    stages = [i.name for i in full_schedule(2, 2)]
    runner, _, cache = make_runner(tmp_path, cfg)

    def stop(item):
        if item.name == stages[stages.index("gate@e1.s2")]:
            raise Interrupt("killed after a stage")

    with pytest.raises(Interrupt):
        runner.train(after_stage=stop)
    cache.close()
    runner, _, cache = make_runner(tmp_path, cfg)
    result = runner.train()
    cache.close()
    assert result["delivered"] == run_level["result"]["delivered"]
    assert [(r["fdr_test"], r["fdr_level"]) for r in _gate_rows(tmp_path / "state")] == \
        [(r["fdr_test"], r["fdr_level"]) for r in _gate_rows(run_level["root"] / "state")]
