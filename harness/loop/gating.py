"""The per-skill gate of one step (seed 000 §15 `_gate_batch_skills`).

For every candidate of the step, in sorted task-type order: build the
`gate.plan` sampling plan over the gate pools (without the case-pack
questions the editor saw) plus the anchor stratum, run `validate_skill_local`, then

- accept: snapshot of the affected correctness taken BEFORE merging; the new
  skills version promoted (manifest updated, paths refreshed by re-reading
  the workspace); correctness merged on two tracks (the TrainState map gets
  the candidate's observed outcomes; the probation snapshot keeps the
  pre-merge values plus the gate's baseline outcomes); the skill's blacklist
  cleared; a probation opened (kind "accepted") unless the file is the
  default strategy;
- probation (undecided gate, `gate.undecided=probation`): installed like an
  accept, with a probation of kind "probation"; the default-strategy file
  cannot be put on probation, so it is rejected instead;
- reject: the blacklist records only the edits that were actually applied
  (a defensive text when none were);
- infra: neither — the gate said nothing about the harness.

Rules other than `sequential` plug in through `gate.rule`: `accept_all`
installs the candidate without a rollout, `gepa` runs one block on the
step's minibatch questions of the skill (baseline = the step rollout's
outcomes) and accepts iff strictly better, `mcnemar` walks the same
`gate.plan` sampling plan as ours and decides once at `mcnemar_n` pairs.
"""

from __future__ import annotations

import asyncio
import dataclasses
import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from harness import workspace as wsp
from harness.contracts.solver import DEFAULT_SKILL
from harness.evolution.evolve import rejected_summary
from harness.identity import gate_run_prefix, gate_sample_start, screen_run_id
from harness.kernel.fdr import FDR_PROCEDURES
from harness.kernel.ladder import GatePools
from harness.kernel.plans import SAMPLING_PLANS, BlockPlanner, FixedBlocks, PlanRequest
from harness.kernel.registry import params_of
from harness.kernel.rule_cap_evolve import CapEvolveParams
from harness.kernel.rule_skillopt import SkillOptParams
from harness.kernel.rules import rule_for
from harness.kernel.screen import ScreenParams, ScreenResult, screen_verdict
from harness.kernel.types import BlockItem, EvolutionRecord, GateParams, GateVerdict, Probation, RejectedEdit
from harness.loop.observation import step_report_row, write_gate_evidence, write_quadrant_pairs
from harness.loop.validate import GateRequest, GateRolloutFn, ValidationOutcome, gate_outcomes, validate_skill_local
from harness.questions import Question
from harness.store import read_version_tree
from harness.tracking.progress import GateProgress
from harness.tree import HarnessTree

DEFAULT_FILE = f"{DEFAULT_SKILL}/SKILL.md"  # inside the skills tree; never put on probation


def skill_key(skill_file: str) -> str:
    """TrainState key of a skill file: its directory ('<task_type>' or 'default-strategy')."""
    return skill_file.split("/", 1)[0]


@dataclass
class Candidate:
    """One evolve-stage proposal for one skill file (as stored by stage_evolve)."""

    task_type: str  # the first (sorted) task type of the group sharing the file (the editor's task type)
    task_types: list[str]  # every task type of the batch that reads this file
    skill_file: str  # path inside the skills tree, e.g. "temporal_reasoning/SKILL.md"
    record: EvolutionRecord
    case_qids: list[str] = field(default_factory=list)
    source: Optional[str] = None  # who wrote it (shown in the step report beside the decision)

    @property
    def key(self) -> str:
        return skill_key(self.skill_file)


@dataclass
class GateContext:
    """What the per-skill gate needs besides the TrainState."""

    run_name: str
    epoch: int
    step: int
    params: GateParams
    questions: Mapping[str, Question]
    validation_by_type: Mapping[str, Sequence[str]]
    rollout: GateRolloutFn
    workspace_dir: Path
    runlog_path: Path
    cooldown_steps: int
    seed: int = 0
    batch_outcomes: Mapping[str, Optional[bool]] = field(default_factory=dict)  # the step rollout (GEPA baseline)


@dataclass(frozen=True)
class PlannedGate:
    """The question plan of one gate: a block planner (None = no questions) and known baseline outcomes."""

    planner: Optional[BlockPlanner]
    known_baseline: Optional[dict[str, bool]] = None
    single_block_size: Optional[int] = None  # a one-block plan: its size (rules with `single_block`)


def _sampling_source(gc: GateContext, cand: Candidate, pools: GatePools, warm: bool, prefix: str) -> PlannedGate:
    """The `gate.plan` sampling plan over the candidate's validation pool (case-pack questions never in its slots)."""
    types = [tt for tt in cand.task_types if tt in pools.task_types]
    if not any(pools.pool(tt) for tt in types):
        return PlannedGate(None)
    request = PlanRequest(pools=pools, task_types=types, params=gc.params,
                          seed=gc.seed * 1_000_003 + gc.epoch * 1009 + gc.step * 31 + len(prefix),
                          first_sample_index=gate_sample_start(prefix), warm=warm, exclude=frozenset(cand.case_qids))
    return PlannedGate(SAMPLING_PLANS.get(gc.params.plan).planner(request))


def _step_minibatch_source(gc: GateContext, cand: Candidate, pools: GatePools, warm: bool, prefix: str) -> PlannedGate:
    """GEPA: one block of the step's minibatch questions of the skill; baseline = the step rollout's outcomes."""
    start = gate_sample_start(prefix)
    qids = sorted({q for q, v in gc.batch_outcomes.items() if v is not None and gc.questions[q].task_type in cand.task_types})
    known = {q: bool(gc.batch_outcomes[q]) for q in qids}
    return PlannedGate(FixedBlocks([[BlockItem(q, start + i) for i, q in enumerate(qids)]]) if qids else None, known,
                       single_block_size=len(qids))


def _pool_minus_cases(cand: Candidate, pools: GatePools) -> tuple[list[str], set[str]]:
    types = [tt for tt in cand.task_types if tt in pools.task_types]
    return [q for tt in types for q in pools.pool(tt)], set(cand.case_qids)


def _one_block(qids: Sequence[str], start: int) -> PlannedGate:
    return PlannedGate(FixedBlocks([[BlockItem(q, start + i) for i, q in enumerate(qids)]]) if qids else None,
                       single_block_size=len(qids))


def _selection_split_source(gc: GateContext, cand: Candidate, pools: GatePools, warm: bool, prefix: str) -> PlannedGate:
    """SkillOpt: one block, the fixed held-out selection split (the same for every gate of the run)."""
    from harness.kernel.rule_skillopt import selection_split

    pool, excluded = _pool_minus_cases(cand, pools)
    if not pool:
        return PlannedGate(None)
    return _one_block([q for q in selection_split(pool, params_of(SkillOptParams, gc.params).selection_n, seed=gc.seed) if q not in excluded],
                      gate_sample_start(prefix))


def _random_fixed_n_source(gc: GateContext, cand: Candidate, pools: GatePools, warm: bool, prefix: str) -> PlannedGate:
    """cap-evolve: one block of `gate.cap_evolve_n` random questions of the pool (cycled when the pool is smaller)."""
    import random

    pool, excluded = _pool_minus_cases(cand, pools)
    order = sorted(q for q in set(pool) if q not in excluded)
    random.Random(f"{gc.seed}|{gc.epoch}|{gc.step}|{prefix}").shuffle(order)
    return _one_block([order[i % len(order)] for i in range(params_of(CapEvolveParams, gc.params).cap_evolve_n)] if order else [],
                      gate_sample_start(prefix))


def _no_questions_source(gc: GateContext, cand: Candidate, pools: GatePools, warm: bool, prefix: str) -> PlannedGate:
    return PlannedGate(None)


QuestionSource = Callable[[GateContext, Candidate, GatePools, bool, str], PlannedGate]

# AcceptanceRule.questions -> how the gate's questions are chosen (kernel/rules.py documents the names)
QUESTION_SOURCES: dict[str, QuestionSource] = {
    "sampling": _sampling_source,
    "step_minibatch": _step_minibatch_source,
    "selection_split": _selection_split_source,
    "random_fixed_n": _random_fixed_n_source,
    "none": _no_questions_source,
}


def _accept_all_outcome(prefix: str) -> ValidationOutcome:
    verdict = GateVerdict("accept", 0.0, 0.0, 0, 0, 0, 0, "accept_all rule: no rollouts")
    return ValidationOutcome(action="accept", verdict=verdict, gate_run_id=prefix)


def _screen_accept_outcome(prefix: str, screened: ScreenResult) -> ValidationOutcome:
    """gate.screen_accept: a clear win on the step's questions, installed without a gate."""
    verdict = GateVerdict("accept", 0.0, 0.0, screened.wins, screened.losses, screened.ties, screened.n_pairs,
                          f"{screened.reason}; accepted at the screen (gate.screen_accept)")
    return ValidationOutcome(action="accept", verdict=verdict, gate_run_id=prefix)


def gate_batch_skills(gc: GateContext, state: Any, candidates: Sequence[Candidate], pools: GatePools) -> tuple[list[dict], list[str]]:
    """Gate every candidate (sorted task types); mutates `state` and the workspace.

    Returns (step-report rows, skill keys that started a cooldown this step).
    """
    from harness.loop.context import Throttle

    rows: list[dict] = []
    just_cooled: list[str] = []
    throttle = Throttle(5.0)
    ordered = sorted(candidates, key=lambda c: c.task_type)
    for n, cand in enumerate(ordered, 1):
        rows.append(_gate_one(gc, state, cand, pools, just_cooled))
        throttle.info("[gate@e%d.s%d] %d/%d candidates gated (%s: %s)", gc.epoch, gc.step, n, len(ordered), cand.key, rows[-1]["action"])
    return rows, just_cooled


def _gate_one(gc: GateContext, state: Any, cand: Candidate, pools: GatePools, just_cooled: list[str]) -> dict:
    rec = cand.record
    manifest = wsp.read_manifest(gc.workspace_dir)
    sv_before, pv = manifest.skills_version, manifest.prompts_version
    base = {"epoch": gc.epoch, "step": gc.step, "task_type": cand.task_type, "skill_file": cand.skill_file,
            "edits_proposed": len(rec.edits), "edits_applied": len(rec.applied_edits), "skills_version_before": sv_before,
            "source": cand.source}
    skills_tree = read_version_tree(gc.workspace_dir / "skills", sv_before)
    prompts_tree = read_version_tree(gc.workspace_dir / "prompts", pv)
    if skills_tree.get(cand.skill_file, "") != rec.old_text:  # a new skill file has old_text "" (stage_evolve)
        # another accept of this step already changed the file: the candidate was built on stale text
        return step_report_row(**base, action="skipped_stale", reason="skill file changed earlier in this step")
    prefix = gate_run_prefix(gc.run_name, gc.epoch, gc.step, cand.key)
    baseline_view = wsp.compose_view(skills_tree, prompts_tree)
    candidate_view = wsp.compose_view(skills_tree.with_files({cand.skill_file: rec.new_text}), prompts_tree)
    warm = any(state.gate_epoch_observed.get(tt, False) for tt in cand.task_types)
    params, fdr_fields = _gate_level(gc, state)
    rule = rule_for(gc.params)
    accepted_at_screen: Optional[ScreenResult] = None
    if gc.params.screen and rule.sequential:
        screened = _screen(gc, cand, candidate_view, prefix)
        if screened is not None and not screened.passed:
            state.rejected_buffer.setdefault(cand.key, []).append(RejectedEdit(
                task_type=cand.key, skill_file=cand.skill_file, summary=rejected_summary(rec), epoch=gc.epoch, step=gc.step,
                reason=screened.reason))
            return step_report_row(**base, action="reject", reason=screened.reason, gate_run_id=prefix, wins=screened.wins,
                                   losses=screened.losses, ties=screened.ties, n_pairs=screened.n_pairs,
                                   rollouts=len(screened_qids(gc, cand)), skills_version_after=sv_before, probation_opened=False,
                                   screen="failed")
        accept_at = params_of(ScreenParams, gc.params).screen_accept
        if (accept_at > 0 and screened is not None and screened.wins - screened.losses >= accept_at
                and not FDR_PROCEDURES.get(gc.params.fdr).run_level):  # strict mode: only e-process crossings install
            accepted_at_screen = screened
        # the report's `screen` field (passed / no_questions / accepted); "accepted" derives from accepted_at_screen, the result the outcome is built from
        fdr_fields["screen"] = ("accepted" if accepted_at_screen is not None else
                                "passed" if screened is not None else "no_questions")
    if accepted_at_screen is not None:  # a clear win on the step's questions: no gate (gate.screen_accept)
        outcome = _screen_accept_outcome(prefix, accepted_at_screen)
    elif rule.questions == "none":  # decides without rollouts (accept_all)
        outcome = _accept_all_outcome(prefix)
    else:
        planned = QUESTION_SOURCES[rule.questions](gc, cand, pools, warm, prefix)
        if planned.planner is None:
            return step_report_row(**base, action="skipped_no_questions", reason="no validation questions for this skill", gate_run_id=prefix)
        block_params = (dataclasses.replace(params, block_size=planned.single_block_size)
                        if rule.single_block and planned.single_block_size else params)
        known = planned.known_baseline
        wsp.record_run(gc.workspace_dir, f"{prefix}_base")
        wsp.record_run(gc.workspace_dir, f"{prefix}_cand")
        informing: dict[str, frozenset[int]] = {}  # the leak guard on every plan, not only the static ladder
        for tt in cand.task_types:
            if tt in pools.task_types:
                informing.update(pools.informing_samples(tt))
        progress = GateProgress(f"gate@e{gc.epoch}.s{gc.step} {cand.task_type}", block_params.max_pairs,
                                accept_at=block_params.lambda_accept if rule.sequential else None)
        progress.start()
        outcome = asyncio.run(validate_skill_local(GateRequest(
            task_type=cand.task_type, skill_file=f"skills/{cand.skill_file}", baseline_tree=baseline_view,
            candidate_tree=candidate_view, plan=planned.planner, questions=gc.questions, rollout=gc.rollout, params=block_params,
            gate_run_prefix=prefix, workspace_dir=gc.workspace_dir,
            epoch=gc.epoch, step=gc.step, known_baseline=known, informing_samples=informing, on_block=progress,
        )))
        write_gate_evidence(gc.runlog_path, outcome.evidence)
        write_quadrant_pairs(gc.runlog_path, gate_run_id=prefix, epoch=gc.epoch, step=gc.step, task_type=cand.task_type,
                             action=outcome.action, pairs=outcome.pairs)
    v = outcome.verdict
    if rule.sequential:
        procedure = FDR_PROCEDURES.get(gc.params.fdr)
        state.gate_fdr = procedure.record(state.gate_fdr, gc.params, discovered=outcome.action == "accept")
        fdr_fields.update(procedure.report(state.gate_fdr))
    screen_rollouts = len(screened_qids(gc, cand)) if fdr_fields.get("screen") in ("passed", "accepted") else 0
    gate_fields = dict(gate_run_id=prefix, log_e=v.log_e, log_lr_dir=v.log_lr_dir, wins=v.wins, losses=v.losses, ties=v.ties,
                       n_pairs=v.n_pairs, rollouts=outcome.rollouts + screen_rollouts, reason=v.reason, **fdr_fields)
    action = outcome.action
    if action == "probation" and cand.skill_file == DEFAULT_FILE:
        action = "reject"
        gate_fields["reason"] = f"{v.reason}; the default strategy cannot be put on probation"
    if action in ("accept", "probation"):
        new_version = _install(gc, state, cand, outcome, skills_tree, kind="accepted" if action == "accept" else "probation",
                               sv_before=sv_before)
        just_cooled.append(cand.key)
        return step_report_row(**base, **gate_fields, action=action, skills_version_after=new_version,
                               probation_opened=cand.skill_file != DEFAULT_FILE)
    if action == "reject":
        state.rejected_buffer.setdefault(cand.key, []).append(RejectedEdit(
            task_type=cand.key, skill_file=cand.skill_file, summary=rejected_summary(rec), epoch=gc.epoch, step=gc.step,
            reason=gate_fields["reason"]))
    return step_report_row(**base, **gate_fields, action=action, skills_version_after=sv_before, probation_opened=False)


def _gate_level(gc: GateContext, state: Any) -> tuple[GateParams, dict]:
    """The params this gate runs with and its report fields: a sequential rule's accept threshold comes from the
    run-level procedure of `gate.fdr` (kernel/fdr.py FDR_PROCEDURES: e-LOND's ln(1 / alpha_t), or gate.lambda)."""
    if not rule_for(gc.params).sequential:
        return gc.params, {}
    level = FDR_PROCEDURES.get(gc.params.fdr).level(state.gate_fdr, gc.params)
    return dataclasses.replace(gc.params, lambda_accept=level.lambda_accept), dict(level.fields)


def screened_qids(gc: GateContext, cand: Candidate) -> list[str]:
    """The step's own questions of the candidate's task types with a definite step-rollout outcome (screen, GEPA)."""
    return sorted(q for q, v in gc.batch_outcomes.items() if v is not None and gc.questions[q].task_type in cand.task_types)


def _screen(gc: GateContext, cand: Candidate, candidate_view: HarnessTree, prefix: str) -> Optional[ScreenResult]:
    """The candidate on the step's own questions (fresh sample indices, a `_gate_` run id, so the ladder never
    sees it), paired with the step rollout's outcomes; None when the step has no question of these task types."""
    from harness.loop.validate import materialize_candidate

    qids = screened_qids(gc, cand)
    if not qids:
        return None
    run_id = screen_run_id(prefix)
    start = gate_sample_start(run_id)
    wsp.record_run(gc.workspace_dir, run_id)
    cand_dir = materialize_candidate(gc.workspace_dir, candidate_view, f"{cand.task_type}-screen")
    try:
        view = HarnessTree.load(cand_dir)
        requests = [(q, start + i) for i, q in enumerate(qids)]
        got = asyncio.run(gc.rollout(view, [(gc.questions[q], i) for q, i in requests], run_id))
    finally:
        shutil.rmtree(cand_dir, ignore_errors=True)
    return screen_verdict([bool(gc.batch_outcomes[q]) for q in qids], gate_outcomes(got, requests), margin=params_of(ScreenParams, gc.params).screen_margin)


def _install(gc: GateContext, state: Any, cand: Candidate, outcome: ValidationOutcome, skills_tree: HarnessTree, *,
             kind: str, sv_before: str) -> str:
    """Accept / probation: snapshot before merging, promote, merge correctness, clear blacklist, open probation."""
    affected = [q for tt in cand.task_types for q in gc.validation_by_type.get(tt, ())]
    snapshot = {q: bool(state.correctness[q]) for q in affected if q in state.correctness}  # BEFORE the merge
    for p in outcome.pairs:  # the gate's own baseline samples describe the anchor version too
        if p.baseline is not None:
            snapshot.setdefault(p.qid, bool(p.baseline))
    new_version = wsp.promote(gc.workspace_dir, "skills", skills_tree.with_files({cand.skill_file: cand.record.new_text}),
                              {"reason": f"gate {kind}", "epoch": gc.epoch, "step": gc.step, "task_type": cand.task_type})
    for qid, value in outcome.candidate_correctness.items():
        state.correctness[qid] = bool(value)
    state.rejected_buffer.pop(cand.key, None)  # blacklist cleared: the file changed, old rejections describe old text
    state.changed_task_types_this_epoch |= set(cand.task_types)
    if gc.cooldown_steps > 0:
        state.gate_cooldown[cand.key] = int(gc.cooldown_steps)
    if cand.skill_file != DEFAULT_FILE:
        pending = [RejectedEdit(task_type=cand.key, skill_file=cand.skill_file, summary=rejected_summary(cand.record),
                                epoch=gc.epoch, step=gc.step, reason=f"rolled back at probation settlement ({kind})")]
        new = Probation(task_type=cand.key, skill_file=cand.skill_file, anchor_skills_version=sv_before,
                        opened_epoch=gc.epoch, opened_step=gc.step, correctness_snapshot=snapshot,
                        pending_edits=pending, accepted_version=new_version, kind=kind)
        state.open_probation(cand.key, new)
    return new_version
