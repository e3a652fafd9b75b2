"""Build the configured LLMProvider (`llm.provider`), optionally behind the response cache."""

from __future__ import annotations

from typing import Any

from harness.llm.cache import CachedProvider, ResponseCache
from harness.llm.protocol import LLMProvider

PROVIDERS = ("sim", "openai")


def build_provider(llm_cfg: Any, *, world: Any = None, cache: ResponseCache | None = None) -> LLMProvider:
    """`llm.provider` = "sim" (needs the simulated `world`) or "openai"; wrapped in CachedProvider when `cache` is given."""
    kind = getattr(llm_cfg, "provider", None)
    provider: LLMProvider
    if kind == "sim":
        if world is None:
            raise ValueError("llm.provider=sim needs the simulated world (use benchmark=sim, or llm=openai for real questions)")
        from harness.sim.provider import SimProvider  # lazy: the sim world is not needed on the real path

        provider = SimProvider(world, llm_cfg)
    elif kind == "openai":
        from harness.llm.openai_provider import OpenAIProvider  # lazy: importing openai costs ~0.3 s

        provider = OpenAIProvider(llm_cfg)
    else:
        raise ValueError(f"llm.provider: unknown provider {kind!r}; expected one of {PROVIDERS}")
    if cache is not None:
        return CachedProvider(provider, cache)
    return provider
