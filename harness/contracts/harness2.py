"""Harness² reply formats (seeds 002/003): editor file blocks, selector choice, reflector experience, judge grade.

Every Harness² system message carries one line ``FORMAT: <name>`` naming the
reply format below; the prompts (harness/h2/prompts.py), the parsers
(harness/h2/roles.py) and the simulated world (harness/sim) import them from
here.

The editor answers with exactly one of:

1. changed files, each as a block (only changed files; an omitted file is
   inherited unchanged from the tree the editor started from)::

       === HARNESS FILE: relative/path ===
       <full new content>
       === END HARNESS FILE ===

   and deletions (removing that component) as a single line::

       === DELETE HARNESS FILE: relative/path ===

   plus optionally ``<notes>what changed and why</notes>``;
2. ``<no-change>reason</no-change>`` — "keep the tree as it is" is a
   legitimate answer but must be explicit.

Format errors (`EditorFormatError`): file blocks together with the
no-change marker, a path off the surface or unsafe, an unclosed block, a
path given twice, an empty no-change reason, and a reply with neither blocks
nor the marker (including notes that claim changes without any block). The
caller retries once with the error as feedback, then records a fallback.

Probe and base rollouts are quoted in composition prompts between
``ROLLOUT_BEGIN`` / ``ROLLOUT_END`` lines (kind BASE or PROBE).

A probe's deliverable is its final reply plus its deliverable files, each as
a block (`render_deliverable`; selector, judge and editor contexts read it)::

    === DELIVERABLE FILE: relative/path ===
    <content>
    === END DELIVERABLE FILE ===

An agent that cannot leave files in its working directory may put such
blocks in its final reply (seed 002: every executor): `parse_deliverable_blocks`
lifts them out as files. A malformed block (unclosed, unsafe path, a path
given twice) is not a file: it stays in the reply as text and its error is
recorded, and the round goes on.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Mapping, Protocol, Sequence

from harness.tree import HarnessTree, TreePathError, check_relative_path

FORMAT_EDITOR = "harness-file-blocks"
FORMAT_CHOICE = "choice"
FORMAT_EXPERIENCE = "experience"
FORMAT_GRADE = "grade"

OUTPUT_CONTRACT = (
    "Answer with EITHER the changed files only, each as\n"
    "=== HARNESS FILE: <relative path> ===\n<the complete new content>\n=== END HARNESS FILE ===\n"
    "(omitted files are inherited unchanged; delete a file with the single line '=== DELETE HARNESS FILE: <path> ==='),\n"
    "followed by <notes>what you changed and which evidence supports it</notes>;\n"
    "OR exactly <no-change>why the current harness should stay</no-change>. Never both."
)
CHOICE_CONTRACT = "Answer with a fenced block ```choice\\n<candidate id>\\n``` followed by <why>your reason</why>."
EXPERIENCE_CONTRACT = (
    'Answer <experience>{"cue": "when this applies", "lesson": "what to do", "evidence": "what in the rollouts shows it", '
    '"confidence": 0.0-1.0}</experience> and optionally <edits>the harness edits that carry it</edits>. '
    "Leave cue, lesson or evidence empty when there is no lesson with evidence."
)
GRADE_CONTRACT = "Answer <grade>number between 0.0 and 1.0</grade> then <why>reason</why>."

ROLLOUT_BEGIN = "----- {kind} ROLLOUT: {label} -----"
ROLLOUT_END = "----- END {kind} ROLLOUT -----"
BASE = "BASE"
PROBE = "PROBE"


def rollout_block(kind: str, label: str, rendered: str) -> str:
    return f"{ROLLOUT_BEGIN.format(kind=kind, label=label)}\n{rendered.rstrip()}\n{ROLLOUT_END.format(kind=kind)}"


class EditableSurface(Protocol):
    """What the editor parser needs of a surface (harness/h2/surfaces.Surface): its name and path classifier."""

    @property
    def name(self) -> str: ...  # read-only: a frozen Surface qualifies

    def classify(self, path: str) -> Any: ...

    def editable_paths_text(self) -> str: ...


BEGIN_RE = re.compile(r"^=== HARNESS FILE: (?P<path>.*?) ===[ \t]*$")
END_RE = re.compile(r"^=== END HARNESS FILE ===[ \t]*$")
DELETE_RE = re.compile(r"^=== DELETE HARNESS FILE: (?P<path>.*?) ===[ \t]*$")
NOTES_RE = re.compile(r"<notes>(.*?)</notes>", re.S)
NO_CHANGE_RE = re.compile(r"<no-change>(.*?)</no-change>", re.S)


class EditorFormatError(ValueError):
    """The editor's reply breaks the output contract; the message says how."""


@dataclass(frozen=True)
class EditorOutput:
    changes: Mapping[str, str | None]  # path -> new text, None = delete
    notes: str = ""
    no_change: str | None = None  # the reason, when the editor kept the tree

    @property
    def is_no_change(self) -> bool:
        return self.no_change is not None

    def apply(self, base: HarnessTree) -> HarnessTree:
        """The base tree with the changes applied (omitted files inherited)."""
        return base.with_files(dict(self.changes))


def render_file_blocks(files: Mapping[str, str]) -> str:
    """Files in the same block format the editor answers in (used for `## Current harness`)."""
    out: list[str] = []
    for path, text in files.items():
        body = text if text.endswith("\n") or not text else text + "\n"
        out.append(f"=== HARNESS FILE: {path} ===\n{body}=== END HARNESS FILE ===")
    return "\n".join(out)


def _check_path(raw: str, surface: EditableSurface | None, line_no: int) -> str:
    try:
        path = check_relative_path(raw.strip())
    except TreePathError as exc:
        raise EditorFormatError(f"line {line_no}: unsafe path in file block: {exc}") from None
    if surface is not None and surface.classify(path) is None:
        raise EditorFormatError(
            f"line {line_no}: path {path!r} is off the {surface.name} surface; editable paths: {surface.editable_paths_text()}"
        )
    return path


def parse_editor_output(text: str, surface: EditableSurface | None = None) -> EditorOutput:
    """Parse an editor reply; raise EditorFormatError naming the line and the rule broken."""
    if not text or not text.strip():
        raise EditorFormatError("the reply is empty; answer with file blocks or <no-change>reason</no-change>")
    changes: dict[str, str | None] = {}
    outside: list[str] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        m_begin, m_del = BEGIN_RE.match(line), DELETE_RE.match(line)
        if m_del:
            path = _check_path(m_del.group("path"), surface, i + 1)
            if path in changes:
                raise EditorFormatError(f"line {i + 1}: {path!r} appears in more than one block")
            changes[path] = None
            i += 1
            continue
        if not m_begin:
            if END_RE.match(line):
                raise EditorFormatError(f"line {i + 1}: '=== END HARNESS FILE ===' without an opening '=== HARNESS FILE: path ===' line")
            outside.append(line)
            i += 1
            continue
        path = _check_path(m_begin.group("path"), surface, i + 1)
        if path in changes:
            raise EditorFormatError(f"line {i + 1}: {path!r} appears in more than one block")
        body: list[str] = []
        j = i + 1
        while j < len(lines) and not END_RE.match(lines[j]):
            if BEGIN_RE.match(lines[j]) or DELETE_RE.match(lines[j]):
                raise EditorFormatError(f"line {i + 1}: block for {path!r} is not closed before the next block at line {j + 1}; end every block with '=== END HARNESS FILE ==='")
            body.append(lines[j])
            j += 1
        if j >= len(lines):
            raise EditorFormatError(f"line {i + 1}: block for {path!r} is never closed; end it with '=== END HARNESS FILE ==='")
        changes[path] = "\n".join(body) + ("\n" if body else "")
        i = j + 1
    rest = "\n".join(outside)
    notes_m = NOTES_RE.search(rest)
    notes = notes_m.group(1).strip() if notes_m else ""
    nc_m = NO_CHANGE_RE.search(rest)
    if nc_m and changes:
        raise EditorFormatError("the reply has file blocks AND a <no-change> marker; send either the changed files or the marker, not both")
    if nc_m:
        reason = nc_m.group(1).strip()
        if not reason:
            raise EditorFormatError("<no-change> needs a reason: <no-change>why the current harness should stay</no-change>")
        return EditorOutput(changes={}, notes=notes, no_change=reason)
    if not changes:
        if notes:
            raise EditorFormatError(
                "<notes> describe changes but the reply has no '=== HARNESS FILE: path ===' blocks; "
                "send every changed file as a block, or answer <no-change>reason</no-change>"
            )
        raise EditorFormatError("the reply has neither '=== HARNESS FILE: path ===' blocks nor a <no-change>reason</no-change> marker")
    return EditorOutput(changes=changes, notes=notes, no_change=None)


# ---------------------------------------------------------------- deliverable files in a probe's reply

DELIVERABLE_BEGIN_RE = re.compile(r"^=== DELIVERABLE FILE: (?P<path>.*?) ===[ \t]*$")
DELIVERABLE_END_RE = re.compile(r"^=== END DELIVERABLE FILE ===[ \t]*$")
DELIVERABLE_CONTRACT = (
    "A file you cannot leave in the working directory can be delivered in your final message as\n"
    "=== DELIVERABLE FILE: <relative path> ===\n<the complete content>\n=== END DELIVERABLE FILE ==="
)


def render_deliverable(text: str, files: Mapping[str, str]) -> str:
    """The deliverable a selector/judge reads: the final reply, then every deliverable file whole."""
    parts = [text.strip()]
    for path in sorted(files):
        body = files[path]
        parts.append(f"=== DELIVERABLE FILE: {path} ===\n{body}{'' if body.endswith(chr(10)) or not body else chr(10)}=== END DELIVERABLE FILE ===")
    return "\n\n".join(p for p in parts if p) + "\n"


@dataclass(frozen=True)
class ReplyDeliverables:
    text: str  # the reply without its well-formed blocks (malformed ones stay, as text)
    files: Mapping[str, str]  # path -> content of every well-formed block
    errors: tuple[str, ...] = ()  # one per malformed block: line and rule broken


def parse_deliverable_blocks(reply: str) -> ReplyDeliverables:
    """Lift `=== DELIVERABLE FILE: path ===` blocks out of a probe's final reply; never raises."""
    lines = (reply or "").splitlines()
    kept: list[str] = []
    files: dict[str, str] = {}
    errors: list[str] = []
    i = 0
    while i < len(lines):
        begin = DELIVERABLE_BEGIN_RE.match(lines[i])
        if not begin:
            kept.append(lines[i])
            i += 1
            continue
        end = next((j for j in range(i + 1, len(lines)) if DELIVERABLE_END_RE.match(lines[j]) or DELIVERABLE_BEGIN_RE.match(lines[j])), None)
        if end is None or not DELIVERABLE_END_RE.match(lines[end]):
            errors.append(f"line {i + 1}: deliverable block {begin.group('path').strip()!r} is never closed with '=== END DELIVERABLE FILE ==='")
            kept.append(lines[i])
            i += 1
            continue
        try:
            path = check_relative_path(begin.group("path").strip())
        except TreePathError as exc:
            errors.append(f"line {i + 1}: unsafe path in deliverable block: {exc}")
            kept.extend(lines[i:end + 1])
            i = end + 1
            continue
        if path in files:
            errors.append(f"line {i + 1}: deliverable file {path!r} is given twice; the first block is kept")
            kept.extend(lines[i:end + 1])
            i = end + 1
            continue
        body = lines[i + 1:end]
        files[path] = "\n".join(body) + ("\n" if body else "")
        i = end + 1
    return ReplyDeliverables("\n".join(kept), files, tuple(errors))


# ---------------------------------------------------------------- selector, reflector, judge replies

_CHOICE_RE = re.compile(r"```choice[ \t]*\n\s*(.*?)\s*\n?```", re.S)
_WHY_RE = re.compile(r"<why>(.*?)</why>", re.S)
_EXPERIENCE_RE = re.compile(r"<experience>(.*?)</experience>", re.S)
_EDITS_RE = re.compile(r"<edits>(.*?)</edits>", re.S)
_GRADE_RE = re.compile(r"<grade>\s*([0-9]*\.?[0-9]+)\s*</grade>")


def parse_choice(text: str, ids: Sequence[str]) -> tuple[str | None, str, str | None]:
    """(choice, why, error): the choice block must name exactly one of `ids`."""
    m = _CHOICE_RE.search(text or "")
    why_m = _WHY_RE.search(text or "")
    why = why_m.group(1).strip() if why_m else ""
    if not m:
        return None, why, "no ```choice block in the selector's reply"
    choice = m.group(1).strip().strip("`").strip()
    if choice not in ids:
        return None, why, f"choice {choice!r} is not one of the candidates {list(ids)}"
    return choice, why, None


def parse_experience_block(text: str) -> tuple[dict[str, Any] | None, str | None]:
    """(the <experience> JSON object with `edits` filled from an <edits> block, error); error when absent or not an object."""
    m = _EXPERIENCE_RE.search(text or "")
    if not m:
        return None, "no <experience> block"
    try:
        data = json.loads(m.group(1).strip())
    except json.JSONDecodeError as exc:
        return None, f"<experience> is not JSON: {exc}"
    if not isinstance(data, dict):
        return None, "<experience> must be a JSON object"
    edits = _EDITS_RE.search(text)
    if edits and not data.get("edits"):
        data["edits"] = edits.group(1).strip()
    return data, None


def parse_grade(text: str) -> tuple[float | None, str, str | None]:
    """(grade in 0..1, why, error): None and an error when there is no <grade> in 0..1."""
    m = _GRADE_RE.search(text or "")
    why_m = _WHY_RE.search(text or "")
    why = why_m.group(1).strip() if why_m else ""
    if not m or not 0.0 <= float(m.group(1)) <= 1.0:
        return None, why, "no <grade> in 0..1 in the judge's reply"
    return float(m.group(1)), why, None
