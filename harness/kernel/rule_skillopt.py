"""SkillOpt's acceptance rule (baseline for comparison, `gate.rule=skillopt`).

SkillOpt keeps a held-out SELECTION split of the validation questions and
installs a candidate when its accuracy on that split is strictly higher than
the current harness's. Here: the split is the first `n` questions of a
fixed, seeded order of the skill's validation pool (the same split for
every gate of the run, as in SkillOpt), one sample per question; the
decision is taken once, on all of its pairs. Paired, "strictly higher
accuracy" is exactly "strictly more wins than losses".

It is not a test: nothing bounds its false-accept rate (a null edit passes
whenever chance gives it one more win; ~45 % of the time at moderate
discordance), and a fixed split reused by every gate is overfitted by
selection. The benchmark shows both.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

from harness.kernel.registry import is_int_at_least, params_of
from harness.kernel.rules import RuleDecision
from harness.kernel.types import GateParams, PairResult

__all__ = ["selection_split", "skillopt_decide"]


def selection_split(pool: Sequence[str], n: int, *, seed: int) -> list[str]:
    """The first `n` qids of `pool` in a fixed order seeded by `seed` only (same split for every gate)."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"gate.selection_n must be an integer >= 1, got {n!r}")
    unique = sorted(set(pool))
    order = sorted(unique, key=lambda q: hashlib.sha1(f"{seed}|selection|{q}".encode()).hexdigest())
    return order[:n]


def skillopt_decide(wins: int, losses: int, ties: int, n_target: int, *, final: bool) -> tuple[str, str]:
    """(action, reason) once the split is in: accept iff candidate accuracy > baseline accuracy (wins > losses)."""
    n = wins + losses + ties
    if n < n_target and not final:
        return "continue", f"{n} of {n_target} selection-split pairs"
    if wins > losses:
        return "accept", f"skillopt: selection-split accuracy up ({wins} wins > {losses} losses on {n} pairs)"
    return "reject", f"skillopt: no strict improvement on the selection split ({wins} wins, {losses} losses on {n} pairs)"


@dataclass(frozen=True)
class SkillOptParams:
    """The setting the skillopt rule owns: gate.selection_n."""

    selection_n: int = 60

    def check(self) -> list[tuple[str, str]]:
        return [] if is_int_at_least(self.selection_n, 1) else [("selection_n", "must be an integer >= 1")]


class SkillOptRule:
    """`gate.rule=skillopt` (AcceptanceRule protocol of harness.kernel.rules): decides once, at `gate.selection_n` pairs."""

    name = "skillopt"
    questions = "selection_split"
    single_block = True
    sequential = False
    weighted = False
    params_type = SkillOptParams

    def decide(self, wins: int, losses: int, ties: int, params: GateParams, *, final: bool,
               pairs: Sequence[PairResult] = ()) -> RuleDecision:
        action, reason = skillopt_decide(wins, losses, ties, params_of(SkillOptParams, params).selection_n, final=final)
        return RuleDecision(action, reason)  # type: ignore[arg-type]


RULE = SkillOptRule()  # registered in harness.kernel.rules.RULES
