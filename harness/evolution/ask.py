"""One LLM call whose reply must parse, with one retry that shows the format error."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from harness.contracts.evolution import ReplyFormatError
from harness.llm.protocol import ChatMessage, LLMProvider, LLMRequest, Role

from .prompts import format_retry_message

T = TypeVar("T")


async def ask_parsed(
    llm: LLMProvider, role: Role, messages: list[ChatMessage], parse: Callable[[str], T], fmt: str, sample_index: int
) -> tuple[T | None, str, float]:
    """(parsed reply or None, "first: ...; retry: ..." error, usd of both calls)."""
    response = await llm.complete(LLMRequest.make(role, messages, sample_index=sample_index))
    usd = response.cost_usd
    try:
        return parse(response.text), "", usd
    except ReplyFormatError as first:
        retry = [*messages, ChatMessage("assistant", response.text), format_retry_message(str(first), fmt)]
        response = await llm.complete(LLMRequest.make(role, retry, sample_index=sample_index))
        usd += response.cost_usd
        try:
            return parse(response.text), "", usd
        except ReplyFormatError as second:
            return None, f"first: {first}; retry: {second}", usd
