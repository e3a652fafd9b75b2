"""A named registry of strategy objects chosen by one config key.

Every choice made by config (gate rule, sampling plan, evolve method) is one
`Registry`; config validation reads the same registry, so an unknown name
fails at load with the list of valid ones. An entry is either the object
itself or a lazy "module:attribute" path (for strategies that live in a
higher layer and must not be imported at config load).
"""

from __future__ import annotations

import dataclasses
import importlib
import math
from collections.abc import Collection, Iterator, Mapping
from typing import Any, Generic, TypeVar, Union

from harness.kernel.types import GateParams

T = TypeVar("T")


class UnknownStrategyError(ValueError):
    """A config key names a strategy that is not registered."""


class Registry(Generic[T]):
    def __init__(self, key: str, entries: Mapping[str, Union[T, str]] | None = None):
        self.key = key  # the config key that chooses, e.g. "gate.rule"
        self._entries: dict[str, Union[T, str]] = dict(entries or {})

    def register(self, name: str, entry: Union[T, str]) -> None:
        if name in self._entries:
            raise ValueError(f"{self.key}: {name!r} is already registered")
        self._entries[name] = entry

    def unregister(self, name: str) -> None:
        self._entries.pop(name, None)

    def names(self) -> tuple[str, ...]:
        return tuple(sorted(self._entries))

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def unknown_message(self, name: object) -> str:
        return f"{self.key}: unknown {name!r}; expected one of {', '.join(self.names())}"

    def get(self, name: str) -> T:
        try:
            entry = self._entries[name]
        except KeyError:
            raise UnknownStrategyError(self.unknown_message(name)) from None
        if isinstance(entry, str):  # lazy "module:attribute"
            module, _, attr = entry.partition(":")
            resolved = getattr(importlib.import_module(module), attr)
            return resolved
        return entry

    def __getitem__(self, name: str) -> T:
        return self.get(name)


P = TypeVar("P")


def params_of(params_type: type[P], source: Any) -> P:
    """A strategy's own frozen params dataclass, each field read by name from `source`: GateParams (its `settings`
    carrier; cached per GateParams) or a config mapping / attribute object (config validation)."""
    if isinstance(source, GateParams):
        cache = source.__dict__.setdefault("_params_of", {})  # frozen: the cache is not a field (eq, replace ignore it)
        own = cache.get(params_type)
        if own is None:
            settings = dict(source.settings)
            missing = [f.name for f in dataclasses.fields(params_type) if f.name not in settings]  # type: ignore[arg-type]
            if missing:
                raise KeyError(f"GateParams.settings lacks {missing} of {params_type.__name__} (was it registered after "
                               "the GateParams was built?)")
            own = cache[params_type] = params_type(**{f.name: settings[f.name] for f in dataclasses.fields(params_type)})  # type: ignore[arg-type]
        return own
    get = source.__getitem__ if isinstance(source, Mapping) else lambda name: getattr(source, name)
    return params_type(**{f.name: get(f.name) for f in dataclasses.fields(params_type)})  # type: ignore[arg-type]


# the gate components every config runs, chosen by no registry, each owning its settings in a params dataclass
# ("module:class", imported lazily: the pools, the screen and probation live above this module's imports)
GATE_COMPONENTS: dict[str, str] = {
    "gate pools (p_hat)": "harness.kernel.ladder:PoolParams",
    "gate.screen": "harness.kernel.screen:ScreenParams",
    "probation (gate.undecided=probation, slow update)": "harness.kernel.probation:ProbationParams",
}


def gate_params_types() -> list[tuple[str, type]]:
    """(owner, params dataclass) of every registered gate strategy (gate.rule, plan, futility, fdr; `key=name`) and
    every gate component: the owners of the gate.* settings GateParams.settings carries."""
    from harness.kernel.fdr import FDR_PROCEDURES
    from harness.kernel.futility import FUTILITY_RULES
    from harness.kernel.plans import SAMPLING_PLANS
    from harness.kernel.rules import RULES

    out: list[tuple[str, type]] = []
    for registry in (RULES, SAMPLING_PLANS, FUTILITY_RULES, FDR_PROCEDURES):
        for name in registry.names():
            params_type = getattr(registry.get(name), "params_type", None)
            if params_type is not None:
                out.append((f"{registry.key}={name}", params_type))
    return out + component_params_types()


def component_params_types() -> list[tuple[str, type]]:
    """(owner, params dataclass) of each gate component (GATE_COMPONENTS)."""
    out = []
    for owner, path in GATE_COMPONENTS.items():
        module, _, attr = path.partition(":")
        out.append((owner, getattr(importlib.import_module(module), attr)))
    return out


def gate_strategy_settings(known: Collection[str]) -> dict[str, Any]:
    """Default of every setting a registered gate strategy or gate component declares in its params dataclass that is
    not in `known`: the gate.* keys GateParams.settings carries and the config schema adds to the core fields."""
    out: dict[str, Any] = {}
    for _owner, params_type in gate_params_types():
        for f in dataclasses.fields(params_type):
            if f.name not in known:
                out.setdefault(f.name, f.default)
    return out


def is_number(value: Any) -> bool:
    """A finite int or float, not a bool: what a strategy's check() asks of a numeric setting."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def is_int_at_least(value: Any, minimum: int) -> bool:
    """An int (not a bool) >= minimum."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= minimum


def ordered_pair_problems(params: Any, low_key: str, high_key: str, in_range: Any, expected: str, *,
                          strict: bool = False) -> list[tuple[str, str]]:
    """check() problems of a (low, high) pair of settings: each a number with `in_range(value)`, then high >= low
    (high > low when `strict`)."""
    problems = [(key, expected) for key in (low_key, high_key)
                if not (is_number(getattr(params, key)) and in_range(getattr(params, key)))]
    low = getattr(params, low_key)
    high = getattr(params, high_key)
    if not problems and (high <= low if strict else high < low):
        problems.append((high_key, f"must be {'>' if strict else '>='} gate.{low_key} = {low}"))
    return problems


def component_problems(source: Any) -> list[tuple[str, Any, str]]:
    """strategy_problems of the gate components (GATE_COMPONENTS), which no registry chooses."""
    out: list[tuple[str, Any, str]] = []
    for _owner, params_type in component_params_types():
        own: Any = params_of(params_type, source)
        out += [(field, getattr(own, field), expected) for field, expected in own.check()]
    return out


def strategy_problems(registry: Registry[Any], source: Any) -> list[tuple[str, Any, str]]:
    """(field, value, what is expected) for every problem of the registered strategies' own params, each params type
    checked once: config validation collects these instead of restating the strategies' rules. A strategy declares
    `params_type` (a frozen dataclass with `check() -> [(field, expected)]`) or nothing."""
    seen: set[type] = set()
    out: list[tuple[str, Any, str]] = []
    for name in registry.names():
        params_type = getattr(registry.get(name), "params_type", None)
        if params_type is None or params_type in seen:
            continue
        seen.add(params_type)
        own = params_of(params_type, source)
        out += [(field, getattr(own, field), expected) for field, expected in own.check()]
    return out
