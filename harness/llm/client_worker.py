"""A client worker process of `OpenAIProvider` (`llm.client_processes` > 1): `python -m harness.llm.client_worker FD`.

FD is this process's end of a socketpair with the provider's process (frames: harness/llm/client_ipc.py).
The first frame carries the API key and the endpoint; every REQUEST is one attempt run exactly as in the
provider's own process (`openai_provider.post_chat_completion` on its own event loop and `AsyncOpenAI`
client), answered with the raw body or the attempt's exception classified and redacted here. Retries,
backoff, cost and logging stay in the provider's process.

The worker exits when the socket reaches EOF (the provider closed it or its process died, the kernel
closes its descriptors) or when it is re-parented (its parent died while a forked child kept the socket).
"""

from __future__ import annotations

import asyncio
import gc
import json
import os
import signal
import socket
import sys

from harness.llm import client_ipc

PARENT_CHECK_S = 0.5


async def _watch_parent(parent_pid: int) -> None:
    while os.getppid() == parent_pid:
        await asyncio.sleep(PARENT_CHECK_S)


class _ProviderLink(asyncio.Protocol):
    """The socket to the provider: CONFIG starts the client, REQUEST starts an attempt task, CANCEL stops one."""

    def __init__(self, start_attempt, configure) -> None:
        self._buffer = bytearray()
        self._start_attempt = start_attempt
        self._configure = configure
        self.closed = asyncio.get_running_loop().create_future()
        self.calls: dict[int, asyncio.Task] = {}
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport) -> None:
        self.transport = transport

    def send(self, frame: bytes) -> None:
        """Write one frame to the provider (frames only arrive, and answers only leave, after connection_made)."""
        assert self.transport is not None, "client worker: a frame before the connection was made"
        self.transport.write(frame)

    def data_received(self, data: bytes) -> None:
        self._buffer += data
        for frame_type, call_id, payload in client_ipc.split_frames(self._buffer):
            if frame_type == client_ipc.REQUEST:
                self.calls[call_id] = self._start_attempt(call_id, payload)
            elif frame_type == client_ipc.CANCEL and call_id in self.calls:
                self.calls[call_id].cancel()
            elif frame_type == client_ipc.CONFIG:
                self._configure(json.loads(payload))

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.closed.done():
            self.closed.set_result(None)  # EOF: the provider closed the socket or its process died


async def serve(sock: socket.socket, parent_pid: int) -> None:
    """Answer REQUEST frames until EOF or the parent's death."""
    # imported here so a broken install shows up as the worker's exit, which the provider records
    import httpx

    from harness.llm.openai_provider import (
        aiohttp_transport_available,
        build_client,
        classify_error,
        describe_error,
        post_chat_completion,
        redact,
    )

    loop = asyncio.get_running_loop()
    transport_name = "aiohttp" if aiohttp_transport_available() else "httpx"
    state: dict = {}

    def configure(config: dict) -> None:
        state["api_key"], state["timeout_s"] = config["api_key"], float(config["timeout_s"])
        state["client"] = build_client(config["api_key"], config["base_url"], state["timeout_s"], transport_name, httpx.create_ssl_context())
        # the SDK's ~100k import-time objects never die: out of the collector's reach, a full collection
        # costs microseconds instead of a ~100 ms stall of every call in flight in this worker
        gc.collect()
        gc.freeze()
        link.send(client_ipc.encode(client_ipc.READY, 0))

    async def attempt(call_id: int, content: bytes) -> None:
        try:
            body = await post_chat_completion(state["client"], state["timeout_s"], content=content)
            link.send(client_ipc.encode(client_ipc.OK, call_id, body))
        except asyncio.CancelledError:
            return  # the provider cancelled the call: nobody waits for an answer
        except Exception as exc:  # noqa: BLE001 (classified and redacted here, re-raised as LLMError by the provider)
            kind, retry_after = classify_error(exc)
            detail = redact(describe_error(exc), state.get("api_key"))
            link.send(client_ipc.encode_error(call_id, kind, retry_after, detail))
        finally:
            link.calls.pop(call_id, None)

    link = _ProviderLink(lambda call_id, content: loop.create_task(attempt(call_id, content)), configure)
    await loop.connect_accepted_socket(lambda: link, sock=sock)
    watchdog = loop.create_task(_watch_parent(parent_pid))
    try:
        await asyncio.wait((link.closed, watchdog), return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (watchdog, *link.calls.values()):
            task.cancel()
        if link.transport is not None:
            link.transport.close()
        if "client" in state:
            await state["client"].close()


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        raise SystemExit("usage: python -m harness.llm.client_worker SOCKET_FD PARENT_PID (started by OpenAIProvider)")
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole group: the provider's process decides
    sock = socket.socket(fileno=int(args[0]))
    parent_pid = int(args[1])
    if os.getppid() != parent_pid:
        return  # the provider's process died before we started
    try:
        import uvloop
    except ImportError:
        asyncio.run(serve(sock, parent_pid))
    else:
        uvloop.run(serve(sock, parent_pid))
    sys.stderr.flush()
    os._exit(0)  # nothing left to flush; skips ~1 s of interpreter teardown (the SDK's modules) so aclose() is quick


if __name__ == "__main__":
    main()
