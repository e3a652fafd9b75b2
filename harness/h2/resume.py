"""Resume of a Harness² sweep: completion marks and the run-identity file.

Run tags and idempotency keys are harness/identity.py.

- A completion mark (``DONE.json``: {version, run_id, at, fingerprint}) is
  written atomically *last*. Presence of output is not enough: a task is
  skipped on resume only when its mark, summary, selection and artifact all
  exist and the artifact's harness fingerprint still equals the mark's.
- A run-identity file (models, tasks, split, seed, ...) refuses to reuse a
  run directory for a different configuration.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from harness.atomic import atomic_write_json
from harness.tree import HarnessTree

MARK_VERSION = 1
MARK_FILE = "DONE.json"
SUMMARY_FILE = "summary.json"
SELECTION_FILE = "selection.json"
ARTIFACT_DIR = "delivered"  # the delivered harness tree
IDENTITY_FILE = "run-identity.json"


class RunIdentityError(RuntimeError):
    pass


def write_completion_mark(task_dir: Path, run_id: str, tree: HarnessTree) -> dict[str, Any]:
    mark = {"version": MARK_VERSION, "run_id": run_id, "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "fingerprint": tree.fingerprint}
    atomic_write_json(Path(task_dir) / MARK_FILE, mark)
    return mark


def read_completion_mark(task_dir: Path) -> dict[str, Any] | None:
    path = Path(task_dir) / MARK_FILE
    try:
        mark = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(mark, dict) or mark.get("version") != MARK_VERSION or not isinstance(mark.get("fingerprint"), str):
        return None
    return mark


def task_intact(task_dir: Path, run_id: str | None = None) -> tuple[bool, str]:
    """(True, "") when the task's outputs still hold; else (False, why)."""
    task_dir = Path(task_dir)
    mark = read_completion_mark(task_dir)
    if mark is None:
        return False, f"{task_dir / MARK_FILE} missing or unreadable"
    if run_id is not None and mark.get("run_id") != run_id:
        return False, f"completion mark belongs to run {mark.get('run_id')!r}, not {run_id!r}"
    for name in (SUMMARY_FILE, SELECTION_FILE):
        try:
            json.loads((task_dir / name).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return False, f"{task_dir / name} missing or not JSON"
    try:
        tree = HarnessTree.load(task_dir / ARTIFACT_DIR)
    except (OSError, ValueError) as exc:
        return False, f"delivered harness unreadable: {exc}"
    if tree.fingerprint != mark["fingerprint"]:
        return False, f"delivered harness fingerprint {tree.fingerprint} != completion mark {mark['fingerprint']}"
    summary = json.loads((task_dir / SUMMARY_FILE).read_text(encoding="utf-8"))
    if summary.get("delivered_fingerprint") != mark["fingerprint"]:
        return False, "summary's delivered fingerprint does not match the completion mark"
    return True, ""


@dataclass(frozen=True)
class RunIdentity:
    """What a run directory was made with; a different configuration needs a different directory."""

    run_tag: str
    models: Mapping[str, str]
    tasks: tuple[str, ...]
    split: str = ""
    seed: int = 0
    k: int = 1
    modes: tuple[str, ...] = ("parallel",)
    surface: str = "native"

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_tag": self.run_tag,
            "models": dict(sorted(self.models.items())),
            "tasks": list(self.tasks),
            "split": self.split,
            "seed": self.seed,
            "k": self.k,
            "modes": list(self.modes),
            "surface": self.surface,
        }


def ensure_run_identity(run_dir: Path, identity: RunIdentity) -> None:
    """Write the identity file, or check the existing one matches field by field."""
    path = Path(run_dir) / IDENTITY_FILE
    want = identity.to_dict()
    if path.exists():
        try:
            have = json.loads(path.read_text(encoding="utf-8"))
        except ValueError as exc:
            raise RunIdentityError(f"{path} is not valid JSON ({exc}); remove it or use another run directory") from exc
        diffs = [f"{key}: existing {have.get(key)!r} != requested {want[key]!r}" for key in want if have.get(key) != want[key]]
        if diffs:
            raise RunIdentityError(f"{path}: this run directory was made with a different configuration ({'; '.join(diffs)}); use another directory or run tag")
        return
    atomic_write_json(path, want)
