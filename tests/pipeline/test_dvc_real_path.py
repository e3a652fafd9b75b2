"""The documented DVC real path (issue 14 item 5): snapshot with llm=openai benchmark=jsonl, then `dvc repro`.

Real DVC in a temporary git repository, a real OpenAI-compatible HTTP server on 127.0.0.1 answering every
role in its format (tests/support/scripted_replies.py). Harness² improve domains default to the data's task types.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.pipeline.support import make_project, run
from tests.support.openai_server import FakeOpenAIServer
from tests.support.scripted_replies import ScriptedModel

TASK_TYPES = ("addition", "subtraction")


def _rows() -> list[dict]:
    source = Path(__file__).resolve().parents[2] / "examples" / "own-run" / "questions.jsonl"
    rows = [json.loads(line) for line in source.read_text().splitlines()]
    return [r for r in rows if r["task_type"] in TASK_TYPES and int(r["qid"].rsplit("-", 1)[1]) <= 9]  # 2 x 9 questions


@pytest.mark.slow
def test_dvc_repro_on_the_real_path_completes_and_follows_the_questions_file(tmp_path: Path) -> None:
    rows = _rows()
    source = tmp_path / "q.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in rows))
    # the README's DVC path: the overrides written into params.yaml; one step per epoch and one Harness² task per
    # domain keep the test short (every stage kind still runs)
    overrides = ("llm=openai", "benchmark=jsonl", "benchmark.path=data/q.jsonl", "llm.model=scripted", "tracking=none",
                 "train.epochs=1", "batching.batch_size=6", "improve.tasks_per_domain=1",
                 "improve.max_minutes=30")  # on a real model Harness² runs only with a stated budget (docs/pipeline.md)
    with FakeOpenAIServer(reply=ScriptedModel({r["question"]: r["answer"] for r in rows}), record=False) as server:
        # the server address is a DVC param (it decides which model answers): written into params.yaml
        project = make_project(tmp_path / "project", overrides=(*overrides, f"llm.base_url={server.base_url}"),
                               files={"data/q.jsonl": source})
        params = yaml.safe_load((project / "params.yaml").read_text())
        assert params["improve"]["domains"] == list(TASK_TYPES)  # derived from the data, not the simulator's task types
        assert (params["pools"]["test_size"], params["pools"]["diagnosis_size"], params["train"]["steps_per_epoch"]) == (6, 6, 1)
        env = {"OPENAI_API_KEY": "sk-local"}
        first = run(["dvc", "repro"], project, timeout=1200, extra_env=env)  # raises on a non-zero exit
        assert "Running stage 'improve_report'" in first.stdout
        sweep = json.loads((project / "reports" / "improve" / "sweep-report.json").read_text())
        assert sorted({task["domain"] for task in sweep["tasks"]}) == list(TASK_TYPES) and not sweep["crashed"], sweep["crashed"]
        metrics = json.loads((project / "reports" / "metrics.json").read_text())
        assert metrics["accepted"] >= 1 and metrics["holdout_delivered_hard_acc"] > metrics["holdout_base_hard_acc"]
        assert "up to date" in run(["dvc", "status"], project).stdout

        # one changed answer: prepare and everything after it re-run, the Harness² stages too (their tasks are the questions)
        changed = [dict(r) for r in rows]
        changed[5]["answer"] = "ABCD"[("ABCD".index(changed[5]["answer"]) + 1) % 4]
        (project / "data" / "q.jsonl").write_text("".join(json.dumps(r) + "\n" for r in changed))
        status = json.loads(run(["dvc", "status", "prepare", "--json"], project).stdout)
        assert status == {"prepare": [{"changed deps": {"data/q.jsonl": "modified"}}]}, status
        second = run(["dvc", "repro"], project, timeout=1200, extra_env=env)
    for stage in ("prepare", "pools", "rollout@0", "gate@0", "slow@0", "holdout", "report", *(f"improve@{t}" for t in TASK_TYPES)):
        assert f"Running stage '{stage}'" in second.stdout, (stage, second.stdout[-2000:])
