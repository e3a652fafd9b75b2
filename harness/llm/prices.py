"""USD cost of a call from the configured price table.

`llm.prices` maps model -> {"input": USD per million prompt tokens,
"output": USD per million completion tokens}. Local servers usually have no
entry: their calls cost nothing, and the provider says so once in the log.
"""

from __future__ import annotations

from collections.abc import Mapping

from harness.llm.protocol import Usage

PRICE_KEYS = ("input", "output")


def validate_prices(prices: Mapping[str, Mapping[str, float]]) -> None:
    """Raise ValueError naming `llm.prices.<model>.<key>` when an entry is not a non-negative number."""
    for model, entry in (prices or {}).items():
        if not isinstance(entry, Mapping):
            raise ValueError(f"llm.prices.{model}: expected a mapping with keys {PRICE_KEYS}, got {type(entry).__name__}")
        unknown = set(entry) - set(PRICE_KEYS)
        if unknown:
            raise ValueError(f"llm.prices.{model}: unknown keys {sorted(unknown)}; expected {PRICE_KEYS}")
        for key in PRICE_KEYS:
            value = entry.get(key)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
                raise ValueError(f"llm.prices.{model}.{key}: expected a non-negative number (USD per million tokens), got {value!r}")


def has_price(prices: Mapping[str, Mapping[str, float]], model: str) -> bool:
    return model in (prices or {})


def cost_usd(prices: Mapping[str, Mapping[str, float]], model: str, usage: Usage) -> float:
    """Cost of `usage` on `model`; 0.0 when the table has no entry for the model."""
    entry = (prices or {}).get(model)
    if entry is None:
        return 0.0
    return (usage.prompt_tokens * float(entry["input"]) + usage.completion_tokens * float(entry["output"])) / 1_000_000
