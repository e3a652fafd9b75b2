"""train.reuse_identical: the slow update's R asks only the validation questions whose solver input differs from
eval_prev's version pair (R2: from R's); the others keep the compared run's answers (harness/loop/slow_update.py
`evaluate`, harness/loop/certify.py `changed_types`)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from harness import workspace as wsp
from harness.log import HarnessLog
from harness.loop.slow_update import EvalRun, SlowDeps, evaluate

TYPES = ("alpha", "beta", "gamma")
PER_TYPE = 3


class Solver:
    """A rollout function that answers each question right exactly when its qid ends in an even digit, and keeps
    the (qid, sample index) pairs it was asked."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, int]] = []

    def __call__(self, tree, items, run_id):
        async def answer():
            self.asked.extend((q.qid, idx) for q, idx in items)
            return [int(q.qid[-1]) % 2 == 0 for q, _ in items]
        return answer()


def _setup(tmp_path: Path, solver: Solver):
    from conftest import slow_setup

    return slow_setup(tmp_path, TYPES, PER_TYPE, rollout=solver, traces=lambda *a: "", probation_verdict=lambda *a: None,
                      soft_by_question=lambda run_id: {q: 0.75 for q, _ in solver.asked}, reuse_identical=True)


def _evaluate(tmp_path: Path, deps: SlowDeps, sv: str, pv: str, reference: EvalRun | None) -> EvalRun:
    """One evaluation "R" at sample index 7 over the whole pool, with a real run log."""
    log = HarnessLog(tmp_path / "runlog")
    try:
        return evaluate(deps, "R", "slow_r", sv, pv, deps.validation, 7, log, reference=reference)
    finally:
        log.close()


def _reference(deps: SlowDeps) -> EvalRun:
    """eval_prev at v0/v0: every answer wrong, soft 0.25 (the solver would answer half of them right)."""
    return EvalRun("prev", "v0", "v0", {q: False for q in deps.validation}, soft_q={q: 0.25 for q in deps.validation})


def test_only_the_changed_types_questions_are_asked_and_the_rest_keep_the_reference(tmp_path):
    solver = Solver()
    ws, deps, skills, _ = _setup(tmp_path, solver)
    changed = wsp.promote(ws, "skills", skills.with_files({"alpha/SKILL.md": "alpha edited"}), {"reason": "test"})
    run = _evaluate(tmp_path, deps, changed, "v0", _reference(deps))
    alpha = [f"alpha{i}" for i in range(PER_TYPE)]
    assert sorted(q for q, _ in solver.asked) == alpha and {idx for _, idx in solver.asked} == {7}
    assert run.asked == tuple(alpha) and sorted(run.measured) == alpha
    assert {q: run.outcomes[q] for q in alpha} == {"alpha0": True, "alpha1": False, "alpha2": True}
    assert all(run.outcomes[q] is False and run.soft_q[q] == 0.25 for q in deps.validation if q not in alpha)
    assert all(run.soft_q[q] == 0.75 for q in alpha)
    assert run.acc == 2 / 9  # over the whole pool: the copied answers count
    assert run.soft == (3 * 0.75 + 6 * 0.25) / 9


def test_a_system_prompt_change_asks_every_question(tmp_path):
    solver = Solver()
    ws, deps, _, prompts = _setup(tmp_path, solver)
    pv = wsp.promote(ws, "prompts", prompts.with_files({"system_prompt.md": "solve carefully"}), {"reason": "test"})
    run = _evaluate(tmp_path, deps, "v0", pv, _reference(deps))
    assert sorted(q for q, _ in solver.asked) == sorted(deps.validation)
    assert run.measured == run.outcomes


def test_without_a_reference_every_question_is_asked(tmp_path):
    solver = Solver()
    ws, deps, _, _ = _setup(tmp_path, solver)
    run = _evaluate(tmp_path, deps, "v0", "v0", None)
    assert sorted(q for q, _ in solver.asked) == sorted(deps.validation) and run.asked is None


def _slow_reports(tmp_path: Path, *overrides: str):
    from conftest import make_runner, tiny_cfg

    cfg = tiny_cfg("train.system_tool_update=false", "train.early_stop_patience=5", *overrides)
    runner, _, cache = make_runner(tmp_path, cfg)
    runner.train()
    cache.close()
    state = tmp_path / str(cfg.train.state_dir)
    return cfg, state, [json.loads((state / f"e{e}" / "slow" / "report.json").read_text())
                        for e in range(1, int(cfg.train.epochs) + 1)]


def _predictions(runlog: Path, run_id: str) -> int:
    with sqlite3.connect(runlog) as db:
        return int(db.execute("SELECT COUNT(*) FROM predictions WHERE run_id = ?", (run_id,)).fetchone()[0])


def test_a_tiny_run_asks_fewer_questions_and_its_run_log_holds_only_what_was_asked(tmp_path):
    """Through the stages (harness/loop/stages/slow.py): R's and R2's predictions are exactly what they asked, fewer
    than the pool in some epoch, and the state carries eval_prev's answers on the whole pool to the next epoch."""
    from harness.identity import r_run_id
    from harness.loop.checkpoint import load_checkpoint
    from harness.loop.state import CHECKPOINT, RUNLOG

    cfg, state, reports = _slow_reports(tmp_path)
    validation = sorted(json.loads((tmp_path / str(cfg.pools.path)).read_text())["validation"])
    asked = []
    for e, report in enumerate(reports, start=1):
        assert report["reuse_identical"] is True
        runlog = state / f"e{e}" / "slow" / RUNLOG
        assert _predictions(runlog, r_run_id(str(cfg.train.run_name), e)) == report["r_asked"]
        asked.append(report["r_asked"])
        if report["r2_run_id"]:
            assert _predictions(runlog, report["r2_run_id"]) == report["r2_asked"]
            asked.append(report["r2_asked"])
        ref = load_checkpoint(state / f"e{e}" / "slow" / CHECKPOINT).state.eval_prev_ref
        assert ref is not None and ref.run_id == report["eval_run_id"] and sorted(ref.outcomes) == validation
    assert all(a <= len(validation) for a in asked)
    assert min(asked) < len(validation)  # some type was not asked again (a wiring that never reuses asks them all)


def test_off_asks_every_question_every_time(tmp_path):
    cfg, _, reports = _slow_reports(tmp_path, "train.reuse_identical=false")
    n_val = int(cfg.pools.val_size)
    for report in reports:
        assert report["reuse_identical"] is False and report["r_asked"] == n_val
        assert report["r2_asked"] in (None, n_val)
