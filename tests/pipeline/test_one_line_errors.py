"""A run that cannot be evidence stops with one line on stderr and exit code 2, never a traceback:
the INFRA guard (every request refused: nothing listens on the port) in `stages.train` and in a DVC stage."""

from __future__ import annotations

import subprocess
import sys

from harness.llm.local_server import free_port
from tests.pipeline.support import env, make_project

DEAD = ("llm=openai", "llm.max_retries=0", "llm.timeout_s=5", "llm.model=nobody")


def _dead_url() -> str:
    return f"http://127.0.0.1:{free_port()}/v1"  # a free port: the connection is refused


def _one_line(stderr: str, prefix: str) -> str:
    lines = [line for line in stderr.splitlines() if line.startswith(prefix)]
    assert len(lines) == 1 and "Traceback" not in stderr, stderr[-3000:]
    return lines[0]


def test_an_infra_abort_in_stages_train_is_one_line(tmp_path):
    project = make_project(tmp_path / "project")
    done = subprocess.run([sys.executable, "-m", "stages.train", "train=tiny", "tracking=none", *DEAD,
                           f"llm.base_url={_dead_url()}", "hydra.run.dir=runs/job"],
                          cwd=project, env=env(), capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 2, done.stderr[-3000:]
    line = _one_line(done.stderr, "stages.train:")
    assert "failed for infrastructure reasons" in line and "gate.infra_max_ratio" in line


def test_an_infra_abort_in_a_dvc_stage_is_one_line(tmp_path):
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
    assert "failed for infrastructure reasons" in line
    assert not (project / "state/e1/s1/rollout/DONE.json").exists()
