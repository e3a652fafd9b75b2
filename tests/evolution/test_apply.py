import pytest

from harness.evolution.apply import apply_edits
from harness.kernel.types import Edit

SKILL = "---\nname: x\ndescription: y\n---\n\n# X\n\n## Rules\n- Read every choice.\n- Check the clip twice.\n\n## Notes\nkeep\n"


def statuses(report):
    return [a.status for a in report]


def test_add_appends_a_bullet_at_the_end_of_the_rules_section():
    text, report = apply_edits(SKILL, [Edit("add", "Count objects   twice\nbefore answering.")], budget=3)
    assert statuses(report) == ["applied"]
    assert "- Check the clip twice.\n- Count objects twice before answering.\n\n## Notes\nkeep" in text


def test_add_creates_a_rules_section_when_missing():
    text, report = apply_edits("You are helpful.\n", [Edit("add", "Be brief.")], budget=1)
    assert statuses(report) == ["applied"]
    assert text == "You are helpful.\n\n## Rules\n- Be brief.\n"


def test_duplicate_is_detected_through_case_and_punctuation():
    text, report = apply_edits(SKILL, [Edit("add", "read EVERY choice")], budget=3)
    assert statuses(report) == ["duplicate"] and text == SKILL


def test_replace_and_delete_need_the_old_text():
    edits = [
        Edit("replace", "Check the clip three times.", old="Check the clip twice."),
        Edit("delete", "", old="  read every choice "),  # whole line, matched without bullet/case/whitespace
        Edit("replace", "new", old="not in the file"),
        Edit("delete", "", old="absent line"),
    ]
    text, report = apply_edits(SKILL, edits, budget=5)
    assert statuses(report) == ["applied", "applied", "not_found", "not_found"]
    assert "- Check the clip three times." in text and "Read every choice" not in text
    assert "\n\n## Notes" in text


def test_over_budget_counts_applied_edits_only():
    edits = [Edit("add", "A one."), Edit("replace", "x", old="missing"), Edit("add", "B two."), Edit("add", "C three.")]
    text, report = apply_edits(SKILL, edits, budget=2)
    assert statuses(report) == ["applied", "not_found", "applied", "over_budget"]
    assert "C three" not in text


def test_max_chars_is_over_budget():
    text, report = apply_edits(SKILL, [Edit("add", "x" * 100)], budget=3, max_chars=len(SKILL) + 10)
    assert statuses(report) == ["over_budget"] and "max" in report[0].detail and text == SKILL


def test_invalid_edits():
    edits = [Edit("rename", "x"), Edit("add", "   "), Edit("replace", "", old="Read every choice."), Edit("delete", "", old="")]
    text, report = apply_edits(SKILL, edits, budget=5)
    assert statuses(report) == ["invalid"] * 4 and text == SKILL
    assert "unknown op 'rename'" in report[0].detail


def test_negative_budget_is_an_error():
    with pytest.raises(ValueError, match="budget"):
        apply_edits(SKILL, [], budget=-1)
