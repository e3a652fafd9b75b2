from types import SimpleNamespace

import pytest

from harness.contracts.solver import DEFAULT_SKILL, skill_path
from harness.sim.world import TASK_TYPE_NAMES, World, WorldParams


def test_same_seed_same_world_and_different_seed_differs():
    a, b, c = World.generate(7), World.generate(7), World.generate(8)
    assert a.questions == b.questions
    assert a.rules == b.rules and a.truth == b.truth
    assert a.base_harness() == b.base_harness()
    assert a.questions != c.questions
    assert [r.text for r in a.rules.values()] != [r.text for r in c.rules.values()]


def test_default_shape_unique_questions_and_answers():
    world = World.generate(3)
    assert world.task_type_names == list(TASK_TYPE_NAMES)
    assert len(world.questions) == 11 * 60
    assert len({q.qid for q in world.questions}) == len(world.questions)
    assert len({q.question for q in world.questions}) == len(world.questions)
    for q in world.questions:
        assert len(q.choices) == 4 and len(set(q.choices)) == 4
        assert q.answer in "ABCD"
        assert q.difficulty == world.truth[q.qid].difficulty


def test_rules_per_type_and_heterogeneous_coverage():
    p = WorldParams()
    world = World.generate(5)
    for spec in world.task_types:
        assert len(spec.of_kind("insight")) == p.n_insights
        assert len(spec.of_kind("trap")) == p.n_traps
        assert len(spec.of_kind("neutral")) == p.n_neutrals
        assert all(r.weight > 0 for r in spec.of_kind("insight"))
        assert all(r.weight < 0 for r in spec.of_kind("trap"))
        assert all(r.weight == 0 for r in spec.of_kind("neutral"))
        qids = world.qids_of(spec.name)
        for insight in spec.of_kind("insight"):
            n_apply = sum(any(rid == insight.rule_id for rid, _ in world.truth[q].applies) for q in qids)
            assert 0 < n_apply < len(qids)  # helps a subset only
        cues = [r.cue for r in spec.rules]
        assert len(set(cues)) == len(cues)
    assert len({r.text for r in world.rules.values()}) == len(world.rules)


def test_base_harness_native_layout():
    world = World.generate(7)
    tree = world.base_harness()
    assert "system_prompt.md" in tree and "tools/lookup_frames.md" in tree
    assert skill_path(DEFAULT_SKILL) in tree
    own = [t for t in world.task_type_names if skill_path(t) in tree]
    assert len(own) == WorldParams().base_skill_types
    for t in own:
        text = tree[skill_path(t)]
        assert text.startswith("---\nname: ") and "## Rules" in text


def test_smaller_world_and_bad_params():
    world = World.generate(1, n_task_types=3, questions_per_type=10, n_choices=5)
    assert len(world.questions) == 30 and all(len(q.choices) == 5 for q in world.questions)
    with pytest.raises(ValueError, match="n_task_types"):
        World.generate(1, n_task_types=12)
    with pytest.raises(ValueError, match="questions_per_type"):
        World.generate(1, questions_per_type=0)
    with pytest.raises(ValueError, match="n_choices"):
        World.generate(1, n_choices=1)


def test_from_config_reconstructs_the_same_world():
    cfg = SimpleNamespace(seed=7, n_task_types=11, questions_per_type=60, n_choices=4)
    assert World.from_config(cfg).questions == World.generate(7).questions
