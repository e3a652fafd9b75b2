"""The sweep callback's pure parts: which values were swept, and finding the parent run id in a job."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from hydra.types import RunMode

from harness.tracking.hydra_callback import parent_run_id_for_job, swept_values
from harness.tracking.store import PARENT_RUN_ENV, PARENT_RUN_FILE


def test_command_line_sweep_replaces_config_values() -> None:
    params = {"gate.lambda": "2.0,3.0,4.0"}
    task = ["+sweep=gate_lambda", "train=tiny", "gate.lambda=0.5,6.0", "h2_round.k=1,2", "hydra.launcher.n_jobs=2"]
    assert swept_values(params, task) == {"gate.lambda": "0.5,6.0", "h2_round.k": "1,2"}
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


def test_comparison_shows_every_swept_value_in_mlflows_table(mlflow_db: Path, tmp_path: Path) -> None:
    """A sweep over a config group and a value (`gate=mcnemar,gepa gate.lambda=0.5,6.0`) against a real MLflow
    store: each child ends with a param per swept key holding its job's value (the group's from the job's Hydra
    overrides: its settings are `gate.*` params, `gate` itself is none), and the UI table sweep/comparison.json
    has a dot-free column per swept key (MLflow's table view reads `gate.lambda` as row.gate.lambda: an empty
    column) with those values, and rounded numbers."""
    import json

    from mlflow.tracking import MlflowClient

    from harness.tracking.hydra_callback import job_overrides
    from harness.tracking.mlflow_log import complete_swept_params, open_run, start_parent_run, summarize_children

    uri = f"sqlite:///{mlflow_db}"
    parent = start_parent_run(tracking_uri=uri, experiment="sweep", project_root=tmp_path, run_name="sweep", tags={})
    jobs = {"0": ("mcnemar", "0.5", 2 / 3), "1": ("gepa", "6.0", 0.6)}
    for job, (group, lam, acc) in jobs.items():
        job_dir = tmp_path / "multirun" / job
        (job_dir / ".hydra").mkdir(parents=True)
        (job_dir / ".hydra" / "overrides.yaml").write_text(f"- gate={group}\n- gate.lambda={lam}\n- +sweep=gate_lambda\n")
        run_id = open_run(tracking_uri=uri, experiment="sweep", project_root=tmp_path, run_name=f"job {job}",
                          params={"gate.lambda": lam, "gate.rule": group}, tags={"harness.run_dir": str(job_dir)},
                          parent_run_id=parent)
        MlflowClient(tracking_uri=uri).log_metric(run_id, "best_val_acc", acc)
    swept = ["gate", "gate.lambda"]
    logged = complete_swept_params(uri, parent, swept, lambda child: job_overrides(child.data.tags.get("harness.run_dir")))
    assert sorted(logged.values(), key=str) == [{"gate": "gepa"}, {"gate": "mcnemar"}]  # gate.lambda was there already

    client = MlflowClient(tracking_uri=uri)
    children = client.search_runs([client.get_run(parent).info.experiment_id], f"tags.`mlflow.parentRunId` = '{parent}'")
    by_job = {c.info.run_name: c.data.params for c in children}
    assert {name: (p["gate"], p["gate.lambda"]) for name, p in by_job.items()} == {
        "job 0": ("mcnemar", "0.5"), "job 1": ("gepa", "6.0")}

    summarize_children(tracking_uri=uri, parent_run_id=parent, swept_keys=swept)
    table = json.loads(Path(client.download_artifacts(parent, "sweep/comparison.json", str(tmp_path / "dl"))).read_text())
    assert not [c for c in table["columns"] if "." in c], table["columns"]
    rows = [dict(zip(table["columns"], row)) for row in table["data"]]
    assert [(r["gate"], r["gate_lambda"], r["best_val_acc"]) for r in rows] == [("gepa", "6.0", 0.6), ("mcnemar", "0.5", 0.6667)]  # by swept value


def test_job_overrides_read_hydras_file(tmp_path: Path) -> None:
    from harness.tracking.hydra_callback import job_overrides

    assert job_overrides(None) == {} and job_overrides(tmp_path) == {}  # no file: nothing, no error
    (tmp_path / ".hydra").mkdir()
    (tmp_path / ".hydra" / "overrides.yaml").write_text("- +sweep=gate_lambda\n- gate.lambda=2.0\n- ~train.seed\n")
    assert job_overrides(tmp_path) == {"sweep": "gate_lambda", "gate.lambda": "2.0"}
