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
import os
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from harness.tracking.readable import RoundFloatArgs

PROGRESS_LOGGER = "harness.progress"
# seconds between two progress lines inside one gate (an engineering setting: the environment only)
GATE_INTERVAL_ENV = "HARNESS_GATE_PROGRESS_S"
GATE_INTERVAL_S = 10.0
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
    quiet_third_party_loggers()


def quiet_third_party_loggers() -> None:
    """Third-party chatter (alembic migrations, http clients: one line per request) at WARNING; for entry points
    that set up logging with `logging.basicConfig` instead of `configure_logging`."""
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


def gate_interval_s() -> float:
    """Seconds between a gate's progress lines: `HARNESS_GATE_PROGRESS_S` when set (0 = every block), else 10."""
    raw = os.environ.get(GATE_INTERVAL_ENV, "").strip()
    if not raw:
        return GATE_INTERVAL_S
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"environment variable {GATE_INTERVAL_ENV}={raw!r}: expected a number of seconds (0 = every block)") from None
    if value < 0:
        raise ValueError(f"environment variable {GATE_INTERVAL_ENV}={raw!r}: expected seconds >= 0")
    return value


@dataclass
class GateProgress:
    """The `on_block` hook of one gate (harness/kernel/engine.py `run_gate`): after a block, at most one line every
    `min_interval_s` seconds, with the pairs so far / `max_pairs`, log E against the accept threshold and the time
    left at the rate measured so far if the gate ran to `max_pairs` (an upper bound: it stops when the evidence
    decides). A gate that printed a line also prints its decision, so a long gate never ends silently."""

    label: str  # e.g. "gate@e1.s2 algebra"
    max_pairs: int
    accept_at: float | None = None  # log E threshold of this gate
    min_interval_s: float = field(default_factory=gate_interval_s)
    clock: Callable[[], float] = time.monotonic
    pairs: int = 0
    lines_emitted: int = 0
    _started: float | None = field(default=None, repr=False)
    _last_emit: float | None = field(default=None, repr=False)

    def start(self) -> None:
        """Start the clock (call before the first block is sampled; else the first block's end starts it)."""
        self._started = self._last_emit = self.clock()

    def __call__(self, block: int, block_pairs: Sequence[Any], decision: Any) -> None:
        now = self.clock()
        if self._started is None:
            self._started = self._last_emit = now
        self.pairs += len(block_pairs)
        terminal = getattr(decision, "action", "continue") != "continue"
        due = self._last_emit is not None and now - self._last_emit >= self.min_interval_s
        if due or (terminal and self.lines_emitted):
            logging.getLogger(PROGRESS_LOGGER).info(self.line(block, decision, now))
            self.lines_emitted += 1
            self._last_emit = now

    def line(self, block: int, decision: Any, now: float) -> str:
        log_e = getattr(decision, "log_e", None)
        evidence = "log E n/a" if log_e is None else f"log E {log_e:.2f}"
        if self.accept_at is not None and log_e is not None:
            evidence += f" (accept at {self.accept_at:.2f})"
        action = getattr(decision, "action", "continue")
        head = f"[{self.label}] block {block + 1}: {self.pairs}/{self.max_pairs} pairs, {evidence}"
        if action != "continue":
            reason = getattr(decision, "reason", "")
            return f"{head}; decided: {action}" + (f" ({reason})" if reason else "")
        elapsed = now - (self._started if self._started is not None else now)
        if elapsed <= 0 or not self.pairs:
            return f"{head}; time left: unknown"
        rate = self.pairs / elapsed
        left = max(self.max_pairs - self.pairs, 0) / rate
        return f"{head}; at most {format_seconds(left)} left at {rate:.2f} pairs/s"


def format_seconds(seconds: float) -> str:
    """`42 s`, `3 min 07 s`, `1 h 05 min`."""
    seconds = max(0, round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    minutes, secs = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes} min {secs:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"
