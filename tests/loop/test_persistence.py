"""harness/loop/persistence.py: the ladder file and the pools file."""

import json

import pytest

from harness.kernel.ladder import GatePools, pool_fingerprint
from harness.kernel.pools import PoolParams
from harness.loop.persistence import build_or_load_pools, load_gate_pools, load_state_gate_pools, read_pools, save_gate_pools
from harness.loop.state import StateError


def questions(sizes):
    return [(f"{t}_{i:03d}", t) for t, n in sizes.items() for i in range(n)]


def test_save_load_and_fingerprint_mismatch_raises(tmp_path):
    path = tmp_path / "gate_pools.json"
    validation = {"t": ["a", "b"], "u": ["c"]}
    gp = GatePools.build(validation)
    gp.update_from_run("x_e1_slowR", [("a", 1, True)], gamma=0.3)
    save_gate_pools(path, gp)
    assert not list(tmp_path.glob("*.tmp"))
    again = load_state_gate_pools(tmp_path, {"u": ["c"], "t": ["b", "a"]})  # order-free fingerprint
    assert again.entries("t")[0].p_hat == pytest.approx(2 / 3)
    with pytest.raises(RuntimeError, match="fingerprint"):
        load_state_gate_pools(tmp_path, {"t": ["a", "b", "z"], "u": ["c"]})
    data = json.loads(path.read_text())
    data["task_types"]["t"].append({"qid": "sneaky", "p_hat": None, "n_obs": 0, "sources": []})
    path.write_text(json.dumps(data))
    with pytest.raises(RuntimeError, match="corrupt"):
        load_gate_pools(path, expected_fingerprint=pool_fingerprint(validation))


def test_frozen_file_is_reused_and_old_format_rejected(tmp_path):
    path = tmp_path / "pools.json"
    qs = questions({"a": 40, "b": 40})
    params = PoolParams(test_size=20, val_size=20, diagnosis_size=20, eval_min_per_class=5, seed=1)
    first = build_or_load_pools(path, qs, params)
    again = build_or_load_pools(path, qs, PoolParams(test_size=30, val_size=10, diagnosis_size=5, eval_min_per_class=2, seed=9))
    assert again == first  # frozen: new params are not re-applied
    path.write_text(json.dumps({"validation": [], "diagnosis": []}))
    with pytest.raises(ValueError, match="no 'test' key"):
        build_or_load_pools(path, qs, params)
    path.write_text(json.dumps(first.to_json()))
    with pytest.raises(ValueError, match="not in the questions"):
        build_or_load_pools(path, questions({"a": 40}), params)


def test_read_pools_names_the_missing_list(tmp_path):
    path = tmp_path / "pools.json"
    path.write_text(json.dumps({"test": [], "validation": []}))
    with pytest.raises(StateError, match=r"pools.json: pools file has no 'diagnosis' list"):
        read_pools(path)
