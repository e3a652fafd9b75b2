import pytest

from harness.kernel.budget import edit_budget_at
from harness.kernel.pair_classes import categorize_pair
from harness.kernel.probation import probation_verdict
from harness.kernel.types import CATEGORY_ORDER, IMPROVED, PERSISTENT_FAIL, REGRESSED, STABLE_SUCCESS, Probation


def test_categorize_pair_and_regressed_first():
    assert categorize_pair(False, True) == IMPROVED and categorize_pair(True, False) == REGRESSED
    assert categorize_pair(False, False) == PERSISTENT_FAIL and categorize_pair(True, True) == STABLE_SUCCESS
    assert CATEGORY_ORDER[0] == REGRESSED
    with pytest.raises(ValueError):
        categorize_pair(None, True)


def test_edit_budget_schedule():
    assert [edit_budget_at(i, 5, 3, 1) for i in range(5)] == [3, 3, 2, 2, 1]
    assert edit_budget_at(0, 1, 3, 1) == 3
    with pytest.raises(ValueError, match="step_index"):
        edit_budget_at(5, 5, 3, 1)


def _probation(snapshot):
    return Probation("t", "skills/t/SKILL.md", "v3", 1, 2, correctness_snapshot=snapshot)


def test_probation_rolls_back_on_regression_only():
    snapshot = {"a": True, "b": True, "c": False, "d": False}
    worse = probation_verdict(_probation(snapshot), {"a": False, "b": False, "c": True, "d": False})
    assert worse.action == "rollback" and (worse.wins, worse.losses) == (1, 2)
    better = probation_verdict(_probation(snapshot), {"a": True, "b": False, "c": True, "d": True, "x": False})
    assert better.action == "keep" and better.n_compared == 4
    none = probation_verdict(_probation(snapshot), {"a": None})
    assert none.action == "keep" and "no comparable" in none.reason
