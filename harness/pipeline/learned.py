"""What was learned: the diff base -> delivered per file, each changed line with the step that made it.

The final workspace holds every version of the skills and prompts trees, each with the metadata
its promotion recorded (harness/workspace.py `promote`: `gate accept` / `gate probation` with
epoch, step and task type; `momentum`, `probation rollback`, the slow update's system and tool
edits). Walking v0 -> the delivered version, a line of the final diff is attributed to the last
version that added (or removed) it, so the report says which gate accepted each hunk.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from html import escape
from pathlib import Path
from typing import Any

from harness.store import list_versions, read_version, version_number

KINDS = ("skills", "prompts")


@dataclass(frozen=True)
class ChangedLine:
    sign: str  # "+" added, "-" removed
    text: str
    origin: str  # who made the change, e.g. "gate accept e1.s2 (algebra)"


@dataclass(frozen=True)
class FileChange:
    path: str  # in the solver's view: skills/<task_type>/SKILL.md, system_prompt.md, tools/<tool>.md
    status: str  # "changed" | "added" | "removed"
    diff: str  # unified diff base -> delivered
    lines: tuple[ChangedLine, ...] = field(default=())


def origin_of(meta: Mapping[str, Any], version: str) -> str:
    """A short description of what promoted `version` (its store metadata)."""
    reason = str(meta.get("reason", "")) or "promoted"
    where = []
    if meta.get("epoch") is not None:
        where.append(f"e{meta['epoch']}" + (f".s{meta['step']}" if meta.get("step") is not None else ""))
    if meta.get("task_type"):
        where.append(f"({meta['task_type']})")
    return " ".join([reason, *where, f"-> {version}"])


def _history(store: Path, last: str) -> list[tuple[str, dict[str, str], dict[str, Any]]]:
    """(version, files, meta) for v0 .. `last` of one store, in order."""
    end = version_number(last)
    history = []
    for name in list_versions(store):
        if version_number(name) > end:
            break
        stored = read_version(store, name)
        history.append((name, dict(stored.tree.items()), dict(stored.meta)))
    return history


def _attribute(history: list[tuple[str, dict[str, str], dict[str, Any]]], path: str, sign: str, line: str) -> str:
    """The last version whose promotion added (`+`) or removed (`-`) `line` of `path`."""
    for i in range(len(history) - 1, 0, -1):
        name, files, meta = history[i]
        before = history[i - 1][1].get(path, "").splitlines()
        after = files.get(path, "").splitlines()
        if (sign == "+" and line in after and line not in before) or (sign == "-" and line in before and line not in after):
            return origin_of(meta, name)
    return "unknown"


def file_changes(workspace: Path, skills_version: str, prompts_version: str) -> list[FileChange]:
    """Every file that differs between v0/v0 and the delivered versions, with its changed lines attributed."""
    out: list[FileChange] = []
    for kind, last in (("skills", skills_version), ("prompts", prompts_version)):
        history = _history(workspace / kind, last)
        base, final = history[0][1], history[-1][1]
        for path in sorted(set(base) | set(final)):
            old, new = base.get(path), final.get(path)
            if old == new:
                continue
            shown = f"skills/{path}" if kind == "skills" else path
            diff = "".join(difflib.unified_diff((old or "").splitlines(True), (new or "").splitlines(True),
                                                fromfile=f"base/{shown}", tofile=f"delivered/{shown}"))
            lines = []
            for row in diff.splitlines()[2:]:
                if row[:1] in "+-" and row.strip() not in ("+", "-"):
                    lines.append(ChangedLine(row[0], row[1:], _attribute(history, path, row[0], row[1:])))
            status = "added" if old is None else "removed" if new is None else "changed"
            out.append(FileChange(shown, status, diff, tuple(lines)))
    return out


def run_changes(state_dir: Path, epochs: int) -> list[FileChange] | None:
    """The changes of a finished run's delivered harness (None before the holdout stage has run)."""
    holdout = state_dir / "holdout" / "holdout.json"
    final = state_dir / f"e{epochs}" / "slow" / "workspace"
    if not holdout.is_file() or not final.is_dir():
        return None
    delivered = json.loads(holdout.read_text(encoding="utf-8"))["delivered"]
    return file_changes(final, str(delivered["skills_version"]), str(delivered["prompts_version"]))


HEADING = "What was learned (base -> delivered)"


def learned_markdown(changes: list[FileChange] | None) -> str:
    if changes is None:
        return ""
    parts = [f"\n## {HEADING}\n"]
    if not changes:
        parts.append("\nThe delivered harness is the base harness: no edit was installed.\n")
    for change in changes:
        parts.append(f"\n### `{change.path}` ({change.status})\n\n")
        parts.append("| | line | installed by |\n|---|---|---|\n")
        for line in change.lines:
            parts.append(f"| {line.sign} | {line.text.replace('|', '&#124;')} | {line.origin} |\n")
        parts.append(f"\n```diff\n{change.diff}```\n")
    return "".join(parts)


def learned_html(changes: list[FileChange] | None) -> str:
    if changes is None:
        return ""
    parts = [f"<h2>{escape(HEADING)}</h2>\n"]
    if not changes:
        parts.append("<p>The delivered harness is the base harness: no edit was installed.</p>\n")
    for change in changes:
        rows = "".join(f"<tr><td>{escape(line.sign)}</td><td>{escape(line.text)}</td><td>{escape(line.origin)}</td></tr>"
                       for line in change.lines)
        parts.append(f"<h3><code>{escape(change.path)}</code> ({escape(change.status)})</h3>\n"
                     f"<table><tr><th></th><th>line</th><th>installed by</th></tr>{rows}</table>\n"
                     f"<pre>{escape(change.diff)}</pre>\n")
    return "".join(parts)


def append_learned(markdown: Path, html: Path, changes: list[FileChange] | None) -> None:
    """Add the section at the end of the Markdown report and before </body> of the HTML report (atomically)."""
    from harness.atomic import atomic_write_text

    if changes is None:
        return
    atomic_write_text(markdown, markdown.read_text(encoding="utf-8") + learned_markdown(changes))
    text = html.read_text(encoding="utf-8")
    atomic_write_text(html, text.replace("</body>", learned_html(changes) + "</body>", 1))
