"""Mini-batches of the diagnosis pool for one epoch (seed 000 §9).

- `n_batches = ceil(N / batch_size)`; batch sizes are balanced (they differ
  by at most one and never exceed `batch_size`).
- Small classes (size <= `small_class_threshold`, or too small to be split
  into two pieces of `min_class_per_batch`) are packed WHOLE first, by
  first-fit-decreasing. A small class that fits in no batch is spread
  like a large one.
- Large classes (task types sorted by name) are spread round-robin with a
  global pointer, in chunks of at least `min_class_per_batch` questions, so
  a task type present in a batch brings enough cases to diagnose.
  When balanced sizes leave only fragments of room, a chunk is split and
  the piece is reported in `Batches.shortfalls` (never silently).
- Correctness mixing: within a task type that has wrong answers
  (`correctness.get(qid) is False`, exactly: unknown/None is not wrong),
  wrong and other questions are interleaved proportionally before
  chunking, so every batch sees both. Task types without wrong answers do
  not mix.
- Deterministic for (seed, epoch); independent of input order.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class BatchParams:
    batch_size: int
    min_class_per_batch: int
    small_class_threshold: int = 8
    mix_correct: bool = True

    @classmethod
    def from_config(cls, cfg: Any) -> "BatchParams":
        return cls(int(cfg.batch_size), int(cfg.min_class_per_batch), int(cfg.small_class_threshold), bool(cfg.mix_correct))


@dataclass(frozen=True)
class Batches:
    epoch: int
    seed: int
    batches: tuple[tuple[str, ...], ...]
    shortfalls: tuple[tuple[int, str, int], ...] = ()  # (batch index, task type, count) below min_class_per_batch

    def to_json(self) -> dict:
        return {
            "epoch": self.epoch,
            "seed": self.seed,
            "batches": [list(b) for b in self.batches],
            "shortfalls": [list(s) for s in self.shortfalls],
        }

    @classmethod
    def from_json(cls, data: Mapping, *, source: str = "<batches>") -> "Batches":
        try:
            return cls(
                int(data["epoch"]),
                int(data["seed"]),
                tuple(tuple(str(q) for q in b) for b in data["batches"]),
                tuple((int(i), str(t), int(n)) for i, t, n in data["shortfalls"]),
            )
        except (KeyError, TypeError, ValueError) as error:
            raise ValueError(f"{source}: malformed batches ({error!r}); expected keys epoch, seed, batches, shortfalls") from None


def _validate_params(params: BatchParams) -> None:
    """Defensive self-check of the batching parameters (names the config key)."""
    if params.batch_size < 1:
        raise ValueError(f"batching.batch_size must be >= 1, got {params.batch_size}")
    if params.min_class_per_batch < 1:
        raise ValueError(f"batching.min_class_per_batch must be >= 1, got {params.min_class_per_batch}")
    if params.min_class_per_batch >= params.batch_size:
        raise ValueError(
            f"batching.min_class_per_batch ({params.min_class_per_batch}) must be < batching.batch_size ({params.batch_size})"
        )
    if params.small_class_threshold < 0:
        raise ValueError(f"batching.small_class_threshold must be >= 0, got {params.small_class_threshold}")


def mix_by_correctness(qids: list[str], correctness: Mapping[str, bool]) -> list[str]:
    """Interleave wrong (`is False`) and other questions proportionally; keeps each group's order."""
    wrong = [q for q in qids if correctness.get(q) is False]
    other = [q for q in qids if correctness.get(q) is not False]
    if not wrong or not other:
        return list(qids)
    mixed: list[str] = []
    w = o = 0
    n = len(qids)
    for position in range(1, n + 1):
        # Bresenham: after `position` items, about position * |wrong| / n of them are wrong
        if w < len(wrong) and (o >= len(other) or w < math.floor(position * len(wrong) / n + 0.5)):
            mixed.append(wrong[w])
            w += 1
        else:
            mixed.append(other[o])
            o += 1
    return mixed


def _chunk_sizes(n: int, n_chunks: int) -> list[int]:
    base, extra = divmod(n, n_chunks)
    return [base + (1 if i < extra else 0) for i in range(n_chunks)]


def make_batches(
    task_type_of: Mapping[str, str],
    params: BatchParams,
    *,
    seed: int,
    epoch: int,
    correctness: Mapping[str, bool] | None = None,
) -> Batches:
    """Split the diagnosis questions (`qid -> task_type`) into the epoch's batches (see module doc)."""
    _validate_params(params)
    n_total = len(task_type_of)
    if n_total == 0:
        raise ValueError("make_batches: the diagnosis pool is empty")
    correctness = correctness or {}
    m = params.min_class_per_batch
    rng = random.Random(f"batches:{seed}:{epoch}")
    classes: dict[str, list[str]] = {}
    for qid in sorted(task_type_of):
        classes.setdefault(task_type_of[qid], []).append(qid)
    ordered: dict[str, list[str]] = {}
    for task_type in sorted(classes):
        qids = classes[task_type]
        rng.shuffle(qids)
        ordered[task_type] = mix_by_correctness(qids, correctness) if params.mix_correct else qids

    n_batches = math.ceil(n_total / params.batch_size)
    capacity = _chunk_sizes(n_total, n_batches)  # balanced target sizes, each <= batch_size
    batches: list[list[str]] = [[] for _ in range(n_batches)]
    room = list(capacity)

    small = [t for t in ordered if len(ordered[t]) <= params.small_class_threshold or len(ordered[t]) < 2 * m]
    spread = [t for t in ordered if t not in small]
    for task_type in sorted(small, key=lambda t: (-len(ordered[t]), t)):  # first-fit decreasing
        size = len(ordered[task_type])
        target = next((i for i in range(n_batches) if room[i] >= size), None)
        if target is None:
            spread.append(task_type)
            continue
        batches[target].extend(ordered[task_type])
        room[target] -= size

    pointer = 0  # global round-robin pointer, carried across task types
    for task_type in sorted(spread):
        qids = ordered[task_type]
        n_chunks = max(1, min(n_batches, len(qids) // m))
        start = 0
        for size in _chunk_sizes(len(qids), n_chunks):
            chunk = qids[start : start + size]
            start += size
            target = next((j % n_batches for j in range(pointer, pointer + n_batches) if room[j % n_batches] >= size), None)
            if target is not None:
                batches[target].extend(chunk)
                room[target] -= size
                pointer = target + 1
                continue
            # only fragments of room left: split the chunk, biggest room first
            for i in sorted(range(n_batches), key=lambda i: (-room[i], i)):
                if not chunk:
                    break
                piece, chunk = chunk[: room[i]], chunk[room[i] :]
                batches[i].extend(piece)
                room[i] -= len(piece)
            pointer += 1

    class_size = {t: len(q) for t, q in ordered.items()}
    shortfalls = []
    for index, batch in enumerate(batches):
        counts: dict[str, int] = {}
        for qid in batch:
            counts[task_type_of[qid]] = counts.get(task_type_of[qid], 0) + 1
        for task_type, count in sorted(counts.items()):
            if count < min(m, class_size[task_type]):
                shortfalls.append((index, task_type, count))
    return Batches(epoch, seed, tuple(tuple(b) for b in batches), tuple(shortfalls))
