"""A toy gate rule written the way a new rule is added (issue 29): this one file, with a setting of its own
(`gate.toy_min_wins`, which no shipped strategy declares), plus one registry line (`RULES.register`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from harness.kernel.registry import is_int_at_least, params_of
from harness.kernel.rules import RuleDecision
from harness.kernel.types import GateParams, PairResult


@dataclass(frozen=True)
class ToyParams:
    toy_min_wins: int = 5

    def check(self) -> list[tuple[str, str]]:
        return [] if is_int_at_least(self.toy_min_wins, 1) else [("toy_min_wins", "toy rule: must be an integer >= 1")]


@dataclass(frozen=True)
class MinWinsRule:
    """Accepts once the wins exceed the losses by toy_min_wins; rejects at the end of the budget otherwise."""

    name: str = "toy_min_wins"
    questions: str = "sampling"
    single_block: bool = False
    sequential: bool = False
    weighted: bool = False
    params_type: ClassVar[type] = ToyParams

    def decide(self, wins: int, losses: int, ties: int, params: GateParams, *, final: bool,
               pairs: Sequence[PairResult] = ()) -> RuleDecision:
        need = params_of(ToyParams, params).toy_min_wins
        if wins - losses >= need:
            return RuleDecision("accept", f"toy: wins - losses = {wins - losses} >= {need}")
        return RuleDecision("reject" if final else "continue", f"toy: wins - losses = {wins - losses} < {need}")


RULE = MinWinsRule()
