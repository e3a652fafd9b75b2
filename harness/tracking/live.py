"""Which MLflow run a training run logs into, kept in the pipeline state (no mlflow import).

A training run's MLflow run is created when its first loop stage starts and
every later stage, epoch and resume logs into that same run. Its id lives in
``<telemetry dir>/mlflow_run.json`` (``.cache/pipeline/<state key>/``, one per
state root, outside DVC's outputs like the stage telemetry): a `dvc repro`
after a kill, or `python -m stages.train` resumed in the same run dir, finds
it there and continues it instead of starting a duplicate.

The file holds the run id, the redacted tracking URI (never a password), the
experiment, the run's settings key (sha256 of its params: other settings are
another training run), the status last set (RUNNING, FINISHED, FAILED,
KILLED) and the run's owner: the process that trains it (pid, host and that
process's start time, so a reused pid is not taken for the owner), which for
DVC stages is the `dvc` process running them. A live owner other than the
caller means another process trains this state: `owner_alive` tells. Reading
it is cheap, so stages that find a RUNNING run of their own owner import
nothing from MLflow.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import signal
import socket
import threading
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from harness.atomic import atomic_write_json

LIVE_RUN_FILE = "mlflow_run.json"
RUNNING, FINISHED, FAILED, KILLED = "RUNNING", "FINISHED", "FAILED", "KILLED"
# written just before the MLflow run is created; its run_id is the nonce the new run is tagged with
# (NONCE_TAG), so a kill between the creation and the record is found again, never duplicated
PENDING = "PENDING"
STATUSES = (RUNNING, FINISHED, FAILED, KILLED, PENDING)
NONCE_TAG = "harness.live_nonce"


class LiveRunFileError(ValueError):
    """The live-run file cannot be read (names the file and what to do)."""


# MLflow tags of a run's owner, so a later start anywhere on the host can tell a dead owner's RUNNING run
OWNER_TAGS = ("harness.owner_pid", "harness.owner_host", "harness.owner_started")


@dataclass(frozen=True)
class Owner:
    """The process that trains a run: pid, host and its start time (``<boot id>:<start ticks>``, "" when unknown)."""

    pid: int
    host: str
    started: str

    def tags(self) -> dict[str, str]:
        return dict(zip(OWNER_TAGS, (str(self.pid), self.host, self.started)))

    @classmethod
    def from_tags(cls, tags: Mapping[str, str]) -> "Owner | None":
        try:
            return cls(int(tags[OWNER_TAGS[0]]), str(tags[OWNER_TAGS[1]]), str(tags.get(OWNER_TAGS[2], "")))
        except (KeyError, ValueError):
            return None

    def describe(self) -> str:
        return f"PID {self.pid} on {self.host}"


def _proc_stat(pid: int) -> list[str] | None:
    """Fields of /proc/<pid>/stat after the command name (state, ppid, ..., starttime at index 19); None if gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text.rsplit(")", 1)[1].split()


def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def process_owner(pid: int | None = None) -> Owner:
    """The Owner record of process `pid` (default: this one)."""
    pid = os.getpid() if pid is None else pid
    fields = _proc_stat(pid)
    started = f"{_boot_id()}:{fields[19]}" if fields is not None and len(fields) > 19 else ""
    return Owner(pid, socket.gethostname(), started)


def _cmdline(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return []


def _is_dvc(argv: list[str]) -> bool:
    """`dvc ...`, `python /venv/bin/dvc ...` or `python -m dvc ...`."""
    head = [Path(a).name for a in argv[:3]]
    return bool(head) and (head[0] == "dvc" or (len(head) > 1 and head[1] == "dvc")
                           or (len(head) > 2 and head[1:3] == ["-m", "dvc"]))


def run_owner() -> Owner:
    """Who owns the training run this process works on: the nearest `dvc` ancestor (a DVC stage is one process
    of a run that `dvc repro` drives from stage to stage), else this process (`stages.train`, a sweep job)."""
    pid = os.getppid()
    for _ in range(16):  # a stage's parents: a shell, dvc, perhaps a queue worker
        if pid <= 1:
            break
        if _is_dvc(_cmdline(pid)):
            return process_owner(pid)
        fields = _proc_stat(pid)
        if fields is None:
            break
        pid = int(fields[1])
    return process_owner()


def owner_alive(owner: Owner) -> bool | None:
    """True when `owner` still runs (same pid and start time), False when it is gone, None when it cannot be told
    (another host)."""
    if owner.host != socket.gethostname():
        return None
    if not Path("/proc").is_dir():  # no procfs: the pid alone
        try:
            os.kill(owner.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    now = process_owner(owner.pid)
    if not now.started.split(":")[-1]:
        return False  # no such process
    fields = _proc_stat(owner.pid)
    if fields is not None and fields[0] == "Z":
        return False  # exited, not yet reaped by its parent
    return not owner.started or now.started == owner.started


@dataclass(frozen=True)
class LiveRun:
    run_id: str
    tracking_uri: str  # redacted (harness.tracking.store.redact_uri): a key, never used to connect
    experiment: str
    settings_key: str
    status: str
    run_name: str
    owner_pid: str = ""  # the Owner of the run while RUNNING or PENDING ("" in records of older versions)
    owner_host: str = ""
    owner_started: str = ""

    @property
    def owner(self) -> Owner | None:
        return Owner.from_tags(dict(zip(OWNER_TAGS, (self.owner_pid, self.owner_host, self.owner_started))))

    def same_run(self, tracking_uri: str, experiment: str, settings_key: str) -> bool:
        """True when this file's run belongs to a training run of `settings_key` in that store and experiment."""
        return (self.tracking_uri, self.experiment, self.settings_key) == (tracking_uri, experiment, settings_key)

    def with_status(self, status: str) -> "LiveRun":
        return replace(self, status=status)


def settings_key(params: Mapping[str, Any]) -> str:
    """sha256 of a run's params (its settings): the same settings give the same key."""
    return hashlib.sha256(json.dumps(dict(params), sort_keys=True, default=str).encode("utf-8")).hexdigest()


def live_run_path(directory: Path) -> Path:
    return Path(directory) / LIVE_RUN_FILE


def read_live_run(directory: Path) -> LiveRun | None:
    path = live_run_path(directory)
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        run = LiveRun(**{k: str(data[k]) for k in LiveRun.__dataclass_fields__ if not k.startswith("owner_") or k in data})
    except (ValueError, KeyError, TypeError) as error:
        raise LiveRunFileError(f"{path}: not a live MLflow run record ({error}); delete it to start a new MLflow run")
    if run.status not in STATUSES:
        raise LiveRunFileError(f"{path}: status {run.status!r} is not one of {', '.join(STATUSES)}; delete the file")
    return run


def write_live_run(directory: Path, run: LiveRun) -> Path:
    return atomic_write_json(live_run_path(directory), asdict(run))


class RunKilled(BaseException):
    """SIGTERM arrived while a tracked run was training (raised in the main thread; the run is ended KILLED)."""


@contextlib.contextmanager
def sigterm_raises() -> Iterator[None]:
    """Inside the block, the first SIGTERM raises `RunKilled` in the main thread (so `finally` blocks run and the
    run can be marked KILLED) and later ones are ignored, so a second SIGTERM cannot cut the marking short
    (a killed process group under `dvc repro` gets one from the kill and one when DVC dies,
    harness/pipeline/repro_progress.end_with_dvc); mark inside the block. The previous handler is restored
    after. A no-op outside the main thread."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum, frame):  # noqa: ARG001 - signal handler signature
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        raise RunKilled(f"signal {signum}")

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
