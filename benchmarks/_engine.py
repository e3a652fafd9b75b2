"""The benchmarks' way onto the kernel's one gate loop (`harness.kernel.engine.run_gate`), driven synchronously.

A simulated gate samples its blocks from numpy at once, so its coroutine never suspends: `gate_now` steps it to
the end without an event loop (asyncio.run would cost ~0.1 ms per gate, and the benchmarks run ~10^5 gates).
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Sequence
from typing import Any, Optional, TypeVar

from harness.kernel.engine import Decide, GateRun, OnBlock, run_gate
from harness.kernel.gate import gate_decision
from harness.kernel.plans import BlockPlanner
from harness.kernel.types import BlockItem, GateParams, GateVerdict, PairResult

__all__ = ["decide_by", "gate_now", "run_now"]

T = TypeVar("T")
D = TypeVar("D")


def run_now(coro: Coroutine[Any, Any, T]) -> T:
    """The value of a coroutine that never suspends; RuntimeError if it awaits something that does."""
    try:
        coro.send(None)
    except StopIteration as done:
        return done.value
    coro.close()
    raise RuntimeError("a simulated gate awaited a real event (its sampler must return at once)")


def gate_now(planner: BlockPlanner, sample_block: Callable[[list[BlockItem], int], Sequence[PairResult]], decide: Decide[Any], *,
             on_block: Optional[OnBlock[Any]] = None, label: str = "benchmark gate") -> GateRun[Any]:
    """`run_gate(planner, sample_block, decide)` with a synchronous sampler ((block, block number) -> its pairs)."""

    async def sample(block: list[BlockItem], b: int) -> Sequence[PairResult]:
        return sample_block(block, b)

    return run_now(run_gate(planner, sample, decide, on_block=on_block, label=label))


def decide_by(params: GateParams) -> Callable[[Sequence[PairResult], bool], GateVerdict]:
    """The loop's decision at a look: kernel `gate_decision` (INFRA guard, then the rule of `params.rule`)."""
    return lambda pairs, final: gate_decision(pairs, params, final=final)
