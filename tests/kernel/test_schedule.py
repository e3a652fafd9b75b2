"""harness/kernel/schedule.py: the one derivation of the schedule and the state layout."""

import pytest

from harness.config.resolvers import epoch_schedule_items, step_schedule_items
from harness.kernel.schedule import StageItem, StateLayout, epoch_items, full_schedule, step_items, steps_per_epoch


def test_full_schedule_order_and_names():
    names = [i.name for i in full_schedule(2, 2)]
    assert names[:6] == ["prepare", "pools", "batches@e1", "rollout@e1.s1", "evolve@e1.s1", "gate@e1.s1"]
    assert names[-4:] == ["gate@e2.s2", "slow@e2", "certify", "holdout"]
    assert len(names) == 2 + 2 * (1 + 2 * 3 + 1) + 2
    with pytest.raises(ValueError, match="train.epochs"):
        full_schedule(0, 2)
    with pytest.raises(ValueError, match="steps_per_epoch"):
        full_schedule(1, 0)


def test_layout_chains_every_step_to_an_earlier_output():
    layout = StateLayout("st/")
    assert layout.prev_of_step(1, 1) == "st/init"
    assert layout.prev_of_step(1, 3) == "st/e1/s2/gate"
    assert layout.prev_of_step(2, 1) == "st/e1/slow"
    assert layout.batches(2) == "st/e2/batches.json" and layout.holdout == "st/holdout"
    with pytest.raises(ValueError, match="not a step stage"):
        layout.of_step("slow", 1, 1)
    with pytest.raises(ValueError, match="state_dir"):
        StateLayout("/")


def test_resolver_items_are_the_schedule_items():
    assert step_schedule_items(2, 3, "state") == step_items(2, 3, "state")
    assert epoch_schedule_items(2, 3, "state") == epoch_items(2, 3, "state")
    assert step_items(1, 2) == [{"epoch": 1, "step": 1, "prev": "state/init"}, {"epoch": 1, "step": 2, "prev": "state/e1/s1/gate"}]
    assert epoch_items(2, 1) == [{"epoch": 1, "prev": "state/init"}, {"epoch": 2, "prev": "state/e1/slow"}]


def test_steps_per_epoch_is_a_ceiling():
    assert (steps_per_epoch(10, 5), steps_per_epoch(11, 5), steps_per_epoch(0, 5)) == (2, 3, 1)
    with pytest.raises(ValueError, match="batch_size"):
        steps_per_epoch(10, 0)
    assert StageItem("slow", 3).name == "slow@e3"
