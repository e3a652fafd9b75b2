"""The experience library: per-domain, whole adopted trees + EXPERIENCE.md + INDEX.md.

Layout under ``<root>/<tag>/<mode>/<domain>/``::

    INDEX.md                               rebuilt from disk after every write
    harnesses/<task>/harness/...           the whole adopted tree
    harnesses/<task>/EXPERIENCE.md         cue / lesson / evidence / confidence / edits
    harnesses/<task>/entry.json            stream index, fingerprint, experience (written last)

Tasks of a domain run in stream order; a task sees only entries whose stream
index is lower than its own (no future leak), whatever is on disk. Adopting
is not applying: the library is pending-review experience the editors may
read; only with ``auto_apply`` does the next task's base become the latest
adopted tree.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from harness.atomic import atomic_write_json, atomic_write_text
from harness.tree import HarnessTree

_SEGMENT_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


def _segment(value: str, what: str) -> str:
    if not isinstance(value, str) or not _SEGMENT_RE.match(value) or ".." in value:
        raise ValueError(f"library {what} {value!r} must match [A-Za-z0-9][A-Za-z0-9._-]* (it becomes a folder name)")
    return value


@dataclass(frozen=True)
class Experience:
    cue: str
    lesson: str
    evidence: str
    confidence: float | None = None
    edits: str = ""

    @staticmethod
    def from_mapping(d: Mapping[str, Any] | None) -> Experience | None:
        """The experience, or None when cue, lesson or evidence is missing or empty."""
        if not isinstance(d, Mapping):
            return None
        texts = [v.strip() for v in (d.get(k) for k in ("cue", "lesson", "evidence")) if isinstance(v, str)]
        if len(texts) != 3 or not all(texts):
            return None
        cue, lesson, evidence = texts
        conf = d.get("confidence")
        try:
            conf = None if conf is None else min(1.0, max(0.0, float(conf)))
        except (TypeError, ValueError):
            conf = None
        edits = d.get("edits") or ""
        if not isinstance(edits, str):
            edits = json.dumps(edits, ensure_ascii=False)
        return Experience(cue, lesson, evidence, conf, edits.strip())

    def to_dict(self) -> dict[str, Any]:
        return {"cue": self.cue, "lesson": self.lesson, "evidence": self.evidence, "confidence": self.confidence, "edits": self.edits}

    def to_markdown(self, task_id: str) -> str:
        conf = "unknown" if self.confidence is None else f"{self.confidence:.2f}"
        parts = [f"# Experience from task {task_id}", "", f"**Cue:** {self.cue}", "", f"**Lesson:** {self.lesson}", "", f"**Evidence:** {self.evidence}", "", f"**Confidence:** {conf}"]
        if self.edits:
            parts += ["", "## Edits", "", self.edits]
        return "\n".join(parts) + "\n"


@dataclass(frozen=True)
class LibraryEntry:
    task_id: str
    stream_index: int
    fingerprint: str
    experience: Experience
    reason: str
    directory: Path

    def tree(self) -> HarnessTree:
        return HarnessTree.load(self.directory / "harness")


class Library:
    def __init__(self, root: Path, tag: str, mode: str, domain: str):
        self.root = Path(root)
        self.dir = self.root / _segment(tag, "tag") / _segment(mode, "mode") / _segment(domain, "domain")

    def entries(self) -> list[LibraryEntry]:
        """Complete entries on disk (entry.json present and valid), in stream order."""
        out: list[LibraryEntry] = []
        hdir = self.dir / "harnesses"
        if not hdir.is_dir():
            return out
        for task_dir in sorted(p for p in hdir.iterdir() if p.is_dir()):
            try:
                meta = json.loads((task_dir / "entry.json").read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue  # an interrupted write leaves no entry.json: not an entry
            exp = Experience.from_mapping(meta.get("experience"))
            if exp is None or not (task_dir / "harness").is_dir():
                continue
            out.append(LibraryEntry(meta["task_id"], int(meta["stream_index"]), meta["fingerprint"], exp, meta.get("reason", ""), task_dir))
        return sorted(out, key=lambda e: (e.stream_index, e.task_id))

    def visible(self, stream_index: int) -> list[LibraryEntry]:
        """Entries a task at `stream_index` may see: strictly earlier in the stream."""
        return [e for e in self.entries() if e.stream_index < stream_index]

    def adopt(self, task_id: str, stream_index: int, tree: HarnessTree, experience: Experience, reason: str = "") -> LibraryEntry:
        task_dir = self.dir / "harnesses" / _segment(task_id, "task id")
        tree.save(task_dir / "harness")
        atomic_write_text(task_dir / "EXPERIENCE.md", experience.to_markdown(task_id))
        atomic_write_json(
            task_dir / "entry.json",
            {"task_id": task_id, "stream_index": stream_index, "fingerprint": tree.fingerprint, "experience": experience.to_dict(), "reason": reason},
        )
        self.rebuild_index()
        return LibraryEntry(task_id, stream_index, tree.fingerprint, experience, reason, task_dir)

    @staticmethod
    def render_index(entries: list[LibraryEntry], title: str) -> str:
        lines = [f"# Experience library: {title}", "", "Pending-review experience from earlier tasks (whole adopted harness under harnesses/<task>/harness/).", ""]
        if not entries:
            lines.append("(no entries yet)")
        for e in entries:
            conf = "?" if e.experience.confidence is None else f"{e.experience.confidence:.2f}"
            lines.append(f"- [{e.stream_index}] {e.task_id} (harness {e.fingerprint}, confidence {conf}): when {e.experience.cue} -> {e.experience.lesson}")
        return "\n".join(lines) + "\n"

    def rebuild_index(self) -> Path:
        path = self.dir / "INDEX.md"
        atomic_write_text(path, self.render_index(self.entries(), self.dir.name))
        return path

    def context_files(self, stream_index: int) -> dict[str, str]:
        """What an editor of the task at `stream_index` may read (visible entries only)."""
        vis = self.visible(stream_index)
        files = {"INDEX.md": self.render_index(vis, self.dir.name)}
        for e in vis:
            files[f"{e.task_id}/EXPERIENCE.md"] = (e.directory / "EXPERIENCE.md").read_text(encoding="utf-8")
        return files

    def base_for(self, stream_index: int, default: HarnessTree, auto_apply: bool) -> tuple[HarnessTree, str]:
        """The base harness for the task at `stream_index` and where it came from."""
        if not auto_apply:
            return default, "project base (auto_apply off: library entries are pending review)"
        vis = self.visible(stream_index)
        if not vis:
            return default, "project base (auto_apply on, no earlier entry)"
        latest = vis[-1]
        return latest.tree(), f"library entry {latest.task_id} (auto_apply on)"
