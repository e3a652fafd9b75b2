"""rollout@e.s: the current harness on the step's batch -> RolloutDoc (outcomes.json) + its run-log fragment."""

from __future__ import annotations

import logging
from pathlib import Path

from harness import workspace as wsp
from harness.contracts.answers import check_answer_format
from harness.contracts.roles import Role
from harness.identity import STEP_INDEX, step_run_id
from harness.llm.roles import model_for_role
from harness.log import HarnessLog, RunLogReader
from harness.loop import rollouts as ro
from harness.loop.context import StageContext
from harness.loop.documents import OUTCOMES, RolloutDoc, read_document, write_document
from harness.loop.stages.batches import batch_of
from harness.loop.state import RUNLOG, WORKSPACE, fresh_output, mark_done, read_lineage, require_done
from harness.loop.validate import guard_infra_failures
from harness.questions import require_recorded_questions

progress = logging.getLogger("harness.progress")

def stage_rollout(ctx: StageContext, epoch: int, step: int, prev_state: Path, batches: Path, out: Path) -> None:
    """The current harness on the step's batch: outcomes.json + this stage's run-log fragment."""
    prev = require_done(Path(prev_state), "previous step")
    out = fresh_output(Path(out))
    lineage = read_lineage(prev)
    run_id = step_run_id(ctx.run_name, epoch, step)
    if lineage.stopped:
        write_document(out / OUTCOMES, RolloutDoc.stopped_at(run_id))
        mark_done(out, {"stopped": True}, spend=ctx.take_spend())
        return
    qids = batch_of(Path(batches), step)
    m = wsp.read_manifest(prev / WORKSPACE)
    require_recorded_questions(m.questions_ref, ctx.root / str(ctx.cfg.benchmark.questions_path))
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
    guard_infra_failures(n_infra, len(got), ctx.infra_limits, f"rollout@e{epoch}.s{step} (run {run_id})")
    replies = [(str(r["parse_mode"]), r["reasoning"]) for r in RunLogReader(out / RUNLOG).query(
        "SELECT parse_mode, reasoning FROM predictions WHERE run_id = ? AND correct IS NOT NULL ORDER BY qid", (run_id,))]
    check_answer_format(replies, float(ctx.cfg.benchmark.max_unparsed_share), model=model_for_role(ctx.cfg.llm, Role.SOLVER),
                        where=f"step rollout {run_id}")
    write_document(out / OUTCOMES, RolloutDoc(run_id=run_id, sample_index=index, skills_version=m.skills_version,
                                              prompts_version=m.prompts_version, outcomes=dict(zip(qids, got))))
    scored = [v for v in got if v is not None]
    acc = sum(bool(v) for v in scored) / len(scored) if scored else None  # an empty batch: no accuracy, never 0.0
    mark_done(out, {"run_id": run_id, "n": len(qids), "acc": acc}, spend=ctx.take_spend())
    progress.info("[rollout@e%d.s%d] %d questions, acc %s", epoch, step, len(qids), "n/a" if acc is None else f"{acc:.3f}")


def read_rollout(rollout: Path) -> RolloutDoc:
    """The RolloutDoc of a finished rollout stage."""
    return read_document(require_done(Path(rollout), "rollout") / OUTCOMES, RolloutDoc)
