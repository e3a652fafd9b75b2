"""MLflow on a PostgreSQL server (issue 15 item 1, for teams): a real Debian PostgreSQL cluster started for the
test on 127.0.0.1, and a 2-job joblib sweep of `stages.train` logging its parent and children to it."""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.pipeline.support import BIN, TEST_OVERRIDES, make_project, run

pytestmark = pytest.mark.slow


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def postgres_uri() -> Iterator[str]:
    binaries = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    assert binaries, "Debian's postgresql is not installed (.ci/run installs it: apt-get install postgresql)"
    bindir = Path(binaries[-1]).parent
    data = Path(tempfile.mkdtemp(prefix="harness-pg-"))  # outside pytest's root-only tmp tree: the server runs as postgres
    os.chmod(data, 0o755)
    shutil.chown(data, "postgres", "postgres")
    as_postgres = ["runuser", "-u", "postgres", "--"]
    port = _free_port()
    subprocess.run([*as_postgres, str(bindir / "initdb"), "-D", str(data / "db"), "-A", "trust", "-U", "postgres"],
                   check=True, capture_output=True, timeout=120)
    subprocess.run([*as_postgres, str(bindir / "pg_ctl"), "-D", str(data / "db"), "-w", "-l", str(data / "log"),
                    "-o", f"-p {port} -k {data} -c listen_addresses=127.0.0.1", "start"],
                   check=True, capture_output=True, timeout=120)
    try:
        subprocess.run([*as_postgres, str(bindir / "createdb"), "-h", "127.0.0.1", "-p", str(port), "mlflow"],
                       check=True, capture_output=True, timeout=60)
        yield f"postgresql+psycopg2://postgres@127.0.0.1:{port}/mlflow"
    finally:
        subprocess.run([*as_postgres, str(bindir / "pg_ctl"), "-D", str(data / "db"), "-m", "fast", "-w", "stop"],
                       capture_output=True, timeout=120)
        shutil.rmtree(data, ignore_errors=True)


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
