"""Adaptive (dynamic) information ladder: the gate's block plan, re-ordered after every block.

`plan_blocks` fixes every block before the gate starts from the pre-gate
p_hat. `AdaptiveBlockPlanner` hands out one block at a time and, between
blocks, re-ranks the questions by their expected information, using

- the pre-gate p_hat of `GatePools` as a prior (Beta with mean p_hat worth
  min(n_obs, `ladder_prior_obs`) observations, plus the Beta(1,1) prior), and
- the gate's own BASELINE outcomes of the blocks already run (the baseline
  harness does not change during the gate, so these say nothing about the
  candidate).

Never candidate outcomes: `next_block` takes baseline outcomes only. Every
slot gets a fresh sample index (a counter that skips the pre-gate informing
samples); the samples that informed the order (pre-gate sources plus the
gate baseline samples absorbed so far) are listed by `informing_samples()`
for `gate.pair_block`'s LeakError guard, and the planner itself refuses to
hand out one of them. The persisted GatePools p_hat is never touched.

Score of a question: posterior expected p(1 - p) (the per-pair information
of a uniform log-odds effect is proportional to p(1 - p)). Ladder slots of a
block take, from the top `adaptive_top_fraction` share of the ranking, the
questions asked least often so far (ties: higher score first), one slot per
question per block. Questions whose posterior mean lies outside
[p_low, p_high] after at least `ladder_drop_min_obs` observations are
dropped from ladder slots (no information left); anchors still reach them.
Anchor slots (`anchor_fraction`, at least one when > 0) are drawn uniformly,
seeded, from the WHOLE pool, without replacement within a pass.
"""

from __future__ import annotations

import math
import random
from collections.abc import Collection, Mapping, Sequence
from typing import Optional

from harness.kernel.gate import LeakError
from harness.kernel.ladder import GatePools, anchors_per_block, check_block_params, order_key
from harness.kernel.types import BlockItem, GateParams

__all__ = ["AdaptiveBlockPlanner"]


class AdaptiveBlockPlanner:
    """Hands out the gate's blocks one at a time, re-ranking on baseline outcomes only (see module doc).

    Loop contract: `block = planner.next_block(baseline_so_far)` where
    `baseline_so_far` are the baseline outcomes (bool | None for infra) of
    EVERY item handed out so far, in hand-out order (so its length must equal
    `planner.n_issued`); `None` when `max_pairs` is spent. `planner.final`
    is True once the block just handed out is the last one (pass it as
    `gate_decision(..., final=...)`).
    """

    def __init__(
        self,
        pool: Sequence[str],
        params: GateParams,
        *,
        seed: int,
        first_sample_index: int,
        prior: Mapping[str, tuple[Optional[float], int]] | None = None,
        informing_samples: Mapping[str, Collection[int]] | None = None,
        exclude: Collection[str] = (),
    ):
        """`pool`: the whole validation pool of the task type (anchors come from all of it).
        `prior`: qid -> (pre-gate p_hat or None, n_obs). `exclude`: qids kept out of ladder
        slots (e.g. the case-pack questions); anchors may still draw them."""
        if not pool:
            raise ValueError("AdaptiveBlockPlanner: empty validation pool")
        if len(set(pool)) != len(pool):
            raise ValueError("AdaptiveBlockPlanner: duplicate qids in the pool")
        check_block_params(params)
        if not 0.0 < params.adaptive_top_fraction <= 1.0:
            raise ValueError(f"gate.adaptive_top_fraction must be in (0, 1], got {params.adaptive_top_fraction!r}")
        if params.ladder_prior_obs < 0 or params.ladder_drop_min_obs < 1:
            raise ValueError(
                f"gate.ladder_prior_obs must be >= 0 and gate.ladder_drop_min_obs >= 1, got "
                f"{params.ladder_prior_obs!r}, {params.ladder_drop_min_obs!r}"
            )
        self.params = params
        self._pool = list(pool)
        self._ladder_pool = [q for q in self._pool if q not in set(exclude)]
        self._rng = random.Random(seed)
        self._next_index = first_sample_index
        self._pre_informing = {q: frozenset(int(i) for i in s) for q, s in (informing_samples or {}).items()}
        prior = prior or {}
        unknown = sorted(set(prior) - set(self._pool))
        if unknown:
            raise ValueError(f"AdaptiveBlockPlanner: prior for qids not in the pool: {unknown[:5]}")
        # Beta(a, b) per question: Beta(1,1) + the pre-gate p_hat as min(n_obs, ladder_prior_obs) observations
        self._a: dict[str, float] = {}
        self._b: dict[str, float] = {}
        self._n_obs: dict[str, float] = {}
        for qid in self._pool:
            p_hat, n_obs = prior.get(qid, (None, 0))
            weight = 0 if p_hat is None else min(int(n_obs), params.ladder_prior_obs)
            if p_hat is not None and not 0.0 <= p_hat <= 1.0:
                raise ValueError(f"AdaptiveBlockPlanner: p_hat of {qid!r} must be in [0, 1], got {p_hat!r}")
            p = 0.5 if p_hat is None else float(p_hat)
            self._a[qid] = 1.0 + p * weight
            self._b[qid] = 1.0 + (1.0 - p) * weight
            self._n_obs[qid] = weight
        self._asked: dict[str, int] = {qid: 0 for qid in self._pool}
        self._issued: list[BlockItem] = []
        self._absorbed: list[Optional[bool]] = []  # baseline outcomes already folded into the posterior
        self._gate_informing: dict[str, set[int]] = {}
        self._anchor_order: list[str] = []

    @classmethod
    def from_gate_pools(
        cls,
        gate_pools: GatePools,
        task_type: str,
        params: GateParams,
        *,
        seed: int,
        first_sample_index: int,
        exclude: Collection[str] = (),
    ) -> "AdaptiveBlockPlanner":
        """Planner over `task_type`'s validation pool with GatePools' pre-gate p_hat as the prior (read only)."""
        entries = gate_pools.entries(task_type)
        return cls(
            [e.qid for e in entries],
            params,
            seed=seed,
            first_sample_index=first_sample_index,
            prior={e.qid: (e.p_hat, e.n_obs) for e in entries},
            informing_samples=gate_pools.informing_samples(task_type),
            exclude=exclude,
        )

    # -- views -------------------------------------------------------------------------------
    @property
    def n_issued(self) -> int:
        return len(self._issued)

    @property
    def final(self) -> bool:
        """True once no further block can be handed out (`max_pairs` reached)."""
        return len(self._issued) >= self.params.max_pairs

    @property
    def issued(self) -> list[BlockItem]:
        return list(self._issued)

    def informing_samples(self) -> dict[str, frozenset[int]]:
        """qid -> sample indices that informed the order so far (pre-gate sources + absorbed gate baselines)."""
        out = dict(self._pre_informing)
        for qid, indices in self._gate_informing.items():
            out[qid] = out.get(qid, frozenset()) | frozenset(indices)
        return out

    def posterior_mean(self, qid: str) -> float:
        return self._a[qid] / (self._a[qid] + self._b[qid])

    def score(self, qid: str) -> float:
        """Posterior expected p(1 - p) under Beta(a, b): ab / ((a + b)(a + b + 1))."""
        a, b = self._a[qid], self._b[qid]
        return a * b / ((a + b) * (a + b + 1.0))

    def ranking(self) -> list[str]:
        """Ladder-eligible questions by score, descending (stable in pool order); dropped ones left out."""
        p = self.params
        kept = [
            q
            for q in self._ladder_pool
            if self._n_obs[q] < p.ladder_drop_min_obs or p.p_low <= self.posterior_mean(q) <= p.p_high
        ]
        return sorted(kept, key=lambda q: -order_key(self.score(q)))  # exact ties keep pool order

    # -- the plan ----------------------------------------------------------------------------
    def next_block(self, baseline_outcomes_so_far: Sequence[Optional[bool]]) -> Optional[list[BlockItem]]:
        """Absorb the new baseline outcomes, then hand out the next block (None when `max_pairs` is spent)."""
        self._absorb(baseline_outcomes_so_far)
        total = len(self._issued)
        if total >= self.params.max_pairs:
            return None
        size = min(self.params.block_size, self.params.max_pairs - total)
        ranking = self.ranking()
        n_anchor = anchors_per_block(size, self.params.anchor_fraction) if ranking else size
        n_ladder = size - n_anchor
        if n_ladder > len(ranking):  # fewer eligible questions than ladder slots: the rest become anchors
            n_anchor += n_ladder - len(ranking)
            n_ladder = len(ranking)
        top = ranking[: max(n_ladder, math.ceil(len(ranking) * self.params.adaptive_top_fraction))]
        position = {q: i for i, q in enumerate(top)}
        ladder_qids = sorted(top, key=lambda q: (self._asked[q], position[q]))[:n_ladder]
        block: list[BlockItem] = [self._item(qid, anchor=False) for qid in ladder_qids]
        for _ in range(n_anchor):
            if not self._anchor_order:
                self._anchor_order = list(self._pool)
                self._rng.shuffle(self._anchor_order)
            block.append(self._item(self._anchor_order.pop(), anchor=True))
        self._issued.extend(block)
        return block

    def _item(self, qid: str, *, anchor: bool) -> BlockItem:
        used = self._pre_informing.get(qid, frozenset())
        while self._next_index in used:
            self._next_index += 1
        index = self._next_index
        self._next_index += 1
        if index in self._gate_informing.get(qid, ()):  # unreachable with a monotone counter; the guard states the rule
            raise LeakError(f"AdaptiveBlockPlanner: sample {index} of {qid!r} informed the order")
        self._asked[qid] += 1
        return BlockItem(qid, index, anchor=anchor)

    def _absorb(self, outcomes: Sequence[Optional[bool]]) -> None:
        if len(outcomes) != len(self._issued):
            raise ValueError(
                f"AdaptiveBlockPlanner.next_block: got {len(outcomes)} baseline outcomes for {len(self._issued)} "
                "handed-out items (pass the baseline outcome of every item handed out so far, in order)"
            )
        done = len(self._absorbed)
        for position, (old, new) in enumerate(zip(self._absorbed, outcomes[:done])):
            if old != new:
                raise ValueError(f"AdaptiveBlockPlanner.next_block: baseline outcome #{position} changed from {old!r} to {new!r}")
        for item, outcome in zip(self._issued[done:], outcomes[done:]):
            if outcome is not None and not isinstance(outcome, bool):
                raise ValueError(f"AdaptiveBlockPlanner.next_block: baseline outcome of {item.qid!r} must be bool or None, got {outcome!r}")
            self._absorbed.append(outcome)
            if outcome is None:
                continue
            if outcome:
                self._a[item.qid] += 1.0
            else:
                self._b[item.qid] += 1.0
            self._n_obs[item.qid] += 1
            self._gate_informing.setdefault(item.qid, set()).add(item.sample_index)
