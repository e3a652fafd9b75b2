"""The reflective loop's reply formats: diagnoser, editor (edit ops) and momentum replies, and the prompt headings.

Each role's system message carries one `FORMAT: <name>` line naming its reply
format (the simulated provider routes on it); the user message is built from
the headings below, which both real LLMs and the simulated world read:

  Target file: <path>          the file being edited
  Task type: <task_type>       (skill editor, diagnoser, momentum)
  Edit budget: <n>             (editors)
  ## Current file              the file between <file> and </file>
  ## Failure cases             `### Case i · qid <qid> · Task type: <t>` blocks
  ## Diagnoses                 one bullet per diagnosis
  ## Rejected edits            applied edits a gate already rejected
  ## Tool usage                (tool editor)
  ## Comparison                (momentum) outcomes grouped by category
  ## Previous guidance         (momentum)

Each parser returns data or raises `ReplyFormatError` with a message that says
what was expected, so callers can retry once with that feedback and then
record the error.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from harness.kernel.types import Edit, EditApplication

FORMAT_DIAGNOSIS = "diagnosis"
FORMAT_EDIT_OPS = "edit-ops"
FORMAT_MOMENTUM = "momentum"

H_CURRENT_FILE = "## Current file"
H_FAILURES = "## Failure cases"
H_DIAGNOSES = "## Diagnoses"
H_REJECTED = "## Rejected edits"
H_TOOL_USAGE = "## Tool usage"
H_COMPARISON = "## Comparison"
H_PREVIOUS_GUIDANCE = "## Previous guidance"
FILE_OPEN, FILE_CLOSE = "<file>", "</file>"
TRACE_OPEN, TRACE_CLOSE = "<trace>", "</trace>"

EDIT_OPS_CONTRACT = f"""FORMAT: {FORMAT_EDIT_OPS}
Reply with zero or more edit blocks, nothing else is applied:
<edit op="add"><new>one rule sentence</new><why>short reason</why></edit>
<edit op="replace"><old>exact text now in the file</old><new>replacement text</new><why>short reason</why></edit>
<edit op="delete"><old>exact text now in the file</old><why>short reason</why></edit>
or, when no edit is worth making, exactly <no-change>reason</no-change>.
Use at most the edit budget. `add` appends a bullet to the file's rules; replace/delete must quote text that exists."""

DIAGNOSIS_CONTRACT = f"""FORMAT: {FORMAT_DIAGNOSIS}
Reply with exactly one block: <diagnosis>one paragraph</diagnosis>"""

MOMENTUM_CONTRACT = f"""FORMAT: {FORMAT_MOMENTUM}
Reply with exactly one block: <guidance>
- bullet
- bullet
</guidance>"""


class ReplyFormatError(ValueError):
    """An LLM reply does not follow its FORMAT contract."""


_DIAGNOSIS = re.compile(r"<diagnosis>(.*?)</diagnosis>", re.DOTALL | re.IGNORECASE)
_EDIT_BLOCK = re.compile(r"<edit\b([^>]*)>(.*?)</edit>", re.DOTALL | re.IGNORECASE)
_EDIT_OPEN = re.compile(r"<edit\b", re.IGNORECASE)
_OP_ATTR = re.compile(r"""op\s*=\s*["']([^"']*)["']""", re.IGNORECASE)
_NO_CHANGE = re.compile(r"<no-change>(.*?)</no-change>", re.DOTALL | re.IGNORECASE)
_GUIDANCE = re.compile(r"<guidance>(.*?)</guidance>", re.DOTALL | re.IGNORECASE)
_BULLET = re.compile(r"^\s*(?:[-*+•]|\d+[.)])\s*")


def _tag(body: str, name: str) -> str | None:
    m = re.search(rf"<{name}>(.*?)</{name}>", body, re.DOTALL | re.IGNORECASE)
    return m.group(1).strip() if m else None


def parse_diagnosis(text: str) -> str:
    """The paragraph inside <diagnosis>…</diagnosis>, whitespace collapsed."""
    m = _DIAGNOSIS.search(text or "")
    if not m:
        raise ReplyFormatError("expected one <diagnosis>…</diagnosis> block, found none")
    body = " ".join(m.group(1).split())
    if not body:
        raise ReplyFormatError("the <diagnosis> block is empty")
    return body


@dataclass
class EditOps:
    edits: list[Edit] = field(default_factory=list)
    no_change: str | None = None  # reason, when the editor declined (or none of its edits can be applied)
    # edits the reply's format admits that cannot be applied, each with status "invalid" and its reason (recorded)
    refused: list[EditApplication] = field(default_factory=list)


def parse_edit_ops(text: str) -> EditOps:
    """Edit blocks or one <no-change>; raises ReplyFormatError on anything else.

    An unknown op is passed through (apply_edits reports it `invalid`); a block
    without an op, an unclosed block, or a replace/delete without <old> is a
    format error.
    """
    text = text or ""
    blocks = list(_EDIT_BLOCK.finditer(text))
    opened = len(_EDIT_OPEN.findall(text))
    if opened != len(blocks):
        raise ReplyFormatError(f"found {opened} '<edit' openings but {len(blocks)} complete <edit …>…</edit> blocks (unclosed or nested block)")
    no_change = _NO_CHANGE.search(text)
    if blocks and no_change:
        raise ReplyFormatError("reply has both <edit> blocks and <no-change>; give one or the other")
    if not blocks:
        if no_change:
            return EditOps(edits=[], no_change=" ".join(no_change.group(1).split()) or "(no reason given)")
        raise ReplyFormatError('expected <edit op="add|replace|delete">…</edit> blocks or <no-change>reason</no-change>, found neither')
    edits: list[Edit] = []
    for i, m in enumerate(blocks, 1):
        op_match = _OP_ATTR.search(m.group(1))
        if not op_match:
            raise ReplyFormatError(f'edit block {i} has no op="…" attribute')
        op = op_match.group(1).strip().lower()
        body = m.group(2)
        old, new, why = _tag(body, "old"), _tag(body, "new"), _tag(body, "why") or ""
        if op == "add":
            if new is None:
                stripped = re.sub(r"<why>.*?</why>", "", body, flags=re.DOTALL | re.IGNORECASE).strip()
                new = stripped if "<" not in stripped else None
            if not new:
                raise ReplyFormatError(f"edit block {i} (add) has no <new>text</new>")
            edits.append(Edit(op="add", text=new, rationale=why))
        elif op in ("replace", "delete"):
            if not old:
                raise ReplyFormatError(f"edit block {i} ({op}) has no <old>text</old>")
            if op == "replace" and not new:
                raise ReplyFormatError(f"edit block {i} (replace) has no <new>text</new>")
            edits.append(Edit(op=op, text=new or "", old=old, rationale=why))
        else:
            edits.append(Edit(op=op, text=new or "", old=old or "", rationale=why))
    return EditOps(edits=edits)


def parse_guidance(text: str) -> str:
    """The bullet list inside <guidance>…</guidance>, normalised to `- item` lines."""
    m = _GUIDANCE.search(text or "")
    if not m:
        raise ReplyFormatError("expected one <guidance>…</guidance> block, found none")
    items = [_BULLET.sub("", line).strip() for line in m.group(1).splitlines()]
    items = [" ".join(i.split()) for i in items if i.strip()]
    if not items:
        raise ReplyFormatError("the <guidance> block has no bullet")
    return "\n".join(f"- {i}" for i in items)
