"""File I/O of the kernel's data: the ladder file and the pools file.

The kernel (harness/kernel) holds these as pure dataclasses and in-memory
structures; this module is the only place that reads or writes them:

- `save_gate_pools` / `load_gate_pools` / `load_state_gate_pools`: the
  ladder file, fingerprint-checked against the current validation pool.
- `build_or_load_pools` / `read_pools`: the frozen three-pool split.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Optional

from harness.atomic import atomic_write_json
from harness.inputs import read_json
from harness.kernel.ladder import GatePools, pool_fingerprint
from harness.kernel.pools import PoolParams, Pools, QuestionLike, check_frozen_pools, split_pools
from harness.loop.state import GATE_POOLS, StateError

log = logging.getLogger(__name__)

POOL_NAMES = ("test", "validation", "diagnosis")


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
