"""Progress reporting for long stages, without flooding logs.

Progress lines go to the logger ``harness.progress`` at INFO. A
`ProgressReporter` accumulates counters (questions done, rollouts, USD) and
emits at most one line per `min_interval_s`, plus a final line on `close()`.
`configure_logging(quiet)` is what entry points call once: quiet mode (and
CI logs) show warnings and errors only; float arguments of progress lines are
rounded (harness/tracking/readable.py).
"""

from __future__ import annotations

import logging
import sys
import time
from dataclasses import dataclass, field
from typing import Callable

from harness.tracking.readable import RoundFloatArgs

PROGRESS_LOGGER = "harness.progress"
_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def configure_logging(quiet: bool = False, stream=None, use_existing_handlers: bool = False) -> None:
    """Install one stream handler on the root logger (idempotent) and set levels.

    quiet -> WARNING (progress lines hidden), else INFO. With
    `use_existing_handlers` (Hydra apps: Hydra already configured console and
    file handlers) only the levels are set when the root logger has handlers.
    """
    level = logging.WARNING if quiet else logging.INFO
    root = logging.getLogger()
    handler_name = "harness-console"
    keep = use_existing_handlers and bool(root.handlers)
    if not keep and not any(getattr(h, "name", None) == handler_name for h in root.handlers):
        handler = logging.StreamHandler(stream or sys.stderr)
        handler.set_name(handler_name)
        handler.setFormatter(logging.Formatter(_FORMAT, datefmt="%H:%M:%S"))
        root.addHandler(handler)
    root.setLevel(level)
    progress = logging.getLogger(PROGRESS_LOGGER)
    progress.setLevel(level)
    if not any(isinstance(f, RoundFloatArgs) for f in progress.filters):
        progress.addFilter(RoundFloatArgs())  # progress lines show 0.6818, never 0.6818181818181818
    # Third-party chatter (alembic migrations, http clients) stays at WARNING.
    for noisy in ("alembic", "httpx", "urllib3", "mlflow"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


@dataclass
class ProgressReporter:
    """Rate-limited counters for one stage.

    `update(questions=1, rollouts=1, usd=0.002)` adds to named counters and
    logs a line only when `min_interval_s` passed since the last one;
    `totals` gives "done/total" for counters with a known end.
    """

    stage: str
    totals: dict[str, int] = field(default_factory=dict)
    min_interval_s: float = 5.0
    clock: Callable[[], float] = time.monotonic
    counters: dict[str, float] = field(default_factory=dict)
    lines_emitted: int = 0
    _last_emit: float | None = field(default=None, repr=False)

    def update(self, **increments: float) -> None:
        for name, value in increments.items():
            self.counters[name] = self.counters.get(name, 0) + value
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
        parts = []
        for name, value in self.counters.items():
            shown = f"{value:.4f}" if name.lower() == "usd" else f"{int(value)}"
            if name in self.totals:
                shown += f"/{self.totals[name]}"
            parts.append(f"{name} {shown}")
        return f"[{self.stage}] {'done' if final else 'progress'}: " + (", ".join(parts) or "started")

    def _emit(self, final: bool = False) -> None:
        logging.getLogger(PROGRESS_LOGGER).info(self.line(final))
        self.lines_emitted += 1
