"""Composition is evidence-driven: the prompt carries the base and probe rollouts, the sim composer follows them.

The sim composer (harness/sim/composer.py) may read only the prompt: these
tests give it two proposals whose probe rollouts differ and check that the
composed harness follows the probes (even when the better-behaved probe's
rule is, unknown to the composer, a trap), and that the module cannot reach
the world's rules, their kinds, the answer key or the oracle.
"""

from __future__ import annotations

import ast
import asyncio
import inspect
import subprocess
import sys
from pathlib import Path

from harness.contracts.solver import skill_path
from harness.h2.adapters import Observation, QuestionTaskAdapter, Rollout
from harness.h2.context import PoolEntry, build_context, render_context
from harness.h2.prompts import COMPOSE, STAGE_MISSIONS, editor_messages
from harness.h2.roles import Editor, EditRequest, ProviderResponder
from harness.h2.surfaces import NATIVE
from harness.sim import composer
from harness.sim.provider import SimProvider
from harness.sim.world import World

ROOT = Path(__file__).resolve().parents[2]
WORLD = World.generate(seed=5, n_task_types=3, questions_per_type=12, n_choices=4)
TT = WORLD.questions[0].task_type
QS = [q for q in WORLD.questions if q.task_type == TT][:8]
BASE = WORLD.base_harness()
SKILL = skill_path(TT)


def task() -> QuestionTaskAdapter:
    return QuestionTaskAdapter(f"{TT}-0", TT, QS, BASE, SimProvider(WORLD))


def with_rule(text: str):
    return BASE.with_files({SKILL: BASE[SKILL].rstrip("\n") + f"\n- {text}\n"})


def rollout(label: str, tree, confident: int) -> Rollout:
    """A solver-like rollout: the first `confident` answers stated with high confidence, the rest with low."""
    obs = []
    for i, q in enumerate(QS):
        obs.append(Observation(q.qid, "input", q.question))
        if i < confident:
            text = "Reasoning: I checked the details: choice A fits and the other choices do not.\nConfidence: high\nANSWER: A"
        else:
            text = "Reasoning: I was unsure about the details, so I went with my first reading.\nConfidence: low\nANSWER: A"
        obs.append(Observation(q.qid, "output", text))
    return Rollout(label, tree.fingerprint, True, "".join(f"{q.qid}: A\n" for q in QS), tuple(obs))


def compose(tmp_path: Path, base_conf: int, conf_a: int, conf_b: int, rule_a: str, rule_b: str, label: str = "agg1"):
    a, b = with_rule(rule_a), with_rule(rule_b)
    base_r = rollout("h2-t-probe-base", BASE, base_conf)
    pool = [
        PoolEntry("inv1", "inv", a, BASE, rollout("h2-t-probe-inv1", a, conf_a), f"add {rule_a}", "adopted"),
        PoolEntry("dom1", "dom", b, BASE, rollout("h2-t-probe-dom1", b, conf_b), f"add {rule_b}", "adopted"),
    ]
    t = task()
    ctx = build_context(tmp_path / label, t, mission=STAGE_MISSIONS[COMPOSE], current=BASE, rollouts=[base_r], pool=pool)
    req = EditRequest(stage=COMPOSE, key=f"h2-t-editor-{label}", surface=NATIVE, task_id=t.task_id, task_header=t.task_header(),
                      prompt=t.prompt, current=BASE, context_dir=ctx, pool=tuple(pool))
    res = asyncio.run(Editor(ProviderResponder(SimProvider(WORLD))).edit(req))
    assert res.output is not None, res.format_errors
    return res.output, ctx, pool


def states(tree_files, rule_text: str) -> bool:
    return rule_text in tree_files[SKILL]


INSIGHT = WORLD.rules_of(TT, "insight")[-1].text
TRAP = WORLD.rules_of(TT, "trap")[0].text


def test_compose_prompt_shows_diffs_probe_rollouts_and_the_base_rollout(tmp_path):
    _, ctx, pool = compose(tmp_path, 4, 7, 2, INSIGHT, TRAP)
    t = task()
    msgs = editor_messages(stage=COMPOSE, surface=NATIVE, task_id=t.task_id, task_header=t.task_header(), prompt=t.prompt,
                           current=BASE, evidence=render_context(ctx), pool=pool)
    system, user = msgs[0].content, msgs[1].content
    assert "Keep only the edits whose probe behaviour looks better than the base's" in system
    assert "<no-change> (keep the base)" in system
    assert "----- BASE ROLLOUT: h2-t-probe-base -----" in user
    for p in pool:
        entry = user.split(f"### Pool entry {p.label}", 1)[1]
        assert p.diff.strip().splitlines()[-1] in entry  # its diff
        assert f"----- PROBE ROLLOUT: {p.rollout.label} -----" in entry  # its probe rollout, per question
        assert all(f"## {q.qid} (output)" in entry for q in QS)
    evidence = user.split("## Evidence", 1)[1].split("## Base rollout", 1)[0]
    assert "EVIDENCE FILE: rollouts/" not in evidence and "source/questions.md" in evidence  # shown once, not twice
    assert user.count("----- BASE ROLLOUT:") == 1


def test_sim_composer_keeps_the_candidate_whose_probe_behaved_better(tmp_path):
    out, _, _ = compose(tmp_path, 4, 7, 2, INSIGHT, TRAP)
    tree = out.apply(BASE)
    assert states(tree, INSIGHT) and not states(tree, TRAP)
    assert "inv1" in out.notes and "base: 4 of 8" in out.notes


def test_the_choice_follows_the_probes_not_the_rules_kinds(tmp_path):
    # the same two proposals with the probe rollouts swapped: the composer now keeps the trap
    out, _, _ = compose(tmp_path, 4, 2, 7, INSIGHT, TRAP)
    tree = out.apply(BASE)
    assert states(tree, TRAP) and not states(tree, INSIGHT)


def test_both_supported_are_combined_and_nothing_supported_keeps_the_base(tmp_path):
    both, _, _ = compose(tmp_path / "a", 3, 7, 6, INSIGHT, TRAP)
    tree = both.apply(BASE)
    assert states(tree, INSIGHT) and states(tree, TRAP)
    none, _, _ = compose(tmp_path / "b", 6, 5, 6, INSIGHT, TRAP)
    assert none.is_no_change and "No candidate's probe behaved better than the base" in none.no_change


def test_no_base_rollout_means_no_change():
    text = "## Current harness\n=== HARNESS FILE: a.md ===\nx\n=== END HARNESS FILE ===\n\n## Base rollout\n(none)\n\n## Pool\n"

    class U:
        def next(self):
            return 0.5

    assert composer.reply_compose(text, U(), min_gain=0.1, gain_jitter=0.1, malformed_prob=0.0).startswith("<no-change>")


def test_merge_changes_applies_removals_and_additions_at_their_anchor():
    cur = {"s.md": "# S\n## Rules\n- one\n- two\n"}
    d1 = composer.parse_diff("--- a/s.md\n+++ b/s.md\n@@ -1,4 +1,4 @@\n # S\n ## Rules\n-- one\n+- uno\n - two\n")
    d2 = composer.parse_diff("--- a/s.md\n+++ b/s.md\n@@ -3,2 +3,3 @@\n - one\n - two\n+- three\n")
    assert composer.merge_changes(cur, [d1, d2]) == {"s.md": "# S\n## Rules\n- uno\n- two\n- three\n"}


# ---------------------------------------------------------------- structural: no oracle, no rule kinds
FORBIDDEN_MODULES = ("harness.sim.world", "harness.sim.oracle", "harness.sim.calibration", "harness.sim.solver", "harness.sim.roles", "harness.sim.provider")
FORBIDDEN_NAMES = {"kind", "weight", "truth", "applies", "rules", "rule_id", "answer", "oracle", "world", "of_kind", "spec_by_name", "expected_accuracy"}


def _composer_ast() -> ast.Module:
    return ast.parse((ROOT / "harness/sim/composer.py").read_text(encoding="utf-8"))


def test_sim_composer_imports_nothing_that_holds_the_truth():
    names = []
    for node in ast.walk(_composer_ast()):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, "relative imports would reach harness.sim siblings"
            names += [node.module or "", *(f"{node.module}.{a.name}" for a in node.names)]
    bad = [n for n in names if any(n == f or n.startswith(f + ".") for f in FORBIDDEN_MODULES)]
    assert not bad, bad


def test_sim_composer_never_touches_rule_kinds_truth_or_oracle():
    used = set()
    for node in ast.walk(_composer_ast()):
        if isinstance(node, ast.Attribute):
            used.add(node.attr)
        elif isinstance(node, ast.Name):
            used.add(node.id)
        elif isinstance(node, ast.arg):
            used.add(node.arg)
    assert not used & FORBIDDEN_NAMES, used & FORBIDDEN_NAMES
    assert list(inspect.signature(composer.reply_compose).parameters) == ["text", "stream", "min_gain", "gain_jitter", "malformed_prob"]


def test_importing_the_sim_composer_loads_no_world_or_oracle():
    code = (
        "import sys, harness.sim.composer\n"
        "bad = [m for m in sys.modules if m in ('harness.sim.world', 'harness.sim.oracle', 'harness.sim.calibration', 'harness.sim.solver')]\n"
        "print(bad); sys.exit(1 if bad else 0)\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr


def test_the_structural_checks_catch_a_cheating_composer():
    cheat = ast.parse("from harness.sim.world import World\ndef f(world):\n    return [r for r in world.rules.values() if r.kind == 'insight']\n")
    imports = [n.module for n in ast.walk(cheat) if isinstance(n, ast.ImportFrom)]
    attrs = {n.attr for n in ast.walk(cheat) if isinstance(n, ast.Attribute)} | {n.arg for n in ast.walk(cheat) if isinstance(n, ast.arg)}
    assert "harness.sim.world" in imports and attrs & FORBIDDEN_NAMES
