"""Budget sizing (harness/kernel/sizing.py, issue 32 item 3): numbers from the kernel's own decision code."""

from __future__ import annotations

import dataclasses
import random

import pytest

from harness.kernel import sizing
from harness.kernel.certificate import CertifyParams
from harness.kernel.gate import gate_decision
from harness.kernel.types import GateParams, PairResult

DEFAULT = GateParams(rule="betting_budget", lambda_accept=0.5, max_pairs=20, block_size=20, fdr="none", plan="importance")
STRICT = GateParams(rule="betting", lambda_accept=3.0, max_pairs=400, block_size=20, fdr="elond", plan="importance")


def test_typical_pairs_come_at_their_expected_shares_spread_evenly():
    pairs = sizing.typical_pairs(0.10, 0.40, 100)
    wins = [p for p in pairs if p.candidate and not p.baseline]
    losses = [p for p in pairs if p.baseline and not p.candidate]
    assert (len(wins), len(losses), len(pairs) - len(wins) - len(losses)) == (25, 15, 60)
    assert sum(1 for p in pairs[:20] if p.candidate and not p.baseline) == 5  # evenly: a quarter of every stretch
    with pytest.raises(ValueError, match="gain <= discordance"):
        sizing.typical_pairs(0.5, 0.4, 10)


@pytest.mark.parametrize("params", [DEFAULT, dataclasses.replace(DEFAULT, max_pairs=40, block_size=10)])
def test_the_smallest_gain_is_the_first_the_gate_decision_accepts(params):
    for discordance in (0.1, 0.4):
        gain = sizing.smallest_gate_gain(params, discordance)
        assert gain is not None
        assert sizing.gate_accepts(params, gain, discordance)
        assert not sizing.gate_accepts(params, round(gain - sizing.GAIN_STEP, 6), discordance)


@pytest.mark.slow  # searches budgets up to ~2,500 pairs (a few seconds)
def test_strict_mode_is_sized_at_the_first_e_lond_level_and_a_short_budget_accepts_no_plausible_gain():
    short = dataclasses.replace(STRICT, max_pairs=40, block_size=10)  # the run: ~20 straight wins needed
    sized = sizing.size_gate(short, 0.4)
    assert sized is not None and sized.level == pytest.approx(6.712, abs=1e-3)  # ln(1 / (0.1 * gamma_1))
    assert sized.can_accept and sized.smallest_gain is None  # every pair a win accepts; 40 % discordance never does
    assert sized.pairs_needed is not None and sized.pairs_needed > 1000
    at = dataclasses.replace(sizing._sized(short), max_pairs=sized.pairs_needed)
    assert sizing.gate_accepts(at, 0.05, 0.4)
    assert not sizing.gate_accepts(dataclasses.replace(at, max_pairs=sized.pairs_needed - short.block_size), 0.05, 0.4)


def test_a_budget_that_cannot_accept_even_all_wins_names_the_budget_that_can():
    tiny = dataclasses.replace(STRICT, max_pairs=10, block_size=10)
    sized = sizing.size_gate(tiny)
    assert sized is not None and not sized.can_accept and sized.smallest_gain is None
    at = dataclasses.replace(sizing._sized(tiny), max_pairs=sized.pairs_needed)
    assert sizing.gate_accepts(at, 1.0, 1.0) and not sizing.gate_accepts(dataclasses.replace(at, max_pairs=sized.pairs_needed - 10), 1.0, 1.0)


def test_rules_that_do_not_spend_the_pair_budget_are_not_sized():
    assert sizing.size_gate(dataclasses.replace(DEFAULT, rule="gepa")) is None
    assert sizing.size_gate(dataclasses.replace(DEFAULT, rule="accept_all")) is None


def test_the_certificate_smallest_gain_is_the_first_certified():
    params = CertifyParams(alpha=0.05, max_pairs=100, block_size=20)
    gain = sizing.smallest_certified_gain(params, 0.4)
    assert gain is not None and sizing.certificate_accepts(params, gain, 0.4)
    assert not sizing.certificate_accepts(params, round(gain - sizing.GAIN_STEP, 6), 0.4)
    assert not sizing.size_certificate(CertifyParams(alpha=0.01, max_pairs=5, block_size=5)).can_accept


def test_the_typical_path_gain_is_accepted_in_about_half_of_random_gates():
    """The module's reading of "smallest gain": random gates at that gain accept about half the time (seeded)."""
    rng = random.Random(7)
    for discordance in (0.1, 0.4):
        gain = sizing.smallest_gate_gain(DEFAULT, discordance)
        assert gain is not None
        accepted = 0
        for _ in range(300):
            pairs = []
            for k in range(DEFAULT.max_pairs):
                u = rng.random()
                b, c = (False, True) if u < (discordance + gain) / 2 else (True, False) if u < discordance else (True, True)
                pairs.append(PairResult(f"q{k}", b, c, weight_bound=2.0))
            accepted += gate_decision(pairs, DEFAULT, final=True).action == "accept"
        assert 0.3 <= accepted / 300 <= 0.85, (discordance, gain, accepted)
