"""A training run delivers the same thing in every Python process: nothing it decides may follow the order of a `set`
of str, which changes with PYTHONHASHSEED (a new seed per process unless set). On this configuration the simulated
editor's trap deletion drew from a set before 0b40a36, and two runs under PYTHONHASHSEED 1 and 2 gave different
metrics (checked on the commit before the fix); the LLM response cache is per run here, since a shared one would
replay the first run's editor replies and hide the difference. World seed 2: its editor deletes traps (seed 3 did until the
editor saw the choices, issue 32, and stopped deleting there)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.pipeline.support import BIN, REPO_ROOT, run

OVERRIDES = ("train=tiny", "gate=accept_all", "benchmark.seed=2", "tracking=none", "quiet=true", "train.epochs=6",
             "train.early_stop_patience=6")


def _train(tmp_path: Path, hash_seed: str) -> Path:
    out = tmp_path / f"run{hash_seed}"
    run([str(BIN / "python"), "-m", "stages.train", *OVERRIDES, f"llm.cache_dir={out}/llmcache", f"hydra.run.dir={out}"],
        REPO_ROOT, extra_env={"PYTHONHASHSEED": hash_seed})
    return out


def test_the_same_run_in_two_processes_with_other_hash_seeds_delivers_the_same(tmp_path: Path) -> None:
    first, second = _train(tmp_path, "1"), _train(tmp_path, "2")
    assert (first / "reports/metrics.json").read_bytes() == (second / "reports/metrics.json").read_bytes()
    ops = [op for f in sorted((first / "state").rglob("evolve.json")) for op in _ops(json.loads(f.read_text()))]
    assert "delete" in ops  # the editor deleted stated traps: the choice among them was exercised


def _ops(node: object) -> list[str]:
    """Every edit op ("add", "replace", "delete") anywhere in a JSON document."""
    if isinstance(node, dict):
        own = [node["op"]] if isinstance(node.get("op"), str) else []
        return own + [op for value in node.values() for op in _ops(value)]
    if isinstance(node, list):
        return [op for value in node for op in _ops(value)]
    return []
