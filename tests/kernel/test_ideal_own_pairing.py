"""benchmarks/ideal_decisions.py `--own`: certified products paired seed by seed with GEPA's own run, over several
e2e JSONs (one per --max-epochs)."""

from __future__ import annotations

import pytest

from benchmarks import ideal_decisions


def _run(rule: str, seed: int, epochs: int, training: int, cert: int, gain: float, certified: bool = True,
         gates: list[dict] | None = None) -> dict:
    return {"rule": rule, "seed": seed, "tradeoff": False, "base_test": 0.5, "delivered_test": 0.5 + gain,
            "curve": [{"epoch": e, "rollouts": training * e // epochs, "by_purpose": {"gate": 0}} for e in range(1, epochs + 1)],
            "certificate": {"rollouts": cert, "certified": certified},
            "base_by_type": {"a": 0.5}, "delivered_by_type": {"a": 0.5 + min(gain, 0.0)}, "ideal_gates": gates}


def test_the_reference_is_gepa_at_its_most_epochs_and_the_difference_is_paired():
    e2 = {"runs": [_run("betting", 1, 2, 600, 400, 0.1), _run("betting", 2, 2, 700, 300, 0.1),
                   _run("gepa", 1, 2, 400, 300, 0.05), _run("gepa", 2, 2, 500, 500, -0.03, certified=False)]}
    e4 = {"runs": [_run("betting", 1, 2, 600, 400, 0.1), _run("gepa", 1, 4, 800, 100, 0.2), _run("gepa", 2, 4, 1000, 50, 0.2)]}
    reference, by = ideal_decisions.own_totals([e2, e4])
    assert reference == {1: 800.0, 2: 1000.0}  # training only: GEPA's run has no certificate
    lines = ideal_decisions.own_lines([e2, e4])
    row = next(line for line in lines if line.startswith("| gepa | 2 |"))
    # totals 700 and 1000; minus the reference: -100 and 0 -> -50, se 50; one run at or under
    assert "| 400 | 850 (± 150) | -50 (± 50) | +1.00 | 1/2 | 1/2 |" in row and row.endswith("| 2/2 |")
    assert by[("betting", 2)][1]["total"] == 1000
    assert any("betting at 2 epochs" not in line and "Not on every seed" not in line for line in lines)


def test_a_rule_missing_a_seed_is_listed_apart_and_two_different_runs_of_one_key_are_refused():
    e2 = {"runs": [_run("gepa", 1, 4, 800, 100, 0.2), _run("gepa", 2, 4, 900, 100, 0.2), _run("oracle_n3", 1, 2, 500, 200, 0.1)]}
    text = "\n".join(ideal_decisions.own_lines([e2]))
    assert "oracle_n3 at 2 epochs (1 of 2 seeds)" in text and "| oracle_n3 |" not in text
    other = {"runs": [_run("gepa", 1, 4, 810, 100, 0.2)]}
    with pytest.raises(ValueError, match="gepa at 4 epochs, seed 1: two different runs"):
        ideal_decisions.own_totals([e2, other])


def test_the_free_ideal_gate_is_repriced_at_k_rollouts_a_gate():
    gates = [{"epoch": 1, "pairs": 0, "effect": 0.01, "action": "accept"}, {"epoch": 2, "pairs": 0, "effect": 0.0, "action": "reject"}]
    e4 = {"runs": [_run("gepa", 1, 2, 800, 0, 0.2), _run("oracle", 1, 2, 500, 100, 0.2, gates=gates)]}
    _, by = ideal_decisions.own_totals([e4])
    assert by[("oracle", 2)][1]["total"] == 600
    assert by[("oracle_perfect3", 2)][1]["total"] == 600 + 2 * 3 and by[("oracle_perfect3", 2)][1]["pairs"] == 6
    assert e4["runs"][1]["curve"][-1] == {"epoch": 2, "rollouts": 500, "by_purpose": {"gate": 0}}  # re-pricing copies
