"""A content fingerprint of the training library, for DVC.

Every training stage imports the same library closure (through
`harness.loop.steps`). Instead of listing those fifteen paths in each of the
~50 stages (DVC re-parses the whole dvc.lock for every stage it runs, so a
long lock costs seconds per stage), one `library` stage lists them once and
writes this fingerprint; training stages depend on the fingerprint file. It
changes exactly when a byte of the listed sources changes.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Iterable

IGNORED_SUFFIXES = (".pyc", ".pyo")


def source_files(paths: Iterable[Path]) -> list[Path]:
    """Every file under `paths` (files or directories), sorted; byte-code caches excluded."""
    files: set[Path] = set()
    for path in paths:
        path = Path(path)
        if not path.exists():
            raise FileNotFoundError(f"library path {path} does not exist")
        candidates = [path] if path.is_file() else [p for p in path.rglob("*") if p.is_file()]
        files.update(p for p in candidates if "__pycache__" not in p.parts and p.suffix not in IGNORED_SUFFIXES)
    return sorted(files, key=lambda p: p.as_posix())


def fingerprint(paths: Iterable[Path], root: Path) -> dict:
    """{"digest": sha256 over all files, "files": {relative path: sha256}} (deterministic)."""
    files = {}
    overall = hashlib.sha256()
    for file in source_files(Path(root) / p for p in paths):
        relative = file.relative_to(root).as_posix()
        digest = hashlib.sha256(file.read_bytes()).hexdigest()
        files[relative] = digest
        overall.update(f"{relative}\0{digest}\n".encode())
    return {"digest": overall.hexdigest(), "files": files}
