from __future__ import annotations

import random

import pytest

from harness.llm.backoff import backoff_delay
from harness.llm.prices import cost_usd, validate_prices
from harness.llm.protocol import Usage


def test_cost_per_million_tokens():
    prices = {"m": {"input": 2.5, "output": 10.0}}
    assert cost_usd(prices, "m", Usage(1_000_000, 0)) == pytest.approx(2.5)
    assert cost_usd(prices, "m", Usage(2000, 500)) == pytest.approx((2000 * 2.5 + 500 * 10) / 1e6)
    assert cost_usd(prices, "other", Usage(10**6, 10**6)) == 0.0


@pytest.mark.parametrize("prices, key", [
    ({"m": {"input": "1", "output": 1}}, "llm.prices.m.input"),
    ({"m": {"input": 1}}, "llm.prices.m.output"),
    ({"m": {"input": 1, "output": 1, "cached": 1}}, "llm.prices.m: unknown keys"),
    ({"m": 3}, "llm.prices.m: expected a mapping"),
])
def test_bad_price_table_names_the_key(prices, key):
    with pytest.raises(ValueError, match=key):
        validate_prices(prices)


def test_backoff_grows_is_jittered_capped_and_honours_retry_after():
    rng = random.Random(0)
    delays = [[backoff_delay(a, base_s=0.5, max_s=8.0, rng=rng) for a in range(6)] for _ in range(200)]
    for attempt in range(6):
        ceiling = min(8.0, 0.5 * 2**attempt)
        column = [d[attempt] for d in delays]
        assert all(ceiling / 2 <= x <= ceiling for x in column)
        assert len(set(column)) > 100  # jittered, not a constant
    assert backoff_delay(0, base_s=0.5, max_s=8.0, rng=rng, retry_after_s=3.0) == 3.0
    assert backoff_delay(0, base_s=0.5, max_s=8.0, rng=rng, retry_after_s=60.0) == 8.0
    with pytest.raises(ValueError):
        backoff_delay(-1, base_s=1, max_s=1, rng=rng)
