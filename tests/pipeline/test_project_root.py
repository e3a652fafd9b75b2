"""The project root is found, not assumed (issue 17 item 7).

Entry points started anywhere inside the project work in its root (nothing is written where they were
started); started outside any project they stop with a message saying where to run, and, without a git
repository, how to start one. Real processes in copies of the project; one tiny training run.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from harness.config.project import find_project_root, how_to_start_git, no_git_warning, not_found_message
from tests.pipeline.support import BIN, TEST_OVERRIDES, env, make_project


def _tree(path: Path) -> list[str]:
    return sorted(p.relative_to(path).as_posix() for p in path.rglob("*"))


def _python(args: list[str], cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / "python"), *args], cwd=cwd, env=env(), capture_output=True, text=True,
                          timeout=timeout, check=False)


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = make_project(tmp_path_factory.mktemp("root") / "project")
    (root / "docs").mkdir()
    (root / "docs" / "notes.md").write_text("a user's file\n")
    return root


def test_root_is_found_from_a_nested_directory_and_not_outside(project: Path, tmp_path: Path) -> None:
    nested = project / "docs" / "deeper"
    nested.mkdir(exist_ok=True)
    assert find_project_root(nested) == project
    assert find_project_root(project) == project
    assert find_project_root(tmp_path) is None
    (tmp_path / "dvc.yaml").write_text("stages: {}\n")  # dvc.yaml alone (no conf/config.yaml) is not our project
    assert find_project_root(tmp_path) is None
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "config.yaml").write_text("defaults: []\n")  # the config tree is (stages.train needs no DVC)
    assert find_project_root(tmp_path / "conf") == tmp_path


def test_messages_say_where_to_run_and_how_to_start_git(project: Path, tmp_path: Path) -> None:
    message = not_found_message("stages.train", tmp_path)
    assert str(tmp_path) in message and "dvc.yaml" in message
    assert "git init && dvc init" in message and "git clone" in message  # no git repository above tmp_path
    assert "git init && dvc init" not in not_found_message("stages.train", project / "docs")  # inside a git repo
    assert no_git_warning(project) is None
    copy = tmp_path / "unpacked"
    (copy / ".dvc").mkdir(parents=True)
    warning = no_git_warning(copy)
    assert warning is not None and "`git init`" in warning and "dvc init" not in warning  # .dvc/ is there already
    assert "`git init && dvc init`" in how_to_start_git(tmp_path / "bare")


def test_help_from_a_subdirectory_lists_groups_overrides_and_the_sweep(project: Path) -> None:
    before = _tree(project / "docs")
    done = _python(["-m", "stages.train", "--help"], project / "docs", timeout=120)
    assert done.returncode == 0, done.stderr
    text = done.stdout
    for group in ("benchmark: jsonl, sim", "gate: accept_all", "llm: openai, sim", "train: default, tiny", "sweep: gate_lambda"):
        assert group in text, group
    for override in ("+sweep=gate_lambda", "gate.lambda=", "train=tiny", "llm=openai", "benchmark=jsonl", "tracking=none"):
        assert override in text, override
    assert f"running in the project root {project}" in done.stderr
    assert _tree(project / "docs") == before


def test_outside_a_project_entry_points_refuse_and_write_nothing(tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    for args in (["-m", "stages.train", "train=tiny"], ["-m", "harness.config.snapshot"]):
        done = _python(args, outside, timeout=120)
        assert done.returncode == 2, (args, done.stdout, done.stderr)
        assert "is not inside a Harness Trainer project" in done.stderr and "git init && dvc init" in done.stderr
    assert _tree(outside) == []


def test_a_stage_started_in_a_subdirectory_names_the_root(project: Path) -> None:
    before = _tree(project / "docs")
    done = _python(["-m", "stages.report", "--out", "reports"], project / "docs", timeout=120)
    assert done.returncode == 2
    assert f"cd {project}" in done.stderr and "params.yaml not found" in done.stderr
    assert _tree(project / "docs") == before


def test_snapshot_from_a_subdirectory_writes_the_root_params(project: Path) -> None:
    params = project / "params.yaml"
    params.write_text("stale: true\n")
    done = _python(["-m", "harness.config.snapshot", *TEST_OVERRIDES], project / "docs", timeout=120)
    assert done.returncode == 0, done.stderr
    assert "stale" not in params.read_text() and "run_name: tiny" in params.read_text()
    assert not (project / "docs" / "params.yaml").exists()


@pytest.mark.slow
def test_training_from_docs_writes_runs_caches_and_mlflow_in_the_root(project: Path, mlflow_db: Path) -> None:
    shutil.copy2(mlflow_db, project / "mlflow.db")  # a migrated store (creating one costs seconds)
    before = _tree(project / "docs")
    overrides = [o for o in TEST_OVERRIDES if o != "tracking=none"] + ["hydra.run.dir=runs/from_docs"]
    done = _python(["-m", "stages.train", *overrides], project / "docs")
    assert done.returncode == 0, done.stderr[-3000:]
    assert _tree(project / "docs") == before  # no mlflow.db, mlruns/, .cache/, runs/ next to the user's file
    assert (project / "runs/from_docs/reports/metrics.json").is_file()
    assert (project / ".cache/llm").is_dir()
    assert (project / "mlruns").is_dir() or (project / "mlflow.db").stat().st_size > mlflow_db.stat().st_size
