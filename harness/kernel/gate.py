"""Block-sequential gate decision over paired outcomes (seed 000 §11, DESIGN §5).

The loop runs one block at a time (baseline completed -> candidate run ->
INFRA guard -> `pair_block` -> `gate_decision`) and stops at the first
verdict other than "continue". The decision only ever sees whole blocks
(block barrier); the decision on the last block is final.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Optional, Protocol

from harness.kernel.registry import params_of
from harness.kernel.rules import SequentialParams, rule_for
from harness.kernel.stats import (  # noqa: F401  (re-exported)
    log_e_accept,
    log_e_accept_peak,
    log_e_beta_mixture,
    log_e_grid_mixture,
    log_lr_direction,
    mcnemar_one_sided_p,
)
from harness.kernel.types import (
    BlockItem,
    GateParams,
    GateVerdict,
    PairResult,
)

__all__ = [
    "LeakError",
    "PairCounts",
    "count_pairs",
    "gate_decision",
    "infra_guard",
    "infra_ratio_exceeded",
    "log_e_accept",
    "log_e_accept_peak",
    "log_e_beta_mixture",
    "log_e_grid_mixture",
    "log_lr_direction",
    "pair_block",
]


class LeakError(ValueError):
    """A gate pair would reuse a sample that informed the question's place on the ladder."""


@dataclass(frozen=True)
class PairCounts:
    wins: int
    losses: int
    ties: int
    infra: int

    @property
    def n_pairs(self) -> int:
        return self.wins + self.losses + self.ties + self.infra


def count_pairs(pairs: Sequence[PairResult]) -> PairCounts:
    wins = losses = ties = infra = 0
    for pair in pairs:
        if pair.infra:
            infra += 1
        elif pair.sign > 0:
            wins += 1
        elif pair.sign < 0:
            losses += 1
        else:
            ties += 1
    return PairCounts(wins, losses, ties, infra)


def pair_block(
    block: Sequence[BlockItem],
    baseline: Sequence[Optional[bool]],
    candidate: Sequence[Optional[bool]],
    *,
    informing_samples: Mapping[str, Collection[int]] | None = None,
    baseline_values: Sequence[Optional[float]] | None = None,
    candidate_values: Sequence[Optional[float]] | None = None,
    baseline_soft: Sequence[Optional[float]] | None = None,
    candidate_soft: Sequence[Optional[float]] | None = None,
) -> list[PairResult]:
    """Pair the baseline and candidate outcomes of one block, position by position.

    `baseline[i]` / `candidate[i]` are the outcomes of `block[i]` (same qid,
    same sample index; None = infrastructure failure). `baseline_values` /
    `candidate_values` (optional, soft gates): the metric's value in [0, 1] of
    which the outcome is the rounding, None where the outcome is its own value;
    a value needs an outcome (ValueError otherwise). `baseline_soft` /
    `candidate_soft` (optional): each arm's soft score in [0, 1] where its
    rollout has one, under the same check. `informing_samples`
    (qid -> sample indices that fed the ladder's p_hat, from
    `GatePools.informing_samples`) enforces no-leak rule 2: a pair may never
    use a sample that placed its question on the ladder -> LeakError.
    """
    if len(baseline) != len(block) or len(candidate) != len(block):
        raise ValueError(
            f"pair_block: block has {len(block)} items but baseline has {len(baseline)} "
            f"and candidate has {len(candidate)} outcomes"
        )
    n = len(block)
    def column(values: Sequence[Optional[float]] | None, what: str) -> list[Optional[float]]:
        out: list[Optional[float]] = [None] * n if values is None else list(values)
        if len(out) != n:
            raise ValueError(f"pair_block: block has {n} items but {len(out)} {what}")
        return out

    n = len(block)
    base_values, cand_values = column(baseline_values, "baseline values"), column(candidate_values, "candidate values")
    base_soft, cand_soft = column(baseline_soft, "baseline soft scores"), column(candidate_soft, "candidate soft scores")
    pairs: list[PairResult] = []
    for item, base, cand, base_value, cand_value, b_soft, c_soft in zip(block, baseline, candidate, base_values, cand_values,
                                                                         base_soft, cand_soft):
        for name, value, extras in (("baseline", base, (("value", base_value), ("soft score", b_soft))),
                                    ("candidate", cand, (("value", cand_value), ("soft score", c_soft)))):
            if value is not None and not isinstance(value, bool):
                raise ValueError(f"pair_block: {name} outcome of {item.qid!r} must be bool or None, got {value!r}")
            for label, metric in extras:
                if metric is not None and (value is None or isinstance(metric, bool) or not isinstance(metric, float)
                                           or not 0.0 <= metric <= 1.0):
                    raise ValueError(f"pair_block: {name} {label} of {item.qid!r} must be a float in [0, 1] next to an outcome, "
                                     f"got {metric!r} (outcome {value!r})")
        if informing_samples is not None and item.sample_index in informing_samples.get(item.qid, ()):
            raise LeakError(
                f"pair_block: sample {item.sample_index} of {item.qid!r} informed the ladder's p_hat; "
                "a gate pair needs a fresh sample (no-leak rule 2)"
            )
        pairs.append(PairResult(item.qid, base, cand, sample_index=item.sample_index, anchor=item.anchor, weight=item.weight,
                                    weight_bound=item.weight_bound, baseline_value=base_value, candidate_value=cand_value,
                                    baseline_soft=b_soft, candidate_soft=c_soft))
    return pairs


class InfraRule(Protocol):
    """The two GateParams fields the INFRA rule reads (GateParams, or loop/context.InfraLimits)."""

    @property
    def infra_max_ratio(self) -> float: ...

    @property
    def infra_min_denominator(self) -> int: ...


def infra_ratio_exceeded(n_infra: int, n_total: int, params: InfraRule) -> bool:
    """The one INFRA rule (gate.infra_max_ratio / infra_min_denominator): judged once `n_total` reached the
    minimum denominator, true when the infrastructure-failure share exceeds the maximum ratio."""
    return n_total >= params.infra_min_denominator and n_total > 0 and n_infra / n_total > params.infra_max_ratio


def infra_guard(pairs: Sequence[PairResult], params: GateParams) -> Optional[str]:
    """INFRA guard, counted across all blocks so far: a reason string when the gate must abort.

    Judged only once at least `infra_min_denominator` pairs were seen (a
    single early failure must not abort); trips when the share of pairs with
    an infrastructure failure on either side exceeds `infra_max_ratio`.
    """
    denominator = len(pairs)
    failures = sum(1 for pair in pairs if pair.infra)
    if infra_ratio_exceeded(failures, denominator, params):
        return (
            f"INFRA: {failures}/{denominator} pairs had an infrastructure failure "
            f"(> infra_max_ratio {params.infra_max_ratio})"
        )
    return None


def gate_decision(pairs_so_far: Sequence[PairResult], params: GateParams, *, final: bool) -> GateVerdict:
    """The gate's verdict after a whole number of blocks.

    Block barrier: unless `final`, `len(pairs_so_far)` must be a positive
    multiple of `params.block_size` (ValueError otherwise). Reaching
    `params.max_pairs` makes the look final. Order: INFRA guard ("infra"),
    then the rule of `params.rule`; an undecided final look gives
    `params.undecided` ("probation" or "reject"). Infra pairs carry no
    evidence and are excluded from wins/losses/ties (the rule also sees every
    pair, in planned order: the betting rule imputes infra against the
    candidate). `GateVerdict.log_e` / `log_lr_dir` are the rule's statistics
    when it has its own (betting), else the sign e-process (`gate.accept_prior`)
    and the direction log-LR at the last pair; on an accept `log_e` is the value
    that triggered it (the first crossing of lambda), never a later one.
    """
    n = len(pairs_so_far)
    if params.undecided not in ("probation", "reject"):
        raise ValueError(f"gate.undecided must be 'probation' or 'reject', got {params.undecided!r}")
    if not final and (n == 0 or n % params.block_size != 0):
        raise ValueError(
            f"gate_decision: block barrier violated: {n} pairs is not a whole number of "
            f"blocks of {params.block_size} (pass final=True only for the last, possibly short, block)"
        )
    final = final or n >= params.max_pairs
    counts = count_pairs(pairs_so_far)
    sign_params = params_of(SequentialParams, params)  # the sign statistics recorded for every rule
    log_e = log_e_accept(counts.wins, counts.losses, sign_params)
    log_lr = log_lr_direction(counts.wins, counts.losses, sign_params.theta1)

    def verdict(action: str, reason: str) -> GateVerdict:
        return GateVerdict(
            action=action,  # type: ignore[arg-type]
            log_e=log_e,
            log_lr_dir=log_lr,
            wins=counts.wins,
            losses=counts.losses,
            ties=counts.ties,
            n_pairs=n,
            reason=reason,
            infra_failures=counts.infra,
        )

    infra_reason = infra_guard(pairs_so_far, params)
    if infra_reason is not None:
        return verdict("infra", infra_reason)
    rule = rule_for(params)
    decision = rule.decide(counts.wins, counts.losses, counts.ties, params, final=final, pairs=pairs_so_far)
    if decision.log_e is not None:  # the rule's own statistic; on an accept the value that triggered it
        log_e = decision.log_e
    if decision.log_dir is not None:
        log_lr = decision.log_dir
    return verdict(decision.action, decision.reason)
