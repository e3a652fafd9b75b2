"""One LLM call whose reply must parse, with one retry that shows the format error; each provider's reply format.

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
from collections.abc import Callable
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
    """The first structured dialect `llm` enforces for `role`'s model, else "text" (one request per dialect tried)."""
    for dialect in STRUCTURED_FORMATS:
        request = LLMRequest.make(role, [ChatMessage("user", PROBE_PROMPT)], temperature=0.0, max_tokens=PROBE_MAX_TOKENS,
                                  response_format=response_format(dialect, "probe", PROBE_SCHEMA))
        try:
            response = await llm.complete(request)
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
    response = await llm.complete(LLMRequest.make(role, messages, sample_index=sample_index, **params))
    usd = response.cost_usd
    try:
        return parse(response.text), "", usd, fmt
    except ReplyFormatError as first:
        retry = [*messages, ChatMessage("assistant", response.text), format_retry_message(str(first), contract.fmt if fmt == TEXT else "JSON")]
        response = await llm.complete(LLMRequest.make(role, retry, sample_index=sample_index, **params))
        usd += response.cost_usd
        try:
            return parse(response.text), "", usd, fmt
        except ReplyFormatError as second:
            return None, f"first: {first}; retry: {second}", usd, fmt
