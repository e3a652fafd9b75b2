"""Which strategy owns each `gate.*` setting (issue 29 item 1): every field a registered rule, plan, futility rule
or FDR procedure declares in its params dataclass is a GateParams field (so a config key) with the same default, no
two strategies declare the same setting, and the fields no strategy owns are exactly the gate's core ones."""

from __future__ import annotations

import dataclasses

from harness.config.registries import CHOICE_REGISTRIES
from harness.kernel.types import gate_param_fields

# the settings of the gate itself (what every rule and plan shares), plus the four still to be given an owner
# (anchor_fraction: every plan's block shape; ema_gamma: the pools' p_hat update; screen_margin: the pre-gate
# screen; probation_settlement: the slow update): moving a setting to a strategy removes it here
CORE = {"rule", "plan", "futility", "fdr", "metric", "lambda_accept", "lambda_dir", "block_size", "max_pairs", "undecided",
        "infra_max_ratio", "infra_min_denominator", "fdr_level", "screen",
        "anchor_fraction", "ema_gamma", "screen_margin", "probation_settlement"}


def _owners() -> dict[str, set[type]]:
    owners: dict[str, set[type]] = {}
    for registry in CHOICE_REGISTRIES.values():
        for name in registry.names():
            params_type = getattr(registry.get(name), "params_type", None)
            for f in dataclasses.fields(params_type) if params_type else ():
                owners.setdefault(f.name, set()).add(params_type)
    return owners


def test_every_strategy_setting_is_a_gate_field_with_the_owners_default() -> None:
    defaults = {f.name: f.default for f in gate_param_fields()}
    for field, types in _owners().items():
        assert field in defaults, f"{sorted(t.__name__ for t in types)} declare {field}, which GateParams lacks"
        for params_type in types:
            own = next(f.default for f in dataclasses.fields(params_type) if f.name == field)
            assert own == defaults[field], f"{params_type.__name__}.{field} = {own!r} but GateParams.{field} = {defaults[field]!r}"


def test_each_setting_has_one_owner_and_the_rest_is_the_core() -> None:
    owners = _owners()
    shared = {field: sorted(t.__name__ for t in types) for field, types in owners.items() if len(types) > 1}
    assert not shared, f"settings declared by two strategies: {shared}"
    unowned = {f.name for f in gate_param_fields()} - set(owners)
    assert unowned == CORE, f"not owned by a strategy but not core: {sorted(unowned - CORE)}; core now owned: {sorted(CORE - unowned)}"
