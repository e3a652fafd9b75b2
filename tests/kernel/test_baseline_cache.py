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


def test_torn_last_line_is_cut_and_corrupt_middle_line_named(tmp_path):
    path = tmp_path / "b.jsonl"
    cache = BaselineCache(path)
    cache.put("t", "h", "v", "q", 1, True)
    with open(path, "a") as handle:
        handle.write('{"task_type": "t", "sk')
    reopened = BaselineCache(path)
    reopened.put("t", "h", "v", "q", 2, False)
    assert BaselineCache(path).samples("t", "h", "v", "q") == {1: True, 2: False}
    path.write_text('garbage\n' + path.read_text())
    with pytest.raises(ValueError, match=r"b.jsonl:1"):
        BaselineCache(path)
