"""Test statistics of the gate over paired outcomes (research/gate.md).

Only discordant pairs carry evidence: S wins (baseline wrong, candidate
right), F losses, D = S + F. Under H0 the win probability among discordant
pairs is theta <= 1/2. Every function accepts Python ints or numpy arrays
(broadcast), so the benchmark runs the very same code vectorised.

The gate's accept statistic is an e-process chosen by `gate.accept_prior`:
- "grid" (default): an equal-weight mixture of fixed-alternative likelihood
  ratios over theta in linspace(accept_prior_low, accept_prior_high,
  accept_prior_points) (default 0.60, 0.65, ..., 0.90). Each LR
  (2 theta_k)^S (2 (1 - theta_k))^F with theta_k > 1/2 is a nonnegative
  supermartingale under every theta <= 1/2, so is any mixture of them:
  exactly valid under optional stopping, no approximation.
- "uniform": the Beta-mixture (mixing measure uniform on [1/2, 1]).
"""

from __future__ import annotations

import math

import numpy as np

# scipy.special is imported inside the functions that use it: it costs ~0.4 s of CPU per
# process, and most pipeline stages (rollout, evolve, ...) import this module but never gate.

LN2 = math.log(2.0)
# below this, betainc has lost its relative precision: switch to the exact binomial tail in log space
_BETAINC_FLOOR = 1e-280


def log_e_beta_mixture(wins, losses):
    """Log of the one-sided Beta-mixture e-process (mixing measure uniform on theta in [1/2, 1]).

    E = 2^(D+1) * integral_{1/2}^{1} theta^S (1-theta)^F dtheta, closed form
    log E = (D+1) ln 2 + betaln(S+1, F+1) + ln I_{1/2}(F+1, S+1).
    It is a nonnegative supermartingale under every theta <= 1/2, so
    P(sup_t E_t >= 1/alpha) <= alpha under optional stopping (Ville).
    Stable for thousands of pairs: when the regularised incomplete beta
    underflows, its log is computed as a binomial tail with logsumexp.
    """
    from scipy.special import betainc, betaln

    s = np.asarray(wins, dtype=float)
    f = np.asarray(losses, dtype=float)
    if np.any(s < 0) or np.any(f < 0):
        raise ValueError(f"wins and losses must be >= 0, got wins={wins!r} losses={losses!r}")
    s, f = np.broadcast_arrays(s, f)
    d = s + f
    tail = betainc(f + 1.0, s + 1.0, 0.5)
    with np.errstate(divide="ignore"):
        log_tail = np.log(tail)
    small = tail < _BETAINC_FLOOR
    if np.any(small):
        log_tail = np.array(log_tail, dtype=float, copy=True).reshape(-1)
        flat_f, flat_d = f.reshape(-1), d.reshape(-1)
        for index in np.flatnonzero(small):
            log_tail[index] = _log_binomial_upper_tail(int(flat_f[index]) + 1, int(flat_d[index]) + 1)
        log_tail = log_tail.reshape(s.shape)
    out = (d + 1.0) * LN2 + betaln(s + 1.0, f + 1.0) + log_tail
    return float(out) if out.ndim == 0 else out


ACCEPT_PRIORS = ("grid", "uniform")


def accept_prior_grid(low: float, high: float, points: int) -> np.ndarray:
    """The theta grid of the "grid" accept prior; ValueError naming the config key when out of range."""
    if not 0.5 < low < 1.0:
        raise ValueError(f"gate.accept_prior_low must be in (0.5, 1), got {low!r}")
    if not low <= high < 1.0:
        raise ValueError(f"gate.accept_prior_high must be in [accept_prior_low, 1), got {high!r}")
    if int(points) != points or points < 1:
        raise ValueError(f"gate.accept_prior_points must be an integer >= 1, got {points!r}")
    if points == 1 and high != low:
        raise ValueError("gate.accept_prior_points = 1 needs accept_prior_low == accept_prior_high")
    return np.linspace(low, high, int(points))


def log_e_grid_mixture(wins, losses, thetas):
    """Log of the equal-weight mixture of LRs (2 theta_k)^S (2 (1 - theta_k))^F, theta_k > 1/2; arrays ok.

    A valid e-process for H0: theta <= 1/2 under optional stopping (every
    component is a test supermartingale; so is their average).
    """
    grid = np.asarray(thetas, dtype=float).reshape(-1)
    if grid.size == 0 or np.any(grid <= 0.5) or np.any(grid >= 1.0):
        raise ValueError(f"grid mixture: every theta must be in (0.5, 1), got {thetas!r}")
    s = np.asarray(wins, dtype=float)
    f = np.asarray(losses, dtype=float)
    if np.any(s < 0) or np.any(f < 0):
        raise ValueError(f"wins and losses must be >= 0, got wins={wins!r} losses={losses!r}")
    terms = s[..., None] * np.log(2.0 * grid) + f[..., None] * np.log(2.0 * (1.0 - grid))
    top = np.max(terms, axis=-1)
    out = top + np.log(np.mean(np.exp(terms - top[..., None]), axis=-1))  # log-mean-exp, stable
    return float(out) if np.ndim(out) == 0 else out


def log_e_accept(wins, losses, sign_params):
    """The accept e-process selected by `sign_params.accept_prior` ("grid" | "uniform"): the sign rule's
    SequentialParams (registry.params_of(SequentialParams, gate_params)); arrays ok."""
    prior = sign_params.accept_prior
    if prior == "uniform":
        return log_e_beta_mixture(wins, losses)
    if prior == "grid":
        thetas = accept_prior_grid(sign_params.accept_prior_low, sign_params.accept_prior_high, sign_params.accept_prior_points)
        return log_e_grid_mixture(wins, losses, thetas)
    raise ValueError(f"gate.accept_prior: unknown prior {prior!r}; expected one of {list(ACCEPT_PRIORS)}")


def log_e_accept_peak(signs, sign_params) -> float:
    """Running maximum of the accept e-process over every prefix of `signs` (+1 win, -1 loss, 0 tie/infra).

    By Ville's inequality P(sup_t E_t >= 1/alpha) <= alpha under H0, so
    accepting at a block end because the e-process crossed 1/alpha at some
    pair inside the block (pairs in their pre-planned slot order) keeps
    the false-accept rate at most alpha; the pairs of the whole block are
    still spent. Returns -inf for no pairs.
    """
    path = log_e_accept_path(signs, sign_params)
    return float(np.max(path)) if path.size else float("-inf")


def log_e_accept_path(signs, sign_params) -> np.ndarray:
    """The accept e-process after every pair of `signs` (+1 win, -1 loss, 0 tie/infra), in order (empty for no pairs)."""
    y = np.asarray(signs, dtype=int).reshape(-1)
    if y.size == 0:
        return np.zeros(0)
    return np.asarray(log_e_accept(np.cumsum(y == 1), np.cumsum(y == -1), sign_params), dtype=float).reshape(-1)


def first_crossing(path: np.ndarray, level: float) -> float | None:
    """The value of `path` at its first index >= `level` (the value that triggers a stop), None when it never crosses."""
    hit = np.flatnonzero(np.asarray(path) >= level)
    return float(path[hit[0]]) if hit.size else None


def _log_binomial_upper_tail(k: int, n: int) -> float:
    """log P(X >= k) for X ~ Binomial(n, 1/2); equals log I_{1/2}(k, n-k+1)."""
    from scipy.special import gammaln, logsumexp

    ks = np.arange(k, n + 1, dtype=float)
    log_terms = gammaln(n + 1.0) - gammaln(ks + 1.0) - gammaln(n - ks + 1.0) - n * LN2
    return float(logsumexp(log_terms))


def log_lr_direction(wins, losses, theta1: float):
    """Log-likelihood ratio of the fixed alternative theta1 against theta = 1/2.

    log LR = S ln(2 theta1) + F ln(2 (1 - theta1)). The gate rejects when it
    falls to lambda_dir < 0 (Wald's lower boundary); rejecting never raises
    the false-accept rate.
    """
    if not 0.5 < theta1 < 1.0:
        raise ValueError(f"theta1 must be in (0.5, 1), got {theta1!r}")
    s = np.asarray(wins, dtype=float)
    f = np.asarray(losses, dtype=float)
    out = s * math.log(2.0 * theta1) + f * math.log(2.0 * (1.0 - theta1))
    return float(out) if np.ndim(out) == 0 else out


def mcnemar_one_sided_p(wins, losses):
    """Exact one-sided McNemar p-value: P(Bin(D, 1/2) >= S). D = 0 gives 1."""
    from scipy.special import betainc

    s = np.asarray(wins, dtype=float)
    f = np.asarray(losses, dtype=float)
    d = s + f
    # P(X >= S) = I_{1/2}(S, D - S + 1) for S >= 1; 1 when S = 0
    with np.errstate(invalid="ignore"):
        p = np.where(s > 0, betainc(np.maximum(s, 1.0), f + 1.0, 0.5), 1.0)
    p = np.where(d == 0, 1.0, p)
    return float(p) if np.ndim(p) == 0 else p


def kl_bernoulli_half(theta):
    """KL(Bernoulli(theta) || Bernoulli(1/2)) in nats."""
    t = np.asarray(theta, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        a = np.where(t > 0, t * np.log(2 * t), 0.0)
        b = np.where(t < 1, (1 - t) * np.log(2 * (1 - t)), 0.0)
    out = a + b
    return float(out) if np.ndim(out) == 0 else out
