"""The one classifier of paired outcomes (seed 000 §12): momentum categories, gate quadrants, quadrant rows.

The category constants live in types.py.
"""

from __future__ import annotations

from harness.kernel.types import IMPROVED, PERSISTENT_FAIL, REGRESSED, STABLE_SUCCESS


def categorize_pair(prev: bool, cur: bool) -> str:
    """IMPROVED (wrong -> right), REGRESSED (right -> wrong), PERSISTENT_FAIL, STABLE_SUCCESS."""
    if not isinstance(prev, bool) or not isinstance(cur, bool):
        raise ValueError(f"categorize_pair: outcomes must be bool, got prev={prev!r} cur={cur!r}")
    if prev and cur:
        return STABLE_SUCCESS
    if prev:
        return REGRESSED
    if cur:
        return IMPROVED
    return PERSISTENT_FAIL
