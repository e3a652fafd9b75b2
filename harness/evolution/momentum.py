"""Slow-update momentum: a guidance section inside each skill file (seed 000 §12).

The section is delimited by HTML comments so it can be replaced without
touching the rest of the file:

    ## Momentum
    <!-- momentum:start -->
    - bullet
    <!-- momentum:end -->

`run_momentum` asks the editor (FORMAT: momentum) for new guidance from the
outcome comparison of two versions through the shared `ask_parse_retry`
(harness/evolution/ask.py): a reply that does not parse is retried once with
the parser's message; when the retry does not parse either, the previous
guidance stays (conservative fallback, both errors in `parse_error`).
Provider errors propagate.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from harness.contracts.evolution import FORMAT_MOMENTUM, parse_guidance
from harness.kernel.pair_classes import categorize_pair
from harness.kernel.types import CATEGORY_ORDER, IMPROVED, PERSISTENT_FAIL, REGRESSED, STABLE_SUCCESS
from harness.llm.protocol import ChatMessage, LLMProvider, LLMRequest, Role

from .ask import AskReply, ask_parse_retry
from .prompts import MetaPrompts, format_retry_message, format_trace, momentum_messages

MOMENTUM_HEADING = "## Momentum"
MOMENTUM_START = "<!-- momentum:start -->"
MOMENTUM_END = "<!-- momentum:end -->"


def momentum_inner(skill_text: str) -> str:
    """The guidance between the markers ('' when the file has no momentum section)."""
    start = skill_text.find(MOMENTUM_START)
    end = skill_text.find(MOMENTUM_END)
    if start < 0 or end < start:
        return ""
    return skill_text[start + len(MOMENTUM_START) : end].strip()


def replace_momentum(skill_text: str, guidance: str) -> str:
    """`skill_text` with its momentum section set to `guidance` (appended when missing)."""
    inner = f"{MOMENTUM_START}\n{guidance.strip()}\n{MOMENTUM_END}"
    start = skill_text.find(MOMENTUM_START)
    end = skill_text.find(MOMENTUM_END)
    if start >= 0 and end > start:
        return skill_text[:start] + inner + skill_text[end + len(MOMENTUM_END) :]
    body = skill_text.rstrip("\n")
    return f"{body}\n\n{MOMENTUM_HEADING}\n{inner}\n"


@dataclass(frozen=True)
class ComparisonPair:
    """One question's outcome under the epoch-start version and the current one."""

    qid: str
    task_type: str
    question: str
    before: bool
    after: bool
    trace: str = ""  # the current version's trace (hints of what is still missing)


def format_comparison_pairs(pairs: Sequence[ComparisonPair], max_per_category: int = 6) -> str:
    """Pairs grouped by category, REGRESSED first; an unknown category raises KeyError."""
    groups: dict[str, list[ComparisonPair]] = {c: [] for c in CATEGORY_ORDER}
    for pair in pairs:
        groups[categorize_pair(bool(pair.before), bool(pair.after))].append(pair)
    sections = []
    for category in CATEGORY_ORDER:
        items = groups[category]
        lines = [f"### {category} ({len(items)})"]
        for pair in items[:max_per_category]:
            lines.append(f"- qid {pair.qid}: {pair.question.strip()}")
            if pair.trace and category in (REGRESSED, PERSISTENT_FAIL):
                lines.append(format_trace(pair.trace))
        sections.append("\n".join(lines))
    return "\n\n".join(sections)


@dataclass(frozen=True)
class MomentumOutcome:
    guidance: str
    new_text: str
    parse_error: str = ""
    usd: float = 0.0


async def run_momentum(
    llm: LLMProvider, *, task_type: str, skill_file: str, skill_text: str, pairs: Sequence[ComparisonPair], sample_index: int,
    prompts: MetaPrompts | None = None,
) -> MomentumOutcome:
    """New momentum guidance for one skill file; a reply that does not parse is retried once, and a second one keeps
    the previous guidance."""
    previous = momentum_inner(skill_text)
    comparison = format_comparison_pairs(pairs)  # outside the try: a KeyError is a bug, not a format error
    messages = momentum_messages(task_type=task_type, skill_file=skill_file, skill_text=skill_text, previous_guidance=previous, comparison=comparison,
                                 prompts=prompts)

    async def ask(attempt: int, previous_reply: str, feedback: str | None) -> AskReply:
        sent = messages if feedback is None else [*messages, ChatMessage("assistant", previous_reply),
                                                  format_retry_message(feedback, FORMAT_MOMENTUM)]
        response = await llm.complete(LLMRequest.make(Role.EDITOR, sent, sample_index=sample_index))
        return AskReply(response.cost_usd, response.text)

    outcome = await ask_parse_retry(ask, parse_guidance)
    if outcome.value is None:
        return MomentumOutcome(guidance=previous, new_text=skill_text, parse_error=outcome.error(), usd=outcome.usd)
    return MomentumOutcome(guidance=outcome.value, new_text=replace_momentum(skill_text, outcome.value), usd=outcome.usd)


__all__ = [
    "ComparisonPair",
    "IMPROVED",
    "MOMENTUM_END",
    "MOMENTUM_START",
    "MomentumOutcome",
    "PERSISTENT_FAIL",
    "REGRESSED",
    "STABLE_SUCCESS",
    "categorize_pair",
    "format_comparison_pairs",
    "momentum_inner",
    "replace_momentum",
    "run_momentum",
]
