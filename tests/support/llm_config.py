"""Small LLMConfig builders for tests (the real schema dataclass, shrunk timings)."""

from __future__ import annotations

from typing import Any

from harness.config.schema import LLMConfig


def fast_llm_config(**overrides: Any) -> LLMConfig:
    cfg = LLMConfig(provider="openai", model="test-model", timeout_s=0.5, max_retries=3, backoff_base_s=0.01, backoff_max_s=0.05)
    for key, value in overrides.items():
        if not hasattr(cfg, key):
            raise AttributeError(f"LLMConfig has no field {key!r}")
        setattr(cfg, key, value)
    return cfg
