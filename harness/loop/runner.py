"""The in-process runner: the whole unrolled schedule in one process (seed 000 §15).

`python -m stages.train` (harness/pipeline/train_job.py), the benchmarks and
the tests all call `train(ctx)`; `dvc repro` runs the same stage functions one
process per stage. The schedule is `harness.kernel.schedule.full_schedule`,
the paths `StatePaths` — the layout the `ht.*` resolvers give `dvc.yaml`.

Resume: every stage whose DONE marker exists is skipped up to the first
unfinished one (`resume_plan`; the stage outputs are the coarse checkpoint,
the response cache makes a re-run stage free), after checking that the
finished state was written under the same structural config keys.
Telemetry: each executed stage's cache hits/misses and wall time are
recorded (`harness.loop.telemetry`) when a telemetry directory is given.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Optional

from harness.kernel.schedule import CARRYING_KINDS, StageItem, full_schedule
from harness.llm.protocol import LLMProvider
from harness.loop.checkpoint import check_resume, config_fingerprint, load_checkpoint
from harness.loop.context import StageContext, make_context
from harness.loop.documents import to_json
from harness.loop.stages.batches import stage_batches
from harness.loop.stages.certify import stage_certify
from harness.loop.stages.evolve import stage_evolve
from harness.loop.stages.gate import stage_gate
from harness.loop.stages.holdout import read_holdout, stage_holdout
from harness.loop.stages.pools import stage_pools
from harness.loop.stages.prepare import stage_prepare
from harness.loop.stages.rollout import stage_rollout
from harness.loop.stages.slow import stage_slow
from harness.loop.state import CHECKPOINT, StatePaths, resume_plan, stage_done
from harness.loop.telemetry import StageTelemetry, cache_stats_of, record_stage
from harness.tracking.progress import ProgressReporter

if TYPE_CHECKING:
    from omegaconf import DictConfig

    from harness.bench.protocol import BenchmarkAdapter
    from harness.config.key_view import KeyView

progress = logging.getLogger("harness.progress")

AfterStage = Callable[[StageItem], None]


def steps_in_epoch(cfg: DictConfig | KeyView) -> int:
    """`train.steps_per_epoch` (derived by the `ht.ceil_div` resolver and checked at load)."""
    return int(cfg.train.steps_per_epoch)


def run_stage_item(ctx: StageContext, item: StageItem) -> None:
    """Call the stage function of `item` with the paths of `ctx.paths`."""
    paths, e, s = ctx.paths, item.epoch, item.step
    n_steps = steps_in_epoch(ctx.cfg)
    if item.kind == "prepare":
        stage_prepare(ctx, paths.questions)
    elif item.kind == "pools":
        stage_pools(ctx, paths.questions, paths.pools, paths.init)
    elif item.kind == "batches":
        stage_batches(ctx, e, paths.prev_of_epoch(e), paths.pools, paths.batches(e))
    elif item.kind == "rollout":
        stage_rollout(ctx, e, s, paths.prev_of_step(e, s), paths.batches(e), paths.rollout(e, s))
    elif item.kind == "evolve":
        stage_evolve(ctx, e, s, paths.prev_of_step(e, s), paths.rollout(e, s), paths.evolve(e, s))
    elif item.kind == "gate":
        stage_gate(ctx, e, s, paths.prev_of_step(e, s), paths.rollout(e, s), paths.evolve(e, s), paths.gate(e, s))
    elif item.kind == "slow":
        stage_slow(ctx, e, paths.gate(e, n_steps), [paths.rollout(e, k) for k in range(1, n_steps + 1)], paths.slow(e))
    elif item.kind == "certify":
        stage_certify(ctx, paths.slow(int(ctx.cfg.train.epochs)), paths.pools, paths.certify)
    elif item.kind == "holdout":
        stage_holdout(ctx, paths.slow(int(ctx.cfg.train.epochs)), paths.pools, paths.holdout, paths.certify)
    else:
        raise ValueError(f"unknown stage kind {item.kind!r}")


def _check_resumable(ctx: StageContext, paths: StatePaths, finished: Sequence[StageItem]) -> None:
    """Refuse to resume over state written under different structural config keys (checkpoint.check_resume)."""
    latest: Optional[Path] = None
    for item in finished:
        if item.kind in CARRYING_KINDS and stage_done(paths, item):
            latest = paths.output_of(item)
    if latest is None:
        return
    ck = load_checkpoint(latest / CHECKPOINT)
    check_resume(ck.config, config_fingerprint(ctx.config_dict()))


def train(ctx: StageContext, *, telemetry: Optional[Path] = None, after_stage: Optional[AfterStage] = None) -> dict:
    """Run (or resume) the whole schedule; returns the holdout result (delivered versions + test accuracy)."""
    paths = ctx.paths
    schedule = full_schedule(int(ctx.cfg.train.epochs), steps_in_epoch(ctx.cfg))
    todo = resume_plan(paths, schedule)
    skipped = len(schedule) - len(todo)
    if skipped:
        _check_resumable(ctx, paths, schedule[:skipped])
        progress.info("[train] resuming: %d of %d stages already done", skipped, len(schedule))
    reporter = ProgressReporter(stage="train", totals={"stages": len(todo)})
    for item in todo:
        hits0, misses0, saved0 = cache_stats_of(ctx)
        started = time.monotonic()
        run_stage_item(ctx, item)
        hits1, misses1, saved1 = cache_stats_of(ctx)
        record = StageTelemetry(item.name, hits1 - hits0, misses1 - misses0, round(saved1 - saved0, 6),
                                round(time.monotonic() - started, 3))
        if telemetry is not None:
            record_stage(telemetry, record)
        reporter.update(stages=1, llm_calls=record.cache_hits + record.cache_misses, cache_hits=record.cache_hits)
        if after_stage is not None:
            after_stage(item)
    reporter.close()
    return to_json(read_holdout(paths.holdout))


class Runner:
    """`train()` over a context built from (cfg, root) with an optional injected provider and benchmark."""

    def __init__(self, cfg: DictConfig, root: str | Path, *, llm: Optional[LLMProvider] = None,
                 bench: Optional[BenchmarkAdapter] = None):
        self.ctx = make_context(cfg, root, llm=llm, bench=bench)
        self.paths = self.ctx.paths

    def train(self, *, telemetry: Optional[Path] = None, after_stage: Optional[AfterStage] = None) -> dict:
        return train(self.ctx, telemetry=telemetry, after_stage=after_stage)
