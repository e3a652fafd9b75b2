"""Importance sampling plan of the gate: questions drawn at random with known probabilities.

Every slot asks a question drawn, independently and with replacement, from the
validation pool (minus excluded questions) with probability pi_i fixed before
the gate. pi favours informative questions: the score of a question is the
square root of its posterior expected p(1 - p) (Beta(1, 1) plus the pre-gate
p_hat worth min(n_obs, prior_obs) observations; sqrt because the variance of
the importance-weighted difference is smallest with pi_i proportional to the
standard deviation of C - B, about sqrt(2 p (1 - p))). A floor keeps
pi_i >= floor / N, so the importance weight w_i = 1 / (N pi_i) never exceeds
1 / floor: the bound the betting e-process (`kernel/betting.py`) sizes its bets for.

Because the question of a slot is random with a known pi that does not depend
on any gate outcome, E[(C - B) w | past] is the pool's accuracy gain whatever
p_hat says: a wrong prior only costs pairs, never validity. p_hat comes from
GatePools (pre-gate, non-gate runs only). Every slot gets a fresh sample index
(a counter that skips the samples that fed p_hat).
"""

from __future__ import annotations

import random
from collections.abc import Collection, Mapping, Sequence
from typing import Optional

import numpy as np

from harness.kernel.types import BlockItem

__all__ = ["ImportancePlanner", "floor_probabilities", "information_scores"]


def information_scores(prior: Sequence[tuple[Optional[float], int]], prior_obs: int) -> np.ndarray:
    """sqrt of the posterior E[p(1 - p)] per question; prior entries (p_hat or None, n_obs)."""
    if prior_obs < 0:
        raise ValueError(f"importance plan: prior_obs must be >= 0, got {prior_obs!r}")
    scores = np.empty(len(prior))
    for i, (p_hat, n_obs) in enumerate(prior):
        if p_hat is not None and not 0.0 <= p_hat <= 1.0:
            raise ValueError(f"importance plan: p_hat #{i} must be in [0, 1], got {p_hat!r}")
        weight = 0 if p_hat is None else min(int(n_obs), prior_obs)
        p = 0.5 if p_hat is None else float(p_hat)
        a, b = 1.0 + p * weight, 1.0 + (1.0 - p) * weight
        scores[i] = np.sqrt(a * b / ((a + b) * (a + b + 1.0)))
    return scores


def floor_probabilities(scores: Sequence[float] | np.ndarray, floor: float) -> np.ndarray:
    """pi proportional to `scores`, raised to floor / N where below it (water-filling); sums to 1.

    floor = 1 gives uniform pi. Every pi_i >= floor / N, so 1 / (N pi_i) <= 1 / floor.
    """
    s = np.asarray(scores, dtype=float)
    n = s.size
    if n == 0:
        raise ValueError("importance plan: empty pool")
    if not 0.0 < floor <= 1.0:
        raise ValueError(f"gate.importance_floor must be in (0, 1], got {floor!r}")
    if np.any(~np.isfinite(s)) or np.any(s < 0):
        raise ValueError("importance plan: scores must be finite and >= 0")
    level = floor / n
    fixed = np.zeros(n, dtype=bool)
    pi = np.full(n, 1.0 / n)
    for _ in range(n):
        free = ~fixed
        if not free.any():  # cannot happen for floor <= 1; kept so the loop always ends with a distribution
            break
        total = s[free].sum()
        if total <= 0:  # nothing informative left: the free mass is spread evenly
            pi = np.where(fixed, level, (1.0 - level * fixed.sum()) / free.sum())
            break
        scale = (1.0 - level * fixed.sum()) / total
        below = free & (scale * s < level)
        if not below.any():
            pi = np.where(fixed, level, scale * s)
            break
        fixed |= below
    return pi / pi.sum()


class ImportancePlanner:
    """Hands out the gate's blocks; every slot an independent draw from pi (see module doc).

    The `plans.BlockPlanner` loop contract: `next_block(baseline_outcomes_so_far)`
    (ignored: pi is fixed for the gate), `final`, `informing_samples()`. Each
    BlockItem carries its importance weight 1 / (N pi_i) and `bound`, the largest
    weight of the plan (<= 1 / floor), fixed before the gate.
    """

    def __init__(
        self,
        pool: Sequence[str],
        *,
        block_size: int,
        max_pairs: int,
        floor: float,
        seed: int,
        first_sample_index: int,
        prior: Mapping[str, tuple[Optional[float], int]] | None = None,
        prior_obs: int = 4,
        informing_samples: Mapping[str, Collection[int]] | None = None,
        exclude: Collection[str] = (),
    ):
        excluded = set(exclude)
        self._pool = [q for q in pool if q not in excluded]
        if not self._pool:
            raise ValueError("ImportancePlanner: empty validation pool (after excluding the case-pack questions)")
        if len(set(self._pool)) != len(self._pool):
            raise ValueError("ImportancePlanner: duplicate qids in the pool")
        if block_size < 1 or max_pairs < 1:
            raise ValueError(f"gate.block_size and gate.max_pairs must be >= 1, got {block_size}, {max_pairs}")
        prior = prior or {}
        unknown = sorted(set(prior) - set(pool))
        if unknown:
            raise ValueError(f"ImportancePlanner: prior for qids not in the pool: {unknown[:5]}")
        self.block_size, self.max_pairs, self.floor = int(block_size), int(max_pairs), float(floor)
        scores = information_scores([prior.get(q, (None, 0)) for q in self._pool], prior_obs)
        self.probabilities = floor_probabilities(scores, floor)
        n = len(self._pool)
        self._weights = 1.0 / (n * self.probabilities)
        self.bound = float(np.max(self._weights))  # <= 1 / floor; known before the first slot
        self._cumulative = np.cumsum(self.probabilities)
        self._rng = random.Random(seed)
        self._next_index = first_sample_index
        self._informing = {q: frozenset(int(i) for i in s) for q, s in (informing_samples or {}).items()}
        self._issued: list[BlockItem] = []

    @property
    def pool(self) -> list[str]:
        return list(self._pool)

    @property
    def n_issued(self) -> int:
        return len(self._issued)

    @property
    def final(self) -> bool:
        return len(self._issued) >= self.max_pairs

    @property
    def issued(self) -> list[BlockItem]:
        return list(self._issued)

    def weight(self, qid: str) -> float:
        return float(self._weights[self._pool.index(qid)])

    def informing_samples(self) -> dict[str, frozenset[int]]:
        return dict(self._informing)

    def next_block(self, baseline_outcomes_so_far: Sequence[Optional[bool]] = ()) -> Optional[list[BlockItem]]:
        total = len(self._issued)
        if total >= self.max_pairs:
            return None
        size = min(self.block_size, self.max_pairs - total)
        block = []
        for _ in range(size):
            row = int(np.searchsorted(self._cumulative, self._rng.random() * self._cumulative[-1], side="right"))
            row = min(row, len(self._pool) - 1)
            qid = self._pool[row]
            used = self._informing.get(qid, frozenset())
            while self._next_index in used:
                self._next_index += 1
            block.append(BlockItem(qid, self._next_index, anchor=True, weight=float(self._weights[row]), weight_bound=self.bound))
            self._next_index += 1
        self._issued.extend(block)
        return block
