"""benchmarks/e2e.py `own_runs`: each rule's own run with what the same certify stage delivered from it."""

from __future__ import annotations

from benchmarks import e2e


def _run(rule: str, seed: int, training: int, cert: int | None, base: float, delivered: float, certified: bool,
         worst_type: float) -> dict:
    return {"rule": rule, "seed": seed, "tradeoff": False, "base_test": base, "delivered_test": delivered,
            "curve": [{"epoch": 1, "rollouts": training // 2}, {"epoch": 2, "rollouts": training}],
            "certificate": None if cert is None else {"rollouts": cert, "certified": certified},
            "base_by_type": {"a": 0.5, "b": 0.5}, "delivered_by_type": {"a": 0.5 + worst_type, "b": 0.6}}


def test_totals_gains_and_counts_per_rule():
    runs = [_run("betting", 1, 600, 400, 0.50, 0.60, True, 0.0), _run("betting", 2, 700, 200, 0.50, 0.50, False, 0.0),
            _run("gepa", 1, 800, 300, 0.50, 0.70, True, -0.03), _run("gepa", 2, 900, 100, 0.50, 0.45, True, 0.0)]
    own = e2e.own_runs(runs, ["betting", "gepa"])
    assert own["betting"]["training"] == 650 and own["betting"]["certificate"] == 300 and own["betting"]["total"] == 950
    assert round(own["betting"]["gain_pts"], 6) == 5.0 and own["betting"]["certified"] == 1
    assert own["gepa"]["total"] == 1050 and own["gepa"]["worse"] == 1 and own["gepa"]["type_worse_2pt"] == 1
    assert own["gepa"]["epochs"] == [2]
    lines = e2e.own_run_lines(own)
    assert any(line.startswith("| gepa | 2 | 2 | 850 | 200 | 1050 | +7.50 | 2/2 | 1/2 | 1/2 |") for line in lines)


def test_a_rule_without_a_certificate_on_every_run_has_no_row():
    runs = [_run("betting", 1, 600, 400, 0.5, 0.6, True, 0.0), _run("skillopt", 1, 900, None, 0.5, 0.7, False, 0.0)]
    assert set(e2e.own_runs(runs, ["betting", "skillopt"])) == {"betting"}


def test_an_ideal_row_at_k_pairs_has_its_charged_pairs_in_training_and_says_so():
    runs = [_run("betting", 1, 600, 400, 0.5, 0.6, True, 0.0), _run("oracle_n3", 1, 660, 150, 0.5, 0.7, True, 0.0)]
    own = e2e.own_runs(runs, ["betting", "oracle_n3"])
    assert own["oracle_n3"]["total"] == 810
    text = "\n".join(e2e.own_run_lines(own))
    assert "charged one rollout a pair" in text and "| oracle_n3 | 1 | 2 | 660 | 150 | 810 |" in text
    assert "charged one rollout a pair" not in "\n".join(e2e.own_run_lines(e2e.own_runs(runs, ["betting"])))
