"""File I/O of the kernel's data: the baseline cache file, the ladder file and the pools file.

The kernel (harness/kernel) holds these as pure dataclasses and in-memory
structures; this module is the only place that reads or writes them:

- `DurableBaselineCache`: a kernel `BaselineCache` backed by an append-only
  JSONL file. Every `put_many` is appended, flushed and fsynced BEFORE the
  in-memory map changes (no window where memory knows what the disk does
  not). Opening reloads the file; a torn last line (a crash during a write)
  is cut off, a corrupt line elsewhere is an error naming file and line.
- `save_gate_pools` / `load_gate_pools` / `load_state_gate_pools`: the
  ladder file, fingerprint-checked against the current validation pool.
- `build_or_load_pools` / `read_pools`: the frozen three-pool split.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Optional

from harness.atomic import atomic_write_json
from harness.inputs import read_json
from harness.kernel.baseline_cache import BaselineCache, BaselineRow, decode_retired, decode_row, encode_retired, encode_row
from harness.kernel.ladder import GatePools, pool_fingerprint
from harness.kernel.pools import PoolParams, Pools, QuestionLike, check_frozen_pools, split_pools
from harness.loop.state import GATE_POOLS, StateError

log = logging.getLogger(__name__)

POOL_NAMES = ("test", "validation", "diagnosis")


class DurableBaselineCache(BaselineCache):
    """The kernel BaselineCache, loaded from and appended to `path` (disk first, then memory)."""

    def __init__(self, path: str | Path):
        super().__init__()
        self.path = Path(path)
        self._load()

    def _load(self) -> None:
        if not self.path.exists():
            return
        lines = self.path.read_text(encoding="utf-8").split("\n")
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                retired = decode_retired(line)
                if retired is not None:
                    super().retire(*retired)
                    continue
                key, correct = decode_row(line)
            except (ValueError, KeyError, TypeError) as error:
                if number == len(lines):  # torn final write (no trailing newline): the put never returned
                    os.truncate(self.path, self.path.stat().st_size - len(line.encode("utf-8")))
                    log.warning("%s:%d: cut off a torn last line (%d bytes, a write interrupted by a crash)",
                                self.path, number, len(line.encode("utf-8")))
                    break
                raise ValueError(f"{self.path}:{number}: corrupt baseline cache line ({error})") from None
            self.add({key: correct})

    def put_many(self, rows: Iterable[BaselineRow]) -> None:
        """Check every row (kernel `novel_rows`), append the new ones and fsync once, then remember them."""
        try:
            new = self.novel_rows(rows)
        except ValueError as error:
            raise ValueError(f"{self.path}: {error}") from None
        if not new:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a", encoding="utf-8") as handle:
            handle.write("".join(encode_row(key, correct) + "\n" for key, correct in new.items()))
            handle.flush()
            os.fsync(handle.fileno())
        self.add(new)

    def retire(self, task_type: str, skill_hash: str, prompts_version: str) -> None:
        """Append the retire row and fsync, then retire in memory (a no-op when already retired)."""
        if self.retired(task_type, skill_hash, prompts_version):
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a", encoding="utf-8") as handle:
            handle.write(encode_retired((task_type, skill_hash, prompts_version)) + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        super().retire(task_type, skill_hash, prompts_version)


def create_baseline_cache_file(path: str | Path) -> None:
    """An empty baseline cache file (a fresh state carries one; later gate stages append to their copy)."""
    Path(path).write_text("", encoding="utf-8")


# ---------------------------------------------------------------- ladder file


def save_gate_pools(path: str | Path, pools: GatePools) -> None:
    atomic_write_json(path, pools.to_json())


def load_gate_pools(path: str | Path, *, expected_fingerprint: str) -> GatePools:
    """Load and check the pool composition; a mismatch raises RuntimeError (never a silent rebuild)."""
    data = read_json(path, "gate pools file")
    pools = GatePools.from_json(data, source=str(path))
    if pools.fingerprint != expected_fingerprint:
        raise RuntimeError(
            f"{path}: gate pools fingerprint {pools.fingerprint[:12]} does not match the current validation pool "
            f"({expected_fingerprint[:12]}); the pools changed under a running experiment - delete the file deliberately to rebuild"
        )
    return pools


# ---------------------------------------------------------------- pools file


def build_or_load_pools(path: str | Path, questions: Iterable[QuestionLike], params: PoolParams, *,
                        correctness: Optional[Mapping[str, bool]] = None) -> Pools:
    """Reuse `path` when it exists (frozen: params are not re-applied), else split and write it atomically.

    A frozen file whose qids are not all among `questions` is an error (the
    questions changed under the experiment).
    """
    target = Path(path)
    items = list(questions)
    if target.exists():
        pools = Pools.from_json(read_json(target, "pools file"), source=str(target))
        check_frozen_pools(pools, items, source=str(target))
        return pools
    pools = split_pools(
        items,
        test_size=params.test_size,
        val_size=params.val_size,
        diagnosis_size=params.diagnosis_size,
        eval_min_per_class=params.eval_min_per_class,
        seed=params.seed,
        val_correct_ratio=params.val_correct_ratio,
        correctness=correctness,
    )
    atomic_write_json(target, pools.to_json() | {"params": params.to_json()})
    return pools


def read_pools(path: str | Path) -> dict[str, list[str]]:
    """The three qid lists of a pools file; a missing list is an error naming the file and the key."""
    data = read_json(path, "pools file")
    for key in POOL_NAMES:
        if key not in data:
            raise StateError(f"{path}: pools file has no {key!r} list")
    return data


def load_state_gate_pools(state_dir: str | Path, validation_by_type: Mapping[str, Sequence[str]]) -> GatePools:
    """The ladder file a state directory carries, checked against the current validation pool."""
    return load_gate_pools(Path(state_dir) / GATE_POOLS, expected_fingerprint=pool_fingerprint(validation_by_type))
