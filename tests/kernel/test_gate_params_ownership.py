"""Which strategy owns each `gate.*` setting (issue 29 item 1): GateParams holds only the gate's core fields; every
other setting is declared once, by the params dataclass of a registered rule, plan, futility rule or FDR procedure or
of a gate component (registry.GATE_COMPONENTS), reaches it through GateParams.settings (params_of), and is read
nowhere as an attribute of a GateParams."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest

from harness.kernel.registry import gate_params_types, params_of
from harness.kernel.types import GateParams, gate_param_fields

ROOT = Path(__file__).resolve().parents[2]

# the settings of the gate itself, which every rule and plan shares (docs/kernel.md "Gate parameters")
CORE = ("rule", "plan", "metric", "lambda_accept", "lambda_dir", "block_size", "max_pairs", "undecided", "fdr", "screen",
        "futility", "infra_max_ratio", "infra_min_denominator")


def _owners() -> dict[str, set[type]]:
    owners: dict[str, set[type]] = {}
    for _owner, params_type in gate_params_types():
        for f in dataclasses.fields(params_type):
            owners.setdefault(f.name, set()).add(params_type)
    return owners


def test_gate_params_has_only_the_core_fields_and_the_settings_carrier() -> None:
    assert [f.name for f in gate_param_fields()] == list(CORE)
    assert [f.name for f in dataclasses.fields(GateParams)] == [*CORE, "settings"]


def test_each_setting_has_one_owner_and_no_owner_declares_a_core_field() -> None:
    owners = _owners()
    shared = {field: sorted(t.__name__ for t in types) for field, types in owners.items() if len(types) > 1}
    assert not shared, f"settings declared by two strategies: {shared}"
    assert not set(owners) & set(CORE), f"core fields declared by a strategy: {sorted(set(owners) & set(CORE))}"
    assert {"anchor_fraction", "ema_gamma", "screen_margin", "probation_settlement", "fdr_level"} <= set(owners)


def test_every_owned_setting_reaches_its_owner_through_the_carrier() -> None:
    defaults = dict(GateParams().settings)
    for _owner, params_type in gate_params_types():
        assert params_of(params_type, GateParams()) == params_type(), f"{params_type.__name__}: defaults differ"
        for f in dataclasses.fields(params_type):
            changed = _other_value(f.default)
            own = params_of(params_type, GateParams.build(**{f.name: changed}))
            assert getattr(own, f.name) == changed, f"{params_type.__name__}.{f.name} did not receive gate.{f.name}"
            assert defaults[f.name] == f.default


def _other_value(value: object) -> object:
    if isinstance(value, bool):
        return not value
    if isinstance(value, (int, float)):
        return value + 1
    return f"{value}_changed"


def test_build_names_an_unknown_key_and_splits_core_from_settings() -> None:
    with pytest.raises(ValueError, match="'bet_lo'"):
        GateParams.build(bet_lo=0.2)
    params = GateParams.build(block_size=7, bet_low=0.2)
    assert params.block_size == 7 and dict(params.settings)["bet_low"] == 0.2
    assert params.with_values(max_pairs=9).settings == params.settings


def _owned_attribute_reads(path: Path, owned: set[str]) -> list[str]:
    """`x.<owned setting>` reads whose base names a GateParams by this codebase's conventions (params, gate_params,
    gc.params, ctx.gate, GateParams(...)): the typed read is params_of(Owner, x).<setting>. A name its function
    annotates with another type (`params: CertifyParams`, whose futility_* fields share the gate settings' names) is
    not a GateParams."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    other_typed: set[int] = set()  # ids of Attribute nodes whose base is an argument annotated as a non-GateParams type
    for fn in ast.walk(tree):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names = {a.arg for a in fn.args.args + fn.args.kwonlyargs
                     if a.annotation is not None and "GateParams" not in ast.unparse(a.annotation)}
            other_typed |= {id(n) for n in ast.walk(fn) if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)
                            and n.value.id in names}
    hits = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in owned and isinstance(node.ctx, ast.Load) \
                and id(node) not in other_typed:
            base = ast.unparse(node.value)
            if base in {"params", "gate_params", "gc.params", "ctx.gate", "self.params", "p", "gp", "GATE"} or \
                    base.startswith(("GateParams(", "GateParams.build(")):
                hits.append(f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path.name}:{node.lineno}: {base}.{node.attr}")
    return hits


def test_no_attribute_read_of_an_owned_setting_on_gate_params() -> None:
    owned = set(_owners())
    files = [p for d in ("harness", "benchmarks", "stages") for p in sorted((ROOT / d).rglob("*.py"))
             if p != ROOT / "harness" / "kernel" / "registry.py"]
    hits = [hit for path in files for hit in _owned_attribute_reads(path, owned)]
    assert not hits, "read these through registry.params_of(<Owner>Params, ...):\n" + "\n".join(hits)


def test_the_ast_check_sees_an_attribute_read(tmp_path: Path) -> None:
    bad = tmp_path / "probe.py"
    bad.write_text("def f(params, own):\n    return params.bet_low + own.bet_low\n", encoding="utf-8")
    assert _owned_attribute_reads(bad, {"bet_low"}) == ["probe.py:2: params.bet_low"]
    typed = tmp_path / "typed.py"
    typed.write_text("def f(params: CertifyParams, gp: 'GateParams'):\n    return params.bet_low + gp.bet_low\n",
                     encoding="utf-8")
    assert _owned_attribute_reads(typed, {"bet_low"}) == ["typed.py:2: gp.bet_low"]
