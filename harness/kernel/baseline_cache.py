"""BaselineCache: baseline outcomes of gate questions, content-addressed (seed 000 §10).

Key: (task_type, skill_hash, prompts_version, qid, sample_index). The same
key means the same baseline harness asked the same question with the same
sample index, so the response cache would return the same answer: reusing
it costs nothing and changes nothing. This is the in-memory structure and
its row format (`encode_row` / `decode_row`, one JSON object per line); the
durable, append-only file is harness/loop/persistence.py `DurableBaselineCache`.

A baseline (task_type, skill_hash, prompts_version) can be RETIRED
(`retire`, one row `{"retired": [...]}`): its samples are never served again.
No gate serves cached samples since issue 29 removed `gate.baseline_reuse`
(harness/loop/validate.py says why); the rows stay readable.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Optional

# (task_type, skill_hash, prompts_version, qid, sample_index, value): the outcome (bool), or a soft gate's value in [0, 1]
BaselineValue = bool | float
BaselineRow = tuple[str, str, str, str, int, BaselineValue]


@dataclass(frozen=True)
class BaselineKey:
    task_type: str
    skill_hash: str
    prompts_version: str
    qid: str
    sample_index: int


def encode_row(key: BaselineKey, correct: BaselineValue) -> str:
    """One cache row as a JSON line (no newline), keys sorted."""
    return json.dumps({**key.__dict__, "correct": correct}, sort_keys=True)


BaselineId = tuple[str, str, str]  # (task_type, skill_hash, prompts_version): one baseline skill


def encode_retired(baseline: BaselineId) -> str:
    """The row that retires one baseline (no newline)."""
    return json.dumps({"retired": list(baseline)})


def decode_retired(line: str) -> Optional[BaselineId]:
    """The baseline a retire row names; None for an outcome row; ValueError when a retire row is malformed."""
    if '"retired"' not in line:
        return None
    row = json.loads(line)
    if not isinstance(row, dict) or "retired" not in row:
        return None
    ident = row["retired"]
    if not (isinstance(ident, list) and len(ident) == 3 and all(isinstance(x, str) for x in ident)):
        raise ValueError(f"a retire row needs [task_type, skill_hash, prompts_version], got {ident!r}")
    return (ident[0], ident[1], ident[2])


def check_value(correct: object, qid: str) -> BaselineValue:
    """`correct` when it is an outcome (bool) or a soft gate's value (float in [0, 1]); ValueError naming the qid else
    (an infra failure is not an outcome and is never cached)."""
    if isinstance(correct, bool) or (isinstance(correct, float) and 0.0 <= correct <= 1.0):
        return correct
    raise ValueError(f"baseline outcome of {qid!r} must be a bool or a float in [0, 1] (infra failures are not cached), "
                     f"got {correct!r}")


def decode_row(line: str) -> tuple[BaselineKey, BaselineValue]:
    """The key and outcome of one JSON line; ValueError / KeyError / TypeError when malformed."""
    row = json.loads(line)
    key = BaselineKey(str(row["task_type"]), str(row["skill_hash"]), str(row["prompts_version"]), str(row["qid"]), int(row["sample_index"]))
    return key, check_value(row["correct"], key.qid)


class BaselineCache:
    """In memory: (task_type, skill_hash, prompts_version, qid, sample_index) -> outcome, indexed by question."""

    def __init__(self) -> None:
        self._outcomes: dict[BaselineKey, BaselineValue] = {}
        # (task_type, skill_hash, prompts_version, qid) -> {sample_index: outcome}: `samples` without a scan
        self._by_question: dict[tuple[str, str, str, str], dict[int, BaselineValue]] = {}
        self._retired: set[BaselineId] = set()

    def _remember(self, key: BaselineKey, correct: BaselineValue) -> None:
        self._outcomes[key] = correct
        self._by_question.setdefault((key.task_type, key.skill_hash, key.prompts_version, key.qid), {})[key.sample_index] = correct

    def __len__(self) -> int:
        return len(self._outcomes)

    def get(self, task_type: str, skill_hash: str, prompts_version: str, qid: str, sample_index: int) -> Optional[BaselineValue]:
        """The cached outcome, or None on a miss."""
        return self._outcomes.get(BaselineKey(task_type, skill_hash, prompts_version, qid, int(sample_index)))

    def samples(self, task_type: str, skill_hash: str, prompts_version: str, qid: str) -> dict[int, BaselineValue]:
        """Every cached sample of one (task_type, skill_hash, prompts_version, qid): sample_index -> outcome;
        none once that baseline is retired."""
        if (task_type, skill_hash, prompts_version) in self._retired:
            return {}
        return dict(self._by_question.get((task_type, skill_hash, prompts_version, qid), {}))

    def retired(self, task_type: str, skill_hash: str, prompts_version: str) -> bool:
        return (task_type, skill_hash, prompts_version) in self._retired

    def retire(self, task_type: str, skill_hash: str, prompts_version: str) -> None:
        """Never serve this baseline's samples again (they stay stored: the same key keeps its outcome)."""
        self._retired.add((task_type, skill_hash, prompts_version))

    def put(self, task_type: str, skill_hash: str, prompts_version: str, qid: str, sample_index: int, correct: BaselineValue) -> None:
        """Record one outcome (see `put_many`)."""
        self.put_many([(task_type, skill_hash, prompts_version, qid, sample_index, correct)])

    def novel_rows(self, rows: Iterable[BaselineRow]) -> dict[BaselineKey, BaselineValue]:
        """The rows (task_type, skill_hash, prompts_version, qid, sample_index, correct) not yet known, every row
        checked first; nothing changes.

        Infra failures are not outcomes (pass a bool, or a soft gate's float in [0, 1]). Re-putting the
        same value is a no-op; a different value for an existing key is an
        error (the same sample cannot have two outcomes).
        """
        new: dict[BaselineKey, BaselineValue] = {}
        for task_type, skill_hash, prompts_version, qid, sample_index, correct in rows:
            check_value(correct, qid)
            key = BaselineKey(task_type, skill_hash, prompts_version, qid, int(sample_index))
            known = self._outcomes.get(key, new.get(key))
            if known is not None:
                if known != correct:
                    raise ValueError(f"conflicting outcome for {key}: cached {known}, new {correct}")
                continue
            new[key] = correct
        return new

    def add(self, new: Mapping[BaselineKey, BaselineValue]) -> None:
        """Remember outcomes already checked by `novel_rows`."""
        for key, correct in new.items():
            self._remember(key, correct)

    def put_many(self, rows: Iterable[BaselineRow]) -> None:
        """Record outcomes: every row checked first (`novel_rows`), then the new ones remembered."""
        self.add(self.novel_rows(rows))
