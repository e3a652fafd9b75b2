"""Issue 32 item 1: the diagnoser and the editor see what the solver saw (question, choices, context, answers).

Cases come from real rollouts through the loop's own `case_samples` (the run log plus the question records), and
the prompts are the requests the editor and diagnoser actually send, recorded on the way to the provider.
"""

from __future__ import annotations

import asyncio
import json

from harness.bench.jsonl import JsonlBenchmark, read_user_questions
from harness.bench.scoring import load_scorer
from harness.compose import build_provider
from harness.config.schema import LLMConfig
from harness.contracts.solver import skill_path
from harness.evolution import prompts
from harness.evolution.diagnose import run_diagnosis
from harness.evolution.evolve import evolve_single_skill
from harness.inference import run_inference
from harness.kernel.types import CaseSample
from harness.llm.protocol import LLMRequest, LLMResponse, Role
from harness.log import HarnessLog, RunLogReader
from harness.loop.rollouts import case_samples
from harness.sim.benchmark import SimBenchmark
from harness.sim.world import World
from tests.evolution.scripted import ScriptedLLM


class Recording:
    """Passes every request to `inner` and keeps it: the prompts as the provider received them."""

    def __init__(self, inner):
        self.inner, self.name, self.requests = inner, getattr(inner, "name", "recording"), []
        self.structured_output = getattr(inner, "structured_output", None)

    def model_for(self, role: Role) -> str:
        return self.inner.model_for(role)

    async def complete(self, request: LLMRequest) -> LLMResponse:
        self.requests.append(request)
        return await self.inner.complete(request)


def _failures(bench, llm, tmp_path, sample_index: int = 7) -> list[CaseSample]:
    questions = bench.questions()
    with HarnessLog(tmp_path / "log.sqlite") as log:
        result = asyncio.run(run_inference(questions, harness_tree_for=bench.base_harness(), llm=llm, tool_dispatch_fn=bench.tool_dispatch,
                                           scorer=bench.score, log=log, run_id="view_e1_s1", concurrency=1, sample_indices=sample_index))
    outcomes = {q.qid: result.correctness_by_sample[(q.qid, sample_index)] for q in questions}
    cases = case_samples(RunLogReader([tmp_path / "log.sqlite"]), "view_e1_s1", {q.qid: q for q in questions}, outcomes)
    return [c for c in cases if not c.correct]


def _sent_to(llm: Recording, role: Role) -> str:
    return "\n".join(m.content for r in llm.requests if r.role == role for m in r.messages)


def _ask_both(llm: Recording, case: CaseSample, skill_text: str) -> tuple[str, str]:
    asyncio.run(run_diagnosis(llm, run_id="view_e1_s1", failures=[case], concurrency=1, sample_index=3))
    asyncio.run(evolve_single_skill(llm, task_type=case.task_type, skill_file=skill_path(case.task_type), skill_text=skill_text,
                                    case_pack=[case], diagnoses=[], rejected=[], edit_budget=1, sample_index=3))
    return _sent_to(llm, Role.DIAGNOSER), _sent_to(llm, Role.EDITOR)


def test_a_jsonl_multiple_choice_failure_shows_its_choices_context_and_both_answers(tmp_path):
    path = tmp_path / "q.jsonl"
    rows = [{"qid": "geo-1", "task_type": "geo", "question": "What is the capital of France?",
             "choices": ["Paris", "London", "Madrid", "Berlin"], "answer": "A", "context": ["A travel note about Paris and Berlin."]},
            {"qid": "geo-2", "task_type": "geo", "question": "What is the capital of Japan?",
             "choices": ["Beijing", "Seoul", "Bangkok", "Tokyo"], "answer": "D"}]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    bench = JsonlBenchmark(read_user_questions(path), scorer=load_scorer("exact"))
    solver = ScriptedLLM(["I think so.\nANSWER: D", "ANSWER: D"])  # geo-1 wrong (D), geo-2 right
    failures = _failures(bench, solver, tmp_path)
    assert [c.qid for c in failures] == ["geo-1"]
    case = failures[0]
    assert case.choices == ["Paris", "London", "Madrid", "Berlin"] and case.context == ["A travel note about Paris and Berlin."]

    llm = Recording(ScriptedLLM(["<diagnosis>It picked the wrong city.</diagnosis>",
                                 '<edit op="add"><new>Check which choice names the capital city.</new></edit>']))
    diagnoser, editor = _ask_both(llm, case, bench.base_harness()[skill_path("geo")])
    for prompt in (diagnoser, editor):
        for letter, text in zip("ABCD", case.choices):
            assert f"{letter}. {text}" in prompt
        assert "[0] A travel note about Paris and Berlin." in prompt
        assert "I think so." in prompt  # the reply itself, in the trace
    assert "Predicted: D (Berlin) · Correct: A (Paris)" in editor
    assert "Agent answer: D (Berlin)\nCorrect answer: A (Paris)" in diagnoser


def test_a_simulated_failure_shows_its_choices_to_the_sim_editor_and_diagnoser(tmp_path):
    world = World.generate(seed=3, n_task_types=2, questions_per_type=6)
    bench = SimBenchmark(world)
    sim = build_provider(LLMConfig(provider="sim"), world=world)
    failures = _failures(bench, sim, tmp_path)
    assert failures, "the simulated solver got every question right; pick another sample index"
    case = failures[0]
    question = world.question(case.qid)
    assert case.choices == list(question.choices) and len(case.choices) == 4
    llm = Recording(sim)
    diagnoser, editor = _ask_both(llm, case, bench.base_harness().get(skill_path(case.task_type), "- Read the question."))
    for prompt in (diagnoser, editor):
        for letter, text in zip("ABCD", question.choices):
            assert f"{letter}. {text}" in prompt
    picked = "ABCD".index(case.predicted) if case.predicted in tuple("ABCD") else None
    shown = f"{case.predicted} ({question.choices[picked]})" if picked is not None else str(case.predicted)
    assert f"Predicted: {shown if case.predicted else '(none)'} · Correct: {question.answer} " \
           f"({question.choices['ABCD'.index(question.answer)]})" in editor


def test_answer_labels_name_the_choice_text_only_for_a_choice_letter():
    choices = ["Paris", "London"]
    assert prompts.answer_label("B", choices) == "B (London)"
    assert prompts.answer_label("C", choices) == "C"  # not one of the case's choices: shown as the agent wrote it
    assert prompts.answer_label("Paris", []) == "Paris"
    assert prompts.answer_label(None, choices) == "(none)"
    view = prompts.format_case_view(CaseSample("q", "t", "Q?", "A", "B", False, context=[f"entry {i} " + "x" * 400 for i in range(6)]))
    assert "(first 4 of 6)" in view and "[3] entry 3" in view and "[4]" not in view and "…[truncated]" in view
