"""The library fingerprint changes exactly when a listed source byte changes."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.pipeline.code_fingerprint import fingerprint


def _tree(root: Path) -> None:
    (root / "pkg" / "sub").mkdir(parents=True)
    (root / "pkg" / "a.py").write_text("A = 1\n")
    (root / "pkg" / "sub" / "b.py").write_text("B = 2\n")
    (root / "single.py").write_text("S = 3\n")


def test_fingerprint_tracks_content_not_bytecode(tmp_path: Path) -> None:
    _tree(tmp_path)
    paths = [Path("pkg"), Path("single.py")]
    first = fingerprint(paths, tmp_path)
    assert sorted(first["files"]) == ["pkg/a.py", "pkg/sub/b.py", "single.py"]
    (tmp_path / "pkg" / "__pycache__").mkdir()
    (tmp_path / "pkg" / "__pycache__" / "a.cpython-311.pyc").write_bytes(b"\x00")
    assert fingerprint(paths, tmp_path) == first  # imports create byte-code: no change
    (tmp_path / "pkg" / "sub" / "b.py").write_text("B = 3\n")
    changed = fingerprint(paths, tmp_path)
    assert changed["digest"] != first["digest"]
    assert changed["files"]["pkg/a.py"] == first["files"]["pkg/a.py"]


def test_missing_path_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="nope"):
        fingerprint([Path("nope")], tmp_path)
