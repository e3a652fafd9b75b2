import json
import math
import re

import numpy as np
import pytest

from benchmarks import gate as bench
from harness.kernel.types import GateParams


def test_quick_benchmark_runs_and_writes_its_report(tmp_path):
    out = tmp_path / "gate.md"
    assert bench.main(["--quick", "--runs", "40", "--pop-runs", "3", "--out", str(out)]) == 0
    text = out.read_text()
    for heading in (
        "## 1. Grid",
        "### 1b.",
        "## 1c.",
        "## 2. Negative control",
        "## 3. Every `gate.rule`",
        "## 4. Information ladder",
        "### 4b. The same population's null cells",
        "## 5. The static ladder in population null cells",
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
    results = json.loads(out.with_suffix(".json").read_text())  # the results beside the page
    assert results["command"].startswith("python benchmarks/gate.py --quick")
    assert results["sections"]["betting"] and results["settings"]["quick"] is True
    assert text.count("| 0.2 | +0 |") == 2  # one row per grid cell, block 20 and block 10
    for label in ("random order (all anchor)", "static ladder (product default)"):
        assert label in text.split("## 7.")[1]  # every ordering has its efficiency / safety row
    assert "static ladder, anchor 0.0" in text  # trade-off null without the anchor stratum
    assert "adaptive ladder," not in text and "LEAK" not in text  # removed in issue 29
    section8 = text.split("## 8.")[1].split("## 9.")[0]
    for population in ("trade-off null of section 6", "heterogeneous null", "partial-fix null", "mix A", "mix B", "mix C"):
        assert population in section8  # every population null has its row
    cross = text.split("## 12.")[1].split("## Targets")[0]
    agree, runs = (int(x) for x in re.search(r"agreed in (\d+) of (\d+)", cross).groups())
    assert agree == runs  # the vectorised decision is the production decision


def test_saving_vs_random_and_its_delta_method_se():
    saving, se = bench.saving_vs_random(500.0, 15.0, 1000.0, 30.0)
    assert saving == pytest.approx(0.5)
    assert se == pytest.approx(0.5 * math.sqrt(0.03**2 + 0.03**2))
    assert bench.saving_vs_random(1000.0, 30.0, 1000.0, 30.0)[0] == 0.0


def test_shifted_population_keeps_the_baseline_and_hits_the_mean_gain():
    p = np.random.default_rng(3).uniform(0.05, 0.95, 200)
    null = bench.shifted_population(p, 0.0)
    assert np.array_equal(null.p, p) and np.array_equal(null.q, p)
    minus2 = bench.shifted_population(p, -2.0)
    assert np.array_equal(minus2.p, p)
    assert float(np.mean(minus2.q - p)) == pytest.approx(-0.02, abs=1e-9)
    assert np.all(minus2.q < p)  # the same logit shift hurts every question


def test_e2e_harm_lines_reads_the_json_or_says_it_is_missing(tmp_path, monkeypatch):
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
    path.write_text('{"summary": {"rules": ["betting"], "betting": {"installed": 7, "hurt": 0, "hurt_share": 0.0}, "tradeoff": null}}')
    assert "no trade-off-null editor" in bench.e2e_harm_lines(path)[0]  # an e2e.py --no-tradeoff run
    path.write_text('{"summary": {}}')
    assert "could not be read" in bench.e2e_harm_lines(path)[0]


def test_trade_off_cell_maps_every_ladder_config_to_a_section_6_row():
    assert bench.trade_off_cell("random") == ("random", 1.0)
    assert bench.trade_off_cell("static") == ("static", 0.25)


@pytest.mark.parametrize("order", ["random", "static"])
def test_a_recorded_population_path_reads_the_gate_loops_decision(order):
    """Sections 4-6 record one path per gate and read the sequential rule's decision at every cap (`decide_on_path`);
    on the same draws the product gate (the kernel's gate loop with gate_decision, rule `sequential`) decides the
    same action after the same number of pairs, in every seeded gate (null, +5 and +15 point populations)."""
    params = GateParams(rule="sequential", plan="static", max_pairs=400, undecided="probation")
    names = {1: "accept", -1: "reject", 0: "probation"}
    seen = set()
    for gain in (0.0, 5.0, 15.0):
        pop = bench.uniform_log_odds_population(np.random.default_rng(int(gain)), 60, 2.5, gain)
        for run in range(12):
            records = bench.population_path(np.random.default_rng([run, 1]), pop, params, order=order, pre_gate_obs=2, run_seed=run,
                                            stop_on_reject=True)
            action, n = bench.decide_on_path(records, params, params.max_pairs, direction=True)
            verdict = bench.population_gate(np.random.default_rng([run, 1]), pop, params, order=order, pre_gate_obs=2, run_seed=run)
            assert (names[action], n) == (verdict.action, verdict.n_pairs), (gain, run)
            seen.add(verdict.action)
    assert {"accept", "reject"} <= seen  # both sides of the rule were exercised


def test_the_betting_cross_check_agrees_on_seeded_worlds():
    """Section 12: the vectorised betting decision (sections 8-11) equals the gate loop's on every seeded gate."""
    from benchmarks import gate_betting

    params = GateParams(rule="betting", max_pairs=400)
    rng = np.random.default_rng(11)
    accepts = infra_aborts = 0
    for gain in (0.0, 10.0):
        pop = bench.uniform_log_odds_population(rng, 80, 2.5, gain)
        for infra_on_wrong in (0.0, 0.5):  # 0.5: section 11's missing-not-at-random failures (the INFRA guard trips)
            result = gate_betting.cross_check(rng, pop.p, pop.q, 15, params, pre_gate_obs=4, infra_on_wrong=infra_on_wrong)
            assert result["agree"] == result["runs"] == 15, (gain, infra_on_wrong)
            assert result["trigger_at_or_above_lambda"] == result["accepts"]
            accepts += result["accepts"]
            infra_aborts += result["infra_aborts"]
    assert accepts > 0 and infra_aborts > 0  # both the accept side and the INFRA guard were exercised


def test_the_vectorised_sign_path_of_sections_8_to_11_is_the_gate_loops_sequential_rule():
    """gate_betting.sign_path + decide (the `sequential` rows of sections 8-11) against the kernel's gate loop with
    gate_decision (rule `sequential`, blocks of 20, cap 400) on the same seeded signs: same action, same pairs."""
    from benchmarks import gate_betting
    from benchmarks._engine import decide_by, gate_now
    from harness.kernel.gate import pair_block
    from harness.kernel.plans import FixedBlocks
    from harness.kernel.types import BlockItem

    params = GateParams(rule="sequential", plan="static", max_pairs=400, undecided="probation")
    rng = np.random.default_rng(17)
    names = {1: "accept", -1: "reject", 0: "probation"}
    seen = set()
    for theta in (0.5, 0.62, 0.75):
        for _ in range(15):
            y = np.where(rng.random(400) < 0.3, np.where(rng.random(400) < theta, 1, -1), 0)
            blocks = [[BlockItem(f"q{i}", i) for i in range(start, start + 20)] for start in range(0, 400, 20)]

            def sample_block(block, b, y=y):
                part = y[20 * b:20 * b + 20]
                return pair_block(block, [bool(s == -1) for s in part], [bool(s == 1) for s in part])

            verdict = gate_now(FixedBlocks(blocks), sample_block, decide_by(params)).decision
            action, n = gate_betting.decide(gate_betting.sign_path(y, params), params.block_size, params.max_pairs)
            assert (names[action], n) == (verdict.action, verdict.n_pairs)
            seen.add(verdict.action)
    assert seen == {"accept", "reject", "probation"}
