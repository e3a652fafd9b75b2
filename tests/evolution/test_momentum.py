import asyncio

from harness.evolution.momentum import (
    ComparisonPair,
    categorize_pair,
    format_comparison_pairs,
    momentum_inner,
    replace_momentum,
    run_momentum,
)
from harness.kernel.types import IMPROVED, PERSISTENT_FAIL, REGRESSED, STABLE_SUCCESS
from tests.evolution.scripted import ScriptedLLM

SKILL = "---\nname: t\n---\n\n## Rules\n- Read every choice.\n"


def test_replace_momentum_roundtrip_and_append():
    assert momentum_inner(SKILL) == ""
    once = replace_momentum(SKILL, "- a")
    assert momentum_inner(once) == "- a" and once.startswith(SKILL.rstrip("\n"))
    twice = replace_momentum(once, "- b\n- c")
    assert momentum_inner(twice) == "- b\n- c" and twice.count("## Momentum") == 1 and "- a" not in twice


def test_categories_and_regressed_first():
    assert categorize_pair(True, False) == REGRESSED and categorize_pair(False, True) == IMPROVED
    assert categorize_pair(False, False) == PERSISTENT_FAIL and categorize_pair(True, True) == STABLE_SUCCESS
    pairs = [ComparisonPair("q1", "t", "Q1?", False, True), ComparisonPair("q2", "t", "Q2?", True, False, "unsure about timestamps")]
    text = format_comparison_pairs(pairs)
    assert text.index(REGRESSED) < text.index(IMPROVED) < text.index(PERSISTENT_FAIL) < text.index(STABLE_SUCCESS)
    assert "unsure about timestamps" in text


PAIRS = [ComparisonPair("q2", "t", "Q2?", True, False)]
WITH_PREV = replace_momentum(SKILL, "- old guidance")
GOOD = "<guidance>\n- new one\n</guidance>"


def _momentum(llm: ScriptedLLM):
    return asyncio.run(run_momentum(llm, task_type="t", skill_file="f", skill_text=WITH_PREV, pairs=PAIRS, sample_index=1))


def test_run_momentum_parses_a_good_reply_with_one_call():
    llm = ScriptedLLM([GOOD])
    ok = _momentum(llm)
    assert ok.guidance == "- new one" and momentum_inner(ok.new_text) == "- new one" and ok.parse_error == ""
    assert len(llm.requests) == 1 and ok.usd == 0.01
    assert "FORMAT: momentum" in llm.requests[0].messages[0].content
    assert "- old guidance" in llm.requests[0].messages[1].content


def test_run_momentum_retries_a_bad_reply_once_with_the_parsers_message():
    llm = ScriptedLLM(["no tags here", GOOD])
    out = _momentum(llm)
    assert out.guidance == "- new one" and momentum_inner(out.new_text) == "- new one" and out.parse_error == ""
    assert len(llm.requests) == 2 and round(out.usd, 6) == 0.02
    retry = llm.requests[1].messages
    assert retry[-2].role == "assistant" and retry[-2].content == "no tags here"
    assert "expected one <guidance>" in retry[-1].content and "FORMAT: momentum" in retry[-1].content


def test_run_momentum_keeps_the_previous_guidance_when_the_retry_fails_too():
    llm = ScriptedLLM(["no tags here", "<guidance>\n</guidance>"])
    bad = _momentum(llm)
    assert bad.guidance == "- old guidance" and bad.new_text == WITH_PREV
    assert bad.parse_error.startswith("first: expected one <guidance>") and "retry: the <guidance> block has no bullet" in bad.parse_error
    assert len(llm.requests) == 2 and not llm.replies
