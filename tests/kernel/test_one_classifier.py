"""One quadrant classifier and one INFRA rule: every caller agrees with the kernel's function."""

from __future__ import annotations

import itertools

import pytest

from harness.evolution.momentum import ComparisonPair, format_comparison_pairs
from harness.kernel.gate import infra_guard, infra_ratio_exceeded
from harness.kernel.pair_classes import categorize_pair
from harness.kernel.types import IMPROVED, PERSISTENT_FAIL, REGRESSED, STABLE_SUCCESS, GateParams, PairResult
from harness.loop.observation import quadrant_of
from harness.loop.validate import InfraFailureError, guard_infra_failures, scored_share_too_low

EXPECTED = {(False, True): IMPROVED, (True, False): REGRESSED, (False, False): PERSISTENT_FAIL, (True, True): STABLE_SUCCESS}


@pytest.mark.parametrize("baseline, candidate", list(EXPECTED))
def test_every_quadrant_view_uses_the_same_classification(baseline, candidate):
    expected = EXPECTED[(baseline, candidate)]
    assert categorize_pair(baseline, candidate) == expected
    assert quadrant_of(baseline, candidate) == expected
    section = format_comparison_pairs([ComparisonPair("q", "t", "question text", baseline, candidate)])
    assert f"### {expected} (1)" in section


def test_missing_outcome_is_infra_for_quadrant_rows_and_skipped_by_the_gate():
    assert quadrant_of(None, True) == "INFRA" and quadrant_of(True, None) == "INFRA"


@pytest.mark.parametrize("min_denominator, max_ratio", [(0, 0.0), (3, 0.2), (10, 0.5)])
def test_gate_and_rollout_infra_guards_trip_together(min_denominator, max_ratio):
    params = GateParams(infra_min_denominator=min_denominator, infra_max_ratio=max_ratio)
    for n_total, n_infra in itertools.product(range(0, 13), range(0, 13)):
        if n_infra > n_total:
            continue
        expected = infra_ratio_exceeded(n_infra, n_total, params)
        pairs = [PairResult(f"q{i}", None if i < n_infra else True, True) for i in range(n_total)]
        assert (infra_guard(pairs, params) is not None) == expected, (n_total, n_infra)
        if n_total < min_denominator:
            # a stage's small batch is still judged (docs/faults.md): nothing scored, or the share over the ratio with
            # the batch counted as infra_min_denominator rollouts; the gate waits for its denominator
            small = n_total > 0 and (n_infra == n_total or n_infra / min_denominator > max_ratio)
            assert scored_share_too_low(n_infra, n_total, params) == small, (n_total, n_infra)
            continue
        assert scored_share_too_low(n_infra, n_total, params) == expected, (n_total, n_infra)
        if expected:
            with pytest.raises(InfraFailureError, match="infrastructure reasons"):
                guard_infra_failures(n_infra, n_total, params, "here")
        else:
            guard_infra_failures(n_infra, n_total, params, "here")
