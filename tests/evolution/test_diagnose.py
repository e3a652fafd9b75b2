import asyncio
import logging

import pytest

from harness.evolution.diagnose import run_diagnosis
from harness.kernel.types import CaseSample
from harness.llm.protocol import Role
from harness.sim.provider import SimProvider
from harness.sim.world import World
from tests.evolution.scripted import ScriptedLLM


def case(qid, tt, correct=False):
    return CaseSample(qid, tt, f"Q {qid}?", "A", "B", correct, "trace")


def test_groups_by_task_type_and_skips_correct():
    world = World.generate(7)
    q1, q2, q3 = world.questions[0], world.questions[1], world.questions[70]
    failures = [CaseSample(q.qid, q.task_type, q.question, "A", q.answer, False, "I was unsure about the timestamps") for q in (q1, q2, q3)]
    failures.append(CaseSample(q1.qid, q1.task_type, q1.question, q1.answer, q1.answer, True, ""))
    result = asyncio.run(run_diagnosis(SimProvider(world), run_id="r_e1_s1", failures=failures, concurrency=2))
    assert result.run_id == "r_e1_s1"
    assert len(result.by_task_type[q1.task_type]) == 2 and len(result.by_task_type[q3.task_type]) == 1
    assert [c.qid for c in result.failures[q1.task_type]] == [q1.qid, q2.qid]


def test_malformed_diagnosis_retried_then_dropped_with_warning(caplog):
    llm = ScriptedLLM(["no tags", "<diagnosis>missed the clock</diagnosis>", "bad", "still bad"])
    with caplog.at_level(logging.WARNING):
        result = asyncio.run(run_diagnosis(llm, run_id="r", failures=[case("a", "t"), case("b", "t")], concurrency=1))
    assert result.by_task_type == {"t": ["missed the clock"]}
    assert [c.qid for c in result.failures["t"]] == ["a", "b"]
    assert result.usd == pytest.approx(0.04)
    assert all(r.role == Role.DIAGNOSER for r in llm.requests)
    assert "diagnosis of b dropped" in caplog.text


def test_bad_arguments():
    with pytest.raises(ValueError, match="run_id"):
        asyncio.run(run_diagnosis(ScriptedLLM([]), run_id="", failures=[], concurrency=1))
    with pytest.raises(ValueError, match="concurrency"):
        asyncio.run(run_diagnosis(ScriptedLLM([]), run_id="r", failures=[], concurrency=0))
