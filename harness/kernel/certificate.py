"""The delivery certificate: an anytime-valid paired test that one harness beats another on a population.

The second kind of evidence (DESIGN §5 "Two kinds of evidence"): per-edit decisions are cheap, what ships is
certified. Each slot t asks a question I_t drawn uniformly at random, with replacement, from the certified
population (the test pool: no selection ever looked at it), with a fresh sample index, of both harnesses:

    Z_t = C_t - B_t in [-1, 1],    E[Z_t | past] = Delta,

Delta = the candidate's expected accuracy gain on the population (infra failures imputed against the candidate:
Z only gets smaller, so the certificate stays valid whatever causes them).

For a null mean m, K_t(m) = mean_k prod_{s <= t} (1 + lam_k (Z_s - m)) with fixed bets 0 < lam_k <= BET_MAX is a
nonnegative supermartingale whenever Delta <= m (Ville: P(sup_t K_t(Delta) >= 1 / alpha) <= alpha, under any
stopping rule). Hence, at level alpha:

- **certified** when K_t(-margin) >= 1 / alpha at some look: P(certified | Delta <= -margin) <= alpha
  (margin 0: "better"; margin > 0: non-inferiority, "not worse by more than margin");
- **lower confidence bound**: K_t(m) decreases in m, so {m : K_t(m) < 1 / alpha} = (L_t, M_MAX]; the running
  maximum LCB_t = max_{s <= t} L_s satisfies P(exists t: Delta < LCB_t) <= alpha, so sampling may go on after the
  crossing until the bound is useful (`useful_fraction`) without losing validity; `useful_pairs_ratio` r caps that
  phase at r x n more pairs after a crossing at n pairs: stopping after the crossing is a stopping time like any
  other, so the certificate (decided at the crossing) and the bound at the stop keep their level; only the width of
  the bound changes (r None: the phase runs to the pair budget);
- **upper confidence bound** (the mirror bets, lam < 0) for the stop "cannot certify": once UCB_t <= -margin the
  test ends not certified (stopping only ever refuses, so it cannot raise the false-certification rate);
- **futility** (`futility`, the gate's rules of harness/kernel/futility.py on the certificate's e-process): `bound`
  stops when K(-margin) cannot reach 1 / alpha in the pairs left even if every one were a win (the same decision as
  running to the budget, fewer pairs); `estimate` also stops when the conditional power at the gain's one-sided
  upper bound so far (mean + futility_z sd / sqrt(n), after FUTILITY_MIN_N pairs; futility_z 0: the point estimate)
  is below FUTILITY_POWER; `predictive` also stops, after futility_min_n pairs, when that conditional power averaged
  over N(mean, se^2) of the gain (the predictive power) is below futility_power. All only ever refuse: the
  certified outcomes with futility are a subset of those without it, so P(certified | Delta <= -margin) <= alpha
  still holds; what futility can cost is a certificate that would have come late.

**Only the questions whose input changed** (`share` < 1, harness/loop/certify.py `changed_types`): a question whose
task type reads nothing the candidate changed gets byte-identical input under both harnesses, so its paired
difference has mean exactly 0 (a structural fact, no statistical assumption). With S those of the population whose
input changed and pi = |S| / |population| (known exactly), Delta = pi Delta_S. The slots then draw from S only and
the same e-process tests Delta_S > -margin / pi (`on_changed_questions`): by Ville on S, P(certified | Delta_S <=
-margin / pi) <= alpha, and Delta <= -margin <=> Delta_S <= -margin / pi, so P(certified | Delta <= -margin) <= alpha;
the bounds on Delta_S times pi bound Delta at every t with the same probability, and pi x mean Z is unbiased for
Delta. Estimate, bounds and width are reported in population units (`in_population_units`); a null mean beyond the
grid (margin / pi > M_MAX) is tested at -M_MAX, a stronger claim. pi = 0 (S empty: every question reads identical
input): Delta = 0 exactly, no pairs and no sampling error, so margin > 0 certifies (0 > -margin holds with probability
1: it is never a false certification) and margin 0 refuses (0 is not better); estimate and bounds are 0.

L_t is found on a grid of m (step GRID_STEP) and rounded DOWN to it (the UCB up): the reported bounds are never
tighter than the exact ones. Per-task-type estimates are fixed-n means with a normal interval: indicative, not
anytime-valid; a type whose estimate is below -flag_drop is flagged. With `type_pairs` > 0 a certified attempt adds
top-up pairs drawn within a type (harness/loop/certify.py): they enter that type's row only, never Z_t above.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Optional

import numpy as np

from harness.kernel.futility import FutilityView, conditional_power, gain_upper_bound, reachable_log_e
from harness.kernel.registry import is_int_at_least, is_number
from harness.kernel.types import BlockItem, PairResult

__all__ = [
    "BETS",
    "EXACT_ZERO",
    "UniformDraws",
    "CertifyParams",
    "CertifyLook",
    "TypeEstimate",
    "certify_decision",
    "certify_look",
    "confidence_bounds",
    "in_population_units",
    "on_changed_questions",
    "per_type_estimates",
]

# fixed bets of the mixture (the same for every m: K_t(m) is then monotone in m). 0.5 is the Kelly bet of a +15-point
# gain at discordance 0.3 (a delivered harness); 0.1 keeps the lower bound tight once m nears the estimate
BETS = (0.1, 0.2, 0.5)
M_MAX = 0.9  # largest null mean on the grid: 1 + lam (z - m) >= 1 - 0.5 * 1.9 > 0 for every z in [-1, 1]
GRID_STEP = 0.0025  # bounds are reported on this grid (a quarter of a point), rounded outward
_GRID = np.round(np.arange(-M_MAX, M_MAX + GRID_STEP / 2, GRID_STEP), 6)
# certify.futility -> (refuse when certifying is out of reach, also when it is hopeless): the steps each mode runs
FUTILITY: dict[str, tuple[bool, bool]] = {"none": (False, False), "bound": (True, False), "estimate": (True, True),
                                          "predictive": (True, True)}
# predictive: the conditional power averaged over N(mean, se^2) of the gain (probabilists' Gauss-Hermite nodes)
_PP_NODES, _PP_WEIGHTS = np.polynomial.hermite_e.hermegauss(9)
_PP_WEIGHTS = _PP_WEIGHTS / _PP_WEIGHTS.sum()
FUTILITY_POWER = 0.05  # estimate: refuse below this estimated P(certified by the budget) (the gate's futility_power)
FUTILITY_Z = 1.645  # estimate: the gain's one-sided 95 % upper bound (the gate's futility_z); certify.futility_z's default
FUTILITY_MIN_N = 20  # estimate: pairs before that bound is trusted (the gate's futility_min_n)
# pairs_per_question > 0: the pair budget is never below this (a 36-question pool would otherwise get ~100-300 pairs,
# fewer than a +10-point gain at discordance 0.3 needs to cross: ~150-250)
MIN_POOL_PAIRS = 200
EXACT_ZERO = "identical input on every question: Delta = 0 > -margin"  # share 0 with a margin: certified, exactly


@dataclass(frozen=True)
class CertifyParams:
    """The certificate's settings (`certify.*`); every default is conf/certify/default.yaml's value (a test keeps them
    equal), so CertifyParams() is the product's certificate."""

    alpha: float = 0.05  # level: P(certified and truly not better) <= alpha
    max_pairs: int = 1000  # pair budget (2 rollouts a pair)
    block_size: int = 20  # pairs between looks
    margin: float = 0.0  # 0: superiority; > 0: non-inferiority by this much (accuracy scale)
    useful_fraction: float = 0.1  # after certifying, keep sampling until LCB >= this share of the estimate
    flag_drop: float = 0.02  # flag a task type whose estimate is below minus this
    min_type_pairs: int = 5  # a task type needs this many pairs to be flagged
    type_pairs: int = 10  # > 0: a certified attempt tops each changed task type up to this many pairs (per-type rows only)
    futility: str = "predictive"  # none | bound | estimate | predictive: refuse early when certifying is out of reach / hopeless
    pairs_per_question: float = 20.0  # > 0: budget min(max_pairs, max(MIN_POOL_PAIRS, this x population questions))
    futility_z: float = FUTILITY_Z  # estimate: conditional power at mean + this x se of the gain (0: the point estimate)
    futility_power: float = 0.2  # predictive: refuse below this predictive P(certified in the pairs left)
    futility_min_n: int = 200  # predictive: pairs before the predictive power may refuse (early luck is not evidence)
    skip_identical: bool = True  # ask only the questions whose input changed (share < 1: module doc); read by the loop
    useful_pairs_ratio: Optional[float] = 0.5  # after a crossing at n pairs, sample on for at most this x n more (None: to the budget)

    @classmethod
    def keys(cls) -> tuple[str, ...]:
        """The `certify.<key>` names these settings are read from (one per field)."""
        return tuple(f.name for f in fields(cls))

    def for_population(self, n_questions: int) -> "CertifyParams":
        """These settings with the pair budget of a population of `n_questions` questions: `max_pairs`, or with
        `pairs_per_question` k > 0, min(max_pairs, max(MIN_POOL_PAIRS, ceil(k n))) rounded up to whole blocks.
        Why: the certificate's estimand is the gain on the pool, which differs from the gain on questions outside it
        by ~sd/sqrt(n); pairs beyond a few per question shrink an error that is already the smaller one, and are
        mostly spent by refusals (docs/certificate.md "Pair budget"). Fixed before any pair is drawn: validity is
        untouched."""
        if self.pairs_per_question <= 0:
            return self
        want = max(MIN_POOL_PAIRS, math.ceil(self.pairs_per_question * n_questions))
        want = math.ceil(want / self.block_size) * self.block_size
        return replace(self, max_pairs=min(self.max_pairs, want))

    def check(self) -> list[tuple[str, object, str]]:
        """(key, value, rule) of every broken rule; empty when valid."""
        pairs_ok = is_int_at_least(self.max_pairs, 1)
        block_ok = is_int_at_least(self.block_size, 1)
        rules = [  # (key, holds, rule), in the order the problems are reported
            ("alpha", isinstance(self.alpha, float) and 0.0 < self.alpha < 0.5, "must be a float in (0, 0.5)"),
            ("max_pairs", pairs_ok, "must be an integer >= 1"),
            ("block_size", block_ok, "must be an integer >= 1"),
            ("block_size", not (pairs_ok and block_ok) or self.block_size <= self.max_pairs,
             f"must be <= certify.max_pairs = {self.max_pairs}"),
            ("margin", is_number(self.margin) and 0.0 <= self.margin < M_MAX, f"must be a number in [0, {M_MAX})"),
            ("useful_fraction", is_number(self.useful_fraction) and 0.0 <= self.useful_fraction < 1.0, "must be a number in [0, 1)"),
            ("flag_drop", is_number(self.flag_drop) and self.flag_drop >= 0.0, "must be a number >= 0"),
            ("min_type_pairs", is_int_at_least(self.min_type_pairs, 1), "must be an integer >= 1"),
            ("type_pairs", is_int_at_least(self.type_pairs, 0) and self.type_pairs <= 1000,
             "must be an integer in [0, 1000] (0: no top-up)"),
            ("pairs_per_question", is_number(self.pairs_per_question) and 0.0 <= self.pairs_per_question <= 1000.0,
             "must be a number in [0, 1000] (0: the budget is certify.max_pairs)"),
            ("futility_z", is_number(self.futility_z) and 0.0 <= self.futility_z <= 5.0,
             "must be a number in [0, 5] (0: conditional power at the point estimate)"),
            ("futility_power", is_number(self.futility_power) and 0.0 <= self.futility_power < 1.0,
             "must be a number in [0, 1) (0: the predictive step never refuses)"),
            ("futility_min_n", is_int_at_least(self.futility_min_n, 2), "must be an integer >= 2"),
            ("skip_identical", isinstance(self.skip_identical, bool), "must be true or false"),
            ("useful_pairs_ratio", self.useful_pairs_ratio is None or (is_number(self.useful_pairs_ratio)
                                                                      and 0.0 <= self.useful_pairs_ratio <= 1000.0),
             "must be null (the useful-bound phase runs to the pair budget) or a number in [0, 1000]"),
            ("futility", self.futility in FUTILITY, f"must be one of {list(FUTILITY)}"),
        ]
        return [(f"certify.{key}", getattr(self, key), rule) for key, holds, rule in rules if not holds]


class UniformDraws:
    """The certificate's plan (a `BlockPlanner`): every slot an independent uniform draw from `qids` (with
    replacement) with the fresh sample index `first_index + t`, blocks of `block_size`, `max_pairs` slots in all.
    Seeded: the same (qids, seed, first_index) give the same slots."""

    def __init__(self, qids: Sequence[str], *, max_pairs: int, block_size: int, seed: int, first_index: int):
        if not qids:
            raise ValueError("certificate: empty population")
        self._qids = sorted(set(qids))
        self._rng = random.Random(f"certify|{seed}|{first_index}")
        self._max, self._block, self._first = int(max_pairs), int(block_size), int(first_index)
        self._issued = 0

    @property
    def final(self) -> bool:
        return self._issued >= self._max

    def next_block(self, baseline_outcomes_so_far: Sequence[Optional[bool]] = ()) -> Optional[list[BlockItem]]:
        if self._issued >= self._max:
            return None
        n = min(self._block, self._max - self._issued)
        block = [BlockItem(self._rng.choice(self._qids), self._first + self._issued + k) for k in range(n)]
        self._issued += n
        return block

    def informing_samples(self) -> dict[str, frozenset[int]]:
        return {}


def differences(pairs: Sequence[PairResult]) -> np.ndarray:
    """Z_t = C_t - B_t per pair, an infra pair imputed against the candidate (-1)."""
    return np.array([-1.0 if p.infra else float(bool(p.candidate)) - float(bool(p.baseline)) for p in pairs], dtype=float)


def _log_wealth(z: np.ndarray, m: np.ndarray, bets: np.ndarray) -> np.ndarray:
    """log mean_k prod_{s <= t} (1 + bets_k (z_s - m_j)): shape (len(m), T)."""
    x = z[None, :, None] - m[:, None, None]  # (M, T, 1)
    logs = np.cumsum(np.log1p(x * bets[None, None, :]), axis=1)  # (M, T, K)
    top = logs.max(axis=2)
    return top + np.log(np.mean(np.exp(logs - top[..., None]), axis=2))


def confidence_bounds(z: Sequence[float] | np.ndarray, alpha: float) -> tuple[np.ndarray, np.ndarray]:
    """(LCB_t, UCB_t) after every pair: running-intersection anytime-valid bounds on Delta at level alpha each,
    on the grid (rounded outward); -1 / +1 before any evidence."""
    zz = np.asarray(z, dtype=float)
    if zz.size == 0:
        return np.zeros(0), np.zeros(0)
    if np.any(np.abs(zz) > 1.0):
        raise ValueError("certificate: paired differences must lie in [-1, 1]")
    threshold = math.log(1.0 / alpha)
    bets = np.asarray(BETS, dtype=float)
    lower = _log_wealth(zz, _GRID, bets) >= threshold  # (M, T): m rejected from below
    upper = _log_wealth(zz, _GRID, -bets) >= threshold  # m rejected from above
    # L_t = the largest grid m rejected from below such that all smaller m are too (monotone: the count of rejected m)
    n_low = lower.sum(axis=0)  # rejected m are a prefix of the grid
    lcb = np.where(n_low > 0, _GRID[np.maximum(n_low - 1, 0)], -1.0)
    n_up = upper.sum(axis=0)  # rejected m are a suffix of the grid
    ucb = np.where(n_up > 0, _GRID[np.minimum(len(_GRID) - n_up, len(_GRID) - 1)], 1.0)
    return np.maximum.accumulate(lcb), np.minimum.accumulate(ucb)


@dataclass(frozen=True)
class TypeEstimate:
    task_type: str
    pairs: int
    estimate: float
    ci_low: float  # 95 % fixed-n interval with one pseudo-win and one pseudo-loss (Agresti-Caffo): indicative only
    ci_high: float
    flagged: bool


def per_type_estimates(pairs: Sequence[PairResult], task_type_of: Mapping[str, str], params: CertifyParams) -> list[TypeEstimate]:
    """Mean paired difference per task type (infra against the candidate), sorted by task type. The interval adds one
    pseudo-win and one pseudo-loss (Agresti-Caffo): a type whose few pairs all tied gets a wide interval, not [0, 0]."""
    by_type: dict[str, list[float]] = {}
    for p, zi in zip(pairs, differences(pairs)):
        by_type.setdefault(task_type_of[p.qid], []).append(float(zi))
    out = []
    for task_type in sorted(by_type):
        values = np.asarray(by_type[task_type])
        n = len(values)
        mean = float(values.mean())
        centre = float(values.sum()) / (n + 2)  # the pseudo-pairs add +1 and -1: the sum is unchanged
        half = 1.96 * math.sqrt(max((float(np.square(values).sum()) + 2.0) / (n + 2) - centre ** 2, 0.0) / (n + 2))
        out.append(TypeEstimate(task_type, n, mean, max(-1.0, centre - half), min(1.0, centre + half),
                                flagged=n >= params.min_type_pairs and mean < -params.flag_drop))
    return out


@dataclass(frozen=True)
class CertifyLook:
    """The certificate's statistics after the pairs so far."""

    pairs: int
    wins: int
    losses: int
    ties: int
    infra: int
    estimate: float  # mean of Z (unbiased for Delta)
    lower_bound: float  # anytime-valid LCB at level alpha
    upper_bound: float  # anytime-valid UCB at level alpha
    log_e: float  # log K_t(-margin) at the last pair
    log_e_max: float  # its running maximum (certified iff >= threshold; share 0 decides without it)
    threshold: float  # log(1 / alpha)
    certified: bool
    crossed_at: Optional[int]  # pairs at the first crossing


def certify_look(pairs: Sequence[PairResult], params: CertifyParams) -> CertifyLook:
    z = differences(pairs)
    threshold = math.log(1.0 / params.alpha)
    wins = sum(p.sign > 0 for p in pairs)
    losses = sum(p.sign < 0 for p in pairs)
    infra = sum(p.infra for p in pairs)
    if z.size == 0:
        return CertifyLook(0, 0, 0, 0, 0, 0.0, -1.0, 1.0, 0.0, 0.0, threshold, False, None)
    path = _log_wealth(z, np.array([-float(params.margin)]), np.asarray(BETS, dtype=float))[0]
    crossed = np.flatnonzero(path >= threshold)
    lcb, ucb = confidence_bounds(z, params.alpha)
    return CertifyLook(
        pairs=len(pairs), wins=wins, losses=losses, ties=len(pairs) - wins - losses - infra, infra=infra,
        estimate=float(z.mean()), lower_bound=float(lcb[-1]), upper_bound=float(ucb[-1]),
        log_e=float(path[-1]), log_e_max=float(path.max()), threshold=threshold,
        certified=bool(crossed.size), crossed_at=int(crossed[0]) + 1 if crossed.size else None,
    )


def on_changed_questions(params: CertifyParams, share: float) -> CertifyParams:
    """The test's settings on S, the share `share` of the population whose input changed (module doc): the null mean
    -margin becomes -margin / share (Delta = share x Delta_S), clamped to the grid's -M_MAX, where every
    1 + lam (z - m) stays > 0 (testing Delta_S <= -M_MAX is then the stronger claim). The pair budget is the caller's
    (sized on |S|). `share` 1: the settings unchanged."""
    if not 0.0 < share <= 1.0:
        raise ValueError(f"certificate: share of the population whose input changed must be in (0, 1], got {share}")
    if share == 1.0:
        return params
    return replace(params, margin=min(float(params.margin) / share, M_MAX))


def in_population_units(look: CertifyLook, share: float) -> CertifyLook:
    """A look of the test on S with its estimate and bounds times `share`: the gain on the whole population (the
    questions outside S contribute exactly 0). The e-process, its threshold and the counts are S's own."""
    if share == 1.0:
        return look
    return replace(look, estimate=share * look.estimate, lower_bound=share * look.lower_bound,
                   upper_bound=share * look.upper_bound)


@dataclass(frozen=True)
class CertifyDecision:
    """`action`: continue | certified | not_certified; `reason` says why it stopped."""

    action: str
    reason: str
    look: CertifyLook = field(repr=False)


def certify_decision(pairs: Sequence[PairResult], params: CertifyParams, *, final: bool, share: float = 1.0) -> CertifyDecision:
    """The certificate's stop rule at a look (every rule only decides when to stop; validity is Ville's).

    - certified and LCB >= useful_fraction x estimate (the bound is useful) -> certified;
    - certified at n pairs and `useful_pairs_ratio` r set: at the first look with >= (1 + r) n pairs -> certified
      (the useful-bound phase's budget; the decision was made at the crossing, any later stop keeps the bound valid);
    - UCB <= -margin (the candidate cannot be certified at this level) -> not_certified;
    - futility (`params.futility`, module doc): certifying is out of reach / hopeless in the pairs left -> not_certified;
    - the pair budget is spent (`final`, or max_pairs reached) -> certified iff the e-process crossed.

    `share` < 1: the pairs are drawn from the share of the population whose input changed; the test runs on them
    (`on_changed_questions`) and the look is returned in population units (`in_population_units`); the futility
    lines give gains per changed question. `share` 0: no question's input changed (`_identical_everywhere`).
    """
    if share == 0.0:
        return _identical_everywhere(pairs, params)
    test = on_changed_questions(params, share)
    on_s = certify_look(pairs, test)  # the decision's statistics, on S
    look = in_population_units(on_s, share)
    final = final or look.pairs >= params.max_pairs
    what = "not worse by more than %.3f" % params.margin if params.margin > 0 else "better"
    if on_s.certified and on_s.lower_bound >= params.useful_fraction * on_s.estimate:
        return CertifyDecision("certified", f"certified {what}: log E reached {look.log_e_max:.2f} >= {look.threshold:.2f} "
                                            f"after {look.crossed_at} pairs; lower bound {look.lower_bound:+.4f} is "
                                            f">= {params.useful_fraction:g} x estimate {look.estimate:+.4f}", look)
    if on_s.certified and on_s.crossed_at is not None and params.useful_pairs_ratio is not None \
            and look.pairs >= (1.0 + params.useful_pairs_ratio) * on_s.crossed_at:
        return CertifyDecision("certified", f"certified {what}: log E reached {look.log_e_max:.2f} >= {look.threshold:.2f} "
                                            f"after {look.crossed_at} pairs; useful-bound phase capped at "
                                            f"{params.useful_pairs_ratio:g} x {look.crossed_at} more pairs (lower bound "
                                            f"{look.lower_bound:+.4f}, estimate {look.estimate:+.4f})", look)
    if not on_s.certified and on_s.upper_bound <= -test.margin:
        return CertifyDecision("not_certified", f"not certified: the upper bound {look.upper_bound:+.4f} on the gain is "
                                                f"<= {-share * test.margin:+.4f} after {look.pairs} pairs", look)
    if not on_s.certified and not final and FUTILITY[params.futility][0]:
        why = _futility(pairs, test)
        if why is not None:
            where = f" (gains per changed question; x {share:.3f} in the population)" if share < 1.0 else ""
            return CertifyDecision("not_certified", f"not certified: {why}{where} (estimate {look.estimate:+.4f}, bounds "
                                                    f"[{look.lower_bound:+.4f}, {look.upper_bound:+.4f}])", look)
    if final:
        if look.certified:
            return CertifyDecision("certified", f"certified {what}: log E reached {look.log_e_max:.2f} >= "
                                                f"{look.threshold:.2f} after {look.crossed_at} pairs; budget of "
                                                f"{look.pairs} pairs spent (lower bound {look.lower_bound:+.4f})", look)
        return CertifyDecision("not_certified", f"not certified: log E peaked at {look.log_e_max:.2f} < {look.threshold:.2f} "
                                                f"in the budget of {look.pairs} pairs (estimate {look.estimate:+.4f}, "
                                                f"bounds [{look.lower_bound:+.4f}, {look.upper_bound:+.4f}])", look)
    return CertifyDecision("continue", "no stop", look)


def _identical_everywhere(pairs: Sequence[PairResult], params: CertifyParams) -> CertifyDecision:
    """share 0: every question reads identical input under both harnesses, so Delta = 0 exactly (module doc): with a
    margin certified without pairs, estimate 0 and bounds [0, 0]; without one not certified (0 is not better)."""
    if pairs:
        raise ValueError(f"certificate: share 0 (no question's input changed) with {len(pairs)} pairs; expected none")
    certified = params.margin > 0
    look = CertifyLook(0, 0, 0, 0, 0, 0.0, 0.0, 0.0, 0.0, 0.0, math.log(1.0 / params.alpha), certified, None)
    if certified:
        return CertifyDecision("certified", f"certified not worse by more than {params.margin:.3f}: {EXACT_ZERO} "
                                            "(exact: no pairs, no sampling error)", look)
    return CertifyDecision("not_certified", "not certified: identical input on every question: Delta = 0 is not "
                                            "better (margin 0)", look)


def _futility(pairs: Sequence[PairResult], params: CertifyParams) -> Optional[str]:
    """Why certifying is out of reach (`bound`) or hopeless (`estimate`) in the pairs left; None to go on. The
    e-process of the claim bets on Z + margin in [-1, 1 + margin] (module doc)."""
    z = differences(pairs) + float(params.margin)
    bets = np.asarray(BETS, dtype=float)
    log_wealth = np.sum(np.log1p(np.outer(bets, z)), axis=1)  # log W_k per bet after the last pair
    threshold = math.log(1.0 / params.alpha)
    remaining = max(int(params.max_pairs) - len(pairs), 0)
    view = FutilityView(bets=BETS, log_wealth=tuple(log_wealth), z=tuple(z), bound=1.0 + float(params.margin),
                        remaining=remaining, lambda_accept=threshold)
    best = reachable_log_e(view.log_wealth, BETS, view.bound, remaining)
    if best < threshold:
        return (f"futility (bound): log E can reach at most {best:.2f} < {threshold:.2f} in the {remaining} pairs left "
                "even if every one is a win")
    if not FUTILITY[params.futility][1] or len(pairs) < FUTILITY_MIN_N:
        return None
    if params.futility == "predictive" and len(pairs) >= params.futility_min_n:
        why = _predictive_futility(view, params)
        if why is not None:
            return why
    gain = gain_upper_bound(z.tolist(), float(params.futility_z))
    if gain <= 0:
        return (f"futility (estimate): the gain's mean + {params.futility_z:g} se so far is {gain - params.margin:+.4f} "
                f"<= {-params.margin or 0.0:+.4f}")  # margin 0: "+0.0000", not "-0.0000"
    power = conditional_power(view, gain)
    if power < FUTILITY_POWER:
        return (f"futility (estimate): P(certified in the {remaining} pairs left | gain {gain - params.margin:+.4f}, "
                f"its mean + {params.futility_z:g} se so far) <= {power:.4f} < {FUTILITY_POWER}")
    return None


def _predictive_futility(view: FutilityView, params: CertifyParams) -> Optional[str]:
    """`predictive`: refuse when the conditional power averaged over N(mean, se^2) of the gain so far (the predictive
    power; a gain <= 0 has power 0) is below `futility_power`. A hopeless +2-point candidate is refused once its
    estimate is precise enough, where the power at its upper bound (`estimate`) keeps it going. Like every futility
    rule it only ever refuses, so P(certified | Delta <= -margin) <= alpha does not depend on it."""
    z = np.asarray(view.z, dtype=float)
    mean, se = float(z.mean()), float(z.std(ddof=1)) / math.sqrt(z.size)
    power = sum(float(w) * conditional_power(view, mean + se * float(x))
                for x, w in zip(_PP_NODES, _PP_WEIGHTS) if mean + se * float(x) > 0)
    if power < params.futility_power:
        return (f"futility (predictive): P(certified in the {view.remaining} pairs left), averaged over the gain's "
                f"N({mean - params.margin:+.4f}, {se:.4f}^2), is {power:.4f} < {params.futility_power:g}")
    return None
