"""An outage is a failure (issue 31 item 1): a real OpenAI-protocol server on 127.0.0.1 dies, or starts refusing the
key, just before each LLM stage in turn; the training stops in that stage with the scored-share error naming it,
never with an accuracy computed from nothing. One stages.train subprocess shows the exit code, the one line and the
MLflow run marked FAILED."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from harness.llm.protocol import PreflightError
from harness.loop.validate import InfraFailureError
from tests.support.openai_server import FakeOpenAIServer
from tests.support.scripted_replies import ScriptedModel

pytestmark = pytest.mark.timeout(600)
REPO_ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = REPO_ROOT / "examples" / "own-run" / "questions.jsonl"
# 4 task types x 6 questions: pools of 8 / 8 / 8, four batches of 2
N_PER_TYPE = 6
SMALL = ("pools.test_size=8", "pools.val_size=8", "pools.diagnosis_size=8", "pools.eval_min_per_class=2",
         "batching.batch_size=4", "batching.min_class_per_batch=1", "gate.block_size=4", "gate.max_pairs=12",
         "gate.mcnemar_n=12", "train.epochs=1", "llm.max_retries=0", "llm.timeout_s=10", "llm.concurrency=4",
         "certify.max_pairs=16", "certify.block_size=8")


def _questions(path: Path) -> dict[str, str]:
    rows = [json.loads(line) for line in EXAMPLE.read_text().splitlines()]
    kept, seen = [], {}
    for row in rows:
        if seen.get(row["task_type"], 0) < N_PER_TYPE:
            seen[row["task_type"]] = seen.get(row["task_type"], 0) + 1
            kept.append(row)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in kept))
    return {r["question"]: r["answer"] for r in kept}


def _config(root: Path, base_url: str, *extra: str):
    from harness.config.load import load_config

    return load_config(["llm=openai", "benchmark=jsonl", f"benchmark.path={root / 'data' / 'q.jsonl'}", f"llm.base_url={base_url}",
                        "llm.model=scripted", "tracking=none", *SMALL, *extra], env_file=None, environ={})


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """The scripted model's server and its questions, shared by the module's runs (each run has its own response
    cache: its first LLM stage passes the preflight, later stages meet the failure in their rollouts)."""
    root = tmp_path_factory.mktemp("outage")
    answers = _questions(root / "data" / "q.jsonl")
    with FakeOpenAIServer(reply=ScriptedModel(answers), record=False) as server:
        yield server, root


FAILURES = {"dies": lambda s: setattr(s, "down", True), "refuses the key": lambda s: setattr(s, "require_key", "sk-another")}
# the stage whose LLM calls meet the failure, and the stage after which the server fails
TARGETS = [("rollout@e1.s1", "batches@e1"), ("gate@e1.s1", "evolve@e1.s1"), ("rollout@e1.s2", "gate@e1.s1"),
           ("slow@e1", "gate@e1.s2"), ("certify", "slow@e1"), ("holdout", "certify")]
# the first LLM stage meets the failure in the provider's preflight (its first request), before any paid call
PREFLIGHT = {"dies": "cannot connect to http://127.0.0.1:", "refuses the key": "refused the API key (HTTP 401 on GET /models)"}


@pytest.mark.parametrize("failure", list(FAILURES))
@pytest.mark.parametrize(("target", "after"), TARGETS, ids=[t for t, _ in TARGETS])
def test_each_stage_stops_on_an_outage_and_names_itself(served, tmp_path, monkeypatch, target, after, failure):
    from harness.loop.runner import Runner

    server, shared = served
    monkeypatch.setenv("OPENAI_API_KEY", "sk-local")
    cfg = _config(shared, server.base_url)
    runner = Runner(cfg, tmp_path)
    seen: list[str] = []

    def after_stage(item) -> None:
        seen.append(item.name)
        if item.name == after:
            FAILURES[failure](server)
            if target == "holdout":  # slow@e1's held-out eval asked these already: emptied, the holdout must ask the server
                with sqlite3.connect(tmp_path / ".cache" / "llm" / "responses.sqlite") as conn:
                    conn.execute("DELETE FROM responses")

    first_llm_stage = target == "rollout@e1.s1"
    try:
        with pytest.raises(PreflightError if first_llm_stage else InfraFailureError) as info:
            runner.train(after_stage=after_stage)
    finally:
        server.down, server.require_key = False, None
        runner.ctx.close()
    assert seen[-1] == after, seen  # stopped in the stage right after the failure
    if first_llm_stage:
        assert PREFLIGHT[failure] in str(info.value), str(info.value)
    else:
        assert str(info.value).startswith(target), str(info.value)
        assert "rollouts were scored" in str(info.value) and "no accuracy is reported" in str(info.value)
    assert not (tmp_path / "state" / "holdout" / "holdout.json").exists()


def test_stages_train_exits_non_zero_with_one_line_and_mlflow_failed(served, tmp_path):
    """The key refused mid-run (after 40 completions): exit 2, one line naming the stage, the MLflow run FAILED."""
    server, shared = served
    _questions(tmp_path / "data" / "q.jsonl")
    for name in ("conf", "dvc.yaml"):
        src = REPO_ROOT / name
        (subprocess.run(["cp", "-r", str(src), str(tmp_path / name)], check=True))
    start = server.n_requests

    def refuse_later(stop: threading.Event) -> None:
        while not stop.wait(0.05):
            if server.n_requests - start >= 40:
                server.require_key = "sk-another"
                return

    stop = threading.Event()
    watcher = threading.Thread(target=refuse_later, args=(stop,), daemon=True)
    watcher.start()
    try:
        done = subprocess.run(
            [sys.executable, "-m", "stages.train", "llm=openai", "benchmark=jsonl", "benchmark.path=data/q.jsonl",
             f"llm.base_url={server.base_url}", "llm.model=scripted", *SMALL, "tracking=mlflow", "hydra.run.dir=runs/job"],
            cwd=tmp_path, env={**os.environ, "OPENAI_API_KEY": "sk-local", "PYTHONPATH": str(REPO_ROOT)},
            capture_output=True, text=True, timeout=500)
    finally:
        stop.set()
        watcher.join(5)
        server.require_key = None
    assert done.returncode == 2, done.stderr[-3000:]
    lines = [line for line in done.stderr.splitlines() if line.startswith("stages.train:") and "warning:" not in line]
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr[-3000:]
    # in a rollout the scored-share guard names the stage; in an editor / diagnoser call the failed call is the line
    assert ("rollouts were scored" in lines[0] and "@e1" in lines[0]) or "[auth]" in lines[0] and "401" in lines[0], lines[0]
    db = next(tmp_path.glob("**/mlflow.db"))
    statuses = [row[0] for row in sqlite3.connect(db).execute("SELECT status FROM runs")]
    assert statuses == ["FAILED"], statuses


def test_an_editor_reply_holding_a_lone_surrogate_never_crashes_a_run_or_its_replay(tmp_path, monkeypatch):
    """The editor answers with "\\ud800" (a valid JSON escape, not valid Unicode): the run finishes, evolve.json holds
    U+FFFD where the surrogate was, and a second run replaying the same cache with the server gone finishes too."""
    from harness.loop.runner import Runner

    answers = _questions(tmp_path / "data" / "q.jsonl")
    scripted = ScriptedModel(answers)

    def reply(body):
        text = scripted(body)
        return text.replace("check every step", "check \ud800 every step") if "<edit" in text else text

    monkeypatch.setenv("OPENAI_API_KEY", "sk-local")
    with FakeOpenAIServer(reply=reply, record=False) as server:
        cfg = _config(tmp_path, server.base_url, f"llm.cache_dir={tmp_path / 'cache'}")
        runner = Runner(cfg, tmp_path / "first")
        try:
            runner.train()
        finally:
            runner.ctx.close()
    evolve = (tmp_path / "first" / "state" / "e1" / "s1" / "evolve" / "evolve.json").read_text(encoding="utf-8")
    assert "check \\ufffd every step" in evolve or "check \ufffd every step" in evolve
    assert (tmp_path / "first" / "state" / "holdout" / "holdout.json").is_file()
    replay = Runner(cfg, tmp_path / "second")  # the server is gone: everything comes from the cache
    try:
        replay.train()
    finally:
        replay.ctx.close()
    assert (tmp_path / "second" / "state" / "holdout" / "holdout.json").read_text() == \
        (tmp_path / "first" / "state" / "holdout" / "holdout.json").read_text()


def test_a_missing_key_is_one_line_before_prepare_runs(tmp_path):
    """No API key for a remote server: stages.train says so in one line before any stage work (no questions written)."""
    _questions(tmp_path / "data" / "q.jsonl")
    for name in ("conf", "dvc.yaml"):
        subprocess.run(["cp", "-r", str(REPO_ROOT / name), str(tmp_path / name)], check=True)
    environ = {k: v for k, v in os.environ.items() if k != "HT_OUTAGE_KEY"}
    done = subprocess.run(
        [sys.executable, "-m", "stages.train", "llm=openai", "benchmark=jsonl", "benchmark.path=data/q.jsonl",
         "llm.base_url=https://api.example.com/v1", "llm.api_key_env=HT_OUTAGE_KEY", *SMALL, "tracking=none",
         "hydra.run.dir=runs/job"],
        cwd=tmp_path, env={**environ, "PYTHONPATH": str(REPO_ROOT)}, capture_output=True, text=True, timeout=300)
    assert done.returncode == 2, done.stderr[-3000:]
    lines = [line for line in done.stderr.splitlines() if line.startswith("stages.train:") and "warning:" not in line]
    assert lines == ["stages.train: environment variable HT_OUTAGE_KEY (llm.api_key_env) is not set; it must hold the API "
                     "key for https://api.example.com/v1 (a local base_url such as http://127.0.0.1:8000/v1 needs no key)"], \
        done.stderr[-3000:]
    assert "Traceback" not in done.stderr and not list((tmp_path / "runs" / "job").rglob("questions.parquet"))
