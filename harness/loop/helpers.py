"""Pure helpers of the training loop (seed 000 §15 "辅助函数"): no self, explicit arguments.

Each is tested on its own (tests/loop/test_helpers.py).
"""

from __future__ import annotations

from typing import Optional

from harness.kernel.types import Probation


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
