"""`.env` / HT__ variables cannot change what DVC hashes (issue 15 item 5): inside DVC stages research settings
come only from params.yaml; an HT__ variable for one is refused saying how to change it, while engineering
settings (concurrency, timeouts, key variable) stay settable from the environment. The server address and the
response cache decide which model answers (issue 31 item 4): DVC hashes them from params.yaml only, so `dvc status`
shows a change of server and a resume with another one is refused."""

from __future__ import annotations

import json
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
        "HT__LLM__API_KEY_ENV": "MY_KEY", "HT__LLM__CONCURRENCY": "3", "HT__LLM__TIMEOUT_S": "9"})
    assert (cfg.llm.api_key_env, cfg.llm.concurrency, cfg.llm.timeout_s) == ("MY_KEY", 3, 9.0)


def test_the_settings_that_decide_which_model_answers_are_not_engineering_settings() -> None:
    with pytest.raises(ConfigError) as info:
        load_params(PARAMS, env_file=None, environ={"HT__LLM__BASE_URL": "http://127.0.0.1:9/v1",
                                                    "HT__LLM__CACHE_DIR": "/tmp/other-cache"})
    assert info.value.keys == ["llm.base_url", "llm.cache_dir"]
    assert "dvc exp run -S llm.base_url=..." in str(info.value) and "unset HT__LLM__BASE_URL" in str(info.value)


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
    run(["dvc", "repro", "pools"], project, extra_env={"HT__LLM__CONCURRENCY": "2"})
    assert (project / "data" / "pools.json").is_file()
    status = run(["dvc", "status", "pools"], project)
    assert "changed" not in status.stdout, status.stdout


@pytest.mark.slow
def test_a_resume_with_another_server_is_refused_and_dvc_status_shows_a_changed_one(tmp_path: Path) -> None:
    project = make_project(tmp_path / "project")
    run(["dvc", "repro", "rollout"], project)  # the first stages that call the model, on the simulator
    assert "up to date" in run(["dvc", "status", "rollout"], project).stdout
    # another server from the environment, with a token in it: refused without running a stage or showing the token
    for url in ("http://127.0.0.1:9/v1", "http://PLANTEDTOKEN@127.0.0.1:9/v1"):
        refused = subprocess.run([str(BIN / "dvc"), "repro", "--single-item", "--force", "rollout@0"], cwd=project, capture_output=True,
                                 text=True, env=env({"HT__LLM__BASE_URL": url}), timeout=600)
        shown = refused.stdout + refused.stderr
        assert refused.returncode != 0 and "llm.base_url" in shown, shown[-3000:]
        assert "PLANTEDTOKEN" not in shown and "Traceback" not in shown, shown[-3000:]
    assert not (project / "state" / "e1" / "s1" / "rollout").exists()  # no reply of the other server was stored
    run(["dvc", "repro", "rollout"], project)  # resumed with the recorded server (params.yaml's)
    assert "up to date" in run(["dvc", "status", "rollout"], project).stdout
    # the server is a param DVC hashed: changing it in params.yaml shows in `dvc status` (and re-runs the model's stages)
    params = project / "params.yaml"
    text = params.read_text()
    assert "  base_url: null\n" in text
    params.write_text(text.replace("  base_url: null\n", "  base_url: http://127.0.0.1:9/v1\n", 1))
    status = json.loads(run(["dvc", "status", "rollout", "--json"], project).stdout)
    # DVC names the changed section (`llm`, the params the stage declares)
    assert status == {"rollout@0": [{"changed deps": {"params.yaml": {"llm": "modified"}}}]}, status
