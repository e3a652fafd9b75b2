"""Progress lines are rate-limited and hidden in quiet mode."""

from __future__ import annotations

import io
import logging

from harness.tracking.progress import PROGRESS_LOGGER, ProgressReporter, configure_logging


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_lines_are_rate_limited(caplog) -> None:
    clock = FakeClock()
    reporter = ProgressReporter(stage="rollout@e1.s1", totals={"questions": 100}, min_interval_s=5.0, clock=clock)
    with caplog.at_level(logging.INFO, logger=PROGRESS_LOGGER):
        for _ in range(100):  # 100 updates within 9.9 s -> one line at t >= 5 s, not 100
            reporter.update(questions=1, rollouts=2, usd=0.001)
            clock.now += 0.1
        reporter.close()
    lines = [r.getMessage() for r in caplog.records if r.name == PROGRESS_LOGGER]
    assert len(lines) == 2
    assert lines[0].startswith("[rollout@e1.s1] progress: questions ")
    assert lines[-1] == "[rollout@e1.s1] done: questions 100/100, rollouts 200, usd 0.1000"


def test_quiet_mode_hides_progress() -> None:
    stream = io.StringIO()
    root = logging.getLogger()
    saved = (root.level, list(root.handlers))
    try:
        for handler in list(root.handlers):
            root.removeHandler(handler)
        configure_logging(quiet=True, stream=stream)
        logging.getLogger(PROGRESS_LOGGER).info("hidden line")
        logging.getLogger(PROGRESS_LOGGER).warning("shown warning")
        configure_logging(quiet=False, stream=stream)  # idempotent: still one handler
        logging.getLogger(PROGRESS_LOGGER).info("shown line")
        assert len([h for h in root.handlers if h.get_name() == "harness-console"]) == 1
    finally:
        for handler in list(root.handlers):
            root.removeHandler(handler)
        root.setLevel(saved[0])
        for handler in saved[1]:
            root.addHandler(handler)
    text = stream.getvalue()
    assert "hidden line" not in text
    assert "shown warning" in text and "shown line" in text
