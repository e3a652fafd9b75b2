"""Runner: a thin dependency container over the stage functions (seed 000 §15).

`Runner(cfg, root, llm=..., bench=...)` holds only its injected
dependencies (the StageContext) and paths. `train()` runs the unrolled
schedule — prepare, pools, [batches@e, (rollout, evolve, gate)@e.s..., slow@e]...,
holdout — in this process, with the very functions the DVC stages call,
skipping every stage whose DONE marker exists (that is resume: the stage
cache is the coarse checkpoint, the response cache makes a re-run stage
free). Its run-local `_TrainState` is created in `train()` and passed
explicitly; helpers are module-level (harness/loop/helpers.py) and tested
on their own.

`infer`, `eval`, `diagnose`, `promote` are the other entry points of the
seed; each records the run (workspace history + run log) before inference.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from harness import workspace as wsp
from harness.identity import EVAL_INDEX, eval_run_id
from harness.checkpoint import check_resume, config_fingerprint, load_checkpoint
from harness.log import HarnessLog, RunLogReader
from harness.loop import rollouts as ro
from harness.loop import steps as st
from harness.loop.context import StageContext, make_context
from harness.loop.helpers import (  # noqa: F401  (the seed's module-level helper set, re-exported)
    _apply_batch_correctness, _decrement_cooldowns, _guard_infra_failures, _merge_probation, _rejected_summary,
    _should_early_stop, resume_plan,
)
from harness.loop.state import CHECKPOINT, RUNLOG, WORKSPACE, StageItem, StatePaths, full_schedule, is_done, stage_done

progress = logging.getLogger("harness.progress")


@dataclass
class _TrainState:
    """Run-local progress of one `train()` call (the persistent TrainState lives in each state dir)."""

    schedule: list[StageItem]
    todo: list[StageItem]
    ran: list[str] = field(default_factory=list)
    skipped: int = 0
    started: float = field(default_factory=time.monotonic)


def steps_in_epoch(cfg: Any) -> int:
    from harness.loop.state import steps_per_epoch

    return steps_per_epoch(int(cfg.pools.diagnosis_size), int(cfg.batching.batch_size))


def run_stage_item(ctx: StageContext, paths: StatePaths, item: StageItem, n_steps: int) -> None:
    """Call the stage function of `item` with the documented paths."""
    e, s = item.epoch, item.step
    if item.kind == "prepare":
        st.stage_prepare(ctx, paths.questions)
    elif item.kind == "pools":
        st.stage_pools(ctx, paths.questions, paths.pools, paths.init)
    elif item.kind == "batches":
        st.stage_batches(ctx, e, paths.prev_of_epoch(e), paths.pools, paths.batches(e))
    elif item.kind == "rollout":
        st.stage_rollout(ctx, e, s, paths.prev_of_step(e, s), paths.batches(e), paths.rollout(e, s))
    elif item.kind == "evolve":
        st.stage_evolve(ctx, e, s, paths.prev_of_step(e, s), paths.rollout(e, s), paths.evolve(e, s))
    elif item.kind == "gate":
        st.stage_gate(ctx, e, s, paths.prev_of_step(e, s), paths.rollout(e, s), paths.evolve(e, s), paths.gate(e, s))
    elif item.kind == "slow":
        st.stage_slow(ctx, e, paths.gate(e, n_steps), [paths.rollout(e, k) for k in range(1, n_steps + 1)], paths.slow(e))
    elif item.kind == "holdout":
        last = max(i.epoch for i in full_schedule(int(ctx.cfg.train.epochs), n_steps) if i.kind == "slow")
        st.stage_holdout(ctx, paths.slow(last), paths.pools, paths.holdout)
    else:
        raise ValueError(f"unknown stage kind {item.kind!r}")


def _check_resumable(ctx: StageContext, paths: StatePaths, schedule: Sequence[StageItem], n_steps: int) -> None:
    """Refuse to resume over state written under different structural config keys (checkpoint.check_resume)."""
    latest: Optional[Path] = None
    for item in schedule:
        if item.kind in ("pools", "gate", "slow") and stage_done(paths, item):
            latest = paths.output_of(item)
    if latest is None:
        return
    ck = load_checkpoint(latest / CHECKPOINT)
    check_resume(ck.config, config_fingerprint(st._cfg_dict(ctx)))


class Runner:
    def __init__(self, cfg: Any, root: str | Path, *, llm: Any = None, bench: Any = None):
        self.ctx = make_context(cfg, root, llm=llm, bench=bench)
        self.paths = self.ctx.paths

    # -- train ---------------------------------------------------------------------------------
    def train(self, *, after_stage: Optional[Callable[[StageItem], None]] = None) -> dict:
        """Run (or resume) the whole schedule; returns the holdout result (delivered versions + test accuracy)."""
        n_steps = steps_in_epoch(self.ctx.cfg)
        schedule = full_schedule(int(self.ctx.cfg.train.epochs), n_steps)
        ts = _TrainState(schedule=schedule, todo=resume_plan(self.paths, schedule))
        ts.skipped = len(schedule) - len(ts.todo)
        if ts.skipped:
            _check_resumable(self.ctx, self.paths, schedule[: ts.skipped], n_steps)
            progress.info("[train] resuming: %d of %d stages already done", ts.skipped, len(schedule))
        for item in ts.todo:
            run_stage_item(self.ctx, self.paths, item, n_steps)
            ts.ran.append(item.name)
            if after_stage is not None:
                after_stage(item)
        return json.loads((self.paths.holdout / "holdout.json").read_text(encoding="utf-8"))

    # -- the other entry points ----------------------------------------------------------------
    def _workspace(self, state_dir: Optional[Path]) -> Path:
        """A copy of a state's workspace under `<root>/runs/<state>/` for ad-hoc runs.

        infer/eval record their runs (workspace history, run log) before the
        inference; doing that in a pipeline state dir would change a DVC
        output, so they work on a per-state copy made on first use.
        """
        src = Path(state_dir) if state_dir is not None else self.latest_state()
        name = "_".join(src.resolve().relative_to(self.paths.state.resolve()).parts) if src.resolve().is_relative_to(self.paths.state.resolve()) else src.name
        dst = self.paths.root / "runs" / name / WORKSPACE
        if not dst.exists():
            wsp.copy_workspace(src / WORKSPACE, dst)
        return dst

    def latest_state(self) -> Path:
        """The newest finished workspace-carrying state dir of the schedule."""
        n_steps = steps_in_epoch(self.ctx.cfg)
        latest = None
        for item in full_schedule(int(self.ctx.cfg.train.epochs), n_steps):
            if item.kind in ("pools", "gate", "slow") and is_done(self.paths.output_of(item)):
                latest = self.paths.output_of(item)
        if latest is None:
            raise FileNotFoundError(f"no finished state under {self.paths.state}; run train() first")
        return latest

    def infer(self, qids: Sequence[str], *, run_id: str, skills_version: Optional[str] = None, prompts_version: Optional[str] = None,
              sample_index: int = 0, state_dir: Optional[Path] = None, log_path: Optional[Path] = None):
        """Run the (given or current) harness on `qids`; record_run before the inference. Returns InferenceResult."""
        from harness.inference import run_inference

        ws = self._workspace(state_dir)
        m = wsp.read_manifest(ws)
        sv, pv = skills_version or m.skills_version, prompts_version or m.prompts_version
        qs = self.ctx.questions()
        wsp.record_run(ws, run_id)
        log = HarnessLog(log_path or ws.parent / "runs" / f"{run_id}.sqlite")
        try:
            log.record_run(run_id, "inference", skills_version=sv, prompts_version=pv, questions_ref=m.questions_ref)
            bench, cfg = self.ctx.bench(), self.ctx.cfg
            return asyncio.run(run_inference(
                [qs[q] for q in qids], harness_tree_for=wsp.harness_view(ws, sv, pv), llm=self.ctx.llm(),
                tool_dispatch_fn=bench.tool_dispatch, scorer=bench.score, log=log, run_id=run_id,
                concurrency=int(cfg.train.concurrency), max_steps=int(cfg.llm.max_agent_steps), sample_indices=sample_index,
                params={"temperature": float(cfg.llm.temperature), "max_tokens": int(cfg.llm.max_tokens)}, run_kind="inference"))
        finally:
            log.close()

    def eval(self, skills_version: Optional[str] = None, prompts_version: Optional[str] = None, *, pool: str = "validation",
             run_id: Optional[str] = None, state_dir: Optional[Path] = None):
        """Evaluate a version pair on a pool; the eval run's versions are filled back in `_runs` (promote needs them)."""
        ws = self._workspace(state_dir)
        m = wsp.read_manifest(ws)
        sv, pv = skills_version or m.skills_version, prompts_version or m.prompts_version
        pools = json.loads(self.paths.pools.read_text(encoding="utf-8"))
        if pool not in pools:
            raise KeyError(f"unknown pool {pool!r}; expected one of {sorted(pools)}")
        run_id = run_id or eval_run_id(self.ctx.run_name, pool, sv, pv)
        log_path = ws.parent / "runs" / f"{run_id}.sqlite"
        result = self.infer(pools[pool], run_id=run_id, skills_version=sv, prompts_version=pv, sample_index=EVAL_INDEX,
                            state_dir=ws.parent, log_path=log_path)
        log = HarnessLog(log_path)
        try:
            log.update_run_versions(run_id, sv, pv, m.questions_ref)
        finally:
            log.close()
        return result

    def diagnose(self, run_id: str, *, log_paths: Sequence[Path]):
        """Diagnose the failures of a logged run (reads the given run-log fragments)."""
        from harness.evolution.diagnose import run_diagnosis

        reader = RunLogReader(list(log_paths))
        rows = reader.predictions(run_id=run_id)
        if not rows:
            raise KeyError(f"run {run_id!r} has no predictions in {list(map(str, log_paths))}")
        outcomes = {r["qid"]: (None if r["correct"] is None else bool(r["correct"])) for r in rows}
        cases = ro.case_samples(reader, run_id, self.ctx.questions(), outcomes)
        return asyncio.run(run_diagnosis(self.ctx.llm(), run_id=run_id, failures=cases,
                                         concurrency=int(self.ctx.cfg.evolve.diagnose_concurrency)))

    def promote(self, version: str, eval_run_id: str, name: str, *, seeds_dir: Path, state_dir: Optional[Path] = None):
        """Promote an evaluated skills version (with the prompts version its eval run recorded) to a reusable seed."""
        from harness.store import promote_to_seed

        ws = self._workspace(state_dir)
        db = ws.parent / "runs" / f"{eval_run_id}.sqlite"
        runs = RunLogReader([db]).runs(eval_run_id) if db.exists() else []
        if not runs:
            raise KeyError(f"promote: eval run {eval_run_id!r} not found in {db}; run Runner.eval first")
        return promote_to_seed(Path(seeds_dir) / name, skills_store=ws / "skills", prompts_store=ws / "prompts",
                               skills_version=version, prompts_version=runs[0]["prompts_version"] or "",
                               run_log=db, eval_run_id=eval_run_id, meta={"name": name})
