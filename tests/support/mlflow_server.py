"""A real PostgreSQL cluster and a real `mlflow server` on 127.0.0.1, for tests and benchmarks.

`postgres_cluster()` starts a throw-away cluster with Debian's initdb/pg_ctl (run as the `postgres` user, trust
authentication, TCP on 127.0.0.1 only) and yields the SQLAlchemy URI of its `mlflow` database.
`mlflow_server()` starts such a cluster and `mlflow server --backend-store-uri <it> --serve-artifacts
--artifacts-destination <a directory only the server writes>` on a free port, waits until `/health` answers, and
yields an `MlflowServer` (url, backend URI, artifact dir, log file). Both stop what they started when the block
ends, also on failure. The pytest fixtures `postgres_uri` and `tracking_server` wrap them; a test module uses
them by importing the names (pytest collects fixtures imported into a module).
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from harness.llm.local_server import free_port

_AS_POSTGRES = ("runuser", "-u", "postgres", "--")
START_TIMEOUT_S = 180.0  # the server migrates the empty PostgreSQL schema before it answers (~10-30 s on 2 cores)


@dataclass(frozen=True)
class MlflowServer:
    """A running tracking server: `url` for clients, `artifacts_dir` is where it (and only it) stores artifacts."""

    url: str
    backend_uri: str
    artifacts_dir: Path
    log_path: Path

    def log_tail(self, chars: int = 4000) -> str:
        """The end of the server's output (for assertion messages)."""
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return ""


def _postgres_bindir() -> Path:
    binaries = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if not binaries:
        raise RuntimeError("Debian's postgresql is not installed (.ci/run installs it: apt-get install postgresql)")
    return Path(binaries[-1]).parent


@contextlib.contextmanager
def postgres_cluster(database: str = "mlflow") -> Iterator[str]:
    """A temporary PostgreSQL cluster on 127.0.0.1; yields `postgresql+psycopg2://postgres@127.0.0.1:<port>/<database>`."""
    bindir = _postgres_bindir()
    data = Path(tempfile.mkdtemp(prefix="harness-pg-"))  # outside pytest's root-only tmp tree: the server runs as postgres
    os.chmod(data, 0o755)
    shutil.chown(data, "postgres", "postgres")
    port = free_port()
    pg_ctl = [*_AS_POSTGRES, str(bindir / "pg_ctl"), "-D", str(data / "db")]
    try:
        subprocess.run([*_AS_POSTGRES, str(bindir / "initdb"), "-D", str(data / "db"), "-A", "trust", "-U", "postgres"],
                       check=True, capture_output=True, timeout=120)
        subprocess.run([*pg_ctl, "-w", "-l", str(data / "log"),
                        "-o", f"-p {port} -k {data} -c listen_addresses=127.0.0.1", "start"],
                       check=True, capture_output=True, timeout=120)
        subprocess.run([*_AS_POSTGRES, str(bindir / "createdb"), "-h", "127.0.0.1", "-p", str(port), database],
                       check=True, capture_output=True, timeout=60)
        yield f"postgresql+psycopg2://postgres@127.0.0.1:{port}/{database}"
    finally:
        if (data / "db" / "postmaster.pid").exists():
            subprocess.run([*pg_ctl, "-m", "fast", "-w", "stop"], capture_output=True, timeout=120)
        shutil.rmtree(data, ignore_errors=True)


def _server_env() -> dict[str, str]:
    """The server's environment: no MLFLOW_*/HARNESS_* settings leaking from the shell or the test process."""
    out = {k: v for k, v in os.environ.items() if not k.startswith(("MLFLOW_", "HARNESS_", "HT__"))}
    out["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{out.get('PATH', '')}"
    return out


def wait_until_healthy(url: str, process: subprocess.Popen, timeout_s: float, log_path: Path) -> None:
    """Poll `<url>/health` until it answers 200; RuntimeError (with the server's log) if it exits or times out."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"mlflow server exited ({process.returncode}) before answering:\n"
                               f"{log_path.read_text(errors='replace')[-4000:]}")
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=2) as reply:
                if reply.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.5)
    raise RuntimeError(f"mlflow server at {url} did not answer /health within {timeout_s:.0f} s:\n"
                       f"{log_path.read_text(errors='replace')[-4000:]}")


def _stop(process: subprocess.Popen) -> None:
    """Stop the server's process group (uvicorn workers included): SIGTERM, then SIGKILL after 20 s."""
    if process.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=20)


@contextlib.contextmanager
def mlflow_server(backend_uri: str | None = None, *, workers: int = 1) -> Iterator[MlflowServer]:
    """A PostgreSQL-backed `mlflow server` serving artifacts from its own temp directory, on a free port.

    `backend_uri`: an existing database to use instead of a fresh `postgres_cluster()`.
    """
    with contextlib.ExitStack() as stack:
        backend = backend_uri or stack.enter_context(postgres_cluster())
        home = Path(tempfile.mkdtemp(prefix="harness-mlflow-server-"))
        stack.callback(shutil.rmtree, home, True)
        artifacts = home / "artifacts"
        artifacts.mkdir()
        log_path = home / "server.log"
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        with open(log_path, "wb") as log_file:
            process = subprocess.Popen(
                [str(Path(sys.executable).parent / "mlflow"), "server", "--backend-store-uri", backend,
                 "--serve-artifacts", "--artifacts-destination", str(artifacts),
                 "--host", "127.0.0.1", "--port", str(port), "--workers", str(workers)],
                cwd=home, env=_server_env(), stdout=log_file, stderr=subprocess.STDOUT, start_new_session=True)
        stack.callback(_stop, process)
        wait_until_healthy(url, process, START_TIMEOUT_S, log_path)
        yield MlflowServer(url=url, backend_uri=backend, artifacts_dir=artifacts, log_path=log_path)


@pytest.fixture
def postgres_uri() -> Iterator[str]:
    """The SQLAlchemy URI of a fresh PostgreSQL database on 127.0.0.1 (see `postgres_cluster`)."""
    with postgres_cluster() as uri:
        yield uri


@pytest.fixture
def tracking_server() -> Iterator[MlflowServer]:
    """A fresh PostgreSQL-backed `mlflow server` with served artifacts (see `mlflow_server`)."""
    with mlflow_server() as server:
        yield server
