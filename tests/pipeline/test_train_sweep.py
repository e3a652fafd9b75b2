"""`python -m stages.train +sweep=gate_lambda` with the joblib launcher (2 parallel jobs) against a
fresh MLflow SQLite store: one parent run, one child per job, per-epoch metrics, the five tables."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.pipeline.support import BIN, TEST_OVERRIDES, make_project, run

pytestmark = pytest.mark.slow

SECRET = "sk-test-0123456789abcdef"  # in the jobs' environment; must never reach MLflow
TABLES = ("dual_metric_eval", "shadow_gate", "holdout_eval", "quadrant_pair", "gate_evidence")


def test_gate_lambda_sweep_logs_parent_and_children(tmp_path: Path) -> None:
    from mlflow.tracking import MlflowClient

    project = make_project(tmp_path / "project")
    db = tmp_path / "tracking" / "mlflow.db"  # new database: the callback must create it before the fan-out
    overrides = [o for o in TEST_OVERRIDES if o != "tracking=none"]
    run([str(BIN / "python"), "-m", "stages.train", "+sweep=gate_lambda", *overrides, "gate.lambda=0.5,6.0",
         "hydra/launcher=joblib", "hydra.launcher.n_jobs=2", f"tracking.tracking_uri=sqlite:///{db}",
         "hydra.sweep.dir=multirun/test"], project, extra_env={"OPENAI_API_KEY": SECRET})

    client = MlflowClient(tracking_uri=f"sqlite:///{db}")
    experiment = client.get_experiment_by_name("harness-trainer")
    runs = client.search_runs([experiment.experiment_id])
    parents = [r for r in runs if r.data.tags.get("harness.kind") == "sweep"]
    assert len(parents) == 1
    parent = parents[0]
    assert parent.info.status == "FINISHED"
    assert parent.data.params["sweep.gate.lambda"] == "0.5,6.0"  # the values actually swept (command line wins)
    assert parent.data.metrics["children"] == 2 and "max_best_val_acc" in parent.data.metrics
    assert (project / "multirun/test/mlflow_parent_run_id.txt").read_text().strip() == parent.info.run_id
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id]
    assert len(children) == 2 and len(runs) == 3
    assert sorted(c.data.params["gate.lambda"] for c in children) == ["0.5", "6.0"]
    for child in children:
        assert child.info.status == "FINISHED"
        assert SECRET not in json.dumps(child.data.params) and SECRET not in json.dumps(child.data.tags)
        history = client.get_metric_history(child.info.run_id, "val_hard_acc")
        assert [m.step for m in history] == [1]  # step = epoch
        for key in ("best_val_acc", "accepted", "rejected", "probation", "rollouts", "usd", "cache_hits", "test_hard_acc",
                    "total_accepted", "total_rollouts"):
            assert key in child.data.metrics, key
        assert [m.step for m in client.get_metric_history(child.info.run_id, "accepted")] == [1]  # no total mixed in
        assert child.data.tags["mlflow.source.git.commit"]
        artifacts = {a.path for a in client.list_artifacts(child.info.run_id, "tables")}
        for table in TABLES:
            assert f"tables/{table}.parquet" in artifacts and f"tables/{table}.json" in artifacts, table
        plots = {a.path for a in client.list_artifacts(child.info.run_id, "plots")}
        assert {"plots/accuracy_per_epoch.svg", "plots/gate_evidence_paths.svg"} <= plots
        assert child.inputs.dataset_inputs and child.inputs.dataset_inputs[0].dataset.digest
    # each job wrote its own state: no shared paths between jobs
    job_dirs = sorted(p for p in (project / "multirun/test").iterdir() if p.is_dir() and p.name.isdigit())
    assert len(job_dirs) == 2
    assert all((job / "state/holdout/DONE.json").is_file() and (job / "reports/metrics.json").is_file() for job in job_dirs)
