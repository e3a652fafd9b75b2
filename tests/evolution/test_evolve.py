import asyncio

import pytest

from harness.contracts.evolution import H_REJECTED
from harness.evolution.evolve import (
    NO_APPLIED_EDIT_SUMMARY,
    evolve_single_skill,
    evolve_single_tool,
    evolve_system_prompt,
    rejected_summary,
)
from harness.kernel.types import (
    CaseSample,
    Edit,
    EditApplication,
    EvolutionRecord,
    RejectedEdit,
    SkillCasePack,
    ToolCasePack,
)
from harness.llm.protocol import Role
from harness.sim.provider import SimProvider
from harness.sim.world import World
from tests.evolution.scripted import ScriptedLLM

SKILL = "---\nname: t\ndescription: d\n---\n\n## Rules\n- Read every choice.\n"
CASE = CaseSample("q1", "t", "In clip 1, what?", "A", "B", False, "I was unsure about the timestamps.")


def evolve(llm, **kw):
    args = dict(task_type="t", skill_file="skills/t/SKILL.md", skill_text=SKILL, case_pack=SkillCasePack("t", "skills/t/SKILL.md", [CASE]), diagnoses=["missed timestamps"], rejected=[], edit_budget=2, sample_index=7)
    args.update(kw)
    return asyncio.run(evolve_single_skill(llm, **args))


def test_applies_parsed_edits_and_sums_cost():
    llm = ScriptedLLM(['<edit op="add"><new>Check timestamps.</new></edit><edit op="replace"><old>nope</old><new>x</new></edit>'])
    record = evolve(llm)
    assert record.changed and "- Check timestamps." in record.new_text
    assert [a.status for a in record.apply_report] == ["applied", "not_found"]
    assert record.parse_error == "" and record.usd == pytest.approx(0.01)
    req = llm.requests[0]
    assert req.role == Role.EDITOR and req.sample_index == 7
    assert "FORMAT: edit-ops" in req.messages[0].content
    user = req.messages[1].content
    assert "Task type: t" in user and "Edit budget: 2" in user and "In clip 1, what?" in user and "missed timestamps" in user


def test_format_error_gets_one_retry_with_feedback():
    llm = ScriptedLLM(["just add a rule about timestamps", '<edit op="add"><new>Check timestamps.</new></edit>'])
    record = evolve(llm)
    assert record.changed and record.parse_error == "" and record.usd == pytest.approx(0.02)
    retry = llm.requests[1].messages
    assert retry[-2].role == "assistant" and retry[-2].content == "just add a rule about timestamps"
    assert "could not be parsed" in retry[-1].content and "found neither" in retry[-1].content


def test_two_format_errors_record_a_parse_error_and_change_nothing():
    llm = ScriptedLLM(["nothing useful", '<edit op="add"><new>x</new>'])
    record = evolve(llm)
    assert not record.changed and record.new_text == SKILL and record.edits == []
    assert "unparseable twice" in record.parse_error and "unclosed" in record.parse_error
    assert len(llm.requests) == 2


def test_no_change_and_budget_and_blacklist_in_prompt():
    llm = ScriptedLLM(["<no-change>nothing supported</no-change>"])
    rejected = [RejectedEdit("t", "skills/t/SKILL.md", "- add: Trust the first frame.", 1, 2)]
    record = evolve(llm, rejected=rejected)
    assert record.no_change_reason == "nothing supported" and not record.changed
    user = llm.requests[0].messages[1].content
    assert H_REJECTED in user and "- add: Trust the first frame." in user
    with pytest.raises(ValueError, match="edit_budget"):
        evolve(ScriptedLLM([]), edit_budget=0)


def test_rejected_summary_lists_only_applied_edits():
    applied, skipped = Edit("add", "Check timestamps."), Edit("replace", "x", old="missing")
    record = EvolutionRecord("t", "f", "a", "b", edits=[applied, skipped], apply_report=[EditApplication(applied, "applied"), EditApplication(skipped, "not_found")])
    assert rejected_summary(record) == "- add: Check timestamps."
    none_applied = EvolutionRecord("t", "f", "a", "a", edits=[skipped], apply_report=[EditApplication(skipped, "not_found")])
    assert rejected_summary(none_applied) == NO_APPLIED_EDIT_SUMMARY
    assert "missing" not in rejected_summary(none_applied)


def test_system_prompt_and_tool_slow_updates():
    llm = ScriptedLLM(['<edit op="add"><new>Answer with one letter.</new></edit>', '<edit op="add"><new>Call it once.</new></edit>'])
    sys_record = asyncio.run(evolve_system_prompt(llm, system_prompt_text="You help.\n", case_pack=[CASE], edit_budget=1, sample_index=3))
    assert sys_record.skill_file == "system_prompt.md" and "- Answer with one letter." in sys_record.new_text
    tool_record = asyncio.run(evolve_single_tool(llm, tool="lookup_frames", tool_text="Looks up frames.\n", case_pack=ToolCasePack("lookup_frames", 1, calls=3), edit_budget=1, sample_index=3))
    assert tool_record.skill_file == "tools/lookup_frames.md" and tool_record.task_type == "_tool:lookup_frames"
    assert "Calls this epoch: 3" in llm.requests[1].messages[1].content


def test_with_the_sim_provider_end_to_end():
    world = World.generate(7)
    tree = world.base_harness()
    tt = "temporal_reasoning"
    path = f"skills/{tt}/SKILL.md"
    provider = SimProvider(world)
    outcomes = set()
    for s in range(30):
        record = asyncio.run(evolve_single_skill(provider, task_type=tt, skill_file=path, skill_text=tree[path], case_pack=[CASE], diagnoses=[], rejected=[], edit_budget=1, sample_index=s))
        assert len(record.applied_edits) <= 1
        outcomes.add("changed" if record.changed else ("error" if record.parse_error else "unchanged"))
    assert "changed" in outcomes
