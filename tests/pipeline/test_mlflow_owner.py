"""One training run = one MLflow run (issue 31 item 5), with real processes killed by SIGKILL and a real MLflow
store on SQLite in a temp dir: the live run records its owner (pid, host, start time); a second process on the
same training state is refused while the owner lives and takes the run over (one run) once it is dead; a run left
RUNNING by a dead process is ended KILLED by the next start anywhere on the host."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from harness.tracking.live import Owner, owner_alive, process_owner, run_owner
from tests.pipeline.support import BIN, env
from tests.support.processes import children, resume, stop_when

pytestmark = pytest.mark.slow  # imports mlflow, starts processes

ROOT = Path(__file__).resolve().parents[2]

# A process that starts the live run of training state argv[2] in store argv[1] (run name argv[3]), prints its id
# and then waits to be killed, as a training process would while it trains.
OWNER = r"""
import sys, time
from pathlib import Path
from harness.config.load import load_config
from harness.pipeline.live_run import TrainingTracker
cfg = load_config(["train=tiny", f"tracking.tracking_uri=sqlite:///{sys.argv[1]}"], environ={}, env_file=None)
tracker = TrainingTracker(cfg, Path.cwd(), Path(sys.argv[2]), run_name=sys.argv[3], source="train")
print(tracker.start(), flush=True)
time.sleep(600)
"""


def _runs(db: Path, timeout: float = 5.0) -> dict[str, str]:
    """run id -> status of every active run in the store."""
    with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=timeout)) as connection:
        return dict(connection.execute("SELECT run_uuid, status FROM runs WHERE lifecycle_stage = 'active'"))


def _quietly(read: Callable[..., dict[str, str]], db: Path, default: dict[str, str], *args: str) -> dict[str, str]:
    """`read(db, *args)` with a short lock wait, or `default` while a stopped writer holds the store."""
    try:
        return read(db, *args, timeout=0.05)
    except sqlite3.OperationalError:
        return default


def _owner_process(db: Path, state: Path, name: str) -> tuple[subprocess.Popen, str]:
    child = subprocess.Popen([str(BIN / "python"), "-c", OWNER, str(db), str(state), name], cwd=ROOT, env=env(),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert child.stdout is not None
    line = child.stdout.readline().strip()
    assert line, child.stderr.read() if child.stderr else ""
    return child, line


def _kill(child: subprocess.Popen) -> None:
    os.kill(child.pid, signal.SIGKILL)
    child.wait(timeout=30)


def _tracker(db: Path, state: Path, name: str):
    from harness.config.load import load_config
    from harness.pipeline.live_run import TrainingTracker

    cfg = load_config(["train=tiny", f"tracking.tracking_uri=sqlite:///{db}"], environ={}, env_file=None)
    return TrainingTracker(cfg, ROOT, state, run_name=name, source="train")


def test_owner_liveness_tells_a_live_process_from_a_dead_one_and_a_reused_pid() -> None:
    me = process_owner()
    assert owner_alive(me) is True and run_owner() == me  # not under dvc: the process itself owns its run
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    owner = process_owner(child.pid)
    assert owner_alive(owner) is True
    _kill(child)
    assert owner_alive(owner) is False
    assert owner_alive(Owner(os.getpid(), me.host, me.started + "0")) is False  # same pid, another start: not the owner
    assert owner_alive(Owner(os.getpid(), "another-host", "")) is None


def test_a_second_process_on_one_state_is_refused_then_takes_the_run_over_once_the_owner_is_killed(
        tmp_path: Path, mlflow_db: Path) -> None:
    from harness.pipeline.live_run import LiveRunInUse

    state = tmp_path / "telemetry"
    child, run_id = _owner_process(mlflow_db, state, "first")
    try:
        with pytest.raises(LiveRunInUse) as refused:
            _tracker(mlflow_db, state, "second").start()
        assert f"PID {child.pid}" in str(refused.value) and "train.state_dir" in str(refused.value)
        assert _runs(mlflow_db) == {run_id: "RUNNING"}
    finally:
        _kill(child)
    tracker = _tracker(mlflow_db, state, "second")
    assert tracker.start() == run_id  # the dead owner's run is resumed: never a second run
    record = json.loads((state / "mlflow_run.json").read_text())
    assert (record["owner_pid"], record["status"]) == (str(os.getpid()), "RUNNING")
    assert _runs(mlflow_db) == {run_id: "RUNNING"}
    from mlflow.tracking import MlflowClient

    assert MlflowClient(f"sqlite:///{mlflow_db}").get_run(run_id).data.tags["harness.owner_pid"] == str(os.getpid())


def test_a_run_left_running_by_a_killed_process_is_ended_killed_by_the_next_start_elsewhere(
        tmp_path: Path, mlflow_db: Path) -> None:
    alive, alive_id = _owner_process(mlflow_db, tmp_path / "a", "alive")
    try:
        killed, killed_id = _owner_process(mlflow_db, tmp_path / "b", "killed")
        _kill(killed)
        assert _runs(mlflow_db) == {alive_id: "RUNNING", killed_id: "RUNNING"}
        new_id = _tracker(mlflow_db, tmp_path / "c", "next").start()  # another state directory (a new run dir)
        assert _runs(mlflow_db) == {alive_id: "RUNNING", killed_id: "KILLED", new_id: "RUNNING"}
    finally:
        _kill(alive)


def test_stages_train_killed_then_run_again_in_a_new_run_dir_leaves_no_running_run(tmp_path: Path, mlflow_db: Path) -> None:
    from tests.pipeline.support import make_project

    project = make_project(tmp_path / "project")
    uri = f"sqlite:///{mlflow_db}"
    command = [str(BIN / "python"), "-m", "stages.train", "train=tiny", "train.epochs=1", f"tracking.tracking_uri={uri}"]
    child = subprocess.Popen(command, cwd=project, env=env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             start_new_session=True)
    # the run exists ~0.3 s before training ends: stepped, so that it is killed while its run is RUNNING
    stop_when(lambda: [child.pid], lambda: "RUNNING" in _quietly(_runs, mlflow_db, {}).values(),
              "its MLflow run was seen RUNNING", timeout=600)
    os.killpg(child.pid, signal.SIGKILL)
    child.wait(timeout=30)
    (killed_id, status), = _runs(mlflow_db).items()
    assert status == "RUNNING"
    subprocess.run(command, cwd=project, env=env(), capture_output=True, check=True, timeout=900)  # the default: a new run dir
    runs = _runs(mlflow_db)
    assert runs.pop(killed_id) == "KILLED"
    assert list(runs.values()) == ["FINISHED"]


def _tagged(db: Path, key: str, timeout: float = 5.0) -> dict[str, str]:
    """run id -> value of tag `key`, for the active runs that have it."""
    with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=timeout)) as connection:
        return dict(connection.execute("SELECT t.run_uuid, t.value FROM tags t JOIN runs r ON r.run_uuid = t.run_uuid "
                                       "WHERE t.key = ? AND r.lifecycle_stage = 'active'", (key,)))


def test_a_killed_job_process_fails_its_own_job_only_and_the_rerun_sweep_keeps_one_parent(tmp_path: Path,
                                                                                           mlflow_db: Path) -> None:
    from tests.pipeline.support import make_project

    project = make_project(tmp_path / "project")
    uri = f"sqlite:///{mlflow_db}"
    # job 1 trains 2 epochs (patience 5: no early stop) so that it is still running when job 0 is killed
    command = [str(BIN / "python"), "-m", "stages.train", "--multirun", "train=tiny", "train.early_stop_patience=5",
               "train.epochs=1,2", f"tracking.tracking_uri={uri}", "hydra/launcher=processes", "hydra.launcher.n_jobs=2",
               "hydra.sweep.dir=multirun/killed"]
    sweep = subprocess.Popen(command, cwd=project, env=env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    owners: dict[str, str] = {}

    def job_0_running() -> bool:
        owners.clear()
        owner_pids = _quietly(_tagged, mlflow_db, {}, "harness.owner_pid")
        statuses = _quietly(_runs, mlflow_db, {})
        owners.update({run_dir.rsplit("/", 1)[-1]: owner_pids.get(run_id, "")
                       for run_id, run_dir in _quietly(_tagged, mlflow_db, {}, "harness.run_dir").items()
                       if statuses.get(run_id) == "RUNNING"})
        return bool(owners.get("0"))

    # job 0 (train.epochs=1) is killed as soon as its run exists, job 1 (2 epochs, started with it) must go on; the
    # sweep's job processes are stepped (stopped while we look), so job 0 cannot end its run before the kill
    stopped = stop_when(lambda: children(sweep.pid), job_0_running, "job 0's run was seen RUNNING", timeout=600,
                        appear=True)
    os.kill(int(owners["0"]), signal.SIGKILL)
    for pid in stopped:
        resume(pid)
    out, _ = sweep.communicate(timeout=900)
    assert sweep.returncode != 0, out[-3000:]
    assert "its process was killed by SIGKILL" in out, out[-3000:]
    assert (project / "multirun/killed/1/reports/metrics.json").is_file()  # the other job went on to its end
    assert not (project / "multirun/killed/0/reports/metrics.json").exists()
    statuses = _runs(mlflow_db)
    run_dirs = _tagged(mlflow_db, "harness.run_dir")
    by_dir = {run_dirs[run_id].rsplit("/", 1)[-1]: status for run_id, status in statuses.items() if run_id in run_dirs}
    assert by_dir == {"0": "KILLED", "1": "FINISHED"}, statuses
    (parent, parent_status), = [(r, statuses[r]) for r, kind in _tagged(mlflow_db, "harness.kind").items() if kind == "sweep"]
    assert parent_status == "FAILED"

    done = subprocess.run(command, cwd=project, env=env(), capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    statuses = _runs(mlflow_db)
    assert statuses[parent] == "FINISHED" and list(statuses.values()).count("FINISHED") == 3, statuses  # 1 parent, 2 jobs
    parents = _tagged(mlflow_db, "mlflow.parentRunId")
    assert sorted(parents.values()) == [parent, parent] and len(statuses) == 3, (statuses, parents)
