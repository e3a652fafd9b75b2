"""`[k/N]` and the time left of `dvc repro` stages (issue 17 item 8): the stage order matches dvc.yaml,
the estimate comes from measured stage durations. The real `dvc repro` output of the training chain is
checked in test_dvc_pipeline.py (test_repro_prints_k_of_n_and_the_time_left), of the Harness² stages here."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from harness.pipeline.repro_progress import (
    LEDGER,
    Start,
    announce_stage,
    estimate_left,
    format_seconds,
    pipeline_order,
    progress_line,
    read_ledger,
)
from tests.pipeline.support import REPO_ROOT, make_project, run


def test_order_names_every_stage_of_the_real_dvc_yaml() -> None:
    params = yaml.safe_load((REPO_ROOT / "params.yaml").read_text(encoding="utf-8"))
    order = pipeline_order(params["train"]["epochs"], params["train"]["steps_per_epoch"], params["improve"]["domains"])
    listed = [line.split()[0] for line in run(["dvc", "stage", "list"], REPO_ROOT).stdout.splitlines() if line.strip()]
    assert sorted(order) == sorted(listed)
    assert len(order) == len(set(order))
    assert order[:4] == ["library", "prepare", "pools", "batches@0"]
    steps = params["train"]["steps_per_epoch"]
    # epoch 2 starts after the first epoch's `steps` steps and its slow update
    assert order[order.index("slow@0") - 1] == f"gate@{steps - 1}" and order[order.index("slow@0") + 1] == "batches@1"
    assert order.index("holdout") < order.index("report") < order.index("improve_report")


def test_estimate_uses_this_run_then_the_previous_run_then_the_mean() -> None:
    assert estimate_left(["rollout@1", "gate@1"], {}, {}) is None
    assert estimate_left(["rollout@1", "gate@1"], {"rollout": 2.0}, {"gate": 30.0, "rollout": 9.0}) == 32.0
    assert estimate_left(["rollout@1", "holdout"], {"rollout": 2.0, "gate": 4.0}, {}) == 2.0 + 3.0  # unseen kind: mean
    assert format_seconds(59.4) == "59 s" and format_seconds(125) == "2 min 05 s" and format_seconds(3720) == "1 h 02 min"


def test_progress_line_counts_and_measures_gaps_between_starts() -> None:
    order = pipeline_order(1, 2)  # library prepare pools batches@0 rollout@0 evolve@0 gate@0 rollout@1 ... certify holdout report
    assert len(order) == 14 and order[-3:] == ["certify", "holdout", "report"]
    previous = [Start("old", name, 100.0 + 10 * i) for i, name in enumerate(order)]  # every stage took 10 s
    this_run = [Start("new", "prepare", 1000.0), Start("new", "pools", 1002.0)]
    line = progress_line("batches@0", order, previous + this_run, "new", now=1004.0, label="batches@e1")
    # 11 stages left: 10 of kinds the previous run measured (10 s each); `report` was its last start, so it has
    # no measured duration and counts at the mean of this run's stages (prepare, pools: 2 s each)
    assert line.startswith("[4/14] batches@0 (batches@e1) starting; about 1 min 42 s left (2 stages run in 4 s)")
    first = progress_line("prepare", order, previous, "new", now=2000.0)
    assert "[2/14] prepare starting; about 2 min 10 s left (first stage of this run" in first  # 13 stages x 10 s
    assert progress_line("prepare", order, [], "new", now=1.0).endswith("time left: estimated once a stage has finished")
    assert "unknown outside `dvc repro`" in progress_line("pools", order, [], None, now=1.0)


def test_announce_only_under_dvc_and_keeps_a_ledger(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv("DVC_STAGE", raising=False)
    assert announce_stage("prepare", pipeline_order(1, 1), tmp_path) is None
    assert not (tmp_path / LEDGER).exists()
    monkeypatch.setenv("DVC_STAGE", "prepare")
    line = announce_stage("prepare", pipeline_order(1, 1), tmp_path, now=5.0)
    assert line is not None and line.startswith("[2/")
    # pytest is not run by dvc: no invocation to group starts by, so nothing is recorded
    assert read_ledger(tmp_path / LEDGER) == []
    (tmp_path / LEDGER).write_text('{"invocation": "a", "stage": "prepare", "at": 1.0}\n{"invocation": "a", "sta')
    assert read_ledger(tmp_path / LEDGER) == [Start("a", "prepare", 1.0)]  # a line cut by a kill is skipped


@pytest.mark.slow
def test_improve_stages_print_k_of_n_and_the_time_left(tmp_path: Path) -> None:
    """The Harness² stages (improve@<domain>, improve_report) say where they are like the training stages."""
    project = make_project(tmp_path / "project")
    params = yaml.safe_load((project / "params.yaml").read_text(encoding="utf-8"))
    order = pipeline_order(params["train"]["epochs"], params["train"]["steps_per_epoch"], params["improve"]["domains"])
    improve = [s for s in order if s.startswith("improve")]
    assert len(improve) == len(params["improve"]["domains"]) + 1 >= 3
    out = run(["dvc", "repro", "improve_report"], project)
    shown = re.findall(r"\[(\d+)/(\d+)\] (\S+) starting(; about \S+ (?:s|min)[^\n]*left)?", out.stderr)
    # DVC runs the independent improve@<domain> stages in an order of its own; k is each one's place in dvc.yaml
    assert sorted(name for _, _, name, _ in shown) == sorted(improve) and shown[-1][2] == "improve_report", out.stderr
    assert all((int(k), int(n)) == (order.index(name) + 1, len(order)) for k, n, name, _ in shown)
    assert all(left for *_, left in shown[1:]), shown  # an estimate once the first of them has finished


def test_process_alive_sees_a_process_end_as_a_zombie_and_a_reused_pid_as_gone() -> None:
    """The watcher of a stage under a shell (repro_progress.end_with_dvc) ends it when its `dvc` process is gone:
    a zombie (ended, not yet reaped by its parent) is gone, and so is another process that got the same pid."""
    import subprocess
    import sys
    import time

    from harness.pipeline.repro_progress import process_alive

    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    started = Path(f"/proc/{child.pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    assert process_alive(child.pid, started)
    assert not process_alive(child.pid, str(int(started) + 1))  # the same pid, another start: another process
    child.stdin.close()  # the child ends; not waited for, it stays a zombie
    deadline = time.monotonic() + 30
    while process_alive(child.pid, started) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert Path(f"/proc/{child.pid}").exists(), "the zombie was reaped before it was looked at"
    assert not process_alive(child.pid, started)
    child.wait()
    assert not process_alive(child.pid, started)
