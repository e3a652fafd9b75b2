"""A TrackedRun lands in MLflow: per-epoch metrics at step=epoch, params, tags, parent link,
observation tables as Parquet + MLflow tables, artifacts and the dataset input (real SQLite store)."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pandas as pd
import pytest

from harness.tracking.mlflow_log import PARENT_TAG, finish_parent_run, log_tracked_run, start_parent_run
from harness.tracking.record import DatasetRef, TrackedRun

pytestmark = pytest.mark.slow  # imports mlflow (seconds)


def test_run_is_logged_completely(mlflow_db: Path, tmp_path: Path) -> None:
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{mlflow_db}"
    questions = tmp_path / "questions.parquet"
    pd.DataFrame({"qid": ["q1", "q2"], "task_type": ["a", "b"], "question": ["x", "y"], "answer": ["1", "2"],
                  "choices": [["1", "2"], ["1", "2"]]}).to_parquet(questions)
    report = tmp_path / "report.md"
    report.write_text("# report\n")
    parent = start_parent_run(tracking_uri=uri, experiment="exp", project_root=tmp_path, run_name="sweep", tags={})
    run = TrackedRun(
        run_name="child",
        params={"gate.lambda": "3.0", "llm.model": "sim"},
        tags={"mlflow.source.git.commit": "0" * 40},
        epoch_metrics=[{"epoch": 1, "val_hard_acc": 0.5, "val_soft_score": None, "accepted": 1},
                       {"epoch": 2, "val_hard_acc": 0.625, "val_soft_score": None, "accepted": 0}],
        summary_metrics={"test_hard_acc": 0.6, "val_mixed_score": None},
        tables={"gate_evidence": [{"gate_run_id": "g", "seq": 1, "log_e": 0.3, "meta": {"k": 1}}], "shadow_gate": []},
        artifacts=[(report, "report")],
        dataset=DatasetRef(questions, name="sim-questions"),
    )
    with warnings.catch_warnings(record=True) as caught:  # every warning, however often MLflow already raised it
        warnings.simplefilter("always")
        run_id = log_tracked_run(run, tracking_uri=uri, experiment="exp", project_root=tmp_path, parent_run_id=parent)
    assert [str(w.message) for w in caught if issubclass(w.category, UserWarning)] == []  # e.g. "dataset source ..."
    finish_parent_run(tracking_uri=uri, run_id=parent, params={"sweep.gate.lambda": "2.0,3.0"})

    client = MlflowClient(tracking_uri=uri)
    logged = client.get_run(run_id)
    assert logged.info.status == "FINISHED"
    assert logged.data.tags[PARENT_TAG] == parent
    assert logged.data.params == {"gate.lambda": "3.0", "llm.model": "sim"}
    history = client.get_metric_history(run_id, "val_hard_acc")
    assert sorted((m.step, m.value) for m in history) == [(1, 0.5), (2, 0.625)]
    assert "val_soft_score" not in logged.data.metrics and "val_mixed_score" not in logged.data.metrics  # None is not 0
    assert logged.data.metrics["test_hard_acc"] == 0.6
    assert client.get_metric_history(run_id, "test_hard_acc")[0].step == 2  # summary at the last epoch
    artifacts = {a.path for a in client.list_artifacts(run_id, "tables")}
    assert {"tables/gate_evidence.parquet", "tables/gate_evidence.json", "tables/shadow_gate.parquet"} <= artifacts
    local = client.download_artifacts(run_id, "tables/gate_evidence.parquet", str(tmp_path / "dl"))
    frame = pd.read_parquet(local)
    assert frame.to_dict("records") == [{"gate_run_id": "g", "seq": 1, "log_e": 0.3, "meta": json.dumps({"k": 1})}]
    table = json.loads(Path(client.download_artifacts(run_id, "tables/gate_evidence.json", str(tmp_path / "dl2"))).read_text())
    assert table["columns"] == ["gate_run_id", "seq", "log_e", "meta"]
    assert [a.path for a in client.list_artifacts(run_id, "report")] == ["report/report.md"]
    inputs = logged.inputs.dataset_inputs
    assert len(inputs) == 1 and inputs[0].dataset.name == "sim-questions" and inputs[0].dataset.digest
    assert (inputs[0].dataset.source_type, json.loads(inputs[0].dataset.source)) == (
        "local", {"uri": questions.resolve().as_uri()})  # a local file, named as one
    assert client.get_run(parent).info.status == "FINISHED"
    assert client.get_run(parent).data.params == {"sweep.gate.lambda": "2.0,3.0"}
    # artifacts sit under the project root, not the process working directory
    assert client.get_experiment_by_name("exp").artifact_location == (tmp_path.resolve() / "mlruns").as_uri()


def test_epoch_rows_written_without_mlflow_match_mlflows_own(mlflow_db: Path) -> None:
    """`log_epoch` on a SQLite store writes (log_epoch_sqlite, no MLflow import) exactly the rows MLflow's own
    log_batch writes for the same points, at the installed MLflow; an epoch logged again adds nothing; tables of
    another shape or a deleted run fall back to MLflow's client. A store whose alembic revision moved for other
    tables (MLflow 3.18's MCP migration) keeps the fast path: its tables are the same."""
    import contextlib
    import math
    import sqlite3

    from mlflow.entities import Metric
    from mlflow.tracking import MlflowClient

    from harness.tracking.mlflow_log import EPOCH_MARKER, epoch_tables_known, log_epoch, log_epoch_sqlite

    uri = f"sqlite:///{mlflow_db}"
    client = MlflowClient(tracking_uri=uri)
    experiment = client.create_experiment("epochs")
    by_mlflow, direct = (client.create_run(experiment).info.run_id for _ in range(2))
    with contextlib.closing(sqlite3.connect(mlflow_db)) as connection:
        known = epoch_tables_known(connection)
    epochs = [(1, {"val_hard_acc": 0.5, "accepted": 2, "usd": float("nan"), "gain": float("inf"), "note": "x"}, 1000),
              (2, {"val_hard_acc": 0.25, "accepted": 0, "usd": 0.125, "gain": -float("inf")}, 900),  # clock went back
              (3, {"val_hard_acc": 0.75, "accepted": 0}, 900)]
    for epoch, metrics, at in epochs:
        points = [Metric(k, float(v), at, epoch) for k, v in metrics.items()  # what log_epoch keeps: numbers, not NaN
                  if not isinstance(v, str) and not math.isnan(v)]
        client.log_batch(by_mlflow, metrics=[*points, Metric(EPOCH_MARKER, float(epoch), at, epoch)])
        assert log_epoch_sqlite(uri, direct, epoch, metrics, at) is (True if known else None)
        if not known:  # MLflow's tables changed shape: the fast path stands aside and MLflow's client writes
            assert log_epoch(uri, direct, epoch, metrics, at) is True
    assert log_epoch(uri, direct, 2, {"val_hard_acc": 0.9}, 5000) is False  # already logged: nothing written

    def rows(table: str, run_id: str) -> list[tuple]:
        with sqlite3.connect(mlflow_db) as connection:
            return sorted(connection.execute(
                f"SELECT key, value, timestamp, step, is_nan FROM {table} WHERE run_uuid = ?", (run_id,)).fetchall())

    assert rows("metrics", direct) == rows("metrics", by_mlflow) and len(rows("metrics", direct)) == 4 + 5 + 3
    assert rows("latest_metrics", direct) == rows("latest_metrics", by_mlflow)
    assert client.get_run(direct).data.metrics == client.get_run(by_mlflow).data.metrics
    assert sorted((m.step, m.value) for m in client.get_metric_history(direct, "val_hard_acc")) == [(1, 0.5), (2, 0.25), (3, 0.75)]

    client.delete_run(direct)
    assert log_epoch_sqlite(uri, direct, 4, {"accepted": 1}, 2000) is None  # MLflow's client raises its own error
    with sqlite3.connect(mlflow_db) as connection:  # the alembic revision alone does not decide
        connection.execute("UPDATE alembic_version SET version_num = 'ffffffffffff'")
    assert log_epoch_sqlite(uri, by_mlflow, 4, {"accepted": 1}, 2000) is (True if known else None)
    with sqlite3.connect(mlflow_db) as connection:  # a column MLflow would fill and we do not: not our table
        connection.execute("ALTER TABLE latest_metrics ADD COLUMN dataset TEXT")
    assert log_epoch_sqlite(uri, by_mlflow, 5, {"accepted": 1}, 3000) is None
    assert len(rows("metrics", by_mlflow)) == 12 + (2 if known else 0)


def test_finishing_a_live_run_sets_the_tracked_runs_tags(mlflow_db: Path) -> None:
    """A training run is live (created at its first stage) and finished by `finish_run`: the tags known only at the
    end, the certificate's (`harness.certified`, `harness.delivered`), must land on it as they do through
    `log_tracked_run`."""
    from mlflow.tracking import MlflowClient

    from harness.tracking.mlflow_log import finish_run

    uri = f"sqlite:///{mlflow_db}"
    client = MlflowClient(tracking_uri=uri)
    run_id = client.create_run(client.create_experiment("live"), tags={"harness.kind": "training"}).info.run_id
    run = TrackedRun(run_name="live", tags={"harness.certified": "true", "harness.delivered": "final"},
                     epoch_metrics=[{"epoch": 1, "val_hard_acc": 0.5}], summary_metrics={"test_hard_acc": 0.6})
    finish_run(uri, run_id, run, timestamp_ms=1000)
    finished = client.get_run(run_id)
    assert finished.info.status == "FINISHED"
    assert finished.data.tags["harness.kind"] == "training"
    assert finished.data.tags["harness.certified"] == "true" and finished.data.tags["harness.delivered"] == "final"
