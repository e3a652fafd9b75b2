"""Fail the test suite on an unclosed aiohttp client session or connector (issue 14 item 8).

aiohttp reports a session or connector that is garbage-collected while open through the event loop's
exception handler, i.e. as an ERROR record of the `asyncio` logger ("Unclosed client session",
"Unclosed connector"). `UnclosedRecorder` keeps every such record; the fixture in tests/conftest.py fails
the test during which one was logged, and `pytest_sessionfinish` collects garbage once more at the end and
fails the session for any record left (a session kept alive by a reference cycle dies only then).
"""

from __future__ import annotations

import logging

MARKERS = ("Unclosed client session", "Unclosed connector", "Unclosed connection")


class UnclosedRecorder(logging.Handler):
    def __init__(self) -> None:
        super().__init__(level=logging.ERROR)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if message.startswith(MARKERS):
            self.messages.append(message.splitlines()[0])


RECORDER = UnclosedRecorder()


def install() -> None:
    logger = logging.getLogger("asyncio")
    if RECORDER not in logger.handlers:
        logger.addHandler(RECORDER)


def new_since(start: int) -> list[str]:
    return RECORDER.messages[start:]
