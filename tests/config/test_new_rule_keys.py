"""Adding a gate rule with a setting of its own is one file (tests/kernel/toy_rule.py) plus one registry line: its key
joins the gate config schema (settable by an override, unknown keys still refused), config validation runs its
check(), and the gate reads the value through GateParams.settings."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from harness.config.errors import ConfigError
from harness.config.load import load_config
from harness.kernel.gate import gate_decision
from harness.kernel.registry import params_of
from harness.kernel.rules import RULES
from harness.kernel.types import GateParams, PairResult, gate_params_from_config
from tests.kernel.toy_rule import ToyParams

BASE = ["gate.rule=toy_min_wins", "gate.plan=random", "gate.futility=none", "gate.block_size=1", "tracking=none"]


@pytest.fixture
def toy_rule() -> Iterator[None]:
    RULES.register("toy_min_wins", "tests.kernel.toy_rule:RULE")  # the one registry line
    try:
        yield
    finally:
        RULES.unregister("toy_min_wins")


def _load(*overrides: str):
    return load_config([*BASE, *overrides], env_file=None, environ={})


def test_the_toy_rules_key_is_set_by_an_override_and_read_by_the_gate(toy_rule: None) -> None:
    params = gate_params_from_config(_load("gate.toy_min_wins=2").gate)
    assert params_of(ToyParams, params).toy_min_wins == 2
    wins = [PairResult(f"q{i}", False, True, sample_index=i) for i in range(2)]
    assert gate_decision(wins[:1], params, final=False).action == "continue"
    assert gate_decision(wins, params, final=False).action == "accept"
    assert params_of(ToyParams, gate_params_from_config(_load().gate)).toy_min_wins == 5  # its own default


def test_the_toy_rules_check_runs_at_load(toy_rule: None) -> None:
    with pytest.raises(ConfigError, match="gate.toy_min_wins.*toy rule: must be an integer >= 1"):
        _load("gate.toy_min_wins=0")


def test_without_the_rule_its_key_is_unknown() -> None:
    with pytest.raises(ConfigError, match="toy_min_wins"):
        load_config(["gate.toy_min_wins=2", "tracking=none"], env_file=None, environ={})
    assert "toy_min_wins" not in dict(GateParams().settings)
