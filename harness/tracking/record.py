"""What one finished training run hands to MLflow (plain data, no mlflow import).

`harness.pipeline.report` builds a `TrackedRun` from the run's state and
run log; `harness.tracking.mlflow_log.log_tracked_run` writes it. Metric
values that do not exist are None and are skipped (never logged as 0).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence


@dataclass(frozen=True)
class DatasetRef:
    """A dataset file logged as a run input (digest computed by MLflow from its content)."""

    path: Path
    name: str
    context: str = "training"


@dataclass(frozen=True)
class TrackedRun:
    run_name: str
    params: Mapping[str, str] = field(default_factory=dict)
    tags: Mapping[str, str] = field(default_factory=dict)
    # one mapping per epoch; key "epoch" (int) is the MLflow step
    epoch_metrics: Sequence[Mapping[str, Any]] = ()
    # end-of-run metrics (logged at step = last epoch)
    summary_metrics: Mapping[str, float | None] = field(default_factory=dict)
    # observation tables: name -> rows (Parquet artifact ``tables/<name>.parquet``)
    tables: Mapping[str, Sequence[Mapping[str, Any]]] = field(default_factory=dict)
    # the tables also logged as MLflow tables (``tables/<name>.json``, rendered by the UI); None = all of them
    ui_tables: Sequence[str] | None = None
    # (local file, artifact sub-directory or None)
    artifacts: Sequence[tuple[Path, str | None]] = ()
    dataset: DatasetRef | None = None

    @property
    def identity(self) -> str:
        """What makes this training run this one: sha256 of its name, params and end-of-run metrics.

        The same run logged again (a report re-run after a kill) has the same
        identity; other settings or other results give another one. Per-epoch
        rows are left out: their cache counters differ after a resume.
        """
        content = {"run_name": self.run_name, "params": dict(self.params),
                   "summary_metrics": {k: v for k, v in self.summary_metrics.items() if v is not None}}
        return hashlib.sha256(json.dumps(content, sort_keys=True, default=str).encode("utf-8")).hexdigest()

    @property
    def last_epoch(self) -> int:
        epochs = [int(m["epoch"]) for m in self.epoch_metrics]
        return max(epochs) if epochs else 0
