"""Retry delays: exponential backoff with jitter, capped; a server's Retry-After honoured up to its own cap."""

from __future__ import annotations

import email.utils
import math
import random
import time


def backoff_delay(attempt: int, *, base_s: float, max_s: float, rng: random.Random, retry_after_s: float | None = None,
                  retry_after_max_s: float | None = None) -> float:
    """Seconds to wait before retry number `attempt` (0-based).

    Equal jitter: half of min(max_s, base_s * 2**attempt) fixed, half uniform,
    so concurrent callers spread out but still back off. A server's
    Retry-After (when given) is a floor, capped at `retry_after_max_s`
    (`llm.retry_after_max_s`, larger than `max_s`: a rate-limited server is
    waited for as long as it asks, within reason); None caps it at `max_s`.
    """
    if attempt < 0:
        raise ValueError(f"attempt must be >= 0, got {attempt}")
    ceiling = min(max_s, base_s * (2.0 ** attempt))
    delay = ceiling / 2.0 + rng.uniform(0.0, ceiling / 2.0)
    if retry_after_s is not None and retry_after_s > delay:
        delay = min(max_s if retry_after_max_s is None else max(max_s, retry_after_max_s), retry_after_s)
    return max(0.0, delay)


def parse_retry_after(value: str | None, *, now: float | None = None) -> float | None:
    """Seconds a `Retry-After` header value asks for: delay-seconds ("12", "1.5") or an HTTP-date
    ("Wed, 21 Oct 2015 07:28:00 GMT", relative to `now`, never negative); None when absent or unreadable."""
    if value is None:
        return None
    text = value.strip()
    try:
        seconds = float(text)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(text)
        except (TypeError, ValueError, IndexError):
            return None
        if when.tzinfo is None:
            return None
        seconds = when.timestamp() - (time.time() if now is None else now)
    if not math.isfinite(seconds):
        return None
    return max(0.0, seconds)
