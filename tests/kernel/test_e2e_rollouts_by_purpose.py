"""benchmarks/e2e.py: each run's training rollouts split by purpose (step, screen, gate, slow R / R0 / R2, settlements)."""

from __future__ import annotations

import pytest

from benchmarks import e2e
from harness.h2.loop_bridge import PROBE_RUN_KIND
from harness.identity import gate_run_prefix, run_kind, screen_run_id
from harness.loop.gating import DEFAULT_FILE


def _tiny_run(rule: str) -> dict:
    job = {"seed": 1, "rule": rule, "epochs": 2, "overrides": list(e2e.QUICK_OVERRIDES), "tradeoff": False,
           "skip_epoch_holdout": True}
    return e2e.run_one({**job, "cfg": e2e.job_config(job)})


@pytest.mark.parametrize("rule", [e2e.OURS, "gepa"])
def test_one_tiny_run_splits_its_training_rollouts_by_purpose(rule):
    """The split sums to the run's training rollouts at every epoch end; screen + gate equal what the gate reports
    charged (`gate_rollouts`, read from another source); every purpose this run used is > 0. The run skips the
    per-epoch held-out for itself only: this process's slow update has it back afterwards (tests/loop runs later in
    the same pytest process and reads holdout_eval)."""
    import harness.loop.slow_update as su

    four_way_holdout = su._four_way_holdout
    run = _tiny_run(rule)
    assert su._four_way_holdout is four_way_holdout
    split = run["rollouts_by_purpose"]
    assert set(split) == set(e2e.PURPOSES)
    assert sum(split.values()) == run["curve"][-1]["rollouts"] > 0
    for point in run["curve"]:
        assert sum(point["by_purpose"].values()) == point["rollouts"]
    assert split["screen"] + split["gate"] == run["gate_rollouts"]
    for purpose in ("step", "slow_R", "slow_R0", "gate"):  # every run has step and slow rollouts; both rules gated here
        assert split[purpose] > 0, (purpose, split)
    assert (split["screen"] > 0) == (rule == e2e.OURS)  # GEPA's rule has no pre-gate screen
    if any(e["skill_file"] != DEFAULT_FILE for e in run["edits"]):  # an install opened a probation: settled by an anchor re-run
        assert split["settle"] > 0, split
    assert split["h2_probe"] == 0


def test_a_run_kind_without_a_purpose_is_an_error_not_a_dropped_count():
    assert e2e.rollouts_by_purpose({"step": 10, "gate_screen": 3, "gate": 4, "slow_anchor": 2, "holdout": 50}) == {
        **dict.fromkeys(e2e.PURPOSES, 0), "step": 10, "screen": 3, "gate": 4, "settle": 2}
    with pytest.raises(ValueError, match=r"_runs.kind \['surprise'\]"):
        e2e.rollouts_by_purpose({"step": 10, "surprise": 1})
    assert PROBE_RUN_KIND in e2e.PURPOSE_OF_KIND


def test_the_screen_has_its_own_run_kind():
    prefix = gate_run_prefix("run", 1, 2, "temporal_reasoning")
    assert run_kind(screen_run_id(prefix)) == "gate_screen"
    assert run_kind(f"{prefix}_cand") == run_kind(f"{prefix}_base") == "gate"


def test_the_split_table_shows_each_rule_and_our_certificate():
    split = {**dict.fromkeys(e2e.PURPOSES, 0.0), "step": 120.0, "screen": 72.0, "gate": 80.0}
    summary = {"rules": [e2e.OURS, "gepa"], e2e.OURS: {"rollouts_by_purpose": split, "certificate": {"mean_rollouts": 200.0}},
               "gepa": {"rollouts_by_purpose": {**split, "screen": 0.0}}}
    lines = e2e.purpose_lines(summary)
    assert f"| {e2e.OURS} | 120 | 72 | 80 | 0 | 0 | 0 | 0 | 272 | 200 |" in lines
    assert "| gepa | 120 | 0 | 80 | 0 | 0 | 0 | 0 | 200 | – |" in lines
    assert not any("Harness² probes" in line for line in lines)  # a purpose no rule used has no column
    assert e2e.purpose_lines({"rules": ["gepa"], "gepa": {"rollouts_by_purpose": None}}) == []  # an old JSON: no table
