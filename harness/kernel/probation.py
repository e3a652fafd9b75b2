"""Settlement of a probation (seed 000 §12/§15 step 4).

An undecided gate may keep an edit on probation; the slow update re-runs
the full validation pool and compares the task type's questions with the
snapshot taken when the probation opened. More regressions (right ->
wrong) than improvements (wrong -> right) on the compared questions is a
regression: the file is rolled back to the anchor version.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Optional

from harness.kernel.types import Probation, ProbationVerdict


def probation_verdict(probation: Probation, rerun: Mapping[str, Optional[bool]]) -> ProbationVerdict:
    """Compare `rerun` (qid -> outcome of the full-validation re-run; None = infra) with the snapshot.

    Only qids present in both with a real outcome are compared. With none
    to compare the verdict is "keep" and the reason says there was no
    evidence (the caller records it).
    """
    compared = [(probation.correctness_snapshot[q], rerun[q]) for q in sorted(probation.correctness_snapshot) if rerun.get(q) is not None]
    if not compared:
        return ProbationVerdict("keep", 0, 0, 0, None, None, reason=f"no comparable questions for {probation.task_type!r}: kept without evidence")
    wins = sum(1 for before, after in compared if not before and after)
    losses = sum(1 for before, after in compared if before and not after)
    n = len(compared)
    acc_before = sum(1 for before, _ in compared if before) / n
    acc_after = sum(1 for _, after in compared if after) / n
    if losses > wins:
        return ProbationVerdict("rollback", wins, losses, n, acc_before, acc_after, reason=f"regressed: {losses} right->wrong > {wins} wrong->right on {n} questions")
    return ProbationVerdict("keep", wins, losses, n, acc_before, acc_after, reason=f"no regression: {wins} wrong->right, {losses} right->wrong on {n} questions")
