"""Small loop functions on their own: the INFRA guard, ladder sources, resume planning."""

from __future__ import annotations

import pytest

from harness.kernel.schedule import StageItem, full_schedule
from harness.kernel.types import GateParams
from harness.loop.slow_update import ladder_sources
from harness.loop.state import StatePaths, mark_done, resume_plan
from harness.loop.validate import InfraFailureError, guard_infra_failures


def test_guard_infra_failures_judges_small_batches_too():
    p = GateParams(infra_max_ratio=0.2, infra_min_denominator=10)
    guard_infra_failures(1, 9, p, "x")  # fewer than 10 count as 10: a lone failure in a small batch does not trip
    guard_infra_failures(2, 5, p, "x")  # 2/10 = 0.2, not above
    guard_infra_failures(2, 10, p, "x")
    with pytest.raises(InfraFailureError, match="only 4 of 9 rollouts were scored"):  # 5/10 > 0.2: the old hole
        guard_infra_failures(5, 9, p, "x")
    with pytest.raises(InfraFailureError, match="only 0 of 2 rollouts were scored"):  # nothing scored: always
        guard_infra_failures(2, 2, p, "x")
    with pytest.raises(InfraFailureError, match="step rollout r: only 7 of 10"):
        guard_infra_failures(3, 10, p, "step rollout r")


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
