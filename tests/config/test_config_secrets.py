"""Secrets only from the environment / .env; never in YAML, overrides, logs or saved configs."""

from __future__ import annotations

import json
import logging
import secrets as pysecrets
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from harness.config.errors import ConfigError
from harness.config.load import load_config
from harness.config.secrets import (
    REDACTED,
    RedactingFilter,
    check_config_tree,
    find_secrets,
    get_api_key,
    install_redaction,
    is_secret_key,
    print_error,
    redact,
    secret_values,
)
from harness.config.snapshot import write_params
from tests.conftest import REPO_ROOT


def _fake_key() -> str:
    return "sk-test-" + pysecrets.token_hex(16)


def test_secret_key_names() -> None:
    secret = ["api_key", "apikey", "openai_api_key", "token", "hf_token", "password", "secret", "client_secret",
              "access_key", "OPENAI_API_KEY"]
    harmless = ["api_key_env", "max_tokens", "model", "tokenizer", "secretary_name", "prices"]
    assert [k for k in secret if not is_secret_key(k.lower())] == []
    assert [k for k in harmless if is_secret_key(k)] == []


def test_get_api_key_reads_named_variable_from_environment_then_env_file(compose_cfg, tmp_path: Path) -> None:
    llm = compose_cfg(["llm=openai"]).llm
    key, file_key = _fake_key(), _fake_key()
    env_file = tmp_path / ".env"
    env_file.write_text(f"OPENAI_API_KEY={file_key}\n")
    assert get_api_key(llm, env_file=env_file, environ={"OPENAI_API_KEY": key}) == key
    assert get_api_key(llm, env_file=env_file, environ={}) == file_key
    with pytest.raises(ConfigError) as info:
        get_api_key(llm, env_file=tmp_path / "absent.env", environ={})
    assert "llm.api_key_env" in str(info.value) and "OPENAI_API_KEY is not set" in str(info.value)
    assert get_api_key(llm, env_file=None, environ={}, required=False) is None


def test_yaml_file_with_a_secret_is_rejected_naming_file_and_key(project_dir: Path) -> None:
    key = _fake_key()
    openai_yaml = project_dir / "conf/llm/openai.yaml"
    openai_yaml.write_text(openai_yaml.read_text() + f"api_key: {key}\n")
    with pytest.raises(ConfigError) as info:  # even when llm=openai is not selected
        load_config(environ={}, env_file=None)
    assert "llm/openai.yaml:api_key" in str(info.value)
    assert key not in str(info.value)


def test_api_key_shaped_value_under_any_key_is_rejected(project_dir: Path) -> None:
    key = _fake_key()
    sim_yaml = project_dir / "conf/llm/sim.yaml"
    sim_yaml.write_text(sim_yaml.read_text().replace("model: sim-solver-1", f"model: {key}"))
    with pytest.raises(ConfigError) as info:
        check_config_tree(project_dir / "conf")
    assert "llm/sim.yaml:model" in str(info.value) and key not in str(info.value)


def test_real_conf_tree_holds_no_secret() -> None:
    check_config_tree(REPO_ROOT / "conf")


@pytest.mark.parametrize(
    "overrides,environ,named",
    [
        (["+llm.api_key=KEY"], {}, "llm.api_key"),
        (["llm.model=KEY"], {}, "llm.model"),
        (["+llm.models.token=abc123"], {}, "llm.models.token"),
        ([], {"HT__LLM__API_KEY": "KEY"}, "llm.api_key"),
    ],
)
def test_secret_in_overrides_or_env_layer_is_rejected_without_echo(compose_cfg, overrides, environ, named) -> None:
    key = _fake_key()
    overrides = [o.replace("KEY", key) for o in overrides]
    environ = {k: v.replace("KEY", key) for k, v in environ.items()}
    with pytest.raises(ConfigError) as info:
        compose_cfg(overrides, environ=environ)
    assert named in str(info.value)
    assert key not in str(info.value)


def test_find_secrets_and_redact() -> None:
    key = _fake_key()
    data = {"llm": {"api_key": key, "api_key_env": "OPENAI_API_KEY", "models": {"editor": "m"}, "note": f"uses {key}"},
            "list": [{"token": "abc"}, key], "empty": {"password": None}}
    # a key-shaped word inside a longer value is found too (sweep syntax hides keys that way: choice(a,sk-...))
    assert sorted(find_secrets(data)) == ["list.0.token", "list.1", "llm.api_key", "llm.note"]
    cleaned = redact(data, [key])
    assert key not in json.dumps(cleaned)
    assert cleaned["llm"]["api_key"] == REDACTED and cleaned["llm"]["api_key_env"] == "OPENAI_API_KEY"
    assert cleaned["llm"]["note"] == f"uses {REDACTED}"


def test_environment_key_appears_in_no_log_file_or_saved_config(tmp_path: Path, monkeypatch) -> None:
    """End to end: key in the environment -> load, read key, save configs, log (also carelessly) -> grep."""
    key = _fake_key()
    monkeypatch.setenv("OPENAI_API_KEY", key)
    monkeypatch.setenv("HT__LLM__BASE_URL", "http://127.0.0.1:9/v1")
    out = tmp_path / "out"
    out.mkdir()
    root = logging.getLogger()
    handler = logging.FileHandler(out / "run.log")
    root.addHandler(handler)
    old_level = root.level
    root.setLevel(logging.DEBUG)
    unprotected = tmp_path / "unprotected.log"  # control: proves the grep would catch a leak
    control = logging.FileHandler(unprotected)
    control_log = logging.getLogger("harness.test.control")
    control_log.propagate = False
    redactor = None
    try:
        redactor = install_redaction(secret_values(None))  # what entry points do after configuring handlers
        cfg = load_config(["train=tiny", "llm=openai"], config_dir=REPO_ROOT / "conf", env_file=None)
        assert cfg.llm.base_url == "http://127.0.0.1:9/v1"  # the env layer was really read
        api_key = get_api_key(cfg.llm, env_file=None)
        assert api_key == key
        log = logging.getLogger("harness.test")
        log.info("resolved config:\n%s", OmegaConf.to_yaml(cfg))
        log.info("calling %s with key %s", cfg.llm.model, api_key)  # a careless log line
        try:
            raise RuntimeError(f"401 Unauthorized for key {api_key}")
        except RuntimeError:
            log.exception("request failed")
        (out / "config.yaml").write_text(OmegaConf.to_yaml(cfg))
        (out / "config_redacted.json").write_text(json.dumps(redact(cfg, secret_values(cfg.llm, env_file=None))))
        write_params(out / "params.yaml", ["train=tiny", "llm=openai"], config_dir=REPO_ROOT / "conf")
        control_log.addHandler(control)
        control_log.info("control line with %s", api_key)
    finally:
        control_log.removeHandler(control)
        control.close()
        for h in list(root.handlers):
            if redactor is not None:
                h.removeFilter(redactor)
        root.removeHandler(handler)
        handler.close()
        root.setLevel(old_level)
    assert key in unprotected.read_text()
    saved = sorted(out.iterdir())
    assert [p.name for p in saved] == ["config.yaml", "config_redacted.json", "params.yaml", "run.log"]
    leaks = [p.name for p in saved if key in p.read_text()]
    assert leaks == []
    assert REDACTED in (out / "run.log").read_text()
    assert "127.0.0.1:9" not in (out / "params.yaml").read_text()  # params never carry machine-local env


def test_print_error_masks_what_the_log_filter_masks(monkeypatch, capsys) -> None:
    """An entry point's print()ed error line goes around the log handlers: it masks the environment's secret-looking
    variables, and with the llm config the variable llm.api_key_env names."""
    key, other = _fake_key(), "plain-value-1234"
    monkeypatch.setenv("OPENAI_API_KEY", key)
    monkeypatch.setenv("LLM_SERVICE_VALUE", other)
    print_error(f"error: refused {key} and {other}", OmegaConf.create({"api_key_env": "LLM_SERVICE_VALUE"}))
    assert capsys.readouterr().err == f"error: refused {REDACTED} and {REDACTED}\n"
    print_error(f"error: {other}")  # without the config only secret-looking names are known
    assert capsys.readouterr().err == f"error: {other}\n"


def test_redacting_filter_masks_args_and_exceptions() -> None:
    key = _fake_key()
    record = logging.LogRecord("x", logging.INFO, __file__, 1, "key=%s", (key,), None)
    assert RedactingFilter([key]).filter(record) and key not in record.getMessage()


def test_print_error_masks_credentials_inside_urls_keeping_scheme_and_host(capsys) -> None:
    """A URL's password is no known secret value (no variable holds it): the userinfo is masked from the URL's shape,
    the scheme and host stay so the line still names what failed; a database's bare login name is no secret."""
    password = "pw" + pysecrets.token_hex(8)
    print_error(f"error: cannot reach postgresql://u:{password}@db/x nor https://user:{password}@host/v1 "
                f"nor https://{password}@host/v1?api_key={password}&v=1 (postgresql://reader@db/x is fine)")
    assert capsys.readouterr().err == (f"error: cannot reach postgresql://{REDACTED}@db/x nor https://{REDACTED}@host/v1 "
                                       f"nor https://{REDACTED}@host/v1?api_key={REDACTED}&v=1 "
                                       "(postgresql://reader@db/x is fine)\n")


def test_redacting_filter_masks_url_credentials_without_known_secrets() -> None:
    """The log filter masks what print_error masks, with no secret value known (a CI run has none in its environment)."""
    password = "pw" + pysecrets.token_hex(8)
    url = f"postgresql://mlflow:{password}@db:5432/runs"
    record = logging.LogRecord("x", logging.ERROR, __file__, 1, "tracking store %s unreachable", (url,), None)
    try:
        raise ConnectionError(f"could not connect to {url}")
    except ConnectionError:
        import sys

        record.exc_info = sys.exc_info()
    assert RedactingFilter([]).filter(record)
    assert record.getMessage() == f"tracking store postgresql://{REDACTED}@db:5432/runs unreachable"
    assert password not in (record.exc_text or "") and f"postgresql://{REDACTED}@db:5432/runs" in (record.exc_text or "")


def _exits_with_masked_line(args: list[str], token: str, prefix: str) -> str:
    """Run an entry point with `token` as the value of a secret-looking variable: its one error line masks it."""
    import subprocess
    import sys

    from tests.pipeline.support import env

    done = subprocess.run([sys.executable, "-m", *args], cwd=REPO_ROOT, env=env({"PROMOTE_CHECK_TOKEN": token}),
                          capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 2, done.stderr[-3000:]
    assert token not in done.stderr + done.stdout, done.stderr[-3000:]
    lines = [line for line in done.stderr.splitlines() if line.startswith(prefix)]
    assert len(lines) == 1 and REDACTED in lines[0], done.stderr[-3000:]
    return lines[0]


def test_promote_and_train_error_lines_mask_the_environments_secret(tmp_path: Path) -> None:
    """stages.promote's refusal and stages.train's run-lock refusal (printed before Hydra's log handlers exist) name a
    directory whose name holds the key's value: the printed line shows REDACTED instead (real subprocesses)."""
    token = "tok" + pysecrets.token_hex(12)
    line = _exits_with_masked_line(["stages.promote", "--seed", str(tmp_path / "seed"), "--eval", str(tmp_path / token)],
                                   token, "stages.promote:")
    assert "no finished eval run" in line and str(tmp_path / REDACTED) in line

    from harness.pipeline import run_lock

    held = tmp_path / f"run-{token}"
    run_lock.acquire(held)  # this test process holds the lock: the train subprocess is refused
    line = _exits_with_masked_line(["stages.train", "train=tiny", "tracking=none", f"hydra.run.dir={held}"], token,
                                   "stages.train:")
    assert "is in use by another job" in line and f"run-{REDACTED}" in line
