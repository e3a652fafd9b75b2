"""Futility stopping of the betting gate (`gate.futility`, issue 13 item 7): stop and reject a gate that cannot win.

A gate that ends undecided at the pair cap is rejected (`gate.undecided: reject`),
so every pair it spent after the point where an accept became impossible - or
hopeless - was wasted. A futility rule looks at the accept e-process after a
block and may turn "continue" into "reject". It can NEVER raise the false-accept
rate: it only removes accepts, so the set of gates accepted with futility is a
subset of those accepted without it, for every outcome sequence, and every
per-gate and run-level guarantee holds unchanged. What it costs is power: an
accept the gate would have reached later is lost (the benchmarks report it).
The betting rule applies it only with `gate.undecided: reject` (the default):
under `probation` a gate that cannot accept may still end on probation, and
stopping it early would change that decision.

- `none`: never stops early.
- `estimate`: first the exact bound (it costs no power): the accept e-process
  is the equal-weight mixture over the bets lam_k of W_k = prod (1 + lam_k Z).
  One pair multiplies W_k by at most (1 + lam_k b) (b = the plan's weight
  bound >= |Z|), so after the r pairs left in the budget the mixture is at most
  mean_k W_k (1 + lam_k b)^r; when even that is below exp(lambda_accept) no
  accept is possible any more, and stopping now gives the same decision as
  running to the cap (with `undecided: reject`). Then conditional power: stop
  when an optimistic estimate of the probability of accepting by the cap, were
  the edit worth g = min(futility_gain, UCB) on the pool, falls below
  `gate.futility_power`; UCB = mean(Z) + futility_z sd(Z) / sqrt(n) is the
  upper confidence bound on the pool gain from the importance-weighted
  differences so far (a power heuristic, so an ordinary one-sided bound, not an
  anytime one; it replaces futility_gain once `futility_min_n` pairs are in).
  The future pairs are modelled by resampling the gate's own discordant weights
  (discordance (D + 1) / (n + 2), win probability set so that E[Z] = g), each
  bet's log wealth as a Brownian motion with that drift and variance, and the
  probability that it ever reaches lambda_accept within the r pairs left is
  the exact first-passage formula; the sum over the bets (a union bound: the
  mixture can only cross when some bet's own wealth crosses) is the estimate.
  It is an approximation of the power, never of the validity: whatever it
  says, the rule only rejects. (The bound alone and the power at a fixed
  futility_gain, `bound` and `power`, were measured and removed:
  reports/benchmarks/futility.md before issue 29 - `estimate` stopped null
  gates sooner at the same accept rates.)
- `soft_estimate` (`estimate` whose upper bound comes from the soft scores):
  where every pair's two rollouts have a soft score (the probability the model
  gave the right letter), the bound is computed from (C_soft - B_soft) w instead
  of (C - B) w. The soft differences have the same mean when the score is
  calibrated and a smaller variance, so a null edit's bound falls below +10
  points in fewer pairs. A miscalibrated score can only cost power (a real edit
  stopped), never validity: the accept e-process still bets on the outcomes,
  and this rule only rejects. Without soft scores it is `estimate`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar, Optional, Protocol

import numpy as np

from harness.kernel.registry import Registry, is_number, params_of

__all__ = ["FUTILITY_RULES", "EstimateParams", "FutilityRule", "FutilityView", "conditional_power", "gain_upper_bound",
           "reachable_log_e"]


@dataclass(frozen=True)
class FutilityView:
    """The accept e-process of one betting gate after a block, as a futility rule needs it."""

    bets: Sequence[float]  # the accept bets lam_k > 0 (equal weights)
    log_wealth: Sequence[float]  # log W_k after the last pair, one per bet
    z: Sequence[float]  # the importance-weighted differences so far (infra imputed against the candidate)
    bound: float  # the plan's weight bound: |Z| <= bound
    remaining: int  # pairs left in the budget (max_pairs - pairs so far)
    lambda_accept: float  # the gate's accept threshold on log E
    z_soft: Sequence[float] = ()  # z with each arm's soft score for its outcome (BettingLook.z_soft); () when unknown


def reachable_log_e(log_wealth: Sequence[float], bets: Sequence[float], bound: float, remaining: int) -> float:
    """The largest log E the accept mixture can still reach: log mean_k W_k (1 + lam_k bound)^remaining (every pair a win at the bound)."""
    lam = np.asarray(bets, dtype=float)
    logs = np.asarray(log_wealth, dtype=float) + max(int(remaining), 0) * np.log1p(lam * bound)
    top = float(np.max(logs))
    return top + math.log(float(np.mean(np.exp(logs - top))))


def _first_passage(gap: float, drift: float, var: float, horizon: int) -> float:
    """P(sup_{t <= horizon} mu t + sigma W_t >= gap) for a Brownian motion with drift (gap > 0)."""
    if gap <= 0:
        return 1.0
    if horizon <= 0:
        return 0.0
    if var <= 1e-15:
        return 1.0 if drift * horizon >= gap else 0.0
    sd = math.sqrt(var * horizon)
    from scipy.special import log_ndtr, ndtr  # lazily: a stage that never stops for futility skips scipy's import
    first = float(ndtr((drift * horizon - gap) / sd))
    log_second = 2.0 * drift * gap / var + float(log_ndtr((-gap - drift * horizon) / sd))
    return min(1.0, first + (math.exp(log_second) if log_second < 700 else math.inf))


def conditional_power(view: FutilityView, gain: float) -> float:
    """Optimistic estimate of P(accept within the budget left | the edit gains `gain` on the pool) (module doc), in [0, 1]."""
    z = np.asarray(view.z, dtype=float)
    lam = np.asarray(view.bets, dtype=float)
    n = z.size
    disc = np.abs(z[z != 0])
    mean_w = float(np.mean(disc)) if disc.size else 1.0
    weights = np.append(disc, mean_w)  # one pseudo discordant pair at the mean discordant weight
    d_hat = (disc.size + 1) / (n + 2)
    theta = min(1.0, max(0.0, 0.5 * (1.0 + gain / (d_hat * float(np.mean(weights))))))
    up = np.log1p(np.outer(lam, weights))  # (bets, weights)
    down = np.log1p(-np.outer(lam, weights))
    m1 = d_hat * np.mean(theta * up + (1 - theta) * down, axis=1)
    m2 = d_hat * np.mean(theta * up**2 + (1 - theta) * down**2, axis=1)
    var = np.maximum(m2 - m1**2, 0.0)
    total = 0.0
    for k in range(lam.size):
        total += _first_passage(view.lambda_accept - float(view.log_wealth[k]), float(m1[k]), float(var[k]), view.remaining)
        if total >= 1.0:
            return 1.0
    return total


def gain_upper_bound(z: Sequence[float], z_score: float) -> float:
    """mean(z) + z_score sd(z) / sqrt(n): a one-sided upper confidence bound on the pool gain (n >= 2; sd with ddof 1)."""
    arr = np.asarray(z, dtype=float)
    if arr.size < 2:
        raise ValueError(f"gain_upper_bound needs at least 2 differences, got {arr.size}")
    return float(np.mean(arr) + z_score * np.std(arr, ddof=1) / math.sqrt(arr.size))


@dataclass(frozen=True)
class EstimateParams:
    """The settings the estimate rules own (config keys gate.<field>); `check()` is what config validation reports."""

    futility_gain: float = 0.10  # the largest pool gain the conditional power is computed at
    futility_power: float = 0.05  # stop below this estimated P(accept by the cap)
    futility_z: float = 1.645  # the z of the one-sided upper bound on the gain
    futility_min_n: int = 20  # pairs before that bound replaces futility_gain

    def check(self) -> list[tuple[str, str]]:
        problems = []
        if not (is_number(self.futility_gain) and 0 < self.futility_gain < 1):
            problems.append(("futility_gain", "must be in (0, 1): the pool gain the conditional power assumes"))
        if not (is_number(self.futility_power) and 0 <= self.futility_power < 1):
            problems.append(("futility_power", "must be in [0, 1) (0: only the exact bound stops)"))
        if not (is_number(self.futility_z) and self.futility_z > 0):
            problems.append(("futility_z", "must be > 0: the z-score of the estimate rule's upper bound on the gain"))
        if not (isinstance(self.futility_min_n, int) and not isinstance(self.futility_min_n, bool) and self.futility_min_n >= 2):
            problems.append(("futility_min_n", "must be an integer >= 2"))
        return problems


class FutilityRule(Protocol):
    """A futility rule of the betting gate: a reason to stop and reject now, or None to go on."""

    @property
    def name(self) -> str: ...

    def stop(self, view: FutilityView, params) -> Optional[str]: ...


@dataclass(frozen=True)
class NoFutility:
    name: str = "none"

    def stop(self, view: FutilityView, params) -> Optional[str]:
        return None


@dataclass(frozen=True)
class EstimateFutility:
    """Stop when the accept threshold is out of reach even if every remaining pair is a win at the bound, or when the
    conditional power at min(futility_gain, UCB of the gain so far) is below futility_power.

    `soft_evidence`: the UCB comes from the soft differences (`FutilityView.z_soft`) when the gate has them for every
    pair, else from z."""

    name: str = "estimate"
    soft_evidence: bool = False
    params_type: ClassVar[type] = EstimateParams

    def stop(self, view: FutilityView, params) -> Optional[str]:
        own = params_of(EstimateParams, params)
        best = reachable_log_e(view.log_wealth, view.bets, view.bound, view.remaining)
        if best < view.lambda_accept:
            return (f"futility (bound): log E can reach at most {best:.3f} < lambda {view.lambda_accept:.3f} "
                    f"in the {view.remaining} pairs left, even if every one is a win at weight {view.bound:.3f}")
        gain, source = float(own.futility_gain), "futility_gain"
        evidence, what = view.z, "pairs"
        if self.soft_evidence and view.z_soft and len(view.z_soft) == len(view.z):
            evidence, what = view.z_soft, "pairs' soft scores"
        if len(evidence) >= max(int(own.futility_min_n), 2):
            ucb = gain_upper_bound(evidence, float(own.futility_z))
            if ucb < gain:
                gain, source = ucb, f"UCB of the gain so far (z {own.futility_z}, {len(evidence)} {what})"
        if gain <= 0:
            return (f"futility ({self.name}): the {source} is {gain:+.4f} <= 0: no gain left to accept in the "
                    f"{view.remaining} pairs left")
        power = conditional_power(view, gain)
        if power < own.futility_power:
            return (f"futility ({self.name}): P(accept in the {view.remaining} pairs left | gain {gain:.4f}, the {source}) <= "
                    f"{power:.4f} < futility_power {own.futility_power}")
        return None


FUTILITY_RULES: Registry[FutilityRule] = Registry("gate.futility", {
    "none": NoFutility(),
    "estimate": EstimateFutility(),
    "soft_estimate": EstimateFutility("soft_estimate", soft_evidence=True),
})
