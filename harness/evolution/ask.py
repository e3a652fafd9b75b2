"""One LLM call whose reply must parse, with one retry that shows the format error; each provider's reply format.

`ask_parse_retry` is the one ask-parse-retry loop of the project: the
diagnoser and editor here (`ask_parsed`) and every Harness² editor backend
(harness/h2/roles.py `edit_with_format_retry`) run their replies through it.

The editor and diagnoser ask for structured output (harness/contracts/structured.py)
where the provider enforces a JSON schema, and use the text formats otherwise.
`reply_format_of` decides that once per (provider, role) with a probe: one
short request per structured dialect whose schema admits a single value no
model writes unasked; the first dialect answered with exactly that value is
the provider's, and a refusal (`bad_request` / `bad_response` / `server`) or
any other reply means "text"; a timeout or a refused connection propagates. The choice is logged and recorded on every
EvolutionRecord / DiagnosisResult (`reply_format`).
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from harness.contracts.evolution import ReplyFormatError
from harness.contracts.structured import (
    PROBE_PROMPT,
    PROBE_SCHEMA,
    STRUCTURED_FORMATS,
    TEXT,
    is_probe_reply,
    response_format,
)
from harness.llm.protocol import ChatMessage, LLMError, LLMProvider, LLMRequest, Role

from .prompts import format_retry_message

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)  # a contract only produces its T (frozen), so ReplyContract[X] is a ReplyContract[X | None]
log = logging.getLogger("harness.evolution")

PROBE_MAX_TOKENS = 64  # a constrained reply may take a token per character
# the provider does not take the request: not structured (llama-cpp-python answers an unknown
# response_format type with HTTP 500, so a persistent "server" error counts as a refusal here)
_REFUSALS = frozenset({"bad_request", "bad_response", "server"})
_FORMATS: "weakref.WeakKeyDictionary[Any, dict[str, str]]" = weakref.WeakKeyDictionary()


@dataclass(frozen=True)
class ReplyContract(Generic[T_co]):
    """A role's reply in both forms: the text format (`fmt`, `parse`) and its JSON form under `schema`."""

    fmt: str  # the FORMAT name of the text contract
    parse: Callable[[str], T_co]
    schema_name: str
    schema: dict[str, Any]
    parse_json: Callable[[str], T_co]
    json_instruction: str  # the JSON form's description of the reply (structured replies)
    text_contract: str = ""  # the text contract the meta-prompt's system message ends with (harness/evolution/prompts.py)


async def probe_reply_format(llm: LLMProvider, role: Role) -> str:
    """The first structured dialect `llm` enforces for `role`'s model, else "text" (one request per dialect tried).
    A metered provider files a probe as overhead, not as the run's work (`MeteredProvider.complete_overhead`)."""
    complete = getattr(llm, "complete_overhead", None) or llm.complete
    for dialect in STRUCTURED_FORMATS:
        request = LLMRequest.make(role, [ChatMessage("user", PROBE_PROMPT)], temperature=0.0, max_tokens=PROBE_MAX_TOKENS,
                                  response_format=response_format(dialect, "probe", PROBE_SCHEMA))
        try:
            response = await complete(request)
        except LLMError as exc:
            if exc.kind in _REFUSALS:
                log.info("provider %s (%s model %s) refuses %s structured output: %s", getattr(llm, "name", "?"), role.value,
                         llm.model_for(role), dialect, exc)
                continue
            raise
        if is_probe_reply(response.text):
            return dialect
    return TEXT


async def reply_format_of(llm: LLMProvider, role: Role) -> str:
    """`role`'s reply format on `llm`, probed on first use and then remembered for this provider object."""
    try:
        known = _FORMATS.setdefault(llm, {})
    except TypeError:  # a provider that cannot be weakly referenced: probe, remember nothing
        known = {}
    if role.value not in known and getattr(llm, "structured_output", None) is False:
        known[role.value] = TEXT  # the provider declares text formats only: no probe request
        log.info("%s replies from provider %s: text format (declared, not probed)", role.value, getattr(llm, "name", "?"))
    if role.value not in known:
        known[role.value] = await probe_reply_format(llm, role)
        log.info("%s replies from provider %s (model %s): %s format (probed once)", role.value, getattr(llm, "name", "?"),
                 llm.model_for(role), known[role.value])
    return known[role.value]


def structured_messages(messages: list[ChatMessage], contract: ReplyContract[Any]) -> list[ChatMessage]:
    """`messages` asking for `contract`'s JSON form: the system message's text contract replaced by the JSON
    instruction (a model shown both formats, with the text format's example values, copies those values back);
    without that contract in a system message, the instruction is appended to the last user message."""
    if contract.text_contract:
        for i, message in enumerate(messages):
            if message.role == "system" and contract.text_contract in message.content:
                content = message.content.replace(contract.text_contract, contract.json_instruction)
                return [*messages[:i], ChatMessage("system", content), *messages[i + 1:]]
    last = messages[-1]
    if last.role != "user":
        return [*messages, ChatMessage("user", contract.json_instruction)]
    return [*messages[:-1], ChatMessage("user", f"{last.content}\n\n{contract.json_instruction}")]


@dataclass(frozen=True)
class AskReply:
    """One attempt's reply as the caller's `ask` reports it: its cost (None: no call was made), its text, or why the
    call failed (the loop then ends with that failure, no retry)."""

    usd: float | None
    text: str = ""
    failure: str | None = None


@dataclass(frozen=True)
class ParseOutcome(Generic[T_co]):
    """What `ask_parse_retry` got: the parsed value, or None with the format errors and/or the failure that ended it."""

    value: T_co | None
    format_errors: tuple[str, ...]  # the parser's message per unparsed reply, first then retry
    usd: float  # the cost of every call made
    failure: str | None = None  # a failed call, or `retry_refused` when `may_retry` said no
    raw: str = ""  # the last reply's text

    def error(self) -> str:
        """"first: ...; retry: ..." (or the failure) when nothing parsed, else ""."""
        if self.value is not None:
            return ""
        parts = [f"{label}: {e}" for label, e in zip(("first", "retry"), self.format_errors)]
        return "; ".join(parts + ([self.failure] if self.failure else []))


RETRY_REFUSED = "budget gate closed before the format retry"  # ParseOutcome.failure when `may_retry` said no


async def ask_parse_retry(
    ask: Callable[[int, str, str | None], Awaitable[AskReply]], parse: Callable[[str], T],
    format_error: type[Exception] | tuple[type[Exception], ...] = ReplyFormatError,
    *, may_retry: Callable[[float], bool] | None = None,
) -> ParseOutcome[T]:
    """Ask, parse; on a `format_error` ask once more with the parser's message; a second format error, a failed call
    or a refused retry ends it with value None (the caller records its fallback).

    `ask(attempt, previous_text, feedback)`: attempt 0 with ("", None), attempt 1 with the first reply and its error.
    `may_retry(usd so far)` is asked before the retry: False ends it with failure `RETRY_REFUSED`.
    """
    errors: list[str] = []
    usd = 0.0
    raw = ""
    for attempt in (0, 1):
        if attempt == 1 and may_retry is not None and not may_retry(usd):
            return ParseOutcome(None, tuple(errors), usd, RETRY_REFUSED, raw)
        reply = await ask(attempt, raw, errors[-1] if errors else None)
        usd += reply.usd or 0.0
        if reply.failure is not None:
            return ParseOutcome(None, tuple(errors), usd, reply.failure, raw)
        raw = reply.text
        try:
            return ParseOutcome(parse(reply.text), tuple(errors), usd, None, raw)
        except format_error as exc:
            errors.append(str(exc))
    return ParseOutcome(None, tuple(errors), usd, None, raw)


async def ask_parsed(
    llm: LLMProvider, role: Role, messages: list[ChatMessage], contract: ReplyContract[T], sample_index: int,
    *, reply_format: str | None = None,
) -> tuple[T | None, str, float, str]:
    """(parsed reply or None, "first: ...; retry: ..." error, usd of both calls, reply format used).

    `reply_format` None: the provider's probed format (`reply_format_of`); "text" or a structured dialect forces one.
    """
    fmt = reply_format if reply_format is not None else await reply_format_of(llm, role)
    params: dict[str, Any] = {}
    parse = contract.parse
    if fmt != TEXT:
        params["response_format"] = response_format(fmt, contract.schema_name, contract.schema)
        messages = structured_messages(messages, contract)
        parse = contract.parse_json
    retry_fmt = contract.fmt if fmt == TEXT else "JSON"

    async def ask(attempt: int, previous: str, feedback: str | None) -> AskReply:
        sent = messages if feedback is None else [*messages, ChatMessage("assistant", previous), format_retry_message(feedback, retry_fmt)]
        response = await llm.complete(LLMRequest.make(role, sent, sample_index=sample_index, **params))
        return AskReply(response.cost_usd, response.text)

    outcome = await ask_parse_retry(ask, parse)
    return outcome.value, outcome.error(), outcome.usd, fmt
