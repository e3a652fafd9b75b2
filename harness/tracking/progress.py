"""Progress reporting for long stages, without flooding logs.

Progress lines go to the logger ``harness.progress`` at INFO. A
`ProgressReporter` accumulates counters (questions done, rollouts, USD) and
emits at most one line per `min_interval_s`, plus a final line on `close()`.
`configure_logging(quiet)` is what entry points call once: quiet mode (and
CI logs) show warnings and errors only.
"""

from __future__ import annotations

import logging
import sys
import time
from dataclasses import dataclass, field
from typing import Callable

PROGRESS_LOGGER = "harness.progress"
_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def configure_logging(quiet: bool = False, stream=None) -> None:
    """Install one stream handler on the root logger (idempotent).

    quiet -> WARNING (progress lines hidden), else INFO.
    """
    level = logging.WARNING if quiet else logging.INFO
    root = logging.getLogger()
    handler_name = "harness-console"
    if not any(getattr(h, "name", None) == handler_name for h in root.handlers):
        handler = logging.StreamHandler(stream or sys.stderr)
        handler.set_name(handler_name)
        handler.setFormatter(logging.Formatter(_FORMAT, datefmt="%H:%M:%S"))
        root.addHandler(handler)
    root.setLevel(level)
    logging.getLogger(PROGRESS_LOGGER).setLevel(level)
    # Third-party chatter (alembic migrations, http clients) stays at WARNING.
    for noisy in ("alembic", "httpx", "urllib3", "mlflow"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


@dataclass
class ProgressReporter:
    """Rate-limited counters for one stage.

    `update(questions=1, rollouts=1, usd=0.002)` adds to the counters and logs
    a line only when `min_interval_s` passed since the last one.
    """

    stage: str
    total_questions: int | None = None
    min_interval_s: float = 5.0
    clock: Callable[[], float] = time.monotonic
    questions: int = 0
    rollouts: int = 0
    usd: float = 0.0
    lines_emitted: int = 0
    _last_emit: float | None = field(default=None, repr=False)

    def update(self, questions: int = 0, rollouts: int = 0, usd: float = 0.0) -> None:
        self.questions += questions
        self.rollouts += rollouts
        self.usd += usd
        now = self.clock()
        if self._last_emit is None:
            # The first update starts the clock instead of printing at once.
            self._last_emit = now
            return
        if now - self._last_emit >= self.min_interval_s:
            self._emit()
            self._last_emit = now

    def close(self) -> None:
        """Log the final totals (always one line)."""
        self._emit(final=True)

    def line(self, final: bool = False) -> str:
        done = f"{self.questions}/{self.total_questions}" if self.total_questions else str(self.questions)
        prefix = "done" if final else "progress"
        return f"[{self.stage}] {prefix}: questions {done}, rollouts {self.rollouts}, USD {self.usd:.4f}"

    def _emit(self, final: bool = False) -> None:
        logging.getLogger(PROGRESS_LOGGER).info(self.line(final))
        self.lines_emitted += 1
