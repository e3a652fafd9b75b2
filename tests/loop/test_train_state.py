"""harness/loop/train_state.py: the training state's transitions."""

from harness.kernel.types import CaseSample, ToolCasePack
from harness.loop.train_state import TOOL_PACK_EXAMPLES, TrainState


def test_step_outcomes_keep_the_old_value_on_infra():
    state = TrainState(correctness={"a": True, "b": False})
    state.absorb_step_outcomes({"a": None, "b": True, "c": False})
    assert state.correctness == {"a": True, "b": True, "c": False}


def test_case_packs_accumulate_and_cap_examples():
    state = TrainState()
    case = CaseSample("q", "t", "Q?", None, "A", False)
    many = {f"k{i}": "x" for i in range(TOOL_PACK_EXAMPLES + 3)}
    state.absorb_case_packs(1, [case], {"calc": ToolCasePack("calc", 1, calls=2, errors=1, examples=many)})
    state.absorb_case_packs(1, [], {"calc": ToolCasePack("calc", 1, calls=3, errors=0, examples={"z": "y"})})
    assert len(state.system_packs) == 1 and state.system_packs[0].cases == [case]
    pack = state.tool_packs["calc"]
    assert (pack.calls, pack.errors, len(pack.examples)) == (5, 1, TOOL_PACK_EXAMPLES) and "z" not in pack.examples


def test_cooldown_step_spares_fresh_rests():
    state = TrainState(gate_cooldown={"a": 1, "b": 2, "c": 3})  # c started resting in this gate
    state.pass_cooldown_step({"a": 1, "b": 2}, just_cooled=["c"])
    assert state.gate_cooldown == {"b": 1, "c": 3}


def test_epoch_close_counts_towards_early_stop_and_begin_clears_accumulators():
    state = TrainState(changed_task_types_this_epoch={"t"}, tool_packs={"calc": ToolCasePack("calc", 1)})
    state.close_epoch(improved_best=False)
    state.close_epoch(improved_best=False)
    assert state.steps_since_best_improved == 2 and state.early_stop_due(2) and not state.early_stop_due(3)
    assert not state.early_stop_due(0)  # patience <= 0 disables
    state.close_epoch(improved_best=True)
    assert state.steps_since_best_improved == 0
    state.begin_epoch("v3", "v1", {"t/SKILL.md": "text"})
    assert (state.baseline_skills_version, state.baseline_prompts_version) == ("v3", "v1")
    assert state.epoch_start_skills == {"t/SKILL.md": "text"}
    assert not state.changed_task_types_this_epoch and not state.system_packs and not state.tool_packs
