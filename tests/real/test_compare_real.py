"""`python -m stages.compare` on the CI model (SmolLM2-135M-Instruct on llama.cpp, the `llama_server` fixture).

A human-written harmful change, "Always answer with the last choice." in the system prompt and every skill file
(examples/harness-changes/last-choice), against the starting harness of `benchmark=jsonl` on the 40 questions the
tests ship, with a small budget: the command must refuse it (exit 1) and write its certificate. Measured at full
size in reports/benchmarks/real.md (section "compare"); the helpful change found there needs more pairs than a CI
test can pay, so it is not tested here.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from harness.contracts.certificate import read_certificate
from tests.pipeline.support import REPO_ROOT, env

pytestmark = pytest.mark.timeout(900)  # 40 rollouts; a loaded 2-core machine has taken up to 136 s per reply

HARMFUL = REPO_ROOT / "examples" / "harness-changes" / "last-choice"
PAIRS = 20  # one look (certify.block_size): 40 rollouts, ~1-3 min


def test_compare_refuses_the_last_choice_change_on_the_real_model(llama_server, tmp_path):
    assert "Always answer with the last choice." in (HARMFUL / "system_prompt.md").read_text()
    out = tmp_path / "compare"
    done = subprocess.run(
        [sys.executable, "-m", "stages.compare", "--candidate", str(HARMFUL), "--max-pairs", str(PAIRS), "--out", str(out),
         "--no-tracking", "llm=openai", "benchmark=jsonl", "benchmark.path=tests/fixtures/real_mc.jsonl",
         f"llm.base_url={llama_server.base_url}", f"llm.model={llama_server.model_id}", "llm.max_tokens=48",
         "llm.timeout_s=240", "llm.max_retries=1", "llm.concurrency=1", f"llm.cache_dir={tmp_path / 'llm'}", "tracking=none"],
        cwd=REPO_ROOT, env=env(), capture_output=True, text=True, timeout=840, check=False)
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]  # 1 = not certified; 0 or 2 would fail here
    assert "Traceback" not in done.stderr
    certificate = read_certificate(out)
    assert not certificate.certified and certificate.delivered == "baseline"
    assert certificate.summary.startswith("not certified") and certificate.summary in done.stdout
    attempt = certificate.attempts[0]
    assert attempt.label == "candidate" and attempt.decision == "not_certified"
    assert attempt.pairs == PAIRS and attempt.wins + attempt.losses + attempt.ties + attempt.infra == PAIRS
    assert attempt.infra == 0  # the server answered every rollout: the refusal is the evidence's, not an outage's
    assert attempt.rollouts == 2 * PAIRS
    assert attempt.log_e is not None and attempt.threshold is not None and attempt.log_e < attempt.threshold
    assert certificate.population["pool"] == "all" and certificate.population["n_questions"] == 40
    print(f"stages.compare last-choice on SmolLM2: {certificate.summary}; wins {attempt.wins} losses {attempt.losses} "
          f"ties {attempt.ties}; estimate {attempt.estimate}, bounds [{attempt.lower_bound}, {attempt.upper_bound}]")
