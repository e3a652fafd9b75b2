"""`gate.rule=betting_budget`: the betting gate as a cheap per-edit decision (issue 26 item 1).

The job of this rule is accuracy per rollout, not a guarantee: what the run
delivers is certified once, against the starting harness, by the `certify`
stage. It runs the same block-sequential importance-weighted betting gate as
`betting` (kernel/betting.py, the same pairs, plan and e-processes) with a
small pair budget (`gate.max_pairs`), and decides:

1. accept as soon as the accept e-process crosses exp(`gate.lambda`) at any
   pair (the swept threshold: a low lambda accepts on a few early wins, a
   high one leaves the decision to step 3);
2. reject as soon as the reject e-process (H0': gain >= `reject_margin`)
   crosses exp(-`gate.lambda_dir`);
3. at the budget (or the plan's end) accept iff the z-score of the
   importance-weighted gain estimate, sum(Z) / (sd sqrt(n)), is >= sqrt(2
   lambda): the fixed-sample log-likelihood ratio of a Gaussian estimate,
   z^2 / 2, reaches the same lambda (and the estimate is > 0). So lambda is
   the evidence an accept needs at every look: early, anytime-valid, on the
   betting e-process; at the budget, on the estimate. A low lambda accepts
   on little evidence (0.5: two early wins, or z >= 1 at the budget), a
   high one rarely;
4. between looks, once `futility_min_n` pairs are in, decide now when the
   pairs left can hardly change step 3's decision: the final sum must reach
   T = sqrt(2 lambda) sd sqrt(max_pairs), and |sum Z - T| >= `futility_z` sd
   sqrt(pairs left), i.e. even if the remaining pairs had mean 0 and the
   spread seen so far, step 3 would decide otherwise with probability below
   ~5 % (z = 1.645). Pairs are spent only while they can change the decision.

`gate.futility` is not read (step 4 replaces it: a futility rule assumes that
an undecided gate is rejected). Under `gate.fdr=elond` (strict mode) this rule
is exactly `betting`: e-LOND's false-discovery bound needs every install to
be an e-process crossing, so steps 3 and 4 are off.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from harness.kernel.fdr import FDR_PROCEDURES
from harness.kernel.futility import EstimateParams
from harness.kernel.registry import params_of
from harness.kernel.rules import BettingParams, RuleDecision
from harness.kernel.types import GateParams, PairResult

__all__ = ["BettingBudgetRule", "RULE", "budget_accepts", "settled", "spread"]


def spread(z: Sequence[float], bound: float) -> float:
    """The sd of the weighted differences, from the pairs plus one pseudo pair at +-`bound` (a gate whose pairs all
    tied is not taken as certain)."""
    arr = np.asarray(z, dtype=float)
    var = (float(np.sum(arr**2)) + bound**2) / (arr.size + 1) - (float(np.sum(arr)) / (arr.size + 1)) ** 2
    return math.sqrt(max(var, 0.0))


def settled(z: Sequence[float], left: int, z_score: float, bound: float, target: float = 0.0) -> bool:
    """True when |sum z - target| >= z_score * sd * sqrt(left): the `left` pairs still to come, at mean 0 and the spread
    seen so far, would carry the sum across `target` with probability below Phi(-z_score)."""
    if left <= 0:
        return True
    return abs(float(np.sum(np.asarray(z, dtype=float))) - target) >= z_score * spread(z, bound) * math.sqrt(left)


def budget_accepts(z: Sequence[float], lambda_accept: float, bound: float) -> tuple[bool, float]:
    """(accept, z-score) of step 3: sum(z) / (sd sqrt(n)) >= sqrt(2 lambda) and sum(z) > 0."""
    total = float(np.sum(np.asarray(z, dtype=float)))
    score = total / (spread(z, bound) * math.sqrt(len(z)))
    return total > 0 and score >= math.sqrt(2.0 * max(lambda_accept, 0.0)), score


class BettingBudgetRule:
    """AcceptanceRule (harness.kernel.rules): the betting e-process with an early accept at gate.lambda and, at the pair
    budget, an accept when the gain estimate's z-score reaches sqrt(2 gate.lambda) (module doc)."""

    name = "betting_budget"
    questions = "sampling"
    single_block = False
    sequential = True
    weighted = True
    params_type = BettingParams

    def decide(self, wins: int, losses: int, ties: int, params: GateParams, *, final: bool,
               pairs: Sequence[PairResult] = ()) -> RuleDecision:
        from harness.kernel.betting import betting_decision, betting_look

        if not pairs:
            raise ValueError("betting_budget rule: needs the pairs in planned order (their importance weights), not counts only")
        if FDR_PROCEDURES[params.fdr].run_level:  # strict mode: only e-process crossings may install (module doc)
            d = betting_decision(pairs, params, final=final)
            return RuleDecision(d.action, d.reason, log_e=d.log_e, log_dir=d.log_dir)  # type: ignore[arg-type]
        look = betting_look(pairs, params)
        if look.accept_crossed:
            return RuleDecision("accept", f"betting_budget: log E reached {look.log_e_trigger:.3f} >= lambda {params.lambda_accept} "
                                          f"(weighted mean gain {look.mean_difference:+.4f})", log_e=look.log_e_trigger,
                                log_dir=-look.log_e_reject)
        if look.reject_crossed:
            return RuleDecision("reject", f"betting_budget: the e-process for gain >= {params_of(BettingParams, params).reject_margin} reached log "
                                          f"{look.reject_peak:.3f} >= {-params.lambda_dir} (weighted mean gain "
                                          f"{look.mean_difference:+.4f})", log_e=look.log_e, log_dir=-look.reject_peak)
        left = max(params.max_pairs - len(pairs), 0)
        futility = params_of(EstimateParams, params)  # the settled-decision stop reads the estimate futility's z and min n
        need = math.sqrt(2.0 * max(params.lambda_accept, 0.0))
        if final or left == 0:
            why = f"at the end of the budget ({len(pairs)} pairs)"
        elif len(pairs) >= futility.futility_min_n and settled(look.z, left, futility.futility_z, look.bound,
                                                             need * spread(look.z, look.bound) * math.sqrt(params.max_pairs)):
            flip = 0.5 * math.erfc(futility.futility_z / math.sqrt(2.0))
            why = f"settled after {len(pairs)} pairs: the {left} pairs left would change the decision with probability < {flip:.3f}"
        else:
            return RuleDecision("continue", "no boundary crossed", log_e=look.log_e, log_dir=-look.log_e_reject)
        accept, score = budget_accepts(look.z, params.lambda_accept, look.bound)
        action = "accept" if accept else "reject"
        return RuleDecision(action, f"betting_budget: {why}; weighted mean gain {look.mean_difference:+.4f}, z = {score:.2f} "  # type: ignore[arg-type]
                                    f"{'>=' if accept else '<'} sqrt(2 lambda) = {need:.2f}", log_e=look.log_e, log_dir=-look.log_e_reject)


RULE = BettingBudgetRule()  # registered in harness.kernel.rules.RULES
