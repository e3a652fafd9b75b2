"""The preflight of llm=openai (harness/llm/preflight.py) against a real HTTP server on 127.0.0.1."""

from __future__ import annotations

import asyncio
import socket

import pytest

from harness.config.schema import LLMConfig
from harness.llm.cache import CachedProvider, ResponseCache
from harness.llm.openai_provider import OpenAIProvider
from harness.llm.preflight import models_url, require_api_key
from harness.llm.protocol import ChatMessage, LLMRequest, PreflightError, Role
from tests.support.llm_config import fast_llm_config
from tests.support.openai_server import FakeOpenAIServer

pytestmark = pytest.mark.timeout(30)
KEY = "sk-test-PREFLIGHT-0123456789"


def request(text: str = "q") -> LLMRequest:
    return LLMRequest(Role.SOLVER, (ChatMessage("system", "s"), ChatMessage("user", text)))


async def ask(provider, n: int = 1):
    try:
        return await asyncio.gather(*(provider.complete(request(f"q{i}")) for i in range(n)))
    finally:
        await provider.aclose()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_nothing_listening_is_named_with_the_url_and_is_not_a_timeout():
    port = free_port()
    provider = OpenAIProvider(fast_llm_config(base_url=f"http://127.0.0.1:{port}/v1"), api_key=KEY)
    with pytest.raises(PreflightError) as info:
        asyncio.run(ask(provider, 4))
    message = str(info.value)
    assert f"nothing is listening at http://127.0.0.1:{port}/v1 (connection refused)" in message
    assert "timeout" not in message.lower() and "timed out" not in message.lower()
    token_url = f"http://tok-SECRET-123@127.0.0.1:{port}/v1?api_key=q-SECRET-456"  # credentials never shown
    with pytest.raises(PreflightError) as info:
        asyncio.run(ask(OpenAIProvider(fast_llm_config(base_url=token_url), api_key=KEY)))
    assert f"http://127.0.0.1:{port}/v1 (connection refused)" in str(info.value) and "SECRET" not in str(info.value)


def test_refused_key_is_one_line_naming_the_variable_and_the_server_is_not_asked_twice():
    with FakeOpenAIServer(require_key="sk-the-right-one") as server:
        provider = OpenAIProvider(fast_llm_config(base_url=server.base_url, api_key_env="HT_PREFLIGHT_KEY"), api_key=KEY)
        with pytest.raises(PreflightError) as info:
            asyncio.run(ask(provider, 5))
        assert "refused the API key (HTTP 401 on GET /models)" in str(info.value)
        assert "HT_PREFLIGHT_KEY" in str(info.value) and KEY not in str(info.value)
        assert server.n_requests == 0  # no chat completion was sent (paid) after the refusal
        with pytest.raises(PreflightError):  # remembered: a later call fails the same way
            asyncio.run(ask(provider, 1))


def test_model_not_served_lists_the_servers_models():
    with FakeOpenAIServer(served_models=("smollm2", "qwen-0.5b")) as server:
        cfg = fast_llm_config(base_url=server.base_url, model="smollm2", models={"editor": "gpt-big"})
        with pytest.raises(PreflightError) as info:
            asyncio.run(ask(OpenAIProvider(cfg, api_key=KEY)))
        assert f"{server.base_url} does not serve model 'gpt-big'" in str(info.value)
        assert "it serves: smollm2, qwen-0.5b" in str(info.value)
        assert server.n_requests == 0


def test_served_models_pass_and_a_server_without_a_model_list_is_not_refused():
    with FakeOpenAIServer(served_models=("test-model",)) as server:
        replies = asyncio.run(ask(OpenAIProvider(fast_llm_config(base_url=server.base_url), api_key=KEY), 6))
        assert len(replies) == 6 and server.n_requests == 6  # the GET is not a completion
    with FakeOpenAIServer() as server:  # GET /v1/models -> 404
        replies = asyncio.run(ask(OpenAIProvider(fast_llm_config(base_url=server.base_url), api_key=KEY), 2))
        assert [r.text.endswith("ANSWER: A") for r in replies] == [True, True]


def test_a_cached_run_needs_no_server(tmp_path):
    with FakeOpenAIServer() as server:
        cfg = fast_llm_config(base_url=server.base_url)
        with ResponseCache(tmp_path) as cache:
            first = asyncio.run(ask(CachedProvider(OpenAIProvider(cfg, api_key=KEY), cache)))
    with ResponseCache(tmp_path) as cache:  # the server is gone: the replay asks nothing, so no preflight
        again = asyncio.run(ask(CachedProvider(OpenAIProvider(cfg, api_key=KEY), cache)))
    assert again[0].text == first[0].text and again[0].cached


def test_missing_key_is_a_preflight_error_and_sim_needs_none(monkeypatch):
    monkeypatch.delenv("HT_PREFLIGHT_KEY", raising=False)
    with pytest.raises(PreflightError) as info:
        require_api_key(fast_llm_config(base_url="https://api.example.com/v1", api_key_env="HT_PREFLIGHT_KEY"))
    assert str(info.value).startswith("environment variable HT_PREFLIGHT_KEY (llm.api_key_env) is not set")
    require_api_key(LLMConfig(provider="sim"))


def test_models_url_keeps_the_path_and_query():
    assert models_url("http://127.0.0.1:8000/v1/") == "http://127.0.0.1:8000/v1/models"
    assert models_url("https://h.example/openai/v1?api-version=2") == "https://h.example/openai/v1/models?api-version=2"
