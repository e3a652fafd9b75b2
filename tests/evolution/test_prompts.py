import re

from harness.evolution import prompts
from harness.kernel.types import CaseSample, ToolCasePack

CASE = CaseSample("q1", "t", "Q?", None, "B", False, "x" * 5000)


def test_every_prompt_has_exactly_one_format_line_and_sections():
    builds = {
        "edit-ops": prompts.skill_editor_messages(task_type="t", skill_file="f", skill_text="s", cases=[CASE], diagnoses=["d"], rejected=["- add: r"], edit_budget=1),
        "edit-ops ": prompts.system_prompt_editor_messages(target_file="system_prompt.md", text="s", cases=[CASE], rejected=[], edit_budget=1),
        "edit-ops  ": prompts.tool_editor_messages(target_file="tools/x.md", text="s", pack=ToolCasePack("x", 1), edit_budget=1),
        "diagnosis": prompts.diagnosis_messages(CASE),
        "momentum": prompts.momentum_messages(task_type="t", skill_file="f", skill_text="s", previous_guidance="", comparison="c"),
    }
    for fmt, messages in builds.items():
        formats = re.findall(r"^FORMAT: (\S+)$", messages[0].content, re.MULTILINE)
        assert formats == [fmt.strip()]
        assert messages[0].role == "system" and messages[1].role == "user"
    user = builds["edit-ops"][1].content
    for heading in (prompts.H_CURRENT_FILE, prompts.H_FAILURES, prompts.H_DIAGNOSES, prompts.H_REJECTED):
        assert heading in user
    assert "Predicted: (none)" in user and "[truncated]" in user and len(user) < 3000
