"""Inputs DVC must hash by content, not by the path string in params.yaml (issue 28 item 5).

Real DVC in temporary git repositories: the seed directory `train.init_seed` names, replaced at the same path,
makes `pools` changed and `dvc repro` starts from the new seed (dep `${train.init_source}`); a file a manifest task
names (under `improve.tasks_dir`, by default the manifest's directory) makes `improve@<domain>` changed and re-run
(deps `${improve.manifest_source}`, `${improve.tasks_source}`). Without DVC: stages.improve refuses a manifest
task naming a file outside that directory, naming improve.tasks_dir.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
import yaml

from tests.pipeline.support import TEST_OVERRIDES, make_project, run


def _status(project: Path, stage: str) -> dict:
    return json.loads(run(["dvc", "status", stage, "--json"], project).stdout or "{}")


def _write_seed(seed_dir: Path, marker: str) -> None:
    from harness.store import init_seed
    from harness.tree import HarnessTree

    skills = HarnessTree({"default-strategy/SKILL.md": f"---\nname: default-strategy\ndescription: any question\n---\nRead twice, {marker}.\n"})
    prompts = HarnessTree({"system_prompt.md": "You answer multiple-choice questions.\n"})
    init_seed(seed_dir, skills, prompts, "data/questions.parquet@sha256:test", {"from": "test"})


@pytest.mark.slow
def test_a_seed_replaced_at_the_same_path_reruns_pools_and_training_starts_from_it(tmp_path: Path) -> None:
    seed = tmp_path / "made" / "seed"
    _write_seed(seed, "first-seed")
    files = {f"seeds/s1/{p.relative_to(seed).as_posix()}": p for p in seed.rglob("*") if p.is_file()}
    project = make_project(tmp_path / "project", overrides=(*TEST_OVERRIDES, "train.init_seed=seeds/s1"), files=files)
    params = yaml.safe_load((project / "params.yaml").read_text())
    assert params["train"]["init_source"] == "seeds/s1"
    run(["dvc", "repro", "pools"], project)
    init = project / params["train"]["state_dir"] / "init"

    def starts_from(text: str) -> bool:
        return any(text in p.read_text(encoding="utf-8", errors="replace") for p in init.rglob("*") if p.is_file())

    assert starts_from("first-seed")
    assert _status(project, "pools") == {}
    shutil.rmtree(project / "seeds" / "s1")  # a new seed exported to the same path: params.yaml does not change
    _write_seed(project / "seeds" / "s1", "second-seed")
    assert _status(project, "pools") == {"pools": [{"changed deps": {"seeds/s1": "modified"}}]}
    assert "Running stage 'pools'" in run(["dvc", "repro", "pools"], project).stdout
    assert starts_from("second-seed") and not starts_from("first-seed")


AGENT = """import pathlib, sys
wd = pathlib.Path(sys.argv[1])
total = sum(float(x) for x in (wd / "data.csv").read_text().split())
(wd / "out.md").write_text(f"total {total}\\n")
print(f"total {total}")
"""


def _task_files(root: Path) -> dict[str, Path]:
    """A one-task manifest under tasks/ (prompt file, source dir, base harness) and a fake CLI agent outside it."""
    (root / "base").mkdir(parents=True)
    (root / "src").mkdir()
    (root / "base" / "AGENTS.md").write_text("# Agent\nAdd the numbers.\n")
    (root / "src" / "data.csv").write_text("1 2 3\n")
    (root / "prompt.md").write_text("Sum the numbers in data.csv.\n")
    (root / "manifest.yaml").write_text(
        "tasks:\n  - {id: sum-1, domain: acc, prompt_file: prompt.md, source_dir: src, base_harness_dir: base}\n")
    (root / "agent.py").write_text(AGENT)
    files = {f"tasks/{n}": root / n for n in ("manifest.yaml", "prompt.md", "src/data.csv", "base/AGENTS.md")}
    return {**files, "tools/agent.py": root / "agent.py"}


@pytest.mark.slow
def test_editing_a_file_a_manifest_task_names_reruns_its_improve_stage(tmp_path: Path) -> None:
    files = _task_files(tmp_path / "made")
    overrides = (*TEST_OVERRIDES, "improve=command", "improve.manifest=tasks/manifest.yaml", "improve.domains=[acc]",
                 f"improve.command.command=['{sys.executable}','tools/agent.py','{{workdir}}']")
    project = make_project(tmp_path / "project", overrides=overrides, files=files)
    params = yaml.safe_load((project / "params.yaml").read_text())
    assert (params["improve"]["manifest_source"], params["improve"]["tasks_source"]) == ("tasks/manifest.yaml", "tasks")
    # the agent runs in a fresh worktree: its script path must not be relative to the project
    params["improve"]["command"]["command"][1] = str(project / "tools" / "agent.py")
    (project / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    run(["git", "-c", "user.email=t@example.com", "-c", "user.name=t", "commit", "-qam", "agent path"], project)
    first = run(["dvc", "repro", "improve@acc"], project)
    assert "Running stage 'improve@acc'" in first.stdout
    assert _status(project, "improve@acc") == {}

    (project / "tasks" / "src" / "data.csv").write_text("1 2 3 4\n")  # a file of the task's source_dir
    assert _status(project, "improve@acc") == {"improve@acc": [{"changed deps": {"tasks": "modified"}}]}
    assert "Running stage 'improve@acc'" in run(["dvc", "repro", "improve@acc"], project).stdout
    assert _status(project, "improve@acc") == {}

    manifest = project / "tasks" / "manifest.yaml"
    manifest.write_text(manifest.read_text() + "# reviewed\n")  # the manifest itself (also inside tasks/)
    status = _status(project, "improve@acc")
    assert status == {"improve@acc": [{"changed deps": {"tasks/manifest.yaml": "modified", "tasks": "modified"}}]}, status


def test_a_manifest_task_naming_a_file_outside_the_tasks_dir_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    from omegaconf import OmegaConf

    from harness.config.load import load_config
    from stages import improve

    monkeypatch.chdir(tmp_path)
    _task_files(tmp_path / "tasks")
    shutil.move(tmp_path / "tasks" / "src", tmp_path / "elsewhere")
    (tmp_path / "tasks" / "manifest.yaml").write_text(
        "tasks:\n  - {id: sum-1, domain: acc, prompt_file: prompt.md, source_dir: ../elsewhere, base_harness_dir: base}\n")
    cfg = load_config([*TEST_OVERRIDES, "improve=command", "improve.manifest=tasks/manifest.yaml", "improve.domains=[acc]",
                       f"improve.command.command=['{sys.executable}','x.py','{{workdir}}']"], env_file=None, environ={})
    (tmp_path / "params.yaml").write_text(OmegaConf.to_yaml(cfg))
    assert improve.main([]) == 2
    err = capsys.readouterr().err
    assert "task 'sum-1' source_dir" in err and "lies outside the manifest's directory (improve.tasks_dir is null)" in err
    assert "set improve.tasks_dir" in err
