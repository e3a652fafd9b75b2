"""gate@e.s: incremental correctness, slow case packs, the per-skill gate, cooldowns, checkpoint 'in_epoch'."""

from __future__ import annotations

import logging
from pathlib import Path

from harness import workspace as wsp
from harness.log import HarnessLog
from harness.loop import rollouts as ro
from harness.loop.context import StageContext, by_task_type
from harness.loop.documents import EVOLVE, EvolveDoc, read_document
from harness.loop.gating import Candidate, GateContext, gate_batch_skills
from harness.loop.observation import step_report_row, write_step_report
from harness.loop.persistence import load_state_gate_pools, read_pools, save_gate_pools
from harness.loop.stages.rollout import read_rollout
from harness.loop.state import (
    GATE_POOLS,
    REPORT,
    RUNLOG,
    WORKSPACE,
    mark_done,
    open_carried_state,
    rel_to,
    require_done,
    save_state,
    write_lineage,
)
from harness.loop.train_state import Progress
from harness.loop.validate import ScoredShareGuard

progress = logging.getLogger("harness.progress")

def stage_gate(ctx: StageContext, epoch: int, step: int, prev_state: Path, rollout: Path, evolve: Path, out: Path) -> None:
    """Incremental correctness, slow packs, the per-skill gate, cooldown decrement, checkpoint 'in_epoch'."""
    ro_doc = read_rollout(Path(rollout))
    ev_doc = read_document(require_done(Path(evolve), "evolve") / EVOLVE, EvolveDoc)
    carried = open_carried_state(prev_state, out, "previous step", f"gate@e{epoch}.s{step}")
    if carried is None:
        return
    out_dir, lineage, state, prog = carried.out, carried.lineage, carried.state, carried.progress
    ws = out_dir / WORKSPACE
    qs = ctx.questions()
    p = read_pools(ctx.paths.pools)
    # -- incremental correctness (only definite outcomes)
    outcomes = dict(ro_doc.outcomes)
    state.absorb_step_outcomes(outcomes)
    wsp.record_run(ws, ro_doc.run_id)
    # -- slow case packs
    state.absorb_case_packs(epoch, ev_doc.system_cases, ev_doc.tool_packs)
    # -- per-skill gate
    validation_by_type = by_task_type(p["validation"], qs)
    pools = load_state_gate_pools(out_dir, validation_by_type)
    log = HarnessLog(out_dir / RUNLOG)
    try:
        gc = GateContext(run_name=ctx.run_name, epoch=epoch, step=step, params=ctx.gate, questions=qs,
                         validation_by_type=validation_by_type,
                         rollout=ScoredShareGuard(ctx.infra_limits, f"gate@e{epoch}.s{step}").gate_rollout(ro.gate_rollout_fn(ctx, log)),
                         workspace_dir=ws, runlog_path=out_dir / RUNLOG, cooldown_steps=int(ctx.cfg.evolve.cooldown_steps),
                         seed=int(ctx.cfg.train.seed),
                         batch_outcomes=ro.metric_batch_outcomes(ctx, Path(rollout) / RUNLOG, ro_doc.run_id, ro_doc.sample_index, outcomes))
        cands = [Candidate(task_type=c.task_type, task_types=list(c.task_types), skill_file=c.skill_file,
                           record=c.record, case_qids=list(c.case_qids), source=c.source or ev_doc.method) for c in ev_doc.candidates]
        cooling = dict(state.gate_cooldown)
        rows, just_cooled = gate_batch_skills(gc, state, cands, pools)
    finally:
        log.close()
    for s in ev_doc.skipped:
        rows.append(step_report_row(epoch=epoch, step=step, task_type=s.task_type, skill_file=s.skill_file, action=s.action,
                                    reason=s.reason, edits_proposed=s.edits_proposed, source=s.source))
    rows.sort(key=lambda r: r["task_type"])
    # -- cooldown decrement (skills that started resting this step keep their full count)
    state.pass_cooldown_step(cooling, just_cooled)
    save_gate_pools(out_dir / GATE_POOLS, pools)
    prog = Progress(epoch=epoch, step=step, phase="in_epoch", global_step=prog.global_step + 1)
    save_state(out_dir, state, prog, ctx.config_dict())
    acc = None
    seen = [v for v in outcomes.values() if v is not None]
    if seen:
        acc = sum(bool(v) for v in seen) / len(seen)
    write_step_report(out_dir / REPORT, epoch=epoch, step=step, run_id=ro_doc.run_id, batch_acc=acc, rows=rows,
                      extra={"skills_version": wsp.read_manifest(ws).skills_version, "edit_budget": ev_doc.edit_budget})
    new_lineage = lineage
    for frag in (Path(rollout) / RUNLOG, Path(evolve) / RUNLOG, out_dir / RUNLOG):  # evolve: h2 probe rollouts
        if frag.exists():
            new_lineage = new_lineage.with_fragment(rel_to(ctx.root, frag))
    write_lineage(out_dir, new_lineage)
    mark_done(out_dir, {"stage": f"gate@e{epoch}.s{step}", "accepted": sum(r["action"] in ("accept", "probation") for r in rows)},
              spend=ctx.take_spend())
    progress.info("[gate@e%d.s%d] %s", epoch, step, ", ".join(f"{r['task_type']}:{r['action']}" for r in rows) or "no candidates")

