"""The loop's module-level helpers, each on its own."""

from __future__ import annotations

import pytest

from harness.kernel.schedule import StageItem, full_schedule
from harness.kernel.types import Edit, EditApplication, EvolutionRecord, GateParams, Probation, RejectedEdit
from harness.loop.helpers import (
    _apply_batch_correctness,
    _decrement_cooldowns,
    _guard_infra_failures,
    _merge_probation,
    _rejected_summary,
    _should_early_stop,
)
from harness.loop.slow_update import ladder_sources
from harness.loop.state import StatePaths, mark_done, resume_plan
from harness.loop.validate import InfraFailureError


def test_apply_batch_correctness_keeps_old_value_on_infra():
    out = _apply_batch_correctness({"a": True, "b": False}, {"a": None, "b": True, "c": False})
    assert out == {"a": True, "b": True, "c": False}


def test_should_early_stop():
    assert not _should_early_stop(1, 2)
    assert _should_early_stop(2, 2)
    assert not _should_early_stop(5, 0)  # patience <= 0 disables


def test_guard_infra_failures_needs_denominator():
    p = GateParams(infra_max_ratio=0.2, infra_min_denominator=10)
    _guard_infra_failures(5, 9, p, "x")  # too few to judge
    _guard_infra_failures(2, 10, p, "x")
    with pytest.raises(InfraFailureError, match="3 of 10"):
        _guard_infra_failures(3, 10, p, "step rollout r")


def test_cooldown_decrement_spares_fresh_rests():
    assert _decrement_cooldowns({"a": 1, "b": 2, "c": 1}, just_set=["c"]) == {"b": 1, "c": 1}


def test_rejected_summary_lists_only_applied_edits():
    e1, e2 = Edit("add", "- rule one"), Edit("replace", "- new", old="- old")
    rec = EvolutionRecord("t", "t/SKILL.md", "x", "y", edits=[e1, e2],
                          apply_report=[EditApplication(e1, "applied"), EditApplication(e2, "not_found")])
    text = _rejected_summary(rec)
    assert "rule one" in text and "new" not in text
    none = EvolutionRecord("t", "t/SKILL.md", "x", "x", edits=[e2], apply_report=[EditApplication(e2, "not_found")])
    assert "no edit" in _rejected_summary(none)  # the defensive text


def test_merge_probation_keeps_oldest_anchor():
    a = Probation("t", "t/SKILL.md", "v1", 1, 1, {"q1": True}, [RejectedEdit("t", "t/SKILL.md", "e1", 1, 1)], "v2", "accepted")
    b = Probation("t", "t/SKILL.md", "v2", 1, 3, {"q1": False, "q2": True}, [RejectedEdit("t", "t/SKILL.md", "e2", 1, 3)], "v3", "probation")
    m = _merge_probation(a, b)
    assert m.anchor_skills_version == "v1" and m.accepted_version == "v3" and m.kind == "probation"
    assert m.correctness_snapshot == {"q1": True, "q2": True} and len(m.pending_edits) == 2


def test_ladder_sources_exactly_three():
    runs = ["r_e2_s1", "r_e2_s2", "r_e2_s1_gate_t_cand", "r_e1_s1", "r_e2_slowR", "r_e2_shadow", "r_holdout_best", "r_e2_s10"]
    assert ladder_sources(runs, "r", 2, "r_e2_slowR", None) == ["r_e2_s1", "r_e2_s10", "r_e2_s2", "r_e2_slowR"]
    assert ladder_sources(runs, "r", 2, "r_e2_slowR", "r_e2_slowR2")[-1] == "r_e2_slowR2"


def test_resume_plan_from_first_unfinished(tmp_path):
    paths = StatePaths(tmp_path)
    sched = full_schedule(1, 2)
    assert resume_plan(paths, sched) == sched
    paths.questions.parent.mkdir(parents=True)
    paths.questions.write_text("x")
    paths.pools.write_text("{}")
    mark_done(paths.init)
    paths.batches(1).parent.mkdir(parents=True, exist_ok=True)
    paths.batches(1).write_text("{}")
    mark_done(paths.rollout(1, 1))
    mark_done(paths.gate(1, 1))  # done, but after an unfinished stage: re-run
    todo = resume_plan(paths, sched)
    assert todo[0] == StageItem("evolve", 1, 1) and StageItem("gate", 1, 1) in todo
    assert [i.name for i in sched][:3] == ["prepare", "pools", "batches@e1"]
