"""Training-state checkpoint: (de)serialisation, atomic save/load, config fingerprint (seed 000 §13).

Persisted: exactly the seed's field set of `TrainState` plus a `Progress`
block. Not persisted here (each has its own file or source): the gate
ladder (its own file, reloaded by pool fingerprint),
best_* (the workspace manifest's best pointer).

Deserialisation reads every key with `d[key]` — a missing key means a
corrupt checkpoint and fails naming the key; an unexpected key fails too.
Nested dataclasses are revived field by field (CaseSample inside
SystemCasePack, RejectedEdit inside Probation.pending_edits), so a default
never hides a missing value.

Config fingerprint: structural keys (benchmark.*, pools.*, batching.*,
train.epochs, train.seed, and every llm.* key that decides which model answers
and how: model, models, base_url, temperature, ... — all but the engineering
keys `.env` may set and llm.prices) change what the saved state means, so a change
refuses to resume: a resumed run never mixes two models' answers. Decision keys
(gate.*, evolve.*, llm.prices: what a call is recorded to cost) only change future
decisions, so a change is logged as a warning. The config is a plain nested
dict (use `OmegaConf.to_container(cfg, resolve=True)` upstream).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import math
import os
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from harness.atomic import atomic_write_json
from harness.inputs import rerun_advice
from harness.kernel.fdr import FdrState
from harness.kernel.types import CaseSample, Probation, RejectedEdit, SystemCasePack, ToolCasePack
from harness.loop.train_state import EvalRef, Progress, TrainState

FORMAT_VERSION = 6  # 2: CaseSample carries the choices and context; 3: gate keys removed or renamed (issue 29: gate.plan, no baseline_reuse); 4: eval_prev_ref (train.reuse_identical); 5: eval_prev_ref.inputs (each answer's input key); 6: llm.* in the structural fingerprint; older formats are refused by name
PHASES = ("in_epoch", "epoch_done")
STRUCTURAL_PREFIXES = ("benchmark.", "pools.", "batching.", "llm.")
STRUCTURAL_KEYS = ("train.epochs", "train.seed")
DECISION_PREFIXES = ("gate.", "evolve.", "llm.prices.")

logger = logging.getLogger(__name__)


class CheckpointError(ValueError):
    """A checkpoint is missing, corrupt or malformed; the message names the key."""


class ResumeRefused(RuntimeError):
    """The configuration changed in a structural key since the checkpoint was written."""

    def __init__(self, changed: list[str]):
        self.changed = changed
        super().__init__(
            "refusing to resume: structural config key(s) changed since the checkpoint: "
            + ", ".join(changed)
            + " (they change what the saved state means; start a fresh run or restore these values)"
        )


STATE_KEYS = tuple(f.name for f in dataclasses.fields(TrainState))


@dataclass(frozen=True)
class ConfigFingerprint:
    structural: dict[str, Any]
    decision: dict[str, Any]

    @property
    def structural_sha(self) -> str:
        return _sha(self.structural)

    @property
    def decision_sha(self) -> str:
        return _sha(self.decision)

    def to_dict(self) -> dict[str, Any]:
        return {"structural": self.structural, "decision": self.decision,
                "structural_sha": self.structural_sha, "decision_sha": self.decision_sha}


@dataclass(frozen=True)
class Checkpoint:
    state: TrainState
    progress: Progress
    config: ConfigFingerprint


# ---------------------------------------------------------------- helpers


def _sha(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, allow_nan=False).encode()).hexdigest()


def _req(d: Any, key: str, where: str) -> Any:
    if not isinstance(d, Mapping):
        raise CheckpointError(f"{where}: expected an object, got {type(d).__name__}")
    try:
        return d[key]
    except KeyError:
        raise CheckpointError(f"{where}: key {key!r} is missing (corrupt or incompatible checkpoint)") from None


def _no_extra(d: Mapping[str, Any], allowed: tuple[str, ...], where: str) -> None:
    extra = sorted(set(d) - set(allowed))
    if extra:
        raise CheckpointError(f"{where}: unexpected key(s) {extra} (expected exactly {list(allowed)})")


def _expect(value: Any, types: type | tuple[type, ...], where: str, allow_none: bool = False) -> Any:
    if value is None and allow_none:
        return None
    # bool is an int subclass: an int field must not accept True
    if isinstance(value, bool) and bool not in (types if isinstance(types, tuple) else (types,)):
        raise CheckpointError(f"{where}: expected {types}, got bool {value!r}")
    if not isinstance(value, types):
        raise CheckpointError(f"{where}: expected {types}, got {type(value).__name__} {value!r}")
    return value


def _dict_of(value: Any, value_type: type, where: str) -> dict[str, Any]:
    _expect(value, dict, where)
    for k, v in value.items():
        _expect(k, str, f"{where} key")
        _expect(v, value_type, f"{where}[{k!r}]")
    return dict(value)


def _check_hint(value: Any, hint: Any, where: str) -> None:
    """Check scalar fields and container kinds against a dataclass field's type hint."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return
        hint = next(a for a in args if a is not type(None))
        origin = typing.get_origin(hint)
    if origin is not None:
        _expect(value, origin, where)
    elif hint is float:
        _expect(value, (int, float), where)
    elif hint in (str, int, bool):
        _expect(value, hint, where)


def _revive(cls: type, d: Any, where: str, nested: Mapping[str, Any] | None = None) -> Any:
    """Build dataclass `cls` from `d`, every field read with d[key]; `nested` revives sub-fields."""
    names = tuple(f.name for f in dataclasses.fields(cls))
    kwargs = {name: _req(d, name, where) for name in names}
    _no_extra(d, names, where)
    hints = typing.get_type_hints(cls)
    for name in names:
        _check_hint(kwargs[name], hints[name], f"{where}.{name}")
    for name, reviver in (nested or {}).items():
        kwargs[name] = reviver(kwargs[name], f"{where}.{name}")
    return cls(**kwargs)


def _list_of(reviver, value: Any, where: str) -> list[Any]:
    _expect(value, list, where)
    return [reviver(item, f"{where}[{i}]") for i, item in enumerate(value)]


def _case_sample(d: Any, where: str) -> CaseSample:
    return _revive(CaseSample, d, where)


def _rejected_edit(d: Any, where: str) -> RejectedEdit:
    return _revive(RejectedEdit, d, where)


def _system_pack(d: Any, where: str) -> SystemCasePack:
    return _revive(SystemCasePack, d, where, {"cases": lambda v, w: _list_of(_case_sample, v, w)})


def _tool_pack(d: Any, where: str) -> ToolCasePack:
    return _revive(ToolCasePack, d, where)


def _probation(d: Any, where: str) -> Probation:
    return _revive(Probation, d, where, {
        "pending_edits": lambda v, w: _list_of(_rejected_edit, v, w),
        "correctness_snapshot": lambda v, w: _dict_of(v, bool, w),
    })


# ---------------------------------------------------------------- state


def serialize_state(state: TrainState) -> dict[str, Any]:
    """JSON-ready dict with exactly STATE_KEYS; the set becomes a sorted list."""
    _check_keyed(state)
    return {
        "correctness": dict(state.correctness),
        "eval_prev_acc": state.eval_prev_acc,
        "eval_prev_run_id": state.eval_prev_run_id,
        "eval_prev_ref": None if state.eval_prev_ref is None else dataclasses.asdict(state.eval_prev_ref),
        "baseline_skills_version": state.baseline_skills_version,
        "baseline_prompts_version": state.baseline_prompts_version,
        "steps_since_best_improved": state.steps_since_best_improved,
        "epoch_start_skills": dict(state.epoch_start_skills),
        "changed_task_types_this_epoch": sorted(state.changed_task_types_this_epoch),
        "rejected_buffer": {tt: [dataclasses.asdict(e) for e in edits] for tt, edits in state.rejected_buffer.items()},
        "system_packs": [dataclasses.asdict(p) for p in state.system_packs],
        "tool_packs": {tool: dataclasses.asdict(p) for tool, p in state.tool_packs.items()},
        "probations": {tt: dataclasses.asdict(p) for tt, p in state.probations.items()},
        "gate_cooldown": dict(state.gate_cooldown),
        "gate_epoch_observed": dict(state.gate_epoch_observed),
        "gate_fdr": state.gate_fdr.to_dict(),
    }


def deserialize_state(d: Mapping[str, Any], where: str = "state") -> TrainState:
    """Inverse of serialize_state; a missing or unexpected key is a CheckpointError naming it."""
    values = {key: _req(d, key, where) for key in STATE_KEYS}
    _no_extra(d, STATE_KEYS, where)
    acc = _expect(values["eval_prev_acc"], (int, float), f"{where}.eval_prev_acc", allow_none=True)
    changed = _expect(values["changed_task_types_this_epoch"], list, f"{where}.changed_task_types_this_epoch")
    for i, tt in enumerate(changed):
        _expect(tt, str, f"{where}.changed_task_types_this_epoch[{i}]")
    rejected = _expect(values["rejected_buffer"], dict, f"{where}.rejected_buffer")
    tool_packs = _expect(values["tool_packs"], dict, f"{where}.tool_packs")
    probations = _expect(values["probations"], dict, f"{where}.probations")
    state = TrainState(
        correctness=_dict_of(values["correctness"], bool, f"{where}.correctness"),
        eval_prev_acc=None if acc is None else float(acc),
        eval_prev_run_id=_expect(values["eval_prev_run_id"], str, f"{where}.eval_prev_run_id", allow_none=True),
        eval_prev_ref=_eval_ref(values["eval_prev_ref"], f"{where}.eval_prev_ref"),
        baseline_skills_version=_expect(values["baseline_skills_version"], str, f"{where}.baseline_skills_version"),
        baseline_prompts_version=_expect(values["baseline_prompts_version"], str, f"{where}.baseline_prompts_version"),
        steps_since_best_improved=_expect(values["steps_since_best_improved"], int, f"{where}.steps_since_best_improved"),
        epoch_start_skills=_dict_of(values["epoch_start_skills"], str, f"{where}.epoch_start_skills"),
        changed_task_types_this_epoch=set(changed),
        rejected_buffer={tt: _list_of(_rejected_edit, v, f"{where}.rejected_buffer[{tt!r}]") for tt, v in rejected.items()},
        system_packs=_list_of(_system_pack, values["system_packs"], f"{where}.system_packs"),
        tool_packs={tool: _tool_pack(v, f"{where}.tool_packs[{tool!r}]") for tool, v in tool_packs.items()},
        probations={tt: _probation(v, f"{where}.probations[{tt!r}]") for tt, v in probations.items()},
        gate_cooldown=_dict_of(values["gate_cooldown"], int, f"{where}.gate_cooldown"),
        gate_epoch_observed=_dict_of(values["gate_epoch_observed"], bool, f"{where}.gate_epoch_observed"),
        gate_fdr=_fdr_state(values["gate_fdr"], f"{where}.gate_fdr"),
    )
    _check_keyed(state, where)
    return state


def _eval_ref(value: Any, where: str) -> Optional[EvalRef]:
    if value is None:
        return None
    names = tuple(f.name for f in dataclasses.fields(EvalRef))
    values = {k: _req(_expect(value, dict, where), k, where) for k in names}
    _no_extra(value, names, where)
    outcomes = _expect(values["outcomes"], dict, f"{where}.outcomes")
    soft = _expect(values["soft"], dict, f"{where}.soft")
    inputs = _expect(values["inputs"], dict, f"{where}.inputs")
    for q, v in inputs.items():
        _expect(v, str, f"{where}.inputs[{q!r}]")
    for q, v in outcomes.items():
        _expect(v, bool, f"{where}.outcomes[{q!r}]", allow_none=True)
    for q, v in soft.items():
        _expect(v, (int, float), f"{where}.soft[{q!r}]", allow_none=True)
    return EvalRef(run_id=_expect(values["run_id"], str, f"{where}.run_id"), skills_version=_expect(values["skills_version"], str, f"{where}.skills_version"),
                   prompts_version=_expect(values["prompts_version"], str, f"{where}.prompts_version"),
                   outcomes=dict(outcomes), soft={q: None if v is None else float(v) for q, v in soft.items()},
                   inputs=dict(inputs))


def _fdr_state(value: Any, where: str) -> FdrState:
    try:
        return FdrState.from_dict(value, where)
    except ValueError as error:
        raise CheckpointError(str(error)) from None


def _check_keyed(state: TrainState, where: str = "state") -> None:
    """Keyed collections must agree with their values (one probation per task type, etc.)."""
    for tt, p in state.probations.items():
        if p.task_type != tt:
            raise CheckpointError(f"{where}.probations[{tt!r}]: holds a probation of task type {p.task_type!r}")
    for tool, pack in state.tool_packs.items():
        if pack.tool != tool:
            raise CheckpointError(f"{where}.tool_packs[{tool!r}]: holds the pack of tool {pack.tool!r}")
    for tt, edits in state.rejected_buffer.items():
        for e in edits:
            if e.task_type != tt:
                raise CheckpointError(f"{where}.rejected_buffer[{tt!r}]: holds an edit of task type {e.task_type!r}")
    if state.eval_prev_acc is not None and not math.isfinite(state.eval_prev_acc):
        raise CheckpointError(f"{where}.eval_prev_acc: must be finite or None, got {state.eval_prev_acc!r}")


# ---------------------------------------------------------------- progress


def serialize_progress(progress: Progress) -> dict[str, Any]:
    if progress.phase not in PHASES:
        raise CheckpointError(f"progress.phase: must be one of {PHASES}, got {progress.phase!r}")
    return {"epoch": progress.epoch, "step": progress.step, "phase": progress.phase,
            "global_step": progress.global_step}


def deserialize_progress(d: Mapping[str, Any], where: str = "progress") -> Progress:
    names = tuple(f.name for f in dataclasses.fields(Progress))
    values = {k: _req(d, k, where) for k in names}
    _no_extra(d, names, where)
    if values["phase"] not in PHASES:
        raise CheckpointError(f"{where}.phase: must be one of {PHASES}, got {values['phase']!r}")
    return Progress(
        epoch=_expect(values["epoch"], int, f"{where}.epoch"),
        step=_expect(values["step"], int, f"{where}.step"),
        phase=values["phase"],
        global_step=_expect(values["global_step"], int, f"{where}.global_step"),
    )


# ---------------------------------------------------------------- config fingerprint


def flatten_config(cfg: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested mapping -> {"a.b.c": leaf}; lists/tuples stay leaves (as lists)."""
    out: dict[str, Any] = {}
    for key, value in cfg.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            nested = flatten_config(value, f"{name}.")
            out.update(nested if nested else {name: {}})
        else:
            out[name] = list(value) if isinstance(value, tuple) else value
    return out


def config_fingerprint(cfg: Mapping[str, Any]) -> ConfigFingerprint:
    """Split a plain nested config into its structural and decision keys."""
    if not isinstance(cfg, Mapping):
        raise TypeError(f"config_fingerprint needs a plain mapping (OmegaConf.to_container), got {type(cfg).__name__}")
    from harness.config.load import ENGINEERING_KEYS  # how a run reaches the model, not what answers it

    flat = flatten_config(cfg)
    decision = {k: v for k, v in flat.items() if k.startswith(DECISION_PREFIXES)}
    structural = {k: v for k, v in flat.items() if (k.startswith(STRUCTURAL_PREFIXES) or k in STRUCTURAL_KEYS)
                  and k not in decision and k not in ENGINEERING_KEYS}
    for part in (structural, decision):
        try:
            json.dumps(part, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise TypeError(f"config values must be plain JSON data: {exc}") from exc
    return ConfigFingerprint(structural=dict(sorted(structural.items())), decision=dict(sorted(decision.items())))


def _changed_keys(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    return sorted(k for k in set(old) | set(new) if k not in old or k not in new or old[k] != new[k])


def check_resume(saved: ConfigFingerprint, current: ConfigFingerprint) -> list[str]:
    """Raise ResumeRefused on structural changes; warn on (and return) changed decision keys."""
    structural = _changed_keys(saved.structural, current.structural)
    if structural:
        raise ResumeRefused([f"{k} ({saved.structural.get(k, '<absent>')!r} -> {current.structural.get(k, '<absent>')!r})" for k in structural])
    decision = _changed_keys(saved.decision, current.decision)
    if decision:
        logger.warning(
            "resuming with changed decision key(s): %s; the saved state is kept, future decisions use the new values",
            ", ".join(f"{k} ({saved.decision.get(k, '<absent>')!r} -> {current.decision.get(k, '<absent>')!r})" for k in decision),
        )
    return decision


# ---------------------------------------------------------------- file IO


def save_checkpoint(path: str | os.PathLike[str], state: TrainState, progress: Progress, cfg: Mapping[str, Any]) -> Path:
    """Write state + progress + config fingerprint atomically (serialised fully before writing)."""
    doc = {
        "format": FORMAT_VERSION,
        "config": config_fingerprint(cfg).to_dict(),
        "progress": serialize_progress(progress),
        "state": serialize_state(state),
    }
    return atomic_write_json(path, doc)


def load_checkpoint(path: str | os.PathLike[str], cfg: Mapping[str, Any] | None = None) -> Checkpoint:
    """Read a checkpoint; with `cfg`, check it may be resumed under that config (see check_resume)."""
    p = Path(path)
    try:
        doc = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise CheckpointError(f"{p}: checkpoint does not exist") from exc
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise CheckpointError(f"{p}: checkpoint is not valid JSON ({exc}): the file is corrupt or truncated; "
                              f"{rerun_advice(p)}") from exc
    where = str(p)
    fmt = _req(doc, "format", where)
    if fmt != FORMAT_VERSION:
        raise CheckpointError(f"{p}: format {fmt!r}, this code reads {FORMAT_VERSION}")
    _no_extra(doc, ("format", "config", "progress", "state"), where)
    config_doc = _req(doc, "config", where)
    saved = ConfigFingerprint(
        structural=_expect(_req(config_doc, "structural", f"{where}.config"), dict, f"{where}.config.structural"),
        decision=_expect(_req(config_doc, "decision", f"{where}.config"), dict, f"{where}.config.decision"),
    )
    if _req(config_doc, "structural_sha", f"{where}.config") != saved.structural_sha or \
            _req(config_doc, "decision_sha", f"{where}.config") != saved.decision_sha:
        raise CheckpointError(f"{p}: config fingerprint does not match its recorded keys (edited by hand?)")
    checkpoint = Checkpoint(
        state=deserialize_state(_req(doc, "state", where), f"{where}: state"),
        progress=deserialize_progress(_req(doc, "progress", where), f"{where}: progress"),
        config=saved,
    )
    if cfg is not None:
        check_resume(saved, config_fingerprint(cfg))
    return checkpoint
