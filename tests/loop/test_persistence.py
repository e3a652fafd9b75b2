"""harness/loop/persistence.py: the baseline cache file, the ladder file and the pools file."""

import json
import os

import pytest

from harness.kernel.ladder import GatePools, pool_fingerprint
from harness.kernel.pools import PoolParams
from harness.loop.persistence import DurableBaselineCache as BaselineCache
from harness.loop.persistence import build_or_load_pools, load_gate_pools, load_state_gate_pools, read_pools, save_gate_pools
from harness.loop.state import StateError


def questions(sizes):
    return [(f"{t}_{i:03d}", t) for t, n in sizes.items() for i in range(n)]


def test_put_get_and_reload(tmp_path):
    path = tmp_path / "baseline.jsonl"
    cache = BaselineCache(path)
    cache.put("t", "h1", "v1", "q1", 7, True)
    cache.put("t", "h1", "v1", "q1", 8, False)
    cache.put("t", "h1", "v1", "q1", 7, True)  # same value: no-op
    reopened = BaselineCache(path)
    assert reopened.get("t", "h1", "v1", "q1", 7) is True
    assert reopened.get("t", "h2", "v1", "q1", 7) is None  # another skill hash is another key
    assert reopened.samples("t", "h1", "v1", "q1") == {7: True, 8: False}
    assert len(path.read_text().splitlines()) == 2
    with pytest.raises(ValueError, match="conflicting"):
        reopened.put("t", "h1", "v1", "q1", 7, False)
    with pytest.raises(ValueError, match="bool"):
        reopened.put("t", "h1", "v1", "q2", 1, None)


def test_disk_before_memory(tmp_path, monkeypatch):
    cache = BaselineCache(tmp_path / "b.jsonl")

    def failing_fsync(fd):
        raise OSError("disk full")

    monkeypatch.setattr(os, "fsync", failing_fsync)
    with pytest.raises(OSError):
        cache.put("t", "h", "v", "q", 1, True)
    assert cache.get("t", "h", "v", "q", 1) is None


def test_torn_last_line_is_cut_and_corrupt_middle_line_named(tmp_path, caplog):
    path = tmp_path / "b.jsonl"
    cache = BaselineCache(path)
    cache.put("t", "h", "v", "q", 1, True)
    with open(path, "a") as handle:
        handle.write('{"task_type": "t", "sk')
    with caplog.at_level("WARNING", logger="harness.loop.persistence"):
        reopened = BaselineCache(path)
    assert [r.getMessage() for r in caplog.records] == [f"{path}:2: cut off a torn last line (22 bytes, a write interrupted by a crash)"]
    reopened.put("t", "h", "v", "q", 2, False)
    assert BaselineCache(path).samples("t", "h", "v", "q") == {1: True, 2: False}
    path.write_text('garbage\n' + path.read_text())
    with pytest.raises(ValueError, match=r"b.jsonl:1"):
        BaselineCache(path)


def test_put_many_checks_every_row_first_then_writes_once_and_indexes(tmp_path):
    path = tmp_path / "bc.jsonl"
    cache = BaselineCache(path)
    cache.put("t", "h", "v0", "q1", 0, True)
    rows = [("t", "h", "v0", "q1", 1, False), ("t", "h", "v0", "q2", 0, True), ("t", "h", "v0", "q1", 0, True)]  # last: known, same value
    cache.put_many(rows)
    assert cache.samples("t", "h", "v0", "q1") == {0: True, 1: False} and cache.samples("t", "h", "v0", "q2") == {0: True}
    assert cache.samples("t", "h", "v1", "q1") == {}  # another baseline version shares nothing
    assert len(path.read_text().splitlines()) == 3
    before = path.read_text()
    with pytest.raises(ValueError, match="conflicting outcome"):
        cache.put_many([("t", "h", "v0", "q3", 0, True), ("t", "h", "v0", "q1", 1, True)])
    with pytest.raises(ValueError, match="must be a bool"):
        cache.put_many([("t", "h", "v0", "q4", 0, True), ("t", "h", "v0", "q4", 1, None)])
    assert path.read_text() == before and cache.get("t", "h", "v0", "q3", 0) is None  # a rejected batch writes nothing
    with pytest.raises(ValueError, match="conflicting outcome"):
        cache.put_many([("t", "h", "v0", "q5", 0, True), ("t", "h", "v0", "q5", 0, False)])  # within one batch
    reopened = BaselineCache(path)
    assert reopened.samples("t", "h", "v0", "q1") == {0: True, 1: False} and len(reopened) == 3
    samples = reopened.samples("t", "h", "v0", "q1")
    samples[7] = True  # a copy: callers cannot change the cache
    assert reopened.samples("t", "h", "v0", "q1") == {0: True, 1: False}


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


def test_a_retired_baseline_is_never_served_again_after_a_reload(tmp_path):
    path = tmp_path / "baseline_cache.jsonl"
    cache = BaselineCache(path)
    cache.put_many([("t", "h1", "v0", "q1", 10, True), ("t", "h2", "v0", "q1", 10, False)])
    cache.retire("t", "h1", "v0")
    cache.retire("t", "h1", "v0")  # already retired: no second row
    assert cache.samples("t", "h1", "v0", "q1") == {} and cache.samples("t", "h2", "v0", "q1") == {10: False}
    assert path.read_text().count('"retired"') == 1
    again = BaselineCache(path)
    assert again.retired("t", "h1", "v0") and again.samples("t", "h1", "v0", "q1") == {}
    assert again.samples("t", "h2", "v0", "q1") == {10: False}
    assert again.get("t", "h1", "v0", "q1", 10) is True  # the outcome stays stored: the same sample keeps its value
    # a qid that happens to be "retired" is an outcome row like any other
    again.put("t", "h2", "v0", "retired", 11, True)
    assert BaselineCache(path).samples("t", "h2", "v0", "retired") == {11: True}


def test_a_malformed_retire_row_is_named(tmp_path):
    path = tmp_path / "baseline_cache.jsonl"
    path.write_text('{"retired": ["t", "h1"]}\n{"correct": true, "prompts_version": "v0", "qid": "q", "sample_index": 1, '
                    '"skill_hash": "h", "task_type": "t"}\n')
    with pytest.raises(ValueError, match=r"baseline_cache.jsonl:1: corrupt baseline cache line"):
        BaselineCache(path)
