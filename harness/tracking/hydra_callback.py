"""Hydra callback: one MLflow parent run per multirun, every job a child of it.

Registered in ``conf/hydra/default.yaml``. At ``on_multirun_start`` (in the
launching process, before any job starts) it initialises the tracking
database once — parallel first use of a new SQLite store fails — and opens
the parent run. Jobs may run in other processes (joblib/loky workers,
submitit on SLURM), so the parent run id travels two ways: the environment
variable ``HARNESS_MLFLOW_PARENT_RUN_ID`` (inherited by workers spawned after
this point) and the file ``<sweep dir>/mlflow_parent_run_id.txt`` (shared
file systems). `parent_run_id_for_job` reads them back in a job.

Importing this module is cheap: mlflow is imported only when a multirun
with tracking enabled starts.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import sys
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from hydra.types import RunMode
from omegaconf import DictConfig

from harness.tracking.store import (
    PARENT_RUN_ENV,
    PARENT_RUN_FILE,
    SWEPT_KEYS_ENV,
    SWEPT_KEYS_FILE,
    TrackingConfigError,
    TrackingDbError,
    init_tracking_db,
    resolve_tracking_uri,
)

log = logging.getLogger(__name__)


class MlflowSweepCallback(Callback):
    """Opens the sweep's parent run and closes it when the multirun ends."""

    def __init__(self) -> None:
        self._parent_run_id: str | None = None
        self._tracking_uri: str | None = None
        self._sweep_params: dict[str, str] = {}
        self._swept_keys: list[str] = []
        self._sweep_dir: Path | None = None
        self._experiment = ""

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        tracking = config.get("tracking")
        if tracking is None or not tracking.get("enabled", False):
            return
        from harness.tracking.mlflow_log import start_parent_run

        project_root = Path.cwd()
        self._tracking_uri = resolve_tracking_uri(tracking.get("tracking_uri"), project_root)
        try:
            init_tracking_db(self._tracking_uri)
        except (TrackingDbError, TrackingConfigError) as exc:  # Hydra would print a traceback for a callback's error
            if os.environ.get("HYDRA_FULL_ERROR") == "1" or "--debug" in sys.argv[1:]:
                raise
            from harness.config.secrets import print_error

            print_error(f"stages.train: {exc}", config.get("llm"))
            raise SystemExit(2) from None
        self._experiment = str(tracking.get("experiment"))
        sweep_dir = Path(str(config.hydra.sweep.dir))
        overrides = list(config.hydra.overrides.get("task") or [])
        # params: only what the sweep varies (its values); the command line and the directory are tags
        self._sweep_params = {f"sweep.{key}": value
                              for key, value in swept_values(config.hydra.sweeper.get("params"), overrides).items()}
        run_name = tracking.get("parent_run_name") or f"sweep-{sweep_dir.name}"
        tags = {"harness.kind": "sweep", "harness.sweep_dir": str(sweep_dir), "harness.sweep_overrides": " ".join(overrides),
                "mlflow.source.name": "python -m stages.train (multirun)", "mlflow.source.type": "LOCAL"}
        from harness.tracking.provenance import current_user

        user = current_user()
        if user:
            tags["mlflow.user"] = user
        commit = _git_commit(project_root)
        if commit:
            tags["mlflow.source.git.commit"] = commit
        from harness.tracking.live import process_owner

        tags.update(process_owner().tags())  # a sweep killed with its launcher is ended KILLED by the next start
        self._parent_run_id = _reattached_parent(self._tracking_uri, sweep_dir, tags) or start_parent_run(
            tracking_uri=self._tracking_uri,
            experiment=str(tracking.get("experiment")),
            project_root=project_root,
            run_name=run_name,
            tags=tags,
        )
        os.environ[PARENT_RUN_ENV] = self._parent_run_id
        self._swept_keys = sorted(swept_values(config.hydra.sweeper.get("params"), overrides))
        os.environ[SWEPT_KEYS_ENV] = json.dumps(self._swept_keys)
        self._sweep_dir = sweep_dir
        sweep_dir.mkdir(parents=True, exist_ok=True)
        (sweep_dir / PARENT_RUN_FILE).write_text(self._parent_run_id + "\n", encoding="utf-8")
        (sweep_dir / SWEPT_KEYS_FILE).write_text(json.dumps(self._swept_keys) + "\n", encoding="utf-8")
        # A job that raises ends the multirun without on_multirun_end: mark the parent FAILED then.
        atexit.register(self._finish, failed=True)
        log.info("MLflow sweep parent run %s (%s)", self._parent_run_id, run_name)

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        if self._parent_run_id is not None and self._tracking_uri is not None:
            from harness.tracking.mlflow_log import complete_swept_params, summarize_children

            complete_swept_params(self._tracking_uri, self._parent_run_id, self._swept_keys,
                                  lambda child: job_overrides(child.data.tags.get(RUN_DIR_TAG)))
            comparison = summarize_children(tracking_uri=self._tracking_uri, parent_run_id=self._parent_run_id,
                                            swept_keys=self._swept_keys, out_dir=self._sweep_dir)
            print(comparison.markdown, flush=True)  # the end of a sweep shows how its jobs compare
        self._finish(failed=False)

    def _finish(self, failed: bool) -> None:
        if self._parent_run_id is None or self._tracking_uri is None:
            return
        from harness.tracking.mlflow_log import finish_parent_run

        run_id, self._parent_run_id = self._parent_run_id, None
        os.environ.pop(PARENT_RUN_ENV, None)
        os.environ.pop(SWEPT_KEYS_ENV, None)
        from harness.tracking.mlflow_log import reap_dead_runs

        for child in reap_dead_runs(self._tracking_uri, self._experiment):  # a job whose process died
            log.info("MLflow run %s ended KILLED: its job's process is gone", child)
        finish_parent_run(tracking_uri=self._tracking_uri, run_id=run_id, params=self._sweep_params, failed=failed)


def _reattached_parent(tracking_uri: str, sweep_dir: Path, tags: dict[str, str]) -> str | None:
    """The parent run of an earlier, interrupted start of this sweep (same sweep directory), set RUNNING again
    with `tags` (its new owner): the re-run's jobs resume their runs under it, so the sweep keeps one parent.
    None when the sweep directory names no parent run that still exists, or one of another command line (other
    swept values: its params would clash), and then a new one is opened."""
    marker = sweep_dir / PARENT_RUN_FILE
    if not marker.is_file():
        return None
    previous = marker.read_text(encoding="utf-8").strip()
    from harness.tracking.mlflow_log import run_status, run_tag, set_run_status, set_tags

    if not previous or run_status(tracking_uri, previous) is None:
        return None
    if run_tag(tracking_uri, previous, "harness.sweep_overrides") != tags.get("harness.sweep_overrides"):
        return None
    set_tags(tracking_uri, previous, tags)
    set_run_status(tracking_uri, previous, "RUNNING")
    log.info("MLflow sweep parent run %s re-attached (the sweep directory %s was started before)", previous, sweep_dir)
    return previous


def swept_values(sweeper_params: Any, task_overrides: list[str]) -> dict[str, str]:
    """key -> the values actually swept: the sweeper's `params`, replaced by command-line sweeps of the same key."""
    swept = {str(k): str(v) for k, v in dict(sweeper_params or {}).items()}
    for override in task_overrides:
        key, sep, value = override.partition("=")
        if sep and (key in swept or "," in value) and not key.startswith(("hydra", "+sweep", "sweep")):
            swept[key.lstrip("+~")] = value
    return swept


RUN_DIR_TAG = "harness.run_dir"  # a stages.train job's directory, on its MLflow run (harness/pipeline/live_run.py)


def job_overrides(job_dir: str | Path | None) -> dict[str, str]:
    """key -> value of the overrides a job ran with (Hydra's ``<job dir>/.hydra/overrides.yaml``, ``+``/``~``
    stripped); {} when the job's directory or the file is not there."""
    if not job_dir:
        return {}
    path = Path(job_dir) / ".hydra" / "overrides.yaml"
    if not path.is_file():
        return {}
    from omegaconf import OmegaConf

    values = {}
    for override in OmegaConf.load(path) or []:
        key, sep, value = str(override).partition("=")
        if sep:
            values[key.lstrip("+~")] = value
    return values


def parent_run_id_for_job(hydra_config: Any | None) -> str | None:
    """The sweep's parent run id inside a job (None outside a tracked multirun)."""
    from_env = os.environ.get(PARENT_RUN_ENV)
    if from_env:
        return from_env.strip()
    if hydra_config is None or hydra_config.mode != RunMode.MULTIRUN:
        return None
    marker = Path(str(hydra_config.sweep.dir)) / PARENT_RUN_FILE
    return marker.read_text(encoding="utf-8").strip() if marker.is_file() else None


def swept_keys_for_job(hydra_config: Any | None) -> list[str] | None:
    """The config keys the sweep varies, inside one of its jobs (None outside a tracked multirun)."""
    from_env = os.environ.get(SWEPT_KEYS_ENV)
    if from_env:
        return [str(k) for k in json.loads(from_env)]
    if hydra_config is None or hydra_config.mode != RunMode.MULTIRUN:
        return None
    marker = Path(str(hydra_config.sweep.dir)) / SWEPT_KEYS_FILE
    return [str(k) for k in json.loads(marker.read_text(encoding="utf-8"))] if marker.is_file() else None


def _git_commit(root: Path) -> str | None:
    from harness.tracking.provenance import git_commit

    return git_commit(root)
