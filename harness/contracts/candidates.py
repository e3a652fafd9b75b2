"""The two file formats of `evolve=candidates`: edits written outside the loop (a person, another optimizer).

`evolve.candidates_path` is either

- a JSONL file, one candidate per line (blank lines are skipped; line numbers
  are the file's own):

      {"skill_file": "skills/<task_type>/SKILL.md", "ops": [...], "why": "...", "source": "person"}

  `ops` uses the editor's edit operations (harness/contracts/evolution.py,
  applied by harness/evolution/apply.py): `{"op": "add", "new": "rule"}`,
  `{"op": "replace", "old": "exact text", "new": "text"}`,
  `{"op": "delete", "old": "exact text"}`, each with an optional `"why"`.
  `source` (who wrote it) is required, `why` optional; no other key;
- a directory of harness variants: `PATH/<name>/` is a whole harness tree
  in the layout `benchmark.harness_surface`; every skill file that differs
  from the starting harness is one candidate. An optional `PATH/sources.json`
  maps `<name>` to `{"source": "...", "why": "..."}`; without an entry the
  source is the variant's name.

This module checks what can be checked without a harness (syntax, fields,
op shapes, the directory's entries) and raises `CandidatesError` naming the
file, the line and the field. What needs the starting harness (the skill
file exists, an `old` text occurs, a variant is a harness) is checked by
harness/loop/candidates.py at the first step.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from harness.kernel.types import Edit
from harness.tree import TreePathError, check_relative_path

JSONL_SUFFIX = ".jsonl"
SOURCES_FILE = "sources.json"  # optional, inside a variants directory
LINE_KEYS = ("skill_file", "ops", "why", "source")
OP_KEYS = ("op", "old", "new", "why")
OPS = ("add", "replace", "delete")
MAX_SOURCE_CHARS = 100
SKILL_FILE = re.compile(r"^skills/(?P<name>[^/]+)/SKILL\.md$")


class CandidatesError(ValueError):
    """`evolve.candidates_path` holds a candidate that cannot be used; the message names file, line and field."""


@dataclass(frozen=True)
class LineCandidate:
    """One JSONL line, checked for shape (not yet against a harness)."""

    line: int
    skill_file: str  # "skills/<task_type>/SKILL.md"
    ops: tuple[Edit, ...]
    why: str
    source: str


@dataclass(frozen=True)
class VariantEntry:
    """One variant directory of a variants directory, with its declared source."""

    name: str
    path: Path
    source: str
    why: str


def digest(path: str | Path) -> str:
    """sha256 (first 16 hex) of the file, or of a directory's relative paths and bytes: what a run's hand-out was made from."""
    root = Path(path)
    h = hashlib.sha256()
    files = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file())
    for f in files:
        h.update(f.relative_to(root).as_posix().encode() if f != root else b"")
        h.update(b"\x00")
        h.update(f.read_bytes())
        h.update(b"\x00")
    return h.hexdigest()[:16]


def _text(where: str, field: str, value: Any, *, required: bool) -> str:
    if value is None and not required:
        return ""
    if not isinstance(value, str) or (required and not value.strip()):
        raise CandidatesError(f"{where}: field {field!r}: expected a non-empty string, got {value!r}")
    return value


def _op(where: str, i: int, value: Any) -> Edit:
    field = f"ops[{i}]"
    if not isinstance(value, dict):
        raise CandidatesError(f"{where}: field {field!r}: expected an object like "
                              f'{{"op": "add", "new": "..."}}, got {type(value).__name__}')
    extra = sorted(set(value) - set(OP_KEYS))
    if extra:
        raise CandidatesError(f"{where}: field {field!r}: unknown key(s) {extra}; an op has {list(OP_KEYS)}")
    op = value.get("op")
    if op not in OPS:
        raise CandidatesError(f"{where}: field '{field}.op': expected one of {', '.join(OPS)}, got {op!r}")
    has_old, has_new = value.get("old") is not None, value.get("new") is not None
    needs = {"add": (False, True), "replace": (True, True), "delete": (True, False)}[op]
    for key, has, need in (("old", has_old, needs[0]), ("new", has_new, needs[1])):
        if need and not has:
            raise CandidatesError(f"{where}: field '{field}.{key}' is missing: {op} needs "
                                  f"{'the exact text now in the file' if key == 'old' else 'the new text'}")
        if need:
            _text(where, f"{field}.{key}", value.get(key), required=True)
        elif has:
            raise CandidatesError(f"{where}: field '{field}.{key}': {op} takes no {key!r} "
                                  f"({'add appends a rule' if op == 'add' else 'delete removes the old text'})")
    why = _text(where, f"{field}.why", value.get("why"), required=False)
    return Edit(op=op, text=value.get("new") or "", old=value.get("old") or "", rationale=why)


def check_skill_file(where: str, value: Any) -> str:
    """`skills/<task_type>/SKILL.md`, relative, inside the harness root; CandidatesError otherwise."""
    if not isinstance(value, str):
        raise CandidatesError(f"{where}: field 'skill_file': expected a string skills/<task_type>/SKILL.md, got {value!r}")
    try:
        path = check_relative_path(value)
    except TreePathError as exc:
        raise CandidatesError(f"{where}: field 'skill_file': {exc}") from None
    if SKILL_FILE.match(path) is None:
        raise CandidatesError(f"{where}: field 'skill_file': expected skills/<task_type>/SKILL.md, got {value!r}")
    return path


def parse_line(where: str, line: int, text: str) -> LineCandidate:
    """One JSONL line (`where` names file and line in errors)."""
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CandidatesError(f"{where}: not valid JSON: {exc.msg} (column {exc.colno})") from None
    if not isinstance(obj, dict):
        raise CandidatesError(f"{where}: expected a JSON object with {list(LINE_KEYS)}, got {type(obj).__name__}")
    extra = sorted(set(obj) - set(LINE_KEYS))
    if extra:
        raise CandidatesError(f"{where}: unknown field(s) {extra}; a line has {list(LINE_KEYS)}")
    for key in ("skill_file", "ops", "source"):
        if key not in obj:
            raise CandidatesError(f"{where}: field {key!r} is missing (required: skill_file, ops, source)")
    skill_file = check_skill_file(where, obj["skill_file"])
    source = _text(where, "source", obj["source"], required=True)
    if len(source) > MAX_SOURCE_CHARS or "\n" in source:
        raise CandidatesError(f"{where}: field 'source': expected one line of at most {MAX_SOURCE_CHARS} characters")
    ops = obj["ops"]
    if not isinstance(ops, list) or not ops:
        raise CandidatesError(f"{where}: field 'ops': expected a non-empty list of edit operations, got {ops!r}")
    return LineCandidate(line=line, skill_file=skill_file, ops=tuple(_op(where, i, op) for i, op in enumerate(ops)),
                         why=_text(where, "why", obj.get("why"), required=False), source=source.strip())


def read_jsonl(path: str | Path, label: Optional[str] = None) -> list[LineCandidate]:
    """Every candidate line of a JSONL file, in file order; CandidatesError at the first bad line."""
    path = Path(path)
    label = label or str(path)
    try:
        lines = path.read_text(encoding="utf-8").split("\n")
    except UnicodeDecodeError as exc:
        raise CandidatesError(f"{label}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    out = [parse_line(f"{label}:{n}", n, text) for n, text in enumerate(lines, 1) if text.strip()]
    if not out:
        raise CandidatesError(f"{label}: no candidate (expected one JSON object per line)")
    return out


def list_variants(path: str | Path, label: Optional[str] = None) -> list[VariantEntry]:
    """The variant directories of `path` in name order, with their sources; CandidatesError on any other entry."""
    root = Path(path)
    label = label or str(root)
    sources: dict[str, Any] = {}
    if (root / SOURCES_FILE).is_file():
        where = f"{label}/{SOURCES_FILE}"
        try:
            sources = json.loads((root / SOURCES_FILE).read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise CandidatesError(f"{where}: not valid JSON: {exc}") from None
        if not isinstance(sources, dict):
            raise CandidatesError(f"{where}: expected an object <variant name> -> {{\"source\": ..., \"why\": ...}}")
    entries: list[VariantEntry] = []
    for child in sorted(root.iterdir()):
        if child.name.startswith(".") or child.name == SOURCES_FILE:
            continue
        if child.is_symlink() or not child.is_dir():
            raise CandidatesError(f"{label}/{child.name}: expected only variant directories (and an optional "
                                  f"{SOURCES_FILE}) in a variants directory; symlinks and files are refused")
        meta = sources.get(child.name, {})
        where = f"{label}/{SOURCES_FILE}: field {child.name!r}"
        if not isinstance(meta, dict) or sorted(set(meta) - {"source", "why"}):
            raise CandidatesError(f"{where}: expected an object with 'source' and/or 'why', got {meta!r}")
        source = _text(where, "source", meta.get("source"), required=False) or child.name
        entries.append(VariantEntry(child.name, child, source.strip(), _text(where, "why", meta.get("why"), required=False)))
    unknown = sorted(set(sources) - {e.name for e in entries})
    if unknown:
        raise CandidatesError(f"{label}/{SOURCES_FILE}: names {unknown} that are not variant directories of {label}")
    if not entries:
        raise CandidatesError(f"{label}: no variant directory (expected {label}/<name>/ holding a whole harness tree)")
    return entries


def check_format(path: str | Path, label: Optional[str] = None) -> None:
    """What config load checks: an existing .jsonl file whose lines parse, or a directory of variant directories."""
    p = Path(path)
    label = label or str(p)
    if p.is_file() and p.suffix == JSONL_SUFFIX:
        read_jsonl(p, label)
    elif p.is_dir():
        list_variants(p, label)
    else:
        raise CandidatesError(f"{label}: expected an existing {JSONL_SUFFIX} file of edit operations or a directory of "
                              "harness variants")
