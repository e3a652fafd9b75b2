"""AgentLoop: answers, tool calls, tool errors, max steps, LLM errors, sample indices."""

from __future__ import annotations

import asyncio

import pytest

from harness.agent.loop import AgentLoop, step_sample_index
from harness.bench.protocol import ToolArgumentError
from harness.contracts.solver import PROTOCOL_TEXT
from harness.identity import STEP_STRIDE
from harness.llm.protocol import LLMError, LLMRequest, LLMResponse, Role, Usage
from harness.questions import Question
from harness.tree import HarnessTree

pytestmark = pytest.mark.timeout(30)

TREE = HarnessTree({
    "system_prompt.md": "You are a solver.",
    "tools/lookup.md": "Use lookup for facts.",
    "skills/geo/SKILL.md": "Capitals: check twice.",
    "skills/default-strategy/SKILL.md": "Default strategy.",
})
QUESTION = Question(qid="q1", task_type="geo", question="Capital of France?", answer="B", choices=("Lyon", "Paris"))


class ScriptedProvider:
    """Replies from a script (str or exception) in order; records every request."""

    name = "scripted"

    def __init__(self, *replies):
        self.replies = list(replies)
        self.requests: list[LLMRequest] = []

    def model_for(self, role: Role) -> str:
        return "scripted-model"

    async def complete(self, request: LLMRequest) -> LLMResponse:
        self.requests.append(request)
        reply = self.replies.pop(0)
        if isinstance(reply, BaseException):
            raise reply
        return LLMResponse(text=reply, model="scripted-model", provider=self.name, usage=Usage(100, 10), cost_usd=0.001)


def run(loop: AgentLoop, **kwargs):
    return asyncio.run(loop.run(TREE, QUESTION, **kwargs))


def test_direct_answer_uses_the_prompt_contract():
    llm = ScriptedProvider("Paris is the capital.\nANSWER: B")
    result = run(AgentLoop(llm, params={"temperature": 0.2}), sample_index=3)
    assert (result.answer, result.stop_reason, result.n_steps, result.infra, result.error) == ("B", "answer", 1, False, None)
    assert result.usage == Usage(100, 10) and result.cost_usd == pytest.approx(0.001)
    [request] = llm.requests
    assert request.role is Role.SOLVER and request.params_dict == {"temperature": 0.2}
    assert request.sample_index == step_sample_index(3, 0)
    system, user = request.messages
    assert "You are a solver." in system.content and "Capitals: check twice." in system.content
    assert "Use lookup for facts." in system.content and PROTOCOL_TEXT in system.content
    assert "Capital of France?" in user.content and "B. Paris" in user.content
    assert [s.kind for s in result.trace] == ["assistant"] and result.reasoning.endswith("ANSWER: B")


def test_tool_call_then_answer():
    calls = []

    def dispatch(name, arguments):
        calls.append((name, dict(arguments)))
        return "France: Paris"

    llm = ScriptedProvider('<tool_call>{"name": "lookup", "arguments": {"country": "France"}}</tool_call>', "ANSWER: B")
    result = run(AgentLoop(llm), tool_dispatch=dispatch, sample_index=5)
    assert result.answer == "B" and result.n_steps == 2 and calls == [("lookup", {"country": "France"})]
    assert [s.kind for s in result.trace] == ["assistant", "tool_call", "tool_result", "assistant"]
    assert [s.step for s in result.trace] == [0, 1, 2, 3]
    second = llm.requests[1]
    assert second.sample_index == 5 * STEP_STRIDE + 1
    assert second.messages[-1].content == '<tool_result name="lookup">\nFrance: Paris\n</tool_result>'
    assert second.messages[-2].role == "assistant"
    assert result.evidence == ({"tool": "lookup", "arguments": {"country": "France"}, "result": "France: Paris"},)
    assert result.usage == Usage(200, 20)


@pytest.mark.parametrize(
    "dispatch, reply, fragment",
    [
        (None, '<tool_call>{"name": "lookup", "arguments": {}}</tool_call>', "UnknownToolError: unknown tool 'lookup'"),
        (lambda n, a: (_ for _ in ()).throw(ToolArgumentError("lookup: 'country' is required")), '<tool_call>{"name": "lookup"}</tool_call>', "ToolArgumentError: lookup: 'country' is required"),
        (lambda n, a: 1 / 0, '<tool_call>{"name": "lookup", "arguments": {}}</tool_call>', "ZeroDivisionError"),
        (lambda n, a: "unused", "<tool_call>{name: lookup}</tool_call>", "tool call is not valid JSON"),
        (lambda n, a: "unused", '<tool_call>{"name": "lookup", "arguments": [1]}</tool_call>', "'arguments' must be an object"),
    ],
)
def test_tool_errors_are_recorded_and_shown_to_the_model(dispatch, reply, fragment):
    llm = ScriptedProvider(reply, "ANSWER: A")
    result = run(AgentLoop(llm), tool_dispatch=dispatch)
    assert result.stop_reason == "answer" and result.answer == "A" and not result.infra
    errors = [s for s in result.trace if s.kind == "tool_error"]
    assert len(errors) == 1 and fragment in errors[0].content
    shown = llm.requests[1].messages[-1].content
    assert shown.startswith("<tool_result") and "ERROR: " in shown and fragment in shown


def test_async_tool_dispatch_and_non_string_result():
    async def dispatch(name, arguments):
        await asyncio.sleep(0)
        return {"capital": "Paris"}

    llm = ScriptedProvider('<tool_call>{"name": "lookup", "arguments": {}}</tool_call>', "ANSWER: B")
    result = run(AgentLoop(llm), tool_dispatch=dispatch)
    assert result.trace[2].content == '{"capital": "Paris"}'


def test_max_steps_and_no_answer():
    call = '<tool_call>{"name": "lookup", "arguments": {}}</tool_call>'
    result = run(AgentLoop(ScriptedProvider(call, call, call), max_steps=3), tool_dispatch=lambda n, a: "x")
    assert (result.stop_reason, result.answer, result.n_steps, result.infra) == ("max_steps", None, 3, False)
    result = run(AgentLoop(ScriptedProvider("I am not sure.")))
    assert (result.stop_reason, result.answer, result.n_steps, result.infra) == ("no_answer", None, 1, False)


def test_llm_error_ends_the_rollout_as_infra():
    llm = ScriptedProvider('<tool_call>{"name": "lookup", "arguments": {}}</tool_call>', LLMError("timeout", "too slow"))
    result = run(AgentLoop(llm), tool_dispatch=lambda n, a: "x")
    assert (result.stop_reason, result.infra, result.n_steps) == ("error", True, 2)
    assert "[timeout] too slow" in result.error and result.trace[-1].kind == "llm_error"
    assert result.usage == Usage(100, 10)  # the first, successful call is still counted

    crashed = run(AgentLoop(ScriptedProvider(TypeError("provider bug"))))
    assert crashed.stop_reason == "error" and crashed.infra and "TypeError: provider bug" in crashed.error


def test_answer_wins_over_tool_call_in_the_same_message_and_skill_fallback():
    llm = ScriptedProvider('<tool_call>{"name": "lookup", "arguments": {}}</tool_call>\nANSWER: B')
    other = Question(qid="q2", task_type="history", question="?", answer="x")
    result = asyncio.run(AgentLoop(llm).run(TREE, other))
    assert result.answer == "B" and "Default strategy." in llm.requests[0].messages[0].content


def test_step_sample_index_is_injective_and_bounded():
    seen = {step_sample_index(s, k) for s in range(50) for k in range(10)}
    assert len(seen) == 500
    with pytest.raises(ValueError):
        step_sample_index(0, STEP_STRIDE)
    with pytest.raises(ValueError):
        AgentLoop(ScriptedProvider(), max_steps=0)


def test_messages_equal_the_prompt_contract_and_memo_follows_the_tree():
    from harness.agent.prompts import solver_messages

    llm = ScriptedProvider("ANSWER: B", "ANSWER: B")
    loop = AgentLoop(llm)
    asyncio.run(loop.run(TREE, QUESTION))
    assert list(llm.requests[0].messages) == solver_messages(TREE, "geo", QUESTION.question, QUESTION.choices)
    edited = TREE.with_files({"skills/geo/SKILL.md": "Capitals: edited."})
    asyncio.run(loop.run(edited, QUESTION))
    assert "Capitals: edited." in llm.requests[1].messages[0].content


def test_a_reply_without_answer_line_is_read_by_the_fallbacks_only_when_lenient():
    lenient = run(AgentLoop(ScriptedProvider("B. Paris")))
    assert (lenient.answer, lenient.stop_reason, lenient.parse_mode) == ("B", "answer", "leading_letter")
    strict = run(AgentLoop(ScriptedProvider("B. Paris"), answer_parsing="strict"))
    assert (strict.answer, strict.stop_reason, strict.parse_mode) == (None, "no_answer", "none")


def test_a_tool_call_is_not_read_as_an_answer():
    llm = ScriptedProvider('B?\n<tool_call>{"name": "lookup", "arguments": {}}</tool_call>', "ANSWER: B")
    result = run(AgentLoop(llm), tool_dispatch=lambda name, arguments: "Paris is the capital of France")
    assert (result.answer, result.n_steps, result.parse_mode) == ("B", 2, "strict")


def test_two_choices_end_the_rollout_without_answer():
    result = run(AgentLoop(ScriptedProvider("A. Lyon\nB. Paris")))
    assert (result.answer, result.stop_reason, result.parse_mode) == (None, "no_answer", "ambiguous")


def test_a_bad_answer_parsing_mode_fails_at_construction():
    with pytest.raises(ValueError, match="benchmark.answer_parsing"):
        AgentLoop(ScriptedProvider(), answer_parsing="loose")
