"""Acceptance rules of the gate: a small protocol with one implementation per `gate.rule`.

A rule sees the counts of the pairs observed so far (infra pairs already
removed by the caller) at a block boundary and returns an action. The
INFRA guard and the block barrier live in gate.py, around every rule.

- `betting` (ours, the default): the importance-weighted bounded betting
  e-process of `kernel/betting.py` on the pairs in their planned order; accept
  when it crosses exp(lambda_accept) at any pair, reject when the mirror bet
  against "gain >= reject_margin" crosses exp(-lambda_dir). Needs a plan that
  draws questions with known probabilities (`importance`, `random`): then it
  tests the pool's accuracy gain, for any population.
- `sequential`: accept when the sign e-process (`gate.accept_prior`: grid LR
  mixture by default, or the uniform Beta-mixture) reaches exp(lambda_accept)
  - at the block end, or, with `accept_within_block`, at any pair inside the
  block; reject when the direction log-LR falls to lambda_dir. Anytime-valid
  for the pairs it sees; on a ladder plan that is the ladder-weighted effect,
  the population's only under the strong null (docs/kernel.md).
- `accept_all`: accepts every candidate at its first look (ablation).
- `gepa`: GEPA's rule, one block: accept iff strictly more wins than losses.
- `minibatch`: GEPA's questions and known baseline with `gate.lambda` as the threshold: accept iff
  wins > losses and (wins - losses) / sqrt(wins + losses) >= sqrt(2 lambda) (lambda 0: GEPA's rule).
- `mcnemar`: fixed-n exact one-sided McNemar at `mcnemar_n` pairs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar, Optional, Protocol

from harness.kernel.registry import Registry, is_int_at_least, is_number, ordered_pair_problems, params_of
from harness.kernel.stats import ACCEPT_PRIORS, first_crossing, log_e_accept, log_e_accept_path, log_lr_direction, mcnemar_one_sided_p
from harness.kernel.types import GateAction, GateParams, PairResult


@dataclass(frozen=True)
class RuleDecision:
    """What a rule decided at one look: accept | reject | continue, or params.undecided when final.

    `log_e` / `log_dir`: the statistics to record when the rule has its own (None = the sign statistics
    gate.py computes); on an accept `log_e` is the value that triggered it (the first crossing)."""

    action: GateAction
    reason: str
    log_e: Optional[float] = None
    log_dir: Optional[float] = None


class AcceptanceRule(Protocol):
    """A gate rule: which questions it asks (`questions`) and how it decides over the pair path (`decide`).

    Traits the loop reads instead of comparing names:
    - `questions`: the question source of its plan (a key of `harness.loop.gating.QUESTION_SOURCES`):
      "sampling" (the `gate.plan` sampling plan), "step_minibatch" (the step's own questions, baseline
      from the step rollout), "selection_split" (a fixed held-out split), "random_fixed_n" (n random
      questions), "none" (no rollouts: decides at once);
    - `single_block`: the whole plan is one block (its size is the plan's);
    - `sequential`: an anytime-valid e-process rule (futility stop, pre-gate screen and the run-level
      FDR level apply to it);
    - `weighted`: it reads the importance weights of the plan's slots, so it needs a plan that draws its
      questions with known probabilities (`SamplingPlan.population_valid`); a plan that hands out weights
      (`SamplingPlan.weighted`) needs such a rule (config validation checks both).
    """

    @property
    def name(self) -> str: ...

    @property
    def questions(self) -> str: ...

    @property
    def single_block(self) -> bool: ...

    @property
    def sequential(self) -> bool: ...

    @property
    def weighted(self) -> bool: ...

    def decide(self, wins: int, losses: int, ties: int, params: GateParams, *, final: bool,
               pairs: Sequence[PairResult] = ()) -> RuleDecision:
        """Decide at a block boundary; `final` = no further block will come (ladder or budget exhausted).
        `pairs`: every pair so far in planned order, infra pairs included (the counts exclude them)."""
        ...


def _undecided(params: GateParams, why: str) -> RuleDecision:
    # the configured fallback for an inconclusive gate (probation or reject)
    return RuleDecision(params.undecided, f"undecided: {why}")  # type: ignore[arg-type]


@dataclass(frozen=True)
class SequentialParams:
    """The settings the sign e-process rule owns (gate.<field>; probation settlement reads the same accept prior)."""

    theta1: float = 0.625
    accept_prior: str = "grid"
    accept_prior_low: float = 0.60
    accept_prior_high: float = 0.90
    accept_prior_points: int = 7
    accept_within_block: bool = True  # accept at a block end when the e-process crossed at any pair inside it (Ville)

    def check(self) -> list[tuple[str, str]]:
        problems = [] if isinstance(self.accept_within_block, bool) else [("accept_within_block", "must be true or false")]
        if not (is_number(self.theta1) and 0.5 < self.theta1 < 1):
            problems.append(("theta1", "must be in (0.5, 1): the alternative P(win | discordant) of an improving edit"))
        if self.accept_prior not in ACCEPT_PRIORS:
            problems.append(("accept_prior", f"must be one of {', '.join(ACCEPT_PRIORS)}"))
        low, high = self.accept_prior_low, self.accept_prior_high
        problems += ordered_pair_problems(self, "accept_prior_low", "accept_prior_high", lambda v: 0.5 < v < 1, "must be in (0.5, 1)")
        if not is_int_at_least(self.accept_prior_points, 1):
            problems.append(("accept_prior_points", "must be an integer >= 1"))
        elif self.accept_prior == "grid" and self.accept_prior_points == 1 and low != high:
            problems.append(("accept_prior_points", f"a one-point grid needs gate.accept_prior_low == gate.accept_prior_high "
                                                    f"(got {low} and {high}); use >= 2 points, or set both to the one theta"))
        return problems


@dataclass(frozen=True)
class SequentialRule:
    name: str = "sequential"
    questions: str = "sampling"
    single_block: bool = False
    sequential: bool = True
    weighted: bool = False
    params_type: ClassVar[type] = SequentialParams

    def decide(
        self, wins: int, losses: int, ties: int, params: GateParams, *, final: bool, pairs: Sequence[PairResult] = ()
    ) -> RuleDecision:
        """With `accept_within_block` and `pairs`, accepts when the e-process crossed lambda at any pair so far
        (recorded log E: its value at that first crossing); else only at the block end."""
        own = params_of(SequentialParams, params)
        log_e = log_e_accept(wins, losses, own)
        log_lr = log_lr_direction(wins, losses, own.theta1)
        if own.accept_within_block and pairs:
            trigger = first_crossing(log_e_accept_path([pair.sign for pair in pairs], own), params.lambda_accept)
            if trigger is not None:
                return RuleDecision("accept", f"log E reached {trigger:.3f} >= lambda {params.lambda_accept} "
                                              f"({own.accept_prior} prior; {log_e:.3f} at the block end)", log_e=trigger)
        if log_e >= params.lambda_accept:
            return RuleDecision("accept", f"log E = {log_e:.3f} >= lambda {params.lambda_accept} ({own.accept_prior} prior)",
                                log_e=log_e)
        if log_lr <= params.lambda_dir:
            return RuleDecision("reject", f"direction log-LR = {log_lr:.3f} <= lambda_dir {params.lambda_dir}")
        if final:
            return _undecided(params, f"log E = {log_e:.3f}, log-LR = {log_lr:.3f} at the end of the ladder/budget")
        return RuleDecision("continue", "no boundary crossed")


@dataclass(frozen=True)
class AcceptAllRule:
    name: str = "accept_all"
    questions: str = "none"
    single_block: bool = False
    sequential: bool = False
    weighted: bool = False

    def decide(self, wins: int, losses: int, ties: int, params: GateParams, *, final: bool,
               pairs: Sequence[PairResult] = ()) -> RuleDecision:
        return RuleDecision("accept", "accept_all rule")


@dataclass(frozen=True)
class GepaRule:
    """One minibatch: accept iff strictly more wins than losses; always decides at its first look."""

    name: str = "gepa"
    questions: str = "step_minibatch"
    single_block: bool = True
    sequential: bool = False
    weighted: bool = False

    def decide(self, wins: int, losses: int, ties: int, params: GateParams, *, final: bool,
               pairs: Sequence[PairResult] = ()) -> RuleDecision:
        if wins > losses:
            return RuleDecision("accept", f"gepa: wins {wins} > losses {losses}")
        return RuleDecision("reject", f"gepa: wins {wins} <= losses {losses}")


@dataclass(frozen=True)
class MinibatchRule:
    """GEPA's question plan with `gate.lambda` as its threshold: one block of the step's minibatch questions of the
    skill, the step rollout as the baseline arm (only the candidate is asked), accept iff wins > losses and
    (wins - losses) / sqrt(wins + losses) >= sqrt(2 lambda), the z of the discordant pairs' sign test at the
    betting gate's budget threshold. lambda 0 is GEPA's rule; a larger lambda installs fewer, surer edits. A cheap
    decision, not a guarantee (the in-sample minibatch the editor read): the certificate guards what is delivered."""

    name: str = "minibatch"
    questions: str = "step_minibatch"
    single_block: bool = True
    sequential: bool = False
    weighted: bool = False

    def decide(self, wins: int, losses: int, ties: int, params: GateParams, *, final: bool,
               pairs: Sequence[PairResult] = ()) -> RuleDecision:
        d, n = wins - losses, wins + losses
        need = math.sqrt(2.0 * params.lambda_accept * n)
        if d > 0 and d >= need:
            return RuleDecision("accept", f"minibatch: wins {wins} - losses {losses} = {d} >= sqrt(2 x lambda {params.lambda_accept:g} x {n}) = {need:.2f}")
        return RuleDecision("reject", f"minibatch: wins {wins} - losses {losses} = {d} < max(1, sqrt(2 x lambda {params.lambda_accept:g} x {n}) = {need:.2f})")


@dataclass(frozen=True)
class McNemarParams:
    """The settings the fixed-n McNemar rule owns (gate.<field>)."""

    mcnemar_n: int = 100
    mcnemar_alpha: float = 0.05

    def check(self) -> list[tuple[str, str]]:
        problems = [] if is_int_at_least(self.mcnemar_n, 1) else [("mcnemar_n", "must be an integer >= 1")]
        if not (is_number(self.mcnemar_alpha) and 0 < self.mcnemar_alpha < 1):
            problems.append(("mcnemar_alpha", "must be in (0, 1)"))
        return problems


@dataclass(frozen=True)
class BettingParams:
    """The settings the betting rules (betting, betting_budget) own (gate.<field>)."""

    reject_margin: float = 0.03
    bet_low: float = 0.125
    bet_high: float = 0.5
    bet_points: int = 3

    def check(self) -> list[tuple[str, str]]:
        problems = []
        if not (is_number(self.reject_margin) and 0 < self.reject_margin < 1):
            problems.append(("reject_margin", "must be in (0, 1): the gain the reject side tests against"))
        problems += ordered_pair_problems(self, "bet_low", "bet_high", lambda v: 0 < v < 1, "must be in (0, 1)")
        if not is_int_at_least(self.bet_points, 1):
            problems.append(("bet_points", "must be an integer >= 1"))
        return problems


@dataclass(frozen=True)
class McNemarFixedRule:
    """Exact one-sided McNemar evaluated once, when `mcnemar_n` pairs (non-infra) are in."""

    name: str = "mcnemar"
    questions: str = "sampling"
    single_block: bool = False
    sequential: bool = False
    weighted: bool = False
    params_type: ClassVar[type] = McNemarParams

    def decide(self, wins: int, losses: int, ties: int, params: GateParams, *, final: bool,
               pairs: Sequence[PairResult] = ()) -> RuleDecision:
        n = wins + losses + ties
        own = params_of(McNemarParams, params)
        if n < own.mcnemar_n:
            if final:
                return _undecided(params, f"only {n} of mcnemar_n={own.mcnemar_n} pairs")
            return RuleDecision("continue", f"{n} of {own.mcnemar_n} pairs")
        p = mcnemar_one_sided_p(wins, losses)
        if p <= own.mcnemar_alpha:
            return RuleDecision("accept", f"McNemar p = {p:.4g} <= {own.mcnemar_alpha}")
        return RuleDecision("reject", f"McNemar p = {p:.4g} > {own.mcnemar_alpha}")


@dataclass(frozen=True)
class BettingRule:
    """The importance-weighted bounded betting e-process (kernel/betting.py) over the pair path."""

    name: str = "betting"
    questions: str = "sampling"
    single_block: bool = False
    sequential: bool = True
    weighted: bool = True
    params_type: ClassVar[type] = BettingParams

    def decide(self, wins: int, losses: int, ties: int, params: GateParams, *, final: bool,
               pairs: Sequence[PairResult] = ()) -> RuleDecision:
        """Accept / reject / continue from `betting_decision` on every pair so far (infra imputed against the
        candidate); recorded log_dir = minus the reject e-process, so <= lambda_dir means rejected."""
        from harness.kernel.betting import betting_decision

        if not pairs:
            raise ValueError("betting rule: needs the pairs in planned order (their importance weights), not counts only")
        d = betting_decision(pairs, params, final=final)
        return RuleDecision(d.action, d.reason, log_e=d.log_e, log_dir=d.log_dir)  # type: ignore[arg-type]


RULES: Registry[AcceptanceRule] = Registry("gate.rule", {
    "betting": BettingRule(),
    "sequential": SequentialRule(),
    "accept_all": AcceptAllRule(),
    "gepa": GepaRule(),
    "minibatch": MinibatchRule(),
    "mcnemar": McNemarFixedRule(),
    "skillopt": "harness.kernel.rule_skillopt:RULE",
    "cap_evolve": "harness.kernel.rule_cap_evolve:RULE",
    "betting_budget": "harness.kernel.rule_betting_budget:RULE",
})


def rule_for(params: GateParams) -> AcceptanceRule:
    """The rule named by `params.rule` (config key `gate.rule`); UnknownStrategyError lists the valid names."""
    return RULES.get(params.rule)
