"""Every key that passes validation can run (issue 28 item 3).

Each case sets documented keys to extreme values on `train=tiny` (sim
benchmark, tracking=none) and either runs the whole tiny training to the
holdout in a temporary project directory, or is refused at load with a
ConfigError naming the key. A value that passes validation and then crashes a
stage fails here.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from harness.config.errors import ConfigError
from harness.config.load import load_config

REPO_ROOT = Path(__file__).resolve().parents[2]
CONF = REPO_ROOT / "conf"

# (overrides, the key a ConfigError must name; None: the tiny training must run to the end)
CASES = [
    (("pools.val_correct_ratio=0.0",), "pools.val_correct_ratio"),
    (("pools.val_correct_ratio=1.0",), "pools.val_correct_ratio"),
    (("pools.val_correct_ratio=0.5",), "pools.val_correct_ratio"),
    (("train.state_dir=.",), "train.state_dir"),
    (("train.state_dir=./",), "train.state_dir"),
    (("improve.out_dir=.",), "improve.out_dir"),
    (("llm.base_url=not-a-url",), "llm.base_url"),
    (("gate.max_pairs=1",), "gate.max_pairs"),  # tiny's block_size is 3: not even one block
    (("benchmark.n_task_types=12", "pools.val_size=24"), "benchmark.n_task_types"),
    (("benchmark.n_choices=7",), "benchmark.n_choices"),
    (("gate.accept_prior_points=1",), "gate.accept_prior_points"),  # a one-point grid with low != high
    (("gate.max_pairs=1", "gate.block_size=1", "gate.mcnemar_n=1"), None),
    (("gate.block_size=12",), None),  # = tiny's gate.max_pairs: one block is the whole budget
    (("train.epochs=1",), None),
    (("gate.lambda=1e300",), None),
    (("gate.accept_prior_points=1", "gate.accept_prior_low=0.6", "gate.accept_prior_high=0.6"), None),
    (("benchmark.n_choices=6", "llm.base_url=http://127.0.0.1:9/v1"), None),  # sim: base_url is never called
]


@pytest.fixture
def project(tmp_path, monkeypatch) -> Path:
    """An empty project directory as the working directory (output paths are checked against it)."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _load(*overrides: str):
    return load_config(["train=tiny", "tracking=none", *overrides], config_dir=CONF, env_file=None, environ={})


@pytest.mark.parametrize("overrides,refused_key", CASES, ids=[" ".join(o) for o, _ in CASES])
def test_an_extreme_value_runs_or_is_refused_at_load(project: Path, overrides: tuple[str, ...], refused_key: str | None) -> None:
    if refused_key is not None:
        with pytest.raises(ConfigError) as info:
            _load(*overrides)
        assert refused_key in info.value.keys, str(info.value)
        assert not any(project.iterdir())  # refused before anything was written
        return
    from harness.loop.context import make_context
    from harness.loop.runner import train

    cfg = _load(*overrides)
    ctx = make_context(cfg, project)
    try:
        result = train(ctx)
    finally:
        ctx.close()
    assert result["n_test"] == int(cfg.pools.test_size) and 0.0 <= result["test"]["delivered"] <= 1.0, result
    assert (project / str(cfg.train.state_dir) / "holdout" / "DONE.json").is_file()


def _questions_file(path: Path, task_type: str, n: int = 12) -> Path:
    rows = [{"qid": f"q{i}", "task_type": task_type if i % 2 else "plain", "question": f"question {i}?",
             "answer": "A", "choices": ["yes", "no"]} for i in range(n)]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def _jsonl(path: Path) -> tuple[str, ...]:
    return ("benchmark=jsonl", f"benchmark.path={path.name}", "llm=openai", "llm.base_url=http://127.0.0.1:9/v1",
            "pools.test_size=2", "pools.val_size=4", "pools.diagnosis_size=2", "pools.eval_min_per_class=1")


def test_a_300_character_task_type_is_refused_at_load_naming_the_file(project: Path) -> None:
    path = _questions_file(project / "questions.jsonl", "t" * 300)
    with pytest.raises(ConfigError) as info:
        _load(*_jsonl(path))
    assert info.value.keys == ["benchmark.path"]
    assert "at most 100 characters, got 300" in str(info.value) and "skills/<task_type>/SKILL.md" in str(info.value)
    assert len(str(info.value)) < 600  # the name is shown cut, not 300 characters long


def test_a_100_character_task_type_loads_and_names_a_skill_folder(project: Path) -> None:
    from harness.bench.jsonl import with_task_type_skills
    from harness.tree import HarnessTree

    name = "t" * 100
    cfg = _load(*_jsonl(_questions_file(project / "questions.jsonl", name)))
    assert cfg.benchmark.name == "jsonl"
    tree = with_task_type_skills(HarnessTree({"system_prompt.md": "x"}), [name])
    tree.save(project / "tree")  # the folder name fits the file system
    assert (project / "tree" / "skills" / name / "SKILL.md").is_file()


def test_the_sim_limits_of_validation_are_the_worlds() -> None:
    from harness.config.validate import SIM_MAX_CHOICES, SIM_MAX_TASK_TYPES
    from harness.sim.world import TASK_TYPE_NAMES, WorldParams, _generate

    assert SIM_MAX_TASK_TYPES == len(TASK_TYPE_NAMES)
    base = WorldParams()
    _generate(0, _replace(base, n_choices=SIM_MAX_CHOICES))
    with pytest.raises(ValueError, match="n_choices"):
        _generate(0, _replace(base, n_choices=SIM_MAX_CHOICES + 1))


def _replace(params, **changes):
    import dataclasses

    return dataclasses.replace(params, **changes)


def test_state_dir_dot_is_refused_against_the_working_directory_only(project: Path) -> None:
    """`train.state_dir=.` names the project root in params.yaml (refused); under a job dir it is that dir (allowed):
    stages.train rebases outputs under runs/<name>/<time>/ before validating."""
    with pytest.raises(ConfigError, match="is the project root"):
        _load("train.state_dir=.")
    cfg = _load("train.state_dir=runs/job/.")
    assert cfg.train.state_dir == "runs/job/."
    assert os.path.normpath(cfg.train.state_dir) == os.path.join("runs", "job")
