from harness.contracts.solver import render_system_message, skill_path
from harness.sim.matching import normalize
from harness.sim.solver import SolverModel
from harness.sim.world import World

WORLD = World.generate(7)
TT = "counting_problem"


def _stated(skill_text: str) -> frozenset[str]:
    tree = WORLD.base_harness().with_files({skill_path(TT): skill_text})
    return SolverModel(WORLD).read(render_system_message(tree, TT)).stated


def test_rule_matched_through_bullets_case_whitespace_and_wrapping():
    rule = WORLD.rules_of(TT, "insight")[0]
    words = rule.text.split()
    half = len(words) // 2
    variants = [
        f"- {rule.text}",
        f"* {rule.text.upper()}",
        f"1. {rule.text.rstrip('.')}",
        "  " + "   ".join(words),
        "- " + " ".join(words[:half]) + "\n  " + " ".join(words[half:]),
        f"**{rule.text}**",
    ]
    for v in variants:
        assert rule.rule_id in _stated(v), v


def test_paraphrase_and_other_rules_not_matched():
    rule = WORLD.rules_of(TT, "insight")[0]
    paraphrase = rule.text.replace("For ", "In ", 1)
    assert rule.rule_id not in _stated(paraphrase)
    stated = _stated(f"- {rule.text}")
    assert stated == {rule.rule_id}


def test_trap_and_neutral_matching_in_system_prompt_counts_too():
    trap = WORLD.rules_of(TT, "trap")[0]
    tree = WORLD.base_harness().with_files({"system_prompt.md": "Be careful.\n" + trap.text})
    assert trap.rule_id in SolverModel(WORLD).read(render_system_message(tree, TT)).stated


def test_normalize():
    assert normalize("  - Hello,   WORLD!\n1. on-screen ") == " hello world 1 on screen "
    assert normalize("") == " "
