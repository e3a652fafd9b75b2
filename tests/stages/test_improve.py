"""`python -m stages.improve`: plan by default, --check, --yes, per-domain + --aggregate, MLflow, failure isolation."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from omegaconf import OmegaConf

import harness.h2.run as h2_run
from stages import improve
from tests.h2.test_executor_adapters import KEY, service_agent
from tests.support.task_service import TaskService

DOMAINS = ["object_recognition", "temporal_reasoning"]


def write_params(tmp_path: Path, *overrides: str) -> Path:
    # h2_round.k=1: train=tiny shrinks the one round config to evolve=h2's k=2; these tests count k=1 rounds
    from harness.config.load import load_config

    cfg = load_config(["train=tiny", "tracking=none", f"improve.domains=[{','.join(DOMAINS)}]", "improve.tasks_per_domain=2",
                       "improve.questions_per_task=2", "h2_round.k=1", *overrides], env_file=None, environ={})
    path = tmp_path / "params.yaml"
    path.write_text(OmegaConf.to_yaml(cfg))
    return path


@pytest.fixture
def project(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_default_prints_the_plan_only(project, capsys):
    write_params(project)
    assert improve.main([]) == 0
    out = capsys.readouterr().out
    assert "Harness² sweep plan" in out and "object_recognition: object_recognition-0, object_recognition-1" in out
    assert "plan only: add --yes" in out
    assert not (project / "state").exists() and not (project / "reports").exists()


def test_yes_runs_writes_the_report_and_one_mlflow_run(project, capsys):
    uri = f"sqlite:///{project / 'mlflow.db'}"
    write_params(project, "tracking=mlflow", f"tracking.tracking_uri={uri}", "tracking.experiment=improve-test")
    assert improve.main(["--yes", "--run-tag", "t1"]) == 0
    report = json.loads((project / "reports/improve/sweep-report.json").read_text())
    (cfg,) = report["configs"]
    assert (cfg["mode"], cfg["k"], cfg["tasks"], cfg["crashed"]) == ("parallel", 1, 4, 0)
    assert cfg["graded"] + cfg["ungraded"] == 4 and sum(cfg["picks"].values()) == 4
    assert report["meta"]["run_tag"] == "t1" and report["meta"]["domains"] == DOMAINS
    assert report["noise_floor"]["gap"] is None and "noise floor" in report["noise_floor"]["note"]
    for d in DOMAINS:
        assert (project / "state/improve" / d / "domain-report.json").is_file()
        assert (project / "state/improve" / d / "library/t1/parallel" / d / "INDEX.md").is_file()

    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name("improve-test-improve")  # tracking.improve_experiment: apart from training runs
    assert client.get_experiment_by_name("improve-test") is None
    (run,) = client.search_runs([exp.experiment_id])
    assert run.info.run_name == "improve-t1" and run.info.status == "FINISHED"
    assert run.data.metrics["parallel_k1/tasks"] == 4 and run.data.metrics["parallel_k1/crashed"] == 0
    assert run.data.metrics["parallel_k1/graded"] == cfg["graded"]
    assert run.data.tags["harness.kind"] == "improve"
    arts = {a.path for a in client.list_artifacts(run.info.run_id, "improve")}
    assert arts == {"improve/sweep-report.json", "improve/sweep-report.md"}
    assert {a.path for a in client.list_artifacts(run.info.run_id, "tables")} >= {"tables/improve_report.json", "tables/improve_tasks.json"}
    # same run tag again: every task resumes from its completion mark
    capsys.readouterr()
    assert improve.main(["--yes", "--run-tag", "t1", "--no-tracking"]) == 0
    again = json.loads((project / "reports/improve/sweep-report.json").read_text())
    assert {r["status"] for r in again["tasks"]} == {"resumed"}


def test_one_failing_task_is_isolated_and_recorded(project, monkeypatch):
    write_params(project)
    real = h2_run.improve_task

    async def flaky(adapter, *a, **kw):
        if adapter.task_id == "temporal_reasoning-0":
            raise RuntimeError("injected failure")
        return await real(adapter, *a, **kw)

    monkeypatch.setattr(h2_run, "improve_task", flaky)
    assert improve.main(["--yes"]) == 0
    report = json.loads((project / "reports/improve/sweep-report.json").read_text())
    status = {r["task_id"]: r["status"] for r in report["tasks"]}
    assert status.pop("temporal_reasoning-0") == "crashed"
    assert set(status.values()) == {"done"} and len(status) == 3  # the next task of the same domain still ran
    assert report["crashed"][0]["error"] == "RuntimeError: injected failure"


def test_per_domain_runs_then_aggregate(project, capsys):
    write_params(project)
    for d in DOMAINS:
        assert improve.main(["--yes", "--domain", d, "--quiet"]) == 0
    assert not (project / "reports").exists()  # a single domain writes only its own directory
    assert sorted(p.name for p in (project / "state/improve").iterdir()) == sorted(DOMAINS)
    assert improve.main(["--aggregate"]) == 0
    report = json.loads((project / "reports/improve/sweep-report.json").read_text())
    assert report["configs"][0]["tasks"] == 4


def test_aggregate_without_domain_reports_is_a_clear_error(project, capsys):
    write_params(project)
    assert improve.main(["--aggregate"]) == 2
    assert "domain-report.json: missing" in capsys.readouterr().err


def _manifest(tmp_path: Path) -> Path:
    base = tmp_path / "base"
    base.mkdir()
    (base / "AGENTS.md").write_text("# Agent\nlevel: 0\n")
    src = tmp_path / "src"
    src.mkdir()
    (src / "data.csv").write_text("1 2 3")
    path = tmp_path / "tasks.yaml"
    path.write_text("tasks:\n  - {id: sum-1, domain: acc, prompt: 'Sum the numbers.', source_dir: src, base_harness_dir: base}\n")
    return path


@pytest.fixture
def service(monkeypatch):
    monkeypatch.setenv("TASK_SERVICE_API_KEY", KEY)
    with TaskService(api_key=KEY) as svc:
        yield svc


def test_check_with_the_service_executor_creates_no_task(project, service, capsys):
    m = _manifest(project)
    write_params(project, "improve=service", f"improve.manifest={m}", f"improve.service.base_url={service.url}", "improve.domains=[acc]")
    assert improve.main(["--check"]) == 0
    assert "preflight passed; no task was created" in capsys.readouterr().out
    assert service.tasks == {} and service.uploads == {}
    assert any(p == "/health" for _m, p, _h in service.requests)


def test_check_reports_problems_naming_the_key(project, service, monkeypatch, capsys):
    m = _manifest(project)
    (project / "base" / "AGENTS.md").write_text("")
    write_params(project, "improve=service", f"improve.manifest={m}", "improve.service.base_url=http://127.0.0.1:9")
    monkeypatch.delenv("TASK_SERVICE_API_KEY")
    assert improve.main(["--check", "--run-tag=-bad"]) == 2
    err = capsys.readouterr().err
    assert "improve.run_tag" in err and "always-on-empty" in err
    assert service.tasks == {}


def test_service_executor_runs_the_whole_sweep(project, service, capsys):
    calls: list = []
    service.responder = service_agent(calls)
    m = _manifest(project)
    write_params(project, "improve=service", f"improve.manifest={m}", f"improve.service.base_url={service.url}",
                 "improve.service.poll_interval_s=0.01", "improve.domains=[acc]", "improve.run_tag=exec-t")
    assert improve.main(["--yes"]) == 0
    report = json.loads((project / "reports/improve/sweep-report.json").read_text())
    (row,) = report["tasks"]
    assert row["status"] == "done" and row["score"] == 0.75 and row["score_unit"] == "judge-grade"
    assert row["usd"] > 0  # the service's cost endpoint is booked
    roles = {c[0] for c in calls}
    assert roles == {"base", "editor", "probe", "reflector", "judge"}
    n = len(service.tasks)
    assert improve.main(["--yes"]) == 0  # resumed: no new task
    assert len(service.tasks) == n
