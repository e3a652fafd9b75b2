"""Tracking cannot break training: SIGKILL at random moments of MLflow database creation and run logging, then
a re-log, leaves exactly one FINISHED run per training run and no RUNNING zombie (real SQLite store, real kills).

HT_MLFLOW_KILL_TRIALS sets the number of kill trials (default 10, the quick form CI runs);
HT_MLFLOW_KILL_REPORT names a JSON file that receives the figures.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.tracking.mlflow_log import IDENTITY_TAG, log_tracked_run
from harness.tracking.record import TrackedRun
from harness.tracking.store import TrackingDbError, init_tracking_db

pytestmark = pytest.mark.slow  # imports mlflow, starts MLflow-logging subprocesses

ROOT = Path(__file__).resolve().parents[2]
EXPERIMENT = "kills"

# A child that logs one run (113 params: two param batches, like a real training run). It prints "ready" once
# mlflow, alembic and pandas are imported, so the parent's kill lands in database creation or logging, not in
# interpreter start-up.
CHILD = r"""
import sys, time
from pathlib import Path
import mlflow.entities, mlflow.tracking, pandas, pyarrow
from mlflow.store.db.utils import _get_latest_schema_revision
from harness.tracking.mlflow_log import log_tracked_run
_get_latest_schema_revision()  # imports alembic's scripts: start-up, not creation
sys.path.insert(0, sys.argv[3])
from test_mlflow_kills import tracked_run
db, name = Path(sys.argv[1]), sys.argv[2]
print("ready", flush=True)
start = time.monotonic()
log_tracked_run(tracked_run(name, db.parent), tracking_uri=f"sqlite:///{db}", experiment="kills", project_root=db.parent)
print(f"done {time.monotonic() - start:.3f}", flush=True)
"""


def tracked_run(name: str, workdir: Path) -> TrackedRun:
    artifact = workdir / f"{name}-report.md"
    artifact.write_text(f"# report of {name}\n", encoding="utf-8")
    return TrackedRun(
        run_name=name,
        params={f"group{i // 10}.key{i}": str(i) for i in range(113)},
        tags={"harness.kind": "training"},
        epoch_metrics=[{"epoch": e, "val_hard_acc": 0.5 + e / 10, "accepted": e} for e in (1, 2, 3)],
        summary_metrics={"test_hard_acc": 0.7, "best_val_acc": 0.8},
        tables={"gate_evidence": [{"seq": i, "log_e": i / 4} for i in range(5)]},
        artifacts=[(artifact, "report")],
    )


def _child(db: Path, name: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", CHILD, str(db), name, str(Path(__file__).parent)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)


def _wait_ready(child: subprocess.Popen) -> None:
    line = child.stdout.readline()
    assert line.strip() == "ready", child.stderr.read()


def _runs(db: Path) -> list[tuple[str, str, str, int]]:
    """(name, status, lifecycle stage, number of params) of every run in the file, deleted ones included."""
    with sqlite3.connect(db) as connection:
        return connection.execute(
            "SELECT r.name, r.status, r.lifecycle_stage, (SELECT count(*) FROM params p WHERE p.run_uuid = r.run_uuid) "
            "FROM runs r ORDER BY r.start_time").fetchall()


def _state_after_kill(db: Path) -> str:
    if not db.exists():
        return "no database yet"
    try:
        runs = _runs(db)
    except sqlite3.DatabaseError:
        return "database without runs table"
    return ",".join(sorted(status for _, status, _, _ in runs)) or "database, no run"


@pytest.fixture(scope="module")
def template_db(tmp_path_factory) -> Path:
    db = tmp_path_factory.mktemp("template") / "mlflow.db"
    init_tracking_db(f"sqlite:///{db}")
    return db


def test_kill_at_random_points_then_relog_leaves_one_finished_run(tmp_path: Path, template_db: Path) -> None:
    trials = int(os.environ.get("HT_MLFLOW_KILL_TRIALS", "10"))
    rng = random.Random(int(os.environ.get("HT_MLFLOW_KILL_SEED", "15")))
    # calibration: how long creation + logging (fresh database) and logging alone take on this machine now
    spans = {}
    for kind in ("fresh", "existing"):
        (tmp_path / kind).mkdir()
        if kind == "existing":
            shutil.copy2(template_db, tmp_path / kind / "mlflow.db")
        calib = _child(tmp_path / kind / "mlflow.db", "calibration")
        _wait_ready(calib)
        out, err = calib.communicate(timeout=600)
        assert calib.returncode == 0, err
        spans[kind] = float(out.split()[-1])
    figures = {"trials": trials, "span_s": spans, "survived": 0, "duplicates": 0, "zombies": 0, "killed_in": {}}
    for trial in range(trials):
        workdir = tmp_path / f"trial{trial}"
        workdir.mkdir()
        db = workdir / "mlflow.db"
        kind = "existing" if trial % 2 else "fresh"  # odd trials: the database exists, so the kill lands in logging
        if kind == "existing":
            shutil.copy2(template_db, db)
        child = _child(db, "run")
        _wait_ready(child)
        time.sleep(rng.uniform(0, spans[kind]))
        child.send_signal(signal.SIGKILL)
        child.communicate(timeout=60)
        state = _state_after_kill(db)
        figures["killed_in"][state] = figures["killed_in"].get(state, 0) + 1
        # the re-run (what `dvc repro` does next): must finish with exactly one complete FINISHED run
        run = tracked_run("run", workdir)
        run_id = log_tracked_run(run, tracking_uri=f"sqlite:///{db}", experiment=EXPERIMENT, project_root=workdir)
        runs = _runs(db)
        active = [r for r in runs if r[2] == "active"]
        figures["duplicates"] += max(0, sum(1 for r in active if r[1] == "FINISHED") - 1)
        figures["zombies"] += sum(1 for r in runs if r[1] == "RUNNING")
        ok = active == [("run", "FINISHED", "active", 113)]
        with sqlite3.connect(db) as connection:
            tagged = connection.execute("SELECT run_uuid FROM tags WHERE key = ? AND value = ?", (IDENTITY_TAG, run.identity)).fetchall()
        ok = ok and run_id in {t[0] for t in tagged}
        figures["survived"] += ok
        assert ok, (trial, state, runs)
    report = os.environ.get("HT_MLFLOW_KILL_REPORT")
    if report:
        Path(report).write_text(json.dumps(figures, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    print(json.dumps(figures, sort_keys=True))
    assert figures["survived"] == trials and figures["duplicates"] == 0 and figures["zombies"] == 0


def test_two_first_runs_at_once_both_log(tmp_path: Path) -> None:
    db = tmp_path / "mlflow.db"
    children = [_child(db, name) for name in ("first", "second")]
    for child in children:
        out, err = child.communicate(timeout=600)
        assert child.returncode == 0, err
    assert sorted(r[:3] for r in _runs(db)) == [("first", "FINISHED", "active"), ("second", "FINISHED", "active")]


def test_relogging_is_idempotent_and_clears_an_interrupted_attempt(tmp_path: Path, template_db: Path) -> None:
    from mlflow.tracking import MlflowClient

    db = tmp_path / "mlflow.db"
    shutil.copy2(template_db, db)
    uri = f"sqlite:///{db}"
    run = tracked_run("run", tmp_path)
    client = MlflowClient(tracking_uri=uri)
    experiment_id = client.create_experiment(EXPERIMENT)
    # what a kill after create_run leaves: a RUNNING run with the identity and part of the params
    zombie = client.create_run(experiment_id, run_name="run", tags={IDENTITY_TAG: run.identity}).info.run_id
    client.log_param(zombie, "group0.key0", "0")
    first = log_tracked_run(run, tracking_uri=uri, experiment=EXPERIMENT, project_root=tmp_path)
    again = log_tracked_run(run, tracking_uri=uri, experiment=EXPERIMENT, project_root=tmp_path, parent_run_id="p" * 32)
    assert again == first != zombie
    assert client.get_run(zombie).info.status == "KILLED" and client.get_run(zombie).info.lifecycle_stage == "deleted"
    assert client.get_run(first).data.tags["mlflow.parentRunId"] == "p" * 32  # re-parented, not logged twice
    other = TrackedRun(**{**run.__dict__, "summary_metrics": {"test_hard_acc": 0.1}})  # other results: another run
    assert log_tracked_run(other, tracking_uri=uri, experiment=EXPERIMENT, project_root=tmp_path) != first
    assert sorted(r[1] for r in _runs(db) if r[2] == "active") == ["FINISHED", "FINISHED"]


def test_half_migrated_database_without_runs_is_rebuilt(tmp_path: Path, caplog) -> None:
    from mlflow.store.db.utils import _get_latest_schema_revision, create_sqlalchemy_engine
    from mlflow.store.tracking.dbmodels.initial_models import Base as InitialBase

    db = tmp_path / "mlflow.db"
    engine = create_sqlalchemy_engine(f"sqlite:///{db}")
    InitialBase.metadata.create_all(engine)  # the first half of MLflow's own creation: tables, no migrations
    engine.dispose()
    with caplog.at_level("WARNING", logger="harness.tracking.store"):
        init_tracking_db(f"sqlite:///{db}")
    assert "half-migrated MLflow database (schema revision none" in caplog.text and str(db) in caplog.text
    with sqlite3.connect(db) as connection:
        assert connection.execute("SELECT version_num FROM alembic_version").fetchone()[0] == _get_latest_schema_revision()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mlflow.db", "mlflow.db.lock"]


def test_unusable_databases_are_named(tmp_path: Path, template_db: Path) -> None:
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(TrackingDbError, match=f"{garbage}: not a usable MLflow SQLite database"):
        init_tracking_db(f"sqlite:///{garbage}")
    old = tmp_path / "old.db"
    shutil.copy2(template_db, old)
    log_tracked_run(tracked_run("kept", tmp_path), tracking_uri=f"sqlite:///{old}", experiment=EXPERIMENT, project_root=tmp_path)
    with sqlite3.connect(old) as connection:
        connection.execute("UPDATE alembic_version SET version_num = 'ff01da956556'")
    with pytest.raises(TrackingDbError, match=r"old\.db: MLflow schema at revision ff01da956556 .* holding 1 runs; back it up"):
        init_tracking_db(f"sqlite:///{old}")
