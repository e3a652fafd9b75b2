"""Apply parsed edit operations to a harness file's text.

Contract of `apply_edits(text, edits, budget)`:
  * edits are applied in order, each to the result of the previous ones;
  * `add` appends `- <text>` as the last bullet of the `## Rules` section
    (the section is created at the end of the file when missing); the text is
    collapsed to one line; `duplicate` when the file already states it
    (normalised comparison, harness/sim/matching.normalize semantics);
  * `replace` / `delete` need `old` present: first as an exact substring,
    else as a whole line compared without bullet marker, case and extra
    whitespace; otherwise `not_found`. `delete` of a whole line removes the line;
  * once `budget` edits were applied, every further edit is `over_budget`;
    so is an edit that would push the file past `max_chars`;
  * an unknown op or a missing/empty field is `invalid`.
Nothing else changes the text; the statuses say exactly what happened.
"""

from __future__ import annotations

import re

from harness.kernel.types import Edit, EditApplication

RULES_HEADING = "## Rules"
VALID_OPS = ("add", "replace", "delete")
_BULLET = re.compile(r"^\s*(?:[-*+•]|\d+[.)])\s+")
_WORD = re.compile(r"[a-z0-9]+")


def _norm(text: str) -> str:
    words = _WORD.findall(text.lower())
    return " " + " ".join(words) + " " if words else " "


def _line_key(line: str) -> str:
    return " ".join(_BULLET.sub("", line, count=1).split()).lower().rstrip(".")


def one_line(text: str) -> str:
    return " ".join(text.split())


def _add_bullet(text: str, rule: str) -> str:
    lines = text.split("\n")
    heading = next((i for i, line in enumerate(lines) if line.strip().lower() == RULES_HEADING.lower()), None)
    if heading is None:
        body = text.rstrip("\n")
        sep = "\n\n" if body else ""
        return f"{body}{sep}{RULES_HEADING}\n- {rule}\n"
    end = len(lines)
    for j in range(heading + 1, len(lines)):
        if lines[j].startswith("#") or lines[j].startswith("<!--"):
            end = j
            break
    insert_at = end
    while insert_at > heading + 1 and not lines[insert_at - 1].strip():
        insert_at -= 1  # after the last non-blank line of the section
    lines.insert(insert_at, f"- {rule}")
    return "\n".join(lines)


def _locate_line(text: str, old: str) -> int | None:
    key = _line_key(old)
    if not key:
        return None
    for i, line in enumerate(text.split("\n")):
        if _line_key(line) == key:
            return i
    return None


def _apply_one(text: str, edit: Edit) -> tuple[str, str, str]:
    """(new_text, status, detail) for one edit, budget not considered."""
    op = (edit.op or "").strip().lower()
    if op not in VALID_OPS:
        return text, "invalid", f"unknown op {edit.op!r}; expected one of {', '.join(VALID_OPS)}"
    if op == "add":
        rule = one_line(edit.text or "")
        if not rule:
            return text, "invalid", "add needs a non-empty text"
        if _norm(rule) in _norm(text):
            return text, "duplicate", "the file already states this text"
        return _add_bullet(text, rule), "applied", ""
    old = edit.old or ""
    if not old.strip():
        return text, "invalid", f"{op} needs a non-empty <old> text"
    if op == "replace" and not (edit.text or "").strip():
        return text, "invalid", "replace needs a non-empty <new> text (use delete to remove text)"
    if old in text:
        if op == "replace":
            return text.replace(old, edit.text, 1), "applied", ""
        idx = _locate_line(text, old)
        if idx is not None:
            lines = text.split("\n")
            del lines[idx]
            return "\n".join(lines), "applied", ""
        return text.replace(old, "", 1), "applied", ""
    idx = _locate_line(text, old)
    if idx is None:
        return text, "not_found", "the <old> text does not occur in the file"
    lines = text.split("\n")
    if op == "delete":
        del lines[idx]
    else:
        marker = _BULLET.match(lines[idx])
        lines[idx] = (marker.group(0) if marker else "") + one_line(edit.text)
    return "\n".join(lines), "applied", ""


def apply_edits(text: str, edits: list[Edit], budget: int, max_chars: int | None = None) -> tuple[str, list[EditApplication]]:
    """Apply `edits` in order under an edit budget; returns the new text and one status per edit."""
    if budget < 0:
        raise ValueError(f"edit budget must be >= 0, got {budget}")
    report: list[EditApplication] = []
    applied = 0
    for edit in edits:
        if applied >= budget:
            report.append(EditApplication(edit, "over_budget", f"edit budget of {budget} already used"))
            continue
        new_text, status, detail = _apply_one(text, edit)
        if status == "applied" and max_chars is not None and len(new_text) > max_chars:
            report.append(EditApplication(edit, "over_budget", f"file would grow to {len(new_text)} chars (max {max_chars})"))
            continue
        report.append(EditApplication(edit, status, detail))
        if status == "applied":
            text = new_text
            applied += 1
    return text, report
