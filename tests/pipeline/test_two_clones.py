"""No absolute paths in DVC-tracked outputs (issue 15 item 9): the same stage in two project copies at different
paths writes the same files; only wall-clock fields (`at`, `seconds`) may differ."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.pipeline.support import make_project, run

pytestmark = pytest.mark.slow  # two project copies, one Harness² domain each
CLOCK_KEYS = {"at", "seconds", "created_at", "started_at", "finished_at"}


def _without_clock(value):
    if isinstance(value, dict):
        return {k: _without_clock(v) for k, v in value.items() if k not in CLOCK_KEYS}
    if isinstance(value, list):
        return [_without_clock(v) for v in value]
    return value


def _outputs(project: Path, domain: str) -> dict[str, object]:
    root = project / "state" / "improve" / domain
    out: dict[str, object] = {}
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        data = path.read_bytes()
        assert str(project).encode() not in data, f"{path.relative_to(project)} holds the project's absolute path"
        out[path.relative_to(root).as_posix()] = _without_clock(json.loads(data)) if path.suffix == ".json" else data
    return out


def test_an_improve_domain_writes_the_same_files_in_two_clones(tmp_path: Path) -> None:
    first = make_project(tmp_path / "a" / "project")
    second = make_project(tmp_path / "a-much-longer-directory-name" / "project")
    domain = yaml.safe_load((first / "params.yaml").read_text())["improve"]["domains"][0]
    for project in (first, second):
        run(["dvc", "repro", f"improve@{domain}"], project)
    one, two = _outputs(first, domain), _outputs(second, domain)
    assert sorted(one) == sorted(two)
    assert [name for name in one if one[name] != two[name]] == []
