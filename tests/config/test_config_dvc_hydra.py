"""`dvc exp run -S ...` composes conf/ through DVC's Hydra integration (plugin resolvers included)
and `foreach` over the resolved schedule in params.yaml works."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO_ROOT

DVC_YAML = """\
stages:
  step:
    foreach: ${train.schedule}
    do:
      cmd: echo ${item.prev} ${gate.lambda} > out_e${item.epoch}_s${item.step}.txt
      params:
        - gate.lambda
      outs:
        - out_e${item.epoch}_s${item.step}.txt
"""


def _run(args: list[str], cwd: Path) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HT__")}
    env.update(DVC_NO_ANALYTICS="1", GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t.invalid",
               GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@t.invalid")
    done = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, f"{args}: {done.stdout}\n{done.stderr}"
    return done.stdout


@pytest.mark.slow
def test_dvc_exp_run_set_param_recomposes_params_and_foreach_follows(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    shutil.copytree(REPO_ROOT / "conf", repo / "conf")
    shutil.copytree(REPO_ROOT / "hydra_plugins", repo / "hydra_plugins", ignore=shutil.ignore_patterns("__pycache__"))
    (repo / "dvc.yaml").write_text(DVC_YAML)
    dvc = [sys.executable, "-m", "dvc"]
    _run(["git", "init", "-q"], repo)
    _run([*dvc, "init", "-q"], repo)
    _run([*dvc, "config", "hydra.enabled", "true"], repo)
    _run([sys.executable, "-m", "harness.config.snapshot", "train=tiny"], repo)
    _run(["git", "add", "-A"], repo)
    _run(["git", "commit", "-qm", "init"], repo)

    _run([*dvc, "exp", "run", "-S", "train=tiny", "-S", "gate.lambda=2.0", "-S", "train.epochs=1"], repo)

    params = yaml.safe_load((repo / "params.yaml").read_text())
    assert params["gate"]["lambda"] == 2.0
    assert [(item["epoch"], item["step"]) for item in params["train"]["schedule"]] == [(1, 1), (1, 2)]
    assert (repo / "out_e1_s2.txt").read_text().split() == ["state/e1/s1/gate", "2.0"]
    assert not (repo / "out_e2_s1.txt").exists()
