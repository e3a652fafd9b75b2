"""The workspace: the versioned harness of one training run (seed 000 §6).

Layout:

    <root>/manifest.json          current versions, best pointer, run history, questions_ref
    <root>/skills/v<N>            skills tree versions (<task_type>/SKILL.md), one packed file each (harness/store.py)
    <root>/prompts/v<N>           prompts tree versions (system_prompt.md, tools/<tool>.md), one packed file each
    <root>/runs/<run_id>/         per-run scratch (created by record_run)

The best pointer is independent of the current versions: it may point at a
stored version that is not current. Every manifest change is a
read-modify-write under a process lock, written atomically. The workspace
depends on the store (never the other way round).
"""

from __future__ import annotations

import json
import os
import shutil
import threading
import uuid
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal, Mapping

from harness.atomic import atomic_write_json
from harness.questions import check_questions_ref
from harness.store import (
    StoreError,
    advance_version,
    list_versions,
    read_seed,
    read_version_tree,
    version_number,
)
from harness.tree import HarnessTree, check_relative_path

MANIFEST = "manifest.json"
MANIFEST_FORMAT = 1
KINDS = ("skills", "prompts")
Kind = Literal["skills", "prompts"]
# never carried into a copy: candidate scratch of validate, staging dirs of interrupted writes
_COPY_IGNORE = shutil.ignore_patterns(".cand_tmp", ".staging-*", "*.tmp", ".*.tmp-*")

_manifest_lock = threading.RLock()


class WorkspaceError(RuntimeError):
    """A workspace is missing, malformed or asked for something inconsistent."""


@dataclass(frozen=True)
class BestPointer:
    skills: str
    prompts: str
    val_acc: float
    epoch: int


@dataclass(frozen=True)
class Manifest:
    skills_version: str
    prompts_version: str
    questions_ref: str
    best: BestPointer | None = None
    history: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": MANIFEST_FORMAT,
            "skills_version": self.skills_version,
            "prompts_version": self.prompts_version,
            "questions_ref": self.questions_ref,
            "best": None if self.best is None else {
                "skills": self.best.skills, "prompts": self.best.prompts,
                "val_acc": self.best.val_acc, "epoch": self.best.epoch,
            },
            "history": list(self.history),
        }


# ---------------------------------------------------------------- manifest


def manifest_path(root: str | os.PathLike[str]) -> Path:
    return Path(root) / MANIFEST


def read_manifest(root: str | os.PathLike[str]) -> Manifest:
    """Parse and check manifest.json; a missing key is an error naming it."""
    path = manifest_path(root)
    try:
        d = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise WorkspaceError(f"{root}: not a workspace ({MANIFEST} is missing)") from exc
    except json.JSONDecodeError as exc:
        raise WorkspaceError(f"{path}: not valid JSON: {exc}") from exc
    try:
        if d["format"] != MANIFEST_FORMAT:
            raise WorkspaceError(f"{path}: manifest format {d['format']!r}, this code reads {MANIFEST_FORMAT}")
        best = d["best"]
        manifest = Manifest(
            skills_version=_version_field(path, "skills_version", d["skills_version"]),
            prompts_version=_version_field(path, "prompts_version", d["prompts_version"]),
            questions_ref=str(d["questions_ref"]),
            best=None if best is None else BestPointer(
                skills=_version_field(path, "best.skills", best["skills"]),
                prompts=_version_field(path, "best.prompts", best["prompts"]),
                val_acc=float(best["val_acc"]),
                epoch=int(best["epoch"]),
            ),
            history=tuple(str(r) for r in d["history"]),
        )
    except KeyError as exc:
        raise WorkspaceError(f"{path}: manifest key {exc.args[0]!r} is missing") from exc
    except (TypeError, ValueError) as exc:
        raise WorkspaceError(f"{path}: malformed manifest: {exc}") from exc
    return manifest


def _version_field(path: Path, key: str, value: Any) -> str:
    try:
        version_number(value)
    except StoreError as exc:
        raise WorkspaceError(f"{path}: {key}: {exc}") from exc
    return value


def write_manifest(root: str | os.PathLike[str], manifest: Manifest) -> None:
    atomic_write_json(manifest_path(root), manifest.to_dict())


def _update_manifest(root: str | os.PathLike[str], change) -> Manifest:
    with _manifest_lock:
        current = read_manifest(root)
        new = change(current)
        if new != current:
            write_manifest(root, new)
        return new


def _require_version(root: Path, kind: str, version: str) -> None:
    if version not in list_versions(root / kind):
        raise WorkspaceError(f"{root}: {kind} version {version!r} does not exist (have {list_versions(root / kind)})")


# ---------------------------------------------------------------- lifecycle


def init_workspace(
    root: str | os.PathLike[str],
    skills_tree: HarnessTree,
    prompts_tree: HarnessTree,
    questions_ref: str,
    *,
    base: str | os.PathLike[str] | None = None,
) -> Manifest:
    """Create a new workspace at v0/v0. Refuses an existing workspace and a missing questions file.

    Everything is built in a staging dir and renamed into place, so a
    failure leaves no half-made workspace.
    """
    check_questions_ref(questions_ref, base=base)
    ws = Path(root)
    if ws.exists() and any(ws.iterdir()):
        raise WorkspaceError(f"{ws} already exists and is not empty; use init_workspace_from_seed to archive and replace it")
    ws.parent.mkdir(parents=True, exist_ok=True)
    staging = ws.with_name(f".{ws.name}.staging-{uuid.uuid4().hex}")
    try:
        staging.mkdir()
        sv = advance_version(staging / "skills", skills_tree, {"reason": "init"})
        pv = advance_version(staging / "prompts", prompts_tree, {"reason": "init"})
        (staging / "runs").mkdir()
        write_manifest(staging, Manifest(skills_version=sv, prompts_version=pv, questions_ref=questions_ref))
        if ws.exists():
            ws.rmdir()
        os.rename(staging, ws)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    return read_manifest(ws)


def init_workspace_from_seed(
    root: str | os.PathLike[str],
    seed_dir: str | os.PathLike[str],
    *,
    base: str | os.PathLike[str] | None = None,
) -> Manifest:
    """Start a workspace from a seed; an existing workspace is archived, not deleted.

    Fail fast: the seed and its questions reference are checked *before*
    the existing workspace is touched (archiving first and then finding the
    questions missing would leave no usable workspace).
    """
    seed = read_seed(seed_dir)
    check_questions_ref(seed.questions_ref, base=base)
    ws = Path(root)
    if ws.exists() and any(ws.iterdir()):
        stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S")
        archive = ws.with_name(f"{ws.name}.archive-{stamp}-{uuid.uuid4().hex[:6]}")
        os.rename(ws, archive)
    return init_workspace(ws, seed.skills, seed.prompts, seed.questions_ref, base=base)


def copy_workspace(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> Path:
    """Copy a workspace to a new directory (each DVC stage mutates its own copy).

    Candidate scratch, staging litter and *empty* run scratch dirs
    (`runs/<run_id>/` that nothing was written to; the run stays in the
    manifest's history) are not copied: every carried directory is walked
    by DVC at each status check, and a long run records hundreds of runs.
    Symlinks are refused; `dst` must not exist. The copy appears atomically.
    """
    source, target = Path(src), Path(dst)
    read_manifest(source)  # only copy real workspaces
    if target.exists():
        raise WorkspaceError(f"copy_workspace: destination {target} already exists")
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = target.with_name(f".{target.name}.staging-{uuid.uuid4().hex}")
    try:
        for dirpath, dirnames, filenames in os.walk(source):
            for name in dirnames + filenames:
                if (Path(dirpath) / name).is_symlink():
                    raise WorkspaceError(f"copy_workspace: {Path(dirpath) / name} is a symlink; workspaces hold regular files only")
        shutil.copytree(source, staging, ignore=_copy_ignore(source))
        os.rename(staging, target)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    return target


def _empty_run_scratch(runs: Path, names: list[str]) -> set[str]:
    return {n for n in names if (runs / n).is_dir() and not any((runs / n).iterdir())}


def _copy_ignore(source: Path):
    runs = source / "runs"

    def ignore(directory: str, names: list[str]) -> set[str]:
        skipped = set(_COPY_IGNORE(directory, names))
        if Path(directory) == runs:
            skipped |= _empty_run_scratch(runs, names)
        return skipped

    return ignore


def drop_empty_run_scratch(root: str | os.PathLike[str]) -> int:
    """Remove the `runs/<run_id>/` scratch dirs nothing was written to (the runs stay in the history).

    Stages call it before marking their output done: DVC walks every directory
    of an output at each status check. Returns how many were removed.
    """
    runs = Path(root) / "runs"
    if not runs.is_dir():
        return 0
    empty = _empty_run_scratch(runs, [entry.name for entry in os.scandir(runs)])
    for name in empty:
        (runs / name).rmdir()
    return len(empty)


# ---------------------------------------------------------------- runs and best pointer


def record_run(root: str | os.PathLike[str], run_id: str) -> bool:
    """Append `run_id` to the history once and create `runs/<run_id>/`; True when it was new."""
    if "/" in run_id:
        raise WorkspaceError(f"run id {run_id!r} must not contain '/'")
    check_relative_path(run_id)
    ws = Path(root)
    with _manifest_lock:
        manifest = read_manifest(ws)
        (ws / "runs" / run_id).mkdir(parents=True, exist_ok=True)
        if run_id in manifest.history:
            return False
        write_manifest(ws, replace(manifest, history=manifest.history + (run_id,)))
        return True


def update_best(root: str | os.PathLike[str], skills: str, prompts: str, val_acc: float, epoch: int) -> BestPointer:
    """Point best at a stored version pair (not necessarily current)."""
    ws = Path(root)
    _require_version(ws, "skills", skills)
    _require_version(ws, "prompts", prompts)
    best = BestPointer(skills=skills, prompts=prompts, val_acc=float(val_acc), epoch=int(epoch))
    _update_manifest(ws, lambda m: replace(m, best=best))
    return best


def read_best(root: str | os.PathLike[str]) -> BestPointer | None:
    return read_manifest(root).best


def set_current(root: str | os.PathLike[str], *, skills: str | None = None, prompts: str | None = None) -> Manifest:
    """Make stored versions current (e.g. deliver best). Missing versions are refused."""
    ws = Path(root)
    if skills is not None:
        _require_version(ws, "skills", skills)
    if prompts is not None:
        _require_version(ws, "prompts", prompts)
    return _update_manifest(ws, lambda m: replace(
        m,
        skills_version=skills if skills is not None else m.skills_version,
        prompts_version=prompts if prompts is not None else m.prompts_version,
    ))


def promote(root: str | os.PathLike[str], kind: Kind, tree: HarnessTree, meta: Mapping[str, Any] | None = None) -> str:
    """Store `tree` as a new `kind` version and make it current; returns the version name."""
    if kind not in KINDS:
        raise WorkspaceError(f"promote: kind must be one of {KINDS}, got {kind!r}")
    ws = Path(root)
    with _manifest_lock:
        manifest = read_manifest(ws)
        previous = manifest.skills_version if kind == "skills" else manifest.prompts_version
        version = advance_version(ws / kind, tree, {"parent": previous, **dict(meta or {})})
        if kind == "skills":
            write_manifest(ws, replace(manifest, skills_version=version))
        else:
            write_manifest(ws, replace(manifest, prompts_version=version))
    return version


def harness_view(root: str | os.PathLike[str], skills_version: str | None = None, prompts_version: str | None = None) -> HarnessTree:
    """The solver's tree: prompts ∪ skills under `skills/` (current versions when not given)."""
    ws = Path(root)
    if skills_version is None or prompts_version is None:
        m = read_manifest(ws)
        skills_version = skills_version or m.skills_version
        prompts_version = prompts_version or m.prompts_version
    skills = read_version_tree(ws / "skills", skills_version)
    prompts = read_version_tree(ws / "prompts", prompts_version)
    return compose_view(skills, prompts)


def compose_view(skills: HarnessTree, prompts: HarnessTree) -> HarnessTree:
    clash = [p for p in prompts if p.startswith("skills/")]
    if clash:
        raise WorkspaceError(f"prompts tree must not contain skills/ paths (they belong to the skills tree): {clash}")
    return prompts.merged(skills.prefixed("skills"))
