"""Write a finished `TrackedRun` to MLflow (the only module that logs runs).

One run per training run, found again by its identity (tag
``harness.run_identity``, see `TrackedRun.identity`): logging the same run
again returns the FINISHED run already there, and removes the RUNNING or
FAILED leftovers of an interrupted attempt before logging anew. Under a
sweep the run is a child of the sweep's parent run (tag ``mlflow.parentRunId``). Metrics, params and tags go in
batched `log_batch` calls (MLflow's per-call limits respected); the
observation tables become Parquet artifacts under ``tables/`` and MLflow
tables (``tables/<name>.json``) that the UI's artifact view renders.
"""

from __future__ import annotations

import json
import math
import tempfile
import time
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from harness.tracking.record import TrackedRun
from harness.tracking.store import artifact_location_for, ensure_experiment, init_tracking_db, tracking_lock

_MAX_METRICS_PER_BATCH = 1000
_MAX_PARAMS_PER_BATCH = 100
_MAX_TAGS_PER_BATCH = 100
_MAX_PARAM_CHARS = 6000
PARENT_TAG = "mlflow.parentRunId"
IDENTITY_TAG = "harness.run_identity"


def log_tracked_run(
    run: TrackedRun,
    *,
    tracking_uri: str,
    experiment: str,
    project_root: Path,
    parent_run_id: str | None = None,
) -> str:
    """The MLflow run holding everything in `run` (created unless already logged); returns its run id.

    Idempotent: a FINISHED run with the same identity is returned as it is
    (re-parented when `parent_run_id` changed); runs of an interrupted attempt
    are ended KILLED and deleted first. The run ends FINISHED, or FAILED (and
    the error re-raised) when logging breaks half-way, so a half-logged run is
    never shown as complete. On a local SQLite store the whole call holds the
    store's lock.
    """
    from mlflow.tracking import MlflowClient

    identity = run.identity
    with tracking_lock(tracking_uri):
        init_tracking_db(tracking_uri, locked=True)
        client = MlflowClient(tracking_uri=tracking_uri)
        experiment_id = ensure_experiment(client, experiment, artifact_location_for(tracking_uri, project_root))
        done = _finished_or_cleared(client, experiment_id, identity)
        if done is not None:
            if parent_run_id and done.data.tags.get(PARENT_TAG) != parent_run_id:
                client.set_tag(done.info.run_id, PARENT_TAG, parent_run_id)
            return done.info.run_id
        tags = {**run.tags, IDENTITY_TAG: identity}
        if parent_run_id:
            tags[PARENT_TAG] = parent_run_id
        created = client.create_run(experiment_id, run_name=run.run_name, tags=tags)
        run_id = created.info.run_id
        try:
            _log_content(client, run_id, run)
        except BaseException:
            client.set_terminated(run_id, status="FAILED")
            raise
        client.set_terminated(run_id, status="FINISHED")
        return run_id


def _finished_or_cleared(client, experiment_id: str, identity: str):
    """The oldest FINISHED run with `identity`, or None after ending and deleting every other run with it."""
    runs = client.search_runs([experiment_id], f"tags.`{IDENTITY_TAG}` = '{identity}'", order_by=["attributes.start_time ASC"])
    finished = [r for r in runs if r.info.status == "FINISHED"]
    if finished:
        return finished[0]
    for leftover in runs:
        if leftover.info.status == "RUNNING":
            client.set_terminated(leftover.info.run_id, status="KILLED")
        client.delete_run(leftover.info.run_id)
    return None


def _log_content(client, run_id: str, run: TrackedRun) -> None:
    from mlflow.entities import Metric, Param

    now_ms = int(time.time() * 1000)
    metrics = [
        Metric(key, float(value), now_ms, int(row["epoch"]))
        for row in run.epoch_metrics
        for key, value in row.items()
        if key != "epoch" and _is_number(value)
    ]
    metrics += [
        Metric(key, float(value), now_ms, run.last_epoch)
        for key, value in run.summary_metrics.items()
        if _is_number(value)
    ]
    params = [Param(key, _param_value(value)) for key, value in sorted(run.params.items())]
    for chunk in _chunks(metrics, _MAX_METRICS_PER_BATCH):
        client.log_batch(run_id, metrics=chunk)
    for chunk in _chunks(params, _MAX_PARAMS_PER_BATCH):
        client.log_batch(run_id, params=chunk)
    _log_tables(client, run_id, run.tables)
    for local_path, artifact_dir in run.artifacts:
        if Path(local_path).is_dir():
            client.log_artifacts(run_id, str(local_path), artifact_dir or Path(local_path).name)
        else:
            client.log_artifact(run_id, str(local_path), artifact_dir)
    if run.dataset is not None:
        _log_dataset(client, run_id, run.dataset)


def start_parent_run(
    *, tracking_uri: str, experiment: str, project_root: Path, run_name: str, tags: Mapping[str, str]
) -> str:
    """Open a sweep's parent run (left RUNNING until `finish_parent_run`); returns its id."""
    from mlflow.tracking import MlflowClient

    with tracking_lock(tracking_uri):
        init_tracking_db(tracking_uri, locked=True)
        client = MlflowClient(tracking_uri=tracking_uri)
        experiment_id = ensure_experiment(client, experiment, artifact_location_for(tracking_uri, project_root))
        return client.create_run(experiment_id, run_name=run_name, tags=dict(tags)).info.run_id


def finish_parent_run(
    *, tracking_uri: str, run_id: str, params: Mapping[str, str], failed: bool = False
) -> None:
    from mlflow.entities import Param
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=tracking_uri)
    for chunk in _chunks([Param(k, _param_value(v)) for k, v in sorted(params.items())], _MAX_PARAMS_PER_BATCH):
        client.log_batch(run_id, params=chunk)
    client.set_terminated(run_id, status="FAILED" if failed else "FINISHED")


SWEEP_SUMMARY_METRICS = ("best_val_acc", "test_hard_acc")


def summarize_children(*, tracking_uri: str, parent_run_id: str) -> dict[str, float]:
    """Log on the parent run the number of children and the best child value of each summary metric."""
    from mlflow.entities import Metric, RunTag
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=tracking_uri)
    parent = client.get_run(parent_run_id)
    children = client.search_runs([parent.info.experiment_id], f"tags.`{PARENT_TAG}` = '{parent_run_id}'")
    now_ms = int(time.time() * 1000)
    summary: dict[str, float] = {"children": float(len(children))}
    tags = []
    for key in SWEEP_SUMMARY_METRICS:
        scored = [(c.data.metrics[key], c) for c in children if key in c.data.metrics]
        if scored:
            value, best = max(scored, key=lambda pair: pair[0])
            summary[f"max_{key}"] = value
            tags.append(RunTag(f"harness.best_{key}_run", best.info.run_id))
    client.log_batch(parent_run_id, metrics=[Metric(k, v, now_ms, 0) for k, v in summary.items()], tags=tags)
    return summary


def _log_tables(client, run_id: str, tables: Mapping[str, Sequence[Mapping[str, Any]]]) -> None:
    if not tables:
        return
    import pandas as pd

    with tempfile.TemporaryDirectory(prefix="harness-tables-") as tmp:
        for name, rows in sorted(tables.items()):
            frame = pd.DataFrame([_flat_row(row) for row in rows])
            parquet_path = Path(tmp) / f"{name}.parquet"
            frame.to_parquet(parquet_path, index=False)
            client.log_artifact(run_id, str(parquet_path), "tables")
            client.log_table(run_id, data=frame, artifact_file=f"tables/{name}.json")


def _log_dataset(client, run_id: str, dataset) -> None:
    import mlflow.data
    import pandas as pd
    from mlflow.entities import DatasetInput, InputTag

    frame = pd.read_parquet(dataset.path)
    # Nested columns (choices, metadata) are made JSON strings so MLflow can hash and profile them.
    for column in frame.columns:
        if frame[column].map(lambda v: isinstance(v, (list, dict)) or hasattr(v, "tolist")).any():
            frame[column] = frame[column].map(_json_cell)
    ds = mlflow.data.from_pandas(frame, source=str(Path(dataset.path).resolve()), name=dataset.name)
    entity = DatasetInput(dataset=ds._to_mlflow_entity(), tags=[InputTag("mlflow.data.context", dataset.context)])
    client.log_inputs(run_id, datasets=[entity])


def _flat_row(row: Mapping[str, Any]) -> dict[str, Any]:
    return {key: _json_cell(value) if isinstance(value, (dict, list, tuple)) else value for key, value in row.items()}


def _json_cell(value: Any) -> Any:
    if hasattr(value, "tolist"):
        value = value.tolist()
    if isinstance(value, (dict, list, tuple)):
        return json.dumps(value, sort_keys=True, default=str)
    return value


def _is_number(value: Any) -> bool:
    if value is None:
        return False
    try:
        return not math.isnan(float(value))
    except (TypeError, ValueError):
        return False


def _param_value(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= _MAX_PARAM_CHARS else text[: _MAX_PARAM_CHARS - 3] + "..."


def _chunks(items: Sequence, size: int) -> Iterable[Sequence]:
    for start in range(0, len(items), size):
        yield items[start : start + size]
