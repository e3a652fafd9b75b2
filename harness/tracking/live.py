"""Which MLflow run a training run logs into, kept in the pipeline state (no mlflow import).

A training run's MLflow run is created when its first loop stage starts and
every later stage, epoch and resume logs into that same run. Its id lives in
``<telemetry dir>/mlflow_run.json`` (``.cache/pipeline/<state key>/``, one per
state root, outside DVC's outputs like the stage telemetry): a `dvc repro`
after a kill, or `python -m stages.train` resumed in the same run dir, finds
it there and continues it instead of starting a duplicate.

The file holds the run id, the redacted tracking URI (never a password), the
experiment, the run's settings key (sha256 of its params: other settings are
another training run) and the status last set (RUNNING, FINISHED, FAILED,
KILLED). Reading it is cheap, so stages that find a RUNNING run of their
settings import nothing from MLflow.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import signal
import threading
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from harness.atomic import atomic_write_json

LIVE_RUN_FILE = "mlflow_run.json"
RUNNING, FINISHED, FAILED, KILLED = "RUNNING", "FINISHED", "FAILED", "KILLED"
# written just before the MLflow run is created; its run_id is the nonce the new run is tagged with
# (NONCE_TAG), so a kill between the creation and the record is found again, never duplicated
PENDING = "PENDING"
STATUSES = (RUNNING, FINISHED, FAILED, KILLED, PENDING)
NONCE_TAG = "harness.live_nonce"


class LiveRunFileError(ValueError):
    """The live-run file cannot be read (names the file and what to do)."""


@dataclass(frozen=True)
class LiveRun:
    run_id: str
    tracking_uri: str  # redacted (harness.tracking.store.redact_uri): a key, never used to connect
    experiment: str
    settings_key: str
    status: str
    run_name: str

    def same_run(self, tracking_uri: str, experiment: str, settings_key: str) -> bool:
        """True when this file's run belongs to a training run of `settings_key` in that store and experiment."""
        return (self.tracking_uri, self.experiment, self.settings_key) == (tracking_uri, experiment, settings_key)

    def with_status(self, status: str) -> "LiveRun":
        return replace(self, status=status)


def settings_key(params: Mapping[str, Any]) -> str:
    """sha256 of a run's params (its settings): the same settings give the same key."""
    return hashlib.sha256(json.dumps(dict(params), sort_keys=True, default=str).encode("utf-8")).hexdigest()


def live_run_path(directory: Path) -> Path:
    return Path(directory) / LIVE_RUN_FILE


def read_live_run(directory: Path) -> LiveRun | None:
    path = live_run_path(directory)
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        run = LiveRun(**{k: str(data[k]) for k in LiveRun.__dataclass_fields__})
    except (ValueError, KeyError, TypeError) as error:
        raise LiveRunFileError(f"{path}: not a live MLflow run record ({error}); delete it to start a new MLflow run")
    if run.status not in STATUSES:
        raise LiveRunFileError(f"{path}: status {run.status!r} is not one of {', '.join(STATUSES)}; delete the file")
    return run


def write_live_run(directory: Path, run: LiveRun) -> Path:
    return atomic_write_json(live_run_path(directory), asdict(run))


class RunKilled(BaseException):
    """SIGTERM arrived while a tracked run was training (raised in the main thread; the run is ended KILLED)."""


@contextlib.contextmanager
def sigterm_raises() -> Iterator[None]:
    """Inside the block, the first SIGTERM raises `RunKilled` in the main thread (so `finally` blocks run and the
    run can be marked KILLED) and later ones are ignored, so a second SIGTERM cannot cut the marking short
    (a killed process group under `dvc repro` gets one from the kill and one when DVC dies,
    harness/pipeline/repro_progress.end_with_dvc); mark inside the block. The previous handler is restored
    after. A no-op outside the main thread."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum, frame):  # noqa: ARG001 - signal handler signature
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        raise RunKilled(f"signal {signum}")

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
