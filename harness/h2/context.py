"""Evidence context: the files an editor, selector or reflector works from.

`build_context(dest, ...)` writes one directory per session::

    mission.md                     what this session must do (the stage's instructions)
    task.md                        task header + prompt (no criteria, no expected answers)
    source/<path>                  task source material minus leak globs
    rollouts/<label>.md            every rollout in full; each observation truncated
                                   at `obs_limit` (>= 10,000) chars, marked when cut
    deliverables/<label>/deliverable.md (+ files/<path>)
    harness/<path>                 the current tree
    library/INDEX.md (+ <task>/EXPERIENCE.md)   entries visible to this task only
    pool/<label>/{harness/..., diff.patch, notes.md, status.md}   candidates so far

After writing, the tree is re-checked: any evidence file matching a leak
glob, or any file whose name or text carries a grader verdict, rubric score
or answer key, makes `build_context` raise `ContextLeakError` (and remove
the directory): the context is refused, never silently cleaned.

A chat-completion editor cannot open a directory, so `render_context`
renders these files into the prompt, bounded by `max_chars`: whole files in
priority order (task, source, library, rollouts, deliverables); files that
do not fit are listed by name as not shown. The current harness and the
pool are rendered separately by harness/h2/prompts.py.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

from harness.h2.adapters import Rollout, TaskAdapter
from harness.h2.verdicts import matches_leak_glob, scan_files
from harness.tree import HarnessTree, check_relative_path

MIN_OBS_LIMIT = 10_000
DEFAULT_OBS_LIMIT = 20_000
EVIDENCE_BEGIN = "----- EVIDENCE FILE: {path} -----"
EVIDENCE_END = "----- END EVIDENCE FILE -----"


class ContextLeakError(RuntimeError):
    """The evidence context would show the editor an answer key or a grader verdict."""


@dataclass(frozen=True)
class PoolEntry:
    """A candidate so far: its tree, diff against the tree it was made from, probe rollout, notes."""

    label: str
    stage: str  # "inv" | "dom" | "compose"
    tree: HarnessTree
    parent: HarnessTree
    rollout: Rollout | None
    notes: str = ""
    status: str = "ok"  # "ok" | "fallback" | "dead" | "no-change"

    @property
    def diff(self) -> str:
        return self.parent.unified_diff(self.tree) or "(no change against the tree it was made from)\n"


def render_rollout(rollout: Rollout, obs_limit: int = DEFAULT_OBS_LIMIT) -> str:
    if obs_limit < MIN_OBS_LIMIT:
        raise ValueError(f"per-observation truncation must be >= {MIN_OBS_LIMIT} chars, got {obs_limit}")
    lines = [f"# Rollout {rollout.label}", "", f"harness: {rollout.harness_fingerprint}", f"status: {'ok' if rollout.ok else 'dead'}"]
    if rollout.error:
        lines.append(f"error: {rollout.error}")
    lines.append("")
    for obs in rollout.observations:
        content = obs.content
        if len(content) > obs_limit:
            content = content[:obs_limit] + f"\n[... {len(obs.content) - obs_limit} more chars truncated ...]"
        lines += [f"## {obs.step} ({obs.kind})", content, ""]
    lines += ["## Deliverable", rollout.deliverable]
    return "\n".join(lines) + "\n"


def _write(root: Path, rel: str, text: str) -> None:
    # plain writes into a private temp dir; the whole dir is published with one os.replace
    check_relative_path(rel)
    target = root.joinpath(*rel.split("/"))
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text, encoding="utf-8")


def build_context(
    dest: Path,
    adapter: TaskAdapter,
    *,
    mission: str,
    current: HarnessTree,
    rollouts: Sequence[Rollout] = (),
    pool: Sequence[PoolEntry] = (),
    library_files: Mapping[str, str] | None = None,
    obs_limit: int = DEFAULT_OBS_LIMIT,
) -> Path:
    """Write the evidence directory `dest` (replacing it, published with one rename); return it.

    Raises ContextLeakError (nothing is published) when the checks refuse the context.
    """
    if obs_limit < MIN_OBS_LIMIT:
        raise ValueError(f"per-observation truncation must be >= {MIN_OBS_LIMIT} chars, got {obs_limit}")
    final = Path(dest)
    dest = final.with_name(f".{final.name}.tmp-{os.getpid()}")
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    try:
        _write(dest, "mission.md", mission.rstrip() + "\n")
        _write(dest, "task.md", f"# Task {adapter.task_id}\n\n{adapter.task_header()}\nDomain: {adapter.domain}\n\n{adapter.prompt.strip()}\n")
        skipped: list[str] = []
        for path, text in adapter.source_files().items():
            if matches_leak_glob(path, adapter.leak_globs):
                skipped.append(path)
                continue
            _write(dest, f"source/{path}", text)
        all_rollouts = list(rollouts) + [p.rollout for p in pool if p.rollout is not None and p.rollout not in rollouts]
        for r in all_rollouts:
            _write(dest, f"rollouts/{r.label}.md", render_rollout(r, obs_limit))
            _write(dest, f"deliverables/{r.label}/deliverable.md", r.deliverable)
            for fpath, ftext in r.deliverable_files.items():
                _write(dest, f"deliverables/{r.label}/files/{fpath}", ftext)
        for path, text in current.items():
            _write(dest, f"harness/{path}", text)
        for path, text in (library_files or {"INDEX.md": "# Experience library\n\n(no entries yet)\n"}).items():
            _write(dest, f"library/{path}", text)
        for p in pool:
            for path, text in p.tree.items():
                _write(dest, f"pool/{p.label}/harness/{path}", text)
            _write(dest, f"pool/{p.label}/diff.patch", p.diff)
            _write(dest, f"pool/{p.label}/notes.md", (p.notes or "(no notes)") + "\n")
            _write(dest, f"pool/{p.label}/status.md", f"stage: {p.stage}\nstatus: {p.status}\nrollout: {p.rollout.label if p.rollout else '(not probed)'}\n")
        check_context(dest, adapter.leak_globs)
    except BaseException:
        shutil.rmtree(dest, ignore_errors=True)
        raise
    if final.exists():
        shutil.rmtree(final)
    os.replace(dest, final)
    return final


def _is_harness_file(rel: str) -> bool:
    parts = rel.split("/")
    return parts[0] == "harness" or (parts[0] == "pool" and len(parts) > 2 and parts[2] == "harness")


def read_context(dest: Path) -> dict[str, str]:
    root = Path(dest)
    return {p.relative_to(root).as_posix(): p.read_text(encoding="utf-8") for p in sorted(root.rglob("*")) if p.is_file()}


def check_context(dest: Path, leak_globs: Sequence[str]) -> None:
    """Refuse a context with leak-glob evidence files or any grader verdict (names or text)."""
    files = read_context(dest)
    leaks = [f"{rel} (matches {g!r})" for rel in files if not _is_harness_file(rel) and (g := matches_leak_glob(rel.split("/", 1)[-1], leak_globs))]
    if leaks:
        raise ContextLeakError(f"evidence context {dest} holds files matching leak globs: {leaks}")
    hits = scan_files(files)
    if hits:
        raise ContextLeakError(f"evidence context {dest} refused: " + "; ".join(h.message() for h in hits[:5]))


_PRIORITY = ("task.md", "source/", "library/", "rollouts/", "deliverables/")


def render_context(dest: Path, max_chars: int = 60_000, *, sections: Sequence[str] = _PRIORITY) -> str:
    """The context files (except harness/ and pool/) as evidence blocks, whole files only, within `max_chars`."""
    files = read_context(dest)
    ordered = [rel for prefix in sections for rel in files if rel == prefix or (prefix.endswith("/") and rel.startswith(prefix))]
    out: list[str] = []
    used = 0
    omitted: list[str] = []
    for rel in ordered:
        block = f"{EVIDENCE_BEGIN.format(path=rel)}\n{files[rel].rstrip()}\n{EVIDENCE_END}"
        if used + len(block) > max_chars:
            omitted.append(f"{rel} ({len(files[rel]):,} chars)")
            continue
        out.append(block)
        used += len(block) + 1
    if omitted:
        out.append("Not shown (prompt budget; the files exist in the context directory): " + ", ".join(omitted))
    return "\n".join(out)
