"""Settlement of a probation (seed 000 §12/§15 step 4).

An undecided gate may keep an edit on probation; the slow update re-runs
the full validation pool and compares the task type's questions with the
snapshot taken when the probation opened. More regressions (right ->
wrong) than improvements (wrong -> right) on the compared questions is a
regression: the file is rolled back to the anchor version.

Life cycle (the concept table of docs/ARCHITECTURE.md): opened by harness/loop/gating.py
`_install`, merged one per skill by `TrainState.open_probation`
(harness/loop/train_state.py), settled in step 4 of harness/loop/slow_update.py
with the verdicts below.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Optional

from harness.kernel.registry import params_of
from harness.kernel.rules import SequentialParams
from harness.kernel.types import GateParams, Probation, ProbationVerdict

SETTLEMENTS = ("snapshot", "eprocess")


@dataclass(frozen=True)
class ProbationParams:
    """The setting probation owns (gate.<field>): how the slow update settles an edit installed on probation or
    accepted under watch."""

    probation_settlement: str = "eprocess"  # "snapshot" (losses > wins vs the snapshot) | "eprocess" (fresh anchor pairs)

    def check(self) -> list[tuple[str, str]]:
        ok = self.probation_settlement in SETTLEMENTS
        return [] if ok else [("probation_settlement", f"must be one of {', '.join(SETTLEMENTS)}")]


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


def probation_settlement(
    probation: Probation,
    anchor_rerun: Mapping[str, Optional[bool]],
    rerun: Mapping[str, Optional[bool]],
    params: GateParams,
) -> ProbationVerdict:
    """Settlement as a valid test on FRESH samples (`gate.probation_settlement=eprocess`, issue 13 item 2).

    `anchor_rerun` (the anchor version, a fresh sample per question) and
    `rerun` (the installed version: the full-validation re-run R) are paired
    per question; the snapshot's stale, gate-selected outcomes play no part.
    A missing installed-version outcome counts against the edit.

    - kind "probation" (an undecided gate installed it): KEEP only when the
      accept e-process (`gate.accept_prior`) on these pairs reaches
      `gate.lambda`, i.e. P(keep | the edit is not better) <= e^-lambda;
      otherwise roll back.
    - kind "accepted" (the gate certified it): ROLL BACK only when the same
      e-process with wins and losses swapped (evidence of harm) reaches
      `gate.lambda`, i.e. P(rollback | the edit is not worse) <= e^-lambda.
    """
    from harness.kernel.stats import log_e_accept

    qids = sorted(q for q in rerun if q in anchor_rerun and anchor_rerun[q] is not None)
    if not qids:
        return ProbationVerdict("keep" if probation.kind == "accepted" else "rollback", 0, 0, 0, None, None,
                                reason=f"no fresh pairs for {probation.task_type!r}: "
                                       + ("kept (the gate certified it)" if probation.kind == "accepted" else "rolled back (never certified)"))
    before = [bool(anchor_rerun[q]) for q in qids]
    after = [bool(rerun[q]) for q in qids]  # None (infra) -> False: against the edit
    wins = sum(1 for b, a in zip(before, after) if a and not b)
    losses = sum(1 for b, a in zip(before, after) if b and not a)
    n = len(qids)
    acc_before, acc_after = sum(before) / n, sum(after) / n
    lam = params.lambda_accept
    sign_params = params_of(SequentialParams, params)  # the sign rule's accept prior
    if probation.kind == "accepted":
        log_e_harm = float(log_e_accept(losses, wins, sign_params))
        if log_e_harm >= lam:
            return ProbationVerdict("rollback", wins, losses, n, acc_before, acc_after,
                                    reason=f"harm certified on fresh pairs: log E = {log_e_harm:.3f} >= {lam} ({losses} losses, {wins} wins on {n})")
        return ProbationVerdict("keep", wins, losses, n, acc_before, acc_after,
                                reason=f"no certified harm: log E(harm) = {log_e_harm:.3f} < {lam} ({wins} wins, {losses} losses on {n})")
    log_e = float(log_e_accept(wins, losses, sign_params))
    if log_e >= lam:
        return ProbationVerdict("keep", wins, losses, n, acc_before, acc_after,
                                reason=f"improvement certified on fresh pairs: log E = {log_e:.3f} >= {lam} ({wins} wins, {losses} losses on {n})")
    return ProbationVerdict("rollback", wins, losses, n, acc_before, acc_after,
                            reason=f"not certified on fresh pairs: log E = {log_e:.3f} < {lam} ({wins} wins, {losses} losses on {n})")
