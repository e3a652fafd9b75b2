"""Every credential form of issue 31 item 3 (a password or token inside sweep syntax, a token-only URL, a key in the
query string) planted through every entry point (stages.train, a command-line sweep, a sweep config file, dvc repro's
params.yaml, stages.compare, HT__ variables and .env): each attempt is refused naming the key, and the planted value
is in no message and no file the attempts leave (.hydra/, multirun/, runs/, the MLflow store, logs, reports,
caches, DVC's state, git history)."""

from __future__ import annotations

import secrets as pysecrets
import subprocess
from pathlib import Path

import pytest

from harness.config.errors import ConfigError
from harness.config.secrets import REDACTED, check_overrides, find_secrets, has_url_credentials, redact_url_credentials
from tests.pipeline.support import BIN, env, make_project

PY = str(BIN / "python")


KEY_SHAPED = "-".join(("sk", "PLANTED" + "0123456789abcdef"))  # built at run time: no key-shaped literal in the tree

def _forms(secret: str) -> dict[str, str]:
    """name -> an llm.base_url value carrying `secret`."""
    return {
        "user:password@": f"http://alice:{secret}@127.0.0.1:9/v1",
        "token@": f"http://{secret}@127.0.0.1:9/v1",
        "?api_key=": f"http://127.0.0.1:9/v1?api_key={secret}",
        "?api-key=": f"http://127.0.0.1:9/v1?api-key={secret}",
        "?key=": f"http://127.0.0.1:9/v1?key={secret}",
        "&token=": f"http://127.0.0.1:9/v1?v=1&token={secret}",
    }


def test_each_form_is_found_alone_and_inside_sweep_syntax() -> None:
    for url in _forms("PLANTED0123456789").values():
        for value in (url, f"choice({url},http://127.0.0.1:9/v1)", f"glob({url})", f"[{url}]", f"'{url}'"):
            assert has_url_credentials(value), value
            with pytest.raises(ConfigError) as raised:
                check_overrides([f"llm.base_url={value}"])
            assert "PLANTED" not in str(raised.value) and "llm.base_url" in str(raised.value)
        assert find_secrets({"hydra": {"sweeper": {"params": {"llm.base_url": f"choice({url}, http://h/v1)"}}}})
    with pytest.raises(ConfigError):
        check_overrides([f"llm.model=choice(m1,{KEY_SHAPED})"])
    # not credentials: a plain address, a port, a path with @, a database login name, an api version, sweeps
    for value in ("http://127.0.0.1:8080/v1", "https://host/v1?x=a:b@c", "https://h/v1?api-version=2024-06-01",
                  "postgresql://user@db/mlflow", "range(1,3)", "choice(0.1,0.5)", "sqlite:///mlflow.db"):
        assert not has_url_credentials(value), value
    check_overrides(["tracking.tracking_uri=postgresql://u@h/db", "gate.lambda=range(1,3)", "llm.model=choice(a,b)"])


def test_each_form_is_masked_in_a_printed_line_keeping_scheme_and_host() -> None:
    """What has_url_credentials refuses in config, redact_url_credentials masks in error and log lines; the values
    that are no credentials pass unchanged."""
    for name, url in _forms("PLANTED0123456789").items():
        for line in (f"error: {url} refused", f"sweep choice({url},http://127.0.0.1:9/v1)", f"'{url}'"):
            masked = redact_url_credentials(line)
            assert "PLANTED" not in masked and REDACTED in masked and "http://" in masked and "127.0.0.1:9" in masked, (name, masked)
    for value in ("http://127.0.0.1:8080/v1", "https://host/v1?x=a:b@c", "https://h/v1?api-version=2024-06-01",
                  "postgresql://user@db/mlflow", "range(1,3)", "sqlite:///mlflow.db", "mail alice@example.org"):
        assert redact_url_credentials(value) == value


def _leaks(root: Path, needle: str) -> list[str]:
    """Files under `root` (and git history) holding `needle`."""
    data = needle.encode()
    hits = [str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and not p.is_symlink() and data in p.read_bytes()]
    history = subprocess.run(["git", "log", "--all", "-p", "--no-color"], cwd=root, capture_output=True, check=False).stdout
    return hits + (["git history"] if data in history else [])


def _attempts(project: Path, url: str) -> list[tuple[str, list[str], dict[str, str], dict[str, str]]]:
    """(entry point, argv, extra environment, files to write first {relative path: text}) planting `url`."""
    sweep_file = ("# @package _global_\nhydra:\n  mode: MULTIRUN\n  sweeper:\n    params:\n"
                  f"      llm.base_url: choice({url}, http://127.0.0.1:9/v1)\n")
    params = (project / "params.yaml").read_text().replace("  base_url: null\n", f"  base_url: {url}\n", 1)
    train = [PY, "-m", "stages.train", "train=tiny", "llm=openai"]
    return [
        ("stages.train", [*train, f"llm.base_url={url}"], {}, {}),
        ("sweep choice()", [*train, "--multirun", f"llm.base_url=choice({url},http://127.0.0.1:9/v1)"], {}, {}),
        ("sweep a,b", [*train, "--multirun", f"llm.base_url=http://127.0.0.1:9/v1,{url}"], {}, {}),
        ("sweep glob()+range()", [*train, "--multirun", "gate.lambda=range(1,3)", f"llm.base_url=glob({url})"], {}, {}),
        ("sweep config file", [*train, "+sweep=leak"], {}, {"conf/sweep/leak.yaml": sweep_file}),
        ("HT__ variable", train, {"HT__LLM__BASE_URL": url}, {}),
        (".env", train, {}, {".env": f"HT__LLM__BASE_URL={url}\n"}),
        ("dvc repro params.yaml", [str(BIN / "dvc"), "repro"], {}, {"params.yaml": params}),
        ("dvc repro HT__", [str(BIN / "dvc"), "repro"], {"HT__LLM__BASE_URL": url}, {}),
        # quoted: DVC parses -S values with Hydra's grammar, where an unquoted `=` is a syntax error
        ("dvc exp run -S", [str(BIN / "dvc"), "exp", "run", "-S", f"llm.base_url='{url}'"], {}, {}),
        ("stages.compare", [PY, "-m", "stages.compare", "--candidate", "conf", "llm=openai", f"llm.base_url={url}"],
         {}, {}),
    ]


@pytest.mark.slow
def test_every_credential_form_through_every_entry_point_is_refused_and_reaches_no_file(tmp_path: Path) -> None:
    project = make_project(tmp_path / "project")
    refused: list[tuple[str, str]] = []
    planted: list[str] = []
    for form, _ in _forms("x").items():
        secret = "PLANTED" + pysecrets.token_hex(8)
        planted.append(secret)
        url = _forms(secret)[form]
        for entry, argv, extra, files in _attempts(project, url):
            saved = {name: (project / name).read_bytes() if (project / name).exists() else None for name in files}
            for name, text in files.items():
                (project / name).write_text(text)
            try:
                done = subprocess.run(argv, cwd=project, env=env(extra), capture_output=True, text=True, timeout=600,
                                      check=False)
            finally:
                for name, before in saved.items():
                    if before is None:
                        (project / name).unlink()
                    else:
                        (project / name).write_bytes(before)
            shown = done.stdout + done.stderr
            assert done.returncode != 0, (form, entry, shown[-2000:])
            assert secret not in shown, (form, entry, shown[-2000:])
            assert "secret" in shown.lower() and "llm.base_url" in shown, (form, entry, shown[-2000:])
            refused.append((form, entry))
    assert len(refused) == len(_forms("x")) * len(_attempts(project, "u"))
    for secret in planted:
        assert _leaks(project, secret) == [], secret
