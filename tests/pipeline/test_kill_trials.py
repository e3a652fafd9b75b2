"""The kill-trial benchmark in its reduced form (issue 15 item 10): one uninterrupted `dvc repro` with MLflow on,
then a `kill -9` of a second one while it runs, resumed with `dvc repro`: identical artifacts, no row lost or
duplicated, no provider call repaid, exactly one FINISHED MLflow run and no RUNNING one.
The full form: `nice -n 10 python benchmarks/kill_trials.py --trials 10`."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow  # two small dvc repro runs and a resume


def _benchmark():
    spec = importlib.util.spec_from_file_location("kill_trials", REPO_ROOT / "benchmarks" / "kill_trials.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_one_random_kill_of_a_tiny_repro_resumes_to_the_same_run(tmp_path: Path) -> None:
    bench = _benchmark()
    summary = bench.run_trials(1, seed=1, workdir=tmp_path, overrides=bench.QUICK, window=(0.15, 0.6))
    trial = summary["per_trial"][0]
    assert trial["killed_running"], trial  # the kill landed while dvc repro was running
    assert tuple(summary["reference_mlflow"]) == (1, 0)
    assert trial["identical"] and trial["resumed_exit"] == 0, trial
    assert (summary["rows_lost"], summary["rows_duplicated"], summary["duplicate_prediction_keys"]) == (0, 0, 0), trial
    assert summary["repeated_calls"] == 0, trial
    assert (summary["mlflow_duplicates"], summary["mlflow_running"]) == (0, 0), trial
    assert summary["survived"] == 1
