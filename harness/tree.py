"""One representation of a harness: relative POSIX path -> text.

A `HarnessTree` is an immutable mapping. It is what the skill/prompt stores
version, what the loop's editor changes, what Harness² proposes and what the
simulated solver reads. Paths are validated on construction (no absolute
paths, no `..`, no empty segments, no backslashes, no control characters,
no path that is both a file and a directory), so a tree can never escape the
root it is saved under and always saves as it is.
"""

from __future__ import annotations

import difflib
import errno
import hashlib
import logging
import os
import stat
import unicodedata
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

logger = logging.getLogger("harness.tree")

# Files that are never part of a harness (editor caches, OS litter).
IGNORED_PARTS = frozenset({"__pycache__", ".DS_Store", ".pytest_cache", ".ipynb_checkpoints"})
IGNORED_SUFFIXES = (".pyc", ".pyo", ".tmp")
# the certificate exported beside a harness (harness/contracts/certificate.py) is evidence about it, never part of it
CERTIFICATE_NAME = "certificate.json"


class TreePathError(ValueError):
    """A harness path is unsafe or malformed."""


def check_relative_path(path: str) -> str:
    """Return `path` normalised to POSIX form, or raise TreePathError naming it."""
    if not isinstance(path, str) or not path:
        raise TreePathError(f"harness path must be a non-empty string, got {path!r}")
    if "\\" in path:
        raise TreePathError(f"harness path {path!r} contains a backslash; use '/'")
    control = next((c for c in path if unicodedata.category(c) == "Cc"), None)
    if control is not None:
        raise TreePathError(f"harness path {path!r} contains the control character {control!r}")
    if path.startswith("/") or (len(path) > 1 and path[1] == ":"):
        raise TreePathError(f"harness path {path!r} is absolute; paths must be relative to the harness root")
    parts = path.split("/")
    for part in parts:
        if part in ("", "."):
            raise TreePathError(f"harness path {path!r} has an empty or '.' segment")
        if part == "..":
            raise TreePathError(f"harness path {path!r} contains '..'; it would escape the harness root")
    return str(PurePosixPath(path))


def is_ignored(path: str) -> bool:
    parts = path.split("/")
    return any(p in IGNORED_PARTS for p in parts) or path.endswith(IGNORED_SUFFIXES) or path == CERTIFICATE_NAME


@dataclass(frozen=True)
class TreeDiff:
    added: tuple[str, ...]
    removed: tuple[str, ...]
    changed: tuple[str, ...]

    @property
    def empty(self) -> bool:
        return not (self.added or self.removed or self.changed)


class HarnessTree(Mapping[str, str]):
    """Immutable mapping of safe relative path -> UTF-8 text."""

    __slots__ = ("_files", "_fingerprint")

    def __init__(self, files: Mapping[str, str] | None = None):
        clean: dict[str, str] = {}
        for path, text in (files or {}).items():
            norm = check_relative_path(path)
            if is_ignored(norm):
                continue
            if not isinstance(text, str):
                raise TypeError(f"harness file {norm!r}: content must be str, got {type(text).__name__}")
            clean[norm] = text
        _check_no_file_directory_conflict(clean)
        self._files = dict(sorted(clean.items()))
        self._fingerprint: str | None = None

    # Mapping protocol
    def __getitem__(self, path: str) -> str:
        return self._files[path]

    def __iter__(self) -> Iterator[str]:
        return iter(self._files)

    def __len__(self) -> int:
        return len(self._files)

    def __repr__(self) -> str:
        return f"HarnessTree({len(self)} files, fingerprint={self.fingerprint})"

    def __eq__(self, other: object) -> bool:
        if isinstance(other, HarnessTree):
            return self._files == other._files
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self.fingerprint)

    @property
    def fingerprint(self) -> str:
        """First 16 hex digits of sha1 over (relative path, bytes) in sorted order."""
        if self._fingerprint is None:
            h = hashlib.sha1()
            for path, text in self._files.items():
                data = text.encode("utf-8")
                h.update(path.encode("utf-8"))
                h.update(b"\x00")
                h.update(str(len(data)).encode())
                h.update(b"\x00")
                h.update(data)
            self._fingerprint = h.hexdigest()[:16]
        return self._fingerprint

    # Functional updates
    def with_files(self, changes: Mapping[str, str | None]) -> HarnessTree:
        """New tree with `changes` applied; a value of None deletes that path."""
        files = dict(self._files)
        for path, text in changes.items():
            norm = check_relative_path(path)
            if text is None:
                files.pop(norm, None)
            else:
                files[norm] = text
        return HarnessTree(files)

    def subtree(self, prefix: str) -> HarnessTree:
        """Files under `prefix/`, with the prefix stripped."""
        prefix = check_relative_path(prefix) + "/"
        return HarnessTree({p[len(prefix):]: t for p, t in self._files.items() if p.startswith(prefix)})

    def prefixed(self, prefix: str) -> HarnessTree:
        prefix = check_relative_path(prefix)
        return HarnessTree({f"{prefix}/{p}": t for p, t in self._files.items()})

    def merged(self, other: Mapping[str, str]) -> HarnessTree:
        files = dict(self._files)
        files.update(other)
        return HarnessTree(files)

    def diff(self, other: HarnessTree) -> TreeDiff:
        """What changes from self to other."""
        mine, theirs = set(self._files), set(other._files)
        return TreeDiff(
            added=tuple(sorted(theirs - mine)),
            removed=tuple(sorted(mine - theirs)),
            changed=tuple(sorted(p for p in mine & theirs if self._files[p] != other._files[p])),
        )

    def unified_diff(self, other: HarnessTree) -> str:
        chunks: list[str] = []
        for path in sorted(set(self._files) | set(other._files)):
            a, b = self._files.get(path), other._files.get(path)
            if a == b:
                continue
            chunks.extend(
                difflib.unified_diff(
                    (a or "").splitlines(keepends=True),
                    (b or "").splitlines(keepends=True),
                    fromfile=f"a/{path}" if a is not None else "/dev/null",
                    tofile=f"b/{path}" if b is not None else "/dev/null",
                )
            )
        return "".join(chunks)

    # Disk I/O
    @classmethod
    def load(cls, root: str | os.PathLike[str]) -> HarnessTree:
        """Read every regular file under `root` (UTF-8).

        Symlinks are refused; FIFOs, sockets and devices are refused naming
        the file, without opening them (a FIFO would block the read forever).
        """
        root_path = Path(root)
        if not root_path.is_dir():
            _restore_interrupted_save(root_path)
        if not root_path.is_dir():
            raise FileNotFoundError(f"harness root {root_path} is not a directory")
        files: dict[str, str] = {}
        for dirpath, dirnames, filenames in os.walk(root_path):
            dirnames[:] = sorted(d for d in dirnames if d not in IGNORED_PARTS)
            for d in dirnames:  # os.walk would silently skip a symlinked directory
                if (Path(dirpath) / d).is_symlink():
                    raise TreePathError(f"harness directory {Path(dirpath) / d} is a symlink; symlinks are not allowed in a harness tree")
            for name in sorted(filenames):
                full = Path(dirpath) / name
                rel = full.relative_to(root_path).as_posix()
                if is_ignored(rel):
                    continue
                files[rel] = _read_regular_text(full)
        return cls(files)

    def save(self, root: str | os.PathLike[str]) -> None:
        """Write the tree as the exact content of `root`, atomically.

        The tree is written into a sibling temp directory which then replaces
        `root`, so a crash leaves either the old or the new tree, never a mix:
        on Linux one atomic exchange (renameat2 RENAME_EXCHANGE); elsewhere two
        renames, and `load` puts the old tree back if a crash fell between them.
        """
        root_path = Path(root)
        if root_path.is_symlink():  # save into the directory the link names; the link keeps pointing at it
            root_path = Path(os.path.realpath(root_path))
        root_path.parent.mkdir(parents=True, exist_ok=True)
        tmp = root_path.with_name(f".{root_path.name}.tmp-{os.getpid()}")
        old = root_path.with_name(f".{root_path.name}.old-{os.getpid()}")
        _rmtree(tmp)
        tmp.mkdir()
        try:
            for path, text in self._files.items():
                target = tmp.joinpath(*path.split("/"))
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(text, encoding="utf-8")
        except BaseException:
            _rmtree(tmp)  # a failed save leaves the old tree and no partial temp dir
            raise
        if not root_path.exists():
            os.replace(tmp, root_path)
        elif _exchange(tmp, root_path):  # one atomic swap: `tmp` now holds the old tree
            _rmtree(tmp)
        else:  # no renameat2: two renames; `load` restores `old` if a crash falls between them
            os.replace(root_path, old)
            os.replace(tmp, root_path)
            _rmtree(old)

    def to_dict(self) -> dict[str, str]:
        return dict(self._files)


_RENAME_EXCHANGE = 2  # linux/fs.h
_AT_FDCWD = -100
_renameat2: Any = None  # None: not probed yet; False: unavailable; else libc's renameat2


def _exchange(a: Path, b: Path) -> bool:
    """Atomically swap two existing directories (Linux renameat2 RENAME_EXCHANGE); False if unsupported."""
    global _renameat2
    if _renameat2 is None:
        try:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            _renameat2 = libc.renameat2
            _renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
        except (OSError, AttributeError):
            _renameat2 = False
    if not _renameat2:
        return False
    if _renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    import ctypes

    code = ctypes.get_errno()
    if code in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP):
        return False  # kernel or filesystem without RENAME_EXCHANGE: the caller falls back
    raise OSError(code, f"renameat2(RENAME_EXCHANGE) {a} <-> {b}: {os.strerror(code)}")


def _restore_interrupted_save(root: Path) -> None:
    """A save that fell back to two renames and crashed between them left `root` missing and the previous
    tree at `.<name>.old-<pid>`: put that tree back (the new one never replaced it) (other leftovers are left alone: a concurrent save may own them)."""
    olds = sorted(root.parent.glob(f".{root.name}.old-*"), key=lambda p: p.stat().st_mtime) if root.parent.is_dir() else []
    if not olds:
        return
    os.replace(olds[-1], root)
    logger.warning("harness root %s was missing after an interrupted save; restored the previous tree from %s", root, olds[-1].name)


def _rmtree(path: Path) -> None:
    import shutil

    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.exists():
        shutil.rmtree(path)


def _check_no_file_directory_conflict(files: Mapping[str, str]) -> None:
    """Refuse a path that is also a directory of another path (``a`` and ``a/b``): it could never be saved."""
    for path in files:
        parts = path.split("/")
        for end in range(1, len(parts)):
            prefix = "/".join(parts[:end])
            if prefix in files:
                raise TreePathError(f"harness paths {prefix!r} and {path!r} conflict: {prefix!r} cannot be both a file and a directory")


_FILE_KINDS = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
               (stat.S_ISBLK, "a block device"), (stat.S_ISLNK, "a symlink"), (stat.S_ISDIR, "a directory"))


def _kind(mode: int) -> str:
    return next((name for test, name in _FILE_KINDS if test(mode)), "not a regular file")


def _read_regular_text(full: Path) -> str:
    """The UTF-8 text of `full`, refusing anything but a regular file (checked before and after opening)."""
    mode = os.lstat(full).st_mode
    if not stat.S_ISREG(mode):
        raise TreePathError(f"harness file {full} is {_kind(mode)}; only regular files are allowed in a harness tree")
    # O_NONBLOCK: a file swapped for a FIFO after the check must not block the open; O_NOFOLLOW: nor a symlink
    fd = os.open(full, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0))
    with os.fdopen(fd, "rb") as handle:
        mode = os.fstat(handle.fileno()).st_mode
        if not stat.S_ISREG(mode):
            raise TreePathError(f"harness file {full} is {_kind(mode)}; only regular files are allowed in a harness tree")
        data = handle.read()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise TreePathError(f"harness file {full} is not UTF-8 text: {exc}") from exc
