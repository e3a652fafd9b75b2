"""Where MLflow tracking data lives, and initialising it once.

The tracking URI is always absolute: a relative ``sqlite:///mlflow.db``
resolves against the process working directory, which differs under Hydra
job dirs and DVC experiment copies, silently splitting runs over several
databases. Precedence: ``tracking.tracking_uri`` > ``MLFLOW_TRACKING_URI`` >
``sqlite:///<project root>/mlflow.db`` (put a URI holding a password in the
environment, never in YAML).

A new SQLite database is built and migrated in a temp file beside it and
renamed into place under an exclusive lock (``<db>.lock``), so a kill during
creation never leaves a half-migrated database, and two first runs at once
do not migrate the same file concurrently (both would fail). A sweep calls
`init_tracking_db` once before jobs fan out; every logging call calls it too
(cheap once the schema is current). A half-migrated database left by other
tools is rebuilt when it holds no runs, and named as an error when it does.
An http(s) URI (an ``mlflow server``) is checked with one request, no retries
(`check_tracking_server`), so a dead server is one line at start.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import re
import sqlite3
from collections.abc import Iterator
from pathlib import Path

from harness.atomic import current_umask, fsync_dir

DEFAULT_DB_NAME = "mlflow.db"
DEFAULT_ARTIFACT_DIR = "mlruns"
PARENT_RUN_ENV = "HARNESS_MLFLOW_PARENT_RUN_ID"
PARENT_RUN_FILE = "mlflow_parent_run_id.txt"
SWEPT_KEYS_ENV = "HARNESS_MLFLOW_SWEPT_KEYS"  # JSON list of the config keys a sweep varies (run names of its jobs)
SWEPT_KEYS_FILE = "mlflow_swept_keys.json"
SERVER_CHECK_TIMEOUT_S = 15.0  # a server busy migrating or serving a sweep still answers a search within this
_SCHEME_RE = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*://")


log = logging.getLogger(__name__)


class TrackingConfigError(ValueError):
    """A tracking URI that cannot be used (names the key and what was expected)."""


class TrackingDbError(RuntimeError):
    """The tracking database file cannot be used (names the file, the cause and what to do)."""


class TrackingServerError(TrackingDbError):
    """The tracking server of an http(s) URI cannot be reached or is not an MLflow server (names the URL)."""


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


def sqlite_path(tracking_uri: str) -> Path | None:
    """The database file of a ``sqlite:///`` URI (None for any other store)."""
    return Path(tracking_uri[len("sqlite:///"):]) if tracking_uri.startswith("sqlite:///") else None


@contextlib.contextmanager
def tracking_lock(tracking_uri: str) -> Iterator[None]:
    """Hold the exclusive lock of a local SQLite store (``<db>.lock``); a no-op for servers.

    Creation, migration and logging of one run hold it, so two processes never
    migrate the same file and a re-log never mistakes a live run for a zombie.
    """
    db = sqlite_path(tracking_uri)
    if db is None:
        yield
        return
    db.parent.mkdir(parents=True, exist_ok=True)
    lock_path = db.with_name(db.name + ".lock")
    try:
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o666)
    except OSError as error:
        raise TrackingDbError(f"{lock_path}: cannot open the tracking database lock ({error.strerror})") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def init_tracking_db(tracking_uri: str, *, locked: bool = False) -> None:
    """Create/migrate the tracking store once, atomically for SQLite (see the module docstring).

    `locked`: the caller already holds `tracking_lock`.
    """
    db = sqlite_path(tracking_uri)
    if db is None:
        check_tracking_server(tracking_uri)
        from mlflow.tracking import MlflowClient

        MlflowClient(tracking_uri=tracking_uri).search_experiments(max_results=1)
        return
    with contextlib.nullcontext() if locked else tracking_lock(tracking_uri):
        _init_sqlite(db)


def check_tracking_server(tracking_uri: str, timeout_s: float = SERVER_CHECK_TIMEOUT_S) -> None:
    """One request, no retries, to an http(s) tracking server; TrackingServerError in one line when it cannot serve.

    MLflow's client retries a refused connection with back-off for minutes and then raises a traceback; this says
    at start that nothing listens, the host is unknown, it did not answer, or it answers but is not an MLflow
    server. A credential refusal (401/403) is left to MLflow's client, which sends MLflow's credentials.
    Any other URI is not checked."""
    if not tracking_uri.startswith(("http://", "https://")):
        return
    import socket
    import urllib.error
    import urllib.request

    where = redact_uri(tracking_uri).rstrip("/")
    from urllib.parse import urlsplit

    parts = urlsplit(tracking_uri)  # user:password@ is MLflow's business (basic auth), not a host name for urllib
    base = f"{parts.scheme}://{parts.hostname}{f':{parts.port}' if parts.port else ''}{parts.path.rstrip('/')}"
    probe = f"{base}/api/2.0/mlflow/experiments/search?max_results=1"
    fix = "start the server (`mlflow server ...`, docs/pipeline.md \"Scaling out\") or fix tracking.tracking_uri"
    try:
        with urllib.request.urlopen(probe, timeout=timeout_s):
            return
    except urllib.error.HTTPError as error:
        if error.code in (401, 403):
            return
        raise TrackingServerError(
            f"tracking server {where} answered HTTP {error.code} to GET /api/2.0/mlflow/experiments/search: "
            f"expected an `mlflow server`; fix tracking.tracking_uri") from None
    except (urllib.error.URLError, OSError) as error:
        reason = getattr(error, "reason", error)
        if isinstance(reason, ConnectionRefusedError):
            raise TrackingServerError(f"nothing is listening at tracking server {where} (connection refused): {fix}") from None
        if isinstance(reason, socket.gaierror):
            raise TrackingServerError(f"cannot resolve the host of tracking server {where} ({reason.strerror}): "
                                      "fix tracking.tracking_uri") from None
        if isinstance(reason, TimeoutError):
            raise TrackingServerError(f"tracking server {where} did not answer within {timeout_s:g} s: {fix}") from None
        raise TrackingServerError(f"cannot connect to tracking server {where} ({reason}): {fix}") from None


def check_tracking_db(tracking_uri: str) -> None:
    """An existing local SQLite store must be a readable database (TrackingDbError names it otherwise)."""
    db = sqlite_path(tracking_uri)
    if db is not None and db.exists():
        _schema_state(db)


def _init_sqlite(db: Path) -> None:
    from mlflow.store.db.utils import _get_latest_schema_revision

    head = _get_latest_schema_revision()
    for stale in db.parent.glob(f".{db.name}.building-*"):  # a build killed half-way (we hold the lock)
        stale.unlink(missing_ok=True)
    if db.exists():
        revision, runs = _schema_state(db)
        if revision == head:
            return
        if runs:
            raise TrackingDbError(
                f"{db}: MLflow schema at revision {revision or 'none'} (expected {head}) in a database holding "
                f"{runs} runs; back it up, then run `mlflow db upgrade sqlite:///{db}`")
        log.warning("%s: half-migrated MLflow database (schema revision %s, expected %s) holding no runs: rebuilt",
                    db, revision or "none", head)
    _build(db)


def _schema_state(db: Path) -> tuple[str | None, int]:
    """(alembic revision or None, number of runs) of an existing database file."""
    try:
        with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as connection:
            tables = {row[0] for row in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            revision = None
            if "alembic_version" in tables:
                row = connection.execute("SELECT version_num FROM alembic_version").fetchone()
                revision = row[0] if row else None
            runs = connection.execute("SELECT count(*) FROM runs").fetchone()[0] if "runs" in tables else 0
    except sqlite3.DatabaseError as error:
        raise TrackingDbError(
            f"{db}: not a usable MLflow SQLite database ({error}); move it aside to start a new one") from None
    return revision, runs


def _build(db: Path) -> None:
    """A fresh, fully migrated database built beside `db` and renamed onto it."""
    from mlflow.store.db.utils import _initialize_tables, _verify_schema, create_sqlalchemy_engine

    tmp = db.with_name(f".{db.name}.building-{os.getpid()}")
    tmp.unlink(missing_ok=True)
    engine = create_sqlalchemy_engine(f"sqlite:///{tmp}")
    try:
        _initialize_tables(engine)
        _verify_schema(engine)
    except Exception as error:
        tmp.unlink(missing_ok=True)
        raise TrackingDbError(f"{db}: creating the MLflow database failed ({error})") from None
    finally:
        engine.dispose()
    with open(tmp, "rb+") as handle:
        os.fsync(handle.fileno())
    os.chmod(tmp, 0o666 & ~current_umask())
    os.replace(tmp, db)
    fsync_dir(db.parent)


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
