"""A llama.cpp server that dies is reported as dead, with its exit status and log tail, never as a timeout.

Each test starts its own real server (SmolLM2-135M-Instruct, a few seconds) and kills it with a real signal.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from harness.contracts.roles import Role
from harness.llm.local_server import LlamaServer, LlamaServerDied
from harness.llm.openai_provider import OpenAIProvider
from harness.llm.protocol import ChatMessage, LLMRequest
from tests.support.llm_config import fast_llm_config

pytestmark = pytest.mark.timeout(300)

REPO_ROOT = Path(__file__).resolve().parents[2]


def ask(server: LlamaServer) -> str:
    """One short completion through the product's provider (no retries: a dead server must fail fast)."""
    cfg = fast_llm_config(model=server.model_id, base_url=server.base_url, timeout_s=60.0, max_retries=0, max_tokens=4)

    async def go() -> str:
        llm = OpenAIProvider(cfg)
        try:
            return (await llm.complete(LLMRequest.make(Role.SOLVER, [ChatMessage("user", "Say hi.")], temperature=0.0))).text
        finally:
            await llm.aclose()

    return asyncio.run(go())


def test_a_segfault_during_requests_is_reported_with_exit_status_and_log_tail(tmp_path):
    with LlamaServer(log_path=tmp_path / "server.log") as server:
        with server.watch():
            assert isinstance(ask(server), str)  # alive: the request goes through the same wrapper
        server.check_alive()
        assert server.pid is not None
        os.kill(server.pid, signal.SIGSEGV)
        with pytest.raises(LlamaServerDied) as caught:
            with server.watch():
                ask(server)
    died = caught.value
    assert died.exit_status == -signal.SIGSEGV
    message = str(died)
    assert message.startswith("llama.cpp server died (exit status -11: killed by SIGSEGV, 139 in a shell)"), message
    assert "timed out" not in message.lower().split("last lines of its log")[0]
    # the server runs under faulthandler: the crash's Python stack is in the log, and so in the error
    assert "Fatal Python error: Segmentation fault" in died.log_tail and died.log_tail in message
    assert isinstance(died.__cause__, Exception)  # the client's own error, kept as the cause


def test_a_test_failing_because_the_server_died_says_so(tmp_path):
    """The fixture `llama_server` and the report hook of tests/conftest.py in a real pytest session: the failing test's
    report leads with the death, and a test that starts after it fails at once at set-up, naming the exit status."""
    (tmp_path / "conftest.py").write_text("from tests.conftest import _llama_server_process, llama_server, pytest_runtest_makereport  # noqa: F401\n")
    (tmp_path / "test_inner.py").write_text(textwrap.dedent("""
        import os, signal, urllib.request

        def test_1_kills_the_server(llama_server):
            os.kill(llama_server.pid, signal.SIGKILL)
            urllib.request.urlopen(llama_server.base_url + "/models", timeout=5)

        def test_2_starts_after_the_death(llama_server):
            pass
    """))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", str(tmp_path), str(tmp_path)],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240, check=False)
    out = done.stdout + done.stderr
    assert done.returncode == 1, out[-3000:]
    assert "1 failed" in out and "1 error" in out, out[-3000:]
    died = "llama.cpp server died (exit status -9: killed by SIGKILL, 137 in a shell)"
    call_report = re.search(r"_+ test_1_kills_the_server _+\n(.*?)short test summary", out, re.S)
    assert call_report, out[-3000:]
    assert call_report.group(1).startswith(died), call_report.group(1)[:500]  # the death first, with the log's last lines
    assert "Uvicorn running on http://127.0.0.1" in call_report.group(1)
    own = call_report.group(1).split("--- the test's own failure, a consequence of the server's death ---")
    assert len(own) == 2 and "urlopen" in own[1]  # the test's own error (a refused or reset connection), kept below
    setup_report = re.search(r"_+ ERROR at setup of test_2_starts_after_the_death _+\n(.*?)={5,} FAILURES", out, re.S)
    assert setup_report and died in setup_report.group(1), out[-3000:]
