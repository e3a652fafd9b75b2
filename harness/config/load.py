"""Load the configuration: compose `conf/`, apply the `.env` layer, validate, freeze.

Layers, lowest to highest:

1. YAML: `conf/config.yaml` and the chosen group files (Hydra compose API).
2. `.env` file, then the process environment: variables `HT__<SECTION>__<KEY>`
   set `<section>.<key>` (`HT__LLM__BASE_URL=http://127.0.0.1:8000/v1` ->
   `llm.base_url`; `HT__GATE__LAMBDA=2.5` -> `gate.lambda`). Values are typed
   like command-line values (`null`, numbers, `[a, b]`). They set values
   only; choose groups (`llm=openai`) on the command line.
3. Command-line overrides (Hydra syntax), which win over 1 and 2.

The result is type-checked (schema), checked for unknown keys and secrets,
resolved (the `ht.*` schedule resolvers), validated (seed 000 §3, four layers)
and frozen: read-only and struct, so no stage can change it afterwards.
"""

from __future__ import annotations

import copy
import dataclasses
import logging
import os
from pathlib import Path
from typing import Any, Mapping, Sequence

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

import harness.config  # noqa: F401  (registers the resolvers; the schema is registered before composing)
from harness.config.errors import ConfigError, Violation
from harness.config.schema import RootConfig
from harness.config.secrets import check_composed_config, check_config_tree, check_overrides, read_env_file
from harness.config.suggest import did_you_mean, renamed_key_message, unknown_key_in_error
from harness.config.validate import validate_config

ENV_PREFIX = "HT__"
CONFIG_NAME = "config"
# Inside DVC stages (`load_params`) the environment may set only these: they change how fast or where a
# run is logged (key variable, concurrency, retries, tracking store), never what it computes. Every other key
# is a research setting: DVC hashed it from params.yaml, and an HT__ value would change the stage's result
# while dvc.lock and `dvc status` still show params.yaml's. llm.base_url and llm.cache_dir are research
# settings too: they decide which model answers and which stored replies are replayed, so a resume with
# another server (or cache) would mix two models' answers in one run (issue 31 item 4).
ENGINEERING_KEYS = (
    "llm.api_key_env", "llm.timeout_s", "llm.max_retries",
    "llm.backoff_base_s", "llm.backoff_max_s", "llm.retry_after_max_s", "llm.concurrency", "llm.client_processes",
    "improve.workers", "tracking.tracking_uri", "quiet",
)
_log = logging.getLogger(__name__)


def default_config_dir() -> Path:
    """`./conf` when the working directory has one, else the `conf/` next to the installed package."""
    local = Path.cwd() / "conf"
    return local if (local / f"{CONFIG_NAME}.yaml").is_file() else Path(__file__).resolve().parents[2] / "conf"


def env_layer(env_file: str | os.PathLike[str] | None = ".env", environ: Mapping[str, str] | None = None) -> dict[str, tuple[str, str]]:
    """The `.env` layer as {dotted key: (raw value, source variable)}; the process environment wins over the file."""
    merged = {name: (value, f"{name} (from {env_file})") for name, value in read_env_file(env_file).items()}
    for name, value in (os.environ if environ is None else environ).items():
        merged[name] = (value, f"{name} (from the environment)")
    layer: dict[str, tuple[str, str]] = {}
    for name, (value, source) in merged.items():
        if not name.startswith(ENV_PREFIX):
            continue
        parts = name[len(ENV_PREFIX):].split("__")
        if not all(parts):
            raise ConfigError([Violation(name, "<env>", "HT__ variables are HT__<SECTION>__<KEY> with non-empty parts")])
        layer[".".join(part.lower() for part in parts)] = (value, source)
    return layer


def _override_keys(overrides: Sequence[str]) -> set[str]:
    if not overrides:
        return set()  # nothing to parse: spares the Hydra import (stage start-up)
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    try:
        parsed = OverridesParser.create().parse_overrides([str(o) for o in overrides])
    except HydraException as exc:
        raise ConfigError(f"cannot parse command-line overrides {list(overrides)}: {exc}") from None
    return {override.key_or_group for override in parsed}


def _parse_env_value(key: str, raw: str, source: str) -> Any:
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    try:
        override = OverridesParser.create().parse_override(f"{key}={raw}")
    except HydraException:
        return raw  # not valid override syntax: take the text verbatim
    if override.is_sweep_override():
        raise ConfigError([Violation(key, raw, f"{source}: a comma or range makes this a sweep; quote the value")])
    return override.value()


def refuse_research_settings(layer: Mapping[str, tuple[str, str]], allowed: Sequence[str]) -> None:
    """Raise ConfigError for every `.env`/HT__ key outside `allowed` (inside DVC stages: research settings
    come only from params.yaml), saying how to change the setting instead."""
    refused = []
    for key, (raw, source) in sorted(layer.items()):
        if key in allowed:
            continue
        variable = source.split(" ", 1)[0]
        refused.append(Violation(key, raw, (
            f"{source} would change a research setting inside a DVC stage, which reads it from params.yaml "
            f"as DVC hashed it; change it with `dvc exp run -S {key}=...` or edit conf/ and run "
            f"`python -m harness.config.snapshot`, and unset {variable} (inside DVC stages the environment "
            f"may set only {', '.join(allowed)})")))
    if refused:
        raise ConfigError(refused)


def apply_env_layer(cfg: DictConfig, layer: Mapping[str, tuple[str, str]], cli_keys: set[str],
                    allowed: Sequence[str] | None = None) -> None:
    """Set each env value on `cfg` (in place) unless the command line set the same key; with `allowed`
    (DVC stages), a key outside it is refused (`refuse_research_settings`)."""
    check_overrides([f"{key}={raw}" for key, (raw, _) in layer.items()], source="in HT__ variables / .env")
    for key, (raw, source) in sorted(layer.items()):
        if key in cli_keys:
            continue  # command line wins
        node_parent, _, leaf = key.rpartition(".")
        parent = OmegaConf.select(cfg, node_parent) if node_parent else cfg
        if not isinstance(parent, DictConfig) or leaf not in parent:
            raise ConfigError([Violation(key, raw, f"{source}: not a config key (see params.yaml for the keys)"
                                                   f"{did_you_mean(key)}")])
        if isinstance(parent._get_node(leaf), DictConfig) and not raw.lstrip().startswith("{"):
            raise ConfigError([Violation(key, raw, f"{source}: '{key}' is a section; .env sets values only "
                                                   f"(choose groups on the command line, e.g. {key}={raw})")])
        if allowed is not None and key not in allowed:
            continue  # refused below, all at once, once every key is known to exist
        try:
            OmegaConf.update(cfg, key, _parse_env_value(key, raw, source), merge=False)
        except OmegaConfBaseException as exc:
            raise ConfigError([Violation(key, raw, f"{source}: {_first_line(exc)}")]) from None
    if allowed is not None:
        refuse_research_settings({k: v for k, v in layer.items() if k not in cli_keys}, allowed)


def _first_line(exc: BaseException) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else exc.__class__.__name__


def _hydra_error(exc: BaseException) -> ConfigError:
    """A ConfigError carrying Hydra's message and its cause's (which names full_key)."""
    parts = [str(exc).strip()]
    cause = exc.__cause__
    while cause is not None:
        parts.append(str(cause).strip())
        cause = cause.__cause__
    return ConfigError("cannot compose conf/: " + "\n".join(p for p in parts if p))


def _task_overrides_from_hydra() -> list[str]:
    from hydra.core.hydra_config import HydraConfig

    if HydraConfig.initialized():
        return list(HydraConfig.get().overrides.task)
    return []


def finalize_config(
    cfg: DictConfig,
    *,
    cli_overrides: Sequence[str] | None = None,
    env_file: str | os.PathLike[str] | None = ".env",
    environ: Mapping[str, str] | None = None,
    env_allowed: Sequence[str] | None = None,
) -> DictConfig:
    """Apply the `.env` layer to an already-composed cfg, then check, resolve, validate and freeze a copy.

    For `@hydra.main` apps (e.g. `stages.train`): `cfg = finalize_config(cfg)` takes the command-line
    overrides from HydraConfig so they keep precedence over `.env`. Pass `env_file=None, environ={}`
    to ignore the environment (snapshots); `env_allowed` limits the keys `.env`/HT__ may set."""
    if cli_overrides is None:
        cli_overrides = _task_overrides_from_hydra()
    check_overrides(cli_overrides)
    cfg = copy.deepcopy(cfg)
    OmegaConf.set_readonly(cfg, False)
    apply_env_layer(cfg, env_layer(env_file, environ), _override_keys(cli_overrides), env_allowed)
    check_composed_config(cfg)
    try:
        OmegaConf.resolve(cfg)
    except OmegaConfBaseException as exc:
        raise ConfigError(f"cannot resolve config: {exc}") from None
    validate_config(cfg)
    return freeze(cfg)


def freeze(cfg: DictConfig) -> DictConfig:
    """Make `cfg` read-only and struct (in place); returns it."""
    OmegaConf.set_struct(cfg, True)
    OmegaConf.set_readonly(cfg, True)
    return cfg


def load_config(
    overrides: Sequence[str] = (),
    *,
    config_dir: str | os.PathLike[str] | None = None,
    config_name: str = CONFIG_NAME,
    env_file: str | os.PathLike[str] | None = ".env",
    environ: Mapping[str, str] | None = None,
) -> DictConfig:
    """Compose `conf/` with `overrides` (YAML < .env < overrides), validate and freeze.

    Raises ConfigError naming the key, value and rule for any bad type, unknown key,
    secret in config or semantic violation."""
    overrides = [str(o) for o in overrides]
    check_overrides(overrides)
    directory = Path(config_dir) if config_dir is not None else default_config_dir()
    if not (directory / f"{config_name}.yaml").is_file():
        raise ConfigError(f"{directory / (config_name + '.yaml')}: config file not found")
    check_config_tree(directory)
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.errors import HydraException

    from harness.config.hydra_store import register_schema

    register_schema()  # conf/config.yaml's defaults name the schema node
    if GlobalHydra.instance().is_initialized():
        raise ConfigError("load_config() cannot run inside a Hydra app; call finalize_config(cfg) on its cfg")
    try:
        with initialize_config_dir(str(directory.resolve()), version_base="1.3", job_name="harness"):
            cfg = compose(config_name=config_name, overrides=overrides)
    except (HydraException, OmegaConfBaseException) as exc:
        unknown = unknown_key_in_error(exc)
        renamed = renamed_key_message(unknown)
        if renamed:
            raise ConfigError(renamed) from None
        error = _hydra_error(exc)
        hint = did_you_mean(unknown).lstrip("; ") if unknown else ""
        raise (ConfigError(f"{error}\n{hint[0].upper()}{hint[1:]}") if hint else error) from None
    frozen = finalize_config(cfg, cli_overrides=overrides, env_file=env_file, environ=environ)
    _log.debug("config loaded from %s with overrides %s", directory, overrides)
    return frozen


def load_params(
    path: str | os.PathLike[str] = "params.yaml",
    *,
    env_file: str | os.PathLike[str] | None = ".env",
    environ: Mapping[str, str] | None = None,
) -> DictConfig:
    """Load a composed snapshot (`params.yaml`, as DVC tracks it) into the schema, apply `.env`,
    validate and freeze. For DVC stages, which must read exactly the params DVC hashed: `.env`/HT__
    may set only ENGINEERING_KEYS here; any other key is refused, saying how to change it."""
    import yaml

    regenerate = "regenerate it with `python -m harness.config.snapshot` (or `git checkout params.yaml`)"
    try:
        loaded = OmegaConf.load(os.fspath(path))
    except FileNotFoundError:
        raise ConfigError(f"{path}: not found (write it with `python -m harness.config.snapshot`)") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or _first_line(exc)
        raise ConfigError(f"{path}: not valid YAML{where}: {problem}; {regenerate}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot be read ({exc.__class__.__name__}: {_first_line(exc)}); {regenerate}") from None
    except OmegaConfBaseException as exc:
        raise ConfigError(f"{path}: {_first_line(exc)}; {regenerate}") from None
    if not isinstance(loaded, DictConfig):
        raise ConfigError(f"{path}: the top level must be a mapping of config groups; {regenerate}")
    missing = [f.name for f in dataclasses.fields(RootConfig) if f.name not in loaded]
    if len(loaded) == 0:
        raise ConfigError(f"{path}: empty (a DVC stage would run on schema defaults, not on conf/); {regenerate}")
    if missing:
        raise ConfigError(f"{path}: missing section(s) {', '.join(missing)} (params.yaml is the whole composed "
                          f"config, never a partial one); {regenerate}")
    try:
        cfg = OmegaConf.merge(OmegaConf.structured(RootConfig), loaded)
    except OmegaConfBaseException as exc:
        unknown = unknown_key_in_error(exc)
        renamed = renamed_key_message(unknown)
        if renamed:
            raise ConfigError(f"{path}: {renamed}; {regenerate}") from None
        hint = did_you_mean(unknown).lstrip("; ") if unknown else ""
        raise ConfigError(f"{path}: {exc}" + (f"\n{hint[0].upper()}{hint[1:]}" if hint else "")) from None
    assert isinstance(cfg, DictConfig)  # merged onto the structured root, which is a mapping
    return finalize_config(cfg, cli_overrides=[], env_file=env_file, environ=environ, env_allowed=ENGINEERING_KEYS)
