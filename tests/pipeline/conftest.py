"""Fixtures of the pipeline tests: a fresh MLflow store per test (never shared).

Creating an MLflow SQLite database runs its schema migrations (seconds), so
one migrated template is built per session and each test gets its own copy.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def _mlflow_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from harness.tracking.store import init_tracking_db

    db = tmp_path_factory.mktemp("mlflow-template") / "mlflow.db"
    init_tracking_db(f"sqlite:///{db}")
    return db


@pytest.fixture
def mlflow_db(_mlflow_template: Path, tmp_path: Path) -> Path:
    """A migrated, empty MLflow SQLite database of this test only: <tmp_path>/mlflow.db."""
    target = tmp_path / "mlflow.db"
    shutil.copy2(_mlflow_template, target)
    return target
