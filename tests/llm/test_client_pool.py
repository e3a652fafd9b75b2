"""OpenAIProvider with `llm.client_processes` = 2: worker lifecycle against a real server on 127.0.0.1.

The retry/classification matrix runs in both modes in test_openai_provider.py; here: every scripted
behaviour through workers owned by the provider (asyncio server engine), lazy start, key hygiene (argv,
environment, logs), aclose, a crashed or hung worker, cancellation, and no orphans when the parent is killed.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.llm import client_pool
from harness.llm.openai_provider import OpenAIProvider
from harness.llm.protocol import ChatMessage, LLMError, LLMRequest, Role
from tests.support.llm_config import fast_llm_config
from tests.support.openai_server import FakeOpenAIServer

pytestmark = pytest.mark.timeout(60)

SECRET = "sk-test-WORKER-SECRET-0123456789abcdef"
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def shared_server():
    with FakeOpenAIServer(slow_s=2.0, engine="asyncio") as srv:
        yield srv


@pytest.fixture
def server(shared_server):
    with shared_server._lock:
        shared_server.requests.clear()
        shared_server._queue.clear()
    shared_server.latency_s = 0.0
    yield shared_server


@pytest.fixture(scope="module")
def pool(shared_server):
    """Two workers shared by the crash / hang / cancel tests (a dead worker is replaced on the next call)."""
    shared = client_pool.ClientProcessPool(2, api_key=SECRET, base_url=shared_server.base_url, timeout_s=2.0)
    yield shared
    asyncio.run(shared.aclose())


def pooled_provider(pool: client_pool.ClientProcessPool, **overrides) -> OpenAIProvider:
    cfg = fast_llm_config(base_url=pool.base_url, client_processes=pool.n_processes, timeout_s=pool.timeout_s, **overrides)
    return OpenAIProvider(cfg, api_key=SECRET, client_pool=pool)


def request(text: str = "What is 2+2?") -> LLMRequest:
    return LLMRequest.make(Role.SOLVER, [ChatMessage("user", text)])


def alive(pid: int) -> bool:
    """True while `pid` runs (a zombie awaiting its reaper counts as gone)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


def wait_gone(pids: list[int], seconds: float) -> list[int]:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and any(alive(p) for p in pids):
        time.sleep(0.02)
    return [p for p in pids if alive(p)]


def test_workers_run_every_behaviour_start_lazily_and_stop_on_aclose(server, monkeypatch, caplog):
    monkeypatch.setenv("HT_POOL_KEY", SECRET)
    provider = OpenAIProvider(fast_llm_config(base_url=server.base_url, client_processes=2, api_key_env="HT_POOL_KEY", max_retries=5))
    assert provider.client_processes == 2 and provider._pool is not None
    assert provider._pool.pids == []  # nothing started before the first call

    async def scenario():
        first = await provider.complete(request())
        pids = provider._pool.pids
        server.script("429", "500", "slow", "malformed", "empty_choices")
        retried = await provider.complete(request("retried"))
        server.script("no_usage")
        no_usage = await provider.complete(request("no usage"))
        server.script("401")
        with pytest.raises(LLMError) as auth:
            await provider.complete(request("auth"))
        return first, pids, retried, no_usage, auth.value

    with caplog.at_level(logging.DEBUG):
        first, pids, retried, no_usage, auth = asyncio.run(scenario())
    assert first.text.endswith("ANSWER: A") and first.usage.total_tokens > 0
    assert retried.text.endswith("ANSWER: A")
    assert [r.behaviour for r in server.requests[1:7]] == ["429", "500", "slow", "malformed", "empty_choices", "normal"]
    assert no_usage.usage.total_tokens == 0
    assert auth.kind == "auth" and server.requests[-1].behaviour == "401"
    assert all(r.headers["Authorization"] == f"Bearer {SECRET}" for r in server.requests)
    assert len(pids) == 2 and all(alive(p) for p in pids)
    for pid in pids:  # the key travels over the socket only
        assert SECRET.encode() not in Path(f"/proc/{pid}/cmdline").read_bytes()
        assert SECRET.encode() not in Path(f"/proc/{pid}/environ").read_bytes()
    assert SECRET not in caplog.text and SECRET not in str(auth)
    asyncio.run(provider.aclose())
    assert wait_gone(pids, 3.0) == []
    # a closed provider starts fresh workers on its next call
    again = asyncio.run(provider.complete(request("again")))
    new_pids = provider._pool.pids
    asyncio.run(provider.aclose())
    assert again.text and set(new_pids).isdisjoint(pids)
    assert wait_gone(new_pids, 3.0) == []


def test_a_crashed_worker_is_a_connection_error_and_is_replaced(server, pool):
    server.latency_s = 1.0
    provider = pooled_provider(pool, max_retries=0)

    async def scenario():
        await asyncio.gather(provider.complete(request("warm a")), provider.complete(request("warm b")))
        pids = pool.pids
        call = asyncio.ensure_future(provider.complete(request("doomed")))
        await asyncio.sleep(0.3)  # the attempt is in flight in one of the workers
        [busy] = [w for w in pool._workers if w is not None and w.pending]
        os.kill(busy.process.pid, signal.SIGKILL)
        started = time.monotonic()
        with pytest.raises(LLMError) as info:
            await call
        waited = time.monotonic() - started
        server.latency_s = 0.0
        after = await provider.complete(request("after"))
        return pids, busy.process.pid, info.value, waited, after, pool.pids

    pids, killed, error, waited, after, new_pids = asyncio.run(scenario())
    assert error.kind == "connection" and error.is_infra
    assert f"client worker process {killed} exited (code -9)" in str(error)
    assert waited < 0.9  # noticed at once (EOF), not after the server's 1 s or the 2 s timeout
    assert after.text.endswith("ANSWER: A")
    assert killed not in new_pids and len(new_pids) == 2 and set(pids) - {killed} <= set(new_pids)


def test_a_crash_is_retried_like_any_connection_error(server, pool):
    server.latency_s = 0.5
    provider = pooled_provider(pool, max_retries=2)

    async def scenario():
        await provider.complete(request("warm"))
        call = asyncio.ensure_future(provider.complete(request("survives")))
        await asyncio.sleep(0.2)
        [busy] = [w for w in pool._workers if w is not None and w.pending]
        os.kill(busy.process.pid, signal.SIGKILL)
        return await call

    assert asyncio.run(scenario()).text.endswith("ANSWER: A")


def test_a_cancelled_call_is_forgotten_and_the_worker_stays_usable(server, pool):
    server.latency_s = 1.0
    provider = pooled_provider(pool)

    async def scenario():
        call = asyncio.ensure_future(provider.complete(request("cancelled")))
        await asyncio.sleep(0.2)
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        pending = sum(len(w.pending) for w in pool._workers if w is not None)
        server.latency_s = 0.0
        return pending, await provider.complete(request("next"))

    pending, response = asyncio.run(scenario())
    assert pending == 0 and response.text.endswith("ANSWER: A")


def test_a_hung_worker_is_killed_after_the_grace_period(server, pool, monkeypatch):
    monkeypatch.setattr(client_pool, "WORKER_GRACE_S", 0.5)
    provider = pooled_provider(pool, max_retries=0)

    async def scenario():
        await asyncio.gather(provider.complete(request("warm a")), provider.complete(request("warm b")))
        workers = [w for w in pool._workers if w is not None]
        for worker in workers:
            os.kill(worker.process.pid, signal.SIGSTOP)  # alive but silent
        started = time.monotonic()
        with pytest.raises(LLMError) as info:
            await provider.complete(request("stuck"))
        return workers, info.value, time.monotonic() - started

    workers, error, waited = asyncio.run(scenario())
    assert error.kind == "connection" and "did not answer within 2.5 s" in str(error)
    assert waited < 4.0
    stuck = [w for w in workers if w.dead]
    assert len(stuck) == 1 and wait_gone([stuck[0].process.pid], 3.0) == []
    for worker in workers:
        if not worker.dead:
            os.kill(worker.process.pid, signal.SIGCONT)


def test_client_processes_must_be_a_positive_integer():
    for bad in (0, -1, 1.5, True, "2"):
        with pytest.raises(ValueError, match="llm.client_processes"):
            OpenAIProvider(fast_llm_config(base_url="http://127.0.0.1:1/v1", client_processes=bad), api_key="x")


def test_workers_die_with_a_killed_parent(server):
    script = (
        "import asyncio, json, sys\n"
        "from harness.llm.openai_provider import OpenAIProvider\n"
        "from tests.support.llm_config import fast_llm_config\n"
        "from harness.llm.protocol import ChatMessage, LLMRequest, Role\n"
        f"p = OpenAIProvider(fast_llm_config(base_url={server.base_url!r}, client_processes=2), api_key='k')\n"
        "asyncio.run(p.complete(LLMRequest.make(Role.SOLVER, [ChatMessage('user', 'hi')])))\n"
        "print(json.dumps(p._pool.pids), flush=True)\n"
        "sys.stdin.read()\n"  # wait to be killed
    )
    parent = subprocess.Popen([sys.executable, "-c", script], cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        pids = json.loads(parent.stdout.readline())
        assert len(pids) == 2 and all(alive(p) for p in pids)
        parent.kill()
        parent.wait(10)
        assert wait_gone(pids, 5.0) == []
    finally:
        if parent.poll() is None:
            parent.kill()
