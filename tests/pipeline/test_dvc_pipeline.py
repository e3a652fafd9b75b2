"""End to end with the real tools in temporary git repositories (tiny config, 1 epoch x 1 step):
`dvc repro`, the no-op re-run, `dvc exp run -S gate.lambda=...`, metrics/plots/dag, a SIGKILL
mid-pipeline then resume, and `python -m stages.train` agreeing with `dvc repro`."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from tests.pipeline.support import (
    BIN,
    TEST_OVERRIDES,
    cache_counts,
    env,
    file_digests,
    make_project,
    run,
    table_rows,
)

pytestmark = pytest.mark.slow

FINAL_ARTIFACTS = ("reports/metrics.json", "reports/report.md", "reports/report.html", "reports/plots",
                   "state/holdout/delivered", "state/holdout/holdout.json", "data/pools.json")
# The training chain only (other stage groups of dvc.yaml, e.g. improve@<domain>, are not under test here).
REPRO = ["dvc", "repro", "report"]
LOG_TABLES = ("predictions", "traces", "validation_flags", "_runs", "dual_metric_eval", "shadow_gate",
              "holdout_eval", "quadrant_pair", "gate_evidence")


def _final_state(project: Path) -> dict:
    """What must be identical between an uninterrupted and an interrupted-then-resumed run."""
    from harness.loop.state import read_lineage, resolve_fragments
    from harness.store import list_versions, read_version

    digests = {}
    for name in FINAL_ARTIFACTS:
        path = project / name
        digests.update({f"{name}/{k}": v for k, v in file_digests(path).items()} if path.is_dir()
                       else {name: file_digests(path.parent)[path.name]})
    fragments = resolve_fragments(project, read_lineage(project / "state/e1/slow")) + [project / "state/holdout/runlog.sqlite"]
    rows = {table: len(table_rows(fragments, table)) for table in LOG_TABLES}
    prediction_keys = [r[:3] for r in table_rows(fragments, "predictions")]
    workspace = project / "state/e1/slow/workspace"
    versions = {kind: [(v, read_version(workspace / kind, v).tree.fingerprint) for v in list_versions(workspace / kind)]
                for kind in ("skills", "prompts")}
    assert versions["skills"] and versions["prompts"]
    manifest = json.loads((workspace / "manifest.json").read_text())
    return {"digests": digests, "rows": rows, "unique_prediction_keys": len(set(prediction_keys)),
            "versions": versions, "manifest": manifest}


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """One uninterrupted `dvc repro` (timed), its final state and cache counts captured right after."""
    project = make_project(tmp_path_factory.mktemp("reference") / "project")
    started = time.monotonic()
    out = run(REPRO, project)
    seconds = time.monotonic() - started
    return {"project": project, "state": _final_state(project), "cache": cache_counts(project),
            "stdout": out.stdout, "stderr": out.stderr, "seconds": seconds}


def test_repro_runs_every_stage_and_declares_metrics_plots_dag(reference: dict) -> None:
    project = reference["project"]
    for stage in ("library", "prepare", "pools", "batches@0", "rollout@0", "evolve@0", "gate@0", "slow@0", "certify", "holdout",
                  "report"):
        assert f"Running stage '{stage}'" in reference["stdout"], stage
    metrics = json.loads((project / "reports/metrics.json").read_text())
    assert metrics["epochs_run"] == 1 and metrics["rollouts"] > 0 and 0.0 <= metrics["test_hard_acc"] <= 1.0
    shown = json.loads(run(["dvc", "metrics", "show", "--json"], project).stdout)
    assert json.dumps(shown).count("best_val_acc") >= 1
    plots = json.loads(run(["dvc", "plots", "show", "--json"], project).stdout)["data"]
    assert sorted(plots) == ["reports/plots/accuracy.svg", "reports/plots/cost.svg", "reports/plots/gate_evidence.svg"]
    dot = run(["dvc", "dag", "--dot"], project).stdout
    for edge in ('"prepare" -> "pools"', '"pools" -> "batches@0"', '"batches@0" -> "rollout@0"', '"rollout@0" -> "evolve@0"',
                 '"evolve@0" -> "gate@0"', '"gate@0" -> "slow@0"', '"slow@0" -> "certify"', '"certify" -> "holdout"',
                 '"slow@0" -> "holdout"', '"holdout" -> "report"'):
        assert edge in dot, edge
    # the response cache is no DVC output; each provider call in a clean run stored exactly one response
    lock = yaml.safe_load((project / "dvc.lock").read_text())
    paths = [entry["path"] for stage in lock["stages"].values() for entry in stage.get("outs", []) + stage.get("deps", [])]
    assert paths and not any(p.startswith(".cache") for p in paths)
    entries, misses = reference["cache"]
    assert entries == misses > 0


def test_repro_prints_k_of_n_and_the_time_left(reference: dict) -> None:
    from harness.pipeline.repro_progress import pipeline_order

    params = yaml.safe_load((reference["project"] / "params.yaml").read_text())
    order = pipeline_order(params["train"]["epochs"], params["train"]["steps_per_epoch"], params["improve"]["domains"])
    ran = [line.split("'")[1] for line in reference["stdout"].splitlines() if line.startswith("Running stage '")]
    assert ran == [s for s in order if s in ran]  # DVC runs the stages in the order the count assumes
    shown = re.findall(r"\[(\d+)/(\d+)\] (\S+)[^\n]* starting(; about (\d+) (s|min)[^\n]*left)?", reference["stderr"])
    assert [name for _, _, name, *_ in shown] == ran[1:]  # every stage but `library` (no config) says where it is
    assert [int(k) for k, *_ in shown] == [order.index(name) + 1 for name in ran[1:]]
    assert {int(n) for _, n, *_ in shown} == {len(order)}
    assert all(left for *_, left, _, _ in shown[1:]), shown  # an estimate once the first stage has finished


def test_plots_page_and_report_render_offline_in_a_browser(reference: dict, tmp_path: Path) -> None:
    """`dvc plots show`'s page and reports/report.html of the real run, in headless Chromium: every chart
    is there and drawn, and nothing is fetched from outside the machine's files."""
    from selenium.webdriver.common.by import By

    from tests.support.browser import chromium, file_requests, offline_problems, open_page

    project = reference["project"]
    run(["dvc", "plots", "show"], project)
    task_types = sorted({row["task_type"] for row in json.loads((project / "state/e1/s1/gate/report.json").read_text())["skills"]})
    with chromium(tmp_path / "profile") as driver:
        page = open_page(driver, project / "dvc_plots" / "index.html")
        assert offline_problems(page) == []
        assert driver.find_elements(By.TAG_NAME, "script") == []
        images = driver.find_elements(By.TAG_NAME, "img")
        names = sorted(Path(i.get_attribute("src")).name for i in images)  # DVC copies them to static/<rev>_<path>
        assert [n.rsplit("reports_plots_", 1)[-1] for n in names] == ["accuracy.svg", "cost.svg", "gate_evidence.svg"], names
        for image in images:  # loaded, decoded as an image and laid out
            assert page.js("return arguments[0].naturalWidth", image) > 300 and image.size["height"] > 100
        assert len([u for u in file_requests(page) if u.endswith(".svg")]) == 3

        page = open_page(driver, project / "reports" / "report.html")
        assert offline_problems(page) == []
        charts = {c.get_attribute("data-chart"): c for c in driver.find_elements(By.CSS_SELECTOR, "svg[data-chart]")}
        assert set(charts) == {"accuracy", "cost", "gate-evidence"} and all(c.is_displayed() for c in charts.values())
        panels = charts["gate-evidence"].find_elements(By.CSS_SELECTOR, "g[data-panel]")
        assert sorted(p.get_attribute("data-panel") for p in panels) == task_types


def test_train_app_produces_the_same_harness_and_metrics(reference: dict) -> None:
    project = reference["project"]
    run([str(BIN / "python"), "-m", "stages.train", *TEST_OVERRIDES, "hydra.run.dir=runs/same"], project)
    job = project / "runs/same"
    assert json.loads((job / "reports/metrics.json").read_text()) == json.loads((project / "reports/metrics.json").read_text())
    assert file_digests(job / "state/holdout/delivered") == file_digests(project / "state/holdout/delivered")
    assert (job / "reports/report.md").read_text() == (project / "reports/report.md").read_text()


def test_second_repro_is_a_no_op_and_gate_change_keeps_first_rollout(reference: dict) -> None:
    project = reference["project"]
    lock_before = (project / "dvc.lock").read_text()
    started = time.monotonic()
    again = run(REPRO, project)
    noop_seconds = time.monotonic() - started
    assert "Running stage" not in again.stdout
    assert (project / "dvc.lock").read_text() == lock_before
    print(f"no-op dvc repro: {noop_seconds:.1f} s")

    exp = run(["dvc", "exp", "run", *[f"-S{o}" for o in TEST_OVERRIDES], "-Sgate.lambda=2.0", "report"], project)  # not the default (0.5)
    ran = {line.split("'")[1] for line in exp.stdout.splitlines() if line.startswith("Running stage '")}
    assert {"gate@0", "slow@0", "certify", "holdout", "report"} <= ran
    assert not ran & {"library", "prepare", "pools", "batches@0", "rollout@0", "evolve@0"}, ran
    params = (project / "params.yaml").read_text()
    assert "lambda: 2.0" in params


def test_sigkill_mid_pipeline_then_resume_matches_uninterrupted(reference: dict, tmp_path: Path) -> None:
    project = make_project(tmp_path / "project")
    proc = subprocess.Popen([str(BIN / "dvc"), *REPRO[1:]], cwd=project, env=env(), start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    marker = project / "state/e1/s1/gate/runlog.sqlite"  # the gate stage is running its gate rollouts
    deadline = time.monotonic() + 300
    try:
        while not marker.exists():
            assert proc.poll() is None, "dvc repro ended before the gate stage started"
            assert time.monotonic() < deadline, "gate stage never started"
            time.sleep(0.02)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert not (project / "reports/metrics.json").exists()
    assert not (project / "state/e1/s1/gate/DONE.json").exists(), "killed too late: the gate stage had finished"
    entries_at_kill, misses_at_kill = cache_counts(project)

    resumed = run(REPRO, project)
    for done_before in ("prepare", "pools", "batches@0", "rollout@0", "evolve@0"):
        assert f"Running stage '{done_before}'" not in resumed.stdout, done_before
    assert "Running stage 'gate@0'" in resumed.stdout

    assert _final_state(project) == reference["state"]
    entries, misses = cache_counts(project)
    assert entries == reference["cache"][0]
    # every call the resumed run made to the provider was for a response not stored before the kill
    assert misses - misses_at_kill == entries - entries_at_kill
