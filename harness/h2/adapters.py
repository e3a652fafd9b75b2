"""Task adapters: what Harness² needs from a task, and one over question sets.

A `TaskAdapter` gives the task (id, domain, prompt without criteria or
expected answers), its base harness, its source files and leak globs, the
surface its harness lives on, and `execute(label, harness) -> Rollout`,
which runs the agent on the task under that harness. `execute` never
raises: a failed run is a `Rollout` with ``ok=False`` (a "dead" probe).

`QuestionTaskAdapter` is a task made of a task type and a handful of its
questions (the simulated world's tasks, or any question set): executing it
runs the solver through an `LLMProvider` on every question with the
harness's system message (harness/contracts/solver.py) and the deliverable is
the list of answers. It never sees the answers' correctness: scoring a tree
is the caller's business (the sim demo uses the oracle, outside the method).
"""

from __future__ import annotations

import asyncio
import hashlib
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Protocol, Sequence, runtime_checkable

from harness.agent.prompts import solver_messages
from harness.contracts.solver import parse_answer, render_question
from harness.contracts.tool_calls import (
    ToolCallFormatError,
    parse_tool_call,
    render_tool_result,
)
from harness.h2.surfaces import NATIVE, Surface
from harness.llm.protocol import ChatMessage, LLMError, LLMProvider, LLMRequest, Role
from harness.questions import Question
from harness.tree import HarnessTree


@dataclass(frozen=True)
class Observation:
    """One step of a rollout's trace (kept in full; truncated only when rendered)."""

    step: str
    kind: str  # "input" | "output" | "error" | free text
    content: str

    def to_dict(self) -> dict[str, str]:
        return {"step": self.step, "kind": self.kind, "content": self.content}


@dataclass(frozen=True)
class Rollout:
    label: str
    harness_fingerprint: str
    ok: bool
    deliverable: str
    observations: tuple[Observation, ...] = ()
    deliverable_files: Mapping[str, str] = field(default_factory=dict)
    cost_usd: float = 0.0
    error: str | None = None
    meta: Mapping[str, Any] = field(default_factory=dict)

    @property
    def dead(self) -> bool:
        return not self.ok

    def to_dict(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "harness_fingerprint": self.harness_fingerprint,
            "ok": self.ok,
            "deliverable": self.deliverable,
            "observations": [o.to_dict() for o in self.observations],
            "deliverable_files": dict(self.deliverable_files),
            "cost_usd": self.cost_usd,
            "error": self.error,
            "meta": dict(self.meta),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Rollout:
        return cls(
            label=d["label"],
            harness_fingerprint=d["harness_fingerprint"],
            ok=bool(d["ok"]),
            deliverable=d.get("deliverable", ""),
            observations=tuple(Observation(**o) for o in d.get("observations", [])),
            deliverable_files=dict(d.get("deliverable_files", {})),
            cost_usd=float(d.get("cost_usd", 0.0)),
            error=d.get("error"),
            meta=dict(d.get("meta", {})),
        )


@runtime_checkable
class TaskAdapter(Protocol):
    task_id: str
    domain: str
    prompt: str  # the task's instructions; criteria and expected answers removed
    surface: Surface
    leak_globs: tuple[str, ...]

    def task_header(self) -> str:
        """Lines for the top of `## Task` (e.g. 'Task type: <task_type>')."""
        ...

    def base_harness(self) -> HarnessTree: ...

    def source_files(self) -> Mapping[str, str]:
        """Task source material (path -> text); leak globs are removed by the context builder."""
        ...

    async def execute(self, label: str, harness: HarnessTree) -> Rollout:
        """Run the agent on the task under `harness`; never raises."""
        ...

    def validate_tree(self, tree: HarnessTree) -> Sequence[str]:
        """Adapter-specific validator messages (empty = fine)."""
        ...


def label_sample_index(label: str) -> int:
    """A stable sample index per execution label: a new label is a fresh sample, a re-run hits the cache."""
    return int(hashlib.sha1(label.encode("utf-8")).hexdigest()[:8], 16)


@dataclass
class QuestionTaskAdapter:
    """A task = one task type + a handful of its questions, solved through an LLMProvider."""

    task_id: str
    task_type: str
    questions: Sequence[Question]
    base: HarnessTree
    provider: LLMProvider
    domain: str = ""
    surface: Surface = NATIVE
    role: Role = Role.SOLVER
    concurrency: int = 8
    leak_globs: tuple[str, ...] = ("*answer_key*", "*answers.*", "*grader*", "*grades*", "*rubric*", "*expected*", "*solution*")
    max_tokens: int = 512
    max_turns: int = 3  # tool calls allowed before the answer is due
    tools: Mapping[str, Callable[[dict], str]] = field(default_factory=dict)  # tool name -> fn(arguments) -> result text

    def __post_init__(self) -> None:
        if not self.questions:
            raise ValueError(f"task {self.task_id!r}: a question task needs at least one question")
        bad = [q.qid for q in self.questions if q.task_type != self.task_type]
        if bad:
            raise ValueError(f"task {self.task_id!r}: questions {bad} are not of task type {self.task_type!r}")
        self.domain = self.domain or self.task_type

    @property
    def prompt(self) -> str:
        return (
            f"Answer {len(self.questions)} questions of task type {self.task_type}. "
            "The deliverable is one line per question: '<qid>: <answer>'. "
            "The questions are in source/questions.md."
        )

    def task_header(self) -> str:
        return f"Task type: {self.task_type}"

    def base_harness(self) -> HarnessTree:
        return self.base

    @property
    def qids(self) -> list[str]:
        return [q.qid for q in self.questions]

    def source_files(self) -> Mapping[str, str]:
        blocks = [f"## {q.qid}\n{render_question(q.question, q.choices)}" for q in self.questions]
        return {"questions.md": "\n\n".join(blocks) + "\n"}

    def validate_tree(self, tree: HarnessTree) -> Sequence[str]:
        return []

    async def _one(self, harness: HarnessTree, q: Question, sample_index: int, sem: asyncio.Semaphore):
        """Solve one question: a short tool-call loop, then the final ANSWER line. Returns (q, trace, error, usd)."""
        async with sem:
            messages = list(solver_messages(harness, self.task_type, q.question, q.choices))
            trace: list[str] = []
            cost = 0.0
            for _turn in range(self.max_turns + 1):
                req = LLMRequest.make(self.role, messages, sample_index=sample_index, max_tokens=self.max_tokens)
                try:
                    resp = await self.provider.complete(req)
                except LLMError as exc:
                    return q, "\n".join(trace), str(exc), cost
                cost += resp.cost_usd
                trace.append(resp.text)
                try:
                    call = parse_tool_call(resp.text)
                except ToolCallFormatError as exc:
                    call = None
                    trace.append(f"(malformed tool call: {exc})")
                if call is None or parse_answer(resp.text) is not None:
                    return q, "\n".join(trace), None, cost
                fn = self.tools.get(call.name)
                result = fn(call.arguments) if fn else f"tool {call.name!r} is not available in this task"
                trace.append(render_tool_result(call.name, result))
                messages += [ChatMessage("assistant", resp.text), ChatMessage("user", render_tool_result(call.name, result))]
            return q, "\n".join(trace), None, cost

    async def execute(self, label: str, harness: HarnessTree) -> Rollout:
        sem = asyncio.Semaphore(max(1, self.concurrency))
        idx = label_sample_index(label)
        try:
            results = await asyncio.gather(*(self._one(harness, q, idx, sem) for q in self.questions))
        except Exception as exc:  # execute never raises: an unexpected failure is a dead rollout
            return Rollout(label, harness.fingerprint, False, "", error=f"{type(exc).__name__}: {exc}")
        observations: list[Observation] = []
        lines: list[str] = []
        errors: list[str] = []
        answers: dict[str, str | None] = {}
        cost = 0.0
        for q, text, err, c in results:
            cost += c
            observations.append(Observation(q.qid, "input", render_question(q.question, q.choices)))
            if err is not None:
                observations.append(Observation(q.qid, "error", err))
                errors.append(f"{q.qid}: {err}")
                answers[q.qid] = None
                lines.append(f"{q.qid}: (no answer)")
                continue
            observations.append(Observation(q.qid, "output", text or ""))
            ans = parse_answer(text or "")
            answers[q.qid] = ans
            lines.append(f"{q.qid}: {ans if ans is not None else '(no answer)'}")
        ok = not errors
        return Rollout(
            label=label,
            harness_fingerprint=harness.fingerprint,
            ok=ok,
            deliverable="\n".join(lines) + "\n",
            observations=tuple(observations),
            cost_usd=cost,
            error="; ".join(errors) if errors else None,
            meta={"answers": answers, "sample_index": idx},
        )
