"""slow@e: the ten-step slow update at the end of an epoch, checkpoint 'epoch_done', epoch report, early stop."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Optional

from harness import workspace as wsp
from harness.kernel.ladder import PoolParams
from harness.kernel.probation import ProbationParams
from harness.kernel.registry import params_of
from harness.log import HarnessLog, RunLogReader
from harness.loop import rollouts as ro
from harness.loop.context import StageContext, by_task_type
from harness.loop.observation import read_table, write_epoch_report
from harness.loop.persistence import load_state_gate_pools, read_pools, save_gate_pools
from harness.loop.slow_update import SlowDeps, slow_update_cycle
from harness.loop.stages.rollout import read_rollout
from harness.loop.state import (
    GATE_POOLS,
    REPORT,
    RUNLOG,
    WORKSPACE,
    Lineage,
    mark_done,
    open_carried_state,
    rel_to,
    resolve_fragments,
    save_state,
    write_lineage,
)
from harness.loop.train_state import Progress, TrainState
from harness.loop.validate import ScoredShareGuard
from harness.store import read_version_tree

progress = logging.getLogger("harness.progress")


def shadow_best(fragments: list[Path]) -> Optional[tuple[float, str, str]]:
    """(mixed score, skills, prompts) of the shadow best so far: the latest earlier epoch's `shadow_gate` row."""
    rows = [r for r in read_table(fragments, "shadow_gate") if r["shadow_best_mixed"] is not None] if fragments else []
    if not rows:
        return None
    last = max(rows, key=lambda r: int(r["epoch"]))
    return float(last["shadow_best_mixed"]), str(last["shadow_skills_version"]), str(last["shadow_prompts_version"])


def eval_prev_outcomes(state: TrainState, fragments: list[Path]) -> Optional[dict[str, Optional[bool]]]:
    """eval_prev's answers on the validation pool: in full from the checkpoint (`eval_prev_ref`) when it describes
    eval_prev, whatever train.reuse_identical says now (under the reuse the run log holds only the questions eval_prev
    asked, and a resume may switch the key off); else its run-log predictions; None when there are none."""
    ref = state.eval_prev_ref
    if ref is not None and ref.run_id == state.eval_prev_run_id:
        return dict(ref.outcomes)
    rows = RunLogReader(fragments).predictions(run_id=state.eval_prev_run_id) if fragments and state.eval_prev_run_id else []
    return {r["qid"]: (None if r["correct"] is None else bool(r["correct"])) for r in rows} if rows else None


def stage_slow(ctx: StageContext, epoch: int, last_gate: Path, rollouts: list[Path], out: Path) -> None:
    """The ten-step slow update, checkpoint 'epoch_done', epoch report, early stop."""
    carried = open_carried_state(last_gate, out, "last step of the epoch", f"slow@e{epoch}")
    if carried is None:
        return
    out_dir, lineage, state, prog = carried.out, carried.lineage, carried.state, carried.progress
    ws = out_dir / WORKSPACE
    qs = ctx.questions()
    p = read_pools(ctx.paths.pools)
    pools = load_state_gate_pools(out_dir, by_task_type(p["validation"], qs))
    step_outcomes: dict[str, dict[str, tuple[int, Optional[bool]]]] = {}
    for r in rollouts:
        doc = read_rollout(Path(r))
        if doc.stopped or doc.sample_index is None:
            continue
        step_outcomes[doc.run_id] = {q: (doc.sample_index, v) for q, v in doc.outcomes.items()}
    fragments = resolve_fragments(ctx.root, lineage)
    prev_eval = eval_prev_outcomes(state, fragments)
    log = HarnessLog(out_dir / RUNLOG)
    try:
        cfg = ctx.cfg
        deps = SlowDeps(
            run_name=ctx.run_name, epoch=epoch, workspace_dir=ws, runlog_path=out_dir / RUNLOG, questions=qs,
            validation=list(p["validation"]), test=list(p["test"]),
            rollout=ScoredShareGuard(ctx.infra_limits, f"slow@e{epoch} (slow update and validation eval)").rollout(ro.rollout_fn(ctx, log)),
            llm=ctx.llm(),
            traces=lambda run_id, qid, idx: ro.trace_text(out_dir / RUNLOG, run_id, qid, idx),
            probation_verdict=ro.probation_verdict_fn(ctx), soft_by_question=ro.soft_by_question_fn(log), shadow_best=shadow_best(fragments),
            edit_budget_end=int(cfg.evolve.edit_budget_end), momentum=bool(cfg.train.momentum) and bool(cfg.train.slow_update),
            system_tool_update=bool(cfg.train.system_tool_update) and bool(cfg.train.slow_update),
            momentum_check=str(cfg.train.momentum_check),
            type_check_drop=None if cfg.train.type_check_drop is None else float(cfg.train.type_check_drop),
            reuse_identical=bool(cfg.train.reuse_identical),
            max_skill_chars=int(cfg.evolve.max_skill_chars), ema_gamma=float(params_of(PoolParams, ctx.gate).ema_gamma),
            settle_with_anchor=params_of(ProbationParams, ctx.gate).probation_settlement == "eprocess", meta_prompts=ctx.meta_prompts(),
        )
        result = slow_update_cycle(deps, state, pools, log, step_outcomes, prev_eval)
    finally:
        log.close()
    # early stop is judged after the slow update
    state.close_epoch(result.improved_best)
    stop = state.early_stop_due(int(ctx.cfg.train.early_stop_patience))
    m = wsp.read_manifest(ws)
    state.begin_epoch(m.skills_version, m.prompts_version, read_version_tree(ws / "skills", m.skills_version).to_dict())
    save_gate_pools(out_dir / GATE_POOLS, pools)
    save_state(out_dir, state, Progress(epoch=epoch, step=prog.step, phase="epoch_done", global_step=prog.global_step),
               ctx.config_dict())
    report = dict(result.report)
    report["early_stop"] = stop
    report["steps_since_best_improved"] = state.steps_since_best_improved
    write_epoch_report(out_dir / REPORT, {**report})
    new_lineage = lineage.with_fragment(rel_to(ctx.root, out_dir / RUNLOG))
    if stop:
        new_lineage = Lineage(new_lineage.fragments, True, f"early stop after epoch {epoch}: best did not improve for "
                                                           f"{state.steps_since_best_improved} epoch(s)")
    write_lineage(out_dir, new_lineage)
    mark_done(out_dir, {"stage": f"slow@e{epoch}", "eval_acc": report["eval_acc"], "early_stop": stop}, spend=ctx.take_spend())
    progress.info("[slow@e%d] eval %.3f (%s), best %.3f, rollbacks %s%s", epoch, report["eval_acc"], report["label"],
                  report["best_val_acc"] or 0.0, report["rollbacks"] or "none", ", EARLY STOP" if stop else "")
