"""Resuming a killed `python -m stages.train` in place, with the command README and docs/own-run.md ("Resume") give:
the same command again plus `hydra.run.dir=<the job dir it printed>`. A real job of the default world is SIGKILLed
right after its first stage, resumed that way, and must deliver what an uninterrupted job of the same config delivers;
a resume with another model setting is refused in one line, leaving the killed job's state as it was."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.pipeline.support import BIN, REPO_ROOT, env, file_digests, make_project, run

pytestmark = pytest.mark.slow

# the default world for one epoch: long enough (tens of seconds) that the kill lands mid-run on any machine
OVERRIDES = ("tracking=none", "train.epochs=1")
COMPARED = ("reports/metrics.json", "reports/report.md", "reports/report.html", "state/holdout/holdout.json")


def _job_dir(log: Path, seconds: float) -> Path:
    """The directory the job announced (`[train] job dir <path>`), as a user reads it off the first lines."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        found = re.search(r"\[train\] job dir (\S+),", log.read_text(errors="replace")) if log.is_file() else None
        if found:
            return Path(found.group(1))
        time.sleep(0.1)
    raise AssertionError(f"no '[train] job dir' line in {log}:\n{log.read_text(errors='replace')[-2000:]}")


def test_the_documented_resume_command_finishes_a_killed_train_job_with_the_uninterrupted_result(tmp_path: Path) -> None:
    project = make_project(tmp_path / "project")
    command = [str(BIN / "python"), "-m", "stages.train", *OVERRIDES]
    log = tmp_path / "killed.log"
    with log.open("w") as out:  # the first run, as a user starts it: the default (timestamped) run directory
        job = subprocess.Popen(command, cwd=project, env=env(), stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            job_dir = _job_dir(log, 120)
            deadline = time.monotonic() + 300
            while not any((job_dir / "state").rglob("DONE.json")):
                assert job.poll() is None and time.monotonic() < deadline, log.read_text()[-3000:]
                time.sleep(0.05)
            os.killpg(job.pid, signal.SIGKILL)  # right after its first stage
            job.wait()
        finally:
            if job.poll() is None:
                os.killpg(job.pid, signal.SIGKILL)
                job.wait()
    assert job_dir.parent == project / "runs" / "default"
    assert not (job_dir / "reports" / "metrics.json").exists()  # killed before it finished
    done_before = {p: p.stat().st_mtime_ns for p in (job_dir / "state").rglob("DONE.json")}

    relative = job_dir.relative_to(project)
    other_model = subprocess.run([*command, "llm.temperature=0.2", f"hydra.run.dir={relative}"], cwd=project, env=env(),
                                 capture_output=True, text=True, timeout=300, check=False)
    assert other_model.returncode == 2 and "Traceback" not in other_model.stderr, other_model.stderr[-3000:]
    assert ("stages.train: refusing to resume: structural config key(s) changed since the checkpoint: "
            "llm.temperature (0.7 -> 0.2)") in other_model.stderr  # a resume never mixes two models' answers
    resumed = run([*command, f"hydra.run.dir={relative}"], project, timeout=900)  # the documented command
    assert f"[train] job dir {job_dir}" in resumed.stdout + resumed.stderr  # the same directory, resumed in place
    assert sorted((project / "runs" / "default").iterdir()) == [job_dir]  # no second run directory
    for done_file, mtime in done_before.items():  # the stages finished before the kill were kept, not re-run
        assert done_file.stat().st_mtime_ns == mtime, done_file

    run([*command, "hydra.run.dir=runs/whole"], project, timeout=900)
    whole = project / "runs" / "whole"
    for name in COMPARED:
        assert (job_dir / name).read_bytes() == (whole / name).read_bytes(), name
    assert file_digests(job_dir / "state/holdout/delivered") == file_digests(whole / "state/holdout/delivered")
    assert json.loads((job_dir / "reports/metrics.json").read_text())["rollouts"] > 0


def test_readme_and_own_run_give_the_resume_command_and_point_at_this_test() -> None:
    this = f"tests/pipeline/{Path(__file__).name}"
    for doc in ("README.md", "docs/own-run.md"):
        text = (REPO_ROOT / doc).read_text()
        # one command, continuation lines (`\` + newline) included
        assert re.search(r"python -m stages\.train (?:[^\n\\]|\\\n)*hydra\.run\.dir=runs/default/\S+", text), doc
        assert "[train] job dir" in text and this in text, doc
