import json
import os
import stat

import pytest

from harness.atomic import atomic_write_bytes, atomic_write_json, atomic_write_text


def test_write_text_creates_parents_and_replaces_content(tmp_path):
    target = tmp_path / "a" / "b" / "f.txt"
    atomic_write_text(target, "first")
    assert target.read_text() == "first"
    atomic_write_text(target, "second")
    assert target.read_text() == "second"
    assert sorted(os.listdir(target.parent)) == ["f.txt"]  # no temp file left


def test_write_bytes_exact(tmp_path):
    data = bytes(range(256)) * 3
    atomic_write_bytes(tmp_path / "b.bin", data)
    assert (tmp_path / "b.bin").read_bytes() == data


def test_write_json_roundtrip_and_sorted(tmp_path):
    atomic_write_json(tmp_path / "x.json", {"b": 1, "a": [1, 2], "ü": "ö"})
    text = (tmp_path / "x.json").read_text(encoding="utf-8")
    assert json.loads(text) == {"b": 1, "a": [1, 2], "ü": "ö"}
    assert text.index('"a"') < text.index('"b"')


def test_unserialisable_json_leaves_old_file(tmp_path):
    target = tmp_path / "x.json"
    atomic_write_json(target, {"ok": True})
    with pytest.raises(ValueError):
        atomic_write_json(target, {"bad": float("nan")})
    with pytest.raises(TypeError):
        atomic_write_json(target, {"bad": object()})
    assert json.loads(target.read_text()) == {"ok": True}
    assert sorted(os.listdir(tmp_path)) == ["x.json"]


def test_failure_during_replace_removes_temp_and_keeps_old(tmp_path, monkeypatch):
    target = tmp_path / "f.txt"
    atomic_write_text(target, "old")

    def boom(src, dst):
        raise OSError("disk gone")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError, match="disk gone"):
        atomic_write_text(target, "new")
    monkeypatch.undo()
    assert target.read_text() == "old"
    assert sorted(os.listdir(tmp_path)) == ["f.txt"]


@pytest.mark.parametrize("umask, expected", [(0o022, 0o644), (0o002, 0o664), (0o077, 0o600)])
def test_new_files_get_the_mode_a_plain_open_would_give(tmp_path, umask, expected):
    old = os.umask(umask)
    try:
        atomic_write_text(tmp_path / "new.txt", "x")
        with open(tmp_path / "plain.txt", "w") as handle:
            handle.write("x")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "new.txt").stat().st_mode) == expected
    assert stat.S_IMODE((tmp_path / "plain.txt").stat().st_mode) == expected


def test_replacing_a_file_keeps_its_mode(tmp_path):
    target = tmp_path / "params.yaml"
    target.write_text("a: 1\n")
    os.chmod(target, 0o640)
    atomic_write_text(target, "a: 2\n")
    assert stat.S_IMODE(target.stat().st_mode) == 0o640 and target.read_text() == "a: 2\n"


def test_current_umask_reads_the_process_umask():
    from harness.atomic import current_umask

    old = os.umask(0o027)
    try:
        assert current_umask() == 0o027
    finally:
        os.umask(old)
