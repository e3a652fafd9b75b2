"""dvc.yaml's dependencies are derived from the code, and real DVC sees them change.

Static (no DVC): the `library` stage fingerprints exactly the entry points the stages run, each stage
depends on its own fingerprint file and on no hand-listed code path.

Real DVC in a temporary git repository (tiny config): after `dvc repro` up to evolve@0, an edit under
harness/h2 makes `library` changed; once it re-ran, `dvc status` reports exactly the stages whose import
closure holds the edited file (evolve@0, improve@...), and the others (prepare, rollout@0, ...) stay up to
date; an edit outside the training closure changes only the improve stage. With benchmark=jsonl, changing one answer in the user's questions file makes `prepare` changed.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from harness.pipeline.code_fingerprint import ENTRY_PACKAGE, ModuleIndex, closure_files
from tests.pipeline.support import REPO_ROOT, TEST_OVERRIDES, make_project, run

LIBRARY_FILE = re.compile(r"^\$\{train\.state_dir\}/library/(?P<entry>\w+)\.json$")
ENTRY_CMD = re.compile(r"^python -m stages\.(?P<entry>\w+)\b")
LOCKED = ["library", "prepare", "pools", "batches@0", "rollout@0", "evolve@0", "improve@object_recognition"]


def _dvc_stages() -> dict[str, dict]:
    """Stage name -> its definition (`foreach` stages: the `do` body)."""
    doc = yaml.safe_load((REPO_ROOT / "dvc.yaml").read_text(encoding="utf-8"))
    return {name: spec.get("do", spec) for name, spec in doc["stages"].items()}


def _entry_of(spec: dict) -> str:
    match = ENTRY_CMD.match(" ".join(spec["cmd"].split()))
    assert match, f"dvc.yaml: {spec['cmd']!r} is not `python -m stages.<entry> ...`"
    return match["entry"]


def test_library_stage_fingerprints_exactly_the_entry_points_the_stages_run() -> None:
    stages = _dvc_stages()
    library = stages.pop("library")
    fingerprinted = " ".join(library["cmd"].split()).split("--out-dir ${train.state_dir}/library ")[1].split()
    outs = [LIBRARY_FILE.match(o)["entry"] for o in library["outs"]]
    assert outs == fingerprinted, "library: one out per fingerprinted entry point, same order"
    assert library["deps"] == ["harness", "stages"], "library: the whole source tree, nothing hand-picked"
    used = set()
    for name, spec in stages.items():
        entry = _entry_of(spec)
        used.add(entry)
        code_deps = [d for d in spec["deps"] if isinstance(d, str) and d.startswith(("harness", "stages", "${train.state_dir}/library/"))]
        assert code_deps == [f"${{train.state_dir}}/library/{entry}.json"], (
            f"dvc.yaml stage {name}: code enters only through its own fingerprint file, found {code_deps}")
    assert used == set(fingerprinted), f"fingerprinted {sorted(fingerprinted)}, run by stages {sorted(used)}"


def test_every_entry_point_module_exists() -> None:
    index = ModuleIndex(REPO_ROOT)
    for spec in _dvc_stages().values():
        assert index.file_of(f"{ENTRY_PACKAGE}.{_entry_of(spec)}") is not None


def _changed(project: Path, stages: list[str]) -> set[str]:
    return set(json.loads(run(["dvc", "status", *stages, "--json"], project).stdout or "{}"))


def _closure(project: Path, entry: str) -> set[str]:
    return {p.relative_to(project).as_posix() for p in closure_files([f"{ENTRY_PACKAGE}.{entry}"], project)}


def _stage_entry(stage: str) -> str:
    return stage.split("@")[0]


@pytest.mark.slow
def test_code_edit_changes_exactly_the_stages_that_import_it(tmp_path: Path) -> None:
    project = make_project(tmp_path / "project")
    run(["dvc", "repro", *LOCKED[1:]], project)
    assert _changed(project, LOCKED) == set()

    training = set().union(*(_closure(project, _stage_entry(s)) for s in LOCKED[1:] if not s.startswith("improve")))
    outside_training = sorted(f for f in _closure(project, "improve") - training if f.startswith("harness/"))
    assert outside_training, "expected a module only the improve stage imports (Harness² sweep, tracking)"
    for edited in ("harness/h2/surfaces.py", outside_training[0]):
        with (project / edited).open("a", encoding="utf-8") as f:
            f.write("# edited by the test\n")
        assert _changed(project, LOCKED) == {"library"}, edited  # DVC sees the source tree changed
        run(["dvc", "repro", "library"], project)
        expected = {s for s in LOCKED[1:] if edited in _closure(project, _stage_entry(s))}
        assert _changed(project, LOCKED) == expected, edited
        if edited.startswith("harness/h2/"):
            assert "evolve@0" in expected  # evolve=h2: the gap of the hand-written list
            assert expected < set(LOCKED[1:]), expected  # and stages that do not import it stay up to date
        else:
            assert expected == {"improve@object_recognition"}, expected
        run(["dvc", "repro", *LOCKED[1:]], project)


def _sum_questions(tmp_path: Path) -> tuple[list[dict], Path]:
    """24 questions, 12 per task type: enough for the tiny pools the test config sets (6 test, 6 validation,
    4 diagnosis); the rows and the JSONL file written from them."""
    rows = [{"qid": f"q{i}", "task_type": f"t{i % 2}", "question": f"{i}+1?", "answer": str(i + 1)} for i in range(24)]
    source = tmp_path / "questions.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return rows, source


@pytest.mark.slow
def test_editing_an_answer_in_the_jsonl_questions_file_changes_prepare(tmp_path: Path) -> None:
    rows, source = _sum_questions(tmp_path)
    overrides = (*TEST_OVERRIDES, "benchmark=jsonl", f"benchmark.path={source}", "llm=openai")
    project = make_project(tmp_path / "project", overrides=overrides)
    run(["dvc", "repro", "prepare"], project)
    assert _changed(project, ["library", "prepare"]) == set()
    rows[3]["answer"] = "five"
    source.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    status = json.loads(run(["dvc", "status", "prepare", "--json"], project).stdout)
    assert status == {"prepare": [{"changed deps": {str(source): "modified"}}]}, status


@pytest.mark.slow
def test_editing_a_file_of_the_starting_harness_reruns_pools_with_it(tmp_path: Path) -> None:
    """benchmark.harness_dir is a directory: DVC hashes its content (benchmark.harness_source), so an edit inside
    it re-runs pools, which writes the starting harness, and the next run starts from the edited file."""
    _, source = _sum_questions(tmp_path)
    mine = tmp_path / "mine"
    (mine / "skills" / "t0").mkdir(parents=True)
    (mine / "system_prompt.md").write_text("You answer sums.\n", encoding="utf-8")
    (mine / "skills" / "t0" / "SKILL.md").write_text("Add the two numbers first-version.\n", encoding="utf-8")
    files = {"data/q.jsonl": source, "my-harness/system_prompt.md": mine / "system_prompt.md",
             "my-harness/skills/t0/SKILL.md": mine / "skills" / "t0" / "SKILL.md"}
    overrides = (*TEST_OVERRIDES, "benchmark=jsonl", "benchmark.path=data/q.jsonl", "benchmark.harness_dir=my-harness",
                 "llm=openai")
    project = make_project(tmp_path / "project", overrides=overrides, files=files)
    run(["dvc", "repro", "pools"], project)
    init = project / yaml.safe_load((project / "params.yaml").read_text())["train"]["state_dir"] / "init"

    def starts_from(text: str) -> bool:
        return any(text in p.read_text(encoding="utf-8", errors="replace") for p in init.rglob("*") if p.is_file())

    assert starts_from("first-version")
    assert "up to date" in run(["dvc", "status", "pools"], project).stdout
    (project / "my-harness" / "skills" / "t0" / "SKILL.md").write_text("Add the two numbers second-version.\n", encoding="utf-8")
    status = json.loads(run(["dvc", "status", "pools", "--json"], project).stdout)
    assert status == {"pools": [{"changed deps": {"my-harness": "modified"}}]}, status
    run(["dvc", "repro", "pools"], project)
    assert starts_from("second-version") and not starts_from("first-version")
