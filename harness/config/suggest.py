""""Did you mean ...?" for a misspelt config key: the closest key of the schema (difflib).

`suggest_key("gate.lamda")` -> "gate.lambda". Used by every place that
refuses an unknown key: the unknown-key check of validate.py, the `.env`/HT__
layer, `load_params` and the command-line pre-check of `stages.train` (where
Hydra's own "Could not override 'gate.lamda'" error gets the hint).
"""

from __future__ import annotations

import difflib
import functools
import re

from omegaconf import DictConfig, OmegaConf

from harness.config.schema import RootConfig

_CUTOFF = 0.75  # difflib ratio of the leaf names: "lamda"/"lambda" 0.91, "blok_size"/"block_size" 0.95; "foo"/"fdr" 0.33


@functools.lru_cache(maxsize=1)
def schema_keys() -> tuple[str, ...]:
    """Every dotted key of the schema, sections and leaves (`gate`, `gate.lambda`, `improve.command.timeout_s`)."""
    keys: list[str] = []

    def walk(node: DictConfig, prefix: str) -> None:
        for key in node.keys():
            full = f"{prefix}{key!s}"
            keys.append(full)
            child = node._get_node(key)
            if isinstance(child, DictConfig) and OmegaConf.get_type(child) not in (dict, None):
                walk(child, full + ".")

    walk(OmegaConf.structured(RootConfig), "")
    return tuple(keys)


def suggest_key(key: str) -> str | None:
    """The schema key closest to the unknown dotted `key` (None when nothing is close, or `key` is known)."""
    key = key.lstrip("+~").strip()
    known = schema_keys()
    if not key or key in known:
        return None
    section, _, leaf = key.rpartition(".")
    by_leaf: dict[str, list[str]] = {}
    for known_key in known:
        by_leaf.setdefault(known_key.rpartition(".")[2], []).append(known_key)
    same_section = [k.rpartition(".")[2] for k in known if k.rpartition(".")[0] == section]
    match = difflib.get_close_matches(leaf, same_section, n=1, cutoff=_CUTOFF)
    if match:  # a typo of the leaf
        return f"{section}.{match[0]}" if section else match[0]
    for candidate in difflib.get_close_matches(leaf, list(by_leaf), n=3, cutoff=_CUTOFF):
        if len(by_leaf[candidate]) == 1:  # the (nearly) right name in another section, when only one has it
            return by_leaf[candidate][0]
    return None


# Keys that moved: the old key's error names the new one (issue 29: one Harness² round config, conf/h2_round/;
# gate.ladder is the gate's question-sampling plan, importance | random | static, not always a ladder).
RENAMED_KEYS: dict[str, str] = {
    "gate.ladder": "gate.plan", "gate.ladder_prior_obs": "gate.plan_prior_obs",
    "evolve.h2_k": "h2_round.k", "evolve.h2_mode": "h2_round.mode", "evolve.h2_budget_usd": "h2_round.budget_usd",
    "evolve.h2_max_sessions": "h2_round.max_sessions", "improve.k": "h2_round.k", "improve.budget_usd": "h2_round.budget_usd",
    "improve.max_sessions": "h2_round.max_sessions",
}


def renamed_key_message(key: str | None) -> str | None:
    """The one-line error for a renamed key (`gate.ladder` -> `gate.plan`), None for any other key."""
    if key is None:
        return None
    old = key.lstrip("+~").strip().partition("=")[0]
    return f"{old}: unknown key; renamed: {old} is now {RENAMED_KEYS[old]}" if old in RENAMED_KEYS else None


def did_you_mean(key: str) -> str:
    """"; renamed: <key> is now <new key>" for a moved key, "; did you mean <key>?" for a close schema key, else ""."""
    renamed = RENAMED_KEYS.get(key.lstrip("+~").strip())
    if renamed:
        return f"; renamed: {key.lstrip('+~').strip()} is now {renamed}"
    match = suggest_key(key)
    return f"; did you mean {match}?" if match else ""


_FULL_KEY = re.compile(r"full_key: *(\S+)")
_OVERRIDE_KEY = re.compile(r"Could not (?:override|append to|delete(?: from config)?) '([^']+)'")


def unknown_key_in_error(exc: BaseException) -> str | None:
    """The unknown dotted key a Hydra/OmegaConf error is about (its `full_key`, or the override it names)."""
    seen: BaseException | None = exc
    while seen is not None:
        full_key = getattr(seen, "full_key", None)
        if isinstance(full_key, str) and full_key:
            return full_key
        for pattern in (_FULL_KEY, _OVERRIDE_KEY):
            match = pattern.search(str(seen))
            if match:
                return match.group(1)
        seen = seen.__cause__ or seen.__context__
    return None
