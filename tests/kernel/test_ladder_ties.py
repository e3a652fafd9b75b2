"""Ladder orderings: ties between information scores are exact (no floating-point noise ordering)."""

from __future__ import annotations


def test_ladder_ties_are_exact_and_keep_storage_order():
    """p(1 - p) of 0.7 and 0.3 differ only by floating-point noise: they tie, and storage order decides."""
    from harness.kernel.ladder import GatePools, LadderEntry
    from harness.kernel.types import GateParams

    assert 0.7 * (1 - 0.7) != 0.3 * (1 - 0.3)  # the noise this guards against
    for first, second in ((0.7, 0.3), (0.3, 0.7)):
        pools = GatePools({"t": [LadderEntry("a", first, 4), LadderEntry("b", second, 4)]})
        assert pools.ladder("t", GateParams(), warm=True) == ["a", "b"]
