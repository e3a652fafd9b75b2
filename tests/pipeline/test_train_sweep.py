"""`python -m stages.train +sweep=gate_lambda` with the joblib launcher (2 parallel jobs) against a
fresh MLflow SQLite store: one parent run, one child per job, per-epoch metrics, the five tables."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import yaml

from tests.pipeline.support import BIN, REPO_ROOT, TEST_OVERRIDES, make_project, run

pytestmark = pytest.mark.slow

SECRET = "sk-test-0123456789abcdef"  # in the jobs' environment; must never reach MLflow
TABLES = ("dual_metric_eval", "shadow_gate", "holdout_eval", "quadrant_pair", "gate_evidence")


PATH_KEYS = ("train.state_dir", "benchmark.questions_path", "pools.path", "llm.cache_dir", "benchmark.source",
                 "benchmark.harness_source")


def test_gate_lambda_sweep_logs_parent_and_children(tmp_path: Path) -> None:
    from mlflow.tracking import MlflowClient

    project = make_project(tmp_path / "project")
    db = tmp_path / "tracking" / "mlflow.db"  # new database: the callback must create it before the fan-out
    overrides = [o for o in TEST_OVERRIDES if o != "tracking=none"]
    done = run([str(BIN / "python"), "-m", "stages.train", "+sweep=gate_lambda", *overrides, "gate.lambda=0.5,6.0",
                "hydra/launcher=joblib", "hydra.launcher.n_jobs=2", f"tracking.tracking_uri=sqlite:///{db}",
                "hydra.sweep.dir=multirun/test"], project, extra_env={"OPENAI_API_KEY": SECRET})

    client = MlflowClient(tracking_uri=f"sqlite:///{db}")
    experiment = client.get_experiment_by_name("harness-trainer")
    runs = client.search_runs([experiment.experiment_id])
    parents = [r for r in runs if r.data.tags.get("harness.kind") == "sweep"]
    assert len(parents) == 1
    parent = parents[0]
    assert parent.info.status == "FINISHED"
    assert parent.data.params == {"sweep.gate.lambda": "0.5,6.0"}  # only what was swept (command line wins)
    assert parent.data.tags["mlflow.user"] and parent.data.tags["harness.sweep_dir"].endswith("multirun/test")
    assert (project / "multirun/test/mlflow_parent_run_id.txt").read_text().strip() == parent.info.run_id
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id]
    assert len(children) == 2 and len(runs) == 3
    assert sorted(c.info.run_name for c in children) == ["tiny lambda=0.5", "tiny lambda=6.0"]  # short, distinct
    assert sorted(c.data.params["gate.lambda"] for c in children) == ["0.5", "6.0"]
    # "differing params" of the children: exactly the swept key (locations are tags, not params)
    a, b = (c.data.params for c in children)
    assert set(a) == set(b) and {k for k in a if a[k] != b[k]} == {"gate.lambda"}
    assert not [k for k in a if k in PATH_KEYS or k.startswith(("tracking.", "improve.", "train.schedule"))]
    # the parent: the best child (highest certified lower bound, then held-out accuracy: never the validation accuracy
    # every child selected on) and the comparison table, printed at the end too
    best_id = parent.data.tags["harness.best_child_run_id"]
    best = next(c for c in children if c.info.run_id == best_id)

    def rank(child):
        return tuple(child.data.metrics.get(k, -2.0) for k in ("certify_lower_bound", "test_hard_acc"))

    assert rank(best) == max(rank(c) for c in children)
    assert parent.data.tags["harness.best_child_selected_on"] == "certify_lower_bound"
    assert parent.data.metrics["children"] == 2 and parent.data.metrics["test_hard_acc"] == best.data.metrics["test_hard_acc"]
    assert parent.data.tags["harness.best.gate.lambda"] == best.data.params["gate.lambda"]
    sweep_artifacts = {x.path for x in client.list_artifacts(parent.info.run_id, "sweep")}
    assert sweep_artifacts == {"sweep/comparison.md", "sweep/comparison.html", "sweep/comparison.json"}
    table = (project / "multirun/test/comparison.md").read_text()
    assert table in done.stdout
    lines = [line for line in table.splitlines() if line.startswith("| tiny")]
    assert [line.split(" | ")[1] for line in lines] == ["0.5", "6.0"]  # a row per child, sorted by the swept value
    assert "held-out acc" in table and "FDR level spent" in table and "(best)" in table
    for child in children:
        assert child.info.status == "FINISHED"
        assert SECRET not in json.dumps(child.data.params) and SECRET not in json.dumps(child.data.tags)
        history = client.get_metric_history(child.info.run_id, "val_hard_acc")
        assert [m.step for m in history] == [1]  # step = epoch
        # logged when the epoch ended: after the run started, before the report ended it
        assert child.info.start_time <= history[0].timestamp < child.info.end_time
        for key in ("best_val_acc", "epoch_accepted", "epoch_rejected", "epoch_probation", "epoch_rollouts", "epoch_usd",
                    "epoch_cache_hits", "test_hard_acc", "accepted", "rejected", "rollouts", "usd"):
            assert key in child.data.metrics, key
        assert not [k for k in child.data.metrics if k.startswith("total_")]
        assert [m.step for m in client.get_metric_history(child.info.run_id, "epoch_accepted")] == [1]
        metrics_json = json.loads(Path(child.data.tags["harness.run_dir"], "reports/metrics.json").read_text())
        for key in ("accepted", "rollouts", "usd", "test_hard_acc"):
            assert child.data.metrics[key] == metrics_json[key], key  # one meaning per name
        tags = child.data.tags
        assert tags["mlflow.source.git.commit"] and tags["mlflow.user"] and tags["mlflow.source.name"]
        assert tags["harness.state_dir"] == f"multirun/test/{Path(tags['harness.run_dir']).name}/state"
        artifacts = {x.path for x in client.list_artifacts(child.info.run_id, "tables")}
        for table_name in TABLES + ("gate_summary",):
            assert f"tables/{table_name}.parquet" in artifacts, table_name
        # the UI renders per-gate and per-epoch tables only; per-pair evidence stays Parquet
        assert {"tables/gate_summary.json", "tables/holdout_eval.json"} <= artifacts
        assert "tables/gate_evidence.json" not in artifacts and "tables/quadrant_pair.json" not in artifacts
        summary = json.loads(Path(client.download_artifacts(child.info.run_id, "tables/gate_summary.json",
                                                            str(tmp_path / child.info.run_id))).read_text())
        keys = [(row[0], row[1], row[2]) for row in summary["data"]]
        assert summary["columns"][:3] == ["epoch", "step", "task_type"] and keys == sorted(keys)
        assert len(keys) == len({row[summary["columns"].index("gate_run_id")] for row in summary["data"]})  # one per gate
        plots = {x.path for x in client.list_artifacts(child.info.run_id, "plots")}
        assert {"plots/accuracy_per_epoch.svg", "plots/gate_evidence_paths.svg"} <= plots
        assert child.inputs.dataset_inputs and child.inputs.dataset_inputs[0].dataset.digest
    # each job wrote its own state: no shared paths between jobs
    job_dirs = sorted(p for p in (project / "multirun/test").iterdir() if p.is_dir() and p.name.isdigit())
    assert len(job_dirs) == 2
    assert all((job / "state/holdout/DONE.json").is_file() and (job / "reports/metrics.json").is_file() for job in job_dirs)


def test_the_swept_lambda_values_change_the_accept_decisions(tmp_path: Path) -> None:
    """Issue 26 item 2: in the default config gate.lambda decides. The sweep's own values, on the tiny run, give each
    gate the threshold exp(-lambda) as its level and different accept decisions across lambda."""
    sweep = yaml.safe_load((REPO_ROOT / "conf/sweep/gate_lambda.yaml").read_text())
    values = sorted(float(v) for v in str(sweep["hydra"]["sweeper"]["params"]["gate.lambda"]).split(","))
    assert 3 <= len(values) <= 5
    project = make_project(tmp_path / "project")
    # the tiny config for 3 epochs of 2 steps (no early stop): enough gates for the values to disagree somewhere
    run([str(BIN / "python"), "-m", "stages.train", "+sweep=gate_lambda", "train=tiny", "tracking=none", "train.epochs=3",
         "train.early_stop_patience=3", "hydra.sweep.dir=multirun/lam"], project)
    decisions: dict[float, tuple] = {}
    for job in sorted(p for p in (project / "multirun/lam").iterdir() if p.is_dir() and p.name.isdigit()):
        swept = [o for o in yaml.safe_load((job / ".hydra/overrides.yaml").read_text()) if o.startswith("gate.lambda=")]
        lam = float(swept[0].split("=", 1)[1])
        rows = [row for rep in sorted(job.glob("state/e*/s*/gate/report.json")) for row in json.loads(rep.read_text())["skills"]]
        gated = [row for row in rows if row.get("screen") != "failed" and row.get("n_pairs")]
        assert gated, f"lambda {lam}: no gate ran"
        assert all(math.isclose(row["fdr_level"], math.exp(-lam)) for row in gated)  # the threshold is lambda's
        decisions[lam] = tuple((row["epoch"], row["step"], row["task_type"], row["action"]) for row in rows)
    assert sorted(decisions) == values
    accepts = {lam: sum(d[3] == "accept" for d in rows) for lam, rows in decisions.items()}
    assert len(set(decisions.values())) > 1, f"every lambda made the same decisions: {accepts}"
