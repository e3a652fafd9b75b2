"""The CI model's server loads its model with llama.cpp's extra buffer types off (harness/llm/local_server.py):
where a natively built llama.cpp would pick its AMX buffer type, a VM that does not grant AMX faults."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from harness.llm import local_server
from harness.llm.local_server import LlamaServer, smollm2_model_path

pytestmark = pytest.mark.timeout(300)

REPO_ROOT = Path(__file__).resolve().parents[2]
LOAD = """
import json, sys
import llama_cpp
from harness.llm.local_server import disable_extra_buffer_types
if sys.argv[2] == "off":
    disable_extra_buffer_types()
llm = llama_cpp.Llama(model_path=sys.argv[1], n_ctx=256, n_threads=1, verbose=False)
print(json.dumps({"use_extra_bufts": bool(llm.model_params.use_extra_bufts), "text": llm("Hi", max_tokens=2)["choices"][0]["text"]}))
"""


def load(mode: str) -> dict:
    """The model params a real llama_cpp.Llama loaded with, in a fresh process (the switch is process-wide)."""
    done = subprocess.run([sys.executable, "-c", LOAD, str(smollm2_model_path()), mode], cwd=REPO_ROOT, capture_output=True,
                          text=True, timeout=240, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_switch_turns_extra_buffer_types_off_and_the_model_still_generates():
    assert load("default")["use_extra_bufts"] is True  # llama.cpp's default, which the switch must change
    off = load("off")
    assert off["use_extra_bufts"] is False and isinstance(off["text"], str)


def test_the_server_runs_through_the_switch_unless_asked_not_to(tmp_path):
    portable = LlamaServer(log_path=tmp_path / "a.log").command()
    assert portable[1:4] == ["-X", "faulthandler", str(Path(local_server.__file__).resolve())]
    assert "llama_cpp.server" not in portable and portable[portable.index("--n_threads") + 1] == "1"
    as_installed = LlamaServer(log_path=tmp_path / "b.log", extra_buffer_types=True, threads=2).command()
    assert as_installed[3:5] == ["-m", "llama_cpp.server"] and as_installed[as_installed.index("--n_threads") + 1] == "2"
