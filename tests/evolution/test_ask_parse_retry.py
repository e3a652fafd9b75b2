"""The one ask-parse-retry loop (harness/evolution/ask.py `ask_parse_retry`) and its two users.

A bad reply gets exactly one retry that carries the parser's message; a second bad reply ends with value None and
both errors recorded (the caller's fallback); a failed call or a refused retry ends it without a further call.
The diagnoser (`ask_parsed`) and the Harness² editor (`edit_with_format_retry`) are checked on the same story.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from harness.contracts.evolution import ReplyFormatError, parse_diagnosis
from harness.evolution.ask import RETRY_REFUSED, AskReply, ask_parse_retry
from harness.evolution.diagnose import diagnose_case
from harness.h2.roles import FORMAT_RETRY_SUFFIX, EditRequest, edit_with_format_retry
from harness.h2.surfaces import surface_for
from harness.kernel.types import CaseSample
from harness.llm.protocol import ChatMessage
from harness.tree import HarnessTree

from .scripted import ScriptedLLM

GOOD = "<diagnosis>The skill never checks units.</diagnosis>"


def scripted_ask(replies: list[AskReply], seen: list[tuple[int, str, str | None]]):
    async def ask(attempt: int, previous: str, feedback: str | None) -> AskReply:
        seen.append((attempt, previous, feedback))
        return replies.pop(0)

    return ask


def test_bad_reply_is_retried_with_the_parsers_message_then_parses() -> None:
    seen: list[tuple[int, str, str | None]] = []
    out = asyncio.run(ask_parse_retry(scripted_ask([AskReply(0.01, "no tags"), AskReply(0.02, GOOD)], seen), parse_diagnosis))
    assert out.value == "The skill never checks units."
    assert seen == [(0, "", None), (1, "no tags", "expected one <diagnosis>…</diagnosis> block, found none")]
    assert out.format_errors == ("expected one <diagnosis>…</diagnosis> block, found none",)
    assert abs(out.usd - 0.03) < 1e-12 and out.error() == ""


def test_two_bad_replies_end_in_a_recorded_fallback_after_one_retry() -> None:
    seen: list[tuple[int, str, str | None]] = []
    replies = [AskReply(0.01, "no tags"), AskReply(0.01, "<diagnosis>  </diagnosis>"), AskReply(0.01, GOOD)]
    out = asyncio.run(ask_parse_retry(scripted_ask(replies, seen), parse_diagnosis))
    assert out.value is None and len(seen) == 2 and len(replies) == 1  # no third call
    assert out.error() == ("first: expected one <diagnosis>…</diagnosis> block, found none; "
                           "retry: the <diagnosis> block is empty")
    assert out.raw == "<diagnosis>  </diagnosis>"


def test_a_failed_call_or_a_refused_retry_ends_without_another_call() -> None:
    seen: list[tuple[int, str, str | None]] = []
    failed = asyncio.run(ask_parse_retry(scripted_ask([AskReply(None, failure="task t1 failed: timeout")], seen), parse_diagnosis))
    assert failed.value is None and failed.failure == "task t1 failed: timeout" and failed.usd == 0.0
    asked: list[float] = []

    def closed_gate(usd: float) -> bool:
        asked.append(usd)
        return False

    seen = []
    refused = asyncio.run(ask_parse_retry(scripted_ask([AskReply(0.5, "no tags"), AskReply(0.0, GOOD)], seen),
                                          parse_diagnosis, ReplyFormatError, may_retry=closed_gate))
    assert refused.value is None and refused.failure == RETRY_REFUSED and asked == [0.5] and len(seen) == 1


def test_the_diagnoser_records_both_errors_after_its_retry() -> None:
    llm = ScriptedLLM(["I think it is units.", "still no tags"])
    case = CaseSample("q1", "units", "2 m in cm?", "2", "200", False, "I multiplied by one")
    diagnosis, error, usd = asyncio.run(diagnose_case(llm, case, reply_format="text"))
    assert diagnosis is None and error.startswith("first: expected one <diagnosis>") and "retry: expected one" in error
    assert len(llm.requests) == 2 and llm.requests[1].messages[-2] == ChatMessage("assistant", "I think it is units.")
    assert abs(usd - 0.02) < 1e-12


def test_the_h2_editor_runs_on_the_same_loop(tmp_path: Path) -> None:
    keys: list[str] = []
    feedbacks: list[str] = []

    async def ask(messages: list[ChatMessage], key: str) -> AskReply:
        keys.append(key)
        feedbacks.append(messages[-1].content)
        return AskReply(0.01, "not an editor reply")

    req = EditRequest(stage="inv", key="h2-t-editor-inv1", surface=surface_for("native"), task_id="t", task_header="T",
                      prompt="p", current=HarnessTree({"system_prompt.md": "x"}), context_dir=tmp_path)
    res = asyncio.run(edit_with_format_retry(req, "", ask))
    assert keys == ["h2-t-editor-inv1", "h2-t-editor-inv1" + FORMAT_RETRY_SUFFIX]
    assert res.output is None and res.error == "editor output broke the contract twice" and len(res.format_errors) == 2
    assert res.format_errors[0] in feedbacks[1] and res.format_errors[0] not in feedbacks[0]  # the retry shows the error
    assert [c.counted for c in res.calls] == [True, False]
