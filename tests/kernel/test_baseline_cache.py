import os

import pytest

from harness.kernel.baseline_cache import BaselineCache


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
    with caplog.at_level("WARNING", logger="harness.kernel.baseline_cache"):
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
