"""Acceptance rules of the gate: a small protocol with one implementation per `gate.rule`.

A rule sees the counts of the pairs observed so far (infra pairs already
removed by the caller) at a block boundary and returns an action. The
INFRA guard and the block barrier live in gate.py, around every rule.

- `sequential` (ours): accept when the accept e-process (`gate.accept_prior`:
  grid LR mixture by default, or the uniform Beta-mixture) reaches
  exp(lambda_accept) - at the block end, or, with `accept_within_block`, at
  any pair inside the block (`peak_log_e`, computed by gate.py); reject when
  the direction log-LR falls to lambda_dir. Anytime-valid.
- `accept_all`: accepts every candidate at its first look (ablation).
- `gepa`: GEPA's rule, one block: accept iff strictly more wins than losses.
- `mcnemar`: fixed-n exact one-sided McNemar at `mcnemar_n` pairs.
- `McNemarRecheckedRule`: the same test re-checked after every block. It is
  NOT valid (optional stopping inflates false accepts) and is not selectable
  by config; the gate benchmark uses it as the negative control.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from harness.kernel.registry import Registry
from harness.kernel.stats import log_e_accept, log_lr_direction, mcnemar_one_sided_p
from harness.kernel.types import GateAction, GateParams


@dataclass(frozen=True)
class RuleDecision:
    """What a rule decided at one look: accept | reject | continue, or params.undecided when final."""

    action: GateAction
    reason: str


class AcceptanceRule(Protocol):
    """A gate rule: which questions it asks (`questions`) and how it decides over the pair path (`decide`).

    Traits the loop reads instead of comparing names:
    - `questions`: the question source of its plan (a key of `harness.loop.gating.QUESTION_SOURCES`):
      "sampling" (the `gate.ladder` sampling plan), "step_minibatch" (the step's own questions, baseline
      from the step rollout), "selection_split" (a fixed held-out split), "random_fixed_n" (n random
      questions), "none" (no rollouts: decides at once);
    - `single_block`: the whole plan is one block (its size is the plan's);
    - `sequential`: an anytime-valid e-process rule (within-block peak accept, futility stop, pre-gate
      screen and the run-level FDR level apply to it).
    """

    @property
    def name(self) -> str: ...

    @property
    def questions(self) -> str: ...

    @property
    def single_block(self) -> bool: ...

    @property
    def sequential(self) -> bool: ...

    def decide(self, wins: int, losses: int, ties: int, params: GateParams, *, final: bool,
               peak_log_e: float | None = None) -> RuleDecision:
        """Decide at a block boundary; `final` = no further block will come (ladder or budget exhausted).
        `peak_log_e`: running max of the accept e-process over the pair path (sequential rules only)."""
        ...


def _undecided(params: GateParams, why: str) -> RuleDecision:
    # the configured fallback for an inconclusive gate (probation or reject)
    return RuleDecision(params.undecided, f"undecided: {why}")  # type: ignore[arg-type]


@dataclass(frozen=True)
class SequentialRule:
    name: str = "sequential"
    questions: str = "sampling"
    single_block: bool = False
    sequential: bool = True

    def decide(
        self, wins: int, losses: int, ties: int, params: GateParams, *, final: bool, peak_log_e: float | None = None
    ) -> RuleDecision:
        """`peak_log_e`: running max of log E over the pair-level path so far (None = block-end look only)."""
        log_e = log_e_accept(wins, losses, params)
        log_lr = log_lr_direction(wins, losses, params.theta1)
        if log_e >= params.lambda_accept:
            return RuleDecision("accept", f"log E = {log_e:.3f} >= lambda {params.lambda_accept} ({params.accept_prior} prior)")
        if peak_log_e is not None and peak_log_e >= params.lambda_accept:
            return RuleDecision(
                "accept", f"log E peaked at {peak_log_e:.3f} >= lambda {params.lambda_accept} inside the block ({params.accept_prior} prior)"
            )
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

    def decide(self, wins: int, losses: int, ties: int, params: GateParams, *, final: bool,
               peak_log_e: float | None = None) -> RuleDecision:
        return RuleDecision("accept", "accept_all rule")


@dataclass(frozen=True)
class GepaRule:
    """One minibatch: accept iff strictly more wins than losses; always decides at its first look."""

    name: str = "gepa"
    questions: str = "step_minibatch"
    single_block: bool = True
    sequential: bool = False

    def decide(self, wins: int, losses: int, ties: int, params: GateParams, *, final: bool,
               peak_log_e: float | None = None) -> RuleDecision:
        if wins > losses:
            return RuleDecision("accept", f"gepa: wins {wins} > losses {losses}")
        return RuleDecision("reject", f"gepa: wins {wins} <= losses {losses}")


@dataclass(frozen=True)
class McNemarFixedRule:
    """Exact one-sided McNemar evaluated once, when `mcnemar_n` pairs (non-infra) are in."""

    name: str = "mcnemar"
    questions: str = "sampling"
    single_block: bool = False
    sequential: bool = False

    def decide(self, wins: int, losses: int, ties: int, params: GateParams, *, final: bool,
               peak_log_e: float | None = None) -> RuleDecision:
        n = wins + losses + ties
        if n < params.mcnemar_n:
            if final:
                return _undecided(params, f"only {n} of mcnemar_n={params.mcnemar_n} pairs")
            return RuleDecision("continue", f"{n} of {params.mcnemar_n} pairs")
        p = mcnemar_one_sided_p(wins, losses)
        if p <= params.mcnemar_alpha:
            return RuleDecision("accept", f"McNemar p = {p:.4g} <= {params.mcnemar_alpha}")
        return RuleDecision("reject", f"McNemar p = {p:.4g} > {params.mcnemar_alpha}")


@dataclass(frozen=True)
class McNemarRecheckedRule:
    """NEGATIVE CONTROL ONLY: McNemar re-tested after every block (invalid under optional stopping)."""

    name: str = "mcnemar_rechecked"
    questions: str = "sampling"
    single_block: bool = False
    sequential: bool = False

    def decide(self, wins: int, losses: int, ties: int, params: GateParams, *, final: bool,
               peak_log_e: float | None = None) -> RuleDecision:
        p = mcnemar_one_sided_p(wins, losses)
        if p <= params.mcnemar_alpha:
            return RuleDecision("accept", f"re-checked McNemar p = {p:.4g}")
        if final:
            return RuleDecision("reject", "re-checked McNemar never significant")
        return RuleDecision("continue", f"p = {p:.4g}")


RULES: Registry[AcceptanceRule] = Registry("gate.rule", {
    "sequential": SequentialRule(),
    "accept_all": AcceptAllRule(),
    "gepa": GepaRule(),
    "mcnemar": McNemarFixedRule(),
    "skillopt": "harness.kernel.rule_skillopt:RULE",
    "cap_evolve": "harness.kernel.rule_cap_evolve:RULE",
})


def rule_for(params: GateParams) -> AcceptanceRule:
    """The rule named by `params.rule` (config key `gate.rule`); UnknownStrategyError lists the valid names."""
    return RULES.get(params.rule)
