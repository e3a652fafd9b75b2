"""A real OpenAI-compatible HTTP server on 127.0.0.1 for tests and benchmarks.

Speaks `POST /v1/chat/completions` over HTTP/1.1 keep-alive with one of two
engines: `engine="threads"` (stdlib http.server, one thread per connection;
the default) or `engine="asyncio"` (one event loop thread, uvloop when
installed, responses delayed with timers instead of sleeping threads: about
a fifth of the CPU per request, so a benchmark's server does not eat the
client's core). Both share the request handling below and have the same
scriptable behaviours:

  "normal"         200 with one choice
  "429"            429 Too Many Requests (Retry-After: `retry_after`, "0" unless set)
  "500"            500 Internal Server Error
  "slow"           sleeps `slow_s` before answering normally (longer than the client timeout)
  "malformed"      200 with a body that is not JSON
  "empty_choices"  200 with `"choices": []`
  "no_usage"       200 without a usage block
  "401"            401 invalid key

Queue behaviours with `script(...)`; once the queue is empty every request
is "normal". `GET /v1/models` (the provider's preflight) is answered apart,
never recorded nor scripted: 404 unless `served_models` lists the models.
`require_key`: every request without `Authorization: Bearer <key>` gets 401
(set it at any time to make a live server refuse the key). `down`: every
request is dropped unanswered and its connection closed (a server that died
under its open keep-alive connections; the client sees a connection error). `latency_s` delays every response. Every request is recorded
(path, headers, JSON body) so tests can assert what was sent.
"""

from __future__ import annotations

import asyncio
import json
import random
import socket
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

BEHAVIOURS = ("normal", "429", "500", "slow", "malformed", "empty_choices", "no_usage", "401")
ENGINES = ("threads", "asyncio")


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 512  # listen backlog: the default (5) drops connections at concurrency 64


class Headers(dict):
    """Request headers; lookups ignore case (HTTP header names are case-insensitive, clients differ)."""

    def __init__(self, items: Any = ()):
        super().__init__((key.lower(), value) for key, value in items)

    def __getitem__(self, key: str) -> str:
        return super().__getitem__(key.lower())

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and super().__contains__(key.lower())

    def get(self, key: str, default: Any = None) -> Any:
        return super().get(key.lower(), default)


@dataclass
class RecordedRequest:
    path: str
    headers: Headers
    body: Any
    behaviour: str


def default_reply(body: Any) -> str:
    """Echo the last user message length so replies depend on the request."""
    messages = body.get("messages", []) if isinstance(body, dict) else []
    last = messages[-1]["content"] if messages else ""
    return f"I read {len(last)} characters.\nANSWER: A"


@dataclass
class Reply:
    """What to send for one request, and after how many seconds."""

    status: int
    data: bytes
    headers: dict[str, str]
    delay_s: float


def response_bytes(reply: Reply) -> bytes:
    """Status line, headers and body of `reply` as one HTTP/1.1 message (the asyncio engine's wire format)."""
    reason = {200: "OK", 401: "Unauthorized", 404: "Not Found", 429: "Too Many Requests", 500: "Internal Server Error"}
    head = [f"HTTP/1.1 {reply.status} {reason.get(reply.status, 'Status')}", "Content-Type: application/json",
            f"Content-Length: {len(reply.data)}", *(f"{k}: {v}" for k, v in reply.headers.items())]
    return ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + reply.data


@dataclass
class FakeOpenAIServer:
    latency_s: float = 0.0
    latency_jitter: float = 0.0  # each delay is latency_s x U(1 - jitter, 1 + jitter) (seeded), mean latency_s
    jitter_seed: int = 0
    slow_s: float = 5.0
    retry_after: str = "0"  # the Retry-After header of a "429" reply (seconds or an HTTP-date)
    reply: Callable[[Any], str] = default_reply
    record: bool = True
    engine: str = "threads"
    requests: list[RecordedRequest] = field(default_factory=list)
    _queue: deque = field(default_factory=deque)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _httpd: ThreadingHTTPServer | None = None
    _thread: threading.Thread | None = None
    _loop: asyncio.AbstractEventLoop | None = None
    _address: tuple[str, int] | None = None
    n_requests: int = 0
    _rng: random.Random | None = None
    served_models: tuple[str, ...] | None = None
    require_key: str | None = None
    down: bool = False

    def handle_get(self, path: str, headers: Headers) -> Reply:
        """`GET /v1/models`: the served models (404 without `served_models`); 401 without the required key."""
        if self.require_key is not None and headers.get("authorization") != f"Bearer {self.require_key}":
            return Reply(401, json.dumps({"error": {"message": "invalid api key"}}).encode(), {}, 0.0)
        if path.rstrip("/") != "/v1/models" or self.served_models is None:
            return Reply(404, json.dumps({"error": {"message": f"no route {path}"}}).encode(), {}, 0.0)
        data = [{"id": m, "object": "model", "owned_by": "test"} for m in self.served_models]
        return Reply(200, json.dumps({"object": "list", "data": data}).encode(), {}, 0.0)

    def handle(self, path: str, headers: Headers, raw: bytes) -> Reply:
        """Record one request, take the next scripted behaviour, and build its reply (both engines)."""
        try:
            body = json.loads(raw)
        except json.JSONDecodeError:
            body = raw.decode("utf-8", "replace")
        behaviour = self._next_behaviour()
        if self.require_key is not None and headers.get("authorization") != f"Bearer {self.require_key}":
            behaviour = "401"
        with self._lock:
            if self.record:
                self.requests.append(RecordedRequest(path, headers, body, behaviour))
            self.n_requests += 1
        if path.rstrip("/") != "/v1/chat/completions":
            return Reply(404, json.dumps({"error": {"message": f"no route {path}"}}).encode(), {}, self.latency_s)
        reply = self._respond(behaviour, body)
        reply.delay_s += self._latency()
        return reply

    def _latency(self) -> float:
        if not self.latency_jitter:
            return self.latency_s
        if not 0 <= self.latency_jitter <= 1:
            raise ValueError(f"FakeOpenAIServer.latency_jitter must be within [0, 1], got {self.latency_jitter}")
        with self._lock:
            if self._rng is None:
                self._rng = random.Random(self.jitter_seed)
            factor = self._rng.uniform(1 - self.latency_jitter, 1 + self.latency_jitter)
        return self.latency_s * factor

    # lifecycle
    def start(self) -> FakeOpenAIServer:
        if self.engine not in ENGINES:
            raise ValueError(f"FakeOpenAIServer.engine must be one of {ENGINES}, got {self.engine!r}")
        if self.engine == "asyncio":
            return self._start_asyncio()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # no 40 ms Nagle/delayed-ACK stall between header and body writes

            def log_message(self, format: str, *args: Any) -> None:  # silence stderr
                return

            def handle(self) -> None:
                try:
                    super().handle()
                except (ConnectionResetError, BrokenPipeError):
                    pass  # a client that timed out or closed its pool

            def do_GET(self) -> None:  # noqa: N802 (http.server API)
                if server.down:
                    self.close_connection = True
                    return
                self._send(server.handle_get(self.path, Headers(self.headers.items())))

            def do_POST(self) -> None:  # noqa: N802 (http.server API)
                raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                if server.down:  # dropped unanswered: the connection closes
                    self.close_connection = True
                    return
                self._send(server.handle(self.path, Headers(self.headers.items()), raw))

            def _send(self, reply: Reply) -> None:
                if reply.delay_s:
                    time.sleep(reply.delay_s)
                try:
                    self.send_response(reply.status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(reply.data)))
                    for key, value in reply.headers.items():
                        self.send_header(key, value)
                    self._headers_buffer.append(b"\r\n")  # end_headers + body in one write
                    self._headers_buffer.append(reply.data)
                    self.flush_headers()
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout test)

        self._httpd = _Server(("127.0.0.1", 0), Handler)
        self._address = self._httpd.server_address[:2]
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def _start_asyncio(self) -> FakeOpenAIServer:
        try:
            import uvloop
        except ImportError:
            loop = asyncio.new_event_loop()
        else:
            loop = uvloop.new_event_loop()
        listener = socket.create_server(("127.0.0.1", 0), backlog=512)
        self._address = listener.getsockname()[:2]
        ready = threading.Event()

        def serve() -> None:
            asyncio.set_event_loop(loop)
            server = loop.run_until_complete(loop.create_server(lambda: _HTTPConnection(self), sock=listener))
            ready.set()
            loop.run_forever()
            server.close()
            loop.run_until_complete(server.wait_closed())
            loop.close()

        self._loop = loop
        self._thread = threading.Thread(target=serve, daemon=True)
        self._thread.start()
        ready.wait(10)
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            assert self._thread is not None
            self._thread.join(10)
            self._loop = None

    def __enter__(self) -> FakeOpenAIServer:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    @property
    def base_url(self) -> str:
        assert self._address is not None, "server not started"
        host, port = self._address
        return f"http://{host}:{port}/v1"

    # scripting
    def script(self, *behaviours: str) -> None:
        for name in behaviours:
            if name not in BEHAVIOURS:
                raise ValueError(f"unknown behaviour {name!r}; expected one of {BEHAVIOURS}")
        with self._lock:
            self._queue.extend(behaviours)

    def _next_behaviour(self) -> str:
        with self._lock:
            return self._queue.popleft() if self._queue else "normal"

    def _completion(self, body: Any, *, usage: bool = True, choices: bool = True) -> dict[str, Any]:
        text = self.reply(body)
        model = body.get("model", "unknown") if isinstance(body, dict) else "unknown"
        payload: dict[str, Any] = {
            "id": "chatcmpl-test",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}] if choices else [],
        }
        if usage:
            prompt_tokens = sum(len(str(m.get("content", ""))) for m in body.get("messages", [])) // 4 if isinstance(body, dict) else 0
            payload["usage"] = {"prompt_tokens": prompt_tokens, "completion_tokens": len(text) // 4, "total_tokens": prompt_tokens + len(text) // 4}
        return payload

    def _respond(self, behaviour: str, body: Any) -> Reply:
        def send(status: int, payload: Any, headers: dict[str, str] | None = None, delay_s: float = 0.0) -> Reply:
            return Reply(status, json.dumps(payload).encode(), headers or {}, delay_s)

        if behaviour == "429":
            return send(429, {"error": {"message": "rate limited", "type": "rate_limit"}}, {"Retry-After": self.retry_after})
        if behaviour == "500":
            return send(500, {"error": {"message": "internal error", "type": "server_error"}})
        if behaviour == "401":
            return send(401, {"error": {"message": "invalid api key", "type": "invalid_request_error"}})
        if behaviour == "slow":
            return send(200, self._completion(body), delay_s=self.slow_s)
        if behaviour == "malformed":
            return Reply(200, b'{"id": "chatcmpl-test", "choices": [ this is not json', {}, 0.0)
        if behaviour == "empty_choices":
            return send(200, self._completion(body, choices=False))
        if behaviour == "no_usage":
            return send(200, self._completion(body, usage=False))
        return send(200, self._completion(body))


class _HTTPConnection(asyncio.Protocol):
    """One keep-alive connection of the asyncio engine: requests are answered in order, each after its delay."""

    def __init__(self, server: FakeOpenAIServer) -> None:
        self._server = server
        self._buffer = bytearray()
        self._busy = False  # a request of this connection is waiting for its delayed reply
        self._transport: Any = None

    def connection_made(self, transport: Any) -> None:  # uvloop's transports are not asyncio.Transport subclasses
        self._transport = transport
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def data_received(self, data: bytes) -> None:
        self._buffer += data
        self._next_request()

    def _next_request(self) -> None:
        if self._busy:
            return
        end = self._buffer.find(b"\r\n\r\n")
        if end < 0:
            return
        request_line, *header_lines = bytes(self._buffer[:end]).decode("latin-1").split("\r\n")
        headers = Headers((key.strip(), value.strip()) for key, _, value in (line.partition(":") for line in header_lines))
        length = int(headers.get("content-length", "0"))
        if len(self._buffer) < end + 4 + length:
            return  # body still arriving
        raw = bytes(self._buffer[end + 4:end + 4 + length])
        del self._buffer[:end + 4 + length]
        parts = request_line.split(" ")
        if self._server.down:
            self._transport.close()
            return
        path = parts[1] if len(parts) > 1 else "/"
        reply = self._server.handle_get(path, headers) if parts[0] == "GET" else self._server.handle(path, headers, raw)
        self._busy = True
        asyncio.get_running_loop().call_later(reply.delay_s, self._send, reply)

    def _send(self, reply: Reply) -> None:
        self._busy = False
        if self._transport is None or self._transport.is_closing():
            return  # the client gave up (timeout test)
        self._transport.write(response_bytes(reply))
        self._next_request()

    def connection_lost(self, exc: Exception | None) -> None:
        self._transport = None


def main(argv: list[str] | None = None) -> None:
    """Serve in the foreground (benchmarks run it as a separate process): prints the base URL, then serves."""
    import argparse
    import signal

    parser = argparse.ArgumentParser(description="Scriptable OpenAI-compatible test server on 127.0.0.1")
    parser.add_argument("--latency", type=float, default=0.0, help="seconds added to every response")
    parser.add_argument("--latency-jitter", type=float, default=0.0,
                        help="each delay is latency x U(1 - j, 1 + j), seeded (default 0: constant latency)")
    parser.add_argument("--engine", choices=ENGINES, default="threads", help="threads (stdlib http.server) or asyncio (leaner)")
    args = parser.parse_args(argv)
    server = FakeOpenAIServer(latency_s=args.latency, latency_jitter=args.latency_jitter, record=False, engine=args.engine).start()
    print(server.base_url, flush=True)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        stop.wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()


if __name__ == "__main__":
    main()
