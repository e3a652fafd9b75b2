"""One `stages.train` job per run directory (issue 15 item 3), with real processes: a second job on a directory
in use is refused at once naming the directory and the owner's PID; the lock dies with a `kill -9`ed owner, so
the directory resumes; default directory names of jobs started in the same second differ."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from harness.pipeline import run_lock
from tests.pipeline.support import BIN, REPO_ROOT, env, make_project

HOLDER = ("import sys, time\nfrom pathlib import Path\nfrom harness.pipeline import run_lock\n"
          "run_lock.acquire(Path(sys.argv[1]))\nprint('held', flush=True)\ntime.sleep(600)\n")


def _holds(predicate) -> bool:
    """`predicate()`, False while it walks a tree the running job is changing (a temp dir removed mid-walk)."""
    try:
        return bool(predicate())
    except FileNotFoundError:
        return False


def _wait_for(predicate, seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not _holds(predicate):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def test_a_directory_held_by_another_process_is_refused_naming_it_and_the_pid(tmp_path: Path) -> None:
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(tmp_path / "job")], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with pytest.raises(run_lock.RunDirInUse) as refused:
            run_lock.acquire(tmp_path / "job")
        assert str((tmp_path / "job").resolve()) in str(refused.value)
        assert f"PID {holder.pid} on" in str(refused.value)
    finally:
        holder.kill()
        holder.wait()
    assert run_lock.acquire(tmp_path / "job")  # the kernel dropped the dead owner's lock
    assert not run_lock.acquire(tmp_path / "job")  # re-entrant within one process
    with run_lock.run_dir_lock(tmp_path / "job"):
        pass
    assert (tmp_path / "job").resolve() / run_lock.LOCK_NAME in run_lock._held  # a lock held before the block stays held
    run_lock.release(tmp_path / "job")
    assert (tmp_path / "job" / run_lock.LOCK_NAME).read_text().startswith(f"{os.getpid()} on ")


def test_explicit_dirs_reads_the_command_line() -> None:
    assert run_lock.explicit_dirs(["train=tiny", "hydra.run.dir=runs/x"]) == [Path("runs/x")]
    assert run_lock.explicit_dirs(["-m", "hydra.run.dir=runs/x", "hydra.sweep.dir='sw/1'"]) == [Path("sw/1")]
    assert run_lock.explicit_dirs(["hydra.run.dir=runs/${now:%H}"]) == []


@pytest.mark.slow
def test_a_second_train_job_is_refused_at_once_and_a_killed_owner_resumes(tmp_path: Path) -> None:
    project = make_project(tmp_path / "project")
    # the default world for one epoch (tens of seconds), not train=tiny: the owner must still be training after the
    # refused second job returns (it composes and checks its config before it reaches the lock; a tiny owner,
    # which stops early after a few seconds, finished first on a loaded machine)
    command = [str(BIN / "python"), "-m", "stages.train", "tracking=none", "train.epochs=1", "hydra.run.dir=runs/shared"]
    job = project / "runs" / "shared"
    owner = subprocess.Popen(command, cwd=project, env=env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             start_new_session=True)
    try:
        # Hydra writes config.yaml, hydra.yaml, then overrides.yaml: the last one non-empty means config.yaml is whole
        # (reading config.yaml as soon as it existed caught it empty at load 5)
        overrides_file = job / ".hydra" / "overrides.yaml"
        _wait_for(lambda: overrides_file.is_file() and overrides_file.stat().st_size > 0, 120, "the owner's .hydra/")
        hydra_config = (job / ".hydra" / "config.yaml").read_bytes()
        started = time.monotonic()
        second = subprocess.run([*command, "train.seed=5"], cwd=project, env=env(), capture_output=True, text=True,
                                timeout=120)
        assert time.monotonic() - started < 30  # refused at once, not after a training run
        assert second.returncode == 2, second.stderr[-2000:]
        assert str(job.resolve()) in second.stderr and f"PID {owner.pid} on" in second.stderr, second.stderr
        assert "Traceback" not in second.stderr
        assert (job / ".hydra" / "config.yaml").read_bytes() == hydra_config  # nothing of the owner's overwritten
        _wait_for(lambda: any((job / "state").rglob("DONE.json")), 300, "the owner's first finished stage")
        os.killpg(owner.pid, signal.SIGKILL)
        owner.wait()
    finally:
        if owner.poll() is None:
            os.killpg(owner.pid, signal.SIGKILL)
            owner.wait()
    assert not (job / "reports" / "metrics.json").exists()  # killed before it finished
    resumed = subprocess.run(command, cwd=project, env=env(), capture_output=True, text=True, timeout=900)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert json.loads((job / "reports" / "metrics.json").read_text())


def test_default_run_directories_of_jobs_started_in_the_same_second_differ() -> None:
    command = [str(BIN / "python"), "-m", "stages.train", "--cfg", "all", "--resolve"]
    jobs = [subprocess.Popen(command, cwd=REPO_ROOT, env=env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for _ in range(3)]
    dirs = {}
    for job in jobs:
        out, err = job.communicate(timeout=120)
        assert job.returncode == 0, err[-2000:]
        dirs[job.pid] = yaml.safe_load(out)["hydra"]["run"]["dir"]
    assert len(set(dirs.values())) == 3
    for pid, directory in dirs.items():
        assert directory.startswith("runs/default/") and directory.endswith(f"_{pid}"), directory
