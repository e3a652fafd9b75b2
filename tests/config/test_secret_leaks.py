"""One distinctive secret planted through every way a user could pass it (Hydra overrides with and without `+`,
`llm.api_key_env`, a password in `llm.base_url`, an `HT__` variable, `dvc exp run -S`): every attempt is refused,
no message shows it, and no file of the project copy or its run directories holds it (real processes, real DVC)."""

from __future__ import annotations

import secrets as pysecrets
import subprocess
from pathlib import Path

import pytest

from harness.config.errors import ConfigError
from harness.config.secrets import check_overrides, command_line_overrides, dvc_set_params, has_url_credentials
from tests.pipeline.support import BIN, env, make_project

pytestmark = pytest.mark.slow  # a project copy, several Hydra and DVC processes


def _files_holding(root: Path, needle: bytes) -> list[str]:
    hits = [str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and not p.is_symlink() and needle in p.read_bytes()]
    # git objects are compressed: ask git for every commit, stash and experiment ref as well
    log = subprocess.run(["git", "log", "--all", "-p", "--no-color"], cwd=root, capture_output=True, check=False).stdout
    return hits + (["git history"] if needle in log else [])


def test_a_planted_secret_reaches_no_file_and_no_message(tmp_path: Path) -> None:
    secret = "sk-PLANTED" + pysecrets.token_hex(12)
    project = make_project(tmp_path / "project")
    params_before = (project / "params.yaml").read_bytes()
    url = f"http://user:{secret}@127.0.0.1:9/v1"
    attempts = [
        ([str(BIN / "python"), "-m", "stages.train", f"+llm.api_key={secret}"], {}),
        ([str(BIN / "python"), "-m", "stages.train", f"llm.api_key={secret}"], {}),
        ([str(BIN / "python"), "-m", "stages.train", f"llm.api_key_env={secret}"], {}),
        ([str(BIN / "python"), "-m", "stages.train", "llm=openai", f"llm.base_url={url}"], {}),
        ([str(BIN / "python"), "-m", "stages.train", "--multirun", f"llm.base_url={url},http://127.0.0.1:9/v1"], {}),
        ([str(BIN / "python"), "-m", "stages.train", "train=tiny", "tracking=none"], {"HT__LLM__BASE_URL": url}),
        ([str(BIN / "dvc"), "exp", "run", "-S", f"+llm.api_key={secret}"], {}),
        ([str(BIN / "dvc"), "exp", "run", "-S", f"llm.api_key={secret}"], {}),
        ([str(BIN / "dvc"), "exp", "run", "--set-param", f"params.yaml:llm.base_url={url}"], {}),
    ]
    for args, extra in attempts:
        done = subprocess.run(args, cwd=project, env=env(extra), capture_output=True, text=True, timeout=600, check=False)
        shown = done.stdout + done.stderr
        assert done.returncode != 0, (args, shown[-2000:])
        assert secret not in shown, (args, shown[-2000:])
        assert "secret" in shown.lower(), (args, shown[-2000:])  # refused as a secret, not for another reason
    assert (project / "params.yaml").read_bytes() == params_before
    assert _files_holding(project, secret.encode()) == []


def test_the_command_line_checks() -> None:
    assert command_line_overrides(["--multirun", "a=1", "-cn", "config", "+b=2"]) == ["a=1", "+b=2"]
    assert dvc_set_params(["dvc", "exp", "run", "-S", "a=1", "--set-param=params.yaml:+b=2", "-Sc=3"]) == ["a=1", "+b=2", "c=3"]
    assert has_url_credentials("https://me:pw@host/v1") and not has_url_credentials("https://host/v1?x=a:b@c")
    for override in ("llm.base_url=http://u:p@h/v1", "llm.base_url=http://h,http://u:p@h", "llm.api_key=abc"):
        with pytest.raises(ConfigError) as raised:
            check_overrides([override])
        assert "p@h" not in str(raised.value) and "abc" not in str(raised.value)
    check_overrides(["llm.base_url=http://127.0.0.1:8080/v1", "llm.api_key_env=MY_KEY", "tracking.tracking_uri=postgresql://u@h/db"])
