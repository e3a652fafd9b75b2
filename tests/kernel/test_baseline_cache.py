"""The in-memory BaselineCache and its row format (the file: tests/loop/test_persistence.py)."""

import pytest

from harness.kernel.baseline_cache import BaselineCache, BaselineKey, decode_row, encode_row


def test_novel_rows_checks_everything_and_changes_nothing():
    cache = BaselineCache()
    cache.put("t", "h", "v0", "q1", 0, True)
    new = cache.novel_rows([("t", "h", "v0", "q1", 0, True), ("t", "h", "v0", "q2", 3, False)])
    assert new == {BaselineKey("t", "h", "v0", "q2", 3): False} and len(cache) == 1
    with pytest.raises(ValueError, match="conflicting outcome"):
        cache.novel_rows([("t", "h", "v0", "q3", 0, True), ("t", "h", "v0", "q1", 0, False)])
    with pytest.raises(ValueError, match="must be a bool"):
        cache.novel_rows([("t", "h", "v0", "q4", 0, None)])
    cache.add(new)
    assert cache.samples("t", "h", "v0", "q2") == {3: False} and cache.get("t", "h", "v0", "q2", 3) is False


def test_row_format_round_trips_and_rejects_non_bool():
    key = BaselineKey("t", "h", "v1", "q", 7)
    line = encode_row(key, True)
    assert line == '{"correct": true, "prompts_version": "v1", "qid": "q", "sample_index": 7, "skill_hash": "h", "task_type": "t"}'
    assert decode_row(line) == (key, True)
    with pytest.raises(ValueError, match="bool"):
        decode_row(line.replace("true", "1"))
    with pytest.raises(KeyError):
        decode_row('{"qid": "q"}')


def test_a_soft_gates_value_is_cached_as_it_is_and_checked():
    """gate.metric soft / mixed: the cache stores the metric's value in [0, 1] (its rounding is replayed from qid and
    sample index), and refuses anything else, naming the qid."""
    key = BaselineKey("t", "h", "v1", "q", 7)
    assert decode_row(encode_row(key, 0.3125)) == (key, 0.3125)
    cache = BaselineCache()
    cache.put("t", "h", "v1", "q", 7, 0.3125)
    assert cache.samples("t", "h", "v1", "q") == {7: 0.3125}
    with pytest.raises(ValueError, match="conflicting outcome"):
        cache.put("t", "h", "v1", "q", 7, 0.5)
    for bad in (1.5, -0.1, float("nan"), "0.3"):
        with pytest.raises(ValueError, match=r"'q9' must be a bool or a float in \[0, 1\]"):
            cache.put("t", "h", "v1", "q9", 1, bad)
    with pytest.raises(ValueError, match="float in"):
        decode_row(encode_row(key, 0.5).replace("0.5", "2.5"))
