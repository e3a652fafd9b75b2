"""Typed inter-stage documents and their one serializer.

What one stage writes and a later stage reads is a dataclass here, written
with `write_document` and read with `read_document`. The JSON object of a
document has exactly its fields (nested dataclasses as objects, in field
order); reading checks every field against its type hint and refuses a
missing or an unexpected key with an error naming the file and the field.

- `RolloutDoc`  rollout@e.s  -> outcomes.json (evolve, gate, slow read it)
- `EvolveDoc`   evolve@e.s   -> evolve.json   (gate reads it; both proposers write it)
- `HoldoutDoc`  holdout      -> holdout.json  (the runner, the report read it)
"""

from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, TypeVar

from harness.atomic import atomic_write_json
from harness.inputs import read_json
from harness.kernel.types import CaseSample, EvolutionRecord, ToolCasePack

D = TypeVar("D")

OUTCOMES = "outcomes.json"
EVOLVE = "evolve.json"
HOLDOUT = "holdout.json"


class DocumentError(ValueError):
    """An inter-stage document does not match its declared fields."""


# ---------------------------------------------------------------- the serializer


def to_json(doc: Any) -> dict[str, Any]:
    """The JSON object of a document dataclass: every field, nested dataclasses as objects."""
    if not dataclasses.is_dataclass(doc) or isinstance(doc, type):
        raise TypeError(f"to_json: expected a dataclass instance, got {type(doc).__name__}")
    return dataclasses.asdict(doc)


def from_json(cls: type[D], data: Any, where: str) -> D:
    """`cls` rebuilt from its JSON object; DocumentError naming `where` and the field on any mismatch."""
    return typing.cast(D, _revive(cls, data, where))


def write_document(path: str | Path, doc: Any) -> Path:
    return atomic_write_json(path, to_json(doc))


def read_document(path: str | Path, cls: type[D]) -> D:
    return from_json(cls, read_json(path, f"{cls.__name__} file"), str(path))


def _revive(hint: Any, value: Any, where: str) -> Any:
    if hint is Any:
        return value
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        options = [a for a in args if a is not type(None)]
        if len(options) != 1:
            raise TypeError(f"{where}: unsupported union {hint!r} in a document")
        return _revive(options[0], value, where)
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):  # a dataclass type (an instance is no hint)
        if not isinstance(value, dict):
            raise DocumentError(f"{where}: expected an object ({hint.__name__}), got {type(value).__name__}")
        names = [f.name for f in dataclasses.fields(hint)]
        missing = [n for n in names if n not in value]
        extra = sorted(set(value) - set(names))
        if missing or extra:
            raise DocumentError(f"{where}: {hint.__name__} " + "; ".join(
                ([f"missing key(s) {missing}"] if missing else []) + ([f"unexpected key(s) {extra}"] if extra else [])))
        hints = typing.get_type_hints(hint)
        return hint(**{n: _revive(hints[n], value[n], f"{where}.{n}") for n in names})
    if origin in (list, tuple):
        if not isinstance(value, list):
            raise DocumentError(f"{where}: expected a list, got {type(value).__name__}")
        item = args[0] if args else Any
        items = [_revive(item, v, f"{where}[{i}]") for i, v in enumerate(value)]
        return items if origin is list else tuple(items)
    if origin is dict:
        if not isinstance(value, dict):
            raise DocumentError(f"{where}: expected an object, got {type(value).__name__}")
        item = args[1] if args else Any
        return {str(k): _revive(item, v, f"{where}[{k!r}]") for k, v in value.items()}
    if hint is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise DocumentError(f"{where}: expected a number, got {value!r}")
        return float(value)
    if hint in (int, str, bool):
        if not isinstance(value, hint) or (hint is int and isinstance(value, bool)):
            raise DocumentError(f"{where}: expected {hint.__name__}, got {value!r}")
        return value
    raise TypeError(f"{where}: unsupported type {hint!r} in a document")


# ---------------------------------------------------------------- the documents


@dataclass(frozen=True)
class RolloutDoc:
    """The step rollout: qid -> outcome (None: infra failure) of the harness at (skills, prompts) version."""

    run_id: str
    sample_index: Optional[int]
    skills_version: Optional[str]
    prompts_version: Optional[str]
    outcomes: dict[str, Optional[bool]]
    stopped: bool = False  # training stopped earlier: no rollout ran

    @classmethod
    def stopped_at(cls, run_id: str) -> RolloutDoc:
        return cls(run_id=run_id, sample_index=None, skills_version=None, prompts_version=None, outcomes={}, stopped=True)


@dataclass(frozen=True)
class CandidateDoc:
    """One proposed skill edit for the gate."""

    task_type: str
    task_types: list[str]  # the batch's task types that resolve to this skill file
    skill_file: str
    case_qids: list[str]  # questions the proposer saw: kept out of the gate's sampling plan
    record: EvolutionRecord
    h2: Optional[dict[str, Any]] = None  # Harness² round details (evolve.method=h2)
    source: Optional[str] = None  # who wrote it (evolve.method=candidates: the file's `source`); None: the method
    external: Optional[dict[str, Any]] = None  # evolve.method=candidates: id, where, kind, source, why


@dataclass(frozen=True)
class SkippedDoc:
    """A skill file of the batch that got no candidate, and why."""

    task_type: str
    task_types: list[str]
    skill_file: str
    action: str  # skipped_cooldown | skipped_no_failures | skipped_no_change | skipped_too_long
    #             | skipped_not_applicable | skipped_no_candidates (evolve.method=candidates)
    reason: str
    edits_proposed: Optional[int] = None
    h2: Optional[dict[str, Any]] = None
    source: Optional[str] = None
    external: Optional[dict[str, Any]] = None
    record: Optional[EvolutionRecord] = None  # skipped_no_change: what the editor replied (edits, parse error, reason)


@dataclass(frozen=True)
class EvolveDoc:
    """The evolve stage's candidates, skips and the slow case packs of the step."""

    run_id: Optional[str]  # the step rollout's run id (None when training had stopped)
    method: str  # the proposer (evolve.method)
    edit_budget: Optional[int]
    candidates: list[CandidateDoc] = field(default_factory=list)
    skipped: list[SkippedDoc] = field(default_factory=list)
    system_cases: list[CaseSample] = field(default_factory=list)
    tool_packs: dict[str, ToolCasePack] = field(default_factory=dict)
    diagnosis_usd: float = 0.0
    diagnosis_cases: int = 0  # failures sent to the diagnoser
    diagnosis_unparseable: int = 0  # of which the reply did not parse twice (no diagnosis reached the editor)
    h2: Optional[dict[str, Any]] = None  # Harness² totals (evolve.method=h2)
    stopped: bool = False
    external: Optional[dict[str, Any]] = None  # evolve.method=candidates: path, digest, total, proposed (ids), left


@dataclass(frozen=True)
class DeliveredDoc:
    skills_version: str
    prompts_version: str
    fingerprint: str
    val_acc: Optional[float]
    best_epoch: Optional[int]


@dataclass(frozen=True)
class HoldoutDoc:
    """The delivered harness and the test-pool accuracy of base and delivered."""

    delivered: DeliveredDoc
    test: dict[str, float]  # "base" | "delivered" -> hard accuracy
    n_test: int
    stopped_early: bool
    stop_reason: str
