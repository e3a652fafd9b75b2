"""Importance-weighted betting e-processes for the population accuracy gain (DESIGN §5).

Each gate slot asks a question I_t drawn at random from the validation pool
with a probability pi_i fixed before the slot (`harness/kernel/importance_plan.py`),
and observes baseline B_t and candidate C_t in {0, 1}. The importance-weighted
difference

    Z_t = (C_t - B_t) * w_{I_t},   w_i = 1 / (N pi_i)

has conditional mean sum_i pi_i (q_i - p_i) / (N pi_i) = Delta, the candidate's
accuracy gain on the whole pool, whatever the pi. A floor pi_i >= floor / N gives
|Z_t| <= bound = 1 / floor.

Test of H0: Delta <= m (m = 0 for the accept side) by betting: the wealth
K_t = prod_s (1 + lam (Z_s - m)) with a constant lam in (0, 1 / (bound + m)) never
goes negative, and under H0 E[1 + lam (Z_t - m) | past] = 1 + lam (Delta - m) <= 1, so
K is a nonnegative supermartingale; so is the equal-weight mixture over a grid
of lam. Ville: P(sup_t K_t >= 1 / alpha) <= alpha under optional stopping.

The reject side tests H0': Delta >= m_r (m_r > 0, `reject_margin`) with bets
lam < 0, |lam| < 1 / (bound - m_r): crossing exp(-lambda_dir) rejects, and a
candidate whose true gain is at least m_r is rejected with probability at most
exp(lambda_dir). Because Z lives on the accuracy scale, the alternative adapts to
discordance by construction (in discordant-pair terms it is theta = (1 + m_r / d) / 2).

Missing outcomes (infrastructure failures) are imputed against the candidate
(candidate wrong, baseline right): Z only gets smaller, so the accept side stays
valid whatever causes the failures.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Optional

import numpy as np

__all__ = [
    "accept_bets",
    "bet_limit",
    "conservative_difference",
    "log_wealth_path",
    "reject_bets",
    "weighted_differences",
]

# share of the largest admissible bet that the grids may use: wealth can fall to (1 - BET_CAP) in one pair, never to 0
BET_CAP = 0.95


def bet_limit(bound: float, null_mean: float, *, side: int) -> float:
    """Largest |lam| keeping 1 + lam (z - null_mean) > 0 for every z in [-bound, bound] (side +1: lam > 0, -1: lam < 0)."""
    if not bound > 0:
        raise ValueError(f"betting: the bound on |Z| must be > 0, got {bound!r}")
    if not -bound < null_mean < bound:
        raise ValueError(f"betting: null mean {null_mean!r} must lie inside (-bound, bound) = ({-bound}, {bound})")
    if side == 1:
        return 1.0 / (bound + null_mean)
    if side == -1:
        return 1.0 / (bound - null_mean)
    raise ValueError(f"betting: side must be +1 or -1, got {side!r}")


def _grid(limit: float, points: int, low_share: float) -> np.ndarray:
    if int(points) != points or points < 1:
        raise ValueError(f"betting: bet grid points must be an integer >= 1, got {points!r}")
    if not 0.0 < low_share <= BET_CAP:
        raise ValueError(f"betting: lowest bet share must be in (0, {BET_CAP}], got {low_share!r}")
    # geometric grid from low_share to BET_CAP of the limit: small effects need small bets, big ones big bets
    return limit * np.geomspace(low_share, BET_CAP, int(points)) if points > 1 else np.array([limit * low_share])


def accept_bets(bound: float, points: int = 8, low_share: float = 0.05) -> np.ndarray:
    """Positive bets of the accept e-process (H0: Delta <= 0) for |Z| <= bound."""
    return _grid(bet_limit(bound, 0.0, side=1), points, low_share)


def reject_bets(bound: float, margin: float, points: int = 8, low_share: float = 0.05) -> np.ndarray:
    """Negative bets of the reject e-process (H0': Delta >= margin) for |Z| <= bound."""
    return -_grid(bet_limit(bound, margin, side=-1), points, low_share)


def conservative_difference(baseline: Optional[bool], candidate: Optional[bool]) -> int:
    """C - B with a missing outcome imputed against the candidate (missing candidate = wrong, missing baseline = right)."""
    b = 1 if baseline is None else int(bool(baseline))
    c = 0 if candidate is None else int(bool(candidate))
    return c - b


def weighted_differences(baseline: Sequence[Optional[bool]], candidate: Sequence[Optional[bool]], weights: Sequence[float], bound: float) -> np.ndarray:
    """Z_t = (C_t - B_t) * w_t with infra imputed against the candidate; ValueError when a weight exceeds `bound`."""
    if not len(baseline) == len(candidate) == len(weights):
        raise ValueError(f"betting: {len(baseline)} baseline, {len(candidate)} candidate outcomes and {len(weights)} weights")
    w = np.asarray(weights, dtype=float)
    if np.any(w <= 0) or np.any(w > bound * (1 + 1e-12)):
        raise ValueError(f"betting: importance weights must be in (0, {bound}] (the plan's floor), got max {w.max() if w.size else None!r}")
    diffs = np.array([conservative_difference(b, c) for b, c in zip(baseline, candidate)], dtype=float)
    return diffs * w


def log_wealth_path(z, bets, null_mean: float = 0.0, bound: Optional[float] = None) -> np.ndarray:
    """log of the equal-weight mixture over `bets` of prod_s (1 + lam (z_s - null_mean)), after every pair.

    `z`: (..., T) array of observations (broadcast over leading axes); returns the
    same shape. With `bound`, checks that every bet keeps every factor positive
    for any |z| <= bound (ValueError otherwise). Valid e-process for
    H0: E[z_t | past] <= null_mean (bets > 0) or >= null_mean (bets < 0), the
    bets being fixed before the data.
    """
    lam = np.asarray(bets, dtype=float).reshape(-1)
    if lam.size == 0 or not (np.all(lam > 0) or np.all(lam < 0)):
        raise ValueError(f"betting: bets must be non-empty and all of one sign, got {bets!r}")
    if bound is not None:
        side = 1 if lam[0] > 0 else -1
        limit = bet_limit(bound, null_mean, side=side)
        if np.max(np.abs(lam)) >= limit:
            raise ValueError(f"betting: bet {np.max(np.abs(lam))!r} >= {limit!r} can make the wealth negative for |Z| <= {bound}")
    x = np.asarray(z, dtype=float) - null_mean
    if x.shape[-1] == 0:
        return np.zeros(x.shape)
    factors = 1.0 + x[..., None] * lam
    if np.any(factors <= 0):
        raise ValueError("betting: an observation lies outside the bound the bets were sized for (wealth would be <= 0)")
    paths = np.cumsum(np.log(factors), axis=-2)  # (..., T, K)
    top = np.max(paths, axis=-1)
    return top + np.log(np.mean(np.exp(paths - top[..., None]), axis=-1))


def log_wealth_final(z, bets, null_mean: float = 0.0) -> float:
    """log mixture wealth after all of `z` (1-D); -inf never occurs (bets sized by the caller)."""
    path = log_wealth_path(np.asarray(z, dtype=float).reshape(-1), bets, null_mean)
    return float(path[-1]) if path.size else 0.0


def growth_rate(mean: float, second_moment: float, bet: float) -> float:
    """Second-order expected log growth per pair of a constant bet: lam*mean - lam^2*second_moment/2."""
    return bet * mean - bet * bet * second_moment / 2.0


def kelly_bet(mean: float, second_moment: float) -> float:
    """Second-order Kelly bet mean / E[Z^2] (0 when E[Z^2] = 0)."""
    return mean / second_moment if second_moment > 0 else 0.0 if math.isfinite(mean) else 0.0
