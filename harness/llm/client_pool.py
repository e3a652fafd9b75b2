"""Client worker processes for `OpenAIProvider` (`llm.client_processes` = N > 1).

The SDK costs about 1-2 ms of CPU per request (request building, httpx models, aiohttp), so one event
loop on one core caps a provider at a few hundred requests per second. `ClientProcessPool` runs N
`python -m harness.llm.client_worker` processes, each with its own event loop (uvloop when installed)
and `AsyncOpenAI` client, and sends each attempt's serialised payload to the worker with the fewest
calls in flight over a private socketpair (harness/llm/client_ipc.py). The caller's retries, backoff,
cost and logging stay in the provider's process.

Contract:
- workers start lazily on the first call; the API key reaches them in the CONFIG frame over the socket,
  never in argv or the environment (the variable named by `llm.api_key_env` is removed from theirs);
- a worker that dies or stops answering (no reply within timeout_s + WORKER_GRACE_S, + WORKER_START_S
  before it reported READY) fails its calls
  with RemoteAttemptError("connection") and is replaced by a fresh one on the next call; never a hang;
- workers exit when their socket is closed: `aclose()`, this process exiting or being killed (the kernel
  closes the descriptors), or the pool being garbage-collected; they also exit when re-parented;
- a cancelled call is forgotten here and cancelled in its worker;
- the pool is not bound to an event loop: successive `asyncio.run` calls reuse the same workers.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import weakref
from collections.abc import Iterable
from pathlib import Path

from harness.llm import client_ipc
from harness.llm.client_ipc import RemoteAttemptError

# a call gets timeout_s + WORKER_GRACE_S before its worker counts as hung, plus WORKER_START_S when the
# worker has not reported READY yet (it imports the SDK first: seconds on a busy machine)
WORKER_GRACE_S = 5.0
WORKER_START_S = 60.0
_STOP_WAIT_S = 2.0
_PROJECT_ROOT = str(Path(__file__).resolve().parents[2])
_RECV_BYTES = 1 << 18


class _Worker:
    """One worker process and this process's end of its socket; attached to one event loop at a time."""

    def __init__(self, process: subprocess.Popen, sock: socket.socket) -> None:
        self.process = process
        self.sock = sock
        self.pending: dict[int, asyncio.Future] = {}
        self.loop: asyncio.AbstractEventLoop | None = None
        self._inbox = bytearray()
        self._outbox = bytearray()
        self.dead: str | None = None  # why it can take no more calls
        self.ready = False  # its READY frame arrived

    def attach(self, loop: asyncio.AbstractEventLoop) -> None:
        """Read (and write) through `loop`; calls pending on a previous loop are dropped (their loop is gone)."""
        if self.loop is loop:
            return
        self._detach()
        self.pending.clear()
        self.loop = loop
        loop.add_reader(self.sock.fileno(), self._on_readable)
        if self._outbox:
            loop.add_writer(self.sock.fileno(), self._on_writable)

    def _detach(self) -> None:
        if self.loop is not None and not self.loop.is_closed():
            self.loop.remove_reader(self.sock.fileno())
            self.loop.remove_writer(self.sock.fileno())
        self.loop = None

    def send(self, frame: bytes) -> None:
        if self._outbox:
            self._outbox += frame
            return
        try:
            sent = self.sock.send(frame)
        except BlockingIOError:
            sent = 0
        except OSError as exc:
            self.fail(f"client worker process {self.process.pid}: socket send failed ({type(exc).__name__})")
            return
        if sent < len(frame):
            self._outbox += frame[sent:]
            if self.loop is not None:
                self.loop.add_writer(self.sock.fileno(), self._on_writable)

    def _on_writable(self) -> None:
        try:
            sent = self.sock.send(self._outbox)
        except BlockingIOError:
            return
        except OSError as exc:
            self.fail(f"client worker process {self.process.pid}: socket send failed ({type(exc).__name__})")
            return
        del self._outbox[:sent]
        if not self._outbox and self.loop is not None:
            self.loop.remove_writer(self.sock.fileno())

    def _on_readable(self) -> None:
        try:
            data = self.sock.recv(_RECV_BYTES)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self.fail(self._exit_description())
            return
        self._inbox += data
        try:
            frames = client_ipc.split_frames(self._inbox)
        except ValueError as exc:
            self.fail(f"client worker process {self.process.pid} broke the protocol: {exc}")
            return
        for frame_type, call_id, payload in frames:
            if frame_type == client_ipc.READY:
                self.ready = True
                continue
            future = self.pending.pop(call_id, None)
            if future is None or future.done():
                continue  # cancelled here meanwhile
            if frame_type == client_ipc.OK:
                future.set_result(payload)
            else:
                future.set_exception(client_ipc.decode_error(payload))

    def _exit_description(self) -> str:
        try:
            code = self.process.wait(timeout=0.5)  # it closed its socket: it is exiting
        except subprocess.TimeoutExpired:
            return f"client worker process {self.process.pid} closed its socket"
        return f"client worker process {self.process.pid} exited (code {code})"

    def fail(self, reason: str, *, kill: bool = True) -> None:
        """Stop using this worker: close its socket (it exits on EOF), kill it unless `kill=False`, and fail
        every pending call with a connection error."""
        if self.dead is not None:
            return
        self.dead = reason
        self._detach()
        self.sock.close()
        if kill and self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        error = RemoteAttemptError("connection", None, reason)
        for future in self.pending.values():
            if not future.done():
                future.set_exception(error)
        self.pending.clear()


class ClientProcessPool:
    """N client worker processes; `await pool.post(payload_bytes)` -> raw response body bytes."""

    def __init__(self, n_processes: int, *, api_key: str, base_url: str | None, timeout_s: float, api_key_env: str | None = None) -> None:
        if n_processes < 1:
            raise ValueError(f"llm.client_processes must be >= 1, got {n_processes}")
        self.n_processes = n_processes
        self.base_url = base_url
        self.timeout_s = timeout_s
        self._config = client_ipc.encode(client_ipc.CONFIG, 0, json.dumps(
            {"api_key": api_key, "base_url": base_url, "timeout_s": timeout_s}).encode())
        self._api_key_env = api_key_env
        self._workers: list[_Worker | None] = [None] * n_processes
        self._next_id = 0
        _POOLS.add(self)
        weakref.finalize(self, _stop_now, self._workers)

    @property
    def pids(self) -> list[int]:
        """Process ids of the live workers (for tests and diagnostics)."""
        return [w.process.pid for w in self._workers if w is not None and w.dead is None]

    def _start(self) -> _Worker:
        parent_end, child_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        env = {k: v for k, v in os.environ.items() if k != self._api_key_env}  # the key goes over the socket only
        env["PYTHONPATH"] = os.pathsep.join(p for p in (_PROJECT_ROOT, env.get("PYTHONPATH")) if p)
        try:
            process = subprocess.Popen(
                [sys.executable, "-m", "harness.llm.client_worker", str(child_end.fileno()), str(os.getpid())],
                pass_fds=(child_end.fileno(),), stdin=subprocess.DEVNULL, env=env, close_fds=True)
        finally:
            child_end.close()
        parent_end.setblocking(False)
        worker = _Worker(process, parent_end)
        worker.send(self._config)
        return worker

    def _pick(self, loop: asyncio.AbstractEventLoop) -> _Worker:
        """The live worker with the fewest calls in flight, starting or replacing workers as needed."""
        best: _Worker | None = None
        for i, worker in enumerate(self._workers):
            if worker is None or worker.dead is not None:
                worker = self._workers[i] = self._start()
            if best is None or len(worker.pending) < len(best.pending):
                best = worker
        assert best is not None
        best.attach(loop)
        return best

    async def post(self, content: bytes) -> bytes:
        """One attempt in a worker: the raw response body, or RemoteAttemptError (classified there, or
        `connection` when the worker died or stopped answering)."""
        loop = asyncio.get_running_loop()
        worker = self._pick(loop)
        self._next_id = call_id = (self._next_id + 1) & 0xFFFFFFFF
        future = loop.create_future()
        worker.pending[call_id] = future
        worker.send(client_ipc.encode(client_ipc.REQUEST, call_id, content))
        guard_s = self.timeout_s + WORKER_GRACE_S + (0.0 if worker.ready else WORKER_START_S)
        try:
            async with asyncio.timeout(guard_s):
                return await future  # cancelling this wait (caller or timer) cancels `future` too
        except TimeoutError:
            worker.fail(f"client worker process {worker.process.pid} did not answer within {guard_s:.1f} s; "
                        "killed, a fresh one takes the next call")
            raise RemoteAttemptError("connection", None, worker.dead or "client worker process did not answer") from None
        finally:
            if future.cancelled() and worker.dead is None:  # the caller gave up: forget it here, stop it there
                worker.pending.pop(call_id, None)
                worker.send(client_ipc.encode(client_ipc.CANCEL, call_id))

    async def aclose(self) -> None:
        """Close every worker's socket (they exit on EOF), wait up to 2 s for them, kill stragglers."""
        workers = [w for w in self._workers if w is not None]
        self._workers[:] = [None] * self.n_processes
        for worker in workers:
            worker.fail("the provider was closed", kill=False)
        deadline = asyncio.get_running_loop().time() + _STOP_WAIT_S
        while any(w.process.poll() is None for w in workers) and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.01)
        _stop_now(workers)

    def _forget_after_fork(self) -> None:
        """In a forked child: drop the inherited sockets without touching the parent's workers."""
        for worker in self._workers:
            if worker is not None:
                worker.sock.close()
                worker.dead = "inherited through fork"
        self._workers[:] = [None] * self.n_processes


def _stop_now(workers: Iterable[_Worker | None]) -> None:
    for worker in workers:
        if worker is None:
            continue
        worker.sock.close()
        if worker.process.poll() is None:
            worker.process.kill()
            worker.process.wait()


_POOLS: weakref.WeakSet[ClientProcessPool] = weakref.WeakSet()


def _forget_pools_after_fork() -> None:
    for pool in list(_POOLS):
        pool._forget_after_fork()


os.register_at_fork(after_in_child=_forget_pools_after_fork)
