"""The sweep callback's pure parts: which values were swept, and finding the parent run id in a job."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from hydra.types import RunMode

from harness.tracking.hydra_callback import parent_run_id_for_job, swept_values
from harness.tracking.store import PARENT_RUN_ENV, PARENT_RUN_FILE


def test_command_line_sweep_replaces_config_values() -> None:
    params = {"gate.lambda": "2.0,3.0,4.0"}
    task = ["+sweep=gate_lambda", "train=tiny", "gate.lambda=0.5,6.0", "evolve.h2_k=1,2", "hydra.launcher.n_jobs=2"]
    assert swept_values(params, task) == {"gate.lambda": "0.5,6.0", "evolve.h2_k": "1,2"}
    assert swept_values(params, ["train=tiny"]) == {"gate.lambda": "2.0,3.0,4.0"}


def test_parent_run_id_from_env_then_sweep_dir(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv(PARENT_RUN_ENV, raising=False)
    hydra_cfg = SimpleNamespace(mode=RunMode.MULTIRUN, sweep=SimpleNamespace(dir=str(tmp_path)))
    assert parent_run_id_for_job(hydra_cfg) is None
    (tmp_path / PARENT_RUN_FILE).write_text("abc123\n")
    assert parent_run_id_for_job(hydra_cfg) == "abc123"  # joblib/submitit workers: the file in the sweep dir
    assert parent_run_id_for_job(SimpleNamespace(mode=RunMode.RUN, sweep=hydra_cfg.sweep)) is None  # single runs have no parent
    monkeypatch.setenv(PARENT_RUN_ENV, "fromenv")
    assert parent_run_id_for_job(hydra_cfg) == "fromenv"
