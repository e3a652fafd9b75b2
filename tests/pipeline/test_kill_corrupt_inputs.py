"""Every corrupt or unreadable input is named (issue 15 item 6), with real stages of a real `dvc repro`: each
inter-stage file truncated or garbled, the run log and the tracking database not a database, gives one line
naming the path and what to do (`dvc repro -f <stage>`), exit 2, no traceback (one with --debug)."""

from __future__ import annotations

import shlex
import shutil
import sqlite3
import subprocess
from pathlib import Path

import pytest
import yaml

from harness.inputs import InputFileError, read_json, sqlite_failure
from harness.log import HarnessLog, RunLogReader
from tests.pipeline.support import env, make_project, run

pytestmark = pytest.mark.slow  # one small dvc repro, then ~10 stage processes


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> Path:
    project = make_project(tmp_path_factory.mktemp("corrupt") / "project")
    run(["dvc", "repro", "report"], project)
    return project


def _command(project: Path, stage: str) -> list[str]:
    lock = yaml.safe_load((project / "dvc.lock").read_text())
    return shlex.split(lock["stages"][stage]["cmd"])


def _run_stage(project: Path, stage: str, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([*_command(project, stage), *extra], cwd=project, env=env(), capture_output=True, text=True,
                          timeout=300)


@pytest.mark.parametrize("relative,damage,consumer,producer", [
    ("state/e1/s1/rollout/outcomes.json", b'{"run_id": "r', "evolve@0", "rollout@0"),
    ("state/e1/s1/evolve/evolve.json", b"", "gate@0", "evolve@0"),
    ("state/e1/s1/gate/gate_pools.json", b"\xff\xfe garbage", "slow@0", "gate@0"),
    ("state/e1/s1/gate/checkpoint.json", b'{"format": ', "slow@0", "gate@0"),
    ("data/pools.json", b"[1, 2", "batches@0", "pools"),
    ("state/e1/s1/gate/lineage.json", b"{", "slow@0", "gate@0"),
])
def test_a_corrupt_inter_stage_file_is_named_with_the_stage_to_rerun(finished: Path, tmp_path: Path, relative: str,
                                                                      damage: bytes, consumer: str, producer: str) -> None:
    target = finished / relative
    backup = tmp_path / "backup"
    shutil.copy2(target, backup)
    out_dirs = []
    try:
        target.write_bytes(damage)
        done = _run_stage(finished, consumer)
        out_dirs = [finished / o["path"] for o in yaml.safe_load((finished / "dvc.lock").read_text())["stages"][consumer]["outs"]]
        assert done.returncode == 2, done.stderr[-3000:]
        assert "Traceback" not in done.stderr, done.stderr[-3000:]
        lines = [line for line in done.stderr.splitlines() if line.startswith("stages.")]
        assert len(lines) == 1, done.stderr[-3000:]
        assert str(target.resolve()) in lines[0] or relative in lines[0], lines[0]
        assert f"dvc repro -f {producer}" in lines[0], lines[0]
        debug = _run_stage(finished, consumer, "--debug")
        assert debug.returncode != 0 and "Traceback" in debug.stderr
    finally:
        shutil.copy2(backup, target)
        for out in out_dirs:  # the consumer's half-made output: let the next test's run start clean
            if out.is_dir() and not (out / "DONE.json").exists():
                shutil.rmtree(out)
    run(["dvc", "repro", "-f", consumer], finished)  # restored: the stage runs again


def test_a_run_log_that_is_not_a_database_is_named(finished: Path, tmp_path: Path) -> None:
    fragment = finished / "state/e1/s1/rollout/runlog.sqlite"
    backup = tmp_path / "backup"
    shutil.copy2(fragment, backup)
    try:
        fragment.write_bytes(b"this is not SQLite" * 100)
        done = _run_stage(finished, "report")
        assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-3000:]
        assert f"{fragment.resolve()}: run log fragment: file is not a database" in done.stderr or \
               f"{fragment}: run log fragment: file is not a database" in done.stderr, done.stderr[-3000:]
        assert "dvc repro -f rollout@0" in done.stderr
    finally:
        shutil.copy2(backup, fragment)


def test_a_garbled_tracking_database_is_named(finished: Path, tmp_path: Path) -> None:
    params = yaml.safe_load((finished / "params.yaml").read_text())
    db = tmp_path / "mlflow.db"
    db.write_bytes(b"garbage, not a database" * 50)
    params["tracking"].update(enabled=True, tracking_uri=f"sqlite:///{db}")
    tracked = tmp_path / "params.yaml"
    tracked.write_text(yaml.safe_dump(params, sort_keys=False))
    done = _run_stage(finished, "report", "--params", str(tracked))
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-3000:]
    assert str(db) in done.stderr, done.stderr[-3000:]


def test_json_and_sqlite_failures_name_the_file_without_a_dvc_project(tmp_path: Path) -> None:
    path = tmp_path / "x.json"
    path.write_text('{"a": 1,')
    with pytest.raises(InputFileError) as info:
        read_json(path, "step document")
    assert str(info.value).startswith(f"{path}: step document is not valid JSON (line 1, column 9")
    assert "dvc repro -f <stage>" in str(info.value)
    with pytest.raises(InputFileError, match="is missing"):
        read_json(tmp_path / "absent.json", "step document")
    error = sqlite_failure(tmp_path / "db", "run log", sqlite3.OperationalError("database or disk is full"))
    assert "free disk space" in str(error)


def test_the_run_log_names_a_corrupt_file_and_keeps_the_first_error(tmp_path: Path) -> None:
    bad = tmp_path / "runlog.sqlite"
    bad.write_bytes(b"not a database at all" * 200)
    with pytest.raises(InputFileError, match=f"{bad}: run log: file is not a database"):
        HarnessLog(bad)
    with pytest.raises(InputFileError, match="run log fragment: file is not a database"):
        RunLogReader([bad]).query("SELECT 1 FROM predictions")
    good = tmp_path / "ok.sqlite"
    with HarnessLog(good) as log:
        log.record_run("r1", "train")
    assert RunLogReader([good]).runs("r1")


def test_a_stage_run_by_hand_refuses_questions_its_workspace_did_not_record(finished: Path, tmp_path: Path) -> None:
    from dataclasses import replace

    from harness.questions import read_questions, write_questions

    questions = finished / "data/questions.parquet"
    backup = tmp_path / "questions.parquet"
    shutil.copy2(questions, backup)
    out = finished / "state/e1/s1/rollout"
    kept = tmp_path / "rollout"
    shutil.copytree(out, kept)
    try:
        original = read_questions(questions)
        write_questions(questions, [replace(original[0], question=original[0].question + " (edited)"), *original[1:]])
        done = _run_stage(finished, "rollout@0")
        assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-3000:]
        assert "data/questions.parquet" in done.stderr and "is not the questions file this run's workspace recorded" \
            in done.stderr, done.stderr[-3000:]
    finally:
        shutil.copy2(backup, questions)
        shutil.rmtree(out, ignore_errors=True)
        shutil.copytree(kept, out)
