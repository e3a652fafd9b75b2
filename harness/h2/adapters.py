"""Task adapters: what Harness² needs from a task, and one over question sets.

A `TaskAdapter` gives the task (id, domain, prompt without criteria or
expected answers), its base harness, its source files and leak globs, the
surface its harness lives on, and `execute(label, harness) -> Rollout`,
which runs the agent on the task under that harness. `execute` never
raises: a failed run is a `Rollout` with ``ok=False`` (a "dead" probe).

`QuestionTaskAdapter` is a task made of a task type and a handful of its
questions (the simulated world's tasks, or any question set): executing it
runs the training agent loop (harness/agent/loop.AgentLoop) through an
`LLMProvider` on every question, and the deliverable is the list of answers. It never sees the answers' correctness: scoring a tree
is the caller's business (the sim demo uses the oracle, outside the method).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import (
    Any,
    Callable,
    Mapping,
    Optional,
    Protocol,
    Sequence,
    runtime_checkable,
)

from harness.agent.loop import AgentLoop, AgentResult
from harness.bench.protocol import UnknownToolError
from harness.contracts.solver import render_question
from harness.h2.surfaces import NATIVE, Surface
from harness.identity import label_sample_index
from harness.llm.protocol import LLMProvider, Role
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
    # read-only: the runner only reads them, so a frozen dataclass or a property qualifies
    @property
    def task_id(self) -> str: ...

    @property
    def domain(self) -> str: ...

    @property
    def prompt(self) -> str: ...  # the task's instructions; criteria and expected answers removed

    @property
    def surface(self) -> Surface: ...

    @property
    def leak_globs(self) -> tuple[str, ...]: ...

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

    def _tool_dispatch(self, name: str, arguments: Mapping[str, Any]) -> str:
        fn = self.tools.get(name)
        if fn is None:
            raise UnknownToolError(f"tool {name!r} is not available in this task")
        return fn(dict(arguments))

    async def execute(self, label: str, harness: HarnessTree) -> Rollout:
        """Every question through the training AgentLoop (same messages, tool protocol, step sample indices)."""
        sem = asyncio.Semaphore(max(1, self.concurrency))
        idx = label_sample_index(label)
        agent = AgentLoop(self.provider, max_steps=self.max_turns + 1, params={"max_tokens": self.max_tokens}, role=self.role)
        dispatch = self._tool_dispatch if self.tools else None

        async def one(q: Question) -> AgentResult:
            async with sem:
                return await agent.run(harness, q, tool_dispatch=dispatch, sample_index=idx)

        try:
            results = await asyncio.gather(*(one(q) for q in self.questions))
        except Exception as exc:  # execute never raises: an unexpected failure is a dead rollout
            return Rollout(label, harness.fingerprint, False, "", error=f"{type(exc).__name__}: {exc}")
        answers = {q.qid: r.answer for q, r in zip(self.questions, results)}
        steps = {q.qid: [(t.kind, t.content) for t in r.trace] for q, r in zip(self.questions, results)}
        errors = [f"{q.qid}: {r.error or 'infrastructure failure'}" for q, r in zip(self.questions, results) if r.infra]
        return rollout_of(label, harness, self.questions, answers, steps, cost_usd=sum(r.cost_usd for r in results), errors=errors,
                          meta={"sample_index": idx})


def rollout_of(label: str, harness: HarnessTree, questions: Sequence[Question], answers: Mapping[str, Optional[str]],
               steps: Mapping[str, Sequence[tuple[str, str]]], *, cost_usd: float = 0.0, errors: Sequence[str] = (),
               meta: Mapping[str, Any] | None = None) -> Rollout:
    """An h2 `Rollout` from per-question answers and agent traces (no correctness: editors never see a score)."""
    observations: list[Observation] = []
    lines: list[str] = []
    for q in questions:
        observations.append(Observation(q.qid, "input", render_question(q.question, q.choices)))
        for kind, content in steps.get(q.qid, ()):
            observations.append(Observation(q.qid, kind, content))
        ans = answers.get(q.qid)
        lines.append(f"{q.qid}: {ans if ans is not None else '(no answer)'}")
    return Rollout(label=label, harness_fingerprint=harness.fingerprint, ok=not errors, deliverable="\n".join(lines) + "\n",
                   observations=tuple(observations), cost_usd=float(cost_usd), error="; ".join(errors) or None,
                   meta={**(meta or {}), "answers": dict(answers)})
