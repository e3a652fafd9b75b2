"""batches@e: the epoch's mini-batches of the diagnosis pool (FFD + round-robin + correctness mixing)."""

from __future__ import annotations

import logging
from pathlib import Path

from harness.atomic import atomic_write_json
from harness.inputs import read_json
from harness.kernel.batching import Batches, BatchParams, make_batches
from harness.loop.context import StageContext
from harness.loop.persistence import read_pools
from harness.loop.state import load_state, require_done

progress = logging.getLogger("harness.progress")


def stage_batches(ctx: StageContext, epoch: int, prev_state: Path, pools: Path, out: Path) -> None:
    """The epoch's mini-batches of the diagnosis pool (FFD + round-robin + correctness mixing), deterministic."""
    prev = require_done(Path(prev_state), "previous epoch")
    state, _ = load_state(prev)
    p = read_pools(Path(pools))
    qs = ctx.questions()
    batches = make_batches({q: qs[q].task_type for q in p["diagnosis"]}, BatchParams.from_config(ctx.cfg.batching),
                           seed=int(ctx.cfg.train.seed), epoch=int(epoch), correctness=state.correctness)
    atomic_write_json(Path(out), batches.to_json())
    progress.info("[batches@e%d] %d batches", epoch, len(batches.batches))


def batch_of(batches: Path, step: int) -> list[str]:
    """The qids of mini-batch `step` (1-based) of a batches file; empty past the last batch."""
    b = Batches.from_json(read_json(batches, "batches file"), source=str(batches)).batches
    return list(b[step - 1]) if step <= len(b) else []
