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

Soft gates (`gate.metric` soft / mixed): B_t and C_t are the metric's values in
[0, 1] when the pair carries them (`PairResult.baseline_value`), not their
rounding to {0, 1}; Z keeps its bound and its mean is the gain in the metric's
pool mean, so every statement above holds for that mean.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Optional

import numpy as np

from harness.kernel.futility import FUTILITY_RULES, FutilityView
from harness.kernel.registry import params_of
from harness.kernel.rules import BettingParams
from harness.kernel.types import PairResult

__all__ = [
    "BettingDecision",
    "BettingLook",
    "betting_decision",
    "accept_bets",
    "betting_look",
    "bet_limit",
    "conservative_difference",
    "log_wealth_path",
    "log_wealth_per_bet",
    "mixture_of",
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


def _grid(limit: float, low: float, high: float, points: int) -> np.ndarray:
    if int(points) != points or points < 1:
        raise ValueError(f"gate.bet_points must be an integer >= 1, got {points!r}")
    if not 0.0 < low <= high:
        raise ValueError(f"gate.bet_low / gate.bet_high must satisfy 0 < bet_low <= bet_high, got {low!r}, {high!r}")
    grid = np.geomspace(low, high, int(points)) if points > 1 else np.array([low])
    # never more than BET_CAP of the largest safe bet: one pair can cost at most that share of the wealth
    return np.unique(np.minimum(grid, BET_CAP * limit))


def accept_bets(bound: float, low: float = 0.125, high: float = 0.5, points: int = 3) -> np.ndarray:
    """Positive bets of the accept e-process (H0: Delta <= 0) for |Z| <= bound.

    Default grid 0.125, 0.25, 0.5: the Kelly bets Delta / E[Z^2] of the gains worth
    installing (+5 to +10 points at discordance 0.2 to 0.4), capped for the bound.
    """
    return _grid(bet_limit(bound, 0.0, side=1), low, high, points)


def reject_bets(bound: float, margin: float, low: float = 0.125, high: float = 0.5, points: int = 3) -> np.ndarray:
    """Negative bets of the reject e-process (H0': Delta >= margin) for |Z| <= bound."""
    return -_grid(bet_limit(bound, margin, side=-1), low, high, points)


def conservative_difference(baseline: Optional[float], candidate: Optional[float]) -> float:
    """C - B of two outcomes (bools) or soft values in [0, 1], a missing one imputed against the candidate (missing
    candidate = 0, missing baseline = 1); ValueError outside [0, 1] (the bets are sized for |C - B| <= 1)."""
    b = 1.0 if baseline is None else float(baseline)
    c = 0.0 if candidate is None else float(candidate)
    if not (0.0 <= b <= 1.0 and 0.0 <= c <= 1.0):
        raise ValueError(f"betting: outcomes must be bools or values in [0, 1], got baseline {baseline!r}, candidate {candidate!r}")
    return c - b


def weighted_differences(baseline: Sequence[Optional[float]], candidate: Sequence[Optional[float]], weights: Sequence[float],
                         bound: float) -> np.ndarray:
    """Z_t = (C_t - B_t) * w_t with infra imputed against the candidate; ValueError when a weight exceeds `bound`."""
    if not len(baseline) == len(candidate) == len(weights):
        raise ValueError(f"betting: {len(baseline)} baseline, {len(candidate)} candidate outcomes and {len(weights)} weights")
    w = np.asarray(weights, dtype=float)
    if np.any(w <= 0) or np.any(w > bound * (1 + 1e-12)):
        raise ValueError(f"betting: importance weights must be in (0, {bound}] (the plan's floor), got max {w.max() if w.size else None!r}")
    diffs = np.array([conservative_difference(b, c) for b, c in zip(baseline, candidate)], dtype=float)
    return diffs * w


def log_wealth_per_bet(z, bets, null_mean: float = 0.0, bound: Optional[float] = None) -> np.ndarray:
    """log prod_s (1 + lam_k (z_s - null_mean)) of each bet after every pair: shape (..., T, K); checks as
    `log_wealth_path`."""
    lam = np.asarray(bets, dtype=float).reshape(-1)
    if lam.size == 0 or not (np.all(lam > 0) or np.all(lam < 0)):
        raise ValueError(f"betting: bets must be non-empty and all of one sign, got {bets!r}")
    if bound is not None:
        side = 1 if lam[0] > 0 else -1
        limit = bet_limit(bound, null_mean, side=side)
        if np.max(np.abs(lam)) >= limit:
            raise ValueError(f"betting: bet {np.max(np.abs(lam))!r} >= {limit!r} can make the wealth negative for |Z| <= {bound}")
    x = np.asarray(z, dtype=float) - null_mean
    factors = 1.0 + x[..., None] * lam
    if np.any(factors <= 0):
        raise ValueError("betting: an observation lies outside the bound the bets were sized for (wealth would be <= 0)")
    return np.cumsum(np.log(factors), axis=-2)  # (..., T, K)


def log_wealth_path(z, bets, null_mean: float = 0.0, bound: Optional[float] = None) -> np.ndarray:
    """log of the equal-weight mixture over `bets` of prod_s (1 + lam (z_s - null_mean)), after every pair.

    `z`: (..., T) array of observations (broadcast over leading axes); returns the
    same shape. With `bound`, checks that every bet keeps every factor positive
    for any |z| <= bound (ValueError otherwise). Valid e-process for
    H0: E[z_t | past] <= null_mean (bets > 0) or >= null_mean (bets < 0), the
    bets being fixed before the data.
    """
    return mixture_of(log_wealth_per_bet(z, bets, null_mean, bound))


def mixture_of(paths: np.ndarray) -> np.ndarray:
    """log of the equal-weight mean over the last axis (the bets) of exp(`paths`)."""
    if paths.shape[-2] == 0:
        return np.zeros(paths.shape[:-1])
    top = np.max(paths, axis=-1)
    return top + np.log(np.mean(np.exp(paths - top[..., None]), axis=-1))


@dataclass(frozen=True)
class BettingLook:
    """The two e-processes of the betting rule after the pairs so far (see module doc)."""

    log_e: float  # accept e-process (H0: gain <= 0) at the last pair
    log_e_trigger: float  # accept e-process at its first crossing of lambda_accept (nan when it never crossed)
    log_e_reject: float  # reject e-process (H0': gain >= reject_margin) at the last pair
    reject_peak: float  # its running maximum
    accept_crossed: bool
    reject_crossed: bool
    bound: float
    mean_difference: float  # importance-weighted mean of Z (an unbiased estimate of the gain)
    accept_bets: tuple[float, ...] = ()  # the accept bets lam_k
    accept_log_wealth: tuple[float, ...] = ()  # log W_k of each accept bet at the last pair (futility reads them)
    z: tuple[float, ...] = ()  # the weighted differences (infra imputed against the candidate)
    # the same with each arm's soft score in place of its outcome (infra imputed as in z); () unless every judged pair
    # has both soft scores. Futility may read it, the e-processes never do.
    z_soft: tuple[float, ...] = ()


def betting_look(pairs: Sequence[PairResult], params) -> BettingLook:
    """Both e-processes over `pairs` in their planned order; infra imputed against the candidate.

    Every pair must carry the same `weight_bound` (the plan's, fixed before the
    gate); accept crossing = log E >= params.lambda_accept at some pair, reject
    crossing = the reject e-process >= -params.lambda_dir at some pair (both
    anytime-valid by Ville, so a look at a block end may use any pair inside).
    """
    if not pairs:
        return BettingLook(0.0, math.nan, 0.0, 0.0, False, False, 1.0, 0.0)
    bounds = {pair.weight_bound for pair in pairs}
    if len(bounds) != 1:
        raise ValueError(f"betting rule: the pairs of one gate carry different weight bounds {sorted(bounds)}; the plan fixes one before the gate")
    bound = bounds.pop()
    if params.lambda_dir >= 0:
        raise ValueError(f"gate.lambda_dir must be < 0, got {params.lambda_dir!r}")
    own = params_of(BettingParams, params)
    if not 0.0 < own.reject_margin < bound:
        raise ValueError(f"gate.reject_margin must be in (0, {bound}), got {own.reject_margin!r}")
    # a soft gate's pair carries the metric's values: bet on them (same mean as their rounding, less variance)
    baseline = [p.baseline if p.baseline_value is None else p.baseline_value for p in pairs]
    candidate = [p.candidate if p.candidate_value is None else p.candidate_value for p in pairs]
    z = weighted_differences(baseline, candidate, [p.weight for p in pairs], bound)
    z_soft = soft_differences(pairs, z)
    bets = accept_bets(bound, own.bet_low, own.bet_high, own.bet_points)
    per_bet = log_wealth_per_bet(z, bets, 0.0, bound)  # (T, K)
    accept = mixture_of(per_bet)
    reject = log_wealth_path(
        z, reject_bets(bound, own.reject_margin, own.bet_low, own.bet_high, own.bet_points), own.reject_margin, bound
    )
    crossed = np.flatnonzero(accept >= params.lambda_accept)
    return BettingLook(
        log_e=float(accept[-1]),
        log_e_trigger=float(accept[crossed[0]]) if crossed.size else math.nan,
        log_e_reject=float(reject[-1]),
        reject_peak=float(np.max(reject)),
        accept_crossed=bool(crossed.size),
        reject_crossed=bool(np.max(reject) >= -params.lambda_dir),
        bound=bound,
        mean_difference=float(np.mean(z)),
        accept_bets=tuple(float(b) for b in bets),
        accept_log_wealth=tuple(float(v) for v in (per_bet[-1] if len(z) else np.zeros(len(bets)))),
        z=tuple(float(v) for v in z),
        z_soft=z_soft,
    )


def soft_differences(pairs: Sequence[PairResult], z: np.ndarray) -> tuple[float, ...]:
    """(C_soft - B_soft) * w per pair, an infra pair keeping its z (imputed against the candidate); () unless every
    pair with both outcomes has both soft scores."""
    out = []
    for pair, zi in zip(pairs, z):
        if pair.infra:
            out.append(float(zi))
        elif pair.baseline_soft is None or pair.candidate_soft is None:
            return ()
        else:
            out.append((pair.candidate_soft - pair.baseline_soft) * pair.weight)
    return tuple(out)


def log_wealth_final(z, bets, null_mean: float = 0.0) -> float:
    """log mixture wealth after all of `z` (1-D); -inf never occurs (bets sized by the caller)."""
    path = log_wealth_path(np.asarray(z, dtype=float).reshape(-1), bets, null_mean)
    return float(path[-1]) if path.size else 0.0


@dataclass(frozen=True)
class BettingDecision:
    """The betting rule at one look: action, reason, the log E to record and the look it came from."""

    action: str
    reason: str
    log_e: float  # accept e-process: at its first crossing on an accept (the value that triggered it), else the last
    log_dir: float  # minus the reject e-process (its running max on a reject): <= lambda_dir means rejected
    look: BettingLook


def betting_decision(pairs: Sequence[PairResult], params, *, final: bool) -> BettingDecision:
    """The betting rule at a block end.

    Accept when the accept e-process crossed exp(lambda_accept) at some pair
    (recorded log E: its value at the first crossing, the one that triggered
    the accept); reject when the reject e-process crossed exp(-lambda_dir);
    else `params.undecided` when `final`; else (only with `undecided: reject`)
    reject when the futility rule `params.futility` (kernel/futility.py) says
    the gate cannot or will hardly reach an accept in the `max_pairs` budget;
    else continue.
    """
    look = betting_look(pairs, params)
    if look.accept_crossed:
        return BettingDecision("accept", (f"betting: log E reached {look.log_e_trigger:.3f} >= lambda {params.lambda_accept} "
                                          f"(weighted mean gain {look.mean_difference:+.4f}, weight bound {look.bound:.3f})"),
                               look.log_e_trigger, -look.log_e_reject, look)
    if look.reject_crossed:
        return BettingDecision("reject", (f"betting: the e-process for gain >= {params_of(BettingParams, params).reject_margin} reached log {look.reject_peak:.3f} "
                                          f">= {-params.lambda_dir} (weighted mean gain {look.mean_difference:+.4f})"),
                               look.log_e, -look.reject_peak, look)
    if final:
        return BettingDecision(str(params.undecided), f"undecided: log E = {look.log_e:.3f}, reject log E = {look.log_e_reject:.3f} "
                                                      "at the end of the budget", look.log_e, -look.log_e_reject, look)
    # futility only where an undecided gate is rejected anyway: under `undecided: probation` a gate that cannot accept
    # may still end on probation, and stopping it early would change that decision
    futile = None
    if params.undecided == "reject":
        view = FutilityView(look.accept_bets, look.accept_log_wealth, look.z, look.bound, max(params.max_pairs - len(pairs), 0),
                            params.lambda_accept, z_soft=look.z_soft)
        futile = FUTILITY_RULES.get(params.futility).stop(view, params)
    if futile is not None:
        return BettingDecision("reject", f"{futile} (weighted mean gain {look.mean_difference:+.4f})", look.log_e, -look.log_e_reject, look)
    return BettingDecision("continue", "no boundary crossed", look.log_e, -look.log_e_reject, look)
