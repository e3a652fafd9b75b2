"""`.env` / HT__ variables cannot change what DVC hashes (issue 15 item 5): inside DVC stages research settings
come only from params.yaml; an HT__ variable for one is refused saying how to change it, while engineering
settings (cache directory, concurrency, server address) stay settable from the environment."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from harness.config.errors import ConfigError
from harness.config.load import ENGINEERING_KEYS, load_params
from harness.config.schema import RootConfig
from tests.pipeline.support import BIN, env, make_project, run

REPO_ROOT = Path(__file__).resolve().parents[2]
PARAMS = REPO_ROOT / "params.yaml"


def test_a_research_setting_from_the_environment_is_refused_naming_the_way_to_change_it(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        load_params(PARAMS, env_file=None, environ={"HT__GATE__LAMBDA": "0.01", "HT__LLM__TEMPERATURE": "0"})
    assert info.value.keys == ["gate.lambda", "llm.temperature"]
    message = str(info.value)
    assert "dvc exp run -S gate.lambda=..." in message and "edit conf/" in message
    assert "unset HT__GATE__LAMBDA" in message
    dotenv = tmp_path / ".env"
    dotenv.write_text("HT__POOLS__SEED=3\n")
    with pytest.raises(ConfigError, match=r"pools.seed = '3': HT__POOLS__SEED \(from .*\.env\)"):
        load_params(PARAMS, env_file=dotenv, environ={})


def test_engineering_settings_stay_settable_from_the_environment(tmp_path: Path) -> None:
    from omegaconf import OmegaConf

    schema = OmegaConf.structured(RootConfig)
    for key in ENGINEERING_KEYS:  # each one is a real key
        assert OmegaConf.select(schema, key, default="<absent>") != "<absent>", key
    cfg = load_params(PARAMS, env_file=None, environ={
        "HT__LLM__CACHE_DIR": str(tmp_path / "cache"), "HT__LLM__CONCURRENCY": "3", "HT__LLM__TIMEOUT_S": "9",
        "HT__LLM__BASE_URL": "http://127.0.0.1:9/v1"})
    assert (cfg.llm.cache_dir, cfg.llm.concurrency, cfg.llm.timeout_s) == (str(tmp_path / "cache"), 3, 9.0)
    assert cfg.llm.base_url == "http://127.0.0.1:9/v1"


@pytest.mark.slow
def test_dvc_repro_refuses_an_hashed_key_from_the_environment_and_takes_an_engineering_one(tmp_path: Path) -> None:
    project = make_project(tmp_path / "project")
    refused = subprocess.run([str(BIN / "dvc"), "repro", "pools"], cwd=project, capture_output=True, text=True,
                             env=env({"HT__POOLS__SEED": "99"}), timeout=600)
    shown = refused.stdout + refused.stderr
    assert refused.returncode != 0
    assert "pools.seed = '99'" in shown and "dvc exp run -S pools.seed=..." in shown, shown[-3000:]
    assert "Traceback" not in shown
    assert not (project / "data" / "pools.json").exists()
    (project / ".env").write_text("HT__POOLS__SEED=99\n")
    again = subprocess.run([str(BIN / "dvc"), "repro", "pools"], cwd=project, capture_output=True, text=True,
                           env=env(), timeout=600)
    assert again.returncode != 0 and "HT__POOLS__SEED (from .env)" in again.stdout + again.stderr
    (project / ".env").unlink()
    cache = tmp_path / "elsewhere-cache"
    run(["dvc", "repro", "pools"], project, extra_env={"HT__LLM__CACHE_DIR": str(cache), "HT__LLM__CONCURRENCY": "2"})
    assert (project / "data" / "pools.json").is_file()
    status = run(["dvc", "status", "pools"], project)
    assert "changed" not in status.stdout, status.stdout
