"""Information ladder over the validation pool (seed 000 §10) and the gate's block plan.

`GatePools` keeps, per task type, one entry per validation question in
STORAGE order (the pool's order) with p_hat (estimated baseline accuracy),
the number of observations and the exact samples (run_id, sample_index)
that fed it. Ordering happens only when a ladder is taken:

- cold (`warm=False`): wrong-first 2:1 interleave of observed questions
  (p_hat < 1/2 counts as wrong, else right) with one never-observed probe
  question after every `probe_every` interleaved ones;
- warm (`warm=True`): by information p_hat(1 - p_hat) descending (exact ties, see
  `order_key`, keep storage order;
  never-observed questions count as p_hat = 1/2), dropping questions with
  p_hat outside [p_low, p_high] (they carry no information).

p_hat: first observation gives the Beta(1,1)-smoothed (y + 1) / 3 (wrong
1/3, right 2/3); later ones the gamma-EMA p <- (1 - gamma) p + gamma y.

No leak: `update_from_run` refuses run ids containing `_gate_` (rule 1);
`informing_samples` lists the samples behind every p_hat so that
`plan_blocks` never hands out, and `gate.pair_block` refuses, a pair on a
sample that placed its question on the ladder (rule 2).
"""

from __future__ import annotations

import hashlib
import json
import math
import random
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Optional

from harness.identity import GATE_MARK
from harness.kernel.registry import is_int_at_least, is_number, ordered_pair_problems, params_of
from harness.kernel.types import BlockItem, GateParams

GATE_RUN_MARKER = GATE_MARK
# information scores are compared after rounding to this many decimals: values equal but for floating-point
# noise (p(1 - p) of 0.3 and of 0.7 differ in the 17th digit) tie exactly and keep storage (pool) order
ORDER_DIGITS = 12


def order_key(score: float) -> float:
    """The comparison key of an information score: rounded to ORDER_DIGITS, so ties are exact."""
    return round(float(score), ORDER_DIGITS)
FORMAT_VERSION = 1


@dataclass(frozen=True)
class PoolParams:
    """The setting the gate pools own (gate.<field>): how a non-gate run's outcomes update p_hat (update_from_run)."""

    ema_gamma: float = 0.3  # p_hat <- (1 - gamma) p_hat + gamma outcome

    def check(self) -> list[tuple[str, str]]:
        return [] if is_number(self.ema_gamma) and 0 < self.ema_gamma <= 1 else [("ema_gamma", "must satisfy 0 < ema_gamma <= 1")]


@dataclass(frozen=True)
class LadderParams:
    """The settings the static ladder (gate.plan=static; plan_blocks, GatePools.ladder) owns (gate.<field>)."""

    p_low: float = 0.02
    p_high: float = 0.98
    probe_every: int = 3
    reask_top_fraction: float = 0.5  # re-ask passes (after the first full pass) walk only this top share of the ladder
    anchor_fraction: float = 0.25  # share of each block's slots drawn uniformly from the whole pool (anchors)

    def check(self) -> list[tuple[str, str]]:
        problems = ordered_pair_problems(self, "p_low", "p_high", lambda v: 0 <= v <= 1, "must be in [0, 1]", strict=True)
        if not is_int_at_least(self.probe_every, 1):
            problems.append(("probe_every", "must be an integer >= 1"))
        if not (is_number(self.reask_top_fraction) and 0 < self.reask_top_fraction <= 1):
            problems.append(("reask_top_fraction", "must satisfy 0 < reask_top_fraction <= 1"))
        if not (is_number(self.anchor_fraction) and 0 <= self.anchor_fraction <= 1):
            problems.append(("anchor_fraction", "must satisfy 0 <= anchor_fraction <= 1 (1 = every slot an anchor)"))
        return problems


class LeakingRunError(ValueError):
    """A gate rollout (run id containing `_gate_`) was offered to the ladder's p_hat."""


@dataclass
class LadderEntry:
    qid: str
    p_hat: Optional[float] = None  # None = never observed (a probe question in the cold ladder)
    n_obs: int = 0
    sources: list[tuple[str, int]] = field(default_factory=list)  # (run_id, sample_index) that fed p_hat

    @property
    def information(self) -> float:
        p = 0.5 if self.p_hat is None else self.p_hat
        return p * (1.0 - p)


def pool_fingerprint(validation_by_type: Mapping[str, Sequence[str]]) -> str:
    """sha256 of the pool composition (task types and their qid sets; order-free)."""
    canonical = {task_type: sorted(qids) for task_type, qids in sorted(validation_by_type.items())}
    return hashlib.sha256(json.dumps(canonical, sort_keys=True).encode()).hexdigest()


class GatePools:
    """Per task type ladder entries, persisted with a fingerprint of the pool composition."""

    def __init__(self, entries: Mapping[str, Sequence[LadderEntry]]):
        self._entries: dict[str, list[LadderEntry]] = {tt: list(es) for tt, es in entries.items()}
        self._index: dict[str, tuple[str, int]] = {}
        for task_type, es in self._entries.items():
            for position, entry in enumerate(es):
                if entry.qid in self._index:
                    raise ValueError(f"GatePools: qid {entry.qid!r} appears twice (task types {self._index[entry.qid][0]!r}, {task_type!r})")
                self._index[entry.qid] = (task_type, position)

    @classmethod
    def build(cls, validation_by_type: Mapping[str, Sequence[str]]) -> "GatePools":
        """Fresh pools: every validation question unobserved, in the given (storage) order."""
        return cls({tt: [LadderEntry(qid) for qid in qids] for tt, qids in sorted(validation_by_type.items())})

    # -- views -------------------------------------------------------------------------------
    @property
    def task_types(self) -> list[str]:
        return sorted(self._entries)

    def entries(self, task_type: str) -> list[LadderEntry]:
        """Entries of `task_type` in storage order (copies of the list, entries shared)."""
        return list(self._require(task_type))

    def pool(self, task_type: str) -> list[str]:
        return [entry.qid for entry in self._require(task_type)]

    @property
    def fingerprint(self) -> str:
        return pool_fingerprint({tt: [e.qid for e in es] for tt, es in self._entries.items()})

    def informing_samples(self, task_type: Optional[str] = None) -> dict[str, frozenset[int]]:
        """qid -> sample indices that fed its p_hat (all task types when None)."""
        types = self.task_types if task_type is None else [task_type]
        return {e.qid: frozenset(si for _, si in e.sources) for tt in types for e in self._require(tt)}

    def _require(self, task_type: str) -> list[LadderEntry]:
        try:
            return self._entries[task_type]
        except KeyError:
            raise KeyError(f"GatePools: unknown task type {task_type!r}; known: {self.task_types}") from None

    # -- updates -----------------------------------------------------------------------------
    def update_from_run(self, run_id: str, outcomes: Iterable[tuple[str, int, Optional[bool]]], *, gamma: float) -> int:
        """Absorb (qid, sample_index, correct) outcomes of one NON-gate run into p_hat.

        Refuses run ids containing `_gate_` (LeakingRunError) before reading
        anything. Skips qids outside the validation pool, infra outcomes
        (None) and samples already absorbed (idempotent on resume).
        Returns the number of outcomes absorbed.
        """
        if GATE_RUN_MARKER in run_id:
            raise LeakingRunError(f"update_from_run: run {run_id!r} is a gate rollout; p_hat is never fed by gate runs (no-leak rule 1)")
        if not 0.0 < gamma <= 1.0:
            raise ValueError(f"gate.ema_gamma must be in (0, 1], got {gamma!r}")
        absorbed = 0
        for qid, sample_index, correct in outcomes:
            located = self._index.get(qid)
            if located is None or correct is None:
                continue
            if not isinstance(correct, bool):
                raise ValueError(f"update_from_run({run_id!r}): outcome of {qid!r} must be bool or None, got {correct!r}")
            entry = self._entries[located[0]][located[1]]
            source = (run_id, int(sample_index))
            if source in entry.sources:
                continue
            y = 1.0 if correct else 0.0
            entry.p_hat = (y + 1.0) / 3.0 if entry.p_hat is None else (1.0 - gamma) * entry.p_hat + gamma * y
            entry.n_obs += 1
            entry.sources.append(source)
            absorbed += 1
        return absorbed

    # -- ordering ----------------------------------------------------------------------------
    def ladder(self, task_type: str, params: GateParams, *, warm: bool, exclude: Collection[str] = ()) -> list[str]:
        """The ordered ladder of `task_type` (see module doc); `exclude`d qids (e.g. case-pack questions) left out."""
        entries = [e for e in self._require(task_type) if e.qid not in exclude]
        own = params_of(LadderParams, params)
        if warm:
            kept = [e for e in entries if e.p_hat is None or own.p_low <= e.p_hat <= own.p_high]
            return [e.qid for e in sorted(kept, key=lambda e: -order_key(e.information))]
        return cold_order(entries, probe_every=own.probe_every)

    # -- serialization (the file: harness/loop/persistence.py) -------------------------------------------------------------------------
    def to_json(self) -> dict:
        return {
            "format": FORMAT_VERSION,
            "fingerprint": self.fingerprint,
            "task_types": {
                tt: [{"qid": e.qid, "p_hat": e.p_hat, "n_obs": e.n_obs, "sources": [list(s) for s in e.sources]} for e in es]
                for tt, es in self._entries.items()
            },
        }

    @classmethod
    def from_json(cls, data: Mapping, *, source: str = "<gate pools>") -> "GatePools":
        try:
            raw = data["task_types"]
            entries = {
                tt: [LadderEntry(e["qid"], e["p_hat"], int(e["n_obs"]), [(str(r), int(i)) for r, i in e["sources"]]) for e in es]
                for tt, es in raw.items()
            }
            stored = data["fingerprint"]
        except (KeyError, TypeError, ValueError) as error:
            raise ValueError(f"{source}: malformed gate pools ({error!r}); expected keys format, fingerprint, task_types") from None
        pools = cls(entries)
        if pools.fingerprint != stored:
            raise RuntimeError(f"{source}: stored fingerprint does not match its own entries (file edited or corrupt)")
        return pools


def cold_order(entries: Sequence[LadderEntry], *, probe_every: int) -> list[str]:
    """Cold ladder: wrong, wrong, right, ... (2:1) with a probe after every `probe_every` interleaved questions."""
    if probe_every < 1:
        raise ValueError(f"gate.probe_every must be >= 1, got {probe_every!r}")
    wrong = [e.qid for e in entries if e.p_hat is not None and e.p_hat < 0.5]
    right = [e.qid for e in entries if e.p_hat is not None and e.p_hat >= 0.5]
    probes = [e.qid for e in entries if e.p_hat is None]
    interleaved: list[str] = []
    w = r = 0
    while w < len(wrong) or r < len(right):
        for _ in range(2):
            if w < len(wrong):
                interleaved.append(wrong[w])
                w += 1
        if r < len(right):
            interleaved.append(right[r])
            r += 1
    order: list[str] = []
    p = 0
    for count, qid in enumerate(interleaved, start=1):
        order.append(qid)
        if count % probe_every == 0 and p < len(probes):
            order.append(probes[p])
            p += 1
    order.extend(probes[p:])
    return order


def plan_blocks(
    ladder: Sequence[str],
    pool: Sequence[str],
    params: GateParams,
    *,
    seed: int,
    first_sample_index: int,
    informing_samples: Mapping[str, Collection[int]] | None = None,
) -> list[list[BlockItem]]:
    """Every block the gate may run, in order, up to `params.max_pairs` pairs.

    Each block has `block_size` slots (the last may be shorter): a share
    `anchor_fraction` (at least one slot when the fraction is > 0) are
    anchors drawn uniformly, seeded, from the WHOLE `pool` (without
    replacement within a pass); the rest walk the `ladder` in order, and
    once it is exhausted, re-ask passes walk its top `reask_top_fraction`
    share again and again (re-asked questions: the informative end of the
    ladder; valid because the order is fixed before the gate starts). An
    empty ladder makes every slot an anchor. Every slot gets a fresh sample
    index from a counter starting at `first_sample_index`, skipping indices
    in `informing_samples[qid]` (no-leak rule 2). The loop stops at the
    first verdict; pairs never exceed `max_pairs`.
    """
    if not pool:
        raise ValueError("plan_blocks: empty validation pool")
    unknown = sorted(set(ladder) - set(pool))
    if unknown:
        raise ValueError(f"plan_blocks: ladder questions not in the pool: {unknown[:5]}")
    check_block_params(params)
    own = params_of(LadderParams, params)
    if not 0.0 <= own.anchor_fraction <= 1.0:
        raise ValueError(f"gate.anchor_fraction must be in [0, 1], got {own.anchor_fraction!r}")
    if not 0.0 < own.reask_top_fraction <= 1.0:
        raise ValueError(f"gate.reask_top_fraction must be in (0, 1], got {own.reask_top_fraction!r}")
    informing = informing_samples or {}
    rng = random.Random(seed)
    anchor_order: list[str] = []
    # first pass: the whole ladder; re-ask passes: its most informative top share
    reask_length = max(1, math.ceil(len(ladder) * own.reask_top_fraction))
    ladder_cursor = 0
    next_index = first_sample_index
    blocks: list[list[BlockItem]] = []
    total = 0
    while total < params.max_pairs:
        size = min(params.block_size, params.max_pairs - total)
        n_anchor = anchors_per_block(size, own.anchor_fraction) if ladder else size
        block: list[BlockItem] = []
        for slot in range(size):
            is_anchor = slot >= size - n_anchor
            if is_anchor:
                if not anchor_order:
                    anchor_order = list(pool)
                    rng.shuffle(anchor_order)
                qid = anchor_order.pop()
            else:
                position = ladder_cursor if ladder_cursor < len(ladder) else (ladder_cursor - len(ladder)) % reask_length
                qid = ladder[position]
                ladder_cursor += 1
            used = informing.get(qid, ())
            while next_index in used:
                next_index += 1
            block.append(BlockItem(qid, next_index, anchor=is_anchor))
            next_index += 1
        blocks.append(block)
        total += size
    return blocks


def check_block_params(params: GateParams) -> None:
    """The block-shape keys every block planner relies on; ValueError naming the key."""
    if params.block_size < 1 or params.max_pairs < 1:
        raise ValueError(f"gate.block_size and gate.max_pairs must be >= 1, got {params.block_size}, {params.max_pairs}")


def anchors_per_block(size: int, anchor_fraction: float) -> int:
    """Anchor slots in a block of `size`: round(size * fraction), at least 1 when the fraction is > 0."""
    if anchor_fraction <= 0.0:
        return 0
    return min(size, max(1, round(size * anchor_fraction)))
