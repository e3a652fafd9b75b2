"""Pool and batch sizes that fit the user's questions (`benchmark=jsonl`).

`fit_sizes(counts)` derives `pools.*` and `batching.*` sizes from the number
of questions per task type: a third of the data for each of test, validation
and diagnosis (at most the simulator's 220 each), `eval_min_per_class` a third
of the smallest task type (at most 20, and at most 220 / task types), five steps per epoch. The composed
config gets them through the `ht.fit` resolver (conf/pools/jsonl.yaml,
conf/batching/jsonl.yaml), so `benchmark=jsonl` works on any file with at
least `MIN_PER_TASK_TYPE` questions per task type.

`size_violations(counts, sizes)` checks sizes someone set by hand against the
same counts with the kernel's own split (harness/kernel/pools.split_pools),
so a size that passes here is one the `pools` stage can split; each message
names the keys to change and values that fit.
"""

from __future__ import annotations

import math
import os
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from harness.kernel.pools import split_pools

MAX_POOL_SIZE = 220  # the simulator's default pool size: beyond it a gate costs more and tells little more
MAX_EVAL_MIN_PER_CLASS = 20
STEPS_PER_EPOCH = 5  # the simulator's 220 / 44
MIN_PER_TASK_TYPE = 3  # one question for each of test, validation and diagnosis
POOL_KEYS = ("test_size", "val_size", "diagnosis_size", "eval_min_per_class")
BATCH_KEYS = ("batch_size", "min_class_per_batch")


class SizingError(ValueError):
    """The questions cannot be split at all, or the configured sizes do not fit them."""


@dataclass(frozen=True)
class DataSizes:
    test_size: int
    val_size: int
    diagnosis_size: int
    eval_min_per_class: int
    batch_size: int
    min_class_per_batch: int

    def overrides(self) -> str:
        """The sizes as command-line overrides (`pools.test_size=33 ...`)."""
        values = asdict(self)
        return " ".join([f"pools.{k}={values[k]}" for k in POOL_KEYS] + [f"batching.{k}={values[k]}" for k in BATCH_KEYS])


def batch_sizes(diagnosis_size: int) -> tuple[int, int]:
    """(batch_size, min_class_per_batch) for a diagnosis pool: STEPS_PER_EPOCH steps, min_class < batch."""
    batch = max(2, math.ceil(diagnosis_size / STEPS_PER_EPOCH))
    return batch, min(2, batch - 1)


def fit_sizes(counts: Mapping[str, int], *, source: str = "the questions") -> DataSizes:
    """Sizes that fit `counts` (task type -> number of questions); SizingError when no split exists."""
    if not counts:
        raise SizingError(f"{source}: no questions, so no pool can be split")
    short = sorted((n, t) for t, n in counts.items() if n < MIN_PER_TASK_TYPE)
    if short:
        n, task_type = short[0]
        raise SizingError(
            f"{source}: task type {task_type!r} has {n} question(s); every task type needs at least {MIN_PER_TASK_TYPE} "
            f"(one each for the test, validation and diagnosis pools): add questions of {task_type!r}, or train on the "
            f"others with benchmark.task_types=[{','.join(sorted(t for t in counts if counts[t] >= MIN_PER_TASK_TYPE))}]"
        )
    total, n_types, smallest = sum(counts.values()), len(counts), min(counts.values())
    per_class = max(1, min(MAX_EVAL_MIN_PER_CLASS, smallest // MIN_PER_TASK_TYPE, MAX_POOL_SIZE // n_types))
    eval_size = max(per_class * n_types, min(MAX_POOL_SIZE, total // 3))  # above 220 only with more than 220 task types
    diagnosis = min(MAX_POOL_SIZE, total - 2 * eval_size)
    batch, min_class = batch_sizes(diagnosis)
    return DataSizes(eval_size, eval_size, diagnosis, per_class, batch, min_class)


def size_violations(counts: Mapping[str, int], *, test_size: int, val_size: int, diagnosis_size: int,
                    eval_min_per_class: int, source: str = "the questions") -> list[str]:
    """Why the kernel's split of `counts` fails under these sizes (empty list: it succeeds)."""
    questions = [(f"{t}#{i}", t) for t, n in sorted(counts.items()) for i in range(n)]
    try:
        split_pools(questions, test_size=test_size, val_size=val_size, diagnosis_size=diagnosis_size,
                    eval_min_per_class=eval_min_per_class, seed=0)
    except ValueError as exc:
        return [str(exc)]
    return []


def check_sizes(counts: Mapping[str, int], *, test_size: int, val_size: int, diagnosis_size: int, eval_min_per_class: int,
                source: str) -> None:
    """SizingError naming the keys and values that fit when the split of `counts` fails."""
    problems = size_violations(counts, test_size=test_size, val_size=val_size, diagnosis_size=diagnosis_size,
                               eval_min_per_class=eval_min_per_class, source=source)
    if not problems:
        return
    summary = ", ".join(f"{t}: {n}" for t, n in sorted(counts.items()))
    try:
        fitting = f"values that fit: {fit_sizes(counts, source=source).overrides()} (or leave the pools.* and batching.* keys unset: " \
                  "for benchmark=jsonl they are derived from the questions file)"
    except SizingError as exc:
        fitting = str(exc)
    raise SizingError(
        f"{source} ({sum(counts.values())} questions; {summary}) cannot be split with pools.test_size={test_size} "
        f"pools.val_size={val_size} pools.diagnosis_size={diagnosis_size} pools.eval_min_per_class={eval_min_per_class}: "
        f"{problems[0]}; {fitting}"
    )


_COUNTS: dict[tuple[str, int, int, tuple[str, ...]], dict[str, int]] = {}


def task_type_counts(path: str | os.PathLike[str], task_types: Sequence[str] = ()) -> dict[str, int]:
    """Questions per task type of a JSONL/Parquet questions file (only `task_types` when listed).

    Reads and validates the whole file (QuestionsError names line and field); cached per (path, mtime, size)."""
    from harness.bench.jsonl import read_user_questions

    file_path = Path(path)
    stat = file_path.stat() if file_path.is_file() else None
    key = (str(file_path.resolve()), stat.st_mtime_ns if stat else -1, stat.st_size if stat else -1, tuple(task_types))
    if key not in _COUNTS:
        counts = Counter(q.task_type for q in read_user_questions(file_path))
        if task_types:
            missing = sorted(set(task_types) - set(counts))
            if missing:
                raise SizingError(f"benchmark.task_types: {missing} have no questions in {path} (found {sorted(counts)})")
            counts = Counter({t: counts[t] for t in task_types})
        _COUNTS[key] = dict(sorted(counts.items()))
    return dict(_COUNTS[key])
