"""The one gate loop: plan a block, sample it, decide on every pair so far, until a terminal decision.

Every paired sequential test of the product runs here: the per-edit gate (`harness.loop.validate`), the
delivery certificate and `stages.compare` (`harness.loop.certify`), and the benchmarks. What varies is passed
in: the block planner (which questions, which fresh sample indices), `sample_block` (runs both arms of one block
and pairs them: cache, rollouts, pairing rules are the caller's), and `decide` (the rule at a look).

Block barrier: `decide` sees whole blocks only; its verdict on the planner's final block is terminal (a
"continue" there is a RuntimeError). A sample index may never repeat within one gate.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Generic, Optional, Protocol, TypeVar

from harness.kernel.plans import BlockPlanner
from harness.kernel.types import BlockItem, PairResult

__all__ = ["Decision", "GateRun", "run_gate"]


class Decision(Protocol):
    @property
    def action(self) -> str: ...  # "continue" or a terminal action


D = TypeVar("D", bound=Decision)
SampleBlock = Callable[[list[BlockItem], int], Awaitable[Sequence[PairResult]]]  # (block, block number) -> its pairs
Decide = Callable[[Sequence[PairResult], bool], D]  # (pairs so far, final) -> decision
OnBlock = Callable[[int, Sequence[PairResult], D], None]  # (block number, the block's pairs, decision)


@dataclass
class GateRun(Generic[D]):
    decision: D
    pairs: list[PairResult] = field(default_factory=list)
    blocks: int = 0


async def run_gate(planner: BlockPlanner, sample_block: SampleBlock, decide: Decide[D], *,
                   on_block: Optional[OnBlock[D]] = None, label: str = "gate") -> GateRun[D]:
    """Run blocks until `decide` returns a terminal action; see the module doc for the contract."""
    pairs: list[PairResult] = []
    seen: set[int] = set()
    b = 0
    while True:
        block = planner.next_block([p.baseline for p in pairs])
        if block is None:
            raise RuntimeError(f"{label}: the plan ran out before a terminal decision")
        final = planner.final
        indices = {item.sample_index for item in block}
        if len(indices) != len(block) or seen & indices:
            raise ValueError(f"{label}: the plan reuses a sample index; every slot needs a fresh sample")
        seen |= indices
        block_pairs = list(await sample_block(block, b))
        if [(p.qid, p.sample_index) for p in block_pairs] != [(it.qid, it.sample_index) for it in block]:
            raise RuntimeError(f"{label}: block {b} was sampled out of order or incompletely")
        pairs.extend(block_pairs)
        decision = decide(pairs, final)
        if on_block is not None:
            on_block(b, block_pairs, decision)
        b += 1
        if decision.action != "continue":
            return GateRun(decision, pairs, b)
        if final:
            raise RuntimeError(f"{label}: the rule returned 'continue' on the final block")
