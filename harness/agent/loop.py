"""AgentLoop: one rollout of the solver on one question under one harness.

system prompt + the task type's skill + tool guides + question (the messages
of harness/contracts/solver.py) -> zero or more tool calls -> final answer.
Every step is kept in the trace. Tool problems (unknown tool, bad
arguments, an exception in the tool, a malformed tool-call block) are
recorded and shown to the model as a <tool_result> with an ERROR line; they
never raise. A failed LLM call ends the rollout with stop_reason "error"
and `infra=True` (it says nothing about the harness).

Answers are read by harness/contracts/answers.py: an `ANSWER:` line ends the
rollout at once (even next to a tool call); a reply with neither an ANSWER
line nor a tool call is read by the fallback rules when `answer_parsing` is
"lenient" and is no answer under "strict". `AgentResult.parse_mode` names the
rule that read the final reply.

Sample indices: LLM call k (0-based) of sample s uses `step_sample_index(s, k)
= s * STEP_STRIDE + k`, so every call of a rollout is a distinct,
reproducible sample and a new s gives fresh samples at every step.
"""

from __future__ import annotations

import inspect
import json
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from harness.bench.protocol import ToolDispatch, UnknownToolError
from harness.contracts.answers import NONE, STRICT, extract_answer
from harness.contracts.logprobs import TokenLogprob
from harness.contracts.solver import (
    render_question,
    render_system_message,
)
from harness.contracts.tool_calls import (
    ToolCallFormatError,
    parse_tool_call,
    render_tool_result,
)
from harness.identity import STEP_STRIDE
from harness.llm.protocol import (
    ChatMessage,
    LLMError,
    LLMProvider,
    LLMRequest,
    Role,
    StageStopError,
    Usage,
)
from harness.questions import Question
from harness.tree import HarnessTree

logger = logging.getLogger("harness.agent")

_SYSTEM_CACHE_MAX = 4096  # rendered system messages kept per AgentLoop (immutable trees only)
StopReason = Literal["answer", "max_steps", "error", "no_answer"]

# trace kinds
ASSISTANT = "assistant"
TOOL_CALL = "tool_call"
TOOL_RESULT = "tool_result"
TOOL_ERROR = "tool_error"
LLM_ERROR = "llm_error"


def step_sample_index(sample_index: int, step: int) -> int:
    """The sample index of LLM call `step` of rollout sample `sample_index` (injective for step < STEP_STRIDE)."""
    if not 0 <= step < STEP_STRIDE:
        raise ValueError(f"step must be in [0, {STEP_STRIDE}), got {step}")
    return sample_index * STEP_STRIDE + step


@dataclass(frozen=True)
class TraceStep:
    step: int  # position in the trace (unique per rollout)
    kind: str  # assistant | tool_call | tool_result | tool_error | llm_error
    content: str


@dataclass(frozen=True)
class AgentResult:
    answer: str | None
    trace: tuple[TraceStep, ...]
    stop_reason: StopReason
    usage: Usage
    cost_usd: float
    latency_s: float
    error: str | None
    n_steps: int  # LLM calls made
    infra: bool  # the rollout failed for infrastructure reasons: no evidence about the harness
    reasoning: str | None = None  # the last assistant message
    evidence: tuple[dict[str, Any], ...] = field(default_factory=tuple)  # tool calls and their results
    parse_mode: str | None = None  # the extractor's rule for the final reply (contracts/answers.ANSWER_MODES); None: no reply
    logprobs: tuple[TokenLogprob, ...] | None = None  # the final reply's token log-probabilities (when the server sent them)


class AgentLoop:
    """Runs the solver; holds only configuration, so one instance serves concurrent rollouts."""

    def __init__(self, llm: LLMProvider, *, max_steps: int = 4, params: Mapping[str, Any] | None = None, role: Role = Role.SOLVER,
                 answer_parsing: str = "lenient"):
        if not 1 <= max_steps < STEP_STRIDE:
            raise ValueError(f"max_steps must be in [1, {STEP_STRIDE}), got {max_steps}")
        extract_answer("", (), answer_parsing)  # a bad mode fails here, not in the first rollout
        self.answer_parsing = answer_parsing
        self.llm = llm
        self.max_steps = max_steps
        self.params = dict(params or {})
        self._params_key = tuple(sorted(self.params.items()))  # LLMRequest.params form, built once
        self.role = Role(role)
        self._system_cache: dict[tuple[str, str], ChatMessage] = {}

    def system_message(self, tree: Mapping[str, str], task_type: str) -> ChatMessage:
        """The rendered system message (memoised per immutable tree fingerprint and task type)."""
        if not isinstance(tree, HarnessTree):
            return ChatMessage("system", render_system_message(tree, task_type))
        key = (tree.fingerprint, task_type)
        cached = self._system_cache.get(key)
        if cached is None:
            if len(self._system_cache) >= _SYSTEM_CACHE_MAX:
                self._system_cache.clear()
            cached = self._system_cache[key] = ChatMessage("system", render_system_message(tree, task_type))
        return cached

    async def run(
        self,
        tree: Mapping[str, str],
        question: Question,
        *,
        tool_dispatch: ToolDispatch | None = None,
        sample_index: int = 0,
    ) -> AgentResult:
        started = time.perf_counter()
        # same messages as prompts.solver_messages, with the system part memoised
        messages = [self.system_message(tree, question.task_type), ChatMessage("user", render_question(question.question, question.choices))]
        trace: list[TraceStep] = []
        evidence: list[dict[str, Any]] = []
        prompt_tokens = completion_tokens = 0
        cost = 0.0
        reasoning: str | None = None
        final_logprobs: tuple[TokenLogprob, ...] | None = None  # of the last reply (read by finish)

        def note(kind: str, content: str) -> None:
            trace.append(TraceStep(len(trace), kind, content))

        def finish(stop_reason: StopReason, n_steps: int, *, answer: str | None = None, error: str | None = None,
                   parse_mode: str | None = None) -> AgentResult:
            return AgentResult(
                answer=answer,
                trace=tuple(trace),
                stop_reason=stop_reason,
                usage=Usage(prompt_tokens, completion_tokens),
                cost_usd=cost,
                latency_s=time.perf_counter() - started,
                error=error,
                n_steps=n_steps,
                infra=stop_reason == "error",
                reasoning=reasoning,
                evidence=tuple(evidence),
                parse_mode=parse_mode,
                logprobs=final_logprobs,
            )

        for step in range(self.max_steps):
            request = LLMRequest(self.role, tuple(messages), self._params_key, step_sample_index(sample_index, step))
            try:
                response = await self.llm.complete(request)
            except LLMError as exc:
                note(LLM_ERROR, str(exc))
                return finish("error", step + 1, error=str(exc))
            except StageStopError:  # our cache or disk failed, or the endpoint is unusable: the stage stops
                raise
            except Exception as exc:  # a provider bug must not kill the batch; it is recorded as infra
                logger.exception("unexpected error from provider %s on qid %s", getattr(self.llm, "name", "?"), question.qid)
                note(LLM_ERROR, f"unexpected {type(exc).__name__}: {exc}")
                return finish("error", step + 1, error=f"[unexpected] {type(exc).__name__}: {exc}")
            prompt_tokens += response.usage.prompt_tokens
            completion_tokens += response.usage.completion_tokens
            cost += response.cost_usd
            text = response.text
            reasoning = text
            final_logprobs = response.logprobs
            note(ASSISTANT, text)
            messages.append(ChatMessage("assistant", text))

            strict = extract_answer(text, question.choices, STRICT)
            if strict.mode != NONE:  # an ANSWER line ends the rollout, even next to a tool call
                return finish("answer" if strict.answered else "no_answer", step + 1, answer=strict.answer, parse_mode=strict.mode)
            try:
                call = parse_tool_call(text)
            except ToolCallFormatError as exc:
                result_text, name = f"ERROR: {exc}", "invalid"
                note(TOOL_ERROR, str(exc))
                evidence.append({"tool": None, "error": str(exc)})
            else:
                if call is None:  # neither an ANSWER line nor a tool call: the fallback rules may read it
                    read = extract_answer(text, question.choices, self.answer_parsing)
                    return finish("answer" if read.answered else "no_answer", step + 1, answer=read.answer, parse_mode=read.mode)
                name = call.name
                note(TOOL_CALL, json.dumps({"name": call.name, "arguments": call.arguments}, sort_keys=True, default=str))
                result_text = await self._dispatch(tool_dispatch, call.name, call.arguments, note, evidence)
            messages.append(ChatMessage("user", render_tool_result(name, result_text)))
        return finish("max_steps", self.max_steps, parse_mode=NONE)

    async def _dispatch(self, tool_dispatch: ToolDispatch | None, name: str, arguments: dict[str, Any], note, evidence: list) -> str:
        """Run one tool call; any failure becomes an ERROR result (recorded, never raised)."""
        try:
            if tool_dispatch is None:
                raise UnknownToolError(f"unknown tool {name!r}: no tools are available for this question")
            result = tool_dispatch(name, arguments)
            if inspect.isawaitable(result):
                result = await result
            if not isinstance(result, str):
                result = json.dumps(result, sort_keys=True, default=str)
        except Exception as exc:  # tool failures are data for the model, not crashes
            message = f"{type(exc).__name__}: {exc}"
            note(TOOL_ERROR, message)
            evidence.append({"tool": name, "arguments": arguments, "error": message})
            return f"ERROR: {message}"
        note(TOOL_RESULT, result)
        evidence.append({"tool": name, "arguments": arguments, "result": result})
        return result
