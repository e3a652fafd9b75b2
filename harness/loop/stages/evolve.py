"""evolve@e.s: diagnosis of the step rollout's failures and one candidate edit per skill file of the batch.

Writes an `EvolveDoc` (evolve.json). `evolve.method=h2` hands the proposal to
Harness² (harness/loop/evolve_h2.py) with the same inputs (`begin_evolve`,
`evolve_inputs`) and the same document.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from harness import workspace as wsp
from harness.bench.jsonl import seeded_skill
from harness.contracts.solver import resolve_skill_file
from harness.evolution.diagnose import run_diagnosis
from harness.evolution.evolve import evolve_single_skill
from harness.inputs import InputFileError, rerun_advice
from harness.kernel.budget import edit_budget_at
from harness.kernel.types import CaseSample, SkillCasePack, ToolCasePack
from harness.log import RunLogReader
from harness.loop import rollouts as ro
from harness.loop.context import StageContext
from harness.loop.documents import EVOLVE, CandidateDoc, EvolveDoc, RolloutDoc, SkippedDoc, write_document
from harness.loop.gating import DEFAULT_FILE, skill_key
from harness.loop.stages.rollout import read_rollout
from harness.loop.state import RUNLOG, WORKSPACE, fresh_output, load_state, mark_done, read_lineage, require_done
from harness.loop.train_state import TrainState
from harness.store import read_version_tree
from harness.tree import HarnessTree

progress = logging.getLogger("harness.progress")


@dataclass(frozen=True)
class EvolveInputs:
    """What both evolve methods read from the previous state and the step rollout."""

    state: TrainState
    run_id: str
    outcomes: dict[str, Optional[bool]]  # qid -> outcome of the step rollout
    sample_index: int
    reader: RunLogReader  # the rollout's run log
    cases: list[CaseSample]
    tool_packs: dict[str, ToolCasePack]
    tree: HarnessTree  # the solver's view of the previous harness
    skills: Mapping[str, str]  # skill file -> text (current version)
    groups: list[tuple[str, list[str]]]  # (skill file, the batch's task types that resolve to it), by first task type


def begin_evolve(prev_state: Path, rollout: Path, out: Path, *, method: str) -> Optional[tuple[Path, Path, RolloutDoc]]:
    """(prev, fresh out, rollout doc); None after writing the stopped evolve.json when training stopped."""
    prev = require_done(Path(prev_state), "previous step")
    out = fresh_output(Path(out))
    ro_doc = read_rollout(Path(rollout))
    if read_lineage(prev).stopped or ro_doc.stopped:
        write_document(out / EVOLVE, EvolveDoc(run_id=None, method=method, edit_budget=None, stopped=True))
        mark_done(out, {"stopped": True})
        return None
    return prev, out, ro_doc


def evolve_inputs(ctx: StageContext, epoch: int, prev: Path, rollout: Path, ro_doc: RolloutDoc) -> EvolveInputs:
    state, _ = load_state(prev)
    qs = ctx.questions()
    run_id, outcomes = ro_doc.run_id, ro_doc.outcomes
    if ro_doc.sample_index is None:
        raise ValueError(f"{rollout}: a finished (not stopped) rollout has no sample_index")
    reader = RunLogReader([Path(rollout) / RUNLOG])
    require_prediction_rows(reader, Path(rollout) / RUNLOG, run_id, outcomes)
    tree = wsp.harness_view(prev / WORKSPACE)
    groups: dict[str, list[str]] = {}
    for tt in sorted({qs[q].task_type for q in outcomes}):
        groups.setdefault(resolve_skill_file(tree, tt)[len("skills/"):], []).append(tt)
    return EvolveInputs(
        state=state, run_id=run_id, outcomes=outcomes, sample_index=ro_doc.sample_index, reader=reader,
        cases=ro.case_samples(reader, run_id, qs, outcomes), tool_packs=ro.tool_packs(reader, run_id, epoch), tree=tree,
        skills=read_version_tree(prev / WORKSPACE / "skills", wsp.read_manifest(prev / WORKSPACE).skills_version),
        groups=sorted(groups.items(), key=lambda kv: kv[1][0]),
    )


def require_prediction_rows(reader: RunLogReader, runlog: Path, run_id: str, outcomes: Mapping[str, Optional[bool]]) -> None:
    """InputFileError naming the run log when it holds fewer rows of `run_id` than the rollout's outcomes.json scored (an
    emptied or truncated table would otherwise read as "no failures": 0 candidates, exit 0)."""
    scored = sum(v is not None for v in outcomes.values())
    rows = reader.query("SELECT COUNT(*) AS n FROM predictions WHERE run_id = ? AND correct IS NOT NULL", (run_id,))[0]["n"]
    if rows < scored:
        raise InputFileError(f"{runlog}: the run log holds {rows} scored prediction rows of run {run_id}, but the rollout's "
                             f"outcomes.json lists {scored}: the table was emptied or truncated; {rerun_advice(runlog)}")


def skill_groups(groups: list[tuple[str, list[str]]], failures: Mapping[str, list[CaseSample]],
                 min_failures: int) -> list[tuple[str, list[str], Optional[str]]]:
    """(skill file, task types, shared file it is seeded from or None) per candidate of the step.

    With `min_failures` >= 2 a task type reading the shared default-strategy file whose batch has at least
    that many failures gets a candidate new file `<task_type>/SKILL.md` of its own (the editor may still
    answer no-change); the shared file's candidate then covers the other task types only."""
    out: list[tuple[str, list[str], Optional[str]]] = []
    for f, tts in groups:
        split = [tt for tt in tts if min_failures and f == DEFAULT_FILE and len(failures.get(tt, [])) >= min_failures]
        rest = [tt for tt in tts if tt not in split]
        if rest:
            out.append((f, rest, None))
        out.extend((f"{tt}/SKILL.md", [tt], f) for tt in split)
    return sorted(out, key=lambda item: (item[1][0], item[0]))


def stage_evolve(ctx: StageContext, epoch: int, step: int, prev_state: Path, rollout: Path, out: Path) -> None:
    """The evolve stage: the proposer of `evolve.method` (registry harness.loop.proposers.PROPOSERS)."""
    from harness.loop.proposers import PROPOSERS

    return PROPOSERS.get(str(ctx.cfg.evolve.method))(ctx, epoch, step, prev_state, rollout, out)


def stage_evolve_reflective(ctx: StageContext, epoch: int, step: int, prev_state: Path, rollout: Path, out: Path) -> None:
    """Reflective proposer: diagnosis of the step rollout's failures, slow case packs, one candidate per skill file."""
    begun = begin_evolve(prev_state, rollout, out, method=str(ctx.cfg.evolve.method))
    if begun is None:
        return
    prev, out, ro_doc = begun
    inp = evolve_inputs(ctx, epoch, prev, rollout, ro_doc)
    state, run_id, cases = inp.state, inp.run_id, inp.cases
    llm = ctx.llm()
    diagnosis = asyncio.run(run_diagnosis(llm, run_id=run_id, failures=cases, concurrency=int(ctx.cfg.llm.concurrency),
                                          sample_index=inp.sample_index, prompts=ctx.meta_prompts()))
    n_steps = int(ctx.cfg.train.steps_per_epoch)
    total = int(ctx.cfg.train.epochs) * n_steps
    budget = edit_budget_at((epoch - 1) * n_steps + (step - 1), total, int(ctx.cfg.evolve.edit_budget_start), int(ctx.cfg.evolve.edit_budget_end))
    max_cases = int(ctx.cfg.evolve.max_case_questions)
    candidates: list[CandidateDoc] = []
    skipped: list[SkippedDoc] = []
    groups = skill_groups(inp.groups, diagnosis.failures, int(ctx.cfg.evolve.new_skill_min_failures))
    for n, (f, tts, seeded_from) in enumerate(groups):
        key = skill_key(f)
        fails = [c for tt in tts for c in diagnosis.failures.get(tt, [])][:max_cases]
        if state.gate_cooldown.get(key, 0) > 0:
            skipped.append(SkippedDoc(tts[0], tts, f, "skipped_cooldown", f"cooldown {state.gate_cooldown[key]} step(s) left"))
            continue
        if not fails:
            skipped.append(SkippedDoc(tts[0], tts, f, "skipped_no_failures", "no failure of this skill in the batch"))
            continue
        diagnoses = [d for tt in tts for d in diagnosis.by_task_type.get(tt, [])]
        text = inp.skills[f] if seeded_from is None else seeded_skill(tts[0], inp.skills[seeded_from])
        rec = asyncio.run(evolve_single_skill(
            llm, task_type=tts[0], skill_file=f"skills/{f}", skill_text=text,
            case_pack=SkillCasePack(task_type=tts[0], skill_file=f, cases=fails), diagnoses=diagnoses,
            rejected=state.rejected_buffer.get(key, []), edit_budget=budget, sample_index=inp.sample_index * 100 + n,
            max_chars=int(ctx.cfg.evolve.max_skill_chars), seeded_from=None if seeded_from is None else f"skills/{seeded_from}",
            prompts=ctx.meta_prompts()))
        rec.skill_file = f
        if seeded_from is not None and rec.applied_edits:
            rec.old_text = ""  # a new file: the gate installs it where there was none
        if not rec.changed or (seeded_from is not None and not rec.applied_edits):
            why = rec.parse_error or rec.no_change_reason or "no edit applied"
            skipped.append(SkippedDoc(tts[0], tts, f, "skipped_no_change", why, edits_proposed=len(rec.edits), record=rec))
            continue
        candidates.append(CandidateDoc(tts[0], tts, f, case_qids=[c.qid for c in fails], record=rec))
    write_document(out / EVOLVE, EvolveDoc(
        run_id=run_id, method=str(ctx.cfg.evolve.method), edit_budget=budget, candidates=candidates, skipped=skipped,
        system_cases=[c for c in cases if not c.correct], tool_packs=dict(inp.tool_packs), diagnosis_usd=diagnosis.usd,
        diagnosis_cases=sum(len(v) for v in diagnosis.failures.values()), diagnosis_unparseable=diagnosis.n_unparseable))
    mark_done(out, {"candidates": len(candidates), "skipped": len(skipped)}, spend=ctx.take_spend())
    progress.info("[evolve@e%d.s%d] %d candidates, %d skipped (edit budget %d)", epoch, step, len(candidates), len(skipped), budget)
