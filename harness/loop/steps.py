"""One function per pipeline stage (docs/ARCHITECTURE.md "Stage functions"); used by
`stages/*.py` (one process each) and by `Runner.train` (all in one process).

Contract of every stage: read its input dirs, write ONLY its output path;
a workspace-carrying stage (pools/init, gate, slow) copies the previous state
dir, mutates the copy and writes DONE.json last; each stage's
runlog.sqlite holds only its own rows (readers take the chain listed in
lineage.json); the LLM response cache is shared. A stage re-run starts from
an empty output dir and costs nothing thanks to the response cache.

Once training stopped early (lineage.stopped), later step/slow stages pass
the state through unchanged, marked stopped.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Optional

from omegaconf import OmegaConf

from harness import workspace as wsp
from harness.contracts.solver import resolve_skill_file
from harness.atomic import atomic_write_json
from harness.checkpoint import Progress, TrainState, load_checkpoint, save_checkpoint
from harness.evolution.diagnose import run_diagnosis
from harness.evolution.evolve import evolve_single_skill
from harness.kernel.ladder import GatePools
from harness.kernel.types import CaseSample, EditApplication, Edit, EvolutionRecord, SkillCasePack, SystemCasePack, ToolCasePack
from harness.log import HarnessLog, RunLogReader
from harness.loop import rollouts as ro
from harness.loop.context import StageContext, by_task_type
from harness.loop.gating import Candidate, GateContext, gate_batch_skills, skill_key
from harness.loop.helpers import _apply_batch_correctness, _decrement_cooldowns, _guard_infra_failures, _should_early_stop
from harness.loop.observation import write_epoch_report, write_step_report
from harness.loop.persistence import (
    DurableBaselineCache, build_or_load_pools, create_baseline_cache_file, load_gate_pools, read_pools, save_gate_pools,
)
from harness.loop.slow_update import SlowDeps, slow_update_cycle
from harness.loop.state import (
    BASELINE_CACHE, CHECKPOINT, GATE_POOLS, REPORT, RUNLOG, WORKSPACE, Lineage, StateError, copy_state, fresh_output,
    mark_done, read_lineage, rel_to, require_done, resolve_fragments, write_lineage,
)
from harness.questions import questions_digest, write_questions
from harness.store import read_version_tree
from harness.tree import HarnessTree

progress = logging.getLogger("harness.progress")

STEP_INDEX = 1000  # step rollouts use sample index 1000*E + S


def step_run_id(run_name: str, epoch: int, step: int) -> str:
    return f"{run_name}_e{epoch}_s{step}"


def _cfg_dict(ctx: StageContext) -> dict:
    cfg = ctx.cfg
    return OmegaConf.to_container(cfg, resolve=True) if OmegaConf.is_config(cfg) else dict(cfg)


def _load_state(state_dir: Path) -> tuple[TrainState, Progress]:
    ck = load_checkpoint(state_dir / CHECKPOINT)
    return ck.state, ck.progress


def _save_state(ctx: StageContext, out: Path, state: TrainState, prog: Progress) -> None:
    save_checkpoint(out / CHECKPOINT, state, prog, _cfg_dict(ctx))


def _pools_json(path: Path) -> dict[str, list[str]]:
    return read_pools(path)


def _gate_pools(ctx: StageContext, state_dir: Path, pools: Mapping[str, list[str]]) -> GatePools:
    validation = by_task_type(pools["validation"], ctx.questions())
    from harness.kernel.ladder import pool_fingerprint

    return load_gate_pools(state_dir / GATE_POOLS, expected_fingerprint=pool_fingerprint(validation))


def _pass_through(prev: Path, out: Path, lineage: Lineage, what: str) -> None:
    copy_state_dir(prev, out)
    write_lineage(out, lineage)
    mark_done(out, {"stopped": True, "stop_reason": lineage.stop_reason, "stage": what})


def copy_state_dir(prev: Path, out: Path) -> None:
    """Carried files of `prev` into the fresh `out` (the workspace through wsp.copy_workspace)."""
    for name in (CHECKPOINT, GATE_POOLS, BASELINE_CACHE):
        src = prev / name
        if src.is_file():
            (out / name).write_bytes(src.read_bytes())
    if (prev / WORKSPACE).is_dir():
        wsp.copy_workspace(prev / WORKSPACE, out / WORKSPACE)


# ---------------------------------------------------------------- prepare, pools, batches


def stage_prepare(ctx: StageContext, out_questions: Path) -> None:
    """The benchmark adapter's questions, validated, written atomically as Parquet."""
    qs = ctx.bench().questions()
    write_questions(Path(out_questions), qs)
    progress.info("[prepare] %d questions -> %s", len(qs), out_questions)


def stage_pools(ctx: StageContext, questions: Path, out_pools: Path, out_init: Path) -> None:
    """test -> validation -> diagnosis split (frozen once written) and the initial state at v0/v0."""
    from harness.kernel.pools import PoolParams

    qs = ctx.questions(Path(questions))
    pools = build_or_load_pools(Path(out_pools), list(qs.values()), PoolParams.from_config(ctx.cfg.pools)).to_json()
    out = fresh_output(Path(out_init))
    base = ctx.bench().base_harness()
    skills = base.subtree("skills")
    prompts = base.with_files({p: None for p in base if p.startswith("skills/")})
    qpath = Path(questions) if Path(questions).is_absolute() else ctx.root / questions
    # `<path>@sha256:<digest>` with the path relative to the project root (state stays relocatable)
    ref = f"{rel_to(ctx.root, qpath)}@sha256:{questions_digest(qpath)}"
    wsp.init_workspace(out / WORKSPACE, skills, prompts, ref, base=ctx.root)
    save_gate_pools(out / GATE_POOLS, GatePools.build(by_task_type(pools["validation"], qs)))
    create_baseline_cache_file(out / BASELINE_CACHE)
    state = TrainState(epoch_start_skills=dict(skills.to_dict()))
    _save_state(ctx, out, state, Progress(epoch=1, step=0, phase="epoch_done"))
    write_lineage(out, Lineage())
    mark_done(out, {"stage": "pools", "skills_version": "v0", "prompts_version": "v0"})
    progress.info("[pools] test %d, validation %d, diagnosis %d", len(pools["test"]), len(pools["validation"]), len(pools["diagnosis"]))


def stage_batches(ctx: StageContext, epoch: int, prev_state: Path, pools: Path, out: Path) -> None:
    """The epoch's mini-batches of the diagnosis pool (FFD + round-robin + correctness mixing), deterministic."""
    from harness.kernel.batching import BatchParams, make_batches

    prev = require_done(Path(prev_state), "previous epoch")
    state, _ = _load_state(prev)
    p = _pools_json(Path(pools))
    qs = ctx.questions()
    batches = make_batches({q: qs[q].task_type for q in p["diagnosis"]}, BatchParams.from_config(ctx.cfg.batching),
                           seed=int(ctx.cfg.train.seed), epoch=int(epoch), correctness=state.correctness)
    atomic_write_json(Path(out), batches.to_json())
    progress.info("[batches@e%d] %d batches", epoch, len(batches.batches))


# ---------------------------------------------------------------- rollout, evolve, gate


def _batch_of(batches: Path, step: int) -> list[str]:
    d = json.loads(Path(batches).read_text(encoding="utf-8"))
    b = d["batches"]
    return list(b[step - 1]) if step <= len(b) else []


def stage_rollout(ctx: StageContext, epoch: int, step: int, prev_state: Path, batches: Path, out: Path) -> None:
    """The current harness on the step's batch: outcomes.json + this stage's run-log fragment."""
    prev = require_done(Path(prev_state), "previous step")
    out = fresh_output(Path(out))
    lineage = read_lineage(prev)
    run_id = step_run_id(ctx.run_name, epoch, step)
    if lineage.stopped:
        atomic_write_json(out / "outcomes.json", {"run_id": run_id, "sample_index": None, "outcomes": {}, "stopped": True})
        mark_done(out, {"stopped": True})
        return
    qids = _batch_of(Path(batches), step)
    m = wsp.read_manifest(prev / WORKSPACE)
    tree = wsp.harness_view(prev / WORKSPACE)
    index = STEP_INDEX * epoch + step
    log = HarnessLog(out / RUNLOG)
    try:
        log.record_run(run_id, "step", skills_version=m.skills_version, prompts_version=m.prompts_version, questions_ref=m.questions_ref)
        qs = ctx.questions()
        got = ro.run_rollouts(ctx, log, tree, [(qs[q], index) for q in qids], run_id)
    finally:
        log.close()
    n_infra = sum(v is None for v in got)
    _guard_infra_failures(n_infra, len(got), ctx.gate, f"step rollout {run_id}")
    outcomes = dict(zip(qids, got))
    atomic_write_json(out / "outcomes.json", {"run_id": run_id, "sample_index": index, "skills_version": m.skills_version,
                                              "prompts_version": m.prompts_version, "outcomes": outcomes})
    acc = sum(bool(v) for v in got if v is not None) / max(1, sum(v is not None for v in got))
    mark_done(out, {"run_id": run_id, "n": len(qids), "acc": acc})
    progress.info("[rollout@e%d.s%d] %d questions, acc %.3f", epoch, step, len(qids), acc)


def _read_outcomes(rollout: Path) -> dict:
    return json.loads((require_done(Path(rollout), "rollout") / "outcomes.json").read_text(encoding="utf-8"))


def _record_to_json(rec: EvolutionRecord) -> dict:
    return asdict(rec)


def _record_from_json(d: Mapping[str, Any]) -> EvolutionRecord:
    edits = [Edit(**e) for e in d["edits"]]
    report = [EditApplication(edit=Edit(**a["edit"]), status=a["status"], detail=a["detail"]) for a in d["apply_report"]]
    return EvolutionRecord(task_type=d["task_type"], skill_file=d["skill_file"], old_text=d["old_text"], new_text=d["new_text"],
                           edits=edits, apply_report=report, no_change_reason=d["no_change_reason"], parse_error=d["parse_error"],
                           usd=d["usd"], reply_format=d.get("reply_format", ""))


@dataclass(frozen=True)
class EvolveInputs:
    """What both evolve methods read from the previous state and the step rollout."""

    state: TrainState
    run_id: str
    outcomes: dict[str, Any]  # qid -> outcome of the step rollout
    sample_index: int
    reader: RunLogReader  # the rollout's run log
    cases: list[CaseSample]
    tool_packs: dict[str, ToolCasePack]
    tree: HarnessTree  # the solver's view of the previous harness
    skills: Mapping[str, str]  # skill file -> text (current version)
    groups: list[tuple[str, list[str]]]  # (skill file, the batch's task types that resolve to it), by first task type


def begin_evolve(prev_state: Path, rollout: Path, out: Path, *, stopped_doc: Mapping[str, Any]) -> Optional[tuple[Path, Path, dict]]:
    """(prev, fresh out, rollout doc); None after writing the stopped evolve.json when training stopped."""
    prev = require_done(Path(prev_state), "previous step")
    out = fresh_output(Path(out))
    ro_doc = _read_outcomes(Path(rollout))
    if read_lineage(prev).stopped or ro_doc.get("stopped"):
        atomic_write_json(out / "evolve.json", {"candidates": [], "skipped": [], "system_cases": [], "tool_packs": {}, "stopped": True,
                                                **stopped_doc})
        mark_done(out, {"stopped": True})
        return None
    return prev, out, ro_doc


def evolve_inputs(ctx: StageContext, epoch: int, prev: Path, rollout: Path, ro_doc: Mapping[str, Any]) -> EvolveInputs:
    state, _ = _load_state(prev)
    qs = ctx.questions()
    run_id, outcomes = ro_doc["run_id"], ro_doc["outcomes"]
    reader = RunLogReader([Path(rollout) / RUNLOG])
    tree = wsp.harness_view(prev / WORKSPACE)
    groups: dict[str, list[str]] = {}
    for tt in sorted({qs[q].task_type for q in outcomes}):
        groups.setdefault(resolve_skill_file(tree, tt)[len("skills/"):], []).append(tt)
    return EvolveInputs(
        state=state, run_id=run_id, outcomes=outcomes, sample_index=ro_doc["sample_index"], reader=reader,
        cases=ro.case_samples(reader, run_id, qs, outcomes), tool_packs=ro.tool_packs(reader, run_id, epoch), tree=tree,
        skills=read_version_tree(prev / WORKSPACE / "skills", wsp.read_manifest(prev / WORKSPACE).skills_version),
        groups=sorted(groups.items(), key=lambda kv: kv[1][0]),
    )


def stage_evolve(ctx: StageContext, epoch: int, step: int, prev_state: Path, rollout: Path, out: Path) -> None:
    """Diagnosis of the step rollout's failures, slow case packs, and one candidate per skill file of the batch."""
    from harness.kernel.budget import edit_budget_at

    if str(ctx.cfg.evolve.method) == "h2":  # Harness² proposes; the gate below validates it like any edit
        from harness.loop.evolve_h2 import stage_evolve_h2

        return stage_evolve_h2(ctx, epoch, step, prev_state, rollout, out)
    begun = begin_evolve(prev_state, rollout, out, stopped_doc={})
    if begun is None:
        return
    prev, out, ro_doc = begun
    inp = evolve_inputs(ctx, epoch, prev, rollout, ro_doc)
    state, run_id, cases = inp.state, inp.run_id, inp.cases
    llm = ctx.llm()
    diagnosis = asyncio.run(run_diagnosis(llm, run_id=run_id, failures=cases, concurrency=int(ctx.cfg.evolve.diagnose_concurrency),
                                          sample_index=inp.sample_index))
    n_steps = int(ctx.cfg.train.steps_per_epoch)
    total = int(ctx.cfg.train.epochs) * n_steps
    budget = edit_budget_at((epoch - 1) * n_steps + (step - 1), total, int(ctx.cfg.evolve.edit_budget_start), int(ctx.cfg.evolve.edit_budget_end))
    max_cases = int(ctx.cfg.evolve.max_case_questions)
    candidates, skipped = [], []
    for n, (f, tts) in enumerate(inp.groups):
        key = skill_key(f)
        fails = [c for tt in tts for c in diagnosis.failures.get(tt, [])][:max_cases]
        info = {"task_type": tts[0], "task_types": tts, "skill_file": f}
        if state.gate_cooldown.get(key, 0) > 0:
            skipped.append({**info, "action": "skipped_cooldown", "reason": f"cooldown {state.gate_cooldown[key]} step(s) left"})
            continue
        if not fails:
            skipped.append({**info, "action": "skipped_no_failures", "reason": "no failure of this skill in the batch"})
            continue
        diagnoses = [d for tt in tts for d in diagnosis.by_task_type.get(tt, [])]
        rec = asyncio.run(evolve_single_skill(
            llm, task_type=tts[0], skill_file=f"skills/{f}", skill_text=inp.skills[f],
            case_pack=SkillCasePack(task_type=tts[0], skill_file=f, cases=fails), diagnoses=diagnoses,
            rejected=state.rejected_buffer.get(key, []), edit_budget=budget, sample_index=inp.sample_index * 100 + n,
            max_chars=int(ctx.cfg.evolve.max_skill_chars)))
        rec.skill_file = f
        if not rec.changed:
            why = rec.parse_error or rec.no_change_reason or "no edit applied"
            skipped.append({**info, "action": "skipped_no_change", "reason": why, "edits_proposed": len(rec.edits)})
            continue
        candidates.append({**info, "case_qids": [c.qid for c in fails], "record": _record_to_json(rec)})
    system_cases = [asdict(c) for c in cases if not c.correct]
    atomic_write_json(out / "evolve.json", {"run_id": run_id, "edit_budget": budget, "candidates": candidates, "skipped": skipped,
                                            "system_cases": system_cases, "tool_packs": {t: asdict(p) for t, p in inp.tool_packs.items()},
                                            "diagnosis_usd": diagnosis.usd})
    mark_done(out, {"candidates": len(candidates), "skipped": len(skipped)})
    progress.info("[evolve@e%d.s%d] %d candidates, %d skipped (edit budget %d)", epoch, step, len(candidates), len(skipped), budget)


def stage_gate(ctx: StageContext, epoch: int, step: int, prev_state: Path, rollout: Path, evolve: Path, out: Path) -> None:
    """Incremental correctness, slow packs, the per-skill gate, cooldown decrement, checkpoint 'in_epoch'."""
    prev = require_done(Path(prev_state), "previous step")
    out_dir = fresh_output(Path(out))
    lineage = read_lineage(prev)
    ro_doc = _read_outcomes(Path(rollout))
    ev_doc = json.loads((require_done(Path(evolve), "evolve") / "evolve.json").read_text(encoding="utf-8"))
    if lineage.stopped:
        _pass_through(prev, out_dir, lineage, f"gate@e{epoch}.s{step}")
        return
    copy_state_dir(prev, out_dir)
    ws = out_dir / WORKSPACE
    state, prog = _load_state(out_dir)
    qs = ctx.questions()
    p = _pools_json(ctx.paths.pools)
    # -- incremental correctness (only definite outcomes)
    outcomes = {q: v for q, v in ro_doc["outcomes"].items()}
    state.correctness = _apply_batch_correctness(state.correctness, outcomes)
    wsp.record_run(ws, ro_doc["run_id"])
    # -- slow case packs
    if ev_doc["system_cases"]:
        state.system_packs.append(SystemCasePack(epoch=epoch, cases=[CaseSample(**c) for c in ev_doc["system_cases"]]))
    for tool, pd in ev_doc["tool_packs"].items():
        pack = state.tool_packs.setdefault(tool, ToolCasePack(tool=tool, epoch=epoch))
        pack.calls += int(pd["calls"])
        pack.errors += int(pd["errors"])
        for k, v in pd["examples"].items():
            if len(pack.examples) < 8:
                pack.examples.setdefault(k, v)
    # -- per-skill gate
    pools = _gate_pools(ctx, out_dir, p)
    cache = DurableBaselineCache(out_dir / BASELINE_CACHE)  # the copy carried from prev; appends stay in this stage
    log = HarnessLog(out_dir / RUNLOG)
    try:
        gc = GateContext(run_name=ctx.run_name, epoch=epoch, step=step, params=ctx.gate, questions=qs,
                         validation_by_type=by_task_type(p["validation"], qs), rollout=ro.rollout_fn(ctx, log),
                         workspace_dir=ws, runlog_path=out_dir / RUNLOG, cooldown_steps=int(ctx.cfg.evolve.cooldown_steps),
                         seed=int(ctx.cfg.train.seed), batch_outcomes=outcomes)
        cands = [Candidate(task_type=c["task_type"], task_types=list(c["task_types"]), skill_file=c["skill_file"],
                           record=_record_from_json(c["record"]), case_qids=list(c["case_qids"])) for c in ev_doc["candidates"]]
        cooling = dict(state.gate_cooldown)
        rows, just_cooled = gate_batch_skills(gc, state, cands, pools, cache)
    finally:
        log.close()
    from harness.loop.observation import step_report_row

    for s in ev_doc["skipped"]:
        rows.append(step_report_row(epoch=epoch, step=step, task_type=s["task_type"], skill_file=s["skill_file"], action=s["action"],
                                    reason=s["reason"], edits_proposed=s.get("edits_proposed")))
    rows.sort(key=lambda r: r["task_type"])
    # -- cooldown decrement (skills that started resting this step keep their full count)
    state.gate_cooldown = _decrement_cooldowns({**cooling, **{k: state.gate_cooldown[k] for k in just_cooled}}, just_cooled)
    save_gate_pools(out_dir / GATE_POOLS, pools)
    prog = Progress(epoch=epoch, step=step, phase="in_epoch", global_step=prog.global_step + 1,
                    saved_batches=_saved_batches(ctx, epoch))
    _save_state(ctx, out_dir, state, prog)
    acc = None
    seen = [v for v in outcomes.values() if v is not None]
    if seen:
        acc = sum(bool(v) for v in seen) / len(seen)
    write_step_report(out_dir / REPORT, epoch=epoch, step=step, run_id=ro_doc["run_id"], batch_acc=acc, rows=rows,
                      extra={"skills_version": wsp.read_manifest(ws).skills_version, "edit_budget": ev_doc.get("edit_budget")})
    new_lineage = lineage
    for frag in (Path(rollout) / RUNLOG, Path(evolve) / RUNLOG, out_dir / RUNLOG):  # evolve: h2 probe rollouts
        if frag.exists():
            new_lineage = new_lineage.with_fragment(rel_to(ctx.root, frag))
    write_lineage(out_dir, new_lineage)
    mark_done(out_dir, {"stage": f"gate@e{epoch}.s{step}", "accepted": sum(r["action"] in ("accept", "probation") for r in rows)})
    progress.info("[gate@e%d.s%d] %s", epoch, step, ", ".join(f"{r['task_type']}:{r['action']}" for r in rows) or "no candidates")


def _saved_batches(ctx: StageContext, epoch: int) -> list[list[str]]:
    path = ctx.paths.batches(epoch)
    if not path.is_file():
        return []
    return [list(b) for b in json.loads(path.read_text(encoding="utf-8"))["batches"]]


# ---------------------------------------------------------------- slow, holdout


def stage_slow(ctx: StageContext, epoch: int, last_gate: Path, rollouts: list[Path], out: Path) -> None:
    """The ten-step slow update, checkpoint 'epoch_done', epoch report, early stop."""
    prev = require_done(Path(last_gate), "last step of the epoch")
    out_dir = fresh_output(Path(out))
    lineage = read_lineage(prev)
    if lineage.stopped:
        _pass_through(prev, out_dir, lineage, f"slow@e{epoch}")
        return
    copy_state_dir(prev, out_dir)
    ws = out_dir / WORKSPACE
    state, prog = _load_state(out_dir)
    qs = ctx.questions()
    p = _pools_json(ctx.paths.pools)
    pools = _gate_pools(ctx, out_dir, p)
    step_outcomes: dict[str, dict[str, tuple[int, Optional[bool]]]] = {}
    for r in rollouts:
        doc = _read_outcomes(Path(r))
        if doc.get("stopped"):
            continue
        step_outcomes[doc["run_id"]] = {q: (int(doc["sample_index"]), v) for q, v in doc["outcomes"].items()}
    fragments = resolve_fragments(ctx.root, lineage)
    prev_eval = None
    if state.eval_prev_run_id:
        rows = RunLogReader(fragments).predictions(run_id=state.eval_prev_run_id) if fragments else []
        if rows:
            prev_eval = {r["qid"]: (None if r["correct"] is None else bool(r["correct"])) for r in rows}
    log = HarnessLog(out_dir / RUNLOG)
    try:
        cfg = ctx.cfg
        deps = SlowDeps(
            run_name=ctx.run_name, epoch=epoch, workspace_dir=ws, runlog_path=out_dir / RUNLOG, questions=qs,
            validation=list(p["validation"]), test=list(p["test"]), rollout=ro.rollout_fn(ctx, log), llm=ctx.llm(),
            traces=lambda run_id, qid, idx: ro.trace_text(out_dir / RUNLOG, run_id, qid, idx),
            probation_verdict=ro.probation_verdict_fn(ctx), soft_score=None,
            edit_budget_end=int(cfg.evolve.edit_budget_end), momentum=bool(cfg.train.momentum) and bool(cfg.train.slow_update),
            system_tool_update=bool(cfg.train.system_tool_update) and bool(cfg.train.slow_update),
            max_skill_chars=int(cfg.evolve.max_skill_chars), ema_gamma=float(ctx.gate.ema_gamma),
            settle_with_anchor=ctx.gate.probation_settlement == "eprocess",
        )
        result = slow_update_cycle(deps, state, pools, log, step_outcomes, prev_eval)
    finally:
        log.close()
    # early stop is judged after the slow update
    state.steps_since_best_improved = 0 if result.improved_best else state.steps_since_best_improved + 1
    stop = _should_early_stop(state.steps_since_best_improved, int(ctx.cfg.train.early_stop_patience))
    # new epoch: accumulators cleared, the epoch's starting pair recorded
    m = wsp.read_manifest(ws)
    state.baseline_skills_version, state.baseline_prompts_version = m.skills_version, m.prompts_version
    state.epoch_start_skills = dict(read_version_tree(ws / "skills", m.skills_version).to_dict())
    state.changed_task_types_this_epoch = set()
    state.system_packs = []
    state.tool_packs = {}
    save_gate_pools(out_dir / GATE_POOLS, pools)
    _save_state(ctx, out_dir, state, Progress(epoch=epoch, step=prog.step, phase="epoch_done", global_step=prog.global_step,
                                              saved_batches=[]))
    report = dict(result.report)
    report["early_stop"] = stop
    report["steps_since_best_improved"] = state.steps_since_best_improved
    write_epoch_report(out_dir / REPORT, {**report})
    new_lineage = lineage.with_fragment(rel_to(ctx.root, out_dir / RUNLOG))
    if stop:
        new_lineage = Lineage(new_lineage.fragments, True, f"early stop after epoch {epoch}: best did not improve for "
                                                           f"{state.steps_since_best_improved} epoch(s)")
    write_lineage(out_dir, new_lineage)
    mark_done(out_dir, {"stage": f"slow@e{epoch}", "eval_acc": report["eval_acc"], "early_stop": stop})
    progress.info("[slow@e%d] eval %.3f (%s), best %.3f, rollbacks %s%s", epoch, report["eval_acc"], report["label"],
                  report["best_val_acc"] or 0.0, report["rollbacks"] or "none", ", EARLY STOP" if stop else "")


def stage_holdout(ctx: StageContext, final_state: Path, pools: Path, out: Path) -> None:
    """Deliver best (its tree under out/delivered) and evaluate base and delivered on the test pool."""
    from harness.loop.observation import write_holdout_eval
    from harness.loop.slow_update import HOLDOUT_INDEX, holdout_run_id

    prev = require_done(Path(final_state), "final state")
    out_dir = fresh_output(Path(out))
    ws = prev / WORKSPACE
    best = wsp.read_best(ws)
    m = wsp.read_manifest(ws)
    sv, pv = (best.skills, best.prompts) if best else (m.skills_version, m.prompts_version)
    delivered = wsp.harness_view(ws, sv, pv)
    delivered.save(out_dir / "delivered")
    p = _pools_json(Path(pools))
    qs = ctx.questions()
    log = HarnessLog(out_dir / RUNLOG)
    rows = []
    try:
        rollout = ro.rollout_fn(ctx, log)
        for which, (s, v) in (("base", ("v0", "v0")), ("delivered", (sv, pv))):
            run_id = holdout_run_id(ctx.run_name, which)
            log.record_run(run_id, "holdout", skills_version=s, prompts_version=v)
            tree = wsp.harness_view(ws, s, v)
            got = asyncio.run(rollout(tree, [(qs[q], HOLDOUT_INDEX) for q in p["test"]], run_id))
            seen = [x for x in got if x is not None]
            acc = sum(bool(x) for x in seen) / len(seen) if seen else 0.0
            rows.append(dict(epoch=0, which=which, run_id=run_id, skills_version=s, prompts_version=v, n=len(p["test"]),
                             hard_acc=acc, soft_score=None, mixed_score=None))
    finally:
        log.close()
    write_holdout_eval(out_dir / RUNLOG, rows)
    lineage = read_lineage(prev)
    result = {"delivered": {"skills_version": sv, "prompts_version": pv, "fingerprint": delivered.fingerprint,
                            "val_acc": best.val_acc if best else None, "best_epoch": best.epoch if best else None},
              "test": {r["which"]: r["hard_acc"] for r in rows}, "n_test": len(p["test"]),
              "stopped_early": lineage.stopped, "stop_reason": lineage.stop_reason}
    atomic_write_json(out_dir / "holdout.json", result)
    mark_done(out_dir, {"stage": "holdout", **result["delivered"]})
    progress.info("[holdout] delivered skills %s prompts %s: test acc %.3f (base %.3f)", sv, pv, result["test"]["delivered"],
                  result["test"]["base"])
