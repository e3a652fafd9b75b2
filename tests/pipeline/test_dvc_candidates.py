"""Real DVC: under evolve=candidates the candidates file is a dependency of the evolve stage, and the stage runs
under its declared keys (KeyView) with the candidates reaching the gate's step report with their source."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.pipeline.support import TEST_OVERRIDES, make_project, run

SKILL = "skills/spatial_perception/SKILL.md"
RULES = ("For spatial perception questions, locate the relative sizes first and check every choice against them.",
         "For spatial perception questions, locate the weather conditions first and check every choice against them.")


def _line(rule: str) -> str:
    return json.dumps({"skill_file": SKILL, "ops": [{"op": "add", "new": rule}], "why": "an insight", "source": "person"}) + "\n"


@pytest.mark.slow
def test_editing_the_candidates_file_reruns_evolve_and_the_gate_shows_the_source(tmp_path: Path) -> None:
    cands = tmp_path / "cands.jsonl"
    cands.write_text(_line(RULES[0]), encoding="utf-8")
    overrides = (*TEST_OVERRIDES, "evolve=candidates", "evolve.candidates_path=data/cands.jsonl")
    project = make_project(tmp_path / "project", overrides=overrides, files={"data/cands.jsonl": cands})
    assert yaml.safe_load((project / "params.yaml").read_text())["evolve"]["candidates_source"] == "data/cands.jsonl"
    run(["dvc", "repro", "gate@0"], project)
    state = project / yaml.safe_load((project / "params.yaml").read_text())["train"]["state_dir"]
    evolve = json.loads((state / "e1" / "s1" / "evolve" / "evolve.json").read_text())
    assert [(c["skill_file"], c["source"]) for c in evolve["candidates"]] == [("spatial_perception/SKILL.md", "person")]
    rows = json.loads((state / "e1" / "s1" / "gate" / "report.json").read_text())["skills"]
    assert [(r["skill_file"], r["source"]) for r in rows if r["action"] in ("accept", "reject", "probation")] == [
        ("spatial_perception/SKILL.md", "person")], rows

    (project / "data" / "cands.jsonl").write_text(_line(RULES[1]), encoding="utf-8")
    status = json.loads(run(["dvc", "status", "rollout@0", "evolve@0", "--json"], project).stdout)
    assert status == {"evolve@0": [{"changed deps": {"data/cands.jsonl": "modified"}}]}, status
    run(["dvc", "repro", "evolve@0"], project)
    evolve = json.loads((state / "e1" / "s1" / "evolve" / "evolve.json").read_text())
    assert RULES[1] in evolve["candidates"][0]["record"]["new_text"]
