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


def test_progress_lines_show_rounded_numbers() -> None:
    """What a person reads is rounded (4 decimals; 3 significant digits below 0.001), whatever the call site
    passed: floats as %s / %d / %.1f arguments, and `readable` for text built before logging."""
    import re

    from harness.tracking.readable import readable, rounded

    stream = io.StringIO()
    root = logging.getLogger()
    saved = (root.level, list(root.handlers))
    try:
        for handler in list(root.handlers):
            root.removeHandler(handler)
        configure_logging(quiet=False, stream=stream)
        logging.getLogger(PROGRESS_LOGGER).info("[slow@e1] eval %s, best %s, level %s, %d rollouts in %.1f s",
                                                 0.6818181818181818, 2 / 3, 0.000121901, 21212.0, 3.14159)
        logging.getLogger(PROGRESS_LOGGER).info("[report] %s", ", ".join(
            f"{k}={readable(v)}" for k, v in {"val_hard_acc": 0.3333333333333333, "rollouts": 70, "usd": 0.0}.items()))
    finally:
        for handler in list(root.handlers):
            root.removeHandler(handler)
        root.setLevel(saved[0])
        for handler in saved[1]:
            root.addHandler(handler)
    text = stream.getvalue()
    assert "eval 0.6818, best 0.6667, level 0.000122, 21212 rollouts in 3.1 s" in text
    assert "[report] val_hard_acc=0.3333, rollouts=70, usd=0.0" in text
    assert not [m for m in re.findall(r"\d\.0*(\d+)", text) if len(m) > 4], text  # > 4 significant decimals
    assert (rounded(float("nan")) != rounded(float("nan")), rounded(-1e-7), rounded(12345.678912)) == (True, -1e-7, 12345.6789)
