"""Question-sampling plans of the gate (`gate.plan`): one small strategy object per plan, one registry.

A plan turns the validation pool of a candidate's task types into a
`BlockPlanner` that hands out one block of (question, fresh sample index)
slots at a time. The gate loop (`harness.loop.validate`) only ever sees the
`BlockPlanner` protocol; a plan that is fixed in advance is wrapped in
`FixedBlocks`. Adding a plan = one class here (or in its own kernel module)
plus one line in `SAMPLING_PLANS`.

- `static`: the GatePools ladder (cold or warm order) plus the anchor stratum,
  cut into blocks in advance (`ladder.plan_blocks`).
- `random`: uniform random order over the pool (a fresh permutation per
  pass), every slot a fresh sample index. Tests the population effect for any
  population (the reference the ladders are compared against).
- `importance` (the default): `importance_plan.ImportancePlanner`, every slot
  an independent draw with known probability pi_i (favouring informative
  questions, floor `gate.importance_floor`), carrying its weight 1 / (N pi_i)
  for the betting rule. Population-valid for any population.

The ladder concentrates pairs on mid-difficulty questions: its accept is
valid for the population only under the strong null (docs/kernel.md). Traits
config validation reads: `population_valid` (every slot's question is drawn
with a probability known before the gate, so a weighted rule tests the pool's
gain) and `weighted` (the slots carry importance weights, which only a rule
with `weighted` reads: any other rule would test the pi-weighted effect).
"""

from __future__ import annotations

import random
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import ClassVar, Optional, Protocol

from harness.kernel.ladder import GatePools, LadderParams, check_block_params, plan_blocks
from harness.kernel.registry import Registry, is_int_at_least, is_number, params_of
from harness.kernel.types import BlockItem, GateParams


class BlockPlanner(Protocol):
    """Hands out one block at a time from the baseline outcomes so far."""

    @property
    def final(self) -> bool: ...

    def next_block(self, baseline_outcomes_so_far: Sequence[Optional[bool]]) -> Optional[list[BlockItem]]: ...

    def informing_samples(self) -> dict[str, frozenset[int]]: ...


class FixedBlocks:
    """A plan computed in advance (a list of blocks) behind the `BlockPlanner` interface.

    Refuses an empty plan, an empty block and a reused sample index at construction.
    """

    def __init__(self, blocks: Sequence[Sequence[BlockItem]], informing: Mapping[str, Collection[int]] | None = None,
                 *, label: str = "gate"):
        if not blocks or not all(blocks):
            raise ValueError(f"{label}: empty question plan (or an empty block)")
        indices = [item.sample_index for block in blocks for item in block]
        if len(set(indices)) != len(indices):
            raise ValueError(f"{label}: the plan reuses a sample index; every slot needs a fresh sample")
        self._blocks = [list(b) for b in blocks]
        self._next = 0
        self._informing = {q: frozenset(v) for q, v in (informing or {}).items()}

    @property
    def blocks(self) -> list[list[BlockItem]]:
        return [list(b) for b in self._blocks]

    @property
    def final(self) -> bool:
        return self._next >= len(self._blocks)

    def next_block(self, baseline_outcomes_so_far: Sequence[Optional[bool]]) -> Optional[list[BlockItem]]:
        if self._next >= len(self._blocks):
            return None
        self._next += 1
        return self._blocks[self._next - 1]

    def informing_samples(self) -> dict[str, frozenset[int]]:
        return dict(self._informing)


@dataclass(frozen=True)
class PlanRequest:
    """What every sampling plan may use to plan one gate."""

    pools: GatePools
    task_types: Sequence[str]  # the candidate's task types that have a pool
    params: GateParams
    seed: int
    first_sample_index: int
    warm: bool = False  # the ladder has gate-epoch observations of these task types
    exclude: Collection[str] = field(default_factory=frozenset)  # questions the editor saw (case pack)

    @property
    def pool(self) -> list[str]:
        return [q for tt in self.task_types for q in self.pools.pool(tt)]

    def informing(self) -> dict[str, frozenset[int]]:
        out: dict[str, frozenset[int]] = {}
        for tt in self.task_types:
            out.update(self.pools.informing_samples(tt))
        return out


class SamplingPlan(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def population_valid(self) -> bool: ...

    @property
    def weighted(self) -> bool: ...

    def planner(self, request: PlanRequest) -> BlockPlanner:
        """The block planner of one gate (the pool is non-empty)."""
        ...


@dataclass(frozen=True)
class StaticLadderPlan:
    name: str = "static"
    population_valid: bool = False
    weighted: bool = False
    params_type: ClassVar[type] = LadderParams

    def planner(self, request: PlanRequest) -> BlockPlanner:
        excluded = set(request.exclude)
        orders = [request.pools.ladder(tt, request.params, warm=request.warm, exclude=excluded) for tt in request.task_types]
        ladder: list[str] = []
        for k in range(max((len(o) for o in orders), default=0)):  # interleave the ladders of types sharing a file
            ladder.extend(o[k] for o in orders if k < len(o))
        anchor_pool = [q for q in request.pool if q not in excluded]
        informing = request.informing()
        blocks = plan_blocks(ladder, anchor_pool, request.params, seed=request.seed,
                             first_sample_index=request.first_sample_index, informing_samples=informing)
        return FixedBlocks(blocks, informing)


@dataclass(frozen=True)
class UniformRandomPlan:
    """Uniform random order over the pool minus the case pack; a fresh permutation per pass."""

    name: str = "random"
    population_valid: bool = True
    weighted: bool = False

    def planner(self, request: PlanRequest) -> BlockPlanner:
        params = request.params
        check_block_params(params)
        excluded = set(request.exclude)
        pool = sorted({q for q in request.pool if q not in excluded})
        if not pool:
            pool = sorted(set(request.pool))
        informing = request.informing()
        rng = random.Random(request.seed)
        order: list[str] = []
        next_index = request.first_sample_index
        blocks: list[list[BlockItem]] = []
        total = 0
        while total < params.max_pairs:
            size = min(params.block_size, params.max_pairs - total)
            block: list[BlockItem] = []
            for _ in range(size):
                if not order:
                    order = list(pool)
                    rng.shuffle(order)
                qid = order.pop()
                while next_index in informing.get(qid, ()):
                    next_index += 1
                block.append(BlockItem(qid, next_index, anchor=True))
                next_index += 1
            blocks.append(block)
            total += size
        return FixedBlocks(blocks, informing)


@dataclass(frozen=True)
class ImportanceParams:
    """The settings the importance plan owns (gate.<field>)."""

    importance_floor: float = 0.5
    plan_prior_obs: int = 4

    def check(self) -> list[tuple[str, str]]:
        problems = []
        if not (is_number(self.importance_floor) and 0 < self.importance_floor <= 1):
            problems.append(("importance_floor", "must satisfy 0 < importance_floor <= 1 (1 = uniform order)"))
        if not is_int_at_least(self.plan_prior_obs, 0):
            problems.append(("plan_prior_obs", "must be an integer >= 0"))
        return problems


@dataclass(frozen=True)
class ImportancePlan:
    """Questions drawn with known probabilities pi_i from the pre-gate p_hat (kernel/importance_plan.py)."""

    name: str = "importance"
    population_valid: bool = True
    weighted: bool = True
    params_type: ClassVar[type] = ImportanceParams

    def planner(self, request: PlanRequest) -> BlockPlanner:
        from harness.kernel.importance_plan import ImportancePlanner

        params = request.params
        check_block_params(params)
        own = params_of(ImportanceParams, params)
        prior = {e.qid: (e.p_hat, e.n_obs) for tt in request.task_types for e in request.pools.entries(tt)}
        excluded = set(request.exclude)
        pool = list(dict.fromkeys(request.pool))
        if not any(q not in excluded for q in pool):  # every question was in the case pack: ask them anyway
            excluded = set()
        return ImportancePlanner(pool, block_size=params.block_size, max_pairs=params.max_pairs, floor=own.importance_floor,
                                 seed=request.seed, first_sample_index=request.first_sample_index, prior=prior,
                                 prior_obs=own.plan_prior_obs, informing_samples=request.informing(), exclude=excluded)


SAMPLING_PLANS: Registry[SamplingPlan] = Registry("gate.plan", {
    "importance": ImportancePlan(),
    "static": StaticLadderPlan(),
    "random": UniformRandomPlan(),
})
