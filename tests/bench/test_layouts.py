"""Codex / OpenCode trees <-> the native layout training uses (harness/bench/layouts.py)."""

from __future__ import annotations

import pytest

from harness.bench.layouts import LAYOUTS, from_native, to_native
from harness.h2.surfaces import surface_for
from harness.h2.validator import validate_tree
from harness.tree import HarnessTree

CODEX = HarnessTree({
    "AGENTS.md": "Be careful.\n",
    ".agents/skills/algebra/SKILL.md": "---\nname: algebra\ndescription: Use for algebra.\n---\n\n## Rules\n- Check signs.\n",
    ".agents/skills/algebra/scripts/check.py": "print('ok')\n",
    ".codex/hooks.json": '{"hooks": {}}\n',
})
OPENCODE = HarnessTree({
    "systemprompt.md": "You are precise.\n",
    "guardrails.md": "Never guess silently.\n",
    "tool_descriptions/tool_guidance.md": "Call get_context first.\n",
    "skills/history/SKILL.md": "---\nname: history\ndescription: Use for history.\n---\n\n## Rules\n- Dates matter.\n",
    "plugin/audit.ts": "export {}\n",
})


@pytest.mark.parametrize("surface,tree", [("codex", CODEX), ("opencode", OPENCODE)])
def test_round_trip_and_native_view(surface: str, tree: HarnessTree) -> None:
    native = to_native(tree, surface)
    assert "system_prompt.md" in native and any(p.startswith("skills/") and p.endswith("/SKILL.md") for p in native)
    assert from_native(native, surface) == tree


def test_opencode_always_on_files_reach_the_solver_and_go_back_to_their_files() -> None:
    native = to_native(OPENCODE, "opencode")
    assert "Never guess silently." in native["system_prompt.md"]  # the solver reads every always-on word
    assert native["tools/tool_guidance.md"] == "Call get_context first.\n"
    edited = native.with_files({"system_prompt.md": native["system_prompt.md"].replace("Never guess silently.", "Never guess.")})
    assert from_native(edited, "opencode")["guardrails.md"] == "Never guess.\n"


def test_a_trained_native_tree_exports_to_a_valid_codex_tree() -> None:
    native = HarnessTree({"system_prompt.md": "Be careful.\n", "tools/get_context.md": "Read context first.\n",
                          "skills/algebra/SKILL.md": "## Rules\n- Check signs.\n"})
    codex = from_native(native, "codex")
    assert "Read context first." in codex["AGENTS.md"] and codex[".agents/skills/algebra/SKILL.md"].startswith("---\nname: algebra\n")
    assert validate_tree(codex, surface_for("codex")).ok, validate_tree(codex, surface_for("codex"))
    assert to_native(codex, "codex") == native.with_files({"skills/algebra/SKILL.md": codex[".agents/skills/algebra/SKILL.md"]})


def test_the_layouts_agree_with_the_harness2_surfaces() -> None:
    from harness.h2.surfaces import SURFACES

    assert set(LAYOUTS) == set(SURFACES)
    for name, layout in LAYOUTS.items():
        surface = SURFACES[name]
        assert layout.frontmatter_required == surface.skill_frontmatter_required, name
        assert surface.is_always_on(layout.prompt_file) and all(surface.is_always_on(p) for p in layout.merged), name
        assert surface.classify(f"{layout.skill_prefix}x/SKILL.md") == "skill", name


def test_a_tree_without_its_main_file_is_named() -> None:
    with pytest.raises(ValueError, match="a codex harness needs AGENTS.md"):
        to_native(HarnessTree({"notes.md": "x"}), "codex")
