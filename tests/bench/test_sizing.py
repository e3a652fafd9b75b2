"""Sizes that fit the user's questions (harness/bench/sizing.py, conf/pools/jsonl.yaml, conf/batching/jsonl.yaml)."""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.bench.sizing import MAX_POOL_SIZE, SizingError, check_sizes, fit_sizes, size_violations
from harness.config.errors import ConfigError
from harness.kernel.batching import BatchParams, make_batches
from harness.kernel.pools import split_pools

REPO_ROOT = Path(__file__).resolve().parents[2]


def write_questions(path: Path, counts: dict[str, int]) -> Path:
    rows = [{"qid": f"{t}-{i}", "task_type": t, "question": f"Question {i} about {t}?", "choices": ["w", "x", "y", "z"],
             "answer": "ABCD"[i % 4]} for t, n in counts.items() for i in range(n)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_fitted_sizes_always_split_and_batch_on_random_data() -> None:
    rng = random.Random(20261202)
    for _ in range(150):
        counts = {f"t{k}": rng.randint(3, 300) for k in range(rng.choice([1, 2, 4, 11, 30]))}
        sizes = fit_sizes(counts)
        questions = [(f"t{k}#{i}", t) for k, (t, n) in enumerate(counts.items()) for i in range(n)]
        pools = split_pools(questions, test_size=sizes.test_size, val_size=sizes.val_size, diagnosis_size=sizes.diagnosis_size,
                            eval_min_per_class=sizes.eval_min_per_class, seed=rng.randint(0, 99))
        assert len(pools.diagnosis) == sizes.diagnosis_size >= 1, counts
        assert max(sizes.test_size, sizes.val_size, sizes.diagnosis_size) <= max(MAX_POOL_SIZE, len(counts))
        assert 1 <= sizes.min_class_per_batch < sizes.batch_size
        batches = make_batches({q: pools.task_type_of[q] for q in pools.diagnosis}, BatchParams(sizes.batch_size, sizes.min_class_per_batch),
                               epoch=1, seed=0)
        assert len(batches.batches) == -(-sizes.diagnosis_size // sizes.batch_size) <= 5
        assert size_violations(counts, test_size=sizes.test_size, val_size=sizes.val_size, diagnosis_size=sizes.diagnosis_size,
                               eval_min_per_class=sizes.eval_min_per_class) == []


def test_a_task_type_too_small_to_split_is_named_with_the_fix() -> None:
    with pytest.raises(SizingError) as info:
        fit_sizes({"algebra": 30, "poetry": 2}, source="q.jsonl")
    message = str(info.value)
    assert "'poetry' has 2 question(s)" in message and "benchmark.task_types=[algebra]" in message


def test_hand_set_sizes_that_do_not_fit_name_the_keys_and_values_that_do() -> None:
    counts = {"a": 25, "b": 25, "c": 25, "d": 25}
    with pytest.raises(SizingError) as info:
        check_sizes(counts, test_size=220, val_size=220, diagnosis_size=220, eval_min_per_class=20, source="q.jsonl")
    message = str(info.value)
    assert "pools.test_size=220" in message and "values that fit: pools.test_size=33 pools.val_size=33 pools.diagnosis_size=34" in message
    check_sizes(counts, test_size=33, val_size=33, diagnosis_size=34, eval_min_per_class=8, source="q.jsonl")


def test_jsonl_config_derives_sizes_from_the_file_and_refuses_misfits(tmp_path: Path, compose_cfg) -> None:
    path = write_questions(tmp_path / "q.jsonl", {"algebra": 25, "biology": 25, "geography": 25, "history": 25})
    cfg = compose_cfg(["benchmark=jsonl", f"benchmark.path={path}", "llm=openai"], tiny=False)
    assert (cfg.pools.test_size, cfg.pools.val_size, cfg.pools.diagnosis_size, cfg.pools.eval_min_per_class) == (33, 33, 34, 8)
    assert (cfg.batching.batch_size, cfg.batching.min_class_per_batch, cfg.train.steps_per_epoch) == (7, 2, 5)
    subset = compose_cfg(["benchmark=jsonl", f"benchmark.path={path}", "benchmark.task_types=[algebra,history]", "llm=openai"],
                         tiny=False)
    assert (subset.pools.test_size, subset.pools.diagnosis_size) == (16, 18)
    with pytest.raises(ConfigError) as info:
        compose_cfg(["benchmark=jsonl", f"benchmark.path={path}", "pools.test_size=60", "llm=openai"], tiny=False)
    assert info.value.keys == ["pools"] and "only 7 questions remain" in str(info.value) and "pools.test_size=33" in str(info.value)
    with pytest.raises(ConfigError) as info:  # the sim's sizes (train=tiny sets them by hand) checked against the file too
        compose_cfg(["benchmark=jsonl", f"benchmark.path={write_questions(tmp_path / 'small.jsonl', {'a': 4, 'b': 4})}",
                     "llm=openai"])
    assert "values that fit: pools.test_size=2 pools.val_size=2 pools.diagnosis_size=4 pools.eval_min_per_class=1" in str(info.value)


def test_a_missing_questions_file_is_named_at_load(tmp_path: Path, compose_cfg) -> None:
    with pytest.raises(ConfigError) as info:
        compose_cfg(["benchmark=jsonl", f"benchmark.path={tmp_path / 'nope.jsonl'}"], tiny=False)
    assert "nope.jsonl: no such file" in str(info.value) and "pools.test_size" in str(info.value)


def test_readme_real_run_command_works_verbatim_on_a_100_question_file(project_dir: Path) -> None:
    """README "A real run": the documented command, only the server's port changed, against a real HTTP server."""
    from tests.support.openai_server import FakeOpenAIServer

    (project_dir / "data").mkdir()
    shutil.copy2(REPO_ROOT / "dvc.yaml", project_dir / "dvc.yaml")  # stages.train runs from a project root (dvc.yaml + conf/)
    write_questions(project_dir / "data" / "my_questions.jsonl", {"algebra": 25, "biology": 25, "geography": 25, "history": 25})
    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    block = readme.split("### A real run", 1)[1].split("```bash", 1)[1].split("```", 1)[0]
    command = " ".join(line.rstrip("\\").strip() for line in block.splitlines() if line.strip() and not line.startswith("export"))
    assert command.startswith("python -m stages.train llm=openai benchmark=jsonl"), command
    with FakeOpenAIServer() as server:
        argv = [sys.executable if word == "python" else word for word in command.split()]
        argv = [f"llm.base_url={server.base_url}" if word.startswith("llm.base_url=") else word for word in argv]
        env = {**os.environ, "OPENAI_API_KEY": "sk-test-local", "PYTHONPATH": str(REPO_ROOT)}
        done = subprocess.run(argv, cwd=project_dir, env=env, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-3000:]
        assert server.n_requests > 0
    (job,) = (project_dir / "runs" / "default").iterdir()  # stages.train runs under runs/<run_name>/<time>/
    pools = json.loads((job / "data" / "pools.json").read_text())
    assert (len(pools["test"]), len(pools["validation"]), len(pools["diagnosis"])) == (33, 33, 34)
    assert json.loads((job / "reports" / "metrics.json").read_text())["rollouts"] > 0
