import copy
import json
import logging
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.kernel.fdr import FdrState
from harness.kernel.types import CaseSample, Probation, RejectedEdit, SystemCasePack, ToolCasePack
from harness.loop.checkpoint import (
    STATE_KEYS,
    CheckpointError,
    Progress,
    ResumeRefused,
    TrainState,
    check_resume,
    config_fingerprint,
    deserialize_progress,
    deserialize_state,
    load_checkpoint,
    save_checkpoint,
    serialize_progress,
    serialize_state,
)
from harness.loop.train_state import EvalRef

SEED_FIELDS = {
    "correctness", "eval_prev_acc", "eval_prev_run_id", "baseline_skills_version", "baseline_prompts_version",
    "steps_since_best_improved", "epoch_start_skills", "changed_task_types_this_epoch", "rejected_buffer",
    "system_packs", "tool_packs", "probations", "gate_cooldown", "gate_epoch_observed",
}
ADDED_FIELDS = {"gate_fdr", "eval_prev_ref"}  # issue 13: the run's e-LOND sequence must survive resume; eval_prev's answers
# in full (train.reuse_identical)

CFG = {
    "benchmark": {"name": "sim", "seed": 7, "task_types": ["a", "b"]},
    "pools": {"val_size": 220, "seed": 11},
    "batching": {"batch_size": 44},
    "train": {"epochs": 3, "seed": 0, "run_name": "x", "concurrency": 16},
    "gate": {"lambda": 3.0, "block_size": 20},
    "evolve": {"edit_budget_start": 3},
    "llm": {"model": "m", "temperature": 0.7},
}


def _edit(tt="count", n=0):
    return RejectedEdit(task_type=tt, skill_file=f"{tt}/SKILL.md", summary=f"edit {n}", epoch=1, step=n, reason="gate reject")


def _state():
    case = CaseSample("q1", "count", "How many?", "B", "A", False, "trace")
    return TrainState(
        correctness={"q1": False, "q2": True},
        eval_prev_acc=0.5,
        eval_prev_run_id="r_e1_slowR",
        baseline_skills_version="v3",
        baseline_prompts_version="v1",
        steps_since_best_improved=2,
        epoch_start_skills={"count/SKILL.md": "old text"},
        changed_task_types_this_epoch={"ocr", "count"},
        rejected_buffer={"count": [_edit("count", 1), _edit("count", 2)]},
        system_packs=[SystemCasePack(epoch=1, cases=[case])],
        tool_packs={"zoom": ToolCasePack("zoom", 1, calls=5, errors=1, examples={"q1": "bad args"})},
        probations={"count": Probation("count", "count/SKILL.md", "v2", 1, 3, {"q1": True}, [_edit("count", 4)], "v3", "probation")},
        gate_cooldown={"ocr": 1},
        gate_epoch_observed={"count": True, "ocr": False},
        gate_fdr=FdrState(tests=5, discoveries=2, spent=0.0061),
        eval_prev_ref=EvalRef("r_e1_slowR", "v3", "v1", {"q1": False, "q2": True, "q3": None}, {"q1": 0.25, "q2": 0.5, "q3": None},
                              {"q1": "3f1a", "q2": "3f1a", "q3": "9b0c"}),
    )


def test_field_set_is_exactly_the_seeds():
    assert set(STATE_KEYS) == SEED_FIELDS | ADDED_FIELDS
    assert set(serialize_state(_state())) == SEED_FIELDS | ADDED_FIELDS


def test_roundtrip_revives_nested_dataclasses():
    d = json.loads(json.dumps(serialize_state(_state())))
    assert d["changed_task_types_this_epoch"] == ["count", "ocr"]
    back = deserialize_state(d)
    assert back == _state()
    assert isinstance(back.system_packs[0].cases[0], CaseSample)
    assert isinstance(back.probations["count"].pending_edits[0], RejectedEdit)
    assert isinstance(back.tool_packs["zoom"], ToolCasePack)
    assert back.changed_task_types_this_epoch == {"count", "ocr"}


@pytest.mark.parametrize("change, where", [
    (lambda ref: ref["outcomes"].update(q1="yes"), "state.eval_prev_ref.outcomes['q1']"),
    (lambda ref: ref["soft"].update(q2="high"), "state.eval_prev_ref.soft['q2']"),
    (lambda ref: ref["inputs"].update(q3=None), "state.eval_prev_ref.inputs['q3']"),
    (lambda ref: ref.pop("inputs"), "key 'inputs' is missing"),
    (lambda ref: ref.pop("skills_version"), "key 'skills_version' is missing"),
    (lambda ref: ref.update(extra=1), "extra"),
])
def test_a_malformed_eval_prev_ref_is_a_checkpoint_error_naming_the_field(change, where):
    d = json.loads(json.dumps(serialize_state(_state())))
    change(d["eval_prev_ref"])
    with pytest.raises(CheckpointError, match=re.escape(where)):
        deserialize_state(d)


@pytest.mark.parametrize("key", sorted(SEED_FIELDS))
def test_missing_top_level_key_is_hard_failure(key):
    d = serialize_state(_state())
    del d[key]
    with pytest.raises(CheckpointError, match=f"key '{key}' is missing"):
        deserialize_state(d)


@pytest.mark.parametrize(
    "path, key",
    [
        (("system_packs", 0, "cases", 0), "correct"),
        (("probations", "count", "pending_edits", 0), "summary"),
        (("probations", "count"), "anchor_skills_version"),
        (("tool_packs", "zoom"), "errors"),
        (("rejected_buffer", "count", 1), "step"),
    ],
)
def test_missing_nested_key_is_hard_failure_even_with_a_default(path, key):
    d = serialize_state(_state())
    node = d
    for part in path:
        node = node[part]
    del node[key]
    with pytest.raises(CheckpointError, match=f"key '{key}' is missing"):
        deserialize_state(d)


@pytest.mark.parametrize(
    "mutate, match",
    [
        (lambda d: d.update(extra=1), "unexpected key"),
        (lambda d: d["correctness"].update(q3="yes"), r"correctness\['q3'\]"),
        (lambda d: d.update(steps_since_best_improved=True), "steps_since_best_improved"),
        (lambda d: d.update(changed_task_types_this_epoch="count"), "changed_task_types_this_epoch"),
        (lambda d: d["system_packs"][0]["cases"][0].update(correct="no"), "correct"),
        (lambda d: d["probations"].update(ocr=d["probations"]["count"]), "holds a probation of task type 'count'"),
        (lambda d: d["gate_epoch_observed"].update(x=1), "gate_epoch_observed"),
        (lambda d: d["gate_fdr"].update(discoveries=9), "discoveries"),
        (lambda d: d["gate_fdr"].pop("spent"), "gate_fdr"),
    ],
)
def test_malformed_values_are_refused(mutate, match):
    d = copy.deepcopy(serialize_state(_state()))
    mutate(d)
    with pytest.raises(CheckpointError, match=match):
        deserialize_state(d)


def test_progress_roundtrip_and_phase():
    p = Progress(epoch=2, step=3, phase="epoch_done", global_step=13)
    assert deserialize_progress(serialize_progress(p)) == p
    d = serialize_progress(p)
    d["phase"] = "halfway"
    with pytest.raises(CheckpointError, match="phase"):
        deserialize_progress(d)
    del d["global_step"]
    with pytest.raises(CheckpointError, match="'global_step' is missing"):
        deserialize_progress(d)


def test_save_load_atomic(tmp_path):
    path = tmp_path / "state" / "checkpoint.json"
    progress = Progress(epoch=1, step=2, global_step=2)
    save_checkpoint(path, _state(), progress, CFG)
    ck = load_checkpoint(path, CFG)
    assert ck.state == _state() and ck.progress == progress
    assert sorted(p.name for p in path.parent.iterdir()) == ["checkpoint.json"]
    before = path.read_bytes()
    bad = _state()
    bad.eval_prev_acc = float("nan")
    with pytest.raises(CheckpointError):
        save_checkpoint(path, bad, progress, CFG)
    assert path.read_bytes() == before


def test_load_errors(tmp_path):
    with pytest.raises(CheckpointError, match="does not exist"):
        load_checkpoint(tmp_path / "none.json")
    path = tmp_path / "c.json"
    path.write_text("{truncated")
    with pytest.raises(CheckpointError, match="not valid JSON"):
        load_checkpoint(path)
    save_checkpoint(path, _state(), Progress(), CFG)
    doc = json.loads(path.read_text())
    del doc["state"]["gate_epoch_observed"]
    path.write_text(json.dumps(doc))
    with pytest.raises(CheckpointError, match="'gate_epoch_observed' is missing"):
        load_checkpoint(path)
    save_checkpoint(path, _state(), Progress(), CFG)
    doc = json.loads(path.read_text())
    doc["config"]["structural"]["pools.seed"] = 99
    path.write_text(json.dumps(doc))
    with pytest.raises(CheckpointError, match="fingerprint"):
        load_checkpoint(path)


def test_fingerprint_key_split():
    fp = config_fingerprint(CFG)
    assert set(fp.structural) == {"benchmark.name", "benchmark.seed", "benchmark.task_types", "pools.val_size",
                                  "pools.seed", "batching.batch_size", "train.epochs", "train.seed", "llm.model",
                                  "llm.temperature"}
    assert set(fp.decision) == {"gate.lambda", "gate.block_size", "evolve.edit_budget_start"}
    other = copy.deepcopy(CFG)
    other["llm"].update(concurrency=4, timeout_s=5.0, api_key_env="OTHER_KEY")  # engineering keys: how, not which model
    other["train"]["run_name"] = "y"
    assert config_fingerprint(other) == fp  # neither structural nor decision


@pytest.mark.parametrize("section, key, value", [("pools", "val_size", 100), ("train", "epochs", 5), ("benchmark", "task_types", ["a"]),
                                                ("batching", "new_key", 1), ("llm", "model", "another-model"),
                                                ("llm", "temperature", 0.0), ("llm", "base_url", "http://127.0.0.1:9/v1")])
def test_structural_change_refuses_resume(tmp_path, section, key, value):
    path = tmp_path / "c.json"
    save_checkpoint(path, _state(), Progress(), CFG)
    changed = copy.deepcopy(CFG)
    changed[section][key] = value
    with pytest.raises(ResumeRefused) as err:
        load_checkpoint(path, changed)
    assert err.value.changed[0].startswith(f"{section}.{key}")
    assert f"{section}.{key}" in str(err.value)


def test_decision_change_only_warns(tmp_path, caplog):
    path = tmp_path / "c.json"
    save_checkpoint(path, _state(), Progress(), CFG)
    changed = copy.deepcopy(CFG)
    changed["gate"]["lambda"] = 2.0
    changed["evolve"]["edit_budget_start"] = 5
    with caplog.at_level(logging.WARNING, logger="harness.loop.checkpoint"):
        ck = load_checkpoint(path, changed)
    assert ck.state == _state()
    assert "gate.lambda (3.0 -> 2.0)" in caplog.text and "evolve.edit_budget_start" in caplog.text
    assert check_resume(config_fingerprint(CFG), config_fingerprint(CFG)) == []


# ---------------------------------------------------------------- property test

names = st.text(st.characters(codec="utf-8"), min_size=1, max_size=8)
small_int = st.integers(min_value=-3, max_value=10**6)
rejected = st.builds(RejectedEdit, task_type=names, skill_file=names, summary=st.text(), epoch=small_int, step=small_int, reason=st.text())
cases = st.builds(CaseSample, qid=names, task_type=names, question=st.text(), predicted=st.none() | st.text(),
                  answer=st.text(), correct=st.booleans(), trace_excerpt=st.text())


def _rejected_buffer():
    return st.dictionaries(names, st.lists(rejected, max_size=3)).map(
        lambda d: {tt: [RejectedEdit(tt, e.skill_file, e.summary, e.epoch, e.step, e.reason) for e in es] for tt, es in d.items()}
    )


def _probations():
    prob = st.builds(Probation, task_type=names, skill_file=names, anchor_skills_version=names, opened_epoch=small_int,
                     opened_step=small_int, correctness_snapshot=st.dictionaries(names, st.booleans(), max_size=4),
                     pending_edits=st.lists(rejected, max_size=3), accepted_version=st.text(), kind=st.sampled_from(["probation", "accepted"]))
    return st.dictionaries(names, prob, max_size=3).map(lambda d: {tt: Probation(**{**p.__dict__, "task_type": tt}) for tt, p in d.items()})


def _tool_packs():
    pack = st.builds(ToolCasePack, tool=names, epoch=small_int, calls=small_int, errors=small_int,
                     examples=st.dictionaries(names, st.text(), max_size=3))
    return st.dictionaries(names, pack, max_size=3).map(lambda d: {t: ToolCasePack(**{**p.__dict__, "tool": t}) for t, p in d.items()})


states = st.builds(
    TrainState,
    correctness=st.dictionaries(names, st.booleans(), max_size=6),
    eval_prev_acc=st.none() | st.floats(min_value=0, max_value=1),
    eval_prev_run_id=st.none() | names,
    baseline_skills_version=names,
    baseline_prompts_version=names,
    steps_since_best_improved=small_int,
    epoch_start_skills=st.dictionaries(names, st.text(), max_size=3),
    changed_task_types_this_epoch=st.sets(names, max_size=4),
    rejected_buffer=_rejected_buffer(),
    system_packs=st.lists(st.builds(SystemCasePack, epoch=small_int, cases=st.lists(cases, max_size=3)), max_size=3),
    tool_packs=_tool_packs(),
    probations=_probations(),
    gate_cooldown=st.dictionaries(names, small_int, max_size=3),
    gate_epoch_observed=st.dictionaries(names, st.booleans(), max_size=3),
    gate_fdr=st.builds(lambda t, d, x: FdrState(t, min(d, t), x), st.integers(0, 10**6), st.integers(0, 10**6), st.floats(min_value=0, max_value=0.1)),
)
progresses = st.builds(Progress, epoch=small_int, step=small_int, phase=st.sampled_from(["in_epoch", "epoch_done"]),
                       global_step=small_int)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(state=states, progress=progresses)
def test_roundtrip_property(state, progress):
    text = json.dumps({"s": serialize_state(state), "p": serialize_progress(progress)}, allow_nan=False)
    doc = json.loads(text)
    assert deserialize_state(doc["s"]) == state
    assert deserialize_progress(doc["p"]) == progress
