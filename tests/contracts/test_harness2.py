from __future__ import annotations

import pytest

from harness.contracts.harness2 import (
    EditorFormatError,
    parse_editor_output,
    render_file_blocks,
)
from harness.h2.surfaces import CODEX, NATIVE
from harness.tree import HarnessTree

BASE = HarnessTree({"AGENTS.md": "# Agent\n", "scripts/total.py": "print(1)\n"})


def test_blocks_notes_and_inheritance():
    out = parse_editor_output(
        "intro\n=== HARNESS FILE: scripts/total.py ===\nprint(2)\n## not a heading of the reply\n=== END HARNESS FILE ===\n<notes>signed sum</notes>", CODEX
    )
    assert out.changes == {"scripts/total.py": "print(2)\n## not a heading of the reply\n"} and out.notes == "signed sum"
    tree = out.apply(BASE)
    assert tree["AGENTS.md"] == "# Agent\n"  # omitted = inherited
    assert tree["scripts/total.py"].startswith("print(2)")


def test_deletion_line_removes_the_file():
    out = parse_editor_output("=== DELETE HARNESS FILE: scripts/total.py ===\n<notes>drop it</notes>", CODEX)
    assert "scripts/total.py" not in out.apply(BASE)


def test_explicit_no_change():
    out = parse_editor_output("<no-change>the base is right</no-change>", CODEX)
    assert out.is_no_change and out.no_change == "the base is right" and out.apply(BASE) == BASE


@pytest.mark.parametrize(
    "reply,needle",
    [
        ("=== HARNESS FILE: AGENTS.md ===\nx\n=== END HARNESS FILE ===\n<no-change>keep</no-change>", "AND a <no-change>"),
        ("=== HARNESS FILE: notes/x.md ===\nx\n=== END HARNESS FILE ===", "off the codex surface"),
        ("=== HARNESS FILE: ../AGENTS.md ===\nx\n=== END HARNESS FILE ===", "unsafe path"),
        ("=== HARNESS FILE: AGENTS.md ===\nx\n", "never closed"),
        ("=== HARNESS FILE: AGENTS.md ===\nx\n=== HARNESS FILE: scripts/total.py ===\ny\n=== END HARNESS FILE ===", "not closed before"),
        ("<notes>I rewrote AGENTS.md to be clearer</notes>", "<notes> describe changes"),
        ("Sure, here is my improved harness.", "neither"),
        ("", "empty"),
        ("<no-change>  </no-change>", "needs a reason"),
        ("=== END HARNESS FILE ===", "without an opening"),
        ("=== HARNESS FILE: AGENTS.md ===\nx\n=== END HARNESS FILE ===\n=== HARNESS FILE: AGENTS.md ===\ny\n=== END HARNESS FILE ===", "more than one block"),
    ],
)
def test_format_errors(reply, needle):
    with pytest.raises(EditorFormatError, match=None) as exc:
        parse_editor_output(reply, CODEX)
    assert needle in str(exc.value)


def test_render_round_trips_through_the_parser():
    tree = HarnessTree({"system_prompt.md": "Answer.\n## Rules\n- a", "skills/x/SKILL.md": ""})
    out = parse_editor_output(render_file_blocks(tree), NATIVE)
    assert out.apply(HarnessTree()) == HarnessTree({"system_prompt.md": "Answer.\n## Rules\n- a\n", "skills/x/SKILL.md": ""})
