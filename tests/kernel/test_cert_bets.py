"""benchmarks/cert_bets.py measures the certificate's own e-process (the certify stage's `_log_wealth`, path by
path) and its alternatives; each must stay a valid test, or its crossing times mean nothing."""

from __future__ import annotations

import numpy as np

from benchmarks import cert_bets


def test_no_bet_certifies_a_null_gain_more_often_than_alpha():
    # Ville's inequality for every column: P(ever crossing 1 / alpha | gain 0) <= alpha. 3,000 paths: the standard
    # error at 0.05 is 0.004; tolerated 0.05 + 0.012. The kelly column bets 0 here (its growth-optimal bet), never crosses.
    (row,) = cert_bets.run(runs=3000, budget=300, alpha=0.05, seed=11, regimes=((0.2, 0.2),))
    for name in cert_bets.NAMES:
        crossed = float((row[name] <= 300).mean())
        assert crossed <= 0.062, (name, crossed)


def test_a_clear_gain_is_certified_and_the_oracle_bet_is_fastest_on_average():
    (row,) = cert_bets.run(runs=1000, budget=400, alpha=0.05, seed=5, regimes=((0.3, 0.1),))
    means = {name: float(np.minimum(row[name], 400).mean()) for name in cert_bets.NAMES}
    assert all(float((row[name] <= 400).mean()) >= 0.99 for name in cert_bets.NAMES), means
    # the growth-optimal constant bet, known in advance, beats every bet that must learn it (by ~20 % here)
    assert means["kelly"] < min(means["product"], means["mix6"], means["agrapa"]) * 0.95, means
    assert abs(row["ideal"] - np.log(20) / (0.3 * np.log(1.5) + 0.1 * np.log(0.5))) < 1e-9


def test_crossing_counts_pairs_and_marks_a_path_that_never_crosses():
    log_k = np.array([[0.0, 1.0, 3.1, 2.0], [0.0, 0.5, 1.0, 2.9]])
    assert cert_bets._crossing(log_k, threshold=3.0, budget=4).tolist() == [3, 5]
