"""prepare: the benchmark adapter's questions, validated, written atomically as Parquet."""

from __future__ import annotations

import logging
from pathlib import Path

from harness.loop.context import StageContext
from harness.questions import write_questions

progress = logging.getLogger("harness.progress")


def stage_prepare(ctx: StageContext, out_questions: Path) -> None:
    """The benchmark adapter's questions, validated, written atomically as Parquet."""
    qs = ctx.bench().questions()
    write_questions(Path(out_questions), qs)
    progress.info("[prepare] %d questions -> %s", len(qs), out_questions)
