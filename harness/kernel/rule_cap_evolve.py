"""cap-evolve's acceptance rule (baseline for comparison, `gate.rule=cap_evolve`).

Fixed n paired evaluations; accept when the mean paired gain exceeds one
standard error: with Y_i = candidate_i - baseline_i in {-1, 0, +1},
mean(Y) > sd(Y) / sqrt(n) (sd with n - 1 in the denominator). A one-sided
z-test at z = 1, i.e. a nominal false-accept rate of ~16 % per gate, looked
at once (no optional stopping).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from harness.kernel.registry import is_int_at_least, params_of
from harness.kernel.rules import RuleDecision
from harness.kernel.types import GateParams, PairResult

__all__ = ["cap_evolve_decide", "paired_gain_and_se"]


def paired_gain_and_se(wins: int, losses: int, ties: int) -> tuple[float, float]:
    """(mean paired gain, its standard error) of Y in {-1, 0, +1}; SE is inf for fewer than 2 pairs."""
    n = wins + losses + ties
    if n == 0:
        return 0.0, math.inf
    mean = (wins - losses) / n
    if n < 2:
        return mean, math.inf
    sum_sq = wins + losses  # Y^2 = 1 on discordant pairs
    var = (sum_sq - n * mean * mean) / (n - 1)
    return mean, math.sqrt(max(var, 0.0) / n)


def cap_evolve_decide(wins: int, losses: int, ties: int, n_target: int, *, final: bool) -> tuple[str, str]:
    """(action, reason): decide once at `n_target` pairs (or the final look): accept iff gain > 1 SE."""
    n = wins + losses + ties
    if n < n_target and not final:
        return "continue", f"{n} of {n_target} pairs"
    mean, se = paired_gain_and_se(wins, losses, ties)
    if mean > se:
        return "accept", f"cap_evolve: paired gain {mean:+.4f} > 1 SE {se:.4f} on {n} pairs"
    return "reject", f"cap_evolve: paired gain {mean:+.4f} <= 1 SE {se:.4f} on {n} pairs"


@dataclass(frozen=True)
class CapEvolveParams:
    """The setting the cap_evolve rule owns: gate.cap_evolve_n."""

    cap_evolve_n: int = 100

    def check(self) -> list[tuple[str, str]]:
        return [] if is_int_at_least(self.cap_evolve_n, 1) else [("cap_evolve_n", "must be an integer >= 1")]


class CapEvolveRule:
    """`gate.rule=cap_evolve` (AcceptanceRule protocol of harness.kernel.rules): decides once, at `gate.cap_evolve_n` pairs."""

    name = "cap_evolve"
    questions = "random_fixed_n"
    single_block = True
    sequential = False
    weighted = False
    params_type = CapEvolveParams

    def decide(self, wins: int, losses: int, ties: int, params: GateParams, *, final: bool,
               pairs: Sequence[PairResult] = ()) -> RuleDecision:
        action, reason = cap_evolve_decide(wins, losses, ties, params_of(CapEvolveParams, params).cap_evolve_n, final=final)
        return RuleDecision(action, reason)  # type: ignore[arg-type]


RULE = CapEvolveRule()  # registered in harness.kernel.rules.RULES
