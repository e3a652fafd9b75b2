"""OpenAIProvider limits against real sockets on 127.0.0.1: `llm.concurrency` in-flight requests, Retry-After up to
`llm.retry_after_max_s`, error kinds of the transport (refused / closed / silent), no unclosed client session."""

from __future__ import annotations

import asyncio
import gc
import socket
import threading
import time
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from harness.llm.backoff import parse_retry_after
from harness.llm.openai_provider import OpenAIProvider
from harness.llm.protocol import ChatMessage, LLMError, LLMRequest, Role
from tests.support import unclosed
from tests.support.http_json import send_json
from tests.support.llm_config import fast_llm_config
from tests.support.openai_server import FakeOpenAIServer

pytestmark = pytest.mark.timeout(60)


def request(text: str = "2+2?", role: Role = Role.SOLVER) -> LLMRequest:
    return LLMRequest.make(role, [ChatMessage("user", text)])


class CountingServer:
    """A real HTTP server that answers every chat completion after `latency_s` and records the peak of requests
    it was serving at once."""

    def __init__(self, latency_s: float):
        self.latency_s, self.active, self.peak, self.served = latency_s, 0, 0, 0
        lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # quiet
                pass

            def do_POST(self):
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with lock:
                    outer.active += 1
                    outer.peak = max(outer.peak, outer.active)
                time.sleep(outer.latency_s)
                with lock:
                    outer.active -= 1
                    outer.served += 1
                send_json(self, {"choices": [{"message": {"content": "ANSWER: A"}}], "usage": {"prompt_tokens": 1, "completion_tokens": 1}})

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"


@pytest.mark.parametrize("concurrency", [1, 3])
def test_llm_concurrency_bounds_the_requests_in_flight_over_every_role(concurrency):
    with CountingServer(latency_s=0.15) as server:
        provider = OpenAIProvider(fast_llm_config(base_url=server.base_url, concurrency=concurrency, timeout_s=10.0), api_key="local")
        roles = [Role.SOLVER, Role.EDITOR, Role.DIAGNOSER]

        async def burst():
            try:  # several independent callers (a rollout fan-out, diagnosis, editing) share one provider
                return await asyncio.gather(*(provider.complete(request(f"q{i}", roles[i % 3])) for i in range(12)))
            finally:
                await provider.aclose()

        replies = asyncio.run(burst())
    assert len(replies) == 12 and server.served == 12
    assert server.peak == concurrency


def test_concurrency_is_validated_with_its_key():
    with pytest.raises(ValueError, match=r"llm.concurrency must be an integer >= 1.*got 0"):
        OpenAIProvider(fast_llm_config(base_url="http://127.0.0.1:9/v1", concurrency=0), api_key="local")


def _delays_for(retry_after: str, **cfg) -> list[float]:
    delays: list[float] = []

    async def no_wait(seconds: float) -> None:  # the provider's clock: record the delay instead of sleeping it
        delays.append(seconds)

    with FakeOpenAIServer(retry_after=retry_after) as server:
        server.script("429")
        provider = OpenAIProvider(fast_llm_config(base_url=server.base_url, **cfg), api_key="local", sleep=no_wait)

        async def go():
            try:
                return await provider.complete(request())
            finally:
                await provider.aclose()

        assert asyncio.run(go()).text
    return delays


def test_retry_after_is_honoured_beyond_backoff_max_up_to_its_own_cap():
    assert _delays_for("30", backoff_max_s=0.05, retry_after_max_s=60.0) == [30.0]
    assert _delays_for("1000", backoff_max_s=0.05, retry_after_max_s=60.0) == [60.0]
    http_date = formatdate(time.time() + 40, usegmt=True)
    [delay] = _delays_for(http_date, backoff_max_s=0.05, retry_after_max_s=60.0)
    assert 35.0 <= delay <= 40.0


def test_retry_after_parsing():
    assert parse_retry_after("12") == 12.0 and parse_retry_after(" 1.5 ") == 1.5
    assert parse_retry_after("-3") == 0.0 and parse_retry_after(None) is None and parse_retry_after("soon") is None
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT", now=1445412470.0) == pytest.approx(10.0)


def test_retry_after_cap_below_backoff_max_is_refused():
    with pytest.raises(ValueError, match=r"llm.retry_after_max_s must be a number >= llm.backoff_max_s"):
        OpenAIProvider(fast_llm_config(base_url="http://127.0.0.1:9/v1", backoff_max_s=5.0, retry_after_max_s=1.0), api_key="local")


class RawServer:
    """A TCP listener on 127.0.0.1 that reads a request and then closes the connection (`mode="close"`)
    or keeps it open without a byte of reply (`mode="silent"`)."""

    def __init__(self, mode: str):
        self.mode = mode
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.held: list[socket.socket] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)

    def _serve(self):
        self.sock.settimeout(0.1)
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except (TimeoutError, OSError):
                continue
            conn.settimeout(1.0)
            try:
                conn.recv(65536)
            except OSError:
                pass
            if self.mode == "close":
                conn.close()
            else:
                self.held.append(conn)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join()
        for conn in self.held:
            conn.close()
        self.sock.close()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}/v1"


def _kind_of(base_url: str, **cfg) -> tuple[str, str]:
    provider = OpenAIProvider(fast_llm_config(base_url=base_url, max_retries=0, **cfg), api_key="local", preflight=False)  # one attempt's kind

    async def go():
        try:
            await provider.complete(request())
        finally:
            await provider.aclose()

    with pytest.raises(LLMError) as info:
        asyncio.run(go())
    return info.value.kind, provider.transport


def test_error_kinds_of_the_transport():
    free = socket.socket()
    free.bind(("127.0.0.1", 0))
    refused_url = f"http://127.0.0.1:{free.getsockname()[1]}/v1"  # bound, never listening: the connect is refused
    try:
        kind, transport = _kind_of(refused_url)
    finally:
        free.close()
    assert transport == "aiohttp"  # the SDK's aiohttp transport is installed (openai[aiohttp]): the one under test
    assert kind == "connection"
    with RawServer("close") as closing:
        assert _kind_of(closing.base_url)[0] == "connection"  # the server hung up: not a timeout
    with RawServer("silent") as silent:
        assert _kind_of(silent.base_url, timeout_s=0.5)[0] == "timeout"


def test_the_suite_catches_an_unclosed_client_session():
    import aiohttp

    start = len(unclosed.RECORDER.messages)

    async def leak():
        aiohttp.ClientSession()  # never closed

    asyncio.run(leak())
    gc.collect()
    caught = unclosed.new_since(start)
    del unclosed.RECORDER.messages[start:]  # seen: this test's own leak must not fail it
    assert caught and caught[0].startswith("Unclosed client session")


def test_a_provider_used_on_several_event_loops_leaves_no_session_open():
    start = len(unclosed.RECORDER.messages)
    with FakeOpenAIServer() as server:
        provider = OpenAIProvider(fast_llm_config(base_url=server.base_url), api_key="local")
        for i in range(3):  # a stage calls asyncio.run several times with one provider and never closes it
            assert asyncio.run(provider.complete(request(f"q{i}"))).text
        del provider
        gc.collect()
    assert unclosed.new_since(start) == []
    assert len(server.requests) == 3
