"""Secrets (API keys): only from the environment or `.env`, never from config.

- `get_api_key(llm_cfg)` reads the variable NAMED by `llm.api_key_env`
  from the process environment, then from `.env`.
- Config text never carries a secret: a YAML file in `conf/`, a composed
  config, a command-line override or an `HT__*` variable whose key looks
  secret (api_key, *_api_key, token, *_token, password, secret, ...) and has
  a value, or whose value looks like an API key (`sk-...`), is rejected with
  an error that names the key and never echoes the value. So is a URL
  carrying credentials (`http://user:password@host/v1` in `llm.base_url`).
- The command line is checked before Hydra writes anything
  (`refuse_secrets_on_command_line`, called by `stages.train` before
  `hydra.main`: Hydra saves `.hydra/*.yaml` and prints its own errors, with
  the value, before any validation), and `dvc exp run -S` values before DVC
  composes `params.yaml` (`refuse_dvc_set_params`, called from the Hydra
  plugin module DVC imports first).
- `redact` / `redact_text` / `RedactingFilter` mask secrets (and credentials
  inside URLs, `redact_url_credentials`) when configs or log lines are
  written; `print_error` masks the error lines entry points print.
"""

from __future__ import annotations

import logging
import os
import re
import sys
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import yaml
from dotenv import dotenv_values
from omegaconf import DictConfig, OmegaConf

from harness.config.errors import ConfigError, Violation

REDACTED = "***REDACTED***"

# last path component of a key that must never hold a value in config
_SECRET_KEY = re.compile(
    r"(^|_)(api_?key|apikey|token|access_token|refresh_token|password|passwd|secret|secret_key|"
    r"access_key|private_key|credentials?|auth)$",
    re.IGNORECASE,
)
# values shaped like common API keys (OpenAI/Anthropic sk-, GitHub ghp_, Slack xox?-, AWS AKIA)
_SECRET_VALUE = re.compile(r"^(sk-[A-Za-z0-9_\-]{16,}|gh[pousr]_[A-Za-z0-9]{20,}|xox[abpr]-[A-Za-z0-9\-]{10,}|AKIA[0-9A-Z]{16})$")
_EMPTY = (None, "", "???")
# Credentials inside a URL, anywhere in a value (so also inside sweep syntax: `choice(http://u:pw@h,...)`):
# scheme://user:password@ for any scheme; scheme://TOKEN@ for web schemes, where a bare user part is a token
# (for databases, postgresql://user@host, it is a login name); a key in the query string (?api_key=, &token=, ...).
_URL_PASSWORD = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^/?#@\s,()\[\]{}'\"]*:[^/?#@\s,()\[\]{}'\"]*@")
_WEB_SCHEMES = ("http", "https", "ws", "wss")  # schemes whose bare user part (scheme://TOKEN@) is a token
_URL_TOKEN = re.compile(rf"(?<![A-Za-z0-9+.-])({'|'.join(_WEB_SCHEMES)})://[^/?#@\s,()\[\]{{}}'\":]+@", re.IGNORECASE)
_QUERY_SECRET_NAMES = (r"api[_-]?key|apikey|key|token|access[_-]?token|auth|password|passwd|secret|client[_-]?secret|"
                       r"sig|signature|x-api-key")
_URL_QUERY_KEY = re.compile(rf"://[^\s,()\[\]{{}}'\"]*[?&;]({_QUERY_SECRET_NAMES})=[^&#\s,()'\"]", re.IGNORECASE)
# Masking in free text (error and log lines): a URL's userinfo runs to the last '@' before its host's '/', '?', '#'
# (a password may hold ':' '@' ','), and a secret query key's value to the next '&' or '#'
_URL_USERINFO = re.compile(r"(?<![A-Za-z0-9+.-])(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*)://(?P<userinfo>[^/?#\s'\"<>]+)@")
_URL_QUERY_VALUE = re.compile(rf"(?P<key>[?&;](?:{_QUERY_SECRET_NAMES})=)[^&#\s,()\[\]{{}}'\"<>]+", re.IGNORECASE)
_WORD = re.compile(r"\S+")
# separators of sweep syntax and lists: every piece between them is checked for an API-key-shaped value
_PIECES = re.compile(r"[\s,()\[\]{}'\"=]+")


def is_secret_key(key: str) -> bool:
    """True when the last component of dotted `key` names a secret (api_key, token, password, ...)."""
    leaf = str(key).rsplit(".", 1)[-1]
    return _SECRET_KEY.search(leaf) is not None


def looks_like_secret_value(value: Any) -> bool:
    """True for strings shaped like an API key (e.g. `sk-...`)."""
    return isinstance(value, str) and _SECRET_VALUE.match(value.strip()) is not None


def has_url_credentials(value: Any) -> bool:
    """True for a string holding a URL with credentials: ``user:password@``, ``https://TOKEN@`` or a key in its
    query string (``?api_key=``, ``&token=``, ``key=`` ...), also inside sweep syntax (``choice(...)``)."""
    return isinstance(value, str) and any(p.search(value) for p in (_URL_PASSWORD, _URL_TOKEN, _URL_QUERY_KEY))


def _secret_value(value: Any) -> bool:
    """An API-key-shaped value or a URL with credentials, alone or as one piece of a sweep or list expression."""
    if not isinstance(value, str):
        return False
    return has_url_credentials(value) or any(looks_like_secret_value(piece) for piece in _PIECES.split(value) if piece)


def find_secrets(data: Any, prefix: str = "") -> list[str]:
    """Dotted keys in a plain mapping/list tree that hold a secret (secret-looking key with a value,
    an API-key-shaped value, or a URL with credentials)."""
    found: list[str] = []
    if isinstance(data, Mapping):
        for key, value in data.items():
            full = f"{prefix}{key}"
            if is_secret_key(str(key)) and not isinstance(value, (Mapping, list)) and value not in _EMPTY:
                found.append(full)
            elif isinstance(value, (Mapping, list)):
                found.extend(find_secrets(value, full + "."))
            elif _secret_value(value):
                found.append(full)
    elif isinstance(data, list):
        for index, value in enumerate(data):
            found.extend(find_secrets(value, f"{prefix}{index}.") if isinstance(value, (Mapping, list))
                         else ([f"{prefix}{index}"] if _secret_value(value) else []))
    return found


def _violation(key: str, where: str) -> Violation:
    return Violation(key, REDACTED, f"secrets are not accepted {where} (neither keys, tokens nor user:password@ in "
                                    "URLs); put the key in the environment variable named by llm.api_key_env "
                                    "(or in .env)")


def check_config_tree(config_dir: str | os.PathLike[str]) -> None:
    """Reject any YAML file under `config_dir` that carries a secret (error names file and key)."""
    violations: list[Violation] = []
    for path in sorted(Path(config_dir).rglob("*.yaml")) + sorted(Path(config_dir).rglob("*.yml")):
        try:
            data = yaml.safe_load(path.read_text(encoding="utf-8"))
        except (OSError, yaml.YAMLError) as exc:
            raise ConfigError(f"{path}: cannot read YAML ({exc.__class__.__name__})") from None
        for key in find_secrets(data):
            violations.append(_violation(f"{path}:{key}", "in YAML files"))
    if violations:
        raise ConfigError(violations, header="secret in config files")


def check_composed_config(cfg: DictConfig) -> None:
    """Reject a composed config holding a secret (names the key, not the value)."""
    keys = find_secrets(OmegaConf.to_container(cfg, resolve=False, throw_on_missing=False))
    if keys:
        raise ConfigError([_violation(key, "in the configuration") for key in keys], header="secret in config")


def check_overrides(overrides: Sequence[str], source: str = "on the command line") -> None:
    """Reject `key=value` overrides that set a secret-looking key or pass an API-key-shaped value."""
    violations = []
    for override in overrides:
        key, sep, value = str(override).partition("=")
        key = key.lstrip("+~")
        # a whole value is searched, so sweep syntax (a,b / choice(a,b) / range / glob) hides nothing
        if sep and ((is_secret_key(key) and value.strip() not in ("", "null")) or _secret_value(value)):
            violations.append(_violation(key, source))
    if violations:
        raise ConfigError(violations, header="secret in overrides")


def command_line_overrides(argv: Sequence[str]) -> list[str]:
    """The ``key=value`` overrides of a Hydra app's arguments (flags such as ``--multirun`` left out)."""
    return [arg for arg in argv if "=" in arg and not arg.startswith("-")]


def dvc_set_params(argv: Sequence[str]) -> list[str]:
    """The overrides given to ``dvc exp run`` by ``-S`` / ``--set-param`` (``[file:]key=value``)."""
    values: list[str] = []
    args = list(argv)
    for index, arg in enumerate(args):
        if arg in ("-S", "--set-param") and index + 1 < len(args):
            values.append(args[index + 1])
        elif arg.startswith("--set-param="):
            values.append(arg[len("--set-param="):])
        elif arg.startswith("-S") and len(arg) > 2:
            values.append(arg[2:].lstrip("="))
    # `params.yaml:key=value`: the file prefix is not part of the override
    return [v.split(":", 1)[1] if ":" in v.split("=", 1)[0] else v for v in values]


def config_dirs_of(argv: Sequence[str], start: Path | None = None) -> list[Path]:
    """The config trees a Hydra app started with `argv` in `start` (default: the working directory) reads: the
    project's ``conf/`` (found as `stages.train` finds the project root) and any ``--config-dir``/``-cd`` given."""
    from harness.config.project import find_project_root

    here = (Path.cwd() if start is None else Path(start)).resolve()
    found = [here / "conf"]
    root = find_project_root(here)
    if root is not None:
        found.append(Path(root) / "conf")
    args = list(argv)
    for index, arg in enumerate(args):
        if arg in ("-cd", "--config-dir") and index + 1 < len(args):
            found.append(Path(args[index + 1]))
        elif arg.startswith("--config-dir="):
            found.append(Path(arg.split("=", 1)[1]))
    unique: list[Path] = []
    for directory in found:
        if directory.is_dir() and directory.resolve() not in unique:
            unique.append(directory.resolve())
    return unique


def refuse_secrets_on_command_line(argv: Sequence[str], program: str) -> None:
    """Exit (status 2, one message naming the key, never the value) when the overrides, or a YAML file of the
    config trees the app reads (a sweep file's ``hydra.sweeper.params`` included), carry a secret.

    Runs before Hydra, which would otherwise save the overrides and the sweep in ``.hydra/`` and
    ``multirun.yaml`` first."""
    try:
        check_overrides(command_line_overrides(argv))
        for directory in config_dirs_of(argv):
            check_config_tree(directory)
    except ConfigError as error:
        print(f"{program}: {error}", file=sys.stderr)
        raise SystemExit(2) from None


def refuse_dvc_set_params(argv: Sequence[str]) -> None:
    """In a ``dvc exp run`` process: raise ConfigError when a ``-S`` value carries a secret (before DVC composes
    and writes ``params.yaml``). A no-op in any other process."""
    if Path(argv[0] if argv else "").name not in ("dvc", "__main__.py") or "exp" not in argv:
        return
    check_overrides(dvc_set_params(argv), source="in `dvc exp run -S` (params.yaml is hashed and committed)")


def read_env_file(env_file: str | os.PathLike[str] | None) -> dict[str, str]:
    """Variables of a `.env` file ({} when `env_file` is None or does not exist)."""
    if env_file is None or not Path(env_file).is_file():
        return {}
    return {key: value for key, value in dotenv_values(env_file).items() if value is not None}


def get_api_key(
    llm_cfg: Any,
    *,
    env_file: str | os.PathLike[str] | None = ".env",
    environ: Mapping[str, str] | None = None,
    required: bool = True,
) -> str | None:
    """The API key from the variable named by `llm_cfg.api_key_env`: process environment first, then `.env`.

    Raises ConfigError naming the variable when `required` and it is unset or empty."""
    name = str(llm_cfg.api_key_env)
    if _secret_value(name):
        raise ConfigError([Violation("llm.api_key_env", REDACTED, "must be the NAME of an environment variable, "
                                                                   "never the key itself")])
    env = os.environ if environ is None else environ
    value = env.get(name) or read_env_file(env_file).get(name)
    if value:
        return value
    if required:
        raise ConfigError(
            [Violation("llm.api_key_env", name, f"environment variable {name} is not set (neither in the environment "
                                                f"nor in {env_file}); export it or add `{name}=...` to .env")]
        )
    return None


def secret_values(
    llm_cfg: Any = None,
    *,
    env_file: str | os.PathLike[str] | None = ".env",
    environ: Mapping[str, str] | None = None,
) -> list[str]:
    """Every secret value to mask: the key named by llm.api_key_env plus any variable of the environment
    or `.env` whose NAME looks secret (e.g. OPENAI_API_KEY, HF_TOKEN)."""
    env = dict(read_env_file(env_file))
    env.update(os.environ if environ is None else environ)
    names = {name for name in env if is_secret_key(name.lower())}
    if llm_cfg is not None:
        names.add(str(llm_cfg.api_key_env))
    return sorted({env[name] for name in names if env.get(name) and len(env[name]) >= 4}, key=len, reverse=True)


def _mask_userinfo(match: re.Match[str]) -> str:
    userinfo, scheme = match["userinfo"], match["scheme"]
    if ":" in userinfo or scheme.lower() in _WEB_SCHEMES:  # a database's bare user part is a login name: kept
        return f"{scheme}://{REDACTED}@"
    return match.group()


def _mask_url_word(match: re.Match[str]) -> str:
    word = match.group()
    if "://" not in word:
        return word
    return _URL_QUERY_VALUE.sub(lambda m: m["key"] + REDACTED, _URL_USERINFO.sub(_mask_userinfo, word))


def redact_url_credentials(text: str) -> str:
    """`text` with the credentials of every URL in it masked, the forms `has_url_credentials` finds:
    ``scheme://user:password@host`` and ``https://TOKEN@host`` -> ``scheme://***REDACTED***@host``, ``?api_key=VALUE``
    -> ``?api_key=***REDACTED***``. Scheme, host and path stay, so the line still names what failed."""
    return _WORD.sub(_mask_url_word, text) if "://" in text else text


def redact_text(text: str, secrets: Iterable[str]) -> str:
    """`text` with every occurrence of each secret, and every URL's credentials (`redact_url_credentials`), replaced
    by REDACTED: the one masking of printed error lines (`print_error`), log lines (`RedactingFilter`) and configs."""
    for secret in sorted(set(secrets), key=len, reverse=True):
        if secret:
            text = text.replace(secret, REDACTED)
    return redact_url_credentials(text)


def print_error(line: str, llm_cfg: Any = None) -> None:
    """Print an error line to stderr with every secret value masked as log lines are (`redact_text`, the
    RedactingFilter's): print() goes around the log handlers. `llm_cfg` (once the config is loaded) adds the key its
    `api_key_env` names to the environment's secret-looking variables."""
    print(redact_text(line, secret_values(llm_cfg)), file=sys.stderr)


def redact(data: Any, secrets: Iterable[str] = ()) -> Any:
    """A plain copy of a config (DictConfig or mapping/list tree) with secret-looking keys' values,
    API-key-shaped values and the given secret values masked. Safe to log or save."""
    secret_list = list(secrets)
    if OmegaConf.is_config(data):
        data = OmegaConf.to_container(data, resolve=False, throw_on_missing=False)

    def mask(key: str | None, value: Any) -> Any:
        if isinstance(value, Mapping):
            return {k: mask(str(k), v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [mask(None, v) for v in value]
        if key is not None and is_secret_key(key) and value not in _EMPTY:
            return REDACTED
        if isinstance(value, str):
            return REDACTED if looks_like_secret_value(value) else redact_text(value, secret_list)
        return value

    return mask(None, data)


class RedactingFilter(logging.Filter):
    """Logging filter that masks secret values and URL credentials in the formatted message (and exception text).

    Attach it to HANDLERS (logger filters do not see records propagated from child loggers):
    `install_redaction(secret_values(cfg.llm))`."""

    def __init__(self, secrets: Iterable[str]) -> None:
        super().__init__()
        self.secrets = [s for s in secrets if s]

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        cleaned = redact_text(message, self.secrets)
        if cleaned != message:
            record.msg, record.args = cleaned, ()
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact_text(record.exc_text, self.secrets)
        return True


def install_redaction(secrets: Iterable[str], logger: logging.Logger | None = None) -> RedactingFilter:
    """Attach one RedactingFilter to every handler of `logger` (default: root). Returns the filter."""
    target = logger or logging.getLogger()
    redactor = RedactingFilter(secrets)
    for handler in target.handlers:
        handler.addFilter(redactor)
    return redactor
