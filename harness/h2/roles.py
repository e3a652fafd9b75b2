"""The Harness² roles: Editor, Selector, Reflector, Judge.

Each role renders its prompt (harness/h2/prompts.py), gets a reply text from
a `Responder` and parses it in its contract. A responder is either an
`LLMProvider` (`ProviderResponder`: the real or simulated model, one call per
session, sample index derived from the idempotency key so that re-runs hit
the response cache and distinct sessions are distinct samples) or a plain
function (`FunctionResponder`: deterministic roles for demos and tests).
Either way the reply goes through the same parser, so a deterministic role
cannot bypass the output contract.

Editor failures are results, not exceptions: a format error gets one retry
with the error as feedback (key suffix ``.fmt2``); a second format error or a
provider failure returns ``output=None`` with the reason, and the caller
records a fallback.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from pathlib import Path
from typing import Awaitable, Callable, Protocol

from harness.contracts.harness2 import (
    EditorFormatError,
    EditorOutput,
    parse_choice,
    parse_editor_output,
    parse_experience_block,
    parse_grade,
)
from harness.evolution.ask import AskReply, ask_parse_retry
from harness.h2.context import PoolEntry, render_context
from harness.h2.library import Experience
from harness.h2.prompts import (
    editor_messages,
    judge_messages,
    reflector_messages,
    selector_messages,
)
from harness.h2.surfaces import Surface
from harness.identity import label_sample_index
from harness.llm.protocol import ChatMessage, LLMError, LLMProvider, LLMRequest, Role
from harness.tree import HarnessTree


@dataclass(frozen=True)
class Reply:
    text: str
    usd: float = 0.0
    model: str = ""


@dataclass(frozen=True)
class Call:
    """One session booked in the ledger."""

    key: str
    role: str
    usd: float
    counted: bool  # counts against max_sessions


class Responder(Protocol):
    async def __call__(self, role: Role, messages: list[ChatMessage], key: str) -> Reply: ...


@dataclass
class ProviderResponder:
    provider: LLMProvider
    temperature: float | None = None
    max_tokens: int | None = None

    async def __call__(self, role: Role, messages: list[ChatMessage], key: str) -> Reply:
        params = {k: v for k, v in (("temperature", self.temperature), ("max_tokens", self.max_tokens)) if v is not None}
        resp = await self.provider.complete(LLMRequest.make(role, messages, sample_index=label_sample_index(key), **params))
        return Reply(resp.text, resp.cost_usd, resp.model)


@dataclass
class FunctionResponder:
    """Deterministic responder: `fn(role, messages, key) -> str` (or an awaitable of str)."""

    fn: Callable[[Role, list[ChatMessage], str], str | Awaitable[str]]
    usd_per_call: float = 0.0

    async def __call__(self, role: Role, messages: list[ChatMessage], key: str) -> Reply:
        out = self.fn(role, messages, key)
        if inspect.isawaitable(out):
            out = await out
        return Reply(str(out), self.usd_per_call, "function")


# ---------------------------------------------------------------- editor


@dataclass(frozen=True)
class EditRequest:
    stage: str  # inv | dom | compose
    key: str  # idempotency key of this stage attempt
    surface: Surface
    task_id: str
    task_header: str
    prompt: str
    current: HarnessTree
    context_dir: Path
    pool: tuple[PoolEntry, ...] = ()
    validator_feedback: str | None = None
    # asked before the format retry with this edit's unbooked cost: False = the budget gate is closed, no retry
    may_retry: Callable[[float], bool] | None = None


@dataclass(frozen=True)
class EditResult:
    output: EditorOutput | None  # None: no usable reply (see format_errors / error)
    calls: tuple[Call, ...]
    format_errors: tuple[str, ...] = ()
    error: str | None = None
    raw: str = ""

    @property
    def cost_usd(self) -> float:
        return sum(c.usd for c in self.calls)


FORMAT_RETRY_SUFFIX = ".fmt2"  # the key of the one retry after a format error
EditorReply = AskReply  # one editor attempt as an editor backend reports it (cost, text or failure)


async def edit_with_format_retry(req: EditRequest, evidence: str,
                                 ask: Callable[[list[ChatMessage], str], Awaitable[EditorReply]]) -> EditResult:
    """The editor contract shared by every backend, on the project's one ask-parse-retry loop
    (harness/evolution/ask.py `ask_parse_retry`): the retry runs under `key + FORMAT_RETRY_SUFFIX` with the
    format error in the re-rendered prompt; a second format error or a failed call ends it."""
    calls: list[Call] = []

    async def attempt(n: int, _previous: str, feedback: str | None) -> AskReply:
        key = req.key if n == 0 else req.key + FORMAT_RETRY_SUFFIX
        messages = editor_messages(
            stage=req.stage, surface=req.surface, task_id=req.task_id, task_header=req.task_header, prompt=req.prompt,
            current=req.current, evidence=evidence, pool=req.pool, validator_feedback=req.validator_feedback,
            format_feedback=feedback,
        )
        reply = await ask(messages, key)
        if reply.usd is not None:
            calls.append(Call(key, Role.EDITOR.value, reply.usd, counted=n == 0))
        return reply

    out = await ask_parse_retry(attempt, lambda text: parse_editor_output(text, req.surface), EditorFormatError,
                                may_retry=req.may_retry)
    error = out.failure if out.failure is not None or out.value is not None else "editor output broke the contract twice"
    return EditResult(out.value, tuple(calls), out.format_errors, error, out.raw)


@dataclass
class Editor:
    responder: Responder
    evidence_chars: int = 60_000

    async def edit(self, req: EditRequest) -> EditResult:
        async def ask(messages: list[ChatMessage], key: str) -> EditorReply:
            try:
                reply = await self.responder(Role.EDITOR, messages, key)
            except LLMError as exc:
                return EditorReply(None, failure=f"editor call {key} failed: {exc}")
            return EditorReply(reply.usd, reply.text)

        return await edit_with_format_retry(req, render_context(req.context_dir, self.evidence_chars), ask)


# ---------------------------------------------------------------- selector

@dataclass(frozen=True)
class SelectResult:
    choice: str | None  # None: failure or non-answer (see error)
    why: str
    call: Call | None
    error: str | None = None
    raw: str = ""


@dataclass
class Selector:
    responder: Responder

    async def select(self, *, key: str, task_id: str, task_header: str, prompt: str, candidates: dict[str, str]) -> SelectResult:
        messages = selector_messages(task_id=task_id, task_header=task_header, prompt=prompt, candidates=candidates)
        try:
            reply = await self.responder(Role.SELECTOR, messages, key)
        except LLMError as exc:
            return SelectResult(None, "", None, f"selector call failed: {exc}")
        call = Call(key, Role.SELECTOR.value, reply.usd, counted=False)
        choice, why, err = parse_choice(reply.text, list(candidates))
        return SelectResult(choice, why, call, err, reply.text)


# ---------------------------------------------------------------- reflector

@dataclass(frozen=True)
class ReflectResult:
    experience: Experience | None
    call: Call | None
    dropped: str | None = None  # why no experience was kept
    raw: str = ""


def parse_experience(text: str) -> tuple[Experience | None, str | None]:
    data, error = parse_experience_block(text)
    if data is None:
        return None, error
    exp = Experience.from_mapping(data)
    if exp is None:
        return None, "cue, lesson or evidence is empty"
    return exp, None


@dataclass
class Reflector:
    responder: Responder
    evidence_chars: int = 30_000

    async def reflect(self, *, key: str, task_id: str, task_header: str, prompt: str, base: HarnessTree, adopted: HarnessTree, context_dir: Path, selection_note: str) -> ReflectResult:
        messages = reflector_messages(
            task_id=task_id, task_header=task_header, prompt=prompt, base=base, adopted=adopted,
            evidence=render_context(context_dir, self.evidence_chars), selection_note=selection_note,
        )
        try:
            reply = await self.responder(Role.REFLECTOR, messages, key)
        except LLMError as exc:
            return ReflectResult(None, None, f"reflector call failed: {exc}")
        exp, why = parse_experience(reply.text)
        return ReflectResult(exp, Call(key, Role.REFLECTOR.value, reply.usd, counted=False), why, reply.text)


# ---------------------------------------------------------------- judge

@dataclass(frozen=True)
class GradeResult:
    grade: float | None  # None = ungraded (never zero)
    why: str
    call: Call | None
    error: str | None = None


@dataclass
class Judge:
    responder: Responder

    async def grade(self, *, key: str, task_id: str, task_header: str, prompt: str, deliverable: str) -> GradeResult:
        messages = judge_messages(task_id=task_id, task_header=task_header, prompt=prompt, deliverable=deliverable)
        try:
            reply = await self.responder(Role.JUDGE, messages, key)
        except LLMError as exc:
            return GradeResult(None, "", None, f"judge call failed: {exc}")
        call = Call(key, Role.JUDGE.value, reply.usd, counted=False)
        grade, why, error = parse_grade(reply.text)
        return GradeResult(grade, why, call, error)


@dataclass
class Roles:
    editor: Editor
    selector: Selector | None = None
    reflector: Reflector | None = None
    judge: Judge | None = None

    @classmethod
    def from_provider(cls, provider: LLMProvider, **kw) -> Roles:
        r = ProviderResponder(provider, **kw)
        return cls(Editor(r), Selector(r), Reflector(r), Judge(r))
