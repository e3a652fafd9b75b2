import math
import re

import numpy as np
import pytest

from .bench_loader import load_gate_benchmark


def test_quick_benchmark_runs_and_writes_its_report(tmp_path):
    out = tmp_path / "gate.md"
    assert load_gate_benchmark().main(["--quick", "--runs", "40", "--pop-runs", "3", "--out", str(out)]) == 0
    text = out.read_text()
    for heading in (
        "## 1. Grid",
        "### 1b.",
        "## 1c.",
        "## 2. Negative control",
        "## 3. Every `gate.rule`",
        "## 4. Information ladder",
        "### 4b. The same population's null cells",
        "## 5. Ladder orderings",
        "## 6. Trade-off null",
        "## 7. Ladder: efficiency vs safety",
        "## 8. Importance plan + betting e-process: population nulls",
        "## 9. Importance plan: pairs to accept",
        "## 10. Power and the reject side",
        "## 11. Infrastructure failures missing not at random",
        "## 12. Cross-check through the production path",
        "## Targets",
    ):
        assert heading in text
    assert "python benchmarks/gate.py --quick" in text
    assert text.count("| 0.2 | +0 |") == 2  # one row per grid cell, block 20 and block 10
    assert "LEAK control" in text
    for label in ("static ladder (product default)", "adaptive ladder, top 25%", "adaptive ladder, top 10%", "adaptive ladder, top 10%, no anchor stratum"):
        assert label in text.split("## 7.")[1]  # every ordering has its efficiency / safety row
    assert "adaptive ladder, top 10%, anchor 0.0" in text  # trade-off null without the anchor stratum
    section8 = text.split("## 8.")[1].split("## 9.")[0]
    for population in ("trade-off null of section 6", "heterogeneous null", "partial-fix null", "mix A", "mix B", "mix C"):
        assert population in section8  # every population null has its row
    cross = text.split("## 12.")[1].split("## Targets")[0]
    agree, runs = (int(x) for x in re.search(r"agreed in (\d+) of (\d+)", cross).groups())
    assert agree == runs  # the vectorised decision is the production decision


def test_saving_vs_random_and_its_delta_method_se():
    bench = load_gate_benchmark()
    saving, se = bench.saving_vs_random(500.0, 15.0, 1000.0, 30.0)
    assert saving == pytest.approx(0.5)
    assert se == pytest.approx(0.5 * math.sqrt(0.03**2 + 0.03**2))
    assert bench.saving_vs_random(1000.0, 30.0, 1000.0, 30.0)[0] == 0.0


def test_shifted_population_keeps_the_baseline_and_hits_the_mean_gain():
    bench = load_gate_benchmark()
    p = np.random.default_rng(3).uniform(0.05, 0.95, 200)
    null = bench.shifted_population(p, 0.0)
    assert np.array_equal(null.p, p) and np.array_equal(null.q, p)
    minus2 = bench.shifted_population(p, -2.0)
    assert np.array_equal(minus2.p, p)
    assert float(np.mean(minus2.q - p)) == pytest.approx(-0.02, abs=1e-9)
    assert np.all(minus2.q < p)  # the same logit shift hurts every question


def test_e2e_harm_lines_reads_the_json_or_says_it_is_missing(tmp_path, monkeypatch):
    bench = load_gate_benchmark()
    monkeypatch.setattr(bench, "ROOT", tmp_path)
    missing = bench.e2e_harm_lines(tmp_path / "e2e.json")
    assert "not present" in missing[0]
    path = tmp_path / "e2e.json"
    path.write_text('{"summary": {"rules": ["betting", "sequential"], "sequential": {"installed": 99, "hurt": 9, "hurt_share": 0.09}, '
                    '"betting": {"installed": 7, "hurt": 1, "hurt_share": 0.142857}, '
                    '"tradeoff": {"proposed": 5, "installed": 3, "accepted": 1, "probation": 2, "in_delivered": 2}}, "cmd": "x"}')
    line = bench.e2e_harm_lines(path)[0]
    assert "(`betting`) installed 7 edits, 1 of them harmful" in line and "14.3%" in line  # the rule that set the budget
    assert "3 installed (1 gate accepts = 20.0% of the proposed, 2 probation installs)" in line and "e2e.md" in line
    path.write_text('{"summary": {}}')
    assert "could not be read" in bench.e2e_harm_lines(path)[0]


def test_trade_off_cell_maps_every_ladder_config_to_a_section_6_row():
    bench = load_gate_benchmark()
    assert bench.trade_off_cell("random") == ("random", 1.0)
    assert bench.trade_off_cell("static") == ("static", 0.25)
    assert bench.trade_off_cell("adaptive10_noanchor") == ("adaptive10", 0.0)
