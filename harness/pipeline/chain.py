"""Run the whole unrolled pipeline in one process (``stages.train``).

The same stage functions, in the same order and with the same paths as the
``dvc.yaml`` stages (taken from the config's ``train.schedule`` and
``train.epoch_schedule``, directories from ``StatePaths``), so a run of this chain and a ``dvc repro`` of
the same config produce the same state, harness and metrics.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from harness.pipeline.telemetry import StageTelemetry, cache_stats_of, record_stage
from harness.tracking.progress import ProgressReporter

log = logging.getLogger("harness.progress")


@dataclass(frozen=True)
class StageCall:
    name: str  # e.g. "rollout@e1.s2" (the name the DVC entry points record)
    run: Callable[[Any], None]  # run(ctx)


def stage_calls(cfg: Any, root: Path) -> list[StageCall]:
    """The pipeline's stage invocations in execution order, paths resolved against `root`."""
    from harness.loop import steps
    from harness.loop.state import StatePaths

    def p(relative: str) -> Path:
        return root / str(relative)

    questions, pools = p(cfg.benchmark.questions_path), p(cfg.pools.path)
    paths = StatePaths(root, str(cfg.train.state_dir))
    calls = [
        StageCall("prepare", lambda ctx: steps.stage_prepare(ctx, questions)),
        StageCall("pools", lambda ctx: steps.stage_pools(ctx, questions, pools, paths.init)),
    ]
    n_steps = int(cfg.train.steps_per_epoch)
    by_epoch: dict[int, list[Any]] = {}
    for item in cfg.train.schedule:
        by_epoch.setdefault(int(item.epoch), []).append(item)
    for e_item in cfg.train.epoch_schedule:
        epoch = int(e_item.epoch)
        calls.append(StageCall(f"batches@e{epoch}", _bind(steps.stage_batches, epoch, p(e_item.prev), pools, paths.batches(epoch))))
        for item in by_epoch.get(epoch, []):
            e, s, prev = int(item.epoch), int(item.step), p(item.prev)
            calls.append(StageCall(f"rollout@e{e}.s{s}", _bind(steps.stage_rollout, e, s, prev, paths.batches(e), paths.rollout(e, s))))
            calls.append(StageCall(f"evolve@e{e}.s{s}", _bind(steps.stage_evolve, e, s, prev, paths.rollout(e, s), paths.evolve(e, s))))
            calls.append(StageCall(f"gate@e{e}.s{s}", _bind(steps.stage_gate, e, s, prev, paths.rollout(e, s),
                                                             paths.evolve(e, s), paths.gate(e, s))))
        rollouts = [paths.rollout(epoch, s) for s in range(1, n_steps + 1)]
        calls.append(StageCall(f"slow@e{epoch}", _bind(steps.stage_slow, epoch, paths.gate(epoch, n_steps), rollouts, paths.slow(epoch))))
    final = paths.slow(int(cfg.train.epochs))
    calls.append(StageCall("holdout", lambda ctx: steps.stage_holdout(ctx, final, pools, paths.holdout)))
    return calls


def _bind(function: Callable[..., None], *args: Any) -> Callable[[Any], None]:
    return lambda ctx: function(ctx, *args)


def run_chain(ctx: Any, cfg: Any, *, telemetry: Path | None = None) -> list[StageTelemetry]:
    """Run every stage in order in this process; returns each stage's execution telemetry."""
    calls = stage_calls(cfg, Path(ctx.root))
    reporter = ProgressReporter(stage="train", totals={"stages": len(calls)})
    done: list[StageTelemetry] = []
    for call in calls:
        hits0, misses0, saved0 = cache_stats_of(ctx)
        started = time.monotonic()
        call.run(ctx)
        hits1, misses1, saved1 = cache_stats_of(ctx)
        t = StageTelemetry(call.name, hits1 - hits0, misses1 - misses0, round(saved1 - saved0, 6),
                           round(time.monotonic() - started, 3))
        done.append(t)
        if telemetry is not None:
            record_stage(telemetry, t)
        reporter.update(stages=1, llm_calls=t.cache_hits + t.cache_misses, cache_hits=t.cache_hits)
    reporter.close()
    return done
