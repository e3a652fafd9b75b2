"""A cheap check before the gate: the pre-gate screen (DESIGN §5 "Cost").

Screen: before a full gate, the candidate answers the step's own questions
of its task types once (the minibatch the editor's failures came from,
failing and passing ones), paired with the step rollout's baseline
outcomes, which the loop already paid for. GEPA's rule is the filter: the
candidate goes on to the gate only when it wins strictly more of those pairs
than it loses. It costs one candidate rollout per step question and no
baseline rollout.

The screen only ever REJECTS: its samples are not the gate's (the gate uses
fresh sample indices), so conditional on passing the screen the gate's
e-process is still an e-value and every per-gate and run-level guarantee
holds unchanged. Screened-out candidates never reach the gate, so they do
not consume a level of the run's false-discovery sequence either.

The sign rules' futility stop (wins - losses <= margin after min_pairs) was removed in issue 29 (the
benchmarks rejected it); the betting rule's futility rules live in kernel/futility.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Optional

from harness.kernel.registry import is_int_at_least

__all__ = ["ScreenResult", "screen_verdict"]


@dataclass(frozen=True)
class ScreenResult:
    passed: bool
    wins: int
    losses: int
    ties: int
    candidate_infra: int  # counted as losses of the candidate (an infra failure cannot buy a pass)
    reason: str

    @property
    def n_pairs(self) -> int:
        return self.wins + self.losses + self.ties


@dataclass(frozen=True)
class ScreenParams:
    """The setting the pre-gate screen (gate.screen) owns (gate.<field>)."""

    screen_margin: int = 0  # the screen passes when wins - losses >= this (0: not worse on the step's questions)
    screen_accept: int = 0  # install without a gate when wins - losses >= this (0: off; gate.fdr=none only)

    def check(self) -> list[tuple[str, str]]:
        bad = [] if is_int_at_least(self.screen_margin, 0) else [("screen_margin", "must be an integer >= 0")]
        if not is_int_at_least(self.screen_accept, 0):
            bad.append(("screen_accept", "must be an integer >= 0 (0: off)"))
        return bad


def screen_verdict(baseline: Sequence[Optional[bool]], candidate: Sequence[Optional[bool]], *, margin: int = 1) -> ScreenResult:
    """GEPA's rule as a filter: pass iff wins - losses >= `margin` (1: GEPA's strict rule; 0: not worse).

    `baseline[i]` / `candidate[i]` are the outcomes on the same question
    (None = infrastructure failure). A pair whose baseline failed is
    dropped (no evidence, not the candidate's fault); a candidate failure
    on a question the baseline answered counts as a candidate loss, on one
    the baseline missed as a tie (conservative either way).
    """
    if len(baseline) != len(candidate):
        raise ValueError(f"screen_verdict: {len(baseline)} baseline outcomes but {len(candidate)} candidate outcomes")
    if isinstance(margin, bool) or not isinstance(margin, int) or margin < 0:
        raise ValueError(f"gate.screen_margin must be an integer >= 0, got {margin!r}")
    wins = losses = ties = infra = 0
    for base, cand in zip(baseline, candidate):
        for name, value in (("baseline", base), ("candidate", cand)):
            if value is not None and not isinstance(value, bool):
                raise ValueError(f"screen_verdict: {name} outcome must be bool or None, got {value!r}")
        if base is None:
            continue
        if cand is None:
            infra += 1
            cand = False
        if cand and not base:
            wins += 1
        elif base and not cand:
            losses += 1
        else:
            ties += 1
    passed = wins - losses >= margin
    reason = (f"screen {'passed' if passed else 'failed'}: {wins} wins, {losses} losses, {ties} ties on the step's questions"
              f" (need wins - losses >= {margin})" + (f"; {infra} candidate infra failures counted as wrong" if infra else ""))
    return ScreenResult(passed, wins, losses, ties, infra, reason)

