"""A run that cannot be evidence stops with one line on stderr and exit code 2, never a traceback:
nothing listening on the port, found by the provider's preflight before the first paid call (the scored-share guard
of a server that dies later: tests/pipeline/test_outage.py), in `stages.train` and in a DVC stage.
A bad configuration stops the same way, listing every violation, and leaves nothing behind: no run or
sweep directory, no lock file, no MLflow run; Hydra's own composition errors keep Hydra's form and status
and say "did you mean" for a misspelt key."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from harness.llm.local_server import free_port
from tests.pipeline.support import env, make_project

DEAD = ("llm=openai", "llm.max_retries=0", "llm.timeout_s=5", "llm.model=nobody")


def _dead_url() -> str:
    return f"http://127.0.0.1:{free_port()}/v1"  # a free port: the connection is refused


def _one_line(stderr: str, prefix: str) -> str:
    lines = [line for line in stderr.splitlines() if line.startswith(prefix)]
    assert len(lines) == 1 and "Traceback" not in stderr, stderr[-3000:]
    return lines[0]


def test_a_dead_server_in_stages_train_is_one_line(tmp_path):
    project = make_project(tmp_path / "project")
    done = subprocess.run([sys.executable, "-m", "stages.train", "train=tiny", "tracking=none", *DEAD,
                           f"llm.base_url={_dead_url()}", "hydra.run.dir=runs/job"],
                          cwd=project, env=env(), capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 2, done.stderr[-3000:]
    line = _one_line(done.stderr, "stages.train:")
    assert "nothing is listening at http://127.0.0.1:" in line and "(connection refused)" in line
    assert "timeout" not in line.lower() and "timed out" not in line.lower()


def test_a_dead_server_in_a_dvc_stage_is_one_line(tmp_path):
    project = make_project(tmp_path / "project", ("train=tiny", "tracking=none", *DEAD, f"llm.base_url={_dead_url()}"))
    run = [sys.executable, "-m"]
    steps = [["stages.prepare", "--out", "data/questions.parquet"],
             ["stages.pools", "--questions", "data/questions.parquet", "--out-pools", "data/pools.json", "--out-init", "state/init"],
             ["stages.batches", "--epoch", "1", "--prev", "state/init", "--pools", "data/pools.json", "--out", "state/e1/batches.json"]]
    for step in steps:
        ok = subprocess.run(run + step, cwd=project, env=env(), capture_output=True, text=True, timeout=300, check=False)
        assert ok.returncode == 0, ok.stderr[-2000:]
    done = subprocess.run(run + ["stages.rollout", "--epoch", "1", "--step", "1", "--prev", "state/init", "--batches",
                                 "state/e1/batches.json", "--out", "state/e1/s1/rollout"],
                          cwd=project, env=env(), capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 2, done.stderr[-3000:]
    line = _one_line(done.stderr, "stages.rollout@e1.s1:")
    assert "nothing is listening at http://127.0.0.1:" in line and "(connection refused)" in line
    assert not (project / "state/e1/s1/rollout/DONE.json").exists()


# -- configuration errors (issue 28 item 3): printed like Hydra's, nothing left behind -----------------------------

def _tree(project: Path) -> set[str]:
    """Every path under the project except git's and Python's own files."""
    return {p.relative_to(project).as_posix() for p in project.rglob("*")
            if ".git" not in p.parts and "__pycache__" not in p.parts}


@pytest.fixture(scope="module")
def config_project(tmp_path_factory) -> Path:
    """One project for the configuration-error commands; each must leave it exactly as it was."""
    return make_project(tmp_path_factory.mktemp("config-errors") / "project")


def _train(project: Path, *overrides: str) -> subprocess.CompletedProcess:
    # tracking stays on (the default, MLflow): a sweep's callback would open a parent run in mlflow.db
    return subprocess.run([sys.executable, "-m", "stages.train", "train=tiny", *overrides], cwd=project, env=env(),
                          capture_output=True, text=True, timeout=300, check=False)


@pytest.mark.parametrize("overrides,expected", [
    (("gate.rule=nonexistent",), "gate.rule = 'nonexistent': must be one of accept_all, betting"),
    (("+gate.foo=1",), "gate.foo = '<set>': unknown key"),
    (("+gate.lamda=2", "hydra.run.dir=runs/named"), "gate.lamda = '<set>': unknown key: not in the schema of gate "
                                                   "(harness/config/schema.py); did you mean gate.lambda?"),
    (("pools.val_correct_ratio=0.5", "llm.base_url=not-a-url"), "llm.base_url = 'not-a-url': must be an http(s) URL"),
    (("+sweep=gate_lambda", "gate.rule=nonexistent"), "every job of the sweep (4): invalid configuration"),  # conf/sweep/gate_lambda.yaml
    (("+sweep=gate_lambda", "gate.lambda=2.0,-1.0"), "1 of the sweep's 2 jobs (gate.lambda=-1.0"),
])
def test_a_config_error_in_stages_train_is_one_message_and_leaves_nothing(config_project: Path, overrides, expected) -> None:
    before = _tree(config_project)
    done = _train(config_project, *overrides)
    assert done.returncode == 2, done.stderr[-3000:]
    assert "Traceback" not in done.stderr and done.stderr.startswith("stages.train: "), done.stderr[-3000:]
    assert expected in done.stderr, done.stderr
    assert done.stdout == ""
    assert _tree(config_project) == before  # no runs/, multirun/, lock file, mlflow.db or MLflow run


def test_every_violation_is_listed(config_project: Path) -> None:
    done = _train(config_project, "pools.val_correct_ratio=0.5", "llm.base_url=not-a-url", "gate.rule=nonexistent")
    assert done.returncode == 2 and "invalid configuration (3 problems):" in done.stderr, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.startswith("  - ")]
    assert [line.split(" = ")[0].strip("- ") for line in lines] == ["llm.base_url", "pools.val_correct_ratio", "gate.rule"]


def test_hydras_own_error_keeps_its_status_and_gets_did_you_mean(config_project: Path) -> None:
    before = _tree(config_project)
    done = _train(config_project, "gate.lamda=2")
    assert done.returncode == 1, done.stderr[-3000:]  # Hydra's status for a composition error
    assert done.stderr.startswith("Could not override 'gate.lamda'.") and "Traceback" not in done.stderr, done.stderr
    assert "Did you mean gate.lambda?" in done.stderr
    assert _tree(config_project) == before


def test_a_config_error_in_a_dvc_stage_is_one_message(tmp_path) -> None:
    project = make_project(tmp_path / "project")
    params = project / "params.yaml"
    params.write_text(params.read_text().replace("val_correct_ratio: null", "val_correct_ratio: 0.5"))
    run = [sys.executable, "-m"]
    ok = subprocess.run(run + ["stages.prepare", "--out", "data/questions.parquet"], cwd=project, env=env(),
                        capture_output=True, text=True, timeout=300, check=False)
    assert ok.returncode == 2, ok.stderr[-2000:]  # every stage loads (and validates) the whole params.yaml
    line = _one_line(ok.stderr, "stages.prepare:")
    assert "bad configuration in params.yaml" in line
    assert "pools.val_correct_ratio = 0.5: must be null" in ok.stderr
    assert not (project / "data" / "questions.parquet").exists()
    params.write_text(params.read_text().replace("val_correct_ratio: 0.5", "val_correct_ratio: null")
                      .replace("\n  lambda: ", "\n  lamda: "))
    done = subprocess.run(run + ["stages.prepare", "--out", "data/questions.parquet"], cwd=project, env=env(),
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert "Key 'lamda' not in 'GateConfig'" in done.stderr and "Did you mean gate.lambda?" in done.stderr


def test_a_config_error_the_precheck_does_not_see_still_leaves_nothing(config_project: Path) -> None:
    """`--config-name` skips the pre-check (another config tree is the job's to check): the job's own ConfigError is
    one message, exit 2, and the job directory Hydra made (holding only .hydra/ and an empty log) is removed."""
    before = _tree(config_project)
    done = subprocess.run([sys.executable, "-m", "stages.train", "--config-name", "config", "train=tiny", "gate.rule=nonexistent"],
                          cwd=config_project, env=env(), capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 2, done.stderr[-3000:]
    assert _one_line(done.stderr, "stages.train:").startswith("stages.train: invalid configuration (1 problem):")
    assert _tree(config_project) == before


def test_a_starting_harness_that_is_not_a_harness_tree_is_refused_before_anything_is_written(config_project: Path,
                                                                                          tmp_path: Path) -> None:
    """`benchmark.harness_dir` is checked with the rest of the config: an empty directory or a tree with a non-UTF-8
    file is one line naming the key, the path and why, exit 2, and no run directory (it used to be a traceback)."""
    from tests.pipeline.support import questions_and_harness

    questions = questions_and_harness(tmp_path)
    (tmp_path / "empty").mkdir()
    (tmp_path / "latin").mkdir()
    (tmp_path / "latin" / "system_prompt.md").write_bytes("R\xe9ponds par une lettre.\n".encode("latin-1"))
    before = _tree(config_project)
    for tree, why in (("empty", "not a harness tree: no system_prompt.md"), ("latin", "system_prompt.md")):
        done = subprocess.run([sys.executable, "-m", "stages.train", "benchmark=jsonl", f"benchmark.path={questions}",
                               "llm=openai", f"llm.base_url={_dead_url()}", f"benchmark.harness_dir={tmp_path / tree}",
                               "tracking=none"], cwd=config_project, env=env(), capture_output=True, text=True,
                              timeout=300, check=False)
        assert done.returncode == 2, done.stderr[-3000:]
        assert "Traceback" not in done.stderr and done.stderr.startswith("stages.train: "), done.stderr[-3000:]
        assert f"benchmark.harness_dir = '{tmp_path / tree}': " in done.stderr and why in done.stderr, done.stderr
        assert _tree(config_project) == before
