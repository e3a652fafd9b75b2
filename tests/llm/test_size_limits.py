"""Size limits of requests and replies (issue 31 item 6) against a real HTTP server on 127.0.0.1."""

from __future__ import annotations

import asyncio

import pytest

from harness.llm.cache import CachedProvider, ResponseCache
from harness.llm.openai_provider import MAX_REPLY_CHARS, MAX_REQUEST_CHARS, OpenAIProvider, RequestTooLargeError
from harness.llm.protocol import ChatMessage, LLMError, LLMRequest, Role
from tests.support.llm_config import fast_llm_config
from tests.support.openai_server import FakeOpenAIServer

pytestmark = pytest.mark.timeout(60)


def ask(provider, system: str, user: str = "q"):
    async def go():
        try:
            return await provider.complete(LLMRequest(Role.SOLVER, (ChatMessage("system", system), ChatMessage("user", user))))
        finally:
            await provider.aclose()

    return asyncio.run(go())


def test_a_request_built_from_a_huge_harness_file_is_never_sent():
    with FakeOpenAIServer() as server:
        provider = OpenAIProvider(fast_llm_config(base_url=server.base_url), api_key="sk-local")
        with pytest.raises(RequestTooLargeError) as info:
            ask(provider, "x" * (MAX_REQUEST_CHARS + 1))
        assert server.n_requests == 0
    message = str(info.value)
    assert f"solver request of {MAX_REQUEST_CHARS + 2:,} characters exceeds {MAX_REQUEST_CHARS:,}" in message
    assert "largest message is the system message" in message and "system_prompt.md" in message


def test_a_reply_beyond_the_limit_is_a_bad_response_and_is_not_cached(tmp_path):
    with FakeOpenAIServer(reply=lambda body: "y" * (MAX_REPLY_CHARS + 1)) as server:
        cfg = fast_llm_config(base_url=server.base_url)
        with ResponseCache(tmp_path) as cache:
            with pytest.raises(LLMError) as info:
                ask(CachedProvider(OpenAIProvider(cfg, api_key="sk-local"), cache), "s")
            assert len(cache) == 0
    assert info.value.kind == "bad_response" and f"more than the {MAX_REPLY_CHARS:,} any reply may have" in str(info.value)
