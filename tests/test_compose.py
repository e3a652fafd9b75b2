from __future__ import annotations

import pytest

from harness.compose import build_provider
from harness.config.schema import LLMConfig
from harness.llm.cache import CachedProvider, ResponseCache
from harness.llm.openai_provider import OpenAIProvider
from harness.llm.protocol import LLMProvider, Role
from harness.llm.roles import model_for_role


def test_openai_provider_with_cache(tmp_path):
    cfg = LLMConfig(provider="openai", model="shared", models={"judge": "judge-model"}, base_url="http://127.0.0.1:1/v1")
    with ResponseCache(tmp_path) as cache:
        provider = build_provider(cfg, cache=cache)
        assert isinstance(provider, CachedProvider) and isinstance(provider.inner, OpenAIProvider)
        assert isinstance(provider, LLMProvider)
        assert provider.model_for(Role.JUDGE) == "judge-model"
        assert provider.model_for(Role.SOLVER) == "shared"
    assert isinstance(build_provider(cfg), OpenAIProvider)


def test_unknown_provider_and_sim_without_world():
    with pytest.raises(ValueError, match="llm.provider: unknown provider 'nope'"):
        build_provider(LLMConfig(provider="nope"))
    with pytest.raises(ValueError, match="needs the simulated world"):
        build_provider(LLMConfig(provider="sim"))


def test_model_for_role_fallback():
    cfg = LLMConfig(model="base", models={"editor": "ed", "diagnoser": ""})
    assert model_for_role(cfg, Role.EDITOR) == "ed"
    assert model_for_role(cfg, "diagnoser") == "base"
    assert model_for_role(cfg, Role.SOLVER) == "base"
