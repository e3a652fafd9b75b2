"""The DVC baseline of docs/pipeline.md (issue 17 item 4), run as written with real DVC in a temporary git
repository: after `dvc repro` and the baseline commit, `dvc exp show` has the baseline's metrics (not `!`),
`dvc metrics diff` compares the experiment with it, `dvc plots diff` shows both, and the workspace goes back
to the baseline. The documented commands are read from the docs; the only change is that `dvc exp run`
also gets the tiny test config (-S train=tiny ...), or it would re-compose the full default run."""

from __future__ import annotations

import json
import re
import shlex
import shutil
from pathlib import Path

import pytest

from tests.pipeline.support import REPO_ROOT, TEST_OVERRIDES, make_project, run

pytestmark = pytest.mark.slow

DOC = REPO_ROOT / "docs" / "pipeline.md"
MARK = "<!-- baseline:"


def documented_commands() -> list[str]:
    """The command lines of the fenced block after the baseline marker, comments dropped."""
    text = DOC.read_text(encoding="utf-8")
    block = text[text.index(MARK):]
    block = block[block.index("```bash") + len("```bash"):]
    block = block[:block.index("```")]
    return [line.split("   #")[0].strip() for line in block.splitlines() if line.strip()]


def _exp_rows(shown: list[dict]) -> list[dict]:
    """Every row of `dvc exp show --json` (baseline commits and their experiments), flattened."""
    rows = []
    for entry in shown:
        rows.append(entry)
        for exp in entry.get("experiments") or []:
            rows += exp.get("revs") or []
    return rows


def _metrics(row: dict) -> dict:
    return (((row.get("data") or {}).get("metrics") or {}).get("reports/metrics.json") or {}).get("data") or {}


def test_baseline_commands_of_the_docs(tmp_path: Path) -> None:
    project = make_project(tmp_path / "project")
    shutil.copy2(REPO_ROOT / ".gitignore", project / ".gitignore")  # `git add -A` must be safe with the real one
    run(["git", "commit", "-qam", "the project's .gitignore"], project)
    commands = documented_commands()
    assert commands[0] == "dvc repro" and commands[1].startswith("git add -A && git commit"), commands
    for line in commands:
        for part in line.split("&&"):
            args = shlex.split(part)
            if args[:3] == ["dvc", "exp", "run"]:
                args += [f"-S{o}" for o in TEST_OVERRIDES]
            if args[:2] == ["git", "commit"]:
                args[1:1] = ["-c", "user.email=test@example.com", "-c", "user.name=test"]
            run(args, project)
        if line.startswith("git add -A"):
            assert run(["git", "status", "--porcelain"], project).stdout == ""  # everything committed or ignored
            committed = set(run(["git", "ls-files"], project).stdout.split())
            assert {"dvc.lock", "params.yaml", "reports/metrics.json", "reports/plots/accuracy.svg"} <= committed
            assert not any(re.match(r"(state|data)/.*\.(sqlite|parquet|json)$", f) for f in committed)  # in DVC's cache
            baseline_metrics = json.loads((project / "reports/metrics.json").read_text())
            head = run(["git", "rev-parse", "HEAD"], project).stdout.strip()

    rows = _exp_rows(json.loads(run(["dvc", "exp", "show", "--json"], project).stdout))
    baseline = next(r for r in rows if r.get("rev") == head)
    assert _metrics(baseline)["test_hard_acc"] == baseline_metrics["test_hard_acc"]
    experiments = [r for r in rows if r.get("rev") not in (head, "workspace") and _metrics(r)]
    assert experiments, rows
    lambdas = [(((r["data"].get("params") or {}).get("params.yaml") or {}).get("data") or {}).get("gate", {}).get("lambda")
               for r in experiments]
    assert 2.0 in lambdas

    diff = json.loads(run(["dvc", "metrics", "diff", "--json", "--all"], project).stdout)["reports/metrics.json"]
    assert diff["test_hard_acc"]["old"] == baseline_metrics["test_hard_acc"]
    assert diff["rejected"]["old"] == baseline_metrics["rejected"]

    page = (project / "dvc_plots" / "index.html").read_text()
    for chart in ("accuracy.svg", "gate_evidence.svg", "cost.svg"):
        assert len(re.findall(rf'<img src="[^"]*{chart}"', page)) == 2, chart  # baseline and workspace

    run(["git", "checkout", "--", "."], project)
    run(["dvc", "checkout"], project)
    assert json.loads((project / "reports/metrics.json").read_text()) == baseline_metrics
