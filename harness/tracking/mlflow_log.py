"""Write runs to MLflow (the only module that calls MLflow's client to log).

Live training runs: `open_run` creates one RUNNING (params and tags), `log_epoch` adds an epoch as it ends,
`set_run_status` ends or resumes it, `finish_run` logs the rest and ends it FINISHED (the decisions of when are
harness/pipeline/tracking_run.py's). One-shot runs (`log_tracked_run`, e.g. Harness² rounds): one run per
finished run, found again by its identity (tag
``harness.run_identity``, see `TrackedRun.identity`): logging the same run
again returns the FINISHED run already there, and removes the RUNNING or
FAILED leftovers of an interrupted attempt before logging anew. Under a
sweep the run is a child of the sweep's parent run (tag ``mlflow.parentRunId``). Metrics, params and tags go in
batched `log_batch` calls (MLflow's per-call limits respected); the
observation tables become Parquet artifacts under ``tables/`` and MLflow
tables (``tables/<name>.json``) that the UI's artifact view renders.
"""

from __future__ import annotations

import contextlib
import json
import math
import sqlite3
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

from harness.tracking.record import TrackedRun
from harness.tracking.store import (
    artifact_location_for,
    check_tracking_db,
    ensure_experiment,
    init_tracking_db,
    sqlite_path,
    tracking_lock,
)

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
        tags = {**run.tags, IDENTITY_TAG: identity, BASE_NAME_TAG: _tag_safe(run.run_name)}
        if parent_run_id:
            tags[PARENT_TAG] = parent_run_id
        run_id = create_run_once(client, experiment_id, distinct_run_name(client, experiment_id, run.run_name), tags)
        try:
            _log_content(client, run_id, run)
        except BaseException:
            client.set_terminated(run_id, status="FAILED")
            raise
        client.set_terminated(run_id, status="FINISHED")
        return run_id


BASE_NAME_TAG = "harness.base_run_name"
CREATE_TOKEN_TAG = "harness.create_token"  # a fresh random token per created run: finds it after a lost connection
_CREATE_ATTEMPTS = 3
EPOCH_MARKER = "epoch"  # logged with every epoch's metrics (value = step = epoch): which epochs a run holds


def distinct_run_name(client, experiment_id: str, base: str) -> str:
    """`base`, or ``base #N`` (the smallest N >= 2 free) when an active run of the experiment has that base name."""
    taken = {r.info.run_name for r in client.search_runs(
        [experiment_id], f"tags.`{BASE_NAME_TAG}` = '{_tag_safe(base)}'", max_results=1000)}
    if base not in taken:
        return base
    n = 2
    while f"{base} #{n}" in taken:
        n += 1
    return f"{base} #{n}"


def create_run_once(client, experiment_id: str, run_name: str, tags: Mapping[str, str]) -> str:
    """`client.create_run`, exactly once across a lost connection; returns the run's id.

    From MLflow 3.18 the client does not resend a CreateRun request that may have reached the server (a connection
    reset or aborted before the reply), and resending it blindly could leave two runs. The run carries a fresh
    `CREATE_TOKEN_TAG`; after a lost connection the experiment is searched for that token (a read MLflow retries):
    the run found is the one created, and when there is none the request never took effect and is sent again.
    Any other error (a refused connection included: the request never left), or a connection still lost after
    `_CREATE_ATTEMPTS`, is raised."""
    token = uuid.uuid4().hex
    all_tags = {**tags, CREATE_TOKEN_TAG: token}
    for attempt in range(_CREATE_ATTEMPTS):
        try:
            return client.create_run(experiment_id, run_name=run_name, tags=all_tags).info.run_id
        except Exception as exc:  # MlflowException wrapping the connection's error
            if attempt == _CREATE_ATTEMPTS - 1 or not _is_reset(exc):
                raise
        found = client.search_runs([experiment_id], f"tags.`{CREATE_TOKEN_TAG}` = '{token}'", max_results=1)
        if found:
            return found[0].info.run_id
        time.sleep(0.2 * (attempt + 1))
    raise AssertionError("unreachable: the last attempt returns or raises")


def open_run(
    *,
    tracking_uri: str,
    experiment: str,
    project_root: Path,
    run_name: str,
    params: Mapping[str, Any],
    tags: Mapping[str, str],
    parent_run_id: str | None = None,
) -> str:
    """Create a RUNNING run holding `params` and `tags` (a live training run); returns its id.

    The name is made distinct within the experiment (`distinct_run_name`). On a local SQLite store the
    call holds the store's lock, so two first runs at once never migrate the same file.
    """
    from mlflow.entities import Param
    from mlflow.tracking import MlflowClient

    with tracking_lock(tracking_uri):
        init_tracking_db(tracking_uri, locked=True)
        client = MlflowClient(tracking_uri=tracking_uri)
        experiment_id = ensure_experiment(client, experiment, artifact_location_for(tracking_uri, project_root))
        all_tags = {**tags, BASE_NAME_TAG: _tag_safe(run_name)}
        if parent_run_id:
            all_tags[PARENT_TAG] = parent_run_id
        run_id = create_run_once(client, experiment_id, distinct_run_name(client, experiment_id, run_name), all_tags)
        for chunk in _chunks([Param(k, _param_value(v)) for k, v in sorted(params.items())], _MAX_PARAMS_PER_BATCH):
            client.log_batch(run_id, params=chunk)
        return run_id


def find_tagged(tracking_uri: str, experiment: str, key: str, value: str) -> str | None:
    """The id of the oldest run of `experiment` tagged `key` = `value` (any status), None when there is none."""
    runs = _tagged_runs(tracking_uri, experiment, key, value)
    return runs[0].info.run_id if runs else None


def _tagged_runs(tracking_uri: str, experiment: str, key: str, value: str) -> list:
    """The runs of `experiment` tagged `key` = `value`, oldest first ([] when the experiment does not exist)."""
    client = _client(tracking_uri)
    found = client.get_experiment_by_name(experiment)
    if found is None:
        return []
    return list(client.search_runs([found.experiment_id], f"tags.`{key}` = '{_tag_safe(value)}'",
                                   order_by=["attributes.start_time ASC"]))


def complete_params(tracking_uri: str, run_id: str, params: Mapping[str, Any]) -> None:
    """Log `params` on `run_id` again (a run created by a process killed while it logged them): MLflow takes
    a param logged twice with the same value."""
    from mlflow.entities import Param

    client = _client(tracking_uri)
    for chunk in _chunks([Param(k, _param_value(v)) for k, v in sorted(params.items())], _MAX_PARAMS_PER_BATCH):
        client.log_batch(run_id, params=chunk)


def _client(tracking_uri: str):
    """An MlflowClient on a store that was created before: a garbled SQLite file is named (TrackingDbError), not
    left to SQLAlchemy's traceback."""
    from mlflow.tracking import MlflowClient

    check_tracking_db(tracking_uri)
    return MlflowClient(tracking_uri=tracking_uri)


def run_status(tracking_uri: str, run_id: str) -> str | None:
    """The status of run `run_id` (RUNNING, FINISHED, FAILED, KILLED), None when it is gone or deleted."""
    from mlflow.exceptions import MlflowException

    try:
        run = _client(tracking_uri).get_run(run_id)
    except MlflowException:
        return None
    return None if run.info.lifecycle_stage == "deleted" else str(run.info.status)


def set_run_status(tracking_uri: str, run_id: str, status: str) -> None:
    """RUNNING again (a resumed run), or ended with `status` (FINISHED, FAILED, KILLED) now."""

    client = _client(tracking_uri)
    if status == "RUNNING":
        client.update_run(run_id, status="RUNNING")
    else:
        client.set_terminated(run_id, status=status)


def set_tags(tracking_uri: str, run_id: str, tags: Mapping[str, str]) -> None:
    """Set `tags` on run `run_id` (e.g. its new owner when a resume takes it over, or the parent it belongs to)."""
    client = _client(tracking_uri)
    for key, value in tags.items():
        client.set_tag(run_id, key, value)


def run_tag(tracking_uri: str, run_id: str, key: str) -> str | None:
    """Tag `key` of run `run_id` (None when the run or the tag is not there)."""
    from mlflow.exceptions import MlflowException

    try:
        return _client(tracking_uri).get_run(run_id).data.tags.get(key)
    except MlflowException:
        return None


def reap_dead_runs(tracking_uri: str, experiment: str) -> list[str]:
    """End KILLED every RUNNING run of `experiment` whose owner (tags ``harness.owner_*``, set by the process that
    trains it) ran on this host and is gone: a killed `stages.train` leaves its run RUNNING, and its next start
    may be in another run directory that never sees the old record. Returns the ids ended."""
    import socket

    from harness.tracking.live import KILLED, OWNER_TAGS, Owner, owner_alive

    client = _client(tracking_uri)
    found = client.get_experiment_by_name(experiment)
    if found is None:
        return []
    query = f"attributes.status = 'RUNNING' and tags.`{OWNER_TAGS[1]}` = '{_tag_safe(socket.gethostname())}'"
    ended = []
    for run in client.search_runs([found.experiment_id], query, max_results=5000):
        owner = Owner.from_tags(run.data.tags)
        if owner is not None and owner_alive(owner) is False:
            client.set_terminated(run.info.run_id, status=KILLED)
            ended.append(run.info.run_id)
    return ended


def logged_epochs(client, run_id: str) -> set[int]:
    return {int(m.step) for m in client.get_metric_history(run_id, EPOCH_MARKER)}


def log_epoch(tracking_uri: str, run_id: str, epoch: int, metrics: Mapping[str, Any], timestamp_ms: int) -> bool:
    """Log one epoch's metrics at step `epoch` with `timestamp_ms` (when the epoch ended); False when the
    run already holds that epoch (a stage re-run after a kill logs nothing twice).

    On a local SQLite store at the schema revision `log_epoch_sqlite` knows, the rows are written without
    importing MLflow (~3 s of CPU per ``slow@e`` otherwise); any other store goes through MLflow's client."""
    direct = log_epoch_sqlite(tracking_uri, run_id, epoch, metrics, timestamp_ms)
    if direct is not None:
        return direct
    from mlflow.entities import Metric

    client = _client(tracking_uri)
    if epoch in logged_epochs(client, run_id):
        return False
    points = [Metric(k, float(v), timestamp_ms, epoch) for k, v in sorted(metrics.items())
              if k != EPOCH_MARKER and _is_number(v)]
    points.append(Metric(EPOCH_MARKER, float(epoch), timestamp_ms, epoch))  # one batch: marker and values together
    client.log_batch(run_id, metrics=points)
    return True


# The `metrics` / `latest_metrics` tables `log_epoch_sqlite` writes, as MLflow creates them (CREATE TABLE text,
# whitespace collapsed); tests/pipeline/test_mlflow_log.py checks its rows against MLflow's own log_batch at the
# installed MLflow. Tables of another shape (whatever the alembic revision, which moves with unrelated tables):
# MLflow's client.
EPOCH_SQL_TABLES = {
    "metrics": 'CREATE TABLE "metrics" ( "key" VARCHAR(250) NOT NULL, value FLOAT NOT NULL, timestamp BIGINT NOT NULL, '
               "run_uuid VARCHAR(32) NOT NULL, step BIGINT DEFAULT '0' NOT NULL, is_nan BOOLEAN DEFAULT '0' NOT NULL, "
               'CONSTRAINT metric_pk PRIMARY KEY ("key", timestamp, step, run_uuid, value, is_nan), '
               "FOREIGN KEY(run_uuid) REFERENCES runs (run_uuid), CHECK (is_nan IN (0, 1)) )",
    "latest_metrics": 'CREATE TABLE "latest_metrics" ( "key" VARCHAR(250) NOT NULL, value FLOAT NOT NULL, '
                      "timestamp BIGINT, step BIGINT NOT NULL, is_nan BOOLEAN NOT NULL, run_uuid VARCHAR(32) NOT NULL, "
                      'CONSTRAINT latest_metric_pk PRIMARY KEY ("key", run_uuid), '
                      "FOREIGN KEY(run_uuid) REFERENCES runs (run_uuid), CHECK (is_nan IN (0, 1)) )",
}


def epoch_tables_known(connection: sqlite3.Connection) -> bool:
    """Whether the store's `metrics` / `latest_metrics` tables are the ones `log_epoch_sqlite` was checked
    against (`EPOCH_SQL_TABLES`)."""
    for table, shape in EPOCH_SQL_TABLES.items():
        row = connection.execute("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)).fetchone()
        if row is None or " ".join(str(row[0]).split()) != shape:
            return False
    return True


_MAX_FLOAT = 1.7976931348623157e308


def log_epoch_sqlite(tracking_uri: str, run_id: str, epoch: int, metrics: Mapping[str, Any], timestamp_ms: int) -> bool | None:
    """`log_epoch` on a local SQLite store in one transaction, as MLflow's SqlAlchemyStore.log_batch writes
    metrics (a row per point; `latest_metrics` updated when the point is newer by (step, timestamp, value);
    NaN stored as 0 with is_nan, infinities as the largest float). None, with nothing written, when the
    store is not a local SQLite file whose tables are `EPOCH_SQL_TABLES`, cannot be read, or the run is not an
    active run there: the caller then uses MLflow's client, which names the problem."""
    db = sqlite_path(tracking_uri)
    if db is None or not db.is_file():
        return None
    points = [(k, float(v)) for k, v in sorted(metrics.items()) if k != EPOCH_MARKER and _is_number(v)]
    points.append((EPOCH_MARKER, float(epoch)))
    try:
        with contextlib.closing(sqlite3.connect(db, timeout=60, isolation_level=None)) as connection:
            try:  # BEGIN inside: a signal handler raising right after it still rolls back (cf. harness/log.py)
                connection.execute("BEGIN IMMEDIATE")
                run = connection.execute("SELECT lifecycle_stage FROM runs WHERE run_uuid = ?", (run_id,)).fetchone()
                if run is None or run[0] != "active" or not epoch_tables_known(connection):
                    connection.execute("ROLLBACK")
                    return None
                if connection.execute("SELECT 1 FROM metrics WHERE run_uuid = ? AND key = ? AND step = ?",
                                      (run_id, EPOCH_MARKER, epoch)).fetchone():
                    connection.execute("ROLLBACK")
                    return False
                for key, value in points:
                    is_nan = math.isnan(value)
                    stored = 0.0 if is_nan else max(-_MAX_FLOAT, min(_MAX_FLOAT, value))
                    row = (key, stored, timestamp_ms, epoch, int(is_nan), run_id)
                    connection.execute("INSERT OR IGNORE INTO metrics (key, value, timestamp, step, is_nan, run_uuid) "
                                       "VALUES (?, ?, ?, ?, ?, ?)", row)
                    connection.execute(
                        "INSERT INTO latest_metrics (key, value, timestamp, step, is_nan, run_uuid) VALUES (?, ?, ?, ?, ?, ?) "
                        "ON CONFLICT (key, run_uuid) DO UPDATE SET value = excluded.value, timestamp = excluded.timestamp, "
                        "step = excluded.step, is_nan = excluded.is_nan WHERE (excluded.step, excluded.timestamp, "
                        "excluded.value) > (latest_metrics.step, latest_metrics.timestamp, latest_metrics.value)", row)
                connection.execute("COMMIT")
            except BaseException:
                if connection.in_transaction:
                    connection.execute("ROLLBACK")
                raise
    except sqlite3.DatabaseError:
        return None
    return True


def finish_run(
    tracking_uri: str, run_id: str, run: TrackedRun, *, timestamp_ms: int, epoch_times_ms: Mapping[int, int] | None = None
) -> None:
    """Log the end of a live run (epochs not logged yet, run-level metrics, `run.tags`, tables, artifacts, dataset,
    identity tag) and end it FINISHED; ended FAILED (and the error re-raised) when logging breaks."""
    from mlflow.entities import Metric, RunTag

    client = _client(tracking_uri)
    try:
        done = logged_epochs(client, run_id)
        for row in run.epoch_metrics:
            epoch = int(row["epoch"])
            if epoch not in done:
                log_epoch(tracking_uri, run_id, epoch, row, (epoch_times_ms or {}).get(epoch, timestamp_ms))
        metrics = [Metric(k, float(v), timestamp_ms, run.last_epoch)
                   for k, v in sorted(run.summary_metrics.items()) if v is not None and _is_number(v)]
        for chunk in _chunks(metrics, _MAX_METRICS_PER_BATCH):
            client.log_batch(run_id, metrics=chunk)
        # tags known only at the end (the certificate's) exist only here: the live run was created without them
        client.log_batch(run_id, tags=[RunTag(k, str(v)) for k, v in sorted(run.tags.items())])
        _log_rest(client, run_id, run)
        client.set_tag(run_id, IDENTITY_TAG, run.identity)
    except BaseException:
        client.set_terminated(run_id, status="FAILED")
        raise
    client.set_terminated(run_id, status="FINISHED")


def find_finished(tracking_uri: str, experiment: str, identity: str) -> str | None:
    """The id of a FINISHED run of `experiment` with `identity`, None when there is none."""

    finished = [r for r in _tagged_runs(tracking_uri, experiment, IDENTITY_TAG, identity) if r.info.status == "FINISHED"]
    return finished[0].info.run_id if finished else None


def _tag_safe(text: str) -> str:
    """`text` without quotes, so it can stand inside a search filter's '...' literal."""
    return text.replace("'", "").replace('"', "")


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
        if value is not None and _is_number(value)
    ]
    params = [Param(key, _param_value(value)) for key, value in sorted(run.params.items())]
    for chunk in _chunks(metrics, _MAX_METRICS_PER_BATCH):
        client.log_batch(run_id, metrics=chunk)
    for chunk in _chunks(params, _MAX_PARAMS_PER_BATCH):
        client.log_batch(run_id, params=chunk)
    _log_rest(client, run_id, run)


def _log_rest(client, run_id: str, run: TrackedRun) -> None:
    """Tables, artifacts and the dataset input of `run`."""
    _log_tables(client, run_id, run.tables, run.ui_tables)
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
        return create_run_once(client, experiment_id, run_name, tags)


def finish_parent_run(
    *, tracking_uri: str, run_id: str, params: Mapping[str, str], failed: bool = False
) -> None:
    from mlflow.entities import Param

    client = _client(tracking_uri)
    for chunk in _chunks([Param(k, _param_value(v)) for k, v in sorted(params.items())], _MAX_PARAMS_PER_BATCH):
        client.log_batch(run_id, params=chunk)
    client.set_terminated(run_id, status="FAILED" if failed else "FINISHED")


# One row per sweep child: (column header, child metric); the swept values come first.
COMPARISON_COLUMNS = (
    ("certified", "certify_certified"),
    ("certified lower bound", "certify_lower_bound"),
    ("held-out acc", "test_hard_acc"),
    ("best val acc", "best_val_acc"),
    ("accepts", "accepted"),
    ("rollouts", "rollouts"),
    ("USD", "usd"),
    ("FDR level spent", "fdr_level_spent"),
)
# the best child: the highest certified lower bound on its gain (fresh test-pool samples no selection looked at), not the
# validation accuracy every child already selected on; ties by held-out accuracy
SELECT_ON = "certify_lower_bound"
TIE_BREAK = "test_hard_acc"
SELECTION_RULE = ("best = highest certified lower bound on the gain over the starting harness (each child's delivery "
                  "certificate: fresh test-pool samples no selection looked at; with k children the chosen bound holds at "
                  "level k x certify.alpha), ties (and children with no bound) by held-out accuracy")


@dataclass(frozen=True)
class SweepComparison:
    rows: list[dict[str, Any]]  # run, run_id, status, <swept key>..., <metric>...; sorted by the swept values
    swept_keys: list[str]
    best_run_id: str | None
    markdown: str
    html: str


def summarize_children(
    *, tracking_uri: str, parent_run_id: str, swept_keys: Sequence[str] = (), out_dir: Path | None = None
) -> SweepComparison:
    """Compare a sweep's children on its parent run: the number of children, the best child (highest
    `SELECT_ON`; tags ``harness.best_child_*`` and its metrics under their own names) and the comparison table
    (``sweep/comparison.md``, ``.html`` and the UI table ``sweep/comparison.json``; also written to `out_dir`)."""
    from mlflow.entities import Metric, RunTag

    client = _client(tracking_uri)
    children = child_runs(client, parent_run_id)
    rows = []
    for child in children:
        row: dict[str, Any] = {"run": child.info.run_name, "run_id": child.info.run_id, "status": child.info.status}
        row.update({key: child.data.params.get(key) for key in swept_keys})
        row.update({metric: child.data.metrics.get(metric) for _, metric in COMPARISON_COLUMNS})
        rows.append(row)
    rows.sort(key=lambda r: (tuple(_sort_value(r.get(k)) for k in swept_keys), str(r["run"])))
    def rank(r: Mapping[str, Any]) -> tuple[float, float]:  # no certificate bound (nothing certified): below any bound
        return tuple(float(r[k]) if _is_number(r.get(k)) else -2.0 for k in (SELECT_ON, TIE_BREAK))  # type: ignore[return-value]

    scored = [r for r in rows if _is_number(r.get(SELECT_ON)) or _is_number(r.get(TIE_BREAK))]
    best = max(scored, key=rank) if scored else None  # first of equals, in table order
    now_ms = int(time.time() * 1000)
    metrics = [Metric("children", float(len(children)), now_ms, 0)]
    tags = []
    if best is not None:
        metrics += [Metric(m, float(best[m]), now_ms, 0) for _, m in COMPARISON_COLUMNS if _is_number(best.get(m))]
        tags += [RunTag("harness.best_child_run_id", str(best["run_id"])), RunTag("harness.best_child", str(best["run"])),
                 RunTag("harness.best_child_selected_on", SELECT_ON)]
        tags += [RunTag(f"harness.best.{k}", str(best.get(k))) for k in swept_keys]
    client.log_batch(parent_run_id, metrics=metrics, tags=tags)
    comparison = SweepComparison(rows, list(swept_keys), best["run_id"] if best else None,
                                 _comparison_markdown(rows, swept_keys, best), _comparison_html(rows, swept_keys, best))
    with tempfile.TemporaryDirectory(prefix="harness-sweep-") as tmp:
        target = Path(out_dir) if out_dir is not None else Path(tmp)
        target.mkdir(parents=True, exist_ok=True)
        for name, text in (("comparison.md", comparison.markdown), ("comparison.html", comparison.html)):
            (target / name).write_text(text, encoding="utf-8")
            client.log_artifact(parent_run_id, str(target / name), "sweep")
    if "sweep/comparison.json" not in {a.path for a in client.list_artifacts(parent_run_id, "sweep")}:
        import pandas as pd

        client.log_table(parent_run_id, data=ui_frame(pd.DataFrame(rows)), artifact_file="sweep/comparison.json")
    return comparison


def child_runs(client, parent_run_id: str) -> list:
    """The runs tagged as children of `parent_run_id` (a sweep's jobs)."""
    parent = client.get_run(parent_run_id)
    return list(client.search_runs([parent.info.experiment_id], f"tags.`{PARENT_TAG}` = '{parent_run_id}'",
                                   max_results=10000))


def complete_swept_params(tracking_uri: str, parent_run_id: str, swept_keys: Sequence[str],
                          job_values: Callable[[Any], Mapping[str, str]]) -> dict[str, dict[str, str]]:
    """Log, on each child of `parent_run_id`, the swept keys it has no param for, with the value
    `job_values(child)` gives (its job's overrides): a swept config group (``gate=mcnemar,gepa``) has its settings
    as ``gate.*`` params but no ``gate`` param, so the comparison's column for it would be empty. Returns
    {child run id: params logged}."""
    from mlflow.entities import Param

    client = _client(tracking_uri)
    logged: dict[str, dict[str, str]] = {}
    for child in child_runs(client, parent_run_id):
        missing = [key for key in swept_keys if key not in child.data.params]
        values = {key: value for key, value in job_values(child).items() if key in missing} if missing else {}
        if values:
            client.log_batch(child.info.run_id, params=[Param(k, _param_value(v)) for k, v in sorted(values.items())])
            logged[child.info.run_id] = values
    return logged


def _sort_value(value: Any) -> tuple[int, float, str]:
    try:
        return (0, float(value), "")
    except (TypeError, ValueError):
        return (1, 0.0, str(value))


def _cell(value: Any, metric: str | None = None) -> str:
    if value is None:
        return "–"
    if metric == "usd" and _is_number(value):
        return f"{float(value):.4f}"
    if metric in ("accepted", "rollouts") and _is_number(value):
        return str(int(float(value)))
    if _is_number(value) and isinstance(value, float):
        return f"{value:.4f}".rstrip("0").rstrip(".") if value != int(value) else str(int(value))
    return str(value)


def _comparison_cells(rows: list[dict[str, Any]], swept_keys: Sequence[str], best: Mapping[str, Any] | None):
    header = ["run", *swept_keys, *(h for h, _ in COMPARISON_COLUMNS), "status"]
    body = []
    for r in rows:
        mark = " (best)" if best is not None and r["run_id"] == best["run_id"] else ""
        body.append([f"{r['run']}{mark}", *(_cell(r.get(k)) for k in swept_keys),
                     *(_cell(r.get(m), m) for _, m in COMPARISON_COLUMNS), str(r["status"])])
    return header, body


def _comparison_markdown(rows, swept_keys, best) -> str:
    header, body = _comparison_cells(rows, swept_keys, best)
    lines = [f"Sweep of {', '.join(swept_keys) or '(no swept key)'}: {len(rows)} runs; {SELECTION_RULE}.", "",
             "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cells) + " |" for cells in body]
    return "\n".join(lines) + "\n"


def _comparison_html(rows, swept_keys, best) -> str:
    from html import escape

    header, body = _comparison_cells(rows, swept_keys, best)
    head = "".join(f"<th>{escape(h)}</th>" for h in header)
    trs = "".join("<tr>" + "".join(f"<td>{escape(c)}</td>" for c in cells) + "</tr>" for cells in body)
    return ("<!doctype html><html><head><meta charset=\"utf-8\"><title>Sweep comparison</title>"
            "<style>table{border-collapse:collapse}td,th{border:1px solid #999;padding:2px 8px;text-align:right}"
            "td:first-child{text-align:left}</style></head><body>"
            f"<p>Sweep of {escape(', '.join(swept_keys) or '(no swept key)')}: {len(rows)} runs; "
            f"{escape(SELECTION_RULE)}.</p><table><thead><tr>{head}</tr></thead><tbody>{trs}</tbody></table>"
            "</body></html>\n")


def _log_tables(client, run_id: str, tables: Mapping[str, Sequence[Mapping[str, Any]]],
                ui_tables: Sequence[str] | None = None) -> None:
    """Every table as ``tables/<name>.parquet``; those named in `ui_tables` (all when None) also as an MLflow
    table ``tables/<name>.json``, which the UI renders (keep those small: per gate, per epoch)."""
    if not tables:
        return
    import pandas as pd

    # log_table appends to an existing file: a re-log (report re-run after a kill) must not double the rows
    existing = {a.path for a in client.list_artifacts(run_id, "tables")}
    with tempfile.TemporaryDirectory(prefix="harness-tables-") as tmp:
        for name, rows in sorted(tables.items()):
            frame = pd.DataFrame([_flat_row(row) for row in rows])
            parquet_path = Path(tmp) / f"{name}.parquet"
            frame.to_parquet(parquet_path, index=False)
            client.log_artifact(run_id, str(parquet_path), "tables")
            if (ui_tables is None or name in ui_tables) and f"tables/{name}.json" not in existing:
                client.log_table(run_id, data=ui_frame(frame), artifact_file=f"tables/{name}.json")


def ui_column(name: str) -> str:
    """A column name MLflow's table view shows: it reads a dot as a path into nested fields (``gate.lambda`` is
    row["gate"]["lambda"], an empty column), so dots become underscores (``gate_lambda``)."""
    return name.replace(".", "_")


def ui_frame(frame):
    """`frame` as an MLflow UI table (``tables/<name>.json``, ``sweep/comparison.json``) shows it to a person:
    dot-free column names (`ui_column`) and floats rounded (harness/tracking/readable.py); the Parquet copies and
    the metrics keep full precision."""
    from harness.tracking.readable import rounded

    shown = frame.rename(columns={c: ui_column(str(c)) for c in frame.columns})
    for column in shown.columns:
        if shown[column].dtype.kind == "f":
            shown[column] = shown[column].map(rounded)
        elif shown[column].dtype == object:
            shown[column] = shown[column].map(lambda v: rounded(v) if isinstance(v, float) else v)
    return shown


def _log_dataset(client, run_id: str, dataset) -> None:
    import pandas as pd
    from mlflow.data.pandas_dataset import from_pandas  # where it is defined: mlflow.data re-exports it at run time only
    from mlflow.entities import DatasetInput, InputTag

    frame = pd.read_parquet(dataset.path)
    # Nested columns (choices, metadata) are made JSON strings so MLflow can hash and profile them.
    for column in frame.columns:
        if frame[column].map(lambda v: isinstance(v, (list, dict)) or hasattr(v, "tolist")).any():
            frame[column] = frame[column].map(_json_cell)
    ds = from_pandas(frame, source=local_dataset_source(dataset.path), name=dataset.name)
    entity = DatasetInput(dataset=ds._to_mlflow_entity(), tags=[InputTag("mlflow.data.context", dataset.context)])
    # Two failures are retried, both safe because MLflow's SQL store reuses a dataset and a run's link to it that
    # already exist (a repeated request changes nothing):
    # - the store looks the dataset up, then inserts it: two jobs of a parallel sweep logging the same dataset at the
    #   same moment can both insert, and the second violates the datasets table's unique key (seen on PostgreSQL).
    #   Its transaction is rolled back whole, so a retry finds the dataset and only links this run to it.
    # - a connection reset or aborted before the reply came (seen against `mlflow server` in CI). From MLflow 3.18
    #   the client no longer retries a LogInputs request once it may have reached the server.
    for attempt in range(_DATASET_ATTEMPTS):
        try:
            client.log_inputs(run_id, datasets=[entity])
            return
        except Exception as exc:  # MlflowException wrapping the driver's IntegrityError or the connection's error
            if attempt == _DATASET_ATTEMPTS - 1 or not (_is_unique_violation(exc) or _is_reset(exc)):
                raise
            time.sleep(0.1 * (attempt + 1))


def local_dataset_source(path: Path | str):
    """MLflow's ``local`` dataset source for the file `path` (a ``file://`` URI), built by its source type.

    Passing the path as a string makes MLflow resolve it against every registered source, and a local path
    matches two of them (LocalArtifactDatasetSource is registered twice): a UserWarning on every run."""
    from mlflow.data.dataset_source_registry import get_dataset_source_from_json

    return get_dataset_source_from_json(json.dumps({"uri": Path(path).resolve().as_uri()}), source_type="local")


_DATASET_ATTEMPTS = 4
_UNIQUE_VIOLATION = ("duplicate key value violates unique constraint", "UNIQUE constraint failed", "UniqueViolation")


def _is_unique_violation(exc: BaseException) -> bool:
    return any(marker in str(exc) for marker in _UNIQUE_VIOLATION)


def _is_reset(exc: BaseException) -> bool:
    """Whether `exc` is, or was raised while handling, a connection that broke once the request may have reached
    the server: reset, aborted or closed during the exchange (urllib3's "Connection aborted." ProtocolError). MLflow
    wraps the `requests` error in an MlflowException raised inside its handler, so the cause is in the context chain.
    A refused connection is not one: the request never left, and MLflow's client has already retried it."""
    import http.client

    from urllib3.exceptions import ProtocolError

    broken = (ProtocolError, http.client.RemoteDisconnected, ConnectionResetError, ConnectionAbortedError, BrokenPipeError)
    seen: BaseException | None = exc
    for _ in range(8):  # a short chain: MlflowException <- requests ConnectionError <- ProtocolError <- OSError
        if seen is None or isinstance(seen, ConnectionRefusedError):
            return False
        if isinstance(seen, broken):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


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
