import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from harness.tree import HarnessTree, TreeDiff, TreePathError, check_relative_path, is_ignored

BASE = {"system_prompt.md": "be careful", "skills/count/SKILL.md": "count", "tools/zoom.md": "zoom"}


@pytest.mark.parametrize(
    "path, match",
    [
        ("/etc/passwd", "absolute"),
        ("C:/x.md", "absolute"),
        ("..", r"'\.\.'"),
        ("a/../../b", r"'\.\.'"),
        ("skills\\count\\SKILL.md", "backslash"),
        ("a//b", "empty"),
        ("a/./b", "empty or '.'"),
        ("a/", "empty"),
        ("", "non-empty"),
        ("a\x00b", "control character"),
    ],
)
def test_unsafe_paths_refused(path, match):
    with pytest.raises(TreePathError, match=match):
        check_relative_path(path)
    with pytest.raises(TreePathError):
        HarnessTree({path: "x"})


def test_non_string_path_or_content():
    with pytest.raises(TreePathError):
        check_relative_path(None)
    with pytest.raises(TypeError, match="content must be str"):
        HarnessTree({"a.md": b"bytes"})


def test_safe_paths_accepted():
    assert check_relative_path("skills/count/SKILL.md") == "skills/count/SKILL.md"
    assert check_relative_path("a..b/c.md") == "a..b/c.md"  # '..' only as a whole segment is unsafe


def test_ignored_cache_files_dropped():
    tree = HarnessTree({**BASE, "__pycache__/x.pyc": "", "skills/.DS_Store": "", "a.tmp": "", "tools/z.pyc": ""})
    assert sorted(tree) == sorted(BASE)
    assert is_ignored(".ipynb_checkpoints/a.md") and not is_ignored("tools/temp.md")


def test_mapping_and_order():
    tree = HarnessTree(BASE)
    assert list(tree) == sorted(BASE) and len(tree) == 3 and tree["tools/zoom.md"] == "zoom"
    assert tree.to_dict() == BASE
    with pytest.raises(KeyError):
        tree["missing.md"]


def test_fingerprint_stable_and_sensitive():
    a = HarnessTree(BASE)
    b = HarnessTree(dict(reversed(list(BASE.items()))))
    assert a.fingerprint == b.fingerprint and a == b and hash(a) == hash(b)
    assert len(a.fingerprint) == 16
    assert HarnessTree(BASE).fingerprint == a.fingerprint  # recomputed, same
    renamed = HarnessTree({**{k: v for k, v in BASE.items() if k != "tools/zoom.md"}, "tools/zoom2.md": "zoom"})
    assert renamed.fingerprint != a.fingerprint
    assert a.with_files({"tools/zoom.md": "zoom!"}).fingerprint != a.fingerprint
    # path/content boundary is unambiguous
    assert HarnessTree({"ab": "c"}).fingerprint != HarnessTree({"a": "bc"}).fingerprint
    assert HarnessTree().fingerprint != HarnessTree({"a": ""}).fingerprint


def test_functional_updates():
    tree = HarnessTree(BASE)
    changed = tree.with_files({"tools/zoom.md": None, "tools/crop.md": "crop"})
    assert "tools/zoom.md" not in changed and changed["tools/crop.md"] == "crop"
    assert "tools/zoom.md" in tree  # immutable
    assert tree.subtree("skills").to_dict() == {"count/SKILL.md": "count"}
    assert tree.subtree("skills").prefixed("skills") == HarnessTree({"skills/count/SKILL.md": "count"})
    assert tree.merged({"system_prompt.md": "new"})["system_prompt.md"] == "new"
    with pytest.raises(TreePathError):
        tree.with_files({"../evil": "x"})
    with pytest.raises(TreePathError):
        tree.merged({"/abs": "x"})
    with pytest.raises(TreePathError):
        tree.prefixed("..")


def test_diff_and_unified_diff():
    old = HarnessTree(BASE)
    new = old.with_files({"tools/zoom.md": None, "tools/crop.md": "crop", "system_prompt.md": "be very careful"})
    d = old.diff(new)
    assert d == TreeDiff(added=("tools/crop.md",), removed=("tools/zoom.md",), changed=("system_prompt.md",))
    assert not d.empty and old.diff(HarnessTree(BASE)).empty
    text = old.unified_diff(new)
    assert "--- a/system_prompt.md" in text and "+be very careful" in text
    assert "+++ b/tools/crop.md" in text and "--- /dev/null" in text
    assert "+++ /dev/null" in text
    assert old.unified_diff(old) == ""


def test_save_load_roundtrip_and_exact_replacement(tmp_path):
    root = tmp_path / "h"
    HarnessTree({**BASE, "stale/file.md": "old"}).save(root)
    (root / "extra.md").write_text("hand-made")
    tree = HarnessTree({**BASE, "skills/ocr/SKILL.md": "read ü"})
    tree.save(root)
    assert HarnessTree.load(root) == tree  # stale and extra files are gone: exact content
    assert not (root / "stale").exists() and not (root / "extra.md").exists()
    assert sorted(os.listdir(tmp_path)) == ["h"]  # no temp or old dirs left
    assert (root / "skills" / "ocr" / "SKILL.md").read_text(encoding="utf-8") == "read ü"


def test_save_failure_keeps_old_tree(tmp_path, monkeypatch):
    root = tmp_path / "h"
    HarnessTree(BASE).save(root)
    real_write = type(root).write_text
    calls = {"n": 0}

    def failing_write(self, *a, **kw):
        calls["n"] += 1
        if calls["n"] == 2:
            raise OSError("disk full")
        return real_write(self, *a, **kw)

    monkeypatch.setattr(type(root), "write_text", failing_write)
    with pytest.raises(OSError, match="disk full"):
        HarnessTree({**BASE, "x.md": "new"}).save(root)
    monkeypatch.undo()
    assert HarnessTree.load(root) == HarnessTree(BASE)
    assert sorted(os.listdir(tmp_path)) == ["h"]  # the partial temp dir was cleaned up


def test_load_ignores_cache_files(tmp_path):
    HarnessTree(BASE).save(tmp_path / "h")
    (tmp_path / "h" / "__pycache__").mkdir()
    (tmp_path / "h" / "__pycache__" / "m.pyc").write_bytes(b"\x00\xff")
    (tmp_path / "h" / "w.tmp").write_text("x")
    assert HarnessTree.load(tmp_path / "h") == HarnessTree(BASE)


def test_load_refuses_file_symlink(tmp_path):
    HarnessTree(BASE).save(tmp_path / "h")
    (tmp_path / "secret").write_text("s")
    (tmp_path / "h" / "link.md").symlink_to(tmp_path / "secret")
    with pytest.raises(TreePathError, match="symlink"):
        HarnessTree.load(tmp_path / "h")


def test_load_refuses_directory_symlink(tmp_path):
    HarnessTree(BASE).save(tmp_path / "h")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "f.md").write_text("outside the root")
    (tmp_path / "h" / "linked").symlink_to(tmp_path / "outside", target_is_directory=True)
    with pytest.raises(TreePathError, match="symlink"):
        HarnessTree.load(tmp_path / "h")


def test_load_errors(tmp_path):
    with pytest.raises(FileNotFoundError):
        HarnessTree.load(tmp_path / "missing")
    (tmp_path / "h").mkdir()
    (tmp_path / "h" / "bin.md").write_bytes(b"\xff\xfe\x00")
    with pytest.raises(TreePathError, match="not UTF-8"):
        HarnessTree.load(tmp_path / "h")


def test_save_over_an_existing_tree_swaps_atomically_when_the_kernel_can(tmp_path, monkeypatch):
    from harness import tree as tree_module

    root = tmp_path / "h"
    HarnessTree(BASE).save(root)
    if not tree_module._exchange(root, root):  # probe: RENAME_EXCHANGE unsupported here -> fallback tested below
        pytest.skip("renameat2(RENAME_EXCHANGE) is not available on this kernel/filesystem")
    replaced = []
    real_replace = os.replace
    monkeypatch.setattr(tree_module.os, "replace", lambda a, b: (replaced.append((a, b)), real_replace(a, b))[1])
    HarnessTree({**BASE, "x.md": "new"}).save(root)
    assert replaced == []  # no window without `root`: one exchange, no rename pair
    assert HarnessTree.load(root) == HarnessTree({**BASE, "x.md": "new"})
    assert sorted(os.listdir(tmp_path)) == ["h"]


def test_crash_between_the_fallback_renames_is_repaired_on_load(tmp_path, monkeypatch, caplog):
    from harness import tree as tree_module

    root = tmp_path / "h"
    HarnessTree(BASE).save(root)
    monkeypatch.setattr(tree_module, "_exchange", lambda a, b: False)
    real_replace, calls = os.replace, []

    def crash_on_second(a, b):
        calls.append((a, b))
        if len(calls) == 2:
            raise KeyboardInterrupt("killed between the renames")
        return real_replace(a, b)

    monkeypatch.setattr(tree_module.os, "replace", crash_on_second)
    with pytest.raises(KeyboardInterrupt):
        HarnessTree({**BASE, "x.md": "new"}).save(root)
    monkeypatch.undo()
    assert not root.exists()  # the window the fallback leaves
    with caplog.at_level("WARNING", logger="harness.tree"):
        assert HarnessTree.load(root) == HarnessTree(BASE)  # the previous tree, whole
    assert "interrupted save" in caplog.text and root.is_dir()
    with pytest.raises(FileNotFoundError):
        HarnessTree.load(tmp_path / "never-saved")


@pytest.mark.parametrize("char", ["\n", "\r", "\t", "\x1b", "\x7f", "\x85", "\x00"])
def test_control_characters_in_paths_are_refused(char):
    with pytest.raises(TreePathError, match="control character"):
        HarnessTree({f"skills/a{char}b.md": "x"})
    with pytest.raises(TreePathError, match="control character"):
        HarnessTree({"a.md": "x"}).with_files({f"dir{char}/b.md": "y"})


def test_file_directory_conflict_is_refused_at_construction():
    with pytest.raises(TreePathError, match="'skills/ocr' and 'skills/ocr/SKILL.md' conflict"):
        HarnessTree({"skills/ocr": "a file", "skills/ocr/SKILL.md": "a file below it"})
    tree = HarnessTree({"skills/ocr/SKILL.md": "x"})
    with pytest.raises(TreePathError, match="conflict"):
        tree.with_files({"skills": "now a file"})
    with pytest.raises(TreePathError, match="conflict"):
        tree.merged({"skills/ocr/SKILL.md/deeper": "y"})


def test_load_refuses_a_fifo_without_blocking(tmp_path):
    root = tmp_path / "h"
    HarnessTree({"skills/a.md": "x"}).save(root)
    os.mkfifo(root / "skills" / "pipe.md")
    # a read of a FIFO with no writer blocks forever: run load in a child process and bound the wait
    code = (
        "import sys; from harness.tree import HarnessTree, TreePathError\n"
        "try:\n    HarnessTree.load(sys.argv[1])\nexcept TreePathError as e:\n    print(e); sys.exit(3)\n"
    )
    done = subprocess.run([sys.executable, "-c", code, str(root)], capture_output=True, text=True, timeout=60,
                          cwd=Path(__file__).resolve().parents[1])
    assert done.returncode == 3, done.stderr
    assert f"{root / 'skills' / 'pipe.md'} is a FIFO" in done.stdout


def test_load_refuses_a_device(tmp_path):
    root = tmp_path / "h"
    HarnessTree({"a.md": "x"}).save(root)
    try:
        os.mknod(root / "null.md", stat.S_IFCHR | 0o600, os.makedev(1, 3))  # /dev/null's numbers
    except PermissionError:
        pytest.skip("creating a device node needs CAP_MKNOD")
    with pytest.raises(TreePathError, match=r"null\.md is a character device; only regular files"):
        HarnessTree.load(root)


def test_save_onto_a_symlinked_root_keeps_the_link_and_leaves_no_temp_dir(tmp_path):
    real = tmp_path / "real"
    HarnessTree({"old.md": "old"}).save(real)
    link = tmp_path / "link"
    link.symlink_to(real, target_is_directory=True)
    HarnessTree({"new.md": "new"}).save(link)
    assert link.is_symlink() and os.readlink(link) == str(real)
    assert HarnessTree.load(link).to_dict() == {"new.md": "new"}
    assert HarnessTree.load(real).to_dict() == {"new.md": "new"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link", "real"]


def test_saved_files_follow_the_umask(tmp_path):
    old = os.umask(0o022)
    try:
        HarnessTree({"d/a.md": "x"}).save(tmp_path / "h")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "h" / "d" / "a.md").stat().st_mode) == 0o644
