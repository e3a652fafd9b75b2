"""MLflow on a PostgreSQL server (issue 15 item 1, for teams): a real Debian PostgreSQL cluster started for the
test on 127.0.0.1, and a 2-job joblib sweep of `stages.train` logging its parent and children to it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.pipeline.support import BIN, TEST_OVERRIDES, make_project, run
from tests.support.mlflow_server import postgres_cluster

pytestmark = pytest.mark.slow


@pytest.fixture
def postgres_uri() -> Iterator[str]:
    with postgres_cluster() as uri:
        yield uri


def test_a_two_job_sweep_logs_parent_and_children_to_postgresql(tmp_path: Path, postgres_uri: str) -> None:
    from mlflow.tracking import MlflowClient

    project = make_project(tmp_path / "project")
    overrides = [o for o in TEST_OVERRIDES if o != "tracking=none"]
    run([str(BIN / "python"), "-m", "stages.train", "+sweep=gate_lambda", *overrides, "gate.lambda=0.5,6.0",
         "hydra/launcher=joblib", "hydra.launcher.n_jobs=2", f"tracking.tracking_uri={postgres_uri}",
         "hydra.sweep.dir=multirun/pg"], project)
    client = MlflowClient(tracking_uri=postgres_uri)
    experiment = client.get_experiment_by_name("harness-trainer")
    runs = client.search_runs([experiment.experiment_id])
    parents = [r for r in runs if r.data.tags.get("harness.kind") == "sweep"]
    assert len(parents) == 1 and parents[0].info.status == "FINISHED"
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parents[0].info.run_id]
    assert len(children) == 2 and len(runs) == 3
    assert sorted(c.data.params["gate.lambda"] for c in children) == ["0.5", "6.0"]
    for child in children:
        assert child.info.status == "FINISHED"
        assert [m.step for m in client.get_metric_history(child.info.run_id, "val_hard_acc")] == [1]


def test_parallel_jobs_logging_the_same_dataset_at_once_all_get_it(tmp_path: Path, postgres_uri: str) -> None:
    """Two jobs of a parallel sweep log the same questions file as their input at the same moment (CI hit this in
    the sweep above: UniqueViolation on the datasets table). Every run must end up with the dataset, none may fail."""
    import threading

    import pandas as pd
    from mlflow.tracking import MlflowClient

    from harness.tracking.mlflow_log import _log_dataset
    from harness.tracking.record import DatasetRef

    client = MlflowClient(tracking_uri=postgres_uri)
    experiment_id = client.create_experiment("dataset-race")
    jobs, rounds = 6, 6
    errors: list[BaseException] = []
    run_ids: list[str] = []
    for r in range(rounds):
        path = tmp_path / f"questions_{r}.parquet"
        pd.DataFrame({"qid": [f"q{r}_{i}" for i in range(20)], "answer": list("ABCD") * 5}).to_parquet(path)
        ref = DatasetRef(path=path, name="sim-questions", context="validation")
        runs = [client.create_run(experiment_id).info.run_id for _ in range(jobs)]
        run_ids += runs
        barrier = threading.Barrier(jobs)

        def job(run_id: str) -> None:
            try:
                barrier.wait()
                _log_dataset(MlflowClient(tracking_uri=postgres_uri), run_id, ref)
            except BaseException as exc:  # noqa: BLE001 - collected and asserted below
                errors.append(exc)

        threads = [threading.Thread(target=job, args=(rid,)) for rid in runs]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
    assert not errors, [str(e)[:300] for e in errors]
    for run_id in run_ids:
        inputs = client.get_run(run_id).inputs.dataset_inputs
        assert [d.dataset.name for d in inputs] == ["sim-questions"], run_id
