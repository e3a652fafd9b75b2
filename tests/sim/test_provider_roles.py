"""Every role of the SimProvider answers the REAL prompts and its replies parse with the REAL parsers."""

import asyncio
from types import SimpleNamespace

import pytest

from harness.contracts.evolution import (
    ReplyFormatError,
    parse_diagnosis,
    parse_edit_ops,
    parse_guidance,
)
from harness.contracts.harness2 import EditorFormatError, parse_editor_output
from harness.evolution.momentum import ComparisonPair, format_comparison_pairs
from harness.evolution.prompts import (
    diagnosis_messages,
    momentum_messages,
    skill_editor_messages,
    system_prompt_editor_messages,
    tool_editor_messages,
)
from harness.h2.prompts import (
    editor_messages,
    judge_messages,
    reflector_messages,
    selector_messages,
)
from harness.h2.roles import parse_choice, parse_experience
from harness.h2.surfaces import NATIVE
from harness.kernel.types import CaseSample, ToolCasePack
from harness.llm.protocol import ChatMessage, LLMError, LLMRequest, Role
from harness.sim.matching import normalize
from harness.sim.provider import SimProvider
from harness.sim.world import World

WORLD = World.generate(7)
TREE = WORLD.base_harness()
TT = "temporal_reasoning"
SKILL = f"skills/{TT}/SKILL.md"


def call(provider, role, messages, sample_index=0):
    return asyncio.run(provider.complete(LLMRequest.make(role, messages, sample_index=sample_index)))


def failure(qid: str, hint_cue: str) -> CaseSample:
    q = WORLD.question(qid)
    return CaseSample(qid, q.task_type, q.question, "A", q.answer, False, f"Reasoning: I was unsure about the {hint_cue}, so I went with my first reading.\nANSWER: A")


def test_diagnosis_replies_parse_and_echo_the_trace_cue_mostly():
    provider = SimProvider(WORLD)
    rule = WORLD.rules_of(TT, "insight")[1]
    hits = 0
    for i, qid in enumerate(WORLD.qids_of(TT)[:30]):
        text = parse_diagnosis(call(provider, Role.DIAGNOSER, diagnosis_messages(failure(qid, rule.cue)), i).text)
        hits += rule.cue in text
    assert hits >= 20  # diagnosis_keep_cue_prob = 0.85


def test_skill_editor_replies_parse_or_are_malformed_and_propose_world_rules():
    provider = SimProvider(WORLD)
    insight = WORLD.rules_of(TT, "insight")[2]
    cases = [failure(q, insight.cue) for q in WORLD.qids_of(TT)[:6]]
    kinds, malformed, proposed_hint = [], 0, 0
    for s in range(120):
        msgs = skill_editor_messages(task_type=TT, skill_file=SKILL, skill_text=TREE[SKILL], cases=cases, diagnoses=[f"missed the {insight.cue}"], rejected=[], edit_budget=2)
        reply = call(provider, Role.EDITOR, msgs, s).text
        try:
            ops = parse_edit_ops(reply)
        except ReplyFormatError:
            malformed += 1
            continue
        assert len(ops.edits) <= 2
        for e in ops.edits:
            if e.op == "add":
                rule = next(r for r in WORLD.rules.values() if r.text == e.text)
                assert rule.task_type == TT and rule.norm not in normalize(TREE[SKILL])
                kinds.append(rule.kind)
                proposed_hint += rule.rule_id == insight.rule_id
    assert 1 <= malformed <= 20  # editor_malformed_prob = 0.06
    assert {"insight", "trap", "neutral"} <= set(kinds)
    assert proposed_hint >= 30  # the evidence points at this insight


def test_skill_editor_respects_the_blacklist():
    provider = SimProvider(WORLD)
    insight = WORLD.rules_of(TT, "insight")[2]
    cases = [failure(q, insight.cue) for q in WORLD.qids_of(TT)[:6]]
    for s in range(60):
        msgs = skill_editor_messages(task_type=TT, skill_file=SKILL, skill_text=TREE[SKILL], cases=cases, diagnoses=[], rejected=[f"- add: {insight.text}"], edit_budget=3)
        try:
            ops = parse_edit_ops(call(provider, Role.EDITOR, msgs, s).text)
        except ReplyFormatError:
            continue
        assert all(e.text != insight.text for e in ops.edits)


def test_system_prompt_and_tool_editor_replies_parse():
    provider = SimProvider(WORLD)
    cases = [failure(q, WORLD.rules_of(TT, "insight")[0].cue) for q in WORLD.qids_of(TT)[:4]]
    parsed = 0
    for s in range(20):
        sys_msgs = system_prompt_editor_messages(target_file="system_prompt.md", text=TREE["system_prompt.md"], cases=cases, rejected=[], edit_budget=1)
        tool_msgs = tool_editor_messages(target_file="tools/lookup_frames.md", text=TREE["tools/lookup_frames.md"], pack=ToolCasePack("lookup_frames", 1, calls=12, errors=1, examples={"q1": "focus: timestamps"}), edit_budget=1)
        for msgs in (sys_msgs, tool_msgs):
            try:
                parse_edit_ops(call(provider, Role.EDITOR, msgs, s).text)
                parsed += 1
            except ReplyFormatError:
                pass
    assert parsed >= 36


def test_momentum_replies_parse():
    provider = SimProvider(WORLD)
    pairs = [ComparisonPair(q, TT, WORLD.question(q).question, True, False, "I was unsure about the timestamps") for q in WORLD.qids_of(TT)[:3]]
    ok = 0
    for s in range(30):
        msgs = momentum_messages(task_type=TT, skill_file=SKILL, skill_text=TREE[SKILL], previous_guidance="- keep answers short", comparison=format_comparison_pairs(pairs))
        try:
            guidance = parse_guidance(call(provider, Role.EDITOR, msgs, s).text)
        except ReplyFormatError:
            continue
        ok += 1
        assert guidance.startswith("- ")
    assert ok >= 24


def _h2_editor_messages(evidence: str):
    return editor_messages(stage="dom", surface=NATIVE, task_id="t1", task_header=f"Task type: {TT}", prompt="Answer questions.", current=TREE, evidence=evidence)


def test_h2_editor_replies_parse_with_the_h2_contract_and_edit_the_task_skill():
    provider = SimProvider(WORLD)
    insight = WORLD.rules_of(TT, "insight")[3]
    changed = broken = 0
    for s in range(40):
        reply = call(provider, Role.EDITOR, _h2_editor_messages(f"rollouts/r1.md: I was unsure about the {insight.cue}"), s).text
        try:
            out = parse_editor_output(reply, NATIVE)
        except EditorFormatError:
            broken += 1
            continue
        if out.is_no_change:
            continue
        changed += 1
        assert set(out.changes) == {SKILL}
        new = out.apply(TREE)
        assert new[SKILL].startswith("---\nname: ") and new[SKILL] != TREE[SKILL]
    assert changed >= 25 and broken <= 8


def test_h2_selector_reflector_judge_replies_parse():
    provider = SimProvider(WORLD)
    qids = WORLD.qids_of(TT)[:5]
    right = "\n".join(f"{q}: {WORLD.truth[q].answer}" for q in qids)
    wrong = "\n".join(f"{q}: {'A' if WORLD.truth[q].answer != 'A' else 'B'}" for q in qids)
    picks = []
    for s in range(20):
        msgs = selector_messages(task_id="t1", task_header=f"Task type: {TT}", prompt="Answer.", candidates={"c1": wrong, "c2": right})
        choice, why, err = parse_choice(call(provider, Role.SELECTOR, msgs, s).text, ["c1", "c2"])
        assert err is None and why
        picks.append(choice)
    assert picks.count("c2") >= 12
    insight = WORLD.rules_of(TT, "insight")[0]
    adopted = TREE.with_files({SKILL: TREE[SKILL] + f"- {insight.text}\n"})
    exp, dropped = parse_experience(call(provider, Role.REFLECTOR, reflector_messages(task_id="t1", task_header=f"Task type: {TT}", prompt="Answer.", base=TREE, adopted=adopted, evidence="(none)", selection_note="k=1"), 0).text)
    assert dropped is None and exp is not None and exp.lesson
    import re

    for deliverable, lo, hi in ((right, 0.85, 1.0), (wrong, 0.0, 0.15)):
        text = call(provider, Role.JUDGE, judge_messages(task_id="t1", task_header=f"Task type: {TT}", prompt="Answer.", deliverable=deliverable), 0).text
        grade = float(re.search(r"<grade>\s*([0-9.]+)\s*</grade>", text).group(1))
        assert lo <= grade <= hi and "<why>" in text


def test_unknown_format_and_missing_system_are_clear_errors():
    provider = SimProvider(WORLD)
    with pytest.raises(LLMError, match="unknown FORMAT 'poetry'"):
        call(provider, Role.EDITOR, [ChatMessage("system", "FORMAT: poetry"), ChatMessage("user", "hi")])
    with pytest.raises(LLMError, match="neither the solver protocol"):
        call(provider, Role.EDITOR, [ChatMessage("system", "be nice"), ChatMessage("user", "hi")])
    with pytest.raises(LLMError, match="first message must be the system"):
        call(provider, Role.EDITOR, [ChatMessage("user", "hi")])


def test_usage_cost_and_models_from_config():
    cfg = SimpleNamespace(model="sim-default", models={"editor": "sim-editor"}, prices={"sim-editor": {"input": 1.0, "output": 2.0}})
    provider = SimProvider(WORLD, cfg)
    assert provider.model_for(Role.SOLVER) == "sim-default" and provider.model_for(Role.EDITOR) == "sim-editor"
    msgs = diagnosis_messages(failure(WORLD.qids_of(TT)[0], "timestamps"))
    free = call(provider, Role.DIAGNOSER, msgs)
    assert free.cost_usd == 0.0 and free.usage.prompt_tokens == sum(len(m.content) for m in msgs) // 4
    paid = call(provider, Role.EDITOR, skill_editor_messages(task_type=TT, skill_file=SKILL, skill_text=TREE[SKILL], cases=[], diagnoses=[], rejected=[], edit_budget=1))
    assert paid.model == "sim-editor" and paid.provider == "sim"
    assert paid.cost_usd == pytest.approx((paid.usage.prompt_tokens * 1.0 + paid.usage.completion_tokens * 2.0) / 1e6)
