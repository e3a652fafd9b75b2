"""Harness² on a real model (issue 32 item 5): `stages.improve` against a real OpenAI-protocol server on 127.0.0.1 (the
stand-in answering every role in its format) prints an estimate from a rate it measured first, runs only with a stated
budget (improve.max_llm_calls / improve.max_minutes), never exceeds it, and says in one line which round produced
nothing."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import pytest

from harness.h2.budget import BudgetedProvider, planned_llm_calls
from harness.llm.protocol import ChatMessage, LLMError, LLMRequest, Role
from stages import improve
from tests.stages.test_improve import write_params
from tests.support.openai_server import FakeOpenAIServer
from tests.support.scripted_replies import ScriptedModel

QUESTIONS = Path(__file__).resolve().parents[2] / "examples" / "own-run" / "questions.jsonl"


@pytest.fixture
def server(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-local")
    rows = [json.loads(line) for line in QUESTIONS.read_text().splitlines()]
    with FakeOpenAIServer(reply=ScriptedModel({r["question"]: r["answer"] for r in rows})) as fake:
        yield fake


def real_params(project: Path, base_url: str, *overrides: str) -> None:
    """params.yaml of the README's real path (sizes derived from the questions file), one Harness² task of 2 questions."""
    from omegaconf import OmegaConf

    from harness.config.load import load_config

    cfg = load_config(["tracking=none", "llm=openai", "benchmark=jsonl", f"benchmark.path={QUESTIONS}", f"llm.base_url={base_url}",
                       "llm.model=scripted", "improve.domains=[addition]", "improve.tasks_per_domain=1",
                       "improve.questions_per_task=2", *overrides], env_file=None, environ={})
    (project / "params.yaml").write_text(OmegaConf.to_yaml(cfg))


def test_without_a_stated_budget_a_real_model_gets_the_estimate_and_no_run(server, tmp_path, capsys):
    real_params(tmp_path, server.base_url)
    assert improve.main(["--yes", "--no-tracking"]) == 0
    out = capsys.readouterr().out
    solver, editor = planned_llm_calls(1, 1, 1, 2, True)
    estimate = re.search(rf"\[improve\] estimate: at most {solver} solver \+ {editor} editor-sized LLM calls for 1 task\(s\); "
                         r"measured now ([\d.]+) s per solver call and ([\d.]+) s per editor call on scripted -> about .+ if all are made .+; "
                         r"budget: none stated", out)
    assert estimate, out
    assert "[improve] not run: on a real model Harness² runs only with a stated budget" in out
    assert server.n_requests == 2  # the two calibration calls, nothing else
    report = json.loads((tmp_path / "state/improve/addition/domain-report.json").read_text())
    assert report["rows"] == [] and "no budget stated" in report["skipped"]
    assert (tmp_path / "reports/improve/sweep-report.json").is_file()  # improve_report still finds what it aggregates


def test_a_stated_call_budget_is_never_exceeded_and_empty_rounds_say_so(server, tmp_path, capsys):
    real_params(tmp_path, server.base_url, "improve.max_llm_calls=3")
    assert improve.main(["--yes", "--no-tracking"]) == 0
    out = capsys.readouterr().out
    assert "budget: 3 LLM calls" in out
    made = re.search(r"\[improve\] budget: (\d+) LLM calls made in .+, (\d+) refused \(improve.max_llm_calls = 3 reached\)", out)
    assert made and int(made.group(1)) == 3 and int(made.group(2)) > 0, out
    assert server.n_requests <= 2 + 3  # calibration + the budget (cache misses only reach the server)
    rows = json.loads((tmp_path / "state/improve/addition/domain-report.json").read_text())["rows"]
    assert rows and all(r["pick"] == "base" for r in rows)  # 3 calls cannot produce an edit
    lines = [line for line in out.splitlines() if "produced nothing" in line]
    assert len(lines) == len(rows) and lines[0].startswith(f"[improve] {rows[0]['task_id']}/parallel: produced nothing")


def test_the_simulated_default_runs_as_before_without_a_budget(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    write_params(tmp_path, "improve.domains=[object_recognition]", "improve.tasks_per_domain=1")
    assert improve.main(["--yes", "--no-tracking"]) == 0
    out = capsys.readouterr().out
    assert "estimate" not in out and "not run" not in out and "[improve] budget" not in out
    assert json.loads((tmp_path / "state/improve/object_recognition/domain-report.json").read_text())["rows"]


def test_the_budgeted_provider_refuses_after_the_call_cap_and_the_deadline(server):
    asyncio.run(_budgeted_provider_refuses(server))


async def _budgeted_provider_refuses(server) -> None:
    from harness.compose import build_provider
    from harness.config.load import load_config

    cfg = load_config(["llm=openai", f"llm.base_url={server.base_url}", "llm.model=scripted"], env_file=None, environ={})
    now = [0.0]
    llm = BudgetedProvider(build_provider(cfg.llm), max_calls=2, max_seconds=60.0, clock=lambda: now[0])
    request = LLMRequest.make(Role.SOLVER, [ChatMessage("user", "What is 23 + 88?")])
    await llm.complete(request)
    now[0] = 59.0
    await llm.complete(request)
    with pytest.raises(LLMError) as refused:
        await llm.complete(request)
    assert refused.value.kind == "budget" and "improve.max_llm_calls = 2 reached" in str(refused.value)
    timed = BudgetedProvider(build_provider(cfg.llm), max_seconds=60.0, clock=lambda: now[0])
    now[0] = 120.0
    with pytest.raises(LLMError, match="improve.max_minutes = 1 reached"):
        await timed.complete(request)
    assert (llm.calls, llm.refused, timed.calls, server.n_requests) == (2, 1, 0, 2)
    await llm.aclose()
    await timed.aclose()
