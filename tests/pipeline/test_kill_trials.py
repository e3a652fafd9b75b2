"""The kill-trial benchmark in its reduced form (issue 15 item 10): one uninterrupted `dvc repro` with MLflow on,
then a `kill -9` of a second one while it runs, resumed with `dvc repro`: identical artifacts, no row lost or
duplicated, no provider call repaid, exactly one FINISHED MLflow run and no RUNNING one.
The full form: `nice -n 10 python benchmarks/kill_trials.py --trials 10`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import kill_trials as bench

REPO_ROOT = Path(__file__).resolve().parents[2]


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), "-c", "user.email=t@example.com", "-c", "user.name=t", *args],
                          capture_output=True, text=True, check=True).stdout.strip()


def test_the_measured_code_is_the_commit_not_the_working_tree(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    (repo / "stage.py").write_text("committed\n")
    _git(repo, "add", "stage.py")
    _git(repo, "commit", "-q", "-m", "one")
    (repo / "stage.py").write_text("edited by someone else during the run\n")
    (repo / "new.py").write_text("untracked\n")
    sha, exported = bench.export_commit("HEAD", tmp_path / "export", repo=repo)
    assert sha == _git(repo, "rev-parse", "HEAD") and len(sha) == 40
    assert (exported / "stage.py").read_text() == "committed\n" and not (exported / "new.py").exists()
    with pytest.raises(SystemExit, match="not a commit"):
        bench.export_commit("no-such-rev", tmp_path / "export2", repo=repo)


def test_the_stage_running_at_the_kill_is_named() -> None:
    # argv after -c is the script's: a sleeping process whose command line reads like a stage's
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "-m", "stages.gate",
                             "--epoch", "1", "--step", "2", "--out", "x"], start_new_session=True)
    try:
        assert bench.running_stages(proc.pid) == "gate --epoch 1 --step 2"
    finally:
        proc.kill()
        proc.wait()
    assert bench.running_stages(proc.pid) == ""


def test_the_report_page_states_every_figure() -> None:
    trial = bench.Trial(3.5, True, "rollout --epoch 1 --step 1", None, 0, True, 0, 0, 0, 0, 1, 0)
    late = bench.Trial(9.0, False, "", 8.2, 0, True, 0, 0, 0, 0, 1, 0)
    repaired = bench.Trial(5.0, True, "", None, 255, True, 0, 0, 0, 0, 1, 0, dvc_state_removed="dvc.lock",
                          repaired_exit=0)
    assert trial.survived and late.survived and repaired.intact and not repaired.survived
    summary = {"commit": "a" * 40, "overrides": ["train=tiny"], "seed": 0, "window": [0.02, 0.9],
               "reference_seconds": 10.0, "shortest_run_seconds": 8.2, "reference_mlflow": [1, 0], "trials": 3, "killed_running": 2, "survived": 2,
               "survived_real_kills": 1, "failed_trials": [2],
               "dvc_state_unreadable": {"dvc.lock": 1}, "intact_after_dvc_state_removal": 1, "rows_lost": 0, "rows_duplicated": 0,
               "duplicate_prediction_keys": 0, "repeated_calls": 0, "mlflow_duplicates": 0, "mlflow_running": 0,
               "per_trial": [{**bench.asdict(t), "intact": t.intact, "survived": t.survived}
                             for t in (trial, late, repaired)],
               "families": {"dvc": {"reference_seconds": 10.0, "trials": 2, "killed_running": 1, "survived": 1,
                                    "identical": 2, "rows_lost": 0, "rows_duplicated": 0, "repeated_calls": 0,
                                    "training_runs": 2, "mlflow_finished": 2, "mlflow_runs_per_training_run": 1.0,
                                    "mlflow_running": 0, "mlflow_parents": 0},
                            "sweep": {"reference_seconds": 20.0, "trials": 1, "killed_running": 1, "survived": 1,
                                      "identical": 1, "rows_lost": 0, "rows_duplicated": 0, "repeated_calls": 0,
                                      "training_runs": 2, "mlflow_finished": 2, "mlflow_runs_per_training_run": 1.0,
                                      "mlflow_running": 0, "mlflow_parents": 1}},
               "command": "python benchmarks/kill_trials.py --trials 1", "wall_seconds": 30.0,
               "load_average": [1.0, 1.0, 1.0], "finished_utc": "2026-12-02 05:00 UTC"}
    page = bench.render_markdown(summary)
    for text in ("a" * 40, "| real kills (landed while the run ran) | 2 |", "| survived (all trials) | 2 / 3 |",
                 "| `dvc repro` | 10.0 | 2 (1) | 1 / 2 | 2 / 2 | 0 | 0 | 0 | 1.0 (2 FINISHED / 2) | 0 | - |",
                 "| 2-job sweep (same sweep dir) | 20.0 | 1 (1) | 1 / 1 | 1 / 1 | 0 | 0 | 0 | 1.0 (2 FINISHED / 2) | 0 | 1 |",
                 "| MLflow RUNNING zombies | 0 |", "rollout --epoch 1 --step 1", "no (done at 8.2 s)",
                 "| 255; dvc.lock removed, then 0 |", "unreadable (resume refused) | 1 (`dvc.lock` 1) |", "Failed trials: [2]"):
        assert text in page, text


def test_each_family_runs_its_own_command_and_a_sweep_needs_its_parent() -> None:
    assert bench.family("dvc", ("train=tiny",)).command == ("dvc", "repro", "report")
    train = bench.family("train", ("train=tiny",))
    assert train.command[:4] == ("python", "-m", "stages.train", "train=tiny") and train.bases == (bench.TRAIN_DIR,)
    sweep = bench.family("sweep", ("train=tiny",))
    assert sweep.command[3] == "--multirun" and len(sweep.bases) == 2  # a flag before Hydra's overrides
    with pytest.raises(SystemExit, match="unknown family"):
        bench.family("slurm", ())
    ok = bench.Trial(1.0, True, "train", None, 0, True, 0, 0, 0, 0, 2, 0, family="sweep", training_runs=2,
                     mlflow_parents=1)
    assert ok.survived
    assert not bench.Trial(1.0, True, "train", None, 0, True, 0, 0, 0, 0, 2, 0, family="sweep", training_runs=2,
                           mlflow_parents=2).intact  # a second parent: the re-run did not re-attach
    assert bench.Trial(1.0, True, "train", None, 0, True, 0, 0, 0, 0, 1, 0, family="train").intact  # one run, one MLflow run
    assert not bench.Trial(1.0, True, "train", None, 0, True, 0, 0, 0, 0, 2, 0, family="train").intact  # duplicate


def test_only_an_unreadable_dvc_state_file_is_removed(tmp_path: Path) -> None:
    rwlock_refusal = "ERROR: failed to reproduce 'library': Unable to read RWLock-file '.dvc/tmp/rwlock'. JSON structure"
    lock_refusal = "'./dvc.lock' validation failed.\n\nrequired key not provided, in schema"
    rwlock, lock = tmp_path / ".dvc" / "tmp" / "rwlock", tmp_path / "dvc.lock"
    rwlock.parent.mkdir(parents=True)
    rwlock.write_text('{"read": {}, "write": {}}')
    lock.write_text("schema: '2.0'\nstages: {}\n")
    assert bench.remove_unreadable_dvc_state(tmp_path, rwlock_refusal) == "" and rwlock.exists()  # readable: kept
    assert bench.remove_unreadable_dvc_state(tmp_path, lock_refusal) == "" and lock.exists()
    rwlock.write_text("")  # what a kill between DVC's truncate and its write leaves
    lock.write_text("")
    assert bench.remove_unreadable_dvc_state(tmp_path, "ERROR: some other failure") == ""
    assert rwlock.exists() and lock.exists()
    assert bench.remove_unreadable_dvc_state(tmp_path, rwlock_refusal) == ".dvc/tmp/rwlock" and not rwlock.exists()
    assert bench.remove_unreadable_dvc_state(tmp_path, lock_refusal) == "dvc.lock" and not lock.exists()


@pytest.mark.slow  # two small dvc repro runs and a resume
def test_one_random_kill_of_a_tiny_repro_resumes_to_the_same_run(tmp_path: Path) -> None:
    summary = bench.run_trials(1, seed=1, workdir=tmp_path, overrides=bench.QUICK, window=(0.15, 0.6), max_trials=1)
    trial = summary["per_trial"][0]
    assert summary["trials"] == 1 and summary["killed_running"] == 1, trial  # the kill landed while running
    assert tuple(summary["reference_mlflow"]) == (1, 0)
    # A kill inside DVC's own in-place rewrite of .dvc/tmp/rwlock or dvc.lock (a few % of kills, all between stages)
    # makes DVC refuse the resume until that file is removed: DVC's limitation, counted by the benchmark; what this
    # project guarantees is checked after that removal.
    assert trial["identical"] and (trial["resumed_exit"] == 0 or trial["dvc_state_removed"]), trial
    assert (summary["rows_lost"], summary["rows_duplicated"], summary["duplicate_prediction_keys"]) == (0, 0, 0), trial
    assert summary["repeated_calls"] == 0, trial
    assert (summary["mlflow_duplicates"], summary["mlflow_running"]) == (0, 0), trial
    assert trial["intact"], trial
