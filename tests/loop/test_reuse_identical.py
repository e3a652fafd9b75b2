"""train.reuse_identical: the slow update's R asks only the validation questions whose solver input differs from
eval_prev's version pair (R2: from R's); the others keep the compared run's answers (harness/loop/slow_update.py
`evaluate`: an answer is copied only where the input key it was produced with, harness/loop/certify.py `input_keys`,
is the one the evaluated pair gives its type)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from harness import workspace as wsp
from harness.contracts.solver import render_system_message
from harness.kernel.ladder import GatePools
from harness.kernel.types import Probation, ProbationVerdict
from harness.log import HarnessLog
from harness.loop.certify import input_keys
from harness.loop.slow_update import EvalRun, SlowDeps, evaluate, slow_update_cycle
from harness.loop.train_state import EvalRef, TrainState
from harness.store import read_version_tree

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


def _keys(deps: SlowDeps, sv: str = "v0", pv: str = "v0") -> dict[str, str]:
    """qid -> the input key (sv, pv) gives its task type."""
    keys = input_keys(wsp.harness_view(deps.workspace_dir, sv, pv), TYPES)
    return {q: keys[deps.questions[q].task_type] for q in deps.validation}


def _reference(deps: SlowDeps) -> EvalRun:
    """eval_prev at v0/v0: every answer wrong, soft 0.25 (the solver would answer half of them right)."""
    return EvalRun("prev", "v0", "v0", {q: False for q in deps.validation}, soft_q={q: 0.25 for q in deps.validation},
                   inputs=_keys(deps))


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


def test_a_failed_reference_answer_is_asked_again(tmp_path):
    """An infrastructure failure (None) in the compared run is not an answer to keep: the question is asked."""
    solver = Solver()
    _, deps, _, _ = _setup(tmp_path, solver)
    reference = _reference(deps)
    reference.outcomes["beta1"] = None
    run = _evaluate(tmp_path, deps, "v0", "v0", reference)
    assert [q for q, _ in solver.asked] == ["beta1"] and run.outcomes["beta1"] is False  # the solver's answer, measured


def test_an_answer_is_copied_only_where_its_own_input_is_the_evaluated_one(tmp_path):
    """A merged reference (a check put back answers of another tree) may carry its version label over answers that
    describe other text: the answer's own input key decides, not the label."""
    solver = Solver()
    ws, deps, skills, _ = _setup(tmp_path, solver)
    edited = wsp.promote(ws, "skills", skills.with_files({"alpha/SKILL.md": "alpha edited"}), {"reason": "test"})
    reference = _reference(deps)  # labelled v0/v0 ...
    reference.inputs.update({q: k for q, k in _keys(deps, edited).items() if q.startswith("alpha")})  # ... alpha's from `edited`
    del reference.inputs["gamma0"]  # an answer of unknown input
    run = _evaluate(tmp_path, deps, "v0", "v0", reference)
    assert sorted(q for q, _ in solver.asked) == ["alpha0", "alpha1", "alpha2", "gamma0"]
    assert run.inputs == _keys(deps)  # every answer of the new run was produced with (or copied for) v0's input


@pytest.mark.parametrize("with_anchor", [True, False])
def test_after_a_probation_rollback_and_a_type_check_revert_every_answer_describes_the_labelled_version(tmp_path, with_anchor):
    """One epoch, two checks: alpha's edit is rolled back by its probation (after R measured it) and beta's edit is
    reverted by the type check. The run that becomes eval_prev (and the best pointer's record) is labelled with the
    version both produced: its alpha answers are the anchor re-run's, which answered alpha's rolled-back text
    (`gate.probation_settlement=eprocess`), or none (the snapshot settlement has no such answers), never R's, which
    answered alpha's edit. The next epoch's R asks exactly the questions without such an answer."""
    def right(tree, task_type):  # alpha is right only with its edit; beta only with its starting text
        message = render_system_message(tree, task_type)
        return "GOOD" in message or "beta v0" in message

    asked: list[tuple[str, str]] = []

    def rollout(tree, items, run_id):
        async def answer():
            asked.extend((run_id, q.qid) for q, _ in items)
            return [right(tree, q.task_type) for q, _ in items]
        return answer()

    from conftest import slow_setup

    ws, deps, skills, _ = slow_setup(tmp_path, ("alpha", "beta"), 3, rollout=rollout, traces=lambda *a: "",
                                     probation_verdict=lambda p, rerun, anchor=None: ProbationVerdict("rollback", 0, 3, 3, 1.0, 0.0, "test"),
                                     soft_by_question=None, reuse_identical=True, momentum=False, system_tool_update=False,
                                     type_check_drop=0.1, holdout=False, settle_with_anchor=with_anchor)
    state = TrainState(epoch_start_skills=read_version_tree(ws / "skills", "v0").to_dict())
    installed = wsp.promote(ws, "skills", skills.with_files({"alpha/SKILL.md": "alpha GOOD", "beta/SKILL.md": "beta BAD"}), {"reason": "test"})
    state.changed_task_types_this_epoch = {"alpha", "beta"}
    state.probations = {"alpha": Probation("alpha", "alpha/SKILL.md", "v0", 1, 1, {}, [], installed, "probation")}
    pools = GatePools.build({t: [q for q in deps.validation if q.startswith(t)] for t in ("alpha", "beta")})
    alpha = ["alpha0", "alpha1", "alpha2"]
    log = HarnessLog(tmp_path / "runlog")
    try:
        first = slow_update_cycle(deps, state, pools, log, {}, None)
        assert first.rollbacks == ["alpha/SKILL.md"] and first.report["type_check_reverted"] == ["beta/SKILL.md"]
        current = wsp.read_manifest(ws)
        tree = wsp.harness_view(ws, current.skills_version, current.prompts_version)
        truth = {q: right(tree, deps.questions[q].task_type) for q in deps.validation}
        ref = state.eval_prev_ref
        assert ref is not None and ref.skills_version == current.skills_version
        assert {q: ref.outcomes[q] for q in alpha} == ({q: truth[q] for q in alpha} if with_anchor else dict.fromkeys(alpha))
        if with_anchor:  # the best pointer's record is the labelled version's: beta right, alpha wrong on the rolled-back text
            assert wsp.read_best(ws).val_acc == 0.5
        state.begin_epoch(current.skills_version, current.prompts_version, read_version_tree(ws / "skills", current.skills_version).to_dict())
        deps.epoch = 2
        asked.clear()
        second = slow_update_cycle(deps, state, pools, log, {}, dict(ref.outcomes))
    finally:
        log.close()
    assert sorted(q for run_id, q in asked if run_id.endswith("slowR")) == ([] if with_anchor else alpha)
    assert second.r.outcomes == truth


def test_eval_prev_comes_from_the_checkpoint_whatever_the_key_says_now(tmp_path):
    """harness/loop/stages/slow.py: eval_prev's answers in full from `eval_prev_ref` when it describes eval_prev (the
    run log holds only what eval_prev asked, and a resume may switch train.reuse_identical off); the run log's
    predictions otherwise."""
    from harness.loop.stages.slow import eval_prev_outcomes

    runlog = tmp_path / "runlog.sqlite"
    with HarnessLog(runlog) as log:  # eval_prev asked one question; its other answers were copied
        log.record_run("e1_R", "slow_r", skills_version="v1", prompts_version="v0")
        log.insert("predictions", [{"run_id": "e1_R", "qid": "q2", "sample_index": 7, "task_type": "t", "predicted": "A",
                                    "answer": "A", "correct": True, "stop_reason": "answer"}])
    full = {"q1": False, "q2": True, "q3": None}
    state = TrainState(eval_prev_run_id="e1_R", eval_prev_ref=EvalRef("e1_R", "v1", "v0", dict(full), {}, {}))
    assert eval_prev_outcomes(state, [runlog]) == full
    state.eval_prev_ref = EvalRef("e0_R0", "v0", "v0", {"q1": True}, {}, {})  # describes another run: not eval_prev
    assert eval_prev_outcomes(state, [runlog]) == {"q2": True}
    assert eval_prev_outcomes(TrainState(), [runlog]) is None


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
