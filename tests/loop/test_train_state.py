"""harness/loop/train_state.py: the training state's transitions."""

from harness.kernel.types import CaseSample, Probation, RejectedEdit, ToolCasePack
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


def test_a_second_probation_merges_keeping_the_oldest_anchor():
    a = Probation("t", "t/SKILL.md", "v1", 1, 1, {"q1": True}, [RejectedEdit("t", "t/SKILL.md", "e1", 1, 1)], "v2", "accepted")
    b = Probation("t", "t/SKILL.md", "v2", 1, 3, {"q1": False, "q2": True}, [RejectedEdit("t", "t/SKILL.md", "e2", 1, 3)], "v3", "probation")
    state = TrainState()
    state.open_probation("t", a)
    assert state.probations["t"] is a
    state.open_probation("t", b)
    m = state.probations["t"]
    assert m.anchor_skills_version == "v1" and m.accepted_version == "v3" and m.kind == "probation"
    assert m.correctness_snapshot == {"q1": True, "q2": True} and len(m.pending_edits) == 2
