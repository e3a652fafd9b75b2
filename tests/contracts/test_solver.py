from __future__ import annotations

import pytest

from harness.contracts.solver import (
    PROTOCOL_HEAD,
    parse_answer,
    question_text_of,
    render_question,
    render_system_message,
    resolve_skill_file,
    skill_path,
)
from harness.contracts.tool_calls import ToolCallFormatError, parse_tool_call, render_tool_call


@pytest.mark.parametrize("choices", [None, ["red", "blue"], ("a", "b", "c", "d")])
def test_question_text_round_trips_through_the_user_message(choices):
    message = render_question("  What colour is the cup?  ", choices)
    assert question_text_of(message) == "What colour is the cup?"
    assert ("\n\nChoices:\nA. " in message) == bool(choices)


def test_question_text_of_rejects_other_messages():
    assert question_text_of("Target file: skills/x/SKILL.md") is None


def test_system_message_carries_the_protocol_and_the_task_types_skill():
    tree = {"system_prompt.md": "Be careful.", "tools/lookup.md": "Look things up.", skill_path("t"): "Rule one."}
    text = render_system_message(tree, "t")
    assert PROTOCOL_HEAD in text and text.startswith("Be careful.")
    assert "# Tool guides\n\n## lookup\nLook things up." in text and "# Skill: t\nRule one." in text
    assert resolve_skill_file(tree, "other") == skill_path("default-strategy")


def test_answer_line_is_the_last_one_and_tool_calls_round_trip():
    assert parse_answer("ANSWER: A\nthinking\n answer : c ") == "c"
    assert parse_answer("no answer here") is None
    call = parse_tool_call("let me look\n" + render_tool_call("lookup", {"focus": "cup"}))
    assert call is not None and call.name == "lookup" and call.arguments == {"focus": "cup"}
    with pytest.raises(ToolCallFormatError, match="not valid JSON"):
        parse_tool_call("<tool_call>{nope}</tool_call>")
