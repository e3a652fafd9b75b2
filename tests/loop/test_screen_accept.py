"""gate.screen_accept: a candidate whose screen shows wins - losses >= the key is installed without a gate."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import make_runner, tiny_cfg


def _gate_rows(state: Path) -> list[dict]:
    rows = []
    for rep in sorted(state.glob("e*/s*/gate/report.json")):
        rows += json.loads(rep.read_text())["skills"]
    return rows


def _run(root: Path, *overrides: str) -> list[dict]:
    runner, _, cache = make_runner(root, tiny_cfg(*overrides))
    runner.train()
    cache.close()
    return _gate_rows(root / "state")


def test_screen_accept_installs_without_gate_pairs(tmp_path):
    rows = _run(tmp_path, "gate.screen_accept=1")
    accepted = [r for r in rows if r.get("screen") == "accepted"]
    assert accepted, "no candidate of the tiny run was accepted at the screen"
    for r in accepted:
        assert r["action"] == "accept" and r["wins"] - r["losses"] >= 1
        assert r["rollouts"] == r["n_pairs"]  # the screen's candidate rollouts only: no gate pair was run
        assert "gate.screen_accept" in r["reason"]
    for r in rows:  # a candidate that showed a win on the step's questions never reached the gate
        if r.get("screen") == "passed":
            assert r["rollouts"] > 0


def test_screen_accept_is_off_by_default_and_under_elond(tmp_path):
    assert all(r.get("screen") != "accepted" for r in _run(tmp_path / "default"))
    assert all(r.get("screen") != "accepted" for r in _run(tmp_path / "elond", "gate=strict", "gate.screen_accept=1"))


def test_screen_accept_refuses_a_negative_value():
    with pytest.raises(Exception, match="screen_accept"):
        tiny_cfg("gate.screen_accept=-1")
