"""Where MLflow tracking data lives, and initialising it once.

The tracking URI is always absolute: a relative ``sqlite:///mlflow.db``
resolves against the process working directory, which differs under Hydra
job dirs and DVC experiment copies, silently splitting runs over several
databases. Precedence: ``tracking.tracking_uri`` > ``MLFLOW_TRACKING_URI`` >
``sqlite:///<project root>/mlflow.db`` (put a URI holding a password in the
environment, never in YAML).

Parallel first use of a new SQLite database fails (concurrent schema
migrations), so a sweep calls `init_tracking_db` once before jobs fan out.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

DEFAULT_DB_NAME = "mlflow.db"
DEFAULT_ARTIFACT_DIR = "mlruns"
PARENT_RUN_ENV = "HARNESS_MLFLOW_PARENT_RUN_ID"
PARENT_RUN_FILE = "mlflow_parent_run_id.txt"
_SCHEME_RE = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*://")


class TrackingConfigError(ValueError):
    """A tracking URI that cannot be used (names the key and what was expected)."""


def shared_project_root(path: Path) -> Path:
    """The project whose shared stores (MLflow database, LLM response cache) a process should use.

    `dvc exp run --temp` / `--queue` run stages in a copy of the repository
    under ``<project>/.dvc/tmp/exps/<tmp>/``; their results belong in the
    original project's stores, not in the throw-away copy.
    """
    resolved = Path(path).resolve()
    parts = resolved.parts
    for i in range(len(parts) - 3):
        if parts[i:i + 3] == (".dvc", "tmp", "exps"):
            return Path(*parts[:i])
    return resolved


def resolve_tracking_uri(configured: str | None, project_root: Path) -> str:
    """The absolute tracking URI for `configured` (``tracking.tracking_uri``).

    ``sqlite:///rel.db`` and bare paths are made absolute against the shared
    project root (see `shared_project_root`); server and database URIs pass
    through unchanged.
    """
    root = shared_project_root(project_root)
    uri = configured if configured not in (None, "") else os.environ.get("MLFLOW_TRACKING_URI") or None
    if uri is None:
        return f"sqlite:///{root / DEFAULT_DB_NAME}"
    if uri.startswith("sqlite:"):
        if not uri.startswith("sqlite:///"):
            raise TrackingConfigError(
                f"tracking.tracking_uri={uri!r}: expected sqlite:///<path> (three slashes, then a file path)"
            )
        path = uri[len("sqlite:///"):]
        if path in ("", ":memory:"):
            raise TrackingConfigError(f"tracking.tracking_uri={uri!r}: expected a database file path")
        db = Path(path)
        return f"sqlite:///{db if db.is_absolute() else (root / db).resolve()}"
    if uri.startswith("file:"):
        path = uri[len("file://"):] if uri.startswith("file://") else uri[len("file:"):]
        return (root / path).resolve().as_uri() if not Path(path).is_absolute() else uri
    if _SCHEME_RE.match(uri):
        return uri  # http(s)://, postgresql+psycopg2://, databricks://, ...
    # A bare directory path means MLflow's file store.
    return (root / uri).resolve().as_uri()


def artifact_location_for(tracking_uri: str, project_root: Path) -> str | None:
    """Absolute artifact root for new experiments on a local store, None for servers.

    MLflow's default for a SQLite store is ``./mlruns`` relative to the
    current directory, which would scatter artifacts across job dirs.
    """
    if tracking_uri.startswith("sqlite:///"):
        return (shared_project_root(project_root) / DEFAULT_ARTIFACT_DIR).as_uri()
    return None


def redact_uri(uri: str) -> str:
    """`uri` with any ``user:password@`` credentials masked (for logs and tags)."""
    return re.sub(r"(://[^/:@]+):[^/@]*@", r"\1:***@", uri)


def init_tracking_db(tracking_uri: str) -> None:
    """Create/migrate the tracking store once (call before parallel jobs start)."""
    if tracking_uri.startswith("sqlite:///"):
        Path(tracking_uri[len("sqlite:///"):]).parent.mkdir(parents=True, exist_ok=True)
    from mlflow.tracking import MlflowClient

    MlflowClient(tracking_uri=tracking_uri).search_experiments(max_results=1)


def ensure_experiment(client, name: str, artifact_location: str | None) -> str:
    """The id of experiment `name`, created (with `artifact_location`) when missing.

    Tolerates a concurrent creation by another job (re-reads on conflict).
    """
    experiment = client.get_experiment_by_name(name)
    if experiment is not None:
        return experiment.experiment_id
    try:
        return client.create_experiment(name, artifact_location=artifact_location)
    except Exception:  # noqa: BLE001 - another process created it first
        experiment = client.get_experiment_by_name(name)
        if experiment is None:
            raise
        return experiment.experiment_id
