import math

import numpy as np
import pytest
from scipy.integrate import quad

from harness.kernel.stats import log_e_beta_mixture, log_lr_direction, mcnemar_one_sided_p


@pytest.mark.parametrize("wins,losses", [(0, 0), (7, 3), (3, 7), (20, 5), (0, 12)])
def test_beta_mixture_matches_numeric_integral(wins, losses):
    value, _ = quad(lambda t: 2 * t**wins * (1 - t) ** losses / 0.5 ** (wins + losses), 0.5, 1.0)
    assert log_e_beta_mixture(wins, losses) == pytest.approx(math.log(value), rel=1e-9, abs=1e-9)


def test_beta_mixture_stable_for_thousands_of_pairs():
    # S = 0: E = 1 / (F + 1) exactly; betainc underflows here, the binomial tail must take over
    assert log_e_beta_mixture(0, 3000) == pytest.approx(-math.log(3001), rel=1e-9)
    values = log_e_beta_mixture(np.array([10, 3000, 2500, 4000]), np.array([5000, 2900, 2500, 0]))
    assert np.all(np.isfinite(values))
    assert values[3] == pytest.approx(4001 * math.log(2) - math.log(4001), rel=1e-9)


def test_vectorised_equals_scalar():
    s = np.array([0, 5, 40, 7])
    f = np.array([0, 9, 20, 7])
    assert np.allclose(log_e_beta_mixture(s, f), [log_e_beta_mixture(int(a), int(b)) for a, b in zip(s, f)])


def test_direction_log_lr():
    assert log_lr_direction(3, 5, 0.625) == pytest.approx(3 * math.log(1.25) + 5 * math.log(0.75))
    with pytest.raises(ValueError, match="theta1"):
        log_lr_direction(1, 1, 0.5)


def test_mcnemar_exact_p():
    assert mcnemar_one_sided_p(8, 2) == pytest.approx(56 / 1024)  # P(Bin(10,1/2) >= 8)
    assert mcnemar_one_sided_p(0, 0) == 1.0
    assert mcnemar_one_sided_p(0, 4) == 1.0


def test_negative_counts_rejected():
    with pytest.raises(ValueError):
        log_e_beta_mixture(-1, 2)
