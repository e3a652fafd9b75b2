"""One skill file per task type (issue 14 item 1): the base harness of benchmark=jsonl, new skill files, a real-path run."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import make_runner, tiny_cfg

from harness.bench.jsonl import DEFAULT_STRATEGY, JsonlBenchmark, with_task_type_skills
from harness.bench.scoring import load_scorer
from harness.kernel.types import CaseSample
from harness.loop.stages.evolve import skill_groups
from harness.questions import Question, QuestionsError
from harness.store import read_version_tree
from harness.tree import HarnessTree

REPO_ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = REPO_ROOT / "examples" / "own-run" / "questions.jsonl"


def _questions(*task_types: str) -> list[Question]:
    return [Question(qid=f"{t}-{i}", task_type=t, question=f"{t} {i}?", answer="A", choices=("a", "b")) for t in task_types for i in range(3)]


def test_jsonl_base_harness_has_one_skill_per_task_type() -> None:
    bench = JsonlBenchmark(_questions("algebra", "history"), scorer=load_scorer("exact"))
    skills = sorted(p for p in bench.base_harness() if p.startswith("skills/"))
    assert skills == ["skills/algebra/SKILL.md", "skills/history/SKILL.md"]
    text = bench.base_harness()["skills/algebra/SKILL.md"]
    assert "name: algebra" in text and "## Rules" in text  # edits add bullets to the Rules section


def test_user_harness_keeps_its_skills_and_seeds_the_rest_from_its_default_strategy() -> None:
    own = "---\nname: default-strategy\ndescription: mine\n---\n\n## Rules\n- My house rule.\n"
    base = HarnessTree({"system_prompt.md": "Mine.", "skills/algebra/SKILL.md": "Algebra rules.", "skills/default-strategy/SKILL.md": own})
    tree = with_task_type_skills(base, ["algebra", "history"])
    assert tree["skills/algebra/SKILL.md"] == "Algebra rules."
    assert tree["skills/history/SKILL.md"] == own.replace("name: default-strategy", "name: history")
    assert tree["skills/default-strategy/SKILL.md"] == own  # the user's file is theirs: kept
    assert "default-strategy" in DEFAULT_STRATEGY


def test_a_task_type_that_cannot_name_a_folder_is_refused() -> None:
    with pytest.raises(QuestionsError, match="task type 'a/b' cannot name a skill folder"):
        JsonlBenchmark(_questions("a/b"), scorer=load_scorer("exact"))


def _case(task_type: str, n: int) -> CaseSample:
    return CaseSample(qid=f"{task_type}{n}", task_type=task_type, question="?", answer="A", predicted="B", correct=False, trace_excerpt="")


def test_skill_groups_split_a_task_type_off_the_shared_file_only_with_enough_failures() -> None:
    groups = [("default-strategy/SKILL.md", ["art", "music", "poetry"]), ("math/SKILL.md", ["math"])]
    failures = {"art": [_case("art", 1), _case("art", 2)], "music": [_case("music", 1)], "math": [_case("math", 1), _case("math", 2)]}
    assert skill_groups(groups, failures, 0) == [(f, tts, None) for f, tts in groups]
    assert skill_groups(groups, failures, 2) == [
        ("art/SKILL.md", ["art"], "default-strategy/SKILL.md"),
        ("math/SKILL.md", ["math"], None),  # a task type's own file is never split
        ("default-strategy/SKILL.md", ["music", "poetry"], None),  # by first task type, as the step's sample indices
    ]


def test_the_editor_proposes_new_skill_files_on_the_sim_and_the_gate_installs_them(tmp_path: Path) -> None:
    # 9 sim task types: 7 have their own base skill, 2 read default-strategy (harness/sim/world.py base_skill_types)
    cfg = tiny_cfg("tracking=none", "benchmark.n_task_types=9", "pools.test_size=18", "pools.val_size=27", "pools.eval_min_per_class=2",
                   "pools.diagnosis_size=36", "batching.batch_size=18", "evolve.new_skill_min_failures=2", "train.epochs=1")
    runner, _, cache = make_runner(tmp_path, cfg)
    runner.train()
    cache.close()
    base_skills = {p for p in runner.ctx.bench().base_harness() if p.startswith("skills/")}
    new_rows = []
    for step in (1, 2):
        evolve = json.loads((tmp_path / "state" / "e1" / f"s{step}" / "evolve" / "evolve.json").read_text())
        for cand in evolve["candidates"]:
            if f"skills/{cand['skill_file']}" not in base_skills:
                assert cand["record"]["old_text"] == "" and cand["task_types"] == [cand["task_type"]]
                new_rows.append(cand["skill_file"])
    assert new_rows, "no new skill file was proposed"
    report = json.loads((tmp_path / "state" / "e1" / "s1" / "gate" / "report.json").read_text())
    actions = {row["skill_file"]: row["action"] for row in report["skills"]}
    assert set(new_rows) & set(actions), (new_rows, actions)


def _train(root: Path, base_url: str, *overrides: str) -> subprocess.CompletedProcess:
    argv = [sys.executable, "-m", "stages.train", "llm=openai", "benchmark=jsonl", f"llm.base_url={base_url}", "llm.model=scripted",
            "benchmark.path=data/q.jsonl", "tracking=none", "train.epochs=1", *overrides]
    return subprocess.run(argv, cwd=root, env={**os.environ, "OPENAI_API_KEY": "sk-local", "PYTHONPATH": str(REPO_ROOT)},
                          capture_output=True, text=True, timeout=600)


def _cli(root: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], cwd=root, env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
                          capture_output=True, text=True, timeout=120)


def test_real_path_trains_one_skill_per_task_type(tmp_path: Path) -> None:
    """stages.train llm=openai benchmark=jsonl against a scripted model on a real HTTP server: per-task-type gates,
    probation and momentum, and the delivered harness carries each task type's accepted rule."""
    from tests.support.openai_server import FakeOpenAIServer
    from tests.support.scripted_replies import ScriptedModel, rule_for

    rows = [json.loads(line) for line in EXAMPLE.read_text().splitlines()]
    task_types = sorted({r["task_type"] for r in rows})
    model = ScriptedModel({r["question"]: r["answer"] for r in rows})
    (tmp_path / "data").mkdir()
    shutil.copytree(REPO_ROOT / "conf", tmp_path / "conf")  # stages.train runs from a project root (dvc.yaml + conf/)
    shutil.copy2(REPO_ROOT / "dvc.yaml", tmp_path / "dvc.yaml")
    (tmp_path / "data" / "q.jsonl").write_text(EXAMPLE.read_text())
    with FakeOpenAIServer(reply=model, record=False) as server:
        done = _train(tmp_path, server.base_url, "train.run_name=first")
    assert done.returncode == 0, done.stderr[-3000:]
    (job,) = (tmp_path / "runs" / "first").iterdir()
    init_skills = sorted(p.split("/")[0] for p in read_version_tree(job / "state" / "init" / "workspace" / "skills", "v0"))
    assert init_skills == task_types
    gated = set()
    for step in range(1, 6):
        report = json.loads((job / "state" / "e1" / f"s{step}" / "gate" / "report.json").read_text())
        gated |= {row["task_type"] for row in report["skills"] if row["action"] == "accept"}
    assert gated == set(task_types)  # every task type's rule helps it, and each is accepted by its own gate
    slow = json.loads((job / "state" / "e1" / "slow" / "report.json").read_text())
    assert sorted(p["skill_file"] for p in slow["probations_settled"]) == [f"{t}/SKILL.md" for t in task_types]
    assert sorted(slow["momentum_updated_task_types"]) == task_types
    delivered = job / "state" / "holdout" / "delivered"
    texts = {p.parent.name: p.read_text() for p in delivered.rglob("SKILL.md") if p.parent.name in task_types}
    assert texts and all(rule_for(t) in text for t, text in texts.items())

    # the report says what was learned: each file's diff base -> delivered, each added rule with the gate that accepted it
    report = (job / "reports" / "report.md").read_text()
    learned = report.split("## What was learned (base -> delivered)", 1)[1]
    for t in task_types:
        assert f"### `skills/{t}/SKILL.md` (changed)" in learned
        row = next(line for line in learned.splitlines() if rule_for(t) in line and line.startswith("| + |"))
        assert "gate accepted e1.s" in row and f"({t})" in row, row
    assert "What was learned" in (job / "reports" / "report.html").read_text()

    # export: the delivered harness as a Codex tree, valid for that surface
    exported = _cli(tmp_path, "-m", "stages.export", "--to", "out", "--surface", "codex", "--from", str(delivered))
    assert exported.returncode == 0, exported.stderr
    agents_skill = (tmp_path / "out" / ".agents" / "skills" / "addition" / "SKILL.md").read_text()
    assert rule_for("addition") in agents_skill and (tmp_path / "out" / "AGENTS.md").is_file()
    again = _cli(tmp_path, "-m", "stages.export", "--to", "out", "--from", str(delivered))
    assert again.returncode == 2 and "not an empty directory" in again.stderr

    # a seed from the delivered harness: the next run starts where this one ended
    seeded = _cli(tmp_path, "-m", "stages.export", "--seed", "seeds/first", "--from", str(delivered))
    assert seeded.returncode == 0, seeded.stderr
    with FakeOpenAIServer(reply=model, record=False) as server:
        done = _train(tmp_path, server.base_url, "train.run_name=second", "train.init_seed=seeds/first")
    assert done.returncode == 0, done.stderr[-3000:]
    (second,) = (tmp_path / "runs" / "second").iterdir()
    start = read_version_tree(second / "state" / "init" / "workspace" / "skills", "v0")
    assert all(rule_for(t) in start[f"{t}/SKILL.md"] for t in task_types)
    holdout = json.loads((second / "state" / "holdout" / "holdout.json").read_text())
    assert holdout["test"]["base"] == 1.0  # the scripted model answers right wherever its task type's rule is stated
