"""OpenAIProvider against a real HTTP server on 127.0.0.1 (tests/support/openai_server.py).

Tests taking the `client_processes` fixture run twice: with the SDK in this process (1) and through two
client worker processes (2; one pool shared by the module, started once, so the parametrisation costs
no process start per test). Worker lifecycle (start, crash, orphans, key hygiene): test_client_pool.py.
"""

from __future__ import annotations

import asyncio
import logging
import time

import pytest

from harness.llm.client_pool import ClientProcessPool
from harness.llm.openai_provider import OpenAIProvider, resolve_api_key
from harness.llm.protocol import ChatMessage, LLMError, LLMRequest, Role
from tests.support.llm_config import fast_llm_config
from tests.support.openai_server import FakeOpenAIServer

pytestmark = pytest.mark.timeout(30)

SECRET = "sk-test-SECRET-0123456789abcdef"


@pytest.fixture(scope="module")
def shared_server():
    with FakeOpenAIServer(slow_s=2.0) as srv:
        yield srv


@pytest.fixture
def server(shared_server):
    def reset() -> None:
        with shared_server._lock:
            shared_server.requests.clear()
            shared_server._queue.clear()
        shared_server.latency_s = 0.0

    reset()
    yield shared_server
    reset()


@pytest.fixture(scope="module")
def worker_pool(shared_server):
    pool = ClientProcessPool(2, api_key=SECRET, base_url=shared_server.base_url, timeout_s=fast_llm_config().timeout_s)
    yield pool
    asyncio.run(pool.aclose())


@pytest.fixture(params=[1, 2], ids=["in_process", "2_client_processes"])
def client_processes(request):
    if request.param > 1:
        return request.getfixturevalue("worker_pool")
    return None


def make_provider(server: FakeOpenAIServer, pool: ClientProcessPool | None = None, **overrides) -> OpenAIProvider:
    cfg = fast_llm_config(base_url=server.base_url, **overrides)
    if pool is not None:
        cfg.client_processes = pool.n_processes
    return OpenAIProvider(cfg, api_key=SECRET, client_pool=pool)


def request(role: Role = Role.SOLVER, text: str = "What is 2+2?", **params) -> LLMRequest:
    return LLMRequest.make(role, [ChatMessage("system", "Be brief."), ChatMessage("user", text)], **params)


def run(coro):
    return asyncio.run(coro)


async def complete_and_close(provider: OpenAIProvider, req: LLMRequest):
    try:
        return await provider.complete(req)
    finally:
        await provider.aclose()


def test_normal_call_returns_text_usage_cost_and_sends_the_key(server, client_processes):
    provider = make_provider(server, client_processes, prices={"test-model": {"input": 1.0, "output": 2.0}})
    response = run(complete_and_close(provider, request(temperature=0.0)))
    assert response.text.endswith("ANSWER: A")
    assert response.provider == "openai" and response.model == "test-model"
    assert response.usage.completion_tokens > 0
    expected = (response.usage.prompt_tokens * 1.0 + response.usage.completion_tokens * 2.0) / 1e6
    assert response.cost_usd == pytest.approx(expected)
    assert response.latency_s > 0
    [sent] = server.requests
    assert sent.headers["Authorization"] == f"Bearer {SECRET}"
    assert sent.body["model"] == "test-model"
    assert sent.body["temperature"] == 0.0  # request params override config defaults
    assert sent.body["messages"][1] == {"role": "user", "content": "What is 2+2?"}


def test_role_model_falls_back_to_shared_default(server, client_processes):
    async def both():
        provider = make_provider(server, client_processes, models={"editor": "big-editor"})
        await provider.complete(request(Role.EDITOR))
        await complete_and_close(provider, request(Role.SOLVER))

    run(both())
    assert [r.body["model"] for r in server.requests] == ["big-editor", "test-model"]


def test_role_max_tokens_fall_back_to_the_shared_one(server, client_processes):
    async def three():
        provider = make_provider(server, client_processes, max_tokens=96, max_tokens_by_role={"editor": 512})
        await provider.complete(request(Role.EDITOR))
        await provider.complete(request(Role.EDITOR, max_tokens=7))  # a request's own value wins
        await complete_and_close(provider, request(Role.SOLVER))

    run(three())
    assert [r.body["max_tokens"] for r in server.requests] == [512, 7, 96]


@pytest.mark.parametrize("behaviour", ["429", "500", "malformed", "empty_choices"])
def test_transient_failure_then_success(server, behaviour, client_processes):
    server.script(behaviour)
    response = run(complete_and_close(make_provider(server, client_processes), request()))
    assert response.text.endswith("ANSWER: A")
    assert [r.behaviour for r in server.requests] == [behaviour, "normal"]


def test_timeout_then_success_within_deadline(server, client_processes):
    server.script("slow")
    started = time.monotonic()
    response = run(complete_and_close(make_provider(server, client_processes), request()))
    assert response.text
    assert time.monotonic() - started < 1.5  # one 0.5 s timeout, not the 2 s slow response


@pytest.mark.parametrize(
    "behaviour, kind",
    [("429", "rate_limit"), ("500", "server"), ("slow", "timeout"), ("malformed", "bad_response"), ("empty_choices", "bad_response")],
)
def test_persistent_failure_is_a_clear_error_not_a_hang(server, behaviour, kind, client_processes):
    server.script(*[behaviour] * 10)
    provider = make_provider(server, client_processes, max_retries=2)
    started = time.monotonic()
    with pytest.raises(LLMError) as info:
        run(complete_and_close(provider, request(Role.DIAGNOSER)))
    assert info.value.kind == kind
    assert info.value.role is Role.DIAGNOSER and info.value.model == "test-model"
    assert "diagnoser call to model 'test-model' failed after" in str(info.value)
    assert len(server.requests) == 3  # 1 + max_retries
    assert time.monotonic() - started < 5


def test_bad_responses_are_retried_a_bounded_number_of_times(server, client_processes):
    server.script(*["malformed"] * 10)
    with pytest.raises(LLMError) as info:
        run(complete_and_close(make_provider(server, client_processes, max_retries=8), request()))
    assert info.value.kind == "bad_response"
    assert len(server.requests) == 3  # 1 + MAX_BAD_RESPONSE_RETRIES, not 1 + max_retries


def test_auth_error_is_not_retried(server, client_processes):
    server.script("401")
    with pytest.raises(LLMError) as info:
        run(complete_and_close(make_provider(server, client_processes), request()))
    assert info.value.kind == "auth"
    assert len(server.requests) == 1


def test_connection_refused_is_a_connection_error():
    """How one attempt fails (the preflight, which names the URL, is off here: tests/llm/test_preflight.py)."""
    cfg = fast_llm_config(base_url="http://127.0.0.1:9/v1", max_retries=1)  # port 9: nothing listens
    with pytest.raises(LLMError) as info:
        run(complete_and_close(OpenAIProvider(cfg, api_key=SECRET, preflight=False), request()))
    assert info.value.kind == "connection"


def test_missing_usage_is_recorded_as_zero_with_a_warning(server, caplog, client_processes):
    server.script("no_usage")
    with caplog.at_level(logging.WARNING, logger="harness.llm.openai"):
        response = run(complete_and_close(make_provider(server, client_processes), request()))
    assert response.usage.total_tokens == 0 and response.cost_usd == 0.0
    assert "returned no token usage" in caplog.text


def test_key_never_appears_in_logs_or_errors(server, caplog, tmp_path, client_processes):
    log_file = tmp_path / "run.log"
    handler = logging.FileHandler(log_file)
    handler.setLevel(logging.DEBUG)
    root = logging.getLogger()
    root.addHandler(handler)
    old_level = root.level
    root.setLevel(logging.DEBUG)
    try:
        server.script("429", "500", "slow", "malformed")
        with caplog.at_level(logging.DEBUG):
            provider = make_provider(server, client_processes, max_retries=5)
            run(complete_and_close(provider, request()))
            server.script(*["401"] * 3)
            with pytest.raises(LLMError) as info:
                run(complete_and_close(make_provider(server, client_processes), request()))
    finally:
        root.removeHandler(handler)
        handler.close()
        root.setLevel(old_level)
    assert all(r.headers["Authorization"] == f"Bearer {SECRET}" for r in server.requests)
    assert "retry" in caplog.text  # the retries were logged ...
    assert SECRET not in caplog.text  # ... without the key
    assert SECRET not in log_file.read_text()
    assert SECRET not in str(info.value) and SECRET not in repr(info.value)


def test_missing_key_for_remote_url_is_a_clear_error(monkeypatch):
    monkeypatch.delenv("HT_TEST_KEY", raising=False)
    cfg = fast_llm_config(base_url="https://api.example.com/v1", api_key_env="HT_TEST_KEY")
    with pytest.raises(LLMError) as info:
        OpenAIProvider(cfg)
    assert info.value.kind == "auth" and "HT_TEST_KEY" in str(info.value)


def test_local_url_accepts_a_missing_key_and_env_key_is_used(monkeypatch, server):
    monkeypatch.delenv("HT_TEST_KEY", raising=False)
    assert resolve_api_key(fast_llm_config(base_url=server.base_url, api_key_env="HT_TEST_KEY"))
    monkeypatch.setenv("HT_TEST_KEY", SECRET)
    provider = OpenAIProvider(fast_llm_config(base_url=server.base_url, api_key_env="HT_TEST_KEY"))
    run(complete_and_close(provider, request()))
    assert server.requests[-1].headers["Authorization"] == f"Bearer {SECRET}"


def test_concurrent_calls_overlap(server, client_processes):
    server.latency_s = 0.2

    async def many():
        provider = make_provider(server, client_processes)
        try:
            return await asyncio.gather(*(provider.complete(request(text=f"q{i}")) for i in range(10)))
        finally:
            await provider.aclose()

    started = time.monotonic()
    responses = run(many())
    assert len(responses) == 10
    assert time.monotonic() - started < 1.0  # 10 x 0.2 s sequentially would be 2 s


def test_bad_config_values_are_named():
    with pytest.raises(ValueError, match="llm.prices.m.input"):
        OpenAIProvider(fast_llm_config(base_url="http://127.0.0.1:1/v1", prices={"m": {"input": -1, "output": 1}}), api_key="x")
    with pytest.raises(ValueError, match="llm.models.solvr"):
        OpenAIProvider(fast_llm_config(base_url="http://127.0.0.1:1/v1", models={"solvr": "m"}), api_key="x")


def test_in_flight_requests_spread_over_small_pools_and_all_close(server):
    from harness.llm import openai_provider

    server.latency_s = 0.2

    async def many():
        provider = make_provider(server, timeout_s=5.0)
        responses = await asyncio.gather(*(provider.complete(request(text=f"q{i}")) for i in range(20)))
        clients = list(provider._res.clients)
        await provider.aclose()
        return responses, clients, provider._requests_per_client

    responses, clients, per_client = run(many())
    assert len(responses) == 20
    assert clients
    if per_client == openai_provider.REQUESTS_PER_CLIENT:  # httpx transport: small pools
        assert len(clients) >= 20 // per_client
    assert all(c.is_closed() for c in clients)


def test_one_provider_serves_several_event_loops(server, client_processes):
    # the loop calls asyncio.run once per batch with the same provider
    provider = make_provider(server, client_processes)
    first = run(provider.complete(request(text="first")))
    second = run(provider.complete(request(text="second")))
    run(provider.aclose())
    assert first.text and second.text
    assert [r.behaviour for r in server.requests] == ["normal", "normal"]  # no failed attempt, no retry


def test_test_server_latency_jitter_is_bounded_seeded_and_validated():
    server = FakeOpenAIServer(latency_s=0.1, latency_jitter=0.2, jitter_seed=3)
    delays = [server._latency() for _ in range(200)]
    assert all(0.08 <= d <= 0.12 for d in delays) and max(delays) - min(delays) > 0.03
    again = FakeOpenAIServer(latency_s=0.1, latency_jitter=0.2, jitter_seed=3)
    assert [again._latency() for _ in range(200)] == delays
    assert FakeOpenAIServer(latency_s=0.1)._latency() == 0.1
    with pytest.raises(ValueError, match="latency_jitter"):
        FakeOpenAIServer(latency_s=0.1, latency_jitter=1.5)._latency()


def test_a_base_url_without_v1_is_named_as_the_likely_cause_not_the_logprobs(server):
    """A 404 on the completion route (here: llm.base_url without its /v1, a common slip) says to check the URL and
    the model, not to turn log-probabilities off (the hint for a 400 on a logprobs request)."""
    root = server.base_url.rsplit("/v1", 1)[0]
    provider = OpenAIProvider(fast_llm_config(base_url=root, max_retries=0, top_logprobs=5), api_key=SECRET)
    with pytest.raises(LLMError) as info:
        run(complete_and_close(provider, request()))
    assert info.value.kind == "bad_request"
    assert "HTTP 404 from" in str(info.value) and "check llm.base_url" in str(info.value) and "/v1" in str(info.value)
    assert "top_logprobs=0" not in str(info.value)


def test_the_reply_format_probe_is_overhead_not_the_runs_work(server, tmp_path):
    """Each process probes the editor's reply format once (harness/evolution/ask.py). Through a metered provider the
    probe adds only to what the execution paid, never to calls, tokens or USD of the work: a second process on the
    same response cache (a resumed run, the next DVC stage) replays it and the work it reports is unchanged."""
    from harness.evolution.ask import probe_reply_format
    from harness.llm.cache import CachedProvider, ResponseCache
    from harness.llm.metering import MeteredProvider

    cfg = fast_llm_config(base_url=server.base_url, prices={"test-model": {"input": 1000.0, "output": 1000.0}})
    paid = []
    for _ in range(2):  # two processes' provider stacks over one cache directory
        cache = ResponseCache(tmp_path / "cache")
        metered = MeteredProvider(CachedProvider(OpenAIProvider(cfg, api_key=SECRET), cache))
        try:
            run(probe_reply_format(metered, Role.EDITOR))
            spend = metered.take().roles["editor"]
        finally:
            run(metered.aclose())
            cache.close()
        assert (spend.calls, spend.replayed, spend.prompt_tokens, spend.completion_tokens, spend.usd) == (0, 0, 0, 0, 0.0)
        paid.append(spend.usd_paid)
    assert paid[0] > 0 and paid[1] == 0.0  # the first process paid for it, the second replayed it
