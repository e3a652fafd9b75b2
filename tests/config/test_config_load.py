"""load_config / finalize_config / load_params: schema errors, layers YAML < .env < CLI, freezing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException

from harness.config.errors import ConfigError
from harness.config.load import env_layer, finalize_config, load_config, load_params
from tests.conftest import REPO_ROOT


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, f"{old!r} not in {path}"
    path.write_text(text.replace(old, new, 1))


# --- schema: wrong types and unknown keys fail at load time naming the key ---------------------

def test_wrong_type_on_command_line_names_key(compose_cfg) -> None:
    with pytest.raises(ConfigError) as info:
        compose_cfg(["gate.block_size=abc"])
    assert "full_key: gate.block_size" in str(info.value) and "Integer" in str(info.value)


def test_wrong_type_in_yaml_names_key_and_file(project_dir: Path) -> None:
    _edit(project_dir / "conf/gate/sequential.yaml", "block_size: 20", "block_size: many")
    with pytest.raises(ConfigError) as info:
        load_config(environ={}, env_file=None)
    assert "gate/sequential" in str(info.value) and "gate.block_size" in str(info.value)


def test_unknown_key_in_yaml_names_key(project_dir: Path) -> None:
    _edit(project_dir / "conf/gate/sequential.yaml", "block_size: 20", "blok_size: 20")
    with pytest.raises(ConfigError) as info:
        load_config(environ={}, env_file=None)
    assert "gate.blok_size" in str(info.value)


def test_unknown_key_added_with_plus_is_rejected(compose_cfg) -> None:
    with pytest.raises(ConfigError) as info:
        compose_cfg(["+gate.blok_size=3"])
    assert info.value.keys == ["gate.blok_size"] and "unknown key" in str(info.value)


def test_free_form_mappings_accept_new_keys(compose_cfg) -> None:
    cfg = compose_cfg(["llm=openai", "+llm.models.editor=gpt-4o", "+llm.prices.gpt-4o={input: 2.5, output: 10}"])
    assert cfg.llm.models.editor == "gpt-4o" and cfg.llm.prices["gpt-4o"].output == 10


# --- layers: YAML < .env file < process environment < command line ----------------------------

TINY = ["train=tiny", "tracking=none"]


def _raw(overrides: list[str]):
    with initialize_config_dir(str(REPO_ROOT / "conf"), version_base="1.3"):
        return compose("config", overrides=overrides)


@pytest.fixture(scope="module")
def raw_tiny():
    """Composed but not finalized (load_config = compose + finalize_config; composing is the slow part)."""
    return _raw(TINY)


def _with_env(raw_tiny, environ: dict[str, str], env_file: Path | None = None):
    return finalize_config(raw_tiny, cli_overrides=TINY, env_file=env_file, environ=environ)


def test_layer_precedence_yaml_env_file_environment_cli(compose_cfg, tmp_path: Path) -> None:
    env_file = tmp_path / ".env"
    env_file.write_text("HT__GATE__LAMBDA=2.5\nHT__LLM__TIMEOUT_S=9\nHT__LLM__BASE_URL=http://127.0.0.1:8000/v1\n")
    assert compose_cfg().gate["lambda"] == 0.25  # YAML (conf/gate/betting.yaml)
    from_file = compose_cfg(env_file=env_file)  # the whole load_config path once
    assert (from_file.gate["lambda"], from_file.llm.timeout_s) == (2.5, 9.0)
    assert from_file.llm.base_url == "http://127.0.0.1:8000/v1"
    raw = _raw([*TINY, "llm.timeout_s=5", "gate.lambda=4.0"])
    environment = finalize_config(raw, cli_overrides=TINY, env_file=env_file, environ={"HT__LLM__TIMEOUT_S": "7"})
    assert (environment.gate["lambda"], environment.llm.timeout_s) == (2.5, 7.0)  # env beats the file
    cli = finalize_config(raw, cli_overrides=[*TINY, "llm.timeout_s=5", "gate.lambda=4.0"], env_file=env_file,
                          environ={"HT__LLM__TIMEOUT_S": "7"})
    assert (cli.gate["lambda"], cli.llm.timeout_s, cli.llm.base_url) == (4.0, 5.0, "http://127.0.0.1:8000/v1")


def test_env_values_are_typed_like_command_line_values(raw_tiny) -> None:
    cfg = _with_env(raw_tiny, {"HT__BENCHMARK__TASK_TYPES": "[a, b]", "HT__LLM__TEMPERATURE": "0.5",
                               "HT__LLM__BASE_URL": "null", "HT__BATCHING__MIX_CORRECT": "false"})
    assert list(cfg.benchmark.task_types) == ["a", "b"]
    assert cfg.llm.temperature == 0.5 and cfg.llm.base_url is None and cfg.batching.mix_correct is False


def test_env_value_feeds_derived_schedule(raw_tiny) -> None:
    cfg = _with_env(raw_tiny, {"HT__POOLS__DIAGNOSIS_SIZE": "4"})  # 4 / batch 4 -> 1 step per epoch
    assert cfg.train.steps_per_epoch == 1 and [(i.epoch, i.step) for i in cfg.train.schedule] == [(1, 1), (2, 1)]


@pytest.mark.parametrize(
    "variable,value,words",
    [
        ("HT__GATE__BLOK_SIZE", "3", "gate.blok_size"),
        ("HT__GATE__LAMBDA", "abc", "gate.lambda"),
        ("HT__LLM", "openai", "choose groups on the command line"),
        ("HT__GATE__LAMBDA", "1,2", "sweep"),
        ("HT__GATE__LAMBDA_DIR", "0.5", "gate.lambda_dir = 0.5: must be < 0"),
    ],
)
def test_bad_env_variable_names_variable_and_key(raw_tiny, variable: str, value: str, words: str) -> None:
    with pytest.raises(ConfigError) as info:
        _with_env(raw_tiny, {variable: value})
    assert words in str(info.value)


def test_env_layer_maps_double_underscores_to_dots(tmp_path: Path) -> None:
    env_file = tmp_path / ".env"
    env_file.write_text("HT__LLM__BASE_URL=http://x\nOTHER=1\n")
    layer = env_layer(env_file, {"HT__GATE__LAMBDA": "2", "PATH": "/bin"})
    assert {k: v for k, (v, _) in layer.items()} == {"llm.base_url": "http://x", "gate.lambda": "2"}
    with pytest.raises(ConfigError):
        env_layer(None, {"HT__GATE____LAMBDA": "2"})


# --- freezing -----------------------------------------------------------------------------------

def test_loaded_config_is_frozen(compose_cfg) -> None:
    cfg = compose_cfg()
    assert OmegaConf.is_readonly(cfg) and OmegaConf.is_struct(cfg)
    with pytest.raises(OmegaConfBaseException):
        cfg.gate["lambda"] = 1.0
    with pytest.raises(OmegaConfBaseException):
        cfg.train.epochs = 9
    with pytest.raises(OmegaConfBaseException):
        cfg.new_key = 1
    with pytest.raises(OmegaConfBaseException):
        cfg.train.schedule[0].prev = "elsewhere"
    with pytest.raises(OmegaConfBaseException):
        cfg.benchmark.task_types.append("x")
    assert "${" not in OmegaConf.to_yaml(cfg)  # resolved before freezing


def test_finalize_config_on_a_composed_cfg_applies_env_and_leaves_input_untouched() -> None:
    raw = _raw(["train=tiny", "gate.lambda=4.0"])
    final = finalize_config(raw, cli_overrides=["train=tiny", "gate.lambda=4.0"], env_file=None,
                            environ={"HT__GATE__LAMBDA": "2.0", "HT__LLM__TIMEOUT_S": "3"})
    assert final.gate["lambda"] == 4.0 and final.llm.timeout_s == 3.0 and OmegaConf.is_readonly(final)
    assert not OmegaConf.is_readonly(raw) and raw.llm.timeout_s == 60.0


def test_hydra_main_app_gets_env_layer_below_its_command_line(tmp_path: Path) -> None:
    script = tmp_path / "app.py"
    script.write_text(
        "import json, hydra\n"
        "from omegaconf import OmegaConf\n"
        "from harness.config.load import finalize_config\n"
        f"@hydra.main(config_path={str(REPO_ROOT / 'conf')!r}, config_name='config', version_base='1.3')\n"
        "def main(cfg):\n"
        "    cfg = finalize_config(cfg, env_file=None)\n"
        "    print(json.dumps({'lambda': cfg.gate['lambda'], 'timeout': cfg.llm.timeout_s,\n"
        "                      'frozen': OmegaConf.is_readonly(cfg), 'steps': len(cfg.train.schedule)}))\n"
        "main()\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("HT__")}
    env.update(HT__GATE__LAMBDA="2.5", HT__LLM__TIMEOUT_S="9")
    done = subprocess.run(
        [sys.executable, str(script), "train=tiny", "llm.timeout_s=5", f"hydra.run.dir={tmp_path / 'out'}"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result == {"lambda": 2.5, "timeout": 5.0, "frozen": True, "steps": 4}


# --- params.yaml as input (DVC stages) ----------------------------------------------------------

def test_load_params_matches_load_config(compose_cfg) -> None:
    from_params = load_params(REPO_ROOT / "params.yaml", env_file=None, environ={})
    assert OmegaConf.to_container(from_params) == OmegaConf.to_container(compose_cfg(tiny=False))
    assert OmegaConf.is_readonly(from_params)


def test_load_params_rejects_unknown_key_and_missing_file(tmp_path: Path) -> None:
    params = tmp_path / "params.yaml"
    params.write_text((REPO_ROOT / "params.yaml").read_text().replace("  block_size: 20", "  blok_size: 20"))
    with pytest.raises(ConfigError) as info:
        load_params(params, env_file=None, environ={})
    assert "blok_size" in str(info.value)
    with pytest.raises(ConfigError, match="not found"):
        load_params(tmp_path / "nope.yaml", env_file=None, environ={})
