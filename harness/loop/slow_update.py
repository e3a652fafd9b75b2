"""The slow update at the end of an epoch (seed 000 §15 `_slow_update_cycle`), ten steps in order.

 1. capture the version pair, re-run the full validation pool: run R (train.reuse_identical: only the questions
    whose input differs from eval_prev's pair are asked, the others keep eval_prev's answers; R2 likewise against R)
 2. soft score + dual metric written (NULL where a metric does not exist)
 3. R's per-question correctness written back unconditionally
 4. probation settlement against R; rollbacks override step 3 (file-level
    revert to the anchor version's content, stored as a NEW version)
 5. best by strict argmax (bound to R's version pair)
 6. momentum: a new immutable skills version, one guidance per skill file
 7. system prompt / tool guides slow update under `evolve.edit_budget_end`
 8. the R2 closed loop on the version pair after 4/6/7 (never R's): a
    regression reverts the prompts; otherwise R2's correctness is written
    back, best argmax binds R2's pair and eval_prev <- R2
 9. three-state labels, epoch report, four-way held-out (test pool)
10. ladder refresh from exactly three sources: this epoch's step rollouts
    (never a `_gate_` run), R's run id, a kept R2's run id. A reverted R2,
    shadow and held-out runs never reach the ladder.

The caller (stage_slow) owns the state dir, the checkpoint and early stop.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Protocol, TypeVar

from harness import workspace as wsp
from harness.bench.soft import mean_soft_score, mixed_score
from harness.contracts.solver import DEFAULT_SKILL, resolve_skill_file, skill_path
from harness.evolution.evolve import evolve_single_tool, evolve_system_prompt
from harness.evolution.momentum import ComparisonPair, run_momentum
from harness.evolution.prompts import MetaPrompts
from harness.identity import (
    HOLDOUT_INDEX,
    PROBATION_ANCHOR_INDEX,
    SLOW_R_INDEX,
    anchor_run_id,
    epoch_holdout_run_id,
    is_step_run,
    r0_run_id,
    r2_run_id,
    r_run_id,
)
from harness.kernel.ladder import GatePools
from harness.kernel.types import Probation, ProbationVerdict
from harness.loop.certify import input_keys
from harness.loop.observation import write_dual_metric, write_holdout_eval, write_shadow_gate
from harness.loop.train_state import EvalRef
from harness.loop.validate import RolloutFn
from harness.questions import Question
from harness.store import read_version_tree
from harness.tree import HarnessTree

progress = logging.getLogger("harness.progress")
T = TypeVar("T")

def ladder_sources(step_run_ids: Sequence[str], run_name: str, epoch: int, r_id: str, kept_r2_id: Optional[str]) -> list[str]:
    """The exact three sources of the ladder refresh: this epoch's step rollouts (never `_gate_`), R, a kept R2."""
    steps = sorted(r for r in step_run_ids if is_step_run(r, run_name, epoch))
    return steps + [r_id] + ([kept_r2_id] if kept_r2_id else [])


@dataclass
class EvalRun:
    run_id: str
    skills_version: str
    prompts_version: str
    outcomes: dict[str, Optional[bool]]
    soft: Optional[float] = None
    sample_index: int = 0
    soft_q: dict[str, Optional[float]] = field(default_factory=dict)  # qid -> soft score (measured or copied)
    # the questions this run asked (train.reuse_identical: the others' answers are copied from the run it is compared
    # with, their input being byte-identical); None: every question of `outcomes`
    asked: Optional[tuple[str, ...]] = None
    # qid -> the input key (harness.loop.certify.input_keys) of the tree its answer was produced with; a merged run
    # (a check put an earlier run's answers back) keeps each answer's own key; absent: unknown, never copied
    inputs: dict[str, str] = field(default_factory=dict)

    @property
    def measured(self) -> dict[str, Optional[bool]]:
        """The outcomes this run's own rollouts produced (what its run id holds in the run log)."""
        return dict(self.outcomes) if self.asked is None else {q: self.outcomes[q] for q in self.asked}

    @property
    def correctness(self) -> dict[str, bool]:
        return {q: bool(v) for q, v in self.outcomes.items() if v is not None}

    @property
    def acc(self) -> float:
        seen = [v for v in self.outcomes.values() if v is not None]
        return sum(seen) / len(seen) if seen else 0.0


class ProbationSettle(Protocol):
    """(probation, R's outcomes on the affected qids, the anchor re-run or None) -> verdict; the anchor re-run is
    passed exactly when `SlowDeps.settle_with_anchor` (harness/loop/rollouts.py `probation_verdict_fn`)."""

    def __call__(self, probation: Probation, rerun: Mapping[str, Optional[bool]],
                 anchor: Optional[Mapping[str, Optional[bool]]] = None, /) -> ProbationVerdict: ...


@dataclass
class SlowDeps:
    """Everything the slow update uses besides the state."""

    run_name: str
    epoch: int
    workspace_dir: Path
    runlog_path: Path
    questions: Mapping[str, Question]
    validation: Sequence[str]
    test: Sequence[str]
    rollout: RolloutFn
    llm: Any
    traces: Callable[[str, str, int], str]  # (run_id, qid, sample_index) -> trace text (for momentum)
    probation_verdict: ProbationSettle
    # run_id -> qid -> soft score of the run's judged rollouts (None where one has none); None: no soft scores
    soft_by_question: Optional[Callable[[str], dict[str, Optional[float]]]] = None
    # the best mixed score of the earlier epochs' shadow gate and its versions (mixed, skills, prompts); None: none yet
    shadow_best: Optional[tuple[float, str, str]] = None
    edit_budget_end: int = 1
    momentum: bool = True
    system_tool_update: bool = True
    max_skill_chars: Optional[int] = None
    ema_gamma: float = 0.3
    holdout: bool = True
    # gate.probation_settlement=eprocess: the anchor version re-answers the affected questions (fresh sample) and
    # probation_verdict(p, rerun, anchor) settles on those pairs (kernel.probation.probation_settlement)
    settle_with_anchor: bool = False
    meta_prompts: Optional[MetaPrompts] = None  # the meta roles' templates (benchmark.domain, evolve.prompts_dir)
    # train.momentum_check=per_file: a momentum rewrite of a skill file is kept only if R2 (fresh samples, run anyway)
    # answers that file's validation questions at least as well as R did; else the file goes back to R's text
    momentum_check: str = "none"
    # train.type_check_drop=d: at the epoch end, a skill file changed this epoch goes back to its epoch-start text when
    # a task type reading it answers its validation questions worse at R than at the epoch's start by more than d
    type_check_drop: Optional[float] = None
    # train.reuse_identical: R asks only the validation questions whose input differs from eval_prev's pair, R2 only
    # those that differ from R's; the others keep the compared run's answers (exactly the same in distribution)
    reuse_identical: bool = False


@dataclass
class SlowResult:
    report: dict[str, Any]
    improved_best: bool
    r: EvalRun
    r2: Optional[EvalRun] = None
    r2_kept: bool = False
    rollbacks: list[str] = field(default_factory=list)
    rollouts: int = 0


def _run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)


def evaluate(deps: SlowDeps, run_id: str, kind: str, sv: str, pv: str, qids: Sequence[str], sample_index: int, log: Any,
             reference: Optional[EvalRun] = None) -> EvalRun:
    """record_run (workspace + run log) before the inference, versions filled in the run log after it.

    `reference` (train.reuse_identical): a question whose reference answer was produced with byte-identical input
    (the same `input_keys` key as (sv, pv) gives its task type) is not asked: it keeps the reference's answer and
    soft score, which are a draw from the same distribution. The key is the answer's own, not the reference's version
    label: a merged reference (a check put back an earlier run's answers) is copied only where its answers describe
    this input. A reference answer that is None (an infrastructure failure) is asked again. The returned run's
    `asked` lists the questions it asked."""
    wsp.record_run(deps.workspace_dir, run_id)
    log.record_run(run_id, kind, skills_version=sv, prompts_version=pv)
    tree = wsp.harness_view(deps.workspace_dir, sv, pv)
    keys = input_keys(tree, sorted({deps.questions[q].task_type for q in qids}))
    inputs = {q: keys[deps.questions[q].task_type] for q in qids}
    copied: set[str] = set()
    if reference is not None:
        copied = {q for q in qids if reference.inputs.get(q) == inputs[q] and reference.outcomes.get(q) is not None}
    asked = [q for q in qids if q not in copied]
    got = _run(deps.rollout(tree, [(deps.questions[q], sample_index) for q in asked], run_id)) if asked else []
    log.update_run_versions(run_id, sv, pv, None)
    measured_soft = deps.soft_by_question(run_id) if deps.soft_by_question else {}
    answers = dict(zip(asked, got))
    outcomes = {q: reference.outcomes[q] if reference is not None and q in copied else answers[q] for q in qids}
    soft_q = {q: reference.soft_q.get(q) if reference is not None and q in copied else measured_soft.get(q) for q in qids}
    soft = mean_soft_score([soft_q[q] for q in qids if outcomes[q] is not None]) if deps.soft_by_question else None
    return EvalRun(run_id, sv, pv, outcomes, soft=soft, sample_index=sample_index, soft_q=soft_q,
                   asked=None if reference is None else tuple(asked), inputs=inputs)


def next_shadow_best(previous: Optional[tuple[float, str, str]], mixed: Optional[float], skills_version: str,
                     prompts_version: str) -> Optional[tuple[float, str, str]]:
    """The shadow best after this epoch: the argmax of the mixed score over the epochs so far (strictly greater
    replaces, like the hard best); an epoch without a mixed score keeps the previous one."""
    if mixed is not None and (previous is None or mixed > previous[0]):
        return (mixed, skills_version, prompts_version)
    return previous


def _mixed(hard: float, soft: Optional[float]) -> Optional[float]:
    return mixed_score(hard, soft)


def _rollback(deps: SlowDeps, p: Probation) -> str:
    """File-level revert: the anchor version's content of this one file, stored as a new version."""
    ws = deps.workspace_dir
    manifest = wsp.read_manifest(ws)
    current = read_version_tree(ws / "skills", manifest.skills_version)
    anchor = read_version_tree(ws / "skills", p.anchor_skills_version)
    reverted = current.with_files({p.skill_file: anchor.get(p.skill_file)})
    return wsp.promote(ws, "skills", reverted, {"reason": "probation rollback", "skill_file": p.skill_file,
                                                "anchor": p.anchor_skills_version, "epoch": deps.epoch})


def _anchor_rerun(deps: SlowDeps, p: Probation, r_tree: HarnessTree, qids: Sequence[str], log: Any) -> EvalRun:
    """R's harness with this one file at its anchor content, on `qids` at a fresh sample index (never a gate's). The
    returned run carries each answer's input key and soft score: after a rollback these answers describe the
    rolled-back text (the type check's merge uses them)."""
    anchor = read_version_tree(deps.workspace_dir / "skills", p.anchor_skills_version).get(p.skill_file)
    tree = r_tree.with_files({f"skills/{p.skill_file}": anchor})
    run_id = anchor_run_id(deps.run_name, deps.epoch, p.task_type)
    prompts_version = wsp.read_manifest(deps.workspace_dir).prompts_version
    wsp.record_run(deps.workspace_dir, run_id)
    log.record_run(run_id, "slow_anchor", skills_version=p.anchor_skills_version, prompts_version=prompts_version)
    index = PROBATION_ANCHOR_INDEX + deps.epoch
    got = _run(deps.rollout(tree, [(deps.questions[q], index) for q in qids], run_id))
    keys = input_keys(tree, sorted({deps.questions[q].task_type for q in qids}))
    soft = deps.soft_by_question(run_id) if deps.soft_by_question else {}
    return EvalRun(run_id, p.anchor_skills_version, prompts_version, dict(zip(qids, got)), sample_index=index,
                   soft_q={q: soft.get(q) for q in qids}, inputs={q: keys[deps.questions[q].task_type] for q in qids})


def _affected_qids(deps: SlowDeps, tree: HarnessTree, skill_file: str) -> list[str]:
    target = f"skills/{skill_file}"
    return [q for q in deps.validation if resolve_skill_file(tree, deps.questions[q].task_type) == target]


def slow_update_cycle(deps: SlowDeps, state: Any, pools: GatePools, log: Any,
                      step_outcomes: Mapping[str, Mapping[str, tuple[int, Optional[bool]]]],
                      prev_eval_outcomes: Optional[Mapping[str, Optional[bool]]]) -> SlowResult:
    """Run the ten steps; mutates `state`, the workspace and `pools`.

    `step_outcomes`: run_id -> qid -> (sample_index, correct) of this epoch's
    step rollouts. `prev_eval_outcomes`: the outcomes of `state.eval_prev_run_id`
    (read by the caller from the run-log chain); None on the first epoch, when
    the epoch's starting pair is evaluated once (run R0) to have a reference.
    """
    E, ws = deps.epoch, deps.workspace_dir
    rollouts = 0
    ref = state.eval_prev_ref
    prev_ref: Optional[EvalRun] = None  # eval_prev in full: what R copies the unchanged questions' answers from
    if deps.reuse_identical and ref is not None and ref.run_id == state.eval_prev_run_id and prev_eval_outcomes is not None:
        prev_ref = EvalRun(ref.run_id, ref.skills_version, ref.prompts_version, dict(ref.outcomes), soft_q=dict(ref.soft),
                           inputs=dict(ref.inputs))
        prev_eval_outcomes = prev_ref.outcomes
    # -- 0. an unmeasured start: evaluate the epoch's starting pair once (it becomes eval_prev and the first best)
    if state.eval_prev_acc is None or prev_eval_outcomes is None:
        r0 = evaluate(deps, r0_run_id(deps.run_name, E), "slow_r0", state.baseline_skills_version,
                      state.baseline_prompts_version, deps.validation, SLOW_R_INDEX * E, log)
        rollouts += len(deps.validation)
        state.eval_prev_acc, state.eval_prev_run_id = r0.acc, r0.run_id
        prev_eval_outcomes = r0.outcomes
        prev_ref = r0
        _argmax_best(ws, r0, E)
    prev_acc = state.eval_prev_acc
    prev_corr = {q: bool(v) for q, v in prev_eval_outcomes.items() if v is not None}
    # -- 1. version snapshot + full validation re-run R
    m = wsp.read_manifest(ws)
    r = evaluate(deps, r_run_id(deps.run_name, E), "slow_r", m.skills_version, m.prompts_version, deps.validation, SLOW_R_INDEX * E, log,
                 reference=prev_ref if deps.reuse_identical else None)
    rollouts += len(r.measured)
    # -- 2. soft score + dual metric
    write_dual_metric(deps.runlog_path, run_id=r.run_id, epoch=E, kind="R", skills_version=r.skills_version,
                      prompts_version=r.prompts_version, n=len(deps.validation), hard_acc=r.acc, soft_score=r.soft,
                      mixed_score=_mixed(r.acc, r.soft))
    # -- 3. R's correctness written back unconditionally
    state.correctness.update(r.correctness)
    # -- 4. probation settlement; rollbacks override step 3
    r_tree = wsp.harness_view(ws, r.skills_version, r.prompts_version)
    rollbacks, settled = [], []
    # the rolled-back files' questions answered on their rolled-back text (the anchor re-runs; None without them, then
    # no answer describes that text): what the type check's merge, labelled with a post-rollback version, carries
    rolled_back = EvalRun("", "", "", {})
    for _, p in sorted(state.probations.items()):
        affected = _affected_qids(deps, r_tree, p.skill_file)
        anchor_run: Optional[EvalRun] = None
        if deps.settle_with_anchor:
            anchor_run = _anchor_rerun(deps, p, r_tree, affected, log)
            rollouts += len(affected)
            verdict = deps.probation_verdict(p, {q: r.outcomes.get(q) for q in affected}, anchor_run.outcomes)
        else:
            verdict = deps.probation_verdict(p, {q: r.correctness[q] for q in affected if q in r.correctness})
        settled.append({"skill_file": p.skill_file, "kind": p.kind, "action": verdict.action, "reason": verdict.reason,
                        "acc_before": verdict.acc_before, "acc_after": verdict.acc_after})
        if verdict.action == "rollback":
            version = _rollback(deps, p)
            rollbacks.append(p.skill_file)
            rolled_back.outcomes.update({q: anchor_run.outcomes[q] if anchor_run else None for q in affected})
            if anchor_run is not None:
                rolled_back.soft_q.update(anchor_run.soft_q)
                rolled_back.inputs.update(anchor_run.inputs)
            for q in affected:
                state.correctness.pop(q, None)
            state.correctness.update({q: v for q, v in p.correctness_snapshot.items() if q in set(affected)})
            state.rejected_buffer.setdefault(p.task_type, []).extend(p.pending_edits)
            progress.info("[slow@e%d] probation %s rolled back -> skills %s", E, p.skill_file, version)
    state.probations = {}
    # -- 4b. per-type check of this epoch's installs against the epoch's start (train.type_check_drop)
    type_reverted: list[str] = []
    r_measured = r
    if deps.type_check_drop is not None:
        r, type_reverted = _check_types(deps, state, r, prev_corr, deps.type_check_drop, prev_ref.soft_q if prev_ref else {},
                                        prev_ref.inputs if prev_ref else {}, rolled_back)
    # -- 5. best argmax (strict)
    improved = _argmax_best(ws, r, E)
    # -- 6. momentum: one new immutable skills version, one guidance per changed skill file
    momentum_files: list[str] = []
    sv_before_momentum = wsp.read_manifest(ws).skills_version  # after the probation rollbacks
    if deps.momentum:
        momentum_files = _momentum(deps, state, r, prev_corr, log)
    # -- 7. system prompt / tool guides under the end-of-epoch edit budget
    system_tool_action = "disabled"
    if deps.system_tool_update:
        system_tool_action = _system_tool_update(deps, state)
    # -- 8. R2 closed loop on the new version pair
    m2 = wsp.read_manifest(ws)
    r2, r2_kept = None, False
    r2_measured: Optional[EvalRun] = None
    momentum_reverted: list[str] = []
    if (m2.skills_version, m2.prompts_version) != (r.skills_version, r.prompts_version):
        r2 = evaluate(deps, r2_run_id(deps.run_name, E), "slow_r2", m2.skills_version, m2.prompts_version, deps.validation,
                      SLOW_R_INDEX * E + 1, log, reference=r if deps.reuse_identical else None)
        rollouts += len(r2.measured)
        write_dual_metric(deps.runlog_path, run_id=r2.run_id, epoch=E, kind="R2", skills_version=r2.skills_version,
                          prompts_version=r2.prompts_version, n=len(deps.validation), hard_acc=r2.acc, soft_score=r2.soft,
                          mixed_score=_mixed(r2.acc, r2.soft))
        r2_measured = r2
        if deps.momentum_check == "per_file" and m2.skills_version != r.skills_version:
            r2, momentum_reverted = _check_momentum_files(deps, r, r2, sv_before_momentum)
        if (r2.skills_version, r2.prompts_version) == (r.skills_version, r.prompts_version):
            pass  # every rewrite reverted: R describes the current pair and stays eval_prev
        elif r2.acc < r.acc:
            if m2.prompts_version != r.prompts_version:
                wsp.set_current(ws, prompts=r.prompts_version)
                system_tool_action += " (reverted: R2 regressed)"
        else:
            r2_kept = True
            state.correctness.update(r2.correctness)
            improved = _argmax_best(ws, r2, E) or improved
    final = r2 if r2_kept and r2 is not None else r  # r2_kept implies r2
    state.eval_prev_acc, state.eval_prev_run_id = final.acc, final.run_id
    state.eval_prev_ref = EvalRef(final.run_id, final.skills_version, final.prompts_version, dict(final.outcomes), dict(final.soft_q),
                                  dict(final.inputs))
    # -- 9. three-state labels, shadow gate, four-way held-out, epoch report
    label = "improved" if final.acc > prev_acc else ("regressed" if final.acc < prev_acc else "unchanged")
    best = wsp.read_best(ws)
    mixed = _mixed(final.acc, final.soft)
    shadow = next_shadow_best(deps.shadow_best, mixed, final.skills_version, final.prompts_version)
    write_shadow_gate(deps.runlog_path, epoch=E, run_id=final.run_id, hard_acc=final.acc, mixed_score=mixed,
                      shadow_best_mixed=shadow[0] if shadow else None, shadow_skills_version=shadow[1] if shadow else None,
                      shadow_prompts_version=shadow[2] if shadow else None,
                      hard_best_skills_version=best.skills if best else None, hard_best_prompts_version=best.prompts if best else None)
    holdout_rows = _four_way_holdout(deps, state, log) if deps.holdout else []
    # -- 10. ladder refresh from exactly three sources
    sources = ladder_sources(list(step_outcomes), deps.run_name, E, r.run_id, r2.run_id if r2_kept and r2 else None)
    observed: set[str] = {tt for tt, warm in state.gate_epoch_observed.items() if warm}
    for run_id in sources:
        if run_id == r.run_id:  # what R observed (never the type check's merge, never a copied answer)
            triples = [(q, r_measured.sample_index, v) for q, v in r_measured.measured.items()]
        elif r2_measured is not None and run_id == r2_measured.run_id:  # what R2 observed (never the check's merge)
            triples = [(q, r2_measured.sample_index, v) for q, v in r2_measured.measured.items()]
        else:
            triples = [(q, idx, v) for q, (idx, v) in step_outcomes[run_id].items()]
        if pools.update_from_run(run_id, triples, gamma=deps.ema_gamma):
            observed |= {deps.questions[q].task_type for q, _, v in triples if v is not None and q in set(deps.validation)}
    state.gate_epoch_observed = {tt: True for tt in sorted(observed)}
    best = wsp.read_best(ws)
    report = {
        "epoch": E, "eval_run_id": final.run_id, "eval_acc": final.acc, "soft_score": final.soft,
        "mixed_score": _mixed(final.acc, final.soft), "eval_prev_acc": prev_acc, "label": label,
        "best_val_acc": best.val_acc if best else None, "best_skills_version": best.skills if best else None,
        "best_prompts_version": best.prompts if best else None, "probations_settled": settled, "rollbacks": rollbacks,
        "momentum_updated_task_types": momentum_files, "system_tool_action": system_tool_action,
        "r2_run_id": r2.run_id if r2 else None, "r2_acc": r2.acc if r2 else None, "r2_kept": r2_kept,
        "momentum_check": deps.momentum_check, "momentum_reverted": momentum_reverted,
        "type_check_drop": deps.type_check_drop, "type_check_reverted": type_reverted,
        "changed_task_types": sorted(state.changed_task_types_this_epoch), "ladder_sources": sources,
        "holdout": holdout_rows, "early_stop": False, "steps_since_best_improved": None,
        "r_acc": r.acc, "rollouts": rollouts, "reuse_identical": deps.reuse_identical,
        "r_asked": len(r_measured.measured), "r2_asked": len(r2_measured.measured) if r2_measured else None,
    }
    return SlowResult(report=report, improved_best=improved, r=r, r2=r2, r2_kept=r2_kept, rollbacks=rollbacks, rollouts=rollouts)


def _argmax_best(ws: Path, run: EvalRun, epoch: int) -> bool:
    """Move best to the run's version pair iff its accuracy is strictly greater (or there is no best yet)."""
    best = wsp.read_best(ws)
    if best is None or run.acc > best.val_acc:
        wsp.update_best(ws, run.skills_version, run.prompts_version, run.acc, epoch)
        return True
    return False


def _momentum(deps: SlowDeps, state: Any, r: EvalRun, prev_corr: Mapping[str, bool], log: Any) -> list[str]:
    """Guidance per skill file changed this epoch, from (epoch-start outcome, R outcome) pairs; one new version."""
    ws = deps.workspace_dir
    m = wsp.read_manifest(ws)
    skills = read_version_tree(ws / "skills", m.skills_version)
    view = wsp.harness_view(ws, m.skills_version, m.prompts_version)
    files: dict[str, list[str]] = {}
    for tt in sorted(set(state.changed_task_types_this_epoch)):
        f = resolve_skill_file(view, tt)[len("skills/"):]
        if f in state.epoch_start_skills and state.epoch_start_skills[f] == skills.get(f):
            continue  # changed and changed back (e.g. rolled back): nothing to give momentum to
        files.setdefault(f, []).append(tt)
    changes: dict[str, str] = {}
    updated: list[str] = []
    for n, (f, tts) in enumerate(sorted(files.items())):
        if f == skill_path(DEFAULT_SKILL)[len("skills/"):] or f not in skills:
            continue
        pairs = [ComparisonPair(q, deps.questions[q].task_type, deps.questions[q].question, bool(prev_corr[q]), bool(r.outcomes[q]),
                                deps.traces(r.run_id, q, r.sample_index))
                 for q in deps.validation
                 if deps.questions[q].task_type in tts and q in prev_corr and r.measured.get(q) is not None]
        if not pairs:
            continue
        out = _run(run_momentum(deps.llm, task_type=tts[0], skill_file=f, skill_text=skills[f], pairs=pairs,
                                sample_index=SLOW_R_INDEX * deps.epoch + n, prompts=deps.meta_prompts))
        if out.new_text != skills[f]:
            changes[f] = out.new_text
            updated.extend(tts)
    if changes:
        wsp.promote(ws, "skills", skills.with_files(changes), {"reason": "momentum", "epoch": deps.epoch, "files": sorted(changes)})
    return sorted(updated)


def _changed_files(old: Mapping[str, str], new: Mapping[str, str], measured: Mapping[str, str],
                   measured_as: Mapping[str, str]) -> list[str]:
    """Skill files whose text differs between `old` and `new` and that `measured` (the tree a run answered with) holds
    exactly as `measured_as` does: only for those do the run's answers describe one side of the change."""
    return sorted(p for p in set(old) | set(new) if old.get(p) != new.get(p) and measured.get(p) == measured_as.get(p))


def _revert_files(deps: SlowDeps, run: EvalRun, current: HarnessTree, restore: Mapping[str, Optional[str]],
                  answers: Mapping[str, Optional[bool]], soft: Mapping[str, Optional[float]], inputs: Mapping[str, str],
                  reason: str, reuse: Optional[tuple[str, HarnessTree]] = None) -> EvalRun:
    """Put `restore` (file -> text, None: delete) back into `current` as one new skills version (or, when the result
    is exactly `reuse`'s tree, make `reuse`'s version current again) and return the run that describes it: `run`'s
    id and answers, with `answers` (the questions of the restored files, answered by the restored texts) merged in,
    each with its own input key from `inputs` (none where `inputs` has none: such an answer is never copied later)."""
    ws = deps.workspace_dir
    restored = current.with_files(restore)
    if reuse is not None and restored.fingerprint == reuse[1].fingerprint:
        version = reuse[0]
        wsp.set_current(ws, skills=version)
    else:
        version = wsp.promote(ws, "skills", restored, {"reason": reason, "epoch": deps.epoch, "files": sorted(restore)})
    outcomes = {**run.outcomes, **answers}
    soft_q = {**run.soft_q, **{q: soft.get(q) for q in answers}}
    keys = {q: k for q, k in run.inputs.items() if q not in answers} | {q: inputs[q] for q in answers if q in inputs}
    return EvalRun(run.run_id, version, run.prompts_version, outcomes, soft=run.soft, sample_index=run.sample_index,
                   soft_q=soft_q, asked=run.asked, inputs=keys)


def _change(after: Mapping[str, Optional[bool]], before: Mapping[str, Optional[bool]], qids: Sequence[str]) -> tuple[int, int]:
    """(right after - right before, pairs) over the questions of `qids` both runs answered."""
    both = [q for q in qids if after.get(q) is not None and before.get(q) is not None]
    return sum(bool(after[q]) for q in both) - sum(bool(before[q]) for q in both), len(both)


def _check_types(deps: SlowDeps, state: Any, r: EvalRun, prev_corr: Mapping[str, bool], drop: float,
                 prev_soft: Optional[Mapping[str, Optional[float]]] = None,
                 prev_inputs: Optional[Mapping[str, str]] = None,
                 rolled_back: Optional[EvalRun] = None) -> tuple[EvalRun, list[str]]:
    """train.type_check_drop: every skill file changed this epoch (R's text differs from the epoch start's, and no
    probation rollback touched it since R) is judged per task type reading it, R's answers on that type's validation
    questions against the epoch-start evaluation's (eval_prev: fresh samples of the epoch's starting pair, already
    paid for). A heuristic sign test on ~20 questions a type, not a guarantee:
    - a file one task type reads goes back to its epoch-start text when that type lost more than `drop` (accuracy);
    - a file several types read (default-strategy) goes back only when some type lost more than `drop` AND all the
      questions that read it, pooled, lost too: with k readers, one of k noisy ~20-question differences below -drop
      is likely by chance, and reverting a shared file takes every reader's gain with it.
    Reverted files go back in one new version, built on the current one (after this epoch's probation rollbacks);
    the returned run (R's id) carries eval_prev's answers on their questions, which describe the restored texts, and
    `rolled_back`'s on the questions of the files a probation rolled back since R (R's own describe the text before
    the rollback), so that every answer it holds describes the version it is labelled with."""
    ws = deps.workspace_dir
    measured = read_version_tree(ws / "skills", r.skills_version)
    current = read_version_tree(ws / "skills", wsp.read_manifest(ws).skills_version)
    view = wsp.harness_view(ws, r.skills_version, r.prompts_version)
    start: Mapping[str, str] = state.epoch_start_skills
    reverted: dict[str, Optional[str]] = {}
    answers: dict[str, Optional[bool]] = {}
    for f in _changed_files(start, measured, current, measured):
        affected = _affected_qids(deps, view, f)
        types = sorted({deps.questions[q].task_type for q in affected})
        lost = []
        for tt in types:
            diff, n = _change(r.outcomes, prev_corr, [q for q in affected if deps.questions[q].task_type == tt])
            if n and diff / n < -drop:
                lost.append(tt)
        if not lost or (len(types) > 1 and _change(r.outcomes, prev_corr, affected)[0] >= 0):
            continue
        reverted[f] = start.get(f)
        answers.update({q: prev_corr.get(q) for q in affected})
    if not reverted:
        return r, []
    soft = {q: (prev_soft or {}).get(q) for q in answers}
    keys = {q: (prev_inputs or {})[q] for q in answers if q in (prev_inputs or {})}
    if rolled_back is not None:  # disjoint from `answers`: a rolled-back file is not one R measured as it is now
        answers.update(rolled_back.outcomes)
        soft.update({q: rolled_back.soft_q.get(q) for q in rolled_back.outcomes})
        keys.update({q: rolled_back.inputs[q] for q in rolled_back.outcomes if q in rolled_back.inputs})
    run = _revert_files(deps, r, current, reverted, answers, soft, keys, "type check: reverted")
    for q, v in run.outcomes.items():
        if v is not None:
            state.correctness[q] = bool(v)
    progress.info("[slow@e%d] type check: %s back to the epoch-start text (a task type reading it lost > %.0f pts at R; skills %s)",
                  deps.epoch, ", ".join(sorted(reverted)), 100 * drop, run.skills_version)
    return run, sorted(reverted)


def _check_momentum_files(deps: SlowDeps, r: EvalRun, r2: EvalRun, sv_before: str) -> tuple[EvalRun, list[str]]:
    """train.momentum_check=per_file: each skill file momentum rewrote (`sv_before` -> R2's skills) that R measured
    as it was before the rewrite is judged on the validation questions that read it, R2's answers against R's (the
    same questions, independent samples: the pairs a per-edit gate would draw, already paid for). A file R2 answers
    worse goes back to its text before the rewrite, in one new version (or R's own version when that is what is
    left); R2's outcomes on its questions are replaced by R's, which describe that text. Returns the run that
    describes the current version (R2's id: the run log holds no other) and the reverted files."""
    ws = deps.workspace_dir
    measured = read_version_tree(ws / "skills", r.skills_version)
    before = read_version_tree(ws / "skills", sv_before)
    after = read_version_tree(ws / "skills", r2.skills_version)
    view = wsp.harness_view(ws, r2.skills_version, r2.prompts_version)
    reverted: dict[str, Optional[str]] = {}
    answers: dict[str, Optional[bool]] = {}
    for f in _changed_files(before, after, measured, before):
        affected = _affected_qids(deps, view, f)
        if _change(r2.outcomes, r.outcomes, affected)[0] < 0:
            reverted[f] = before.get(f)
            answers.update({q: r.outcomes[q] for q in affected})
    if not reverted:
        return r2, []
    run = _revert_files(deps, r2, after, reverted, answers, r.soft_q, r.inputs, "momentum check: reverted",
                        reuse=(r.skills_version, measured))
    progress.info("[slow@e%d] momentum check: %s answered worse by R2 than by R -> back to the text before momentum (skills %s)",
                  deps.epoch, ", ".join(sorted(reverted)), run.skills_version)
    return run, sorted(reverted)


def _system_tool_update(deps: SlowDeps, state: Any) -> str:
    """Edit the system prompt and each tool guide with the epoch's packs; one new prompts version when anything changed."""
    ws = deps.workspace_dir
    m = wsp.read_manifest(ws)
    prompts = read_version_tree(ws / "prompts", m.prompts_version)
    changes: dict[str, str] = {}
    actions: list[str] = []
    cases = [c for pack in state.system_packs for c in pack.cases]
    if cases and "system_prompt.md" in prompts:
        rec = _run(evolve_system_prompt(deps.llm, system_prompt_text=prompts["system_prompt.md"], case_pack=cases,
                                        rejected=state.rejected_buffer.get("_system", []),
                                        edit_budget=deps.edit_budget_end, sample_index=SLOW_R_INDEX * deps.epoch,
                                        max_chars=deps.max_skill_chars, prompts=deps.meta_prompts))
        if rec.changed:
            changes["system_prompt.md"] = rec.new_text
            actions.append("system_prompt")
    for tool, pack in sorted(state.tool_packs.items()):
        path = f"tools/{tool}.md"
        if path not in prompts or pack.calls == 0:
            continue
        rec = _run(evolve_single_tool(deps.llm, tool=tool, tool_text=prompts[path], case_pack=pack, edit_budget=deps.edit_budget_end,
                                      sample_index=SLOW_R_INDEX * deps.epoch, max_chars=deps.max_skill_chars,
                                      prompts=deps.meta_prompts))
        if rec.changed:
            changes[path] = rec.new_text
            actions.append(f"tool:{tool}")
    if not changes:
        return "no_change"
    wsp.promote(ws, "prompts", prompts.with_files(changes), {"reason": "slow system/tool update", "epoch": deps.epoch})
    return "updated:" + ",".join(actions)


def _four_way_holdout(deps: SlowDeps, state: Any, log: Any) -> list[dict]:
    """Test-pool accuracy of base, epoch start, current and best (observation only; never feeds a decision)."""
    ws = deps.workspace_dir
    m = wsp.read_manifest(ws)
    best = wsp.read_best(ws)
    pairs = {
        "base": ("v0", "v0"),
        "epoch_start": (state.baseline_skills_version, state.baseline_prompts_version),
        "current": (m.skills_version, m.prompts_version),
        "best": (best.skills, best.prompts) if best else (m.skills_version, m.prompts_version),
    }
    done: dict[tuple[str, str], EvalRun] = {}
    rows = []
    for which, (sv, pv) in pairs.items():
        if (sv, pv) not in done:
            run_id = epoch_holdout_run_id(deps.run_name, deps.epoch, sv, pv)
            done[(sv, pv)] = evaluate(deps, run_id, "holdout", sv, pv, deps.test, HOLDOUT_INDEX, log)
        ev = done[(sv, pv)]
        rows.append(dict(epoch=deps.epoch, which=which, run_id=ev.run_id, skills_version=sv, prompts_version=pv, n=len(deps.test),
                         hard_acc=ev.acc, soft_score=ev.soft, mixed_score=_mixed(ev.acc, ev.soft)))
    write_holdout_eval(deps.runlog_path, rows)
    return rows
