"""e-LOND (harness.kernel.fdr): the sequence, the level arithmetic, and FDR control checked by simulation."""

from __future__ import annotations

import math

import numpy as np
import pytest

from harness.kernel.fdr import FdrState, elond_gamma, elond_level, elond_record, level_lambda


def test_gamma_sums_to_one_and_is_non_increasing():
    horizon = 7
    values = [elond_gamma(t, horizon) for t in range(1, 7 * 20000 + 1)]
    assert all(a >= b for a, b in zip(values, values[1:]))
    # the tail after 20000 blocks is sum_{k>20000} 6/(pi^2 k^2) ~ 6/(pi^2 * 20000)
    assert sum(values) == pytest.approx(1.0 - 6 / (math.pi**2 * 20000), abs=1e-6)
    assert elond_gamma(1, horizon) == elond_gamma(7, horizon) == pytest.approx(6 / (math.pi**2 * 7))
    assert elond_gamma(8, horizon) == pytest.approx(elond_gamma(1, horizon) / 4)


def test_level_grows_with_discoveries_and_record_counts():
    s = FdrState()
    a1 = elond_level(s, 0.1, 50)
    assert a1 == pytest.approx(0.1 * 6 / (math.pi**2 * 50))
    s = elond_record(s, 0.1, 50, discovered=True)
    assert (s.tests, s.discoveries) == (1, 1)
    assert s.spent == pytest.approx(a1)
    assert elond_level(s, 0.1, 50) == pytest.approx(2 * a1)  # D = 1 doubles the level, same gamma
    s = elond_record(s, 0.1, 50, discovered=False)
    assert (s.tests, s.discoveries) == (2, 1)
    assert level_lambda(a1) == pytest.approx(-math.log(a1))


def test_bad_inputs_name_the_key():
    with pytest.raises(ValueError, match="fdr_level"):
        elond_level(FdrState(), 1.5, 50)
    with pytest.raises(ValueError, match="fdr_horizon"):
        elond_level(FdrState(), 0.1, 0)
    with pytest.raises(ValueError, match="discoveries"):
        FdrState(tests=1, discoveries=2)
    with pytest.raises(ValueError, match="gate_fdr"):
        FdrState.from_dict({"tests": 1})
    assert FdrState.from_dict(FdrState(3, 1, 0.01).to_dict()) == FdrState(3, 1, 0.01)


def _path_max_log_e(rng, n_gates: int, theta: np.ndarray, n_disc: int = 150) -> np.ndarray:
    """Running max of a fixed-alternative LR e-process (theta1 = 0.7) over n_disc discordant pairs per gate."""
    wins = rng.random((n_gates, n_disc)) < theta[:, None]
    steps = np.where(wins, math.log(1.4), math.log(0.6))
    return np.cumsum(steps, axis=1).max(axis=1)


def _run_online(path_max: np.ndarray, null: np.ndarray, alpha: float, horizon: int, fixed_lambda: float | None = None):
    """One run: gates in order, each accepts iff its e-process crossed the level e-LOND gave it (or a fixed lambda)."""
    state = FdrState()
    false = true = 0
    for pm, is_null in zip(path_max, null):
        lam = fixed_lambda if fixed_lambda is not None else level_lambda(elond_level(state, alpha, horizon))
        accept = bool(pm >= lam)
        state = elond_record(state, alpha, horizon, discovered=accept)
        false += accept and is_null
        true += accept and not is_null
    return false, true


@pytest.mark.parametrize("mix", ["all_null", "mixed"])
def test_elond_controls_fdr_over_a_run_of_80_gates(mix):
    rng = np.random.default_rng(11 if mix == "all_null" else 12)
    runs, gates, alpha = 300, 80, 0.1
    fdp = []
    for _ in range(runs):
        if mix == "all_null":
            theta = np.full(gates, 0.5)
        else:  # 30 % real (+), 50 % null, 20 % harmful
            theta = rng.choice([0.7, 0.5, 0.3], size=gates, p=[0.3, 0.5, 0.2])
        null = theta <= 0.5
        false, true = _run_online(_path_max_log_e(rng, gates, theta), null, alpha, horizon=50)
        fdp.append(false / max(false + true, 1))
    fdr = float(np.mean(fdp))
    se = float(np.std(fdp) / math.sqrt(runs)) + 1e-9
    assert fdr <= alpha + 2 * se, (fdr, se)
    if mix == "mixed":
        assert np.mean([f < 1 for f in fdp]) > 0.5  # it still discovers: not vacuous


def test_negative_control_per_gate_alpha_alone_loses_run_level_control():
    rng = np.random.default_rng(13)
    runs, gates = 200, 80
    any_false = 0
    for _ in range(runs):
        theta = np.full(gates, 0.5)
        false, _ = _run_online(_path_max_log_e(rng, gates, theta), theta <= 0.5, 0.1, 50, fixed_lambda=math.log(20))
        any_false += false > 0
    assert any_false / runs > 0.5  # each gate at alpha = 0.05, no run-level control: most all-null runs install a null edit
