"""Config errors found at load, naming the key (issue 15 item 7): tracking URIs, the provider/benchmark pair,
output paths outside the project, and a params.yaml that is not valid YAML or is empty."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from harness.config.errors import ConfigError
from harness.config.load import load_config, load_params
from harness.config.locations import output_path_problem, tracking_uri_problem

REPO_ROOT = Path(__file__).resolve().parents[2]
TINY = ["train=tiny"]


def _refused(overrides: list[str]) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        load_config([*TINY, *overrides], config_dir=REPO_ROOT / "conf", env_file=None, environ={})
    return info.value


@pytest.mark.parametrize("override,key,words", [
    ("tracking.tracking_uri=sqlite://x.db", "tracking.tracking_uri", "sqlite:///<file>"),
    ("tracking.tracking_uri=htp://host", "tracking.tracking_uri", "unknown scheme 'htp'"),
    ("tracking.tracking_uri=http://", "tracking.tracking_uri", "no host"),
    ("pools.path=../../x", "pools.path", "leaves the project"),
    ("train.state_dir=.git/x", "train.state_dir", "inside .git/"),
    ("benchmark.questions_path=.dvc/q.parquet", "benchmark.questions_path", "inside .dvc/"),
    ("llm.cache_dir=/dev/null/x", "llm.cache_dir", "/dev/null exists and is not a directory"),
    ("improve.out_dir=pyproject.toml/x", "improve.out_dir", "is not a directory"),
])
def test_a_bad_location_is_refused_at_load_naming_the_key(override: str, key: str, words: str) -> None:
    error = _refused([override])
    assert key in error.keys
    line = next(line for line in str(error).splitlines() if f"- {key} =" in line)
    assert words in line, line


def test_jsonl_questions_with_the_sim_provider_are_refused_at_load() -> None:
    error = _refused(["benchmark=jsonl", "benchmark.path=q.jsonl"])
    assert error.keys == ["llm.provider"] and "llm=openai" in str(error)
    load_config([*TINY, "benchmark=jsonl", "benchmark.path=q.jsonl", "llm=openai"], config_dir=REPO_ROOT / "conf",
                env_file=None, environ={})


def test_absolute_writable_places_and_usable_uris_are_accepted(tmp_path: Path) -> None:
    cfg = load_config([*TINY, f"llm.cache_dir={tmp_path / 'cache'}", f"pools.path={tmp_path / 'p' / 'pools.json'}",
                       f"tracking.tracking_uri=sqlite:///{tmp_path / 'm.db'}"],
                      config_dir=REPO_ROOT / "conf", env_file=None, environ={})
    assert cfg.llm.cache_dir == str(tmp_path / "cache")
    for uri in (None, "", "sqlite:///mlflow.db", "http://127.0.0.1:5000", "https://mlflow.example/",
                "postgresql+psycopg2://u@127.0.0.1:5432/mlflow", "file:///tmp/mlruns", "databricks"):
        assert tracking_uri_problem(uri) is None, uri
    for path in ("state", "runs/x/2026-01-01_00-00-00_1/state", "./data/pools.json", str(tmp_path)):
        assert output_path_problem(path) is None, path
    assert output_path_problem("a\nb") is not None and output_path_problem("") is not None


@pytest.mark.parametrize("text,words", [
    ("benchmark:\n  name: sim\n llm: [\n", "not valid YAML at line"),
    ("", "empty"),
    ("gate:\n  lambda: 3.0\n", "missing section(s) benchmark, llm"),
    ("- a\n- b\n", "top level must be a mapping"),
])
def test_a_broken_params_yaml_is_refused_naming_the_file(tmp_path: Path, text: str, words: str) -> None:
    params = tmp_path / "params.yaml"
    params.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_params(params, env_file=None, environ={})
    assert str(params) in str(info.value) and words in str(info.value)
    assert "python -m harness.config.snapshot" in str(info.value)


def test_a_stage_prints_one_line_for_a_broken_params_yaml(tmp_path: Path) -> None:
    params = tmp_path / "params.yaml"
    params.write_text("benchmark: {name: sim\n", encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "stages.prepare", "--params", str(params), "--out", str(tmp_path / "q")],
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert f"bad configuration in {params}: {params}: not valid YAML at line 2" in done.stderr, done.stderr
