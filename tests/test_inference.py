"""run_inference with a real run log (SQLite in tmp_path), real cache, and the simulated world."""

from __future__ import annotations

import asyncio
import json

import pytest

from harness.compose import build_provider
from harness.config.schema import LLMConfig
from harness.inference import _to_text_field, run_inference
from harness.llm.cache import CachedProvider, ResponseCache
from harness.llm.protocol import LLMError, LLMRequest, LLMResponse, Role, Usage
from harness.log import HarnessLog, RunLogReader
from harness.questions import Question
from harness.sim.benchmark import SimBenchmark
from harness.sim.world import World
from harness.tree import HarnessTree

pytestmark = pytest.mark.timeout(60)

TREE = HarnessTree({"system_prompt.md": "Solve.", "skills/default-strategy/SKILL.md": "Think.", "skills/t1/SKILL.md": "T1 skill."})


def questions(n: int = 6) -> list[Question]:
    return [Question(qid=f"q{i}", task_type="t1" if i % 2 else "t2", question=f"question number {i}", answer="A", choices=("x", "y")) for i in range(n)]


class RuleProvider:
    """Answers A for even question numbers, B for odd; raises for questions listed in `fail`; tracks concurrency."""

    name = "rule"

    def __init__(self, *, fail: dict[str, Exception] | None = None, delay_s: float = 0.0, tool_first: bool = False):
        self.fail = fail or {}
        self.delay_s = delay_s
        self.tool_first = tool_first
        self.calls = 0
        self.in_flight = 0
        self.max_in_flight = 0
        self.sample_indices: list[int] = []

    def model_for(self, role: Role) -> str:
        return "rule-1"

    def request_identity(self, request: LLMRequest) -> dict:
        return {"provider": self.name, "endpoint": "in-process", "model": "rule-1", "params": request.params_dict}

    async def complete(self, request: LLMRequest) -> LLMResponse:
        self.calls += 1
        self.sample_indices.append(request.sample_index)
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            if self.delay_s:
                await asyncio.sleep(self.delay_s)
            user = request.messages[1].content
            number = int(user.split("question number ")[1].split()[0])
            for key, exc in self.fail.items():
                if f"question number {key[1:]}\n" in user + "\n":
                    raise exc
            if self.tool_first and len(request.messages) == 2:
                return LLMResponse('<tool_call>{"name": "probe", "arguments": {"n": 1}}</tool_call>', "rule-1", self.name, Usage(10, 2), 0.001)
            letter = "A" if number % 2 == 0 else "B"
            return LLMResponse(f"reasoning\nANSWER: {letter}", "rule-1", self.name, Usage(10, 2), 0.001)
        finally:
            self.in_flight -= 1


def letter_scorer(question: Question, predicted: str | None) -> bool:
    return predicted == question.answer


def infer(llm, log, **overrides):
    kwargs = dict(harness_tree_for=TREE, llm=llm, tool_dispatch_fn=None, scorer=letter_scorer, log=log, run_id="run_e1_s1", concurrency=4)
    kwargs.update(overrides)
    qs = kwargs.pop("questions", None) or questions()
    return asyncio.run(run_inference(qs, **kwargs))


def test_results_aggregate_in_memory_and_every_prediction_is_logged(tmp_path):
    llm = RuleProvider(fail={"q3": LLMError("timeout", "slow server")})
    with HarnessLog(tmp_path / "log.sqlite") as log:
        result = infer(llm, log)
    assert result.correctness == {"q0": True, "q1": False, "q2": True, "q3": None, "q4": True, "q5": False}
    assert (result.n, result.n_infra, result.n_correct) == (6, 1, 3)
    assert result.accuracy == pytest.approx(3 / 5)
    assert result.usd == pytest.approx(0.005) and result.tokens == 5 * 12
    assert result.stop_reasons == {"answer": 5, "error": 1}
    rows = {r["qid"]: r for r in RunLogReader([tmp_path / "log.sqlite"]).predictions(run_id="run_e1_s1")}
    assert set(rows) == {f"q{i}" for i in range(6)}
    assert rows["q3"]["stop_reason"] == "error" and rows["q3"]["correct"] is None and "[timeout] slow server" in rows["q3"]["error"]
    assert rows["q0"]["correct"] == 1 and rows["q1"]["correct"] == 0 and rows["q0"]["predicted"] == "A"
    assert rows["q1"]["skill_hash"] != rows["q0"]["skill_hash"]  # t1 has its own skill, t2 falls back to default
    traces = RunLogReader([tmp_path / "log.sqlite"]).traces("run_e1_s1", "q0")
    assert [t["kind"] for t in traces] == ["assistant"]
    assert result.records[("q0", 0)].trace[0].content.endswith("ANSWER: A")


def test_run_id_is_required(tmp_path):
    with HarnessLog(tmp_path / "log.sqlite") as log:
        for bad in ("", "   "):
            with pytest.raises(ValueError, match="run_id is required"):
                infer(RuleProvider(), log, run_id=bad)


def test_concurrency_is_bounded(tmp_path):
    llm = RuleProvider(delay_s=0.02)
    with HarnessLog(tmp_path / "log.sqlite") as log:
        infer(llm, log, questions=questions(40), concurrency=5)
    assert llm.max_in_flight == 5


def test_crash_outside_the_llm_is_still_logged_pessimistically(tmp_path):
    def dispatch_fn(question):
        if question.qid == "q2":
            raise RuntimeError("adapter broke")
        return None

    with HarnessLog(tmp_path / "log.sqlite") as log:
        result = infer(RuleProvider(), log, tool_dispatch_fn=dispatch_fn)
        rows = {r["qid"]: r for r in log.query("SELECT * FROM predictions")}
    assert result.correctness["q2"] is None and result.records[("q2", 0)].stop_reason == "error"
    assert rows["q2"]["stop_reason"] == "error" and "RuntimeError: adapter broke" in rows["q2"]["error"]
    assert len(rows) == 6


def test_tool_evidence_is_stored_as_json(tmp_path):
    with HarnessLog(tmp_path / "log.sqlite") as log:
        result = infer(RuleProvider(tool_first=True), log, tool_dispatch_fn=lambda q: (lambda name, args: f"probe of {q.qid}"))
        row = log.query("SELECT evidence, reasoning, n_steps FROM predictions WHERE qid = 'q0'")[0]
    assert json.loads(row["evidence"]) == [{"arguments": {"n": 1}, "result": "probe of q0", "tool": "probe"}]
    assert row["n_steps"] == 2 and row["reasoning"].endswith("ANSWER: A")
    assert result.accuracy == 0.5
    assert _to_text_field({"b": 1, "a": [2]}) == '{"a": [2], "b": 1}' and _to_text_field("x") == "x" and _to_text_field(None) is None


def test_several_sample_indices_per_question(tmp_path):
    qs = questions(2)
    with HarnessLog(tmp_path / "log.sqlite") as log:
        llm = RuleProvider()
        result = infer(llm, log, questions=qs + qs, sample_indices=[7, 7, 8, 8])
        assert log.query("SELECT COUNT(*) AS n FROM predictions")[0]["n"] == 4
    assert set(result.records) == {("q0", 7), ("q1", 7), ("q0", 8), ("q1", 8)}
    assert sorted(llm.sample_indices) == [7000, 7000, 8000, 8000]  # step 0 of samples 7 and 8
    with pytest.raises(ValueError, match="several sample indices"):
        result.correctness
    with HarnessLog(tmp_path / "log2.sqlite") as log:
        with pytest.raises(ValueError, match="appears twice"):
            infer(RuleProvider(), log, questions=qs + qs, sample_indices=[1, 1, 1, 2])
        with pytest.raises(ValueError, match="one per question"):
            infer(RuleProvider(), log, questions=qs, sample_indices=[1])


def test_harness_per_task_type(tmp_path):
    other = TREE.with_files({"skills/t1/SKILL.md": "candidate skill"})
    seen = []

    def tree_for(task_type):
        seen.append(task_type)
        return other if task_type == "t1" else TREE

    with HarnessLog(tmp_path / "log.sqlite") as log:
        result = infer(RuleProvider(), log, harness_tree_for=tree_for)
    assert set(seen) == {"t1", "t2"}
    assert result.records[("q1", 0)].skill_hash != result.records[("q0", 0)].skill_hash
    assert result.records[("q1", 0)].skill_hash == result.records[("q3", 0)].skill_hash  # same candidate skill


def test_rerun_through_cache_makes_zero_calls_and_is_idempotent(tmp_path):
    inner = RuleProvider()
    with ResponseCache(tmp_path / "cache") as cache, HarnessLog(tmp_path / "log.sqlite") as log:
        first = infer(CachedProvider(inner, cache), log)
        calls = inner.calls
        again = infer(CachedProvider(inner, cache), log)
        assert inner.calls == calls and calls == 6
        assert again.correctness == first.correctness and again.usd == 0.0
        assert log.query("SELECT COUNT(*) AS n FROM predictions")[0]["n"] == 6


def test_simulated_world_end_to_end(tmp_path):
    world = World.generate(seed=3, n_task_types=3, questions_per_type=10)
    bench = SimBenchmark(world)
    llm = build_provider(LLMConfig(provider="sim"), world=world)
    with HarnessLog(tmp_path / "log.sqlite") as log:
        result = asyncio.run(run_inference(
            bench.questions(), harness_tree_for=bench.base_harness(), llm=llm, tool_dispatch_fn=bench.tool_dispatch,
            scorer=bench.score, log=log, run_id="sim_e1_s1", concurrency=8, sample_indices=1001,
        ))
        again = asyncio.run(run_inference(
            bench.questions(), harness_tree_for=bench.base_harness(), llm=llm, tool_dispatch_fn=bench.tool_dispatch,
            scorer=bench.score, log=log, run_id="sim_e1_s1_again", concurrency=8, sample_indices=1001,
        ))
    assert result.n == 30 and result.n_infra == 0
    assert 0.0 < result.accuracy < 1.0
    assert again.correctness == result.correctness  # deterministic in (question, harness, sample index)
    assert any(r.n_steps == 2 for r in result.records.values())  # the tool path was exercised


def test_result_repr_stays_small_for_large_runs(tmp_path):
    # asyncio.run formats its finished main task, result included: a full repr would render every record
    with HarnessLog(tmp_path / "log.sqlite") as log:
        result = infer(RuleProvider(), log, questions=questions(200))
    assert result.n == 200 and len(repr(result)) < 600


def test_openai_provider_over_http_with_tools_and_a_failing_question(tmp_path):
    from harness.llm.openai_provider import OpenAIProvider
    from tests.support.llm_config import fast_llm_config
    from tests.support.openai_server import FakeOpenAIServer

    def reply(body):
        messages = body["messages"]
        if "question number 3" in messages[1]["content"]:
            return "I cannot decide."  # no answer: a judged failure, not infra
        if len(messages) == 2:
            return '<tool_call>{"name": "probe", "arguments": {"n": 1}}</tool_call>'
        assert messages[-1]["content"].startswith('<tool_result name="probe">')
        return "ANSWER: A"

    with FakeOpenAIServer(reply=reply) as server, HarnessLog(tmp_path / "log.sqlite") as log:
        server.script("500")  # one transient failure on the way, retried

        async def go():
            provider = OpenAIProvider(fast_llm_config(base_url=server.base_url, timeout_s=5.0), api_key="sk-local")
            try:
                return await run_inference(
                    questions(4), harness_tree_for=TREE, llm=provider, tool_dispatch_fn=lambda q: (lambda n, a: "probe ok"),
                    scorer=letter_scorer, log=log, run_id="http_run", concurrency=4, params={"temperature": 0.0},
                )
            finally:
                await provider.aclose()

        result = asyncio.run(go())
        rows = {r["qid"]: r for r in log.query("SELECT qid, stop_reason, n_steps, correct FROM predictions")}
    assert result.correctness == {"q0": True, "q1": True, "q2": True, "q3": False}
    assert rows["q3"]["stop_reason"] == "no_answer" and rows["q0"]["n_steps"] == 2 and result.n_infra == 0
    assert all(r.body["temperature"] == 0.0 for r in server.requests)
