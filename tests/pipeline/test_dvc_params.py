"""Each DVC stage's `params:` is exactly the key view its entry point declares (and enforces).

`stages/<entry>.py` declares `PARAMS` (the keys the stage's computation reads; a dict by DVC stage
name when one entry point serves several stages) and `LOCATIONS` (path keys DVC sees anyway, because
they are interpolated into the stage's command line, deps or outs). `run_stage` hands the stage a
KeyView of both, so reading anything else fails; this test fails when dvc.yaml and the declarations
disagree. A real-DVC check: changing evolve.h2_probe_questions makes evolve@0 changed and leaves rollout@0 alone.
"""

from __future__ import annotations

import importlib
import json
import re
from pathlib import Path

import pytest
import yaml
from omegaconf import OmegaConf

from harness.config.key_view import KeyView, UndeclaredKeyError, key_tree
from tests.pipeline.support import REPO_ROOT, TEST_OVERRIDES, make_project, run

ENTRY_CMD = re.compile(r"^python -m stages\.(?P<entry>\w+)\b")


def _stages() -> dict[str, dict]:
    doc = yaml.safe_load((REPO_ROOT / "dvc.yaml").read_text(encoding="utf-8"))
    return {name: spec.get("do", spec) for name, spec in doc["stages"].items() if name != "library"}


def _declared(name: str, spec: dict) -> tuple[tuple[str, ...], tuple[str, ...]]:
    entry = ENTRY_CMD.match(" ".join(spec["cmd"].split()))["entry"]
    module = importlib.import_module(f"stages.{entry}")
    params = module.PARAMS[name] if isinstance(module.PARAMS, dict) else module.PARAMS
    return tuple(params), tuple(getattr(module, "LOCATIONS", ()))


def _has_key(doc: dict, key: str) -> bool:
    node = doc
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    return True


@pytest.mark.parametrize("name", sorted(_stages()))
def test_dvc_params_equal_the_stage_declaration(name: str) -> None:
    spec = _stages()[name]
    params, locations = _declared(name, spec)
    listed = spec.get("params", [])
    assert len(set(params)) == len(params), f"{name}: a key declared twice in PARAMS"
    assert set(listed) == set(params), (f"dvc.yaml stage {name}: params {sorted(listed)} but the code declares "
                                        f"{sorted(params)} (missing: {sorted(set(params) - set(listed))}, "
                                        f"extra: {sorted(set(listed) - set(params))})")
    snapshot = yaml.safe_load((REPO_ROOT / "params.yaml").read_text(encoding="utf-8"))
    for key in (*params, *locations):
        assert _has_key(snapshot, key), f"stage {name} declares {key}, which params.yaml does not have"
    text = json.dumps(spec)
    for key in locations:
        assert f"${{{key}}}" in text, f"stage {name}: location key {key} is not in its cmd/deps/outs, so DVC would not see it"


def test_key_view_reads_declared_keys_and_refuses_the_rest() -> None:
    cfg = OmegaConf.create({"llm": {"model": "m", "temperature": 0.7}, "evolve": {"method": "h2", "h2_probe_questions": 2},
                            "train": {"seed": 3, "run_name": "r"}})
    view = KeyView(cfg, ("llm", "evolve.method", "train.seed"), "evolve@e1.s1")
    assert view.llm.temperature == 0.7 and view["evolve"].method == "h2" and view.train.seed == 3
    with pytest.raises(UndeclaredKeyError, match=r"evolve@e1\.s1 reads config key evolve\.h2_probe_questions"):
        _ = view.evolve.h2_probe_questions
    with pytest.raises(UndeclaredKeyError, match="train.run_name"):
        view.train.get("run_name", "default")
    with pytest.raises(UndeclaredKeyError):
        hasattr(view.train, "run_name")  # not swallowed as a missing attribute
    assert view.to_container() == {"llm": {"model": "m", "temperature": 0.7}, "evolve": {"method": "h2"}, "train": {"seed": 3}}
    assert view.resume_metadata()["train"]["run_name"] == "r"  # the checkpoint's record of the whole config
    with pytest.raises(TypeError, match="read-only"):
        view.train.seed = 4


def test_key_tree_merges_a_group_and_its_sub_keys() -> None:
    assert key_tree(("gate.lambda", "gate", "train.seed")) == {"gate": None, "train": {"seed": None}}
    assert key_tree(("benchmark", "benchmark.questions_path")) == {"benchmark": None}
    with pytest.raises(ValueError, match="dotted key"):
        key_tree(("train..seed",))


@pytest.mark.slow
def test_changing_evolve_h2_probe_questions_changes_the_evolve_stage_only(tmp_path: Path) -> None:
    project = make_project(tmp_path / "project")
    stages = ["library", "prepare", "pools", "batches@0", "rollout@0", "evolve@0"]
    run(["dvc", "repro", "evolve@0"], project)
    run(["python", "-m", "harness.config.snapshot", *TEST_OVERRIDES, "evolve.h2_probe_questions=5"], project)  # train=tiny has 3
    status = json.loads(run(["dvc", "status", *stages, "--json"], project).stdout)
    assert status == {"evolve@0": [{"changed deps": {"params.yaml": {"evolve.h2_probe_questions": "modified"}}}]}, status
