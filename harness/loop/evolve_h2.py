"""`evolve=h2`: the evolve stage with Harness² as the per-skill proposer.

For every skill file the reflective path would evolve this step (same
grouping of task types by skill file, same cooldown and no-failure skips),
one Harness² round (`harness.h2.run.improve_task`, settings `h2_round.*`:
k, mode, hard budget gates `budget_usd` and `max_sessions` per skill, the
config `stages.improve` reads too) runs on a `SkillStepTask`:

- tree: the solver's view at the step (native surface); only the group's
  skill file may change (other changes are rejected by the validator);
- base rollout: the step rollout itself on the probe questions (already
  paid in the step, booked at 0 USD in the round's ledger);
- probe questions: the step's failing questions of the group, plus up to a
  quarter of `evolve.h2_probe_questions` passing ones for balance;
- probes: the loop's solver under `Role.PROBE`, logged into this stage's
  run-log fragment (kind `h2_probe`), fresh sample indices (loop_bridge).

The delivered tree becomes the same candidate record the gate consumes
(`EvolutionRecord` with the skill's old and new text, the line-diff hunks as
its applied edits); a delivered base is `skipped_no_change`. The gate then
validates it exactly like a reflective edit: Harness² adoption never
installs anything by itself. No library is written from the loop (no
reflector call, no auto_apply): the gate's verdict arrives only after this
stage, and an unvalidated "experience" would be exactly what seed 002's
library rules keep out.

Output: `evolve.json` with the reflective keys (candidates, skipped,
system_cases, tool_packs, edit_budget = None, diagnosis_usd = 0) plus
`method: "h2"` and `h2: {usd, probe_rollouts, probe_usd, probe_executions, sessions}`; per skill the round's
artifacts under `out/h2/<key>/` (summary.json, ledger.json, delivered/,
contexts/); `runlog.sqlite` with the probe rollouts.
"""

from __future__ import annotations

import asyncio
import difflib
import random
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

from harness.config.schema import max_tokens_for
from harness.h2.loop_bridge import AsRole, SkillStepTask, rollout_of
from harness.h2.roles import Roles
from harness.h2.surfaces import NATIVE
from harness.h2.validator import validate_tree
from harness.identity import h2_probe_run_prefix
from harness.kernel.types import CaseSample, Edit, EditApplication, EvolutionRecord
from harness.llm.protocol import LLMProvider, Role
from harness.log import HarnessLog, RunLogReader
from harness.loop.context import StageContext
from harness.loop.documents import EVOLVE, CandidateDoc, EvolveDoc, SkippedDoc, write_document
from harness.loop.state import RUNLOG, mark_done
from harness.tree import HarnessTree

H2_APPLIED = "applied"


def probe_qids(failing: Sequence[str], passing: Sequence[str], n: int, seed: str) -> list[str]:
    """Up to `n` probe questions: failing ones first, up to n // 4 passing ones kept for balance (seeded order)."""
    rng = random.Random(seed)
    fail, ok = sorted(failing), sorted(passing)
    rng.shuffle(fail)
    rng.shuffle(ok)
    n_ok = min(len(ok), n // 4)
    chosen = fail[: n - n_ok]
    chosen += ok[: n - len(chosen)]
    return sorted(chosen)


def hunk_edits(old: str, new: str, rationale: str = "") -> list[Edit]:
    """The line-diff hunks of old -> new as edit ops (add / delete / replace), for the report and the blacklist."""
    a, b = old.splitlines(), new.splitlines()
    edits: list[Edit] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        old_part, new_part = "\n".join(a[i1:i2]), "\n".join(b[j1:j2])
        op = {"insert": "add", "delete": "delete", "replace": "replace"}[tag]
        edits.append(Edit(op=op, text=new_part, old=old_part, rationale=rationale))
    return edits


def record_from_delivered(task_type: str, skill_file: str, old_text: str, new_text: str, *, notes: str, usd: float,
                          no_change_reason: str = "") -> EvolutionRecord:
    """The gate's candidate record for a Harness² round (skill_file is the path inside the skills tree)."""
    edits = hunk_edits(old_text, new_text, notes) if new_text != old_text else []
    report = [EditApplication(edit=e, status=H2_APPLIED, detail="Harness² delivered tree") for e in edits]
    return EvolutionRecord(task_type=task_type, skill_file=skill_file, old_text=old_text, new_text=new_text, edits=edits,
                           apply_report=report, no_change_reason=no_change_reason, usd=float(usd))


def run_tag_for(run_name: str, epoch: int, step: int) -> str:
    """A valid h2 run tag (identity of the round's sessions: same step -> cache hits, another step -> fresh samples)."""
    safe = re.sub(r"[^A-Za-z0-9._-]+", "-", run_name).strip("-._")[:40] or "run"
    return f"loop-{safe}-e{epoch}s{step}"


def h2_roles(llm: LLMProvider) -> Roles:
    """Editor and selector over the shared provider; each role's model is `llm.models.<role>`, else `llm.model`."""
    return Roles.from_provider(llm)


@dataclass
class SkillRound:
    """The result of one skill's round, as the evolve stage records it."""

    candidate: Optional[CandidateDoc]  # None: skipped
    skipped: Optional[SkippedDoc]
    usd: float  # the round's ledger total (editor/selector sessions + probe executions)
    rollouts: int  # probe executions (the shared base rollout excluded: paid in the step)
    sessions: int


def _notes(summary: Mapping[str, Any]) -> str:
    chosen = summary.get("selection", {}).get("chosen")
    parts = [f"{s['stage']} {s['label']}: {s['notes']}" for s in summary.get("stages", []) if s.get("notes") and s.get("status") == "adopted"]
    return f"Harness² ({summary.get('mode')}, k={summary.get('k')}, delivered {chosen or 'base'}): " + ("; ".join(parts) or "no notes")


def _base_rollout(task: SkillStepTask, run_tag: str, reader: RunLogReader, step_run_id: str) -> Any:
    """The step rollout on the probe questions as the round's base rollout (None when a question has no record)."""
    from harness.identity import idempotency_key

    preds = {r["qid"]: r for r in reader.predictions(run_id=step_run_id)}
    if any(q.qid not in preds for q in task.questions):
        return None
    steps = {q.qid: [(t["kind"], t["content"]) for t in reader.traces(step_run_id, q.qid)] for q in task.questions}
    label = idempotency_key(run_tag, "base", f"{task.task_id}.base")
    return rollout_of(label, task.base, task.questions, {q.qid: preds[q.qid]["predicted"] for q in task.questions}, steps,
                      meta={"run_id": step_run_id, "from": "step rollout"})


async def evolve_skill_h2(ctx: StageContext, *, epoch: int, step: int, group: Sequence[str], skill_file: str, tree: HarnessTree,
                          skill_text: str, qids: Sequence[str], cases: Sequence[CaseSample], outcomes: Mapping[str, Optional[bool]],
                          rejected: Sequence[str], log: HarnessLog, reader: RunLogReader, step_run_id: str, work_dir: Path,
                          llm: LLMProvider) -> SkillRound:
    """One Harness² round for the skill file `skill_file` (inside the skills tree) read by task types `group`."""
    from harness.h2.run import improve_task
    from harness.loop.gating import skill_key

    cfg, qs = ctx.cfg, ctx.questions()
    key = skill_key(skill_file)
    info: dict[str, Any] = {"task_type": group[0], "task_types": list(group), "skill_file": skill_file}  # SkippedDoc/CandidateDoc head
    failing = [c.qid for c in cases if not c.correct and c.task_type in group]
    passing = [q for q in qids if qs[q].task_type in group and outcomes.get(q) is True]
    probe = probe_qids(failing, passing, int(cfg.evolve.h2_probe_questions), f"{cfg.train.seed}|{epoch}|{step}|{key}")
    target = f"skills/{skill_file}"
    bench = ctx.bench()
    task = SkillStepTask(
        task_id=key, task_type=group[0], task_types=list(group), target=target, base=tree, questions=[qs[q] for q in probe],
        llm=AsRole(llm, Role.PROBE), log=log, run_id_prefix=h2_probe_run_prefix(ctx.run_name, epoch, step, key), scorer=bench.score,
        tool_dispatch=bench.tool_dispatch, params={"temperature": float(cfg.llm.temperature), "max_tokens": max_tokens_for(cfg.llm, Role.PROBE.value)},
        max_steps=int(cfg.llm.max_agent_steps), concurrency=int(cfg.llm.concurrency), rejected_edits=rejected,
    )
    verdict = validate_tree(tree, NATIVE, adapter_checks=(task.validate_tree,))
    if not verdict.ok:
        return SkillRound(None, SkippedDoc(**info, action="skipped_h2_invalid_base",
                                           reason="the step's harness fails the native surface: " + "; ".join(verdict.errors[:3])), 0.0, 0, 0)
    run_tag = run_tag_for(ctx.run_name, epoch, step)
    base_rollout = _base_rollout(task, run_tag, reader, step_run_id)
    rnd = cfg.h2_round
    result = await improve_task(
        task, h2_roles(llm), work_dir=work_dir, k=int(rnd.k), mode=str(rnd.mode), run_tag=run_tag,
        library=None, budget_usd=None if rnd.budget_usd is None else float(rnd.budget_usd),
        max_sessions=None if rnd.max_sessions is None else int(rnd.max_sessions),
        auto_apply=False, base_rollout=base_rollout, base_paid=base_rollout is not None, resume=False,
    )
    s = result.summary
    ledger = s["ledger"]
    probe_rollouts = ledger["rollouts"] - (0 if base_rollout is None else 1)  # the shared base was paid in the step
    delivered = result.delivered
    h2_info = {"work_dir": str(work_dir.name), "probe_qids": probe, "delivered_fingerprint": result.delivered_fingerprint,
               "selection": s["selection"], "fallbacks": s["fallbacks"], "budget": s["budget"], "ledger": ledger,
               "probe_runs": sorted(task.run_ids.values())}
    new_text = delivered.get(target)
    stray = [p for p in sorted(set(delivered) | set(tree)) if p != target and delivered.get(p) != tree.get(p)]
    if stray:  # the validator rejects these; kept as a second line of defence, and recorded
        h2_info["dropped_files"] = stray
    if result.delivered_is_base or new_text is None or new_text == skill_text:
        why = "Harness² delivered the base tree" if result.delivered_is_base else "the delivered tree leaves the skill file unchanged"
        detail = s["selection"].get("why") or s["selection"].get("error") or ""
        if s["budget"].get("tripped"):
            detail = f"budget gate: {s['budget']['tripped']}"
        return SkillRound(None, SkippedDoc(**info, action="skipped_no_change", reason=f"{why} ({s['selection'].get('method')}{': ' + detail if detail else ''})",
                                           edits_proposed=0, h2=h2_info), ledger["total_usd"], probe_rollouts, ledger["sessions"])
    max_chars = int(cfg.evolve.max_skill_chars)
    if len(new_text) > max_chars:
        return SkillRound(None, SkippedDoc(**info, action="skipped_too_long", reason=f"delivered skill is {len(new_text)} chars > evolve.max_skill_chars {max_chars}",
                                           h2=h2_info), ledger["total_usd"], probe_rollouts, ledger["sessions"])
    rec = record_from_delivered(group[0], skill_file, skill_text, new_text, notes=_notes(s), usd=ledger["total_usd"])
    # the editors saw the probe questions: like a case pack, they stay out of the gate's sampling plan
    cand = CandidateDoc(**info, case_qids=probe, record=rec, h2=h2_info)
    return SkillRound(cand, None, ledger["total_usd"], probe_rollouts, ledger["sessions"])


def stage_evolve_h2(ctx: StageContext, epoch: int, step: int, prev_state: Path, rollout: Path, out: Path) -> None:
    """`stage_evolve` under `evolve.method=h2` (same inputs, same evolve.json contract; see the module docstring)."""
    from harness.loop.gating import skill_key
    from harness.loop.stages.evolve import begin_evolve, evolve_inputs, progress

    begun = begin_evolve(prev_state, rollout, out, method="h2")
    if begun is None:
        return
    prev, out, ro_doc = begun
    inp = evolve_inputs(ctx, epoch, prev, rollout, ro_doc)
    state, run_id, outcomes, reader, cases, tree = inp.state, inp.run_id, inp.outcomes, inp.reader, inp.cases, inp.tree
    llm = ctx.llm()
    todo: list[tuple[str, list[str]]] = []
    skipped: list[SkippedDoc] = []
    for f, tts in inp.groups:
        key = skill_key(f)
        if state.gate_cooldown.get(key, 0) > 0:
            skipped.append(SkippedDoc(tts[0], tts, f, "skipped_cooldown", f"cooldown {state.gate_cooldown[key]} step(s) left"))
        elif not any(not c.correct and c.task_type in tts for c in cases):
            skipped.append(SkippedDoc(tts[0], tts, f, "skipped_no_failures", "no failure of this skill in the batch"))
        else:
            todo.append((f, tts))
    log = HarnessLog(out / RUNLOG)
    try:
        async def all_rounds() -> list[SkillRound]:
            return list(await asyncio.gather(*(evolve_skill_h2(
                ctx, epoch=epoch, step=step, group=tts, skill_file=f, tree=tree, skill_text=inp.skills[f], qids=list(outcomes),
                cases=cases, outcomes=outcomes, rejected=[r.summary for r in state.rejected_buffer.get(skill_key(f), [])],
                log=log, reader=reader, step_run_id=run_id, work_dir=out / "h2" / skill_key(f), llm=llm) for f, tts in todo)))

        rounds = asyncio.run(all_rounds()) if todo else []
        n_probe, probe_usd = log.query("SELECT COUNT(*) AS n, COALESCE(SUM(cost_usd), 0) AS usd FROM predictions")[0].values()
    finally:
        log.close()
    candidates = [r.candidate for r in rounds if r.candidate is not None]
    skipped += [r.skipped for r in rounds if r.skipped is not None]
    skipped.sort(key=lambda s: s.task_type)
    usd = sum(r.usd for r in rounds)
    # probe_rollouts/probe_usd: one per (question, sample) in this stage's run log, like every rollout of the step
    totals = {"usd": usd, "probe_rollouts": int(n_probe), "probe_usd": float(probe_usd),
              "probe_executions": sum(r.rollouts for r in rounds), "sessions": sum(r.sessions for r in rounds)}
    write_document(out / EVOLVE, EvolveDoc(run_id=run_id, method="h2", edit_budget=None, candidates=candidates, skipped=skipped,
                                           system_cases=[c for c in cases if not c.correct], tool_packs=dict(inp.tool_packs),
                                           diagnosis_usd=0.0, h2=totals))
    mark_done(out, {"candidates": len(candidates), "skipped": len(skipped), "method": "h2", **totals}, spend=ctx.take_spend())
    progress.info("[evolve@e%d.s%d] h2: %d candidates, %d skipped, %d probe rollouts, USD %.4f", epoch, step, len(candidates),
                  len(skipped), totals["probe_rollouts"], usd)
