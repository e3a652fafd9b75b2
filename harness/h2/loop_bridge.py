"""Harness² inside the training loop: one skill file of one step as an h2 task.

`SkillStepTask` is a `TaskAdapter` whose tree is the solver's view (native
surface) and whose only editable file is the skill file of one task-type
group (`target`): any proposal that adds, deletes or changes another file
is rejected by the validator's adapter check (one revision, then the stage
falls back to the current tree — recorded in the round's summary).

Executing the task = the loop's own solver (`run_inference`, the
benchmark's tools and scorer, the configured solver params) on the probe
questions, logged as run `{run_id_prefix}_{stage label}` (kind `h2_probe`)
into the evolve stage's run-log fragment, so probe rollouts and USD count
like every other rollout of the step. Requests go out under `Role.PROBE`
(`llm.models.probe`, else `llm.model`) through the shared response cache,
with sample indices in `[PROBE_INDEX_BASE, 2 * PROBE_INDEX_BASE)`, a range
no step, gate, slow-update or held-out rollout uses (docs/loop.md "Sample
indices"), so a probe never reuses a gate or step sample.

The deliverable is `<qid>: <answer>` per question; correctness is written
to the run log (the scorer runs inside `run_inference`) but never reaches
the rollout the editors and the selector see.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Optional, Sequence

from harness.bench.protocol import Scorer
from harness.contracts.solver import render_question
from harness.h2.adapters import Rollout, rollout_of
from harness.h2.surfaces import NATIVE, Surface
from harness.identity import GATE_MARK, is_gate_run, probe_sample_index
from harness.llm.protocol import LLMProvider, LLMRequest, LLMResponse, Role
from harness.questions import Question
from harness.tree import HarnessTree

PROBE_RUN_KIND = "h2_probe"
LEAK_GLOBS = ("*answer_key*", "*answers.*", "*grader*", "*grades*", "*rubric*", "*expected*", "*solution*")


@dataclass
class AsRole:
    """Provider wrapper that sends solver requests under another role (the probe model, its cache key).

    Every other role passes through unchanged; `model_for` answers for the
    role the request is actually sent with.
    """

    inner: LLMProvider
    role: Role = Role.PROBE

    @property
    def name(self) -> str:
        return str(getattr(self.inner, "name", "provider"))

    def model_for(self, role: Role) -> str:
        return self.inner.model_for(self.role if Role(role) == Role.SOLVER else role)

    async def complete(self, request: LLMRequest) -> LLMResponse:
        if request.role == Role.SOLVER:
            request = dataclasses.replace(request, role=self.role)
        return await self.inner.complete(request)


def restrict_to(base: HarnessTree, target: str) -> Callable[[HarnessTree], list[str]]:
    """Adapter check: only `target` may differ from `base`, and it must stay a non-empty file."""

    def check(tree: HarnessTree) -> list[str]:
        d = base.diff(tree)
        msgs = [f"{p}: only {target} may change in this training step ({how} here)"
                for how, paths in (("added", d.added), ("deleted", d.removed), ("changed", d.changed))
                for p in paths if p != target]
        if not tree.get(target, "").strip():
            msgs.append(f"{target}: the skill file being improved must stay a non-empty file")
        return msgs

    return check


def _safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-") or "x"


@dataclass
class SkillStepTask:
    """One skill file of one training step as a Harness² task (see module docstring)."""

    task_id: str  # the skill key: task type or default-strategy
    task_type: str  # the group's first task type (the editor's `Task type:` header)
    task_types: Sequence[str]  # every task type of the step that reads `target`
    target: str  # solver-view path of the editable skill, e.g. "skills/temporal_reasoning/SKILL.md"
    base: HarnessTree  # the solver's view at the step
    questions: Sequence[Question]  # the probe questions
    llm: LLMProvider  # already behind AsRole(PROBE) and the response cache
    log: Any  # the evolve stage's HarnessLog
    run_id_prefix: str  # e.g. "{run}_e{E}_s{S}_h2_{key}"
    scorer: Scorer  # right/wrong or a soft score (harness/bench/protocol.py)
    tool_dispatch: Optional[Callable[[Question], Any]] = None
    params: Mapping[str, Any] = field(default_factory=dict)
    max_steps: int = 4
    concurrency: int = 8
    rejected_edits: Sequence[str] = ()  # gate rejections of this skill not yet cleared (shown as source material)
    domain: str = "loop"
    surface: Surface = NATIVE
    leak_globs: tuple[str, ...] = LEAK_GLOBS
    run_ids: dict[str, str] = field(default_factory=dict)  # probe label -> run id (what the run log holds)

    def __post_init__(self) -> None:
        if not self.questions:
            raise ValueError(f"h2 loop task {self.task_id!r}: no probe questions")
        bad = [q.qid for q in self.questions if q.task_type not in self.task_types]
        if bad:
            raise ValueError(f"h2 loop task {self.task_id!r}: probe questions {bad} do not read {self.target}")
        if self.target not in self.base:
            raise ValueError(f"h2 loop task {self.task_id!r}: {self.target} is not in the step's harness")
        if is_gate_run(self.run_id_prefix):
            raise ValueError(f"h2 probe run ids must not contain {GATE_MARK!r} (the ladder's gate marker): {self.run_id_prefix!r}")

    @property
    def prompt(self) -> str:
        types = ", ".join(self.task_types)
        return (f"Improve how the agent answers questions of task type(s) {types}. Only {self.target} may change; every "
                f"other harness file is fixed. The agent answers each question in source/questions.md; its deliverable is "
                f"one line per question: '<qid>: <answer>'.")

    def task_header(self) -> str:
        return f"Task type: {self.task_type}"

    def base_harness(self) -> HarnessTree:
        return self.base

    def source_files(self) -> Mapping[str, str]:
        blocks = [f"## {q.qid}\n{render_question(q.question, q.choices)}" for q in self.questions]
        files = {"questions.md": "\n\n".join(blocks) + "\n"}
        if self.rejected_edits:
            files["rejected_changes.md"] = ("# Changes to this skill that the training gate rejected earlier\n\n"
                                            + "\n".join(self.rejected_edits) + "\n")
        return files

    def validate_tree(self, tree: HarnessTree) -> Sequence[str]:
        return restrict_to(self.base, self.target)(tree)

    def run_id_for(self, label: str) -> str:
        if label not in self.run_ids:
            tail = _safe(label.rsplit(".", 1)[-1])
            run_id = f"{self.run_id_prefix}_{tail}"
            if run_id in self.run_ids.values():  # two labels with the same tail: keep them apart
                run_id += "_" + hashlib.sha1(label.encode("utf-8")).hexdigest()[:8]
            self.run_ids[label] = run_id
        return self.run_ids[label]

    async def execute(self, label: str, harness: HarnessTree) -> Rollout:
        from harness.inference import run_inference

        run_id = self.run_id_for(label)
        idx = probe_sample_index(label)
        try:
            self.log.record_run(run_id, PROBE_RUN_KIND, meta={"label": label, "harness_fingerprint": harness.fingerprint})
            result = await run_inference(
                list(self.questions), harness_tree_for=harness, llm=self.llm, tool_dispatch_fn=self.tool_dispatch,
                scorer=self.scorer, log=self.log, run_id=run_id, concurrency=max(1, self.concurrency), max_steps=self.max_steps,
                sample_indices=idx, params=dict(self.params), run_kind=PROBE_RUN_KIND, keep_traces=True,
            )
        except Exception as exc:  # execute never raises: a failed probe is a dead rollout
            return Rollout(label, harness.fingerprint, False, "", error=f"{type(exc).__name__}: {exc}", meta={"run_id": run_id})
        answers: dict[str, Optional[str]] = {}
        steps: dict[str, list[tuple[str, str]]] = {}
        errors: list[str] = []
        for q in self.questions:
            rec = result.records[(q.qid, idx)]
            answers[q.qid] = rec.predicted
            steps[q.qid] = [(t.kind, t.content) for t in rec.trace]
            if rec.infra:
                errors.append(f"{q.qid}: {rec.error or 'infrastructure failure'}")
        return rollout_of(label, harness, self.questions, answers, steps, cost_usd=result.usd, errors=errors,
                          meta={"run_id": run_id, "sample_index": idx})


