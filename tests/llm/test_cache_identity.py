"""The response cache key holds the endpoint and every sampling parameter: two real HTTP servers on 127.0.0.1 with
the same model name never share an entry; per-sample seeds reach the server."""

from __future__ import annotations

import asyncio

import pytest

from harness.llm.cache import CachedProvider, ResponseCache
from harness.llm.openai_provider import OpenAIProvider, endpoint_identity
from harness.llm.protocol import SEED_MODULUS, ChatMessage, LLMRequest, Role, sample_seed
from tests.support.llm_config import fast_llm_config
from tests.support.openai_server import FakeOpenAIServer

pytestmark = pytest.mark.timeout(60)


def labelled(label: str):
    """A deterministic server: the reply is a function of (label, seed, temperature, max_tokens, last message)."""

    def reply(body) -> str:
        return (f"{label} seed={body.get('seed')} t={body.get('temperature')} n={body.get('max_tokens')} "
                f"{body['messages'][-1]['content']}\nANSWER: A")

    return reply


def req(role: Role = Role.SOLVER, text: str = "Which letter?", *, sample_index: int = 0, **params) -> LLMRequest:
    return LLMRequest.make(role, [ChatMessage("system", "Be brief."), ChatMessage("user", text)], sample_index=sample_index, **params)


def ask(cache_dir, server: FakeOpenAIServer, requests, **cfg) -> list:
    async def go():
        provider = OpenAIProvider(fast_llm_config(base_url=server.base_url, model="same-model", **cfg), api_key="local")
        with ResponseCache(cache_dir) as cache:
            cached = CachedProvider(provider, cache)
            try:
                return [await cached.complete(r) for r in requests]
            finally:
                await cached.aclose()

    return asyncio.run(go())


@pytest.fixture
def two_servers():
    with FakeOpenAIServer(reply=labelled("server-A")) as a, FakeOpenAIServer(reply=labelled("server-B")) as b:
        yield a, b


def test_two_servers_with_the_same_model_name_never_share_entries(tmp_path, two_servers):
    a, b = two_servers
    work = [req(), req(Role.EDITOR, "Edit it."), req(Role.DIAGNOSER, "Why?"), req(sample_index=5)]
    first_a = ask(tmp_path / "cache", a, work)
    assert len(a.requests) == 4 and not any(r.cached for r in first_a)
    from_b = ask(tmp_path / "cache", b, work)
    assert len(b.requests) == 4, "the second server was answered from the first one's cache entries"
    assert all(r.text.startswith("server-B") and not r.cached for r in from_b)
    again_a = ask(tmp_path / "cache", a, work)
    assert len(a.requests) == 4 and all(r.cached for r in again_a)
    assert [r.text for r in again_a] == [r.text for r in first_a]
    with ResponseCache(tmp_path / "cache") as cache:
        assert len(cache) == 8


def test_every_roles_temperature_and_max_tokens_are_part_of_the_key(tmp_path, two_servers):
    a, _ = two_servers
    work = [req(Role.EDITOR, "Edit it."), req(Role.DIAGNOSER, "Why?")]  # no params of their own: llm.* defaults apply
    ask(tmp_path / "cache", a, work, temperature=0.7, max_tokens=64)
    ask(tmp_path / "cache", a, work, temperature=0.2, max_tokens=64)
    ask(tmp_path / "cache", a, work, temperature=0.2, max_tokens=32)
    assert len(a.requests) == 6
    assert [(r.body["temperature"], r.body["max_tokens"]) for r in a.requests[::2]] == [(0.7, 64), (0.2, 64), (0.2, 32)]
    ask(tmp_path / "cache", a, work, temperature=0.2, max_tokens=32)
    assert len(a.requests) == 6  # the same settings again: all replayed


def test_each_sample_sends_its_own_seed_and_a_seeded_server_gives_distinct_samples(tmp_path, two_servers):
    a, _ = two_servers
    gate_like = [req(sample_index=10_000_000 + k) for k in range(6)]
    replies = ask(tmp_path / "cache", a, gate_like)
    seeds = [r.body["seed"] for r in a.requests]
    assert seeds == [sample_seed(10_000_000 + k) for k in range(6)] and len(set(seeds)) == 6
    assert len({r.text for r in replies}) == 6  # a deterministic server that honours seeds: distinct samples
    explicit = ask(tmp_path / "cache2", a, [req(seed=7)])  # a request's own seed is sent as it is
    assert a.requests[-1].body["seed"] == 7 and "seed=7" in explicit[0].text


def test_sample_seeds_fit_32_bits_and_never_collide_within_a_gate():
    indices = [GATE + k for GATE in (10_000_000, 110_000_000 * 1000) for k in range(0, 400 * 1000, 1000)]
    seeds = [sample_seed(i) for i in indices]
    assert all(0 <= s < SEED_MODULUS < 2**31 for s in seeds)
    assert len(set(seeds[:400])) == 400 and len(set(seeds[400:])) == 400


@pytest.mark.parametrize(("base_url", "identity"), [
    ("http://127.0.0.1:8000/v1", "http://127.0.0.1:8000/v1"),
    ("http://127.0.0.1:8000/v1/", "http://127.0.0.1:8000/v1"),
    ("HTTP://LocalHost:8000/v1", "http://localhost:8000/v1"),
    ("https://user:hunter2@api.example.com/v1?api-key=sk-secret#x", "https://api.example.com:443/v1"),
    ("http://[::1]:9000/v1", "http://[::1]:9000/v1"),
    (None, "https://api.openai.com:443/v1"),
])
def test_endpoint_identity_is_the_server_without_credentials(base_url, identity):
    assert endpoint_identity(base_url) == identity


def test_the_sdk_default_endpoint_follows_openai_base_url(monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    provider = OpenAIProvider(fast_llm_config(base_url=None), api_key="sk-x")
    assert provider.request_identity(req())["endpoint"] == "http://127.0.0.1:9/v1"


def test_a_bad_base_url_is_named():
    with pytest.raises(ValueError, match="llm.base_url"):
        endpoint_identity("not a url")
