"""Retry delays: exponential backoff with jitter, capped, honouring Retry-After."""

from __future__ import annotations

import random


def backoff_delay(attempt: int, *, base_s: float, max_s: float, rng: random.Random, retry_after_s: float | None = None) -> float:
    """Seconds to wait before retry number `attempt` (0-based).

    Equal jitter: half of min(max_s, base_s * 2**attempt) fixed, half uniform,
    so concurrent callers spread out but still back off. A server's
    Retry-After (when given) is a floor, still capped at `max_s`.
    """
    if attempt < 0:
        raise ValueError(f"attempt must be >= 0, got {attempt}")
    ceiling = min(max_s, base_s * (2.0 ** attempt))
    delay = ceiling / 2.0 + rng.uniform(0.0, ceiling / 2.0)
    if retry_after_s is not None and retry_after_s > delay:
        delay = min(max_s, retry_after_s)
    return max(0.0, delay)
