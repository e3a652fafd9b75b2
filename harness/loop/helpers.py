"""Pure helpers of the training loop (seed 000 §15 "辅助函数"): no self, explicit arguments.

Each is tested on its own (tests/loop/test_helpers.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Optional

from harness.evolution.evolve import rejected_summary
from harness.kernel.types import EvolutionRecord, GateParams, Probation
from harness.loop.validate import guard_infra_failures


def _guard_infra_failures(n_infra: int, n_total: int, params: GateParams, where: str) -> None:
    """Raise InfraFailureError when infra failures exceed the configured ratio (see validate.guard_infra_failures)."""
    guard_infra_failures(n_infra, n_total, params, where)


def _apply_batch_correctness(correctness: Mapping[str, bool], outcomes: Mapping[str, Optional[bool]]) -> dict[str, bool]:
    """Incremental update: a question's latest definite outcome wins; an infra failure (None) changes nothing."""
    merged = dict(correctness)
    for qid, value in outcomes.items():
        if value is not None:
            merged[qid] = bool(value)
    return merged


def _should_early_stop(epochs_without_improvement: int, patience: int) -> bool:
    """Stop once the best has not improved for `patience` consecutive epochs (patience <= 0 disables)."""
    return patience > 0 and epochs_without_improvement >= patience


def _rejected_summary(record: EvolutionRecord) -> str:
    """Blacklist text of a rejected proposal: only the edits actually applied (evolution.rejected_summary).

    Edits that were not applied never reached the candidate text and were
    never validated; a defensive note replaces an empty list.
    """
    return rejected_summary(record)


def _decrement_cooldowns(cooldown: Mapping[str, int], just_set: Iterable[str]) -> dict[str, int]:
    """One step of rest passes for every resting skill except the ones that started resting this step."""
    fresh = set(just_set)
    out: dict[str, int] = {}
    for key, n in cooldown.items():
        n = int(n) if key in fresh else int(n) - 1
        if n > 0:
            out[key] = n
    return out


def _merge_probation(existing: Optional[Probation], new: Probation) -> Probation:
    """At most one probation per skill: keep the oldest anchor and snapshot, advance the accepted version."""
    if existing is None:
        return new
    kind = "probation" if "probation" in (existing.kind, new.kind) else existing.kind
    snapshot = dict(new.correctness_snapshot)
    snapshot.update(existing.correctness_snapshot)  # the anchor's outcomes win
    return Probation(
        task_type=existing.task_type, skill_file=existing.skill_file,
        anchor_skills_version=existing.anchor_skills_version,
        opened_epoch=existing.opened_epoch, opened_step=existing.opened_step,
        correctness_snapshot=snapshot, pending_edits=list(existing.pending_edits) + list(new.pending_edits),
        accepted_version=new.accepted_version, kind=kind,
    )
