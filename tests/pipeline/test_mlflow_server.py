"""Every job logs to one `mlflow server` (issue 30 items 2 and 3): PostgreSQL backend, artifacts served by the server.

A 2-job sweep (train=tiny, hydra/launcher=processes) and a single `stages.train` run log to a real server
(tests/support/mlflow_server.py); a client whose working directory and temp directory are neither the project's
nor the server's reads the parent, the children, their metrics and artifacts back over HTTP, and the server's
artifact directory is the only place the artifacts were written. The two concurrent jobs share the project's
response cache: nothing is lost (the single run re-doing one job's work pays no call) and nothing is stored twice.
A dead server is one line at start (exit 2), for a run and for a sweep; the one-request check itself
(`check_tracking_server`) is tested against small real HTTP servers that are not MLflow. A connection reset after the
server stored a run's dataset input (a TCP proxy in front of the server resets it) costs nothing: the input is logged
once; a reset around creating a run leaves one run, whether the server saw the request or not.
"""

from __future__ import annotations

import contextlib
import filecmp
import select
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from harness.llm.local_server import free_port
from harness.tracking.store import TrackingServerError, check_tracking_server
from tests.pipeline.support import BIN, TEST_OVERRIDES, cache_counts, env, make_project, run
from tests.support.mlflow_server import MlflowServer, mlflow_server

TRACKED = [o for o in TEST_OVERRIDES if o != "tracking=none"]
# what every training run must have put on the server (the report, the certificate, the tables)
EXPECTED_ARTIFACTS = ("report/report.md", "report/metrics.json", "delivered/certificate.json",
                      "tables/gate_summary.json", "tables/holdout_eval.parquet")


@pytest.fixture(scope="module")
def server() -> Iterator[MlflowServer]:
    with mlflow_server() as running:
        yield running


def _artifact_files(client, run_id: str, path: str | None = None) -> dict[str, int]:
    """Every artifact file of a run, listed through the server (path -> size)."""
    files: dict[str, int] = {}
    for info in client.list_artifacts(run_id, path):
        if info.is_dir:
            files.update(_artifact_files(client, run_id, info.path))
        else:
            files[info.path] = int(info.file_size)
    return files


@pytest.mark.slow
def test_a_sweep_and_a_run_log_everything_through_one_server(tmp_path: Path, server: MlflowServer,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    from mlflow.tracking import MlflowClient

    project = make_project(tmp_path / "project")
    with _server_log_on_failure(server):
        run([str(BIN / "python"), "-m", "stages.train", "+sweep=gate_lambda", *TRACKED, "gate.lambda=0.5,6.0",
             "hydra/launcher=processes", "hydra.launcher.n_jobs=2", f"tracking.tracking_uri={server.url}",
             "hydra.sweep.dir=multirun/srv"], project, extra_env={"TMPDIR": str(_dir(tmp_path / "job-tmp"))})
        entries_after_sweep, paid_after_sweep = cache_counts(project)
        run([str(BIN / "python"), "-m", "stages.train", *TRACKED, "gate.lambda=0.5",
             f"tracking.tracking_uri={server.url}", "hydra.run.dir=runs/single"], project)

    # the reader shares nothing with the jobs or the server but the URL
    reader = _dir(tmp_path / "reader")
    monkeypatch.chdir(reader)
    monkeypatch.setenv("TMPDIR", str(_dir(tmp_path / "reader-tmp")))
    client = MlflowClient(tracking_uri=server.url)
    experiment = client.get_experiment_by_name("harness-trainer")
    assert experiment.artifact_location.startswith("mlflow-artifacts:"), experiment.artifact_location
    runs = client.search_runs([experiment.experiment_id])
    parents = [r for r in runs if r.data.tags.get("harness.kind") == "sweep"]
    assert len(parents) == 1 and parents[0].info.status == "FINISHED"
    parent_id = parents[0].info.run_id
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent_id]
    singles = [r for r in runs if r.data.tags.get("harness.kind") == "training" and "mlflow.parentRunId" not in r.data.tags]
    assert len(children) == 2 and len(singles) == 1 and len(runs) == 4, [r.data.tags.get("mlflow.runName") for r in runs]
    assert sorted(c.data.params["gate.lambda"] for c in children) == ["0.5", "6.0"]
    assert "sweep/comparison.json" in _artifact_files(client, parent_id)

    for tracked in [*children, *singles]:
        run_id = tracked.info.run_id
        assert tracked.info.status == "FINISHED"
        assert [m.step for m in client.get_metric_history(run_id, "val_hard_acc")] == [1]
        files = _artifact_files(client, run_id)
        assert set(EXPECTED_ARTIFACTS) <= set(files), sorted(files)
        # every artifact is a file of the server's own directory, of the size the API lists
        stored = server.artifacts_dir / experiment.experiment_id / run_id / "artifacts"
        for path, size in files.items():
            assert (stored / path).is_file() and (stored / path).stat().st_size == size, path
        fetched = Path(client.download_artifacts(run_id, "delivered/certificate.json", str(reader)))
        assert fetched.is_relative_to(reader) and filecmp.cmp(fetched, stored / "delivered/certificate.json", shallow=False)

    # nowhere else: no local store in the project, the jobs' temp dir or the reader
    for place in (project, tmp_path / "job-tmp", reader):
        assert not list(place.rglob("mlruns")) and not list(place.rglob("mlflow.db")), place

    # the shared response cache lost nothing: the single run re-did job gate.lambda=0.5's work without paying a call,
    # and gave the same accuracy as that job
    entries, paid = cache_counts(project)
    assert (entries, paid) == (entries_after_sweep, paid_after_sweep)
    assert entries <= paid_after_sweep  # a row is stored once, however many jobs raced for it
    child = next(c for c in children if c.data.params["gate.lambda"] == "0.5")
    assert singles[0].data.metrics["val_hard_acc"] == child.data.metrics["val_hard_acc"]


@contextlib.contextmanager
def _server_log_on_failure(server: MlflowServer) -> Iterator[None]:
    """A failed job's message also carries the end of the server's log (the server's side of a reset connection)."""
    try:
        yield
    except AssertionError as failed:
        raise AssertionError(f"{failed}\n--- mlflow server log (end) ---\n{server.log_tail()}") from None


def _dir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["run", "sweep"])
def test_a_dead_tracking_server_is_one_line_at_start(tmp_path: Path, mode: str) -> None:
    project = make_project(tmp_path / "project")
    dead = f"http://127.0.0.1:{free_port()}"  # a free port: the connection is refused
    extra = ["+sweep=gate_lambda", "gate.lambda=0.5,6.0", "hydra/launcher=processes", "hydra.sweep.dir=multirun/dead"] \
        if mode == "sweep" else ["hydra.run.dir=runs/dead"]
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "stages.train", *TRACKED, f"tracking.tracking_uri={dead}", *extra],
                          cwd=project, env=env(), capture_output=True, text=True, timeout=300, check=False)
    seconds = time.monotonic() - started
    assert done.returncode == 2, done.stderr[-3000:]
    lines = [line for line in done.stderr.splitlines() if line.startswith("stages.train:")]
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr[-3000:]
    assert f"nothing is listening at tracking server {dead} (connection refused)" in lines[0]
    assert seconds < 60, f"{seconds:.0f} s: MLflow's client retried instead of failing at once"
    assert not (project / "multirun").exists() and not (project / ".cache" / "llm").exists()  # before any job or LLM call


@pytest.fixture
def http_status() -> Iterator[tuple[str, list[int]]]:
    """A real HTTP server on 127.0.0.1 answering every GET with the status in the yielded list (URL, [status])."""
    status = [404]

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            self.send_response(status[0])
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", status
    finally:
        server.shutdown()
        server.server_close()


def test_a_server_that_is_not_mlflow_is_named_and_credentials_are_left_to_mlflow(http_status) -> None:
    url, status = http_status
    with pytest.raises(TrackingServerError, match=r"answered HTTP 404 to GET /api/2.0/mlflow/experiments/search: "
                                                  r"expected an `mlflow server`; fix tracking.tracking_uri"):
        check_tracking_server(url)
    for refused_credentials in (401, 403):  # MLflow's client sends MLFLOW_TRACKING_USERNAME/PASSWORD; not ours to judge
        status[0] = refused_credentials
        check_tracking_server(url)
    status[0] = 200
    check_tracking_server(url.replace("http://", "http://user:hunter2@"))  # userinfo is not taken for the host


def test_refused_unknown_and_silent_servers_are_one_line_without_the_password() -> None:
    port = free_port()
    with pytest.raises(TrackingServerError) as refused:
        check_tracking_server(f"http://user:hunter2@127.0.0.1:{port}/")
    assert str(refused.value).startswith(f"nothing is listening at tracking server http://user:***@127.0.0.1:{port} ")
    assert "hunter2" not in str(refused.value)
    with pytest.raises(TrackingServerError, match="cannot resolve the host of tracking server http://nosuchhost.invalid"):
        check_tracking_server("http://nosuchhost.invalid:5000")
    with socket.socket() as silent:  # accepts connections (backlog) and never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(4)
        started = time.monotonic()
        with pytest.raises(TrackingServerError, match=r"did not answer within 1 s"):
            check_tracking_server(f"http://127.0.0.1:{silent.getsockname()[1]}", timeout_s=1.0)
        assert time.monotonic() - started < 10
    check_tracking_server("postgresql+psycopg2://postgres@127.0.0.1:1/mlflow")  # not http(s): not checked here


class _ResetAfterReply:
    """A TCP proxy on 127.0.0.1 to `upstream_port`. The first request whose bytes contain `marker` is passed to the
    server; the server's reply is dropped and the client's connection reset (RST): the server did the work, the
    client never heard. `reached=False`: that request is not passed on, the connection is reset at once (the server
    never saw it). Every other byte passes both ways."""

    def __init__(self, upstream_port: int, marker: bytes, *, reached: bool = True) -> None:
        self.upstream_port, self.marker, self.reached = upstream_port, marker, reached
        self.armed, self.resets = True, 0
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return  # closed
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        # one thread per connection, both directions by select: a socket another thread is blocked reading from is
        # not released by close(), and then no RST would be sent
        upstream = socket.create_connection(("127.0.0.1", self.upstream_port))
        doomed = False
        with client, upstream:
            while True:
                readable, _, _ = select.select([client, upstream], [], [], 60)
                if not readable:
                    return
                for side in readable:
                    data = side.recv(65536)
                    if not data:
                        return
                    if side is client:
                        if self.armed and self.marker in data:
                            self.armed, doomed = False, True
                            if not self.reached:
                                return self._reset(client)
                        upstream.sendall(data)
                    elif doomed:  # the server answered the marked request: drop its reply, reset the client
                        return self._reset(client)
                    else:
                        client.sendall(data)

    def _reset(self, client: socket.socket) -> None:
        client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # close() sends RST
        self.resets += 1

    def close(self) -> None:
        self.listener.close()


@pytest.mark.slow
def test_a_connection_reset_after_the_server_stored_the_dataset_input_logs_it_once(tmp_path: Path,
                                                                                   server: MlflowServer) -> None:
    """CI's sweep once died at its end on `runs/log-inputs ... ConnectionResetError`: from MLflow 3.18 the client
    does not resend a LogInputs request that may have reached the server. The run's input is logged anyway, once."""
    import pandas as pd
    from mlflow.tracking import MlflowClient

    from harness.tracking.mlflow_log import _log_dataset
    from harness.tracking.record import DatasetRef

    proxy = _ResetAfterReply(int(server.url.rsplit(":", 1)[1]), b"/api/2.0/mlflow/runs/log-inputs")
    try:
        client = MlflowClient(tracking_uri=f"http://127.0.0.1:{proxy.port}")
        run_id = client.create_run(client.create_experiment("reset-after-reply")).info.run_id
        path = tmp_path / "questions.parquet"
        pd.DataFrame({"qid": [f"q{i}" for i in range(8)], "answer": list("ABCD") * 2}).to_parquet(path)
        _log_dataset(client, run_id, DatasetRef(path=path, name="sim-questions", context="validation"))
    finally:
        proxy.close()
    assert proxy.resets == 1  # the reset happened, after the server's reply
    inputs = MlflowClient(tracking_uri=server.url).get_run(run_id).inputs.dataset_inputs
    assert [(d.dataset.name, [t.value for t in d.tags]) for d in inputs] == [("sim-questions", ["validation"])]


@pytest.mark.slow
@pytest.mark.parametrize("reached", [True, False], ids=["server-created-it", "server-never-saw-it"])
def test_a_run_created_across_a_connection_reset_is_created_once(server: MlflowServer, reached: bool) -> None:
    """MLflow 3.18 does not resend a CreateRun that may have reached the server. `create_run_once` finds the run the
    server created by its token, or sends the request again when the server never saw it: one run either way."""
    from mlflow.tracking import MlflowClient

    from harness.tracking.mlflow_log import CREATE_TOKEN_TAG, create_run_once

    proxy = _ResetAfterReply(int(server.url.rsplit(":", 1)[1]), b"/api/2.0/mlflow/runs/create", reached=reached)
    try:
        client = MlflowClient(tracking_uri=f"http://127.0.0.1:{proxy.port}")
        experiment_id = client.create_experiment(f"create-reset-{reached}")
        run_id = create_run_once(client, experiment_id, "training", {"harness.kind": "training"})
    finally:
        proxy.close()
    assert proxy.resets == 1
    runs = MlflowClient(tracking_uri=server.url).search_runs([experiment_id])
    assert [r.info.run_id for r in runs] == [run_id]
    assert runs[0].info.run_name == "training" and runs[0].data.tags["harness.kind"] == "training"
    assert len(runs[0].data.tags[CREATE_TOKEN_TAG]) == 32


def test_a_refused_connection_is_raised_not_retried_as_a_reset(monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing listening: the request never left, so it is not searched for or resent (MLflow's client retried the
    connection already; 0 retries here to keep the test short)."""
    from mlflow.exceptions import MlflowException
    from mlflow.tracking import MlflowClient

    from harness.tracking.mlflow_log import _is_reset, create_run_once

    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    with pytest.raises(MlflowException, match="Connection refused") as refused:
        create_run_once(MlflowClient(tracking_uri=f"http://127.0.0.1:{free_port()}"), "0", "training", {})
    assert not _is_reset(refused.value)
