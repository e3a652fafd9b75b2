"""`evolve=candidates`: edits written outside the loop reach the per-skill gate with their source (tiny sim runs).

The two edits have a known effect: an insight rule of the simulated world (helps) and a trap rule (hurts); the
oracle confirms the sign on the validation pool before the test trusts it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import make_runner, tiny_cfg

from harness.config.errors import ConfigError
from harness.contracts.candidates import CandidatesError
from harness.kernel.types import Edit
from harness.loop.candidates import NO_CANDIDATES, NOT_APPLICABLE, External, hand_out
from harness.loop.documents import EVOLVE, EvolveDoc, read_document
from harness.sim.oracle import Oracle
from harness.sim.world import World
from harness.tree import HarnessTree

HELPED = "spatial_perception"  # gets an insight rule
HURT = "object_recognition"  # gets a trap rule
DECIDED = ("accept", "reject", "probation")


def _world_and_base() -> tuple[World, HarnessTree]:
    world = World.from_config(tiny_cfg().benchmark)
    return world, world.base_harness()


def _unstated(world: World, base: HarnessTree, task_type: str, kind: str) -> str:
    text = base[f"skills/{task_type}/SKILL.md"]
    return next(r.text for r in world.rules_of(task_type, kind) if r.text not in text)


def _edits() -> tuple[str, str]:
    world, base = _world_and_base()
    return _unstated(world, base, HELPED, "insight"), _unstated(world, base, HURT, "trap")


def _jsonl(path: Path, rows: list[dict | str]) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows), encoding="utf-8")
    return path


def _two_edits(path: Path) -> Path:
    insight, trap = _edits()
    return _jsonl(path, [
        {"skill_file": f"skills/{HELPED}/SKILL.md", "ops": [{"op": "add", "new": insight}], "why": "an insight", "source": "person"},
        {"skill_file": f"skills/{HURT}/SKILL.md", "ops": [{"op": "add", "new": trap}], "why": "a trap", "source": "gepa"},
    ])


def _train(root: Path, candidates: Path) -> Path:
    cfg = tiny_cfg("evolve=candidates", f"evolve.candidates_path={candidates}", "tracking=none")
    runner, _, cache = make_runner(root, cfg)
    try:
        runner.train()
    finally:
        cache.close()
    return root / "state"


def _gate_rows(state: Path) -> list[dict]:
    rows = []
    for report in sorted(state.glob("e*/s*/gate/report.json")):
        rows += json.loads(report.read_text())["skills"]
    return rows


def test_the_two_edits_have_the_effect_the_tests_rely_on() -> None:
    world, base = _world_and_base()
    insight, trap = _edits()
    oracle = Oracle(world)

    def with_rule(task_type: str, rule: str) -> HarnessTree:
        path = f"skills/{task_type}/SKILL.md"
        return base.with_files({path: base[path].rstrip("\n") + f"\n- {rule}\n"})

    assert oracle.edit_effect(base, with_rule(HELPED, insight), world.qids_of(HELPED)) > 0.02
    assert oracle.edit_effect(base, with_rule(HURT, trap), world.qids_of(HURT)) < -0.02


def _assert_both_gated(state: Path, sources: dict[str, str], trap: str) -> None:
    doc = read_document(state / "e1" / "s1" / "evolve" / EVOLVE, EvolveDoc)
    assert doc.method == "candidates"
    assert {c.skill_file: c.source for c in doc.candidates} == sources
    assert all(c.case_qids == [] and c.external is not None for c in doc.candidates)
    rows = _gate_rows(state)
    gated = {r["skill_file"]: r for r in rows if r["action"] in DECIDED}
    assert {f: r["source"] for f, r in gated.items()} == sources, rows
    assert all(r["gate_run_id"] and r["n_pairs"] is not None for r in gated.values())
    # proposed once: every later step says there is nothing left
    later = [r for r in rows if (r["epoch"], r["step"]) != (1, 1)]
    assert later and all(r["action"] == NO_CANDIDATES and "every candidate was proposed" in r["reason"] for r in later), later
    assert doc.external is not None and doc.external["left"] == 0 and doc.external["total"] == 2
    # the trap never ships
    delivered = HarnessTree.load(state / "holdout" / "delivered")
    assert trap not in delivered[f"skills/{HURT}/SKILL.md"]


def test_jsonl_edits_reach_the_gate_with_their_source(tmp_path: Path) -> None:
    state = _train(tmp_path / "run", _two_edits(tmp_path / "cands.jsonl"))
    _assert_both_gated(state, {f"{HELPED}/SKILL.md": "person", f"{HURT}/SKILL.md": "gepa"}, _edits()[1])
    doc = read_document(state / "e1" / "s1" / "evolve" / EVOLVE, EvolveDoc)
    assert sorted(c.external["id"] for c in doc.candidates if c.external) == ["line 1", "line 2"]


def _variant(root: Path, base: HarnessTree, changes: dict[str, str]) -> None:
    tree = base
    for task_type, rule in changes.items():
        path = f"skills/{task_type}/SKILL.md"
        tree = tree.with_files({path: tree[path].rstrip("\n") + f"\n- {rule}\n"})
    tree.save(root)


def test_variant_directories_reach_the_gate_with_their_source(tmp_path: Path) -> None:
    _, base = _world_and_base()
    insight, trap = _edits()
    variants = tmp_path / "variants"
    _variant(variants / "a-person", base, {HELPED: insight})
    _variant(variants / "b-optimizer", base, {HURT: trap})
    (variants / "sources.json").write_text(json.dumps({"b-optimizer": {"source": "gepa", "why": "its best tree"}}))
    state = _train(tmp_path / "run", variants)
    _assert_both_gated(state, {f"{HELPED}/SKILL.md": "a-person", f"{HURT}/SKILL.md": "gepa"}, trap)


@pytest.mark.parametrize("line,needle", [
    ('{"skill_file": "skills/x/SKILL.md", "ops": [', "not valid JSON"),
    ({"skill_file": "skills/x/SKILL.md", "ops": [{"op": "add", "new": "r"}]}, "field 'source' is missing"),
    ({"skill_file": "skills/x/SKILL.md", "ops": [{"op": "insert", "new": "r"}], "source": "p"}, "'ops[0].op'"),
    ({"skill_file": "skills/x/SKILL.md", "ops": [{"op": "replace", "new": "r"}], "source": "p"}, "'ops[0].old'"),
    ({"skill_file": "skills/x/SKILL.md", "ops": [{"op": "add", "new": "r", "old": "o"}], "source": "p"}, "'ops[0].old'"),
    ({"skill_file": "skills/x/SKILL.md", "ops": [], "source": "p"}, "field 'ops'"),
    ({"skill_file": "skills/../../etc/SKILL.md", "ops": [{"op": "add", "new": "r"}], "source": "p"}, "escape the harness root"),
    ({"skill_file": "/abs/skills/x/SKILL.md", "ops": [{"op": "add", "new": "r"}], "source": "p"}, "absolute"),
    ({"skill_file": "prompts/x.md", "ops": [{"op": "add", "new": "r"}], "source": "p"}, "skills/<task_type>/SKILL.md"),
    ({"skill_file": "skills/x/SKILL.md", "ops": [{"op": "add", "new": "r"}], "source": "p", "author": "me"}, "unknown field(s) ['author']"),
])
def test_a_malformed_line_is_refused_at_config_load_naming_its_line(tmp_path: Path, line, needle: str) -> None:
    good = {"skill_file": "skills/x/SKILL.md", "ops": [{"op": "add", "new": "a rule"}], "source": "person"}
    path = _jsonl(tmp_path / "cands.jsonl", [good, line])
    with pytest.raises(ConfigError) as err:
        tiny_cfg("evolve=candidates", f"evolve.candidates_path={path}")
    message = str(err.value)
    assert "evolve.candidates_path" in message and "cands.jsonl:2" in message and needle in message, message


def test_config_load_refuses_a_missing_path_and_a_path_without_the_method(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="evolve=candidates needs evolve.candidates_path"):
        tiny_cfg("evolve=candidates")
    with pytest.raises(ConfigError, match="expected an existing .jsonl file"):
        tiny_cfg("evolve=candidates", f"evolve.candidates_path={tmp_path / 'nope.jsonl'}")
    with pytest.raises(ConfigError, match="read only by evolve=candidates"):
        tiny_cfg(f"evolve.candidates_path={_two_edits(tmp_path / 'c.jsonl')}")


def _run_until_evolve(root: Path, candidates: Path) -> Path:
    """prepare .. evolve@e1.s1 (real stage functions); returns the evolve output directory."""
    from harness.kernel.schedule import full_schedule
    from harness.loop.context import make_context
    from harness.loop.runner import run_stage_item

    cfg = tiny_cfg("evolve=candidates", f"evolve.candidates_path={candidates}", "tracking=none")
    runner, _, cache = make_runner(root, cfg)
    ctx = make_context(cfg, root, llm=runner.ctx.llm_override, bench=runner.ctx.bench_override)
    try:
        for item in full_schedule(int(cfg.train.epochs), int(cfg.train.steps_per_epoch)):
            run_stage_item(ctx, item)
            if item.kind == "evolve":
                break
    finally:
        cache.close()
    return ctx.paths.evolve(1, 1)


@pytest.mark.parametrize("row,needle", [
    ({"skill_file": f"skills/{HELPED}/SKILL.md", "ops": [{"op": "replace", "old": "text that is not there", "new": "x"}],
      "source": "person"}, "field 'ops[0].old': the <old> text does not occur"),
    ({"skill_file": "skills/no_such_type/SKILL.md", "ops": [{"op": "add", "new": "r"}], "source": "person"},
     "field 'skill_file': skills/no_such_type/SKILL.md is not a skill file of the starting harness"),
])
def test_what_needs_the_harness_is_refused_at_the_first_step_before_anything_is_written(tmp_path: Path, row, needle) -> None:
    insight, _ = _edits()
    good = {"skill_file": f"skills/{HELPED}/SKILL.md", "ops": [{"op": "add", "new": insight}], "source": "person"}
    path = _jsonl(tmp_path / "cands.jsonl", [good, row])
    with pytest.raises(CandidatesError) as err:
        _run_until_evolve(tmp_path / "run", path)
    assert "cands.jsonl:2" in str(err.value) and needle in str(err.value), str(err.value)
    evolve = tmp_path / "run" / "state" / "e1" / "s1" / "evolve"
    assert not (evolve / EVOLVE).exists() and not (evolve / "DONE.json").exists()


@pytest.mark.parametrize("make,needle", [
    (lambda d, base: base.with_files({"system_prompt.md": "changed"}).save(d), "only skill files"),
    (lambda d, base: HarnessTree({k: v for k, v in base.items() if k != "system_prompt.md"}).save(d), "not a harness tree"),
    (lambda d, base: base.save(d), "identical to the starting harness"),
    (lambda d, base: base.with_files({"skills/new_type/SKILL.md": "x"}).save(d), "not skill files of the starting harness"),
])
def test_a_bad_variant_is_refused_naming_it(tmp_path: Path, make, needle: str) -> None:
    _, base = _world_and_base()
    make(tmp_path / "variants" / "bad", base)
    with pytest.raises(CandidatesError) as err:
        _run_until_evolve(tmp_path / "run", tmp_path / "variants")
    assert "variants/bad" in str(err.value) and needle in str(err.value), str(err.value)


def test_a_variant_that_is_no_harness_tree_gets_the_reason_every_entry_point_gives(tmp_path: Path) -> None:
    """load_variant refuses with load_in_layout's wording (stages.eval/compare say the same of --harness/--candidate),
    named by the variant and its layout."""
    from harness.loop.candidates import load_variant

    (tmp_path / "v").mkdir()
    (tmp_path / "v" / "README.md").write_text("no harness here\n")
    for surface, reason in (("native", "not a harness tree: no system_prompt.md"),
                            ("codex", "not a harness tree: a codex harness needs AGENTS.md")):
        with pytest.raises(CandidatesError) as err:
            load_variant(tmp_path / "v", "variants/v", surface)
        assert str(err.value).startswith(f"variants/v ({surface} layout): {reason}"), str(err.value)


def test_a_changed_candidates_file_refuses_to_continue_the_run(tmp_path: Path) -> None:
    from harness.loop.candidates import proposed_before

    path = _two_edits(tmp_path / "cands.jsonl")
    evolve = _run_until_evolve(tmp_path / "run", path)
    doc = read_document(evolve / EVOLVE, EvolveDoc)
    assert doc.external is not None
    assert proposed_before(tmp_path / "run", "state", 1, 2, 2, doc.external["digest"]) == {"line 1", "line 2"}
    with pytest.raises(CandidatesError, match=r"changed since step e1\.s1"):
        proposed_before(tmp_path / "run", "state", 1, 2, 2, "0" * 16)


def _ops(cid: str, skill: str, rule: str, source: str = "person") -> External:
    return External(cid=cid, where=f"c.jsonl:{cid}", skill_file=skill, source=source, why="",
                    ops=(Edit(op="add", text=rule),))


def test_hand_out_one_per_skill_file_in_file_order_waiting_through_cooldown() -> None:
    skills = {"a/SKILL.md": "## Rules\n- old rule\n", "b/SKILL.md": "## Rules\n- b rule\n"}
    pending = [_ops("1", "a/SKILL.md", "first"), _ops("2", "a/SKILL.md", "second"), _ops("3", "b/SKILL.md", "third"),
               _ops("4", "c/SKILL.md", "for a file this step does not read")]
    groups = [("a/SKILL.md", ["a"]), ("b/SKILL.md", ["b"])]
    out = hand_out(pending, groups, skills, cooldown={"b": 1}, max_chars=6000)
    assert [c.external["id"] for c in out.candidates if c.external] == ["1"]  # one per file, the first in file order
    assert out.proposed == ["1"]
    assert [(s.skill_file, s.action) for s in out.skipped] == [("b/SKILL.md", "skipped_cooldown")]
    assert "1 candidate(s) wait" in out.skipped[0].reason
    # next step: "2" for a, "3" for b (its rest is over); "4" still waits for a step that reads c
    rest = [c for c in pending if c.cid not in out.proposed]
    out2 = hand_out(rest, groups, skills, cooldown={}, max_chars=6000)
    assert [c.external["id"] for c in out2.candidates if c.external] == ["2", "3"]
    out3 = hand_out([pending[3]], groups, skills, cooldown={}, max_chars=6000)
    assert out3.candidates == [] and {s.action for s in out3.skipped} == {NO_CANDIDATES}
    assert all("1 left for other skill files" in s.reason for s in out3.skipped)


def test_a_candidate_that_no_longer_applies_is_recorded_and_the_next_one_is_tried() -> None:
    skills = {"a/SKILL.md": "## Rules\n- already stated\n"}
    stale = External(cid="1", where="c.jsonl:1", skill_file="a/SKILL.md", source="person", why="",
                     ops=(Edit(op="replace", old="text an accepted edit removed", text="x"),))
    out = hand_out([stale, _ops("2", "a/SKILL.md", "new rule", source="gepa")], [("a/SKILL.md", ["a"])], skills,
                   cooldown={}, max_chars=6000)
    assert [(s.action, s.source) for s in out.skipped] == [(NOT_APPLICABLE, "person")]
    assert "not_found" in out.skipped[0].reason and "c.jsonl:1" in out.skipped[0].reason
    assert [(c.source, "- new rule" in c.record.new_text.splitlines()) for c in out.candidates] == [("gepa", True)]
    assert out.proposed == ["1", "2"]
