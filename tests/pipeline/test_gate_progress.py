"""`GateProgress`, the gates' on_block hook: a line at most every interval with pairs / max, log E and the time the
rest of the pair budget takes at the measured rate; the decision closes a gate that printed; the interval comes from
HARNESS_GATE_PROGRESS_S."""

from __future__ import annotations

import logging

import pytest

from harness.kernel.types import GateVerdict
from harness.tracking.progress import GATE_INTERVAL_ENV, PROGRESS_LOGGER, GateProgress, gate_interval_s


def _verdict(action: str, log_e: float, reason: str = "") -> GateVerdict:
    return GateVerdict(action, log_e, 0.0, 0, 0, 0, 0, reason)  # type: ignore[arg-type]


def test_lines_carry_pairs_log_e_and_the_time_left_at_the_measured_rate(caplog: pytest.LogCaptureFixture) -> None:
    now = [100.0]
    progress = GateProgress("gate@e1.s2 addition", 40, accept_at=1.0, min_interval_s=10.0, clock=lambda: now[0])
    progress.start()
    caplog.set_level(logging.INFO, logger=PROGRESS_LOGGER)
    now[0] = 104.0
    progress(0, [object()] * 4, _verdict("continue", 0.2))  # 4 s in: before the interval, no line
    now[0] = 120.0
    progress(1, [object()] * 4, _verdict("continue", 0.55))  # 8 pairs in 20 s: 0.4 pairs/s, 32 left -> 80 s
    now[0] = 125.0
    progress(2, [object()] * 4, _verdict("continue", 0.6))  # 5 s after the last line: none
    now[0] = 130.0
    progress(3, [object()] * 4, _verdict("reject", -0.4, "betting_budget: at the end of the budget"))
    lines = [r.getMessage() for r in caplog.records if r.name == PROGRESS_LOGGER]
    assert lines == [
        "[gate@e1.s2 addition] block 2: 8/40 pairs, log E 0.55 (accept at 1.00); at most 1 min 20 s left at 0.40 pairs/s",
        "[gate@e1.s2 addition] block 4: 16/40 pairs, log E -0.40 (accept at 1.00); decided: reject "
        "(betting_budget: at the end of the budget)",
    ]


def test_a_gate_that_printed_nothing_ends_silently(caplog: pytest.LogCaptureFixture) -> None:
    progress = GateProgress("gate@e1.s1 t", 12, min_interval_s=10.0, clock=lambda: 0.0)
    caplog.set_level(logging.INFO, logger=PROGRESS_LOGGER)
    progress(0, [object()] * 3, _verdict("accept", 0.7))
    assert progress.lines_emitted == 0 and not [r for r in caplog.records if r.name == PROGRESS_LOGGER]


def test_the_interval_is_read_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(GATE_INTERVAL_ENV, raising=False)
    assert gate_interval_s() == 10.0
    monkeypatch.setenv(GATE_INTERVAL_ENV, "0")
    assert gate_interval_s() == 0.0 and GateProgress("g", 4).min_interval_s == 0.0
    monkeypatch.setenv(GATE_INTERVAL_ENV, "soon")
    with pytest.raises(ValueError, match="HARNESS_GATE_PROGRESS_S='soon': expected a number of seconds"):
        gate_interval_s()
