"""Three-pool split of the questions (seed 000 §8): test -> validation -> diagnosis.

Progressive exclusion: each pool is drawn from what the previous ones left.
Test keeps the natural task-type distribution (proportional allocation);
test and validation give every task type at least `eval_min_per_class`
questions; validation may be steered to a correct/wrong ratio when baseline
correctness is known. Everything is seeded and independent of input order.
`check_frozen_pools` checks a frozen split against the questions (the file itself:
harness/loop/persistence.py `build_or_load_pools`).
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Optional

POOLS_FORMAT = 1


@dataclass(frozen=True)
class PoolParams:
    test_size: int
    val_size: int
    diagnosis_size: int
    eval_min_per_class: int
    seed: int
    val_correct_ratio: Optional[float] = None  # None = natural distribution

    @classmethod
    def from_config(cls, cfg: Any) -> "PoolParams":
        """From the `pools` config group (PoolsConfig or a DictConfig with the same keys)."""
        return cls(
            test_size=int(cfg.test_size),
            val_size=int(cfg.val_size),
            diagnosis_size=int(cfg.diagnosis_size),
            eval_min_per_class=int(cfg.eval_min_per_class),
            seed=int(cfg.seed),
            val_correct_ratio=None if cfg.val_correct_ratio is None else float(cfg.val_correct_ratio),
        )

    def to_json(self) -> dict:
        return dict(self.__dict__)


@dataclass(frozen=True)
class Pools:
    test: tuple[str, ...]
    validation: tuple[str, ...]
    diagnosis: tuple[str, ...]
    task_type_of: Mapping[str, str]  # qid -> task type, for every qid of the three pools

    def by_task_type(self, pool: str) -> dict[str, list[str]]:
        """qids of `pool` ("test" | "validation" | "diagnosis") grouped by task type, pool order kept."""
        grouped: dict[str, list[str]] = {}
        for qid in getattr(self, pool):
            grouped.setdefault(self.task_type_of[qid], []).append(qid)
        return dict(sorted(grouped.items()))

    def to_json(self) -> dict:
        return {
            "format": POOLS_FORMAT,
            "test": list(self.test),
            "validation": list(self.validation),
            "diagnosis": list(self.diagnosis),
            "task_type_of": dict(sorted(self.task_type_of.items())),
        }

    @classmethod
    def from_json(cls, data: Mapping, *, source: str = "<pools>") -> "Pools":
        if not isinstance(data, Mapping) or "test" not in data:
            raise ValueError(
                f"{source}: old or unknown pools format: no 'test' key (expected keys test, validation, diagnosis, "
                "task_type_of); delete the file to re-split with a test pool"
            )
        for key in ("validation", "diagnosis", "task_type_of"):
            if key not in data:
                raise ValueError(f"{source}: missing key {key!r} (expected test, validation, diagnosis, task_type_of)")
        pools = cls(tuple(data["test"]), tuple(data["validation"]), tuple(data["diagnosis"]), dict(data["task_type_of"]))
        seen: set[str] = set()
        for name in ("test", "validation", "diagnosis"):
            for qid in getattr(pools, name):
                if qid in seen:
                    raise ValueError(f"{source}: qid {qid!r} appears in more than one pool (at {name!r})")
                if qid not in pools.task_type_of:
                    raise ValueError(f"{source}: qid {qid!r} of pool {name!r} has no entry in task_type_of")
                seen.add(qid)
        return pools


QuestionLike = Any  # (qid, task_type[, correct]) tuple or an object with .qid and .task_type


def _normalise(questions: Iterable[QuestionLike]) -> dict[str, str]:
    task_type_of: dict[str, str] = {}
    for position, item in enumerate(questions):
        if isinstance(item, (tuple, list)):
            if len(item) < 2:
                raise ValueError(f"split_pools: question #{position} {item!r}: expected (qid, task_type[, correct])")
            qid, task_type = str(item[0]), str(item[1])
        else:
            qid, task_type = str(item.qid), str(item.task_type)
        if qid in task_type_of:
            raise ValueError(f"split_pools: duplicate qid {qid!r}")
        task_type_of[qid] = task_type
    return task_type_of


def _correctness_from_items(questions: Sequence[QuestionLike]) -> dict[str, bool]:
    return {str(item[0]): item[2] for item in questions if isinstance(item, (tuple, list)) and len(item) >= 3 and item[2] is not None}


def _allocate(available: Mapping[str, int], total: int, minimum: int, pool: str, weights: Mapping[str, int] | None = None) -> dict[str, int]:
    """Per-class counts summing to `total`: proportional to `weights` (default: available; largest remainder), each >= minimum, <= available."""
    classes = sorted(available)
    n_all = sum(available.values())
    weights = weights or available
    weight_all = sum(weights[c] for c in classes)
    if total > n_all:
        raise ValueError(f"pools: {pool} needs {total} questions but only {n_all} remain")
    short = [c for c in classes if available[c] < minimum]
    if short:
        raise ValueError(
            f"pools: task type {short[0]!r} has only {available[short[0]]} questions left for the {pool} pool; "
            f"eval_min_per_class={minimum} (lower it or add questions)"
        )
    if minimum * len(classes) > total:
        raise ValueError(f"pools: {pool}_size={total} < eval_min_per_class={minimum} x {len(classes)} task types")
    exact = {c: total * weights[c] / weight_all for c in classes}
    counts = {c: min(available[c], max(minimum, int(exact[c]))) for c in classes}
    # hand out the rest by largest remainder; take back from the largest classes above the minimum
    while sum(counts.values()) < total:
        c = max((c for c in classes if counts[c] < available[c]), key=lambda c: (exact[c] - counts[c], c))
        counts[c] += 1
    while sum(counts.values()) > total:
        c = max((c for c in classes if counts[c] > minimum), key=lambda c: (counts[c] - exact[c], c))
        counts[c] -= 1
    return counts


def split_pools(
    questions: Iterable[QuestionLike],
    *,
    test_size: int,
    val_size: int,
    diagnosis_size: int,
    eval_min_per_class: int,
    seed: int,
    val_correct_ratio: Optional[float] = None,
    correctness: Optional[Mapping[str, bool]] = None,
) -> Pools:
    """Split into test, validation and diagnosis pools (disjoint; see module doc).

    Test and validation reserve `eval_min_per_class` per task type (the
    test quota of a class never eats into validation's minimum); error
    naming the class when impossible. Diagnosis takes `diagnosis_size`
    of the rest, proportionally. `val_correct_ratio` (needs `correctness`,
    or a third tuple element) picks that share of correct questions per class
    in validation, as far as each class has them.
    """
    items = list(questions)
    task_type_of = _normalise(items)
    known = dict(correctness or {}) | _correctness_from_items(items)
    if val_correct_ratio is not None:
        if not 0.0 <= val_correct_ratio <= 1.0:
            raise ValueError(f"pools.val_correct_ratio must be in [0, 1] or null, got {val_correct_ratio!r}")
        if not known:
            raise ValueError("pools.val_correct_ratio is set but no baseline correctness was given")
    for name, value in (("test_size", test_size), ("val_size", val_size), ("diagnosis_size", diagnosis_size), ("eval_min_per_class", eval_min_per_class)):
        if value < 0:
            raise ValueError(f"pools.{name} must be >= 0, got {value}")
    rng = random.Random(seed)
    remaining: dict[str, list[str]] = {}
    for qid in sorted(task_type_of):
        remaining.setdefault(task_type_of[qid], []).append(qid)
    for task_type in sorted(remaining):
        rng.shuffle(remaining[task_type])

    # test: natural distribution, but leave every class enough for validation's minimum
    test_room = {c: len(q) - eval_min_per_class for c, q in remaining.items()}
    natural = {c: len(q) for c, q in remaining.items()}
    test_counts = _allocate({c: max(n, 0) for c, n in test_room.items()}, test_size, eval_min_per_class, "test", weights=natural)
    test = _take(remaining, test_counts)

    val_counts = _allocate({c: len(q) for c, q in remaining.items()}, val_size, eval_min_per_class, "validation")
    if val_correct_ratio is None:
        validation = _take(remaining, val_counts)
    else:
        validation = _take_with_ratio(remaining, val_counts, val_correct_ratio, known)

    left = sum(len(q) for q in remaining.values())
    if left < diagnosis_size:
        raise ValueError(f"pools: diagnosis_size={diagnosis_size} but only {left} questions remain after test and validation")
    diag_counts = _allocate({c: len(q) for c, q in remaining.items() if q}, diagnosis_size, 0, "diagnosis")
    diagnosis = _take(remaining, diag_counts)
    used = set(test) | set(validation) | set(diagnosis)
    return Pools(tuple(test), tuple(validation), tuple(diagnosis), {q: t for q, t in task_type_of.items() if q in used})


def _take(remaining: dict[str, list[str]], counts: Mapping[str, int]) -> list[str]:
    taken: list[str] = []
    for task_type in sorted(counts):
        n = counts[task_type]
        taken.extend(remaining[task_type][:n])
        remaining[task_type] = remaining[task_type][n:]
    return taken


def _take_with_ratio(remaining: dict[str, list[str]], counts: Mapping[str, int], ratio: float, known: Mapping[str, bool]) -> list[str]:
    taken: list[str] = []
    for task_type in sorted(counts):
        n = counts[task_type]
        pool = remaining[task_type]
        right = [q for q in pool if known.get(q) is True]
        other = [q for q in pool if known.get(q) is not True]
        n_right = min(len(right), round(n * ratio))
        n_other = n - n_right
        if n_other > len(other):  # not enough wrong/unknown questions: top up with correct ones
            n_right, n_other = n - len(other), len(other)
        chosen = right[:n_right] + other[:n_other]
        taken.extend(chosen)
        chosen_set = set(chosen)
        remaining[task_type] = [q for q in pool if q not in chosen_set]
    return taken


def check_frozen_pools(pools: Pools, questions: Iterable[QuestionLike], *, source: str = "<pools>") -> None:
    """A frozen split must still fit the questions: every frozen qid present, with the same task type."""
    known = _normalise(questions)
    missing = [q for q in pools.task_type_of if q not in known]
    if missing:
        raise ValueError(f"{source}: {len(missing)} frozen qids are not in the questions (e.g. {missing[0]!r}); the questions changed")
    mismatched = [q for q, t in pools.task_type_of.items() if known[q] != t]
    if mismatched:
        raise ValueError(f"{source}: qid {mismatched[0]!r} changed task type since the pools were frozen")
