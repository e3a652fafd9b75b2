"""A stage's code is the import closure of its entry module; its fingerprint changes exactly when a byte of
that closure changes."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.pipeline.code_fingerprint import (
    ModuleIndex,
    closure_files,
    fingerprint,
    layers,
    module_graph,
    package_graph,
    stage_fingerprints,
    strongly_connected,
)
from tests.pipeline.support import REPO_ROOT


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def _tree(root: Path) -> None:
    _write(root, {
        "stages/__init__.py": "",
        "stages/one.py": "import os\nfrom pkg import top\n\ndef main():\n    from pkg.sub import lazy\n",
        "stages/two.py": "import pkg.other\n",
        "pkg/__init__.py": "",
        "pkg/top.py": "from . import sibling\nfrom .sub import *\n",
        "pkg/sibling.py": "import importlib\nM = importlib.import_module('pkg.dynamic')\n",
        "pkg/dynamic.py": "ARGV = ['python', '-m', 'pkg.worker']\nREGISTRY = {'x': 'stages.registered:make'}\n",
        "stages/registered.py": "def make():\n    return 1\n",
        "pkg/worker.py": "X = 1\n",
        "pkg/sub/__init__.py": "",
        "pkg/sub/lazy.py": "from ..top import sibling\n",
        "pkg/other.py": "O = 1\n",
        "pkg/unused.py": "U = 1\n",
    })


def _names(root: Path, files: list[Path]) -> list[str]:
    return [f.relative_to(root).as_posix() for f in files]


def test_closure_follows_local_relative_dynamic_registry_and_dash_m_imports(tmp_path: Path) -> None:
    _tree(tmp_path)
    assert _names(tmp_path, closure_files(["stages.one"], tmp_path)) == [
        "pkg/__init__.py", "pkg/dynamic.py", "pkg/sibling.py", "pkg/sub/__init__.py", "pkg/sub/lazy.py",
        "pkg/top.py", "pkg/worker.py", "stages/__init__.py", "stages/one.py", "stages/registered.py",
    ]  # os is third-party (no file under root); pkg/other.py and pkg/unused.py are not imported by one
    assert _names(tmp_path, closure_files(["stages.two"], tmp_path)) == ["pkg/__init__.py", "pkg/other.py",
                                                                         "stages/__init__.py", "stages/two.py"]


def test_stage_fingerprint_changes_only_with_its_closure(tmp_path: Path) -> None:
    _tree(tmp_path)
    first = stage_fingerprints(["one", "two"], tmp_path)
    (tmp_path / "pkg" / "__pycache__").mkdir()
    (tmp_path / "pkg" / "__pycache__" / "top.cpython-311.pyc").write_bytes(b"\x00")
    (tmp_path / "pkg" / "unused.py").write_text("U = 2\n")
    assert stage_fingerprints(["one", "two"], tmp_path) == first
    (tmp_path / "pkg" / "sub" / "lazy.py").write_text("from ..top import sibling  # edited\n")
    changed = stage_fingerprints(["one", "two"], tmp_path)
    assert changed["one"]["digest"] != first["one"]["digest"]
    assert changed["one"]["files"]["pkg/top.py"] == first["one"]["files"]["pkg/top.py"]
    assert changed["two"] == first["two"]


def test_a_new_module_enters_the_closure_when_imported(tmp_path: Path) -> None:
    _tree(tmp_path)
    before = stage_fingerprints(["two"], tmp_path)["two"]
    _write(tmp_path, {"pkg/added.py": "A = 1\n", "pkg/other.py": "def f():\n    from pkg import added\n"})
    after = stage_fingerprints(["two"], tmp_path)["two"]
    assert "pkg/added.py" in after["files"] and "pkg/added.py" not in before["files"]


def test_unknown_entry_and_unparsable_module_are_errors(tmp_path: Path) -> None:
    _tree(tmp_path)
    with pytest.raises(ModuleNotFoundError, match="stages.nope"):
        stage_fingerprints(["nope"], tmp_path)
    (tmp_path / "pkg" / "other.py").write_text("def broken(:\n")
    with pytest.raises(SyntaxError, match="pkg/other.py"):
        stage_fingerprints(["two"], tmp_path)
    with pytest.raises(FileNotFoundError, match="gone.py"):
        fingerprint([tmp_path / "gone.py"], tmp_path)


def test_stage_closures_hold_their_entry_point_and_evolve_reaches_harness2() -> None:
    """The gap the hand-written list had: evolve@ runs Harness² (evolve.method=h2), harness/h2 was not listed."""
    index = ModuleIndex(REPO_ROOT)
    for stage in ("prepare", "pools", "batches", "rollout", "evolve", "gate", "slow", "holdout", "report", "improve"):
        files = _names(REPO_ROOT, closure_files([f"stages.{stage}"], REPO_ROOT, index))
        assert f"stages/{stage}.py" in files
        assert "harness/pipeline/code_fingerprint.py" not in files  # the fingerprinting is not a stage's code
        if stage == "evolve":
            assert any(f.startswith("harness/h2/") for f in files)


def test_package_graph_folds_modules_to_packages(tmp_path: Path) -> None:
    _tree(tmp_path)
    graph = module_graph(tmp_path, packages=("pkg", "stages"))
    assert graph["pkg.sub.lazy"] == {"pkg.top"}  # `from ..top import sibling`: a name in pkg.top, not a module
    folded = package_graph(graph)
    assert folded["stages"] == {"pkg.top", "pkg.sub", "pkg.other"}  # stages.* fold into one unit
    assert folded["pkg.sub"] == {"pkg.top"}


def test_layers_put_a_cycle_on_one_level_above_its_imports() -> None:
    graph = {"a": set(), "b": {"a", "c"}, "c": {"b"}, "d": {"c"}}
    assert [c for c in strongly_connected(graph) if len(c) > 1] == [["b", "c"]]
    assert layers(graph) == {"a": 0, "b": 1, "c": 1, "d": 2}
