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


def test_run_momentum_success_and_parse_failure_keeps_previous():
    pairs = [ComparisonPair("q2", "t", "Q2?", True, False)]
    with_prev = replace_momentum(SKILL, "- old guidance")
    ok = asyncio.run(run_momentum(ScriptedLLM(["<guidance>\n- new one\n</guidance>"]), task_type="t", skill_file="f", skill_text=with_prev, pairs=pairs, sample_index=1))
    assert ok.guidance == "- new one" and momentum_inner(ok.new_text) == "- new one" and ok.parse_error == ""
    llm = ScriptedLLM(["no tags here"])
    bad = asyncio.run(run_momentum(llm, task_type="t", skill_file="f", skill_text=with_prev, pairs=pairs, sample_index=1))
    assert bad.guidance == "- old guidance" and bad.new_text == with_prev and "guidance" in bad.parse_error
    assert "FORMAT: momentum" in llm.requests[0].messages[0].content
    assert "- old guidance" in llm.requests[0].messages[1].content
