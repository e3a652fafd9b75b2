"""Execution telemetry of pipeline stages: LLM cache hits/misses and wall time per stage.

These numbers describe *an execution*, not the result (a resumed run has
more cache hits than an uninterrupted one), so they never go into DVC
outputs: each stage execution overwrites one small JSON file in a directory
outside DVC's view (under ``.cache/pipeline/``), and only MLflow shows them.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from harness.atomic import atomic_write_json
from harness.kernel.schedule import full_schedule

_EPOCH = re.compile(r"@e(\d+)")


@dataclass(frozen=True)
class StageTelemetry:
    stage: str  # e.g. "rollout@e1.s2"
    cache_hits: int
    cache_misses: int
    usd_saved: float
    seconds: float

    @property
    def epoch(self) -> int | None:
        match = _EPOCH.search(self.stage)
        return int(match.group(1)) if match else None


def telemetry_dir(root: Path, state_dir: str) -> Path:
    """One directory per state root (DVC's ``state`` and each sweep job's state are kept apart)."""
    key = re.sub(r"[^A-Za-z0-9_.-]+", "_", str(state_dir).strip("/")) or "state"
    return Path(root) / ".cache" / "pipeline" / key


def cache_stats_of(ctx: Any) -> tuple[int, int, float]:
    """(hits, misses, usd_saved) of the context's response cache so far, zeros when no LLM was used."""
    cache = getattr(ctx, "_cache", None)  # the StageContext opens its ResponseCache lazily
    if cache is None:
        return 0, 0, 0.0
    stats = cache.stats
    return int(stats.hits), int(stats.misses), float(stats.usd_saved)


def record_stage(directory: Path, telemetry: StageTelemetry) -> Path:
    return atomic_write_json(Path(directory) / f"{_file_name(telemetry.stage)}.json", asdict(telemetry))


def read_stage(directory: Path, stage: str) -> StageTelemetry | None:
    path = Path(directory) / f"{_file_name(stage)}.json"
    if not path.is_file():
        return None
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return StageTelemetry(**data)


def per_epoch_cache(directory: Path, stages: list[str]) -> dict[int, tuple[int, int]]:
    """epoch -> (hits, misses) summed over the named stages' latest executions."""
    out: dict[int, tuple[int, int]] = {}
    for stage in stages:
        t = read_stage(directory, stage)
        if t is None or t.epoch is None:
            continue
        hits, misses = out.get(t.epoch, (0, 0))
        out[t.epoch] = (hits + t.cache_hits, misses + t.cache_misses)
    return out


def stage_names(epochs: int, steps_per_epoch: int) -> list[str]:
    """Every stage name of the unrolled loop (matches the names the entry points record)."""
    return [item.name for item in full_schedule(epochs, steps_per_epoch)]


def _file_name(stage: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", stage)
