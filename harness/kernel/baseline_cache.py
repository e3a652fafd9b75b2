"""BaselineCache: baseline outcomes of gate questions, content-addressed and disk-first (seed 000 §10).

Key: (task_type, skill_hash, prompts_version, qid, sample_index). The same
key means the same baseline harness asked the same question with the same
sample index, so the response cache would return the same answer: reusing
it costs nothing and changes nothing. Storage is an append-only JSONL file;
every `put` / `put_many` is written, flushed and fsynced BEFORE the in-memory map is
updated (no window where memory knows what the disk does not). Opening
reloads the file; a torn last line (crash during a write) is cut off,
a corrupt line elsewhere is an error naming file and line.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Optional

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class BaselineKey:
    task_type: str
    skill_hash: str
    prompts_version: str
    qid: str
    sample_index: int


class BaselineCache:
    def __init__(self, path: str | Path):
        self.path = Path(path)
        self._outcomes: dict[BaselineKey, bool] = {}
        # (task_type, skill_hash, prompts_version, qid) -> {sample_index: outcome}: `samples` without a scan
        self._by_question: dict[tuple[str, str, str, str], dict[int, bool]] = {}
        self._load()

    def _remember(self, key: BaselineKey, correct: bool) -> None:
        self._outcomes[key] = correct
        self._by_question.setdefault((key.task_type, key.skill_hash, key.prompts_version, key.qid), {})[key.sample_index] = correct

    def _load(self) -> None:
        if not self.path.exists():
            return
        lines = self.path.read_text(encoding="utf-8").split("\n")
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                key = BaselineKey(str(row["task_type"]), str(row["skill_hash"]), str(row["prompts_version"]), str(row["qid"]), int(row["sample_index"]))
                correct = row["correct"]
                if not isinstance(correct, bool):
                    raise ValueError(f"correct must be a bool, got {correct!r}")
            except (ValueError, KeyError, TypeError) as error:
                if number == len(lines):  # torn final write (no trailing newline): the put never returned
                    os.truncate(self.path, self.path.stat().st_size - len(line.encode("utf-8")))
                    log.warning("%s:%d: cut off a torn last line (%d bytes, a write interrupted by a crash)",
                                self.path, number, len(line.encode("utf-8")))
                    break
                raise ValueError(f"{self.path}:{number}: corrupt baseline cache line ({error})") from None
            self._remember(key, correct)

    def __len__(self) -> int:
        return len(self._outcomes)

    def get(self, task_type: str, skill_hash: str, prompts_version: str, qid: str, sample_index: int) -> Optional[bool]:
        """The cached outcome, or None on a miss."""
        return self._outcomes.get(BaselineKey(task_type, skill_hash, prompts_version, qid, int(sample_index)))

    def samples(self, task_type: str, skill_hash: str, prompts_version: str, qid: str) -> dict[int, bool]:
        """Every cached sample of one (task_type, skill_hash, prompts_version, qid): sample_index -> outcome."""
        return dict(self._by_question.get((task_type, skill_hash, prompts_version, qid), {}))

    def put(self, task_type: str, skill_hash: str, prompts_version: str, qid: str, sample_index: int, correct: bool) -> None:
        """Record one outcome: disk first (append + fsync), then memory (see `put_many`)."""
        self.put_many([(task_type, skill_hash, prompts_version, qid, sample_index, correct)])

    def put_many(self, rows: Iterable[tuple[str, str, str, str, int, bool]]) -> None:
        """Record outcomes (task_type, skill_hash, prompts_version, qid, sample_index, correct): every row is
        checked first, the new ones are appended and fsynced once, then they enter memory.

        Infra failures are not outcomes (pass bool only). Re-putting the
        same value is a no-op; a different value for an existing key is an
        error (the same sample cannot have two outcomes).
        """
        new: dict[BaselineKey, bool] = {}
        for task_type, skill_hash, prompts_version, qid, sample_index, correct in rows:
            if not isinstance(correct, bool):
                raise ValueError(f"BaselineCache.put({qid!r}): correct must be a bool (infra failures are not cached), got {correct!r}")
            key = BaselineKey(task_type, skill_hash, prompts_version, qid, int(sample_index))
            known = self._outcomes.get(key, new.get(key))
            if known is not None:
                if known != correct:
                    raise ValueError(f"{self.path}: conflicting outcome for {key}: cached {known}, new {correct}")
                continue
            new[key] = correct
        if not new:
            return
        lines = "".join(json.dumps({**key.__dict__, "correct": correct}, sort_keys=True) + "\n" for key, correct in new.items())
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a", encoding="utf-8") as handle:
            handle.write(lines)
            handle.flush()
            os.fsync(handle.fileno())
        for key, correct in new.items():
            self._remember(key, correct)
