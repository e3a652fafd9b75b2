"""A real OpenAI-compatible HTTP server on 127.0.0.1 for tests and benchmarks.

Speaks `POST /v1/chat/completions` (stdlib http.server, one thread per
connection, HTTP/1.1 keep-alive) with scriptable behaviours:

  "normal"         200 with one choice
  "429"            429 Too Many Requests (Retry-After: 0)
  "500"            500 Internal Server Error
  "slow"           sleeps `slow_s` before answering normally (longer than the client timeout)
  "malformed"      200 with a body that is not JSON
  "empty_choices"  200 with `"choices": []`
  "no_usage"       200 without a usage block
  "401"            401 invalid key

Queue behaviours with `script(...)`; once the queue is empty every request
is "normal". `latency_s` delays every response. Every request is recorded
(path, headers, JSON body) so tests can assert what was sent.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

BEHAVIOURS = ("normal", "429", "500", "slow", "malformed", "empty_choices", "no_usage", "401")


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
class FakeOpenAIServer:
    latency_s: float = 0.0
    slow_s: float = 5.0
    reply: Callable[[Any], str] = default_reply
    record: bool = True
    requests: list[RecordedRequest] = field(default_factory=list)
    _queue: deque = field(default_factory=deque)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _httpd: ThreadingHTTPServer | None = None
    _thread: threading.Thread | None = None
    n_requests: int = 0

    # lifecycle
    def start(self) -> FakeOpenAIServer:
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

            def do_POST(self) -> None:  # noqa: N802 (http.server API)
                length = int(self.headers.get("Content-Length", "0"))
                raw = self.rfile.read(length)
                try:
                    body = json.loads(raw)
                except json.JSONDecodeError:
                    body = raw.decode("utf-8", "replace")
                behaviour = server._next_behaviour()
                if server.record:
                    with server._lock:
                        server.requests.append(RecordedRequest(self.path, Headers(self.headers.items()), body, behaviour))
                with server._lock:
                    server.n_requests += 1
                if server.latency_s:
                    time.sleep(server.latency_s)
                if self.path.rstrip("/") != "/v1/chat/completions":
                    return self._send(404, {"error": {"message": f"no route {self.path}"}})
                server._respond(self, behaviour, body)

            def _send(self, status: int, payload: Any, *, raw: bytes | None = None, headers: dict[str, str] | None = None) -> None:
                data = raw if raw is not None else json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    for key, value in (headers or {}).items():
                        self.send_header(key, value)
                    self._headers_buffer.append(b"\r\n")  # end_headers + body in one write
                    self._headers_buffer.append(data)
                    self.flush_headers()
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout test)

        self._handler_cls = Handler
        self._httpd = _Server(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self) -> FakeOpenAIServer:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    @property
    def base_url(self) -> str:
        assert self._httpd is not None, "server not started"
        host, port = self._httpd.server_address[:2]
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

    def _respond(self, handler: Any, behaviour: str, body: Any) -> None:
        if behaviour == "429":
            handler._send(429, {"error": {"message": "rate limited", "type": "rate_limit"}}, headers={"Retry-After": "0"})
        elif behaviour == "500":
            handler._send(500, {"error": {"message": "internal error", "type": "server_error"}})
        elif behaviour == "401":
            handler._send(401, {"error": {"message": "invalid api key", "type": "invalid_request_error"}})
        elif behaviour == "slow":
            time.sleep(self.slow_s)
            handler._send(200, self._completion(body))
        elif behaviour == "malformed":
            handler._send(200, None, raw=b'{"id": "chatcmpl-test", "choices": [ this is not json')
        elif behaviour == "empty_choices":
            handler._send(200, self._completion(body, choices=False))
        elif behaviour == "no_usage":
            handler._send(200, self._completion(body, usage=False))
        else:
            handler._send(200, self._completion(body))


def main(argv: list[str] | None = None) -> None:
    """Serve in the foreground (benchmarks run it as a separate process): prints the base URL, then serves."""
    import argparse
    import signal

    parser = argparse.ArgumentParser(description="Scriptable OpenAI-compatible test server on 127.0.0.1")
    parser.add_argument("--latency", type=float, default=0.0, help="seconds added to every response")
    args = parser.parse_args(argv)
    server = FakeOpenAIServer(latency_s=args.latency, record=False).start()
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
