"""Budget sizing: the smallest gain a gate, or the delivery certificate, accepts within its pair budget (issue 32 item 3).

Before any paid work, the configuration alone says whether an accept is within reach. The numbers come from
the decision code itself: a *typical* pair path is fed to `gate.gate_decision` (the gate's rule, its futility
stop, at every block end, as the loop calls it) or to `certificate.certify_decision`, and the smallest gain
whose path is accepted is reported. Nothing here restates a rule's formula.

The typical path of a gain g at discordance d: of n pairs, a share (d + g) / 2 are wins (candidate right,
baseline wrong), (d - g) / 2 losses and 1 - d ties, spread evenly (each pair is the outcome furthest behind its
expected count), every pair with importance weight 1 (the gain on the pool is then the mean of the
differences). It is the path the gate sees about half the time, so "smallest gain" reads as "the gain at which
about half the gates accept"; noise makes smaller gains accept sometimes and larger ones fail sometimes.

Assumptions, stated once:
- discordance: the share of pairs whose two answers differ in correctness. A gain can never exceed it. The
  pessimistic case is `PESSIMISTIC_DISCORDANCE` = 0.40: SmolLM2 on the real path tied 60-100 % of its gate
  pairs (issue 32), and at a given gain the most discordant pairs carry the most noise;
- the gate's level is the first gate's: `gate.lambda` (gate.fdr=none), or e-LOND's first level (strict mode,
  later gates get the same or a smaller one until an install);
- the certificate is sized at `certify.alpha` (the final harness is tested at (1 - fallback_share) of it when
  fallbacks are configured: a little stricter), at its final look (certified iff its e-process crossed);
- a plausible edit gains `PLAUSIBLE_EDIT_GAIN` (+5 points: the gains the betting gate's bets are sized for start
  there), a plausible delivered harness `PLAUSIBLE_DELIVERY_GAIN` (+10 points).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Optional

from harness.kernel.certificate import CertifyParams, certify_decision
from harness.kernel.fdr import FDR_PROCEDURES, FdrState
from harness.kernel.gate import gate_decision
from harness.kernel.plans import ImportanceParams
from harness.kernel.registry import params_of
from harness.kernel.rules import rule_for
from harness.kernel.types import GateParams, PairResult

PESSIMISTIC_DISCORDANCE = 0.40  # 1 - the real model's lowest tie rate (60 %)
TABLE_DISCORDANCES = (0.10, 0.20, 0.40)
PLAUSIBLE_EDIT_GAIN = 0.05
PLAUSIBLE_DELIVERY_GAIN = 0.10
GAIN_STEP = 0.005  # half a point: the resolution of the reported gains
MAX_PAIRS_SEARCHED = 5000  # the largest pair budget a suggestion may name


def typical_pairs(gain: float, discordance: float, n: int, *, weight_bound: float = 1.0) -> list[PairResult]:
    """n pairs at their expected shares (module doc), spread evenly; weight 1, `weight_bound` the plan's."""
    if not 0.0 <= gain <= discordance <= 1.0:
        raise ValueError(f"sizing: need 0 <= gain <= discordance <= 1, got gain {gain!r}, discordance {discordance!r}")
    shares = {(False, True): (discordance + gain) / 2, (True, False): (discordance - gain) / 2, (True, True): 1.0 - discordance}
    emitted = dict.fromkeys(shares, 0)
    pairs = []
    for k in range(1, n + 1):
        outcome = max(shares, key=lambda o: k * shares[o] - emitted[o])  # the outcome furthest behind its share
        emitted[outcome] += 1
        pairs.append(PairResult(f"q{k}", outcome[0], outcome[1], sample_index=k, weight=1.0, weight_bound=weight_bound))
    return pairs


def _sized(params: GateParams) -> Optional[GateParams]:
    """`params` at the first gate's level, or None when the rule does not spend `gate.max_pairs` (not sized)."""
    if rule_for(params).questions != "sampling":
        return None
    level = FDR_PROCEDURES.get(params.fdr).level(FdrState(), params).lambda_accept
    return dataclasses.replace(params, lambda_accept=level)


def gate_accepts(params: GateParams, gain: float, discordance: float) -> bool:
    """Whether the gate accepts the typical path of `gain` by `params.max_pairs` (looks at every block end)."""
    bound = 1.0 / params_of(ImportanceParams, params).importance_floor if rule_for(params).weighted else 1.0
    pairs = typical_pairs(gain, discordance, params.max_pairs, weight_bound=bound)
    looks = list(range(params.block_size, params.max_pairs, params.block_size)) + [params.max_pairs]
    for n in looks:
        verdict = gate_decision(pairs[:n], params, final=n >= params.max_pairs)
        if verdict.action != "continue":
            return verdict.action == "accept"
    return False


def smallest_gate_gain(params: GateParams, discordance: float) -> Optional[float]:
    """The smallest gain (a multiple of GAIN_STEP, at most `discordance`) whose typical path the gate accepts at the
    first gate's level; None when none does."""
    sized = _sized(params)
    if sized is None:
        raise ValueError(f"sizing: gate.rule={params.rule} does not spend gate.max_pairs; it is not sized")
    return _smallest(lambda gain: gate_accepts(sized, gain, discordance), discordance)


def certificate_accepts(params: CertifyParams, gain: float, discordance: float) -> bool:
    return certify_decision(typical_pairs(gain, discordance, params.max_pairs), params, final=True).action == "certified"


def smallest_certified_gain(params: CertifyParams, discordance: float) -> Optional[float]:
    """The smallest gain whose typical path the certificate certifies within `params.max_pairs`; None when none."""
    return _smallest(lambda gain: certificate_accepts(params, gain, discordance), discordance)


def _smallest(accepts, discordance: float) -> Optional[float]:
    """Bisection over the multiples of GAIN_STEP up to `discordance` (acceptance is taken to be monotone in the gain)."""
    top = int(round(discordance / GAIN_STEP))
    if top < 1 or not accepts(discordance):
        return None
    low, high = 0, top  # accepts(high * GAIN_STEP); low = 0 stands for "no gain", never accepted
    while high - low > 1:
        mid = (low + high) // 2
        if accepts(mid * GAIN_STEP):
            high = mid
        else:
            low = mid
    return round(min(high * GAIN_STEP, discordance), 6)


def _smallest_budget(accepts_at, start: int, step: int, *, refine: bool) -> tuple[Optional[int], bool]:
    """(budget, exact): the smallest multiple of `step` above `start` (up to MAX_PAIRS_SEARCHED) for which
    `accepts_at(n)`, by doubling and then (`refine`) bisection; `exact` False when only the doubling was done (the
    budget is then an upper bound within a factor 2). Acceptance is taken to be monotone in the budget."""
    low, high = start, start
    while not accepts_at(high):
        low, high = high, high * 2
        if high > MAX_PAIRS_SEARCHED:
            return None, True
    if not refine:
        return high, high == start
    while high - low > step:
        mid = low + max(((high - low) // 2 // step) * step, step)
        if accepts_at(mid):
            high = mid
        else:
            low = mid
    return high, True


@dataclass(frozen=True)
class Sizing:
    """What a pair budget can accept. `what`: "gate" or "certificate"; `level`: the accept threshold on log E (the
    gate's first level) or the certificate's alpha; `can_accept` False when not even every pair a win is accepted
    within `max_pairs`; `smallest_gain` at `discordance` (None: no gain up to the discordance); `pairs_needed`: the
    budget that accepts `target_gain` at that discordance when `smallest_gain` misses it, or (`can_accept` False) the
    budget that accepts all wins; `pairs_exact` False when that budget is only bounded within a factor 2."""

    what: str
    rule: str
    level: float
    max_pairs: int
    discordance: float
    can_accept: bool
    smallest_gain: Optional[float]
    target_gain: float
    pairs_needed: Optional[int] = None
    pairs_exact: bool = True

    @property
    def reaches_target(self) -> bool:
        return self.smallest_gain is not None and self.smallest_gain <= self.target_gain + 1e-9


def _size(what: str, rule: str, level: float, max_pairs: int, block: int, accepts, accepts_with_budget, discordance: float,
          target_gain: float, refine: bool, suggest: bool) -> Sizing:
    can = accepts(1.0, 1.0)
    smallest = _smallest(lambda gain: accepts(gain, discordance), discordance) if can else None
    sizing = Sizing(what, rule, level, max_pairs, discordance, can, smallest, target_gain)
    if not can:
        need, exact = _smallest_budget(lambda n: accepts_with_budget(n, 1.0, 1.0), max_pairs, block, refine=refine)
    elif suggest and not sizing.reaches_target and target_gain <= discordance:
        need, exact = _smallest_budget(lambda n: accepts_with_budget(n, target_gain, discordance), max_pairs, block, refine=refine)
    else:
        return sizing
    return dataclasses.replace(sizing, pairs_needed=need, pairs_exact=exact)


@functools.lru_cache(maxsize=64)
def size_gate(params: GateParams, discordance: float = PESSIMISTIC_DISCORDANCE, target_gain: float = PLAUSIBLE_EDIT_GAIN,
              *, refine: bool = True, suggest: bool = True) -> Optional[Sizing]:
    """The gate's sizing at its first level (None for a rule that does not spend `gate.max_pairs`); `suggest` False
    skips the search for the budget a `target_gain` edit needs (the slow part for long budgets)."""
    sized = _sized(params)
    if sized is None:
        return None
    return _size("gate", params.rule, sized.lambda_accept, sized.max_pairs, sized.block_size,
                 lambda gain, d: gate_accepts(sized, gain, d),
                 lambda n, gain, d: gate_accepts(dataclasses.replace(sized, max_pairs=n), gain, d),
                 discordance, target_gain, refine, suggest)


@functools.lru_cache(maxsize=64)
def size_certificate(params: CertifyParams, discordance: float = PESSIMISTIC_DISCORDANCE,
                     target_gain: float = PLAUSIBLE_DELIVERY_GAIN, *, refine: bool = True, suggest: bool = True) -> Sizing:
    """The delivery certificate's sizing at `params.alpha`."""
    return _size("certificate", "certify", params.alpha, params.max_pairs, params.block_size,
                 lambda gain, d: certificate_accepts(params, gain, d),
                 lambda n, gain, d: certificate_accepts(dataclasses.replace(params, max_pairs=n), gain, d),
                 discordance, target_gain, refine, suggest)


def _gain_cell(gain: Optional[float], discordance: float) -> str:
    return f"+{100 * gain:.1f}" if gain is not None else f"none ≤ {100 * discordance:.0f}"


def sizing_table(rows: Sequence[tuple[str, GateParams | CertifyParams]], discordances: Sequence[float] = TABLE_DISCORDANCES) -> str:
    """The Markdown table of docs/own-run.md "Budget sizing": per setting, the smallest accepted gain (points) at each
    discordance and the pairs a plausible gain needs at the pessimistic one (module doc)."""
    head = " | ".join(f"{100 * d:.0f} % discordant" for d in discordances)
    lines = [f"| setting | rule, level | pairs | smallest gain accepted (points) at {head} | pairs for a plausible gain at "
             f"{100 * PESSIMISTIC_DISCORDANCE:.0f} % |",
             "|---|---|---|" + "---|" * len(discordances) + "---|"]
    for label, params in rows:
        sizes = [size_gate(params, d) if isinstance(params, GateParams) else size_certificate(params, d) for d in discordances]
        if any(s is None for s in sizes):
            raise ValueError(f"sizing_table: {label}: gate.rule={getattr(params, 'rule', '?')} is not sized")
        first = sizes[0]
        assert first is not None
        level = (f"{first.rule}, log E ≥ {first.level:.2f}" if first.what == "gate" else f"certificate, alpha {first.level:g}")
        worst = size_gate(params, PESSIMISTIC_DISCORDANCE) if isinstance(params, GateParams) else size_certificate(params)
        assert worst is not None
        if worst.reaches_target:
            need = f"{worst.max_pairs} suffice (+{100 * worst.target_gain:.0f})"
        elif worst.pairs_needed is None:
            need = f"more than {MAX_PAIRS_SEARCHED} (+{100 * worst.target_gain:.0f})"
        else:
            need = f"{worst.pairs_needed} (+{100 * worst.target_gain:.0f})"
        cells = " | ".join(_gain_cell(s.smallest_gain if s.can_accept else None, s.discordance) for s in sizes if s is not None)
        lines.append(f"| {label} | {level} | {first.max_pairs} | {cells} | {need} |")
    return "\n".join(lines)
