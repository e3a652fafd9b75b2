"""Block-sequential validation of one candidate skill (seed 000 §11).

`validate_skill_local` is the only sub-orchestrator of the loop. For one
candidate skill file it:

1. materialises the candidate tree in a uniquely named temp dir under the
   workspace (`.cand_tmp/`), removed in `finally`; the solver reads the tree
   loaded back from that directory;
2. cuts the question plan into blocks of `block_size`;
3. per block, strictly in order (the block barrier): the baseline on the
   block (GEPA's known baseline aside) → the candidate on the whole
   block → pairing → the INFRA guard over all blocks so far and the gate
   rule's decision on every pair so far (kernel `gate_decision`);
4. the decision of the last block is terminal (no decision outside the loop).

Anti-leak: the gate run prefix must contain `_gate_` (checked at entry) so
the ladder never absorbs these rollouts; every rollout draws a fresh sample
index from a per-gate counter starting far above the step/slow indices, so a
pair never reuses the sample that placed its question on the ladder, and a
re-asked question gets a fresh sample. Every baseline outcome of a gate is a
fresh sample (GEPA's known baseline aside): an earlier gate's outcomes were
looked at by its stopping rule (issue 29 removed `gate.baseline_reuse` and
its cache: its `unaccepted` mode let false accepts rise to ~1.8x alpha after
a gate that ended undecided, and ~8x alpha with a newly created skill file;
`gates` was already invalid after a rollback, fdr.md section 2).

Soft gates (`gate.metric` soft / mixed): the rollout reports the metric's value v in [0, 1]. Wherever the gate needs
an outcome in {0, 1} (the pairs' outcomes, the planners, the evidence rows, the candidate's correctness) v is
rounded with the seeded uniform of (qid, sample index), the same for both arms of a pair; a weighted rule (the
betting e-process) also gets v itself on the pair and bets on v_C - v_B, which has the same mean with less
variance (reports/benchmarks/soft_gate.md).

Only the rows of the terminal block carry a stop reason in the evidence.
"""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Callable, Collection, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from harness.bench.soft import round_gate_value
from harness.identity import GATE_MARK
from harness.kernel.engine import run_gate
from harness.kernel.gate import InfraRule, gate_decision, infra_ratio_exceeded, pair_block
from harness.kernel.plans import BlockPlanner
from harness.kernel.rules import rule_for
from harness.kernel.types import BlockItem, GateParams, GateVerdict, PairResult
from harness.questions import Question
from harness.tree import HarnessTree

# (tree, [(question, sample_index)], run_id) -> correct per request (None = infra failure); an async def, so
# synchronous callers can asyncio.run it
RolloutFn = Callable[[HarnessTree, Sequence[tuple[Question, int]], str], Coroutine[Any, Any, list[Optional[bool]]]]


@dataclass(frozen=True)
class GateSample:
    """One gate rollout: `value` = gate.metric's value (the hard outcome, a bool, for `hard`; a float in [0, 1] for
    soft / mixed) and `soft` = the rollout's soft score when it has one (a futility rule may read it)."""

    value: bool | float
    soft: Optional[float] = None


# per request of a gate rollout: a GateSample, or its value alone (bool or float); None = infra failure
GateValue = bool | float | GateSample
# the gate's: per request the value of gate.metric (rollouts.gate_rollout_fn); None = infra failure
GateRolloutFn = Callable[[HarnessTree, Sequence[tuple[Question, int]], str], Coroutine[Any, Any, Sequence[Optional[GateValue]]]]


def _value(v: Optional[GateValue]) -> Optional[float]:
    return v.value if isinstance(v, GateSample) else v


def gate_outcomes(values: Sequence[Optional[GateValue]], requests: Sequence[tuple[str, int]]) -> list[Optional[bool]]:
    """The gate values of `requests` ((qid, sample index) each) as outcomes in {0, 1}: a bool is itself, a float is
    rounded at random with the seeded uniform of its qid and sample index (bench/soft.round_gate_value, the same
    uniform for both arms of a pair); None stays None."""
    out: list[Optional[bool]] = []
    for v, (q, i) in zip(values, requests, strict=True):
        value = _value(v)
        out.append(None if value is None else round_gate_value(value, qid=q, sample_index=i))
    return out


def soft_values(values: Sequence[Optional[GateValue]]) -> list[Optional[float]]:
    """The float (soft / mixed) values as they are; None for a hard outcome (a bool: the outcome is the value) and
    for an infra failure."""
    return [value if isinstance(value := _value(v), float) else None for v in values]  # a bool is not a float


def soft_scores(values: Sequence[Optional[GateValue]]) -> list[Optional[float]]:
    """The rollouts' soft scores where known (GateSample.soft), else None."""
    return [v.soft if isinstance(v, GateSample) else None for v in values]


class InfraFailureError(RuntimeError):
    """Too many infrastructure failures: the outcome would not be evidence about the harness."""


@dataclass
class ValidationOutcome:
    action: str  # accept | reject | probation
    verdict: GateVerdict
    gate_run_id: str
    pairs: list[PairResult] = field(default_factory=list)
    candidate_correctness: dict[str, bool] = field(default_factory=dict)  # observed questions only
    evidence: list[dict] = field(default_factory=list)
    rollouts: int = 0  # rollouts actually run (baseline misses + candidate)
    known_baseline_hits: int = 0  # baseline slots served by GEPA's known baseline (no rollout)
    blocks: int = 0


def scored_share_too_low(n_infra: int, n_total: int, params: InfraRule) -> bool:
    """The scored-share rule of a stage's rollouts (docs/faults.md): nothing scored out of at least one rollout; or
    the infrastructure-failure share above `gate.infra_max_ratio`, counted over at least `gate.infra_min_denominator`
    rollouts (fewer count as that many: a small batch is judged, and a lone failure in it does not trip). From
    `infra_min_denominator` rollouts on it is the gate's INFRA rule (kernel.gate.infra_ratio_exceeded)."""
    if n_total <= 0:
        return False
    if n_infra >= n_total:
        return True
    return infra_ratio_exceeded(n_infra, max(n_total, int(params.infra_min_denominator)), params)


def scored_share_message(n_infra: int, n_total: int, params: InfraRule, where: str) -> str:
    """One line: which stage, how many rollouts were scored, the threshold, and what to do."""
    return (f"{where}: only {n_total - n_infra} of {n_total} rollouts were scored ({n_infra} failed for infrastructure "
            f"reasons: no answer, a refused key or an unreadable reply; see the warnings above), below the scored share "
            f"{1 - float(params.infra_max_ratio):.2f} (1 - gate.infra_max_ratio); the stage is stopped and no accuracy "
            "is reported: fix the model server and re-run")


def guard_infra_failures(n_infra: int, n_total: int, params: InfraRule, where: str) -> None:
    """Raise InfraFailureError when the scored-share rule (`scored_share_too_low`) trips on these rollouts."""
    if scored_share_too_low(n_infra, n_total, params):
        raise InfraFailureError(scored_share_message(n_infra, n_total, params, where))


class ScoredShareGuard:
    """Counts a stage's rollouts and stops the stage (InfraFailureError) when its scored share falls below the rule
    of `scored_share_too_low`, counted over every rollout of the stage so far; a call that scores nothing stops
    it at once (its accuracy would be computed from nothing). Wraps the stage's rollout functions."""

    def __init__(self, params: InfraRule, where: str):
        self.params = params
        self.where = where
        self.n_total = 0
        self.n_infra = 0

    def count(self, values: Sequence[object], run_id: str = "") -> None:
        """Add one call's per-request values (None = infrastructure failure) and apply the rule."""
        failed = sum(v is None for v in values)
        self.n_total += len(values)
        self.n_infra += failed
        where = f"{self.where} (run {run_id})" if run_id else self.where
        if values and failed == len(values):
            raise InfraFailureError(scored_share_message(failed, len(values), self.params, where))
        guard_infra_failures(self.n_infra, self.n_total, self.params, where)

    def rollout(self, fn: RolloutFn) -> RolloutFn:
        async def guarded(tree: HarnessTree, requests: Sequence[tuple[Question, int]], run_id: str) -> list[Optional[bool]]:
            got = await fn(tree, requests, run_id)
            self.count(got, run_id)
            return got

        return guarded

    def gate_rollout(self, fn: GateRolloutFn) -> GateRolloutFn:
        async def guarded(tree: HarnessTree, requests: Sequence[tuple[Question, int]], run_id: str) -> Sequence[Optional[GateValue]]:
            got = await fn(tree, requests, run_id)
            self.count(got, run_id)
            return got

        return guarded


def materialize_candidate(workspace_dir: Path, tree: HarnessTree, label: str) -> Path:
    """Write `tree` to a uniquely named dir under `<workspace>/.cand_tmp/` and return it."""
    safe = "".join(c if c.isalnum() or c in "-_" else "-" for c in label)[:60]
    path = Path(workspace_dir) / ".cand_tmp" / f"{safe}-{uuid.uuid4().hex[:12]}"
    tree.save(path)
    return path


@dataclass(frozen=True)
class GateRequest:
    """Everything one block-sequential gate needs (the argument of `validate_skill_local`).

    `plan` is the kernel's block planner (`harness.kernel.plans`: a sampling
    plan of `gate.plan`, or `FixedBlocks` around a plan fixed in advance; a
    fresh sample index per slot, cut to the pair budget; a qid may repeat).
    `known_baseline` (GEPA rule) gives baseline outcomes observed outside the
    gate for first asks instead of the cache. `informing_samples` (qid ->
    sample indices that fed the ladder's p_hat) is merged with the plan's own:
    pairing refuses such a sample on every plan (kernel LeakError).
    """

    task_type: str
    skill_file: str  # path inside the composed tree, e.g. "skills/t/SKILL.md" (benchmarks/e2e.py oracle_gate reads it)
    baseline_tree: HarnessTree
    candidate_tree: HarnessTree
    plan: BlockPlanner
    questions: Mapping[str, Question]
    rollout: GateRolloutFn
    params: GateParams
    gate_run_prefix: str  # must contain GATE_MARK: the ladder never absorbs these rollouts
    workspace_dir: Path
    epoch: int = 0
    step: int = 0
    known_baseline: Optional[Mapping[str, bool]] = None
    informing_samples: Optional[Mapping[str, Collection[int]]] = None
    # called after every block with (block number, its pairs, the verdict): progress lines (tracking.GateProgress)
    on_block: Optional[Callable[[int, Sequence[PairResult], GateVerdict], None]] = None

    def __post_init__(self) -> None:
        if GATE_MARK not in self.gate_run_prefix:
            raise ValueError(f"gate run prefix {self.gate_run_prefix!r} must contain {GATE_MARK!r} "
                             "(the ladder's anti-leak filter relies on it)")


async def validate_skill_local(request: GateRequest) -> ValidationOutcome:
    """Run the block-sequential gate of one candidate skill file (see `GateRequest` and the module doc).

    The decision is the kernel's `gate_decision` under `params.rule`; an
    "infra" verdict (INFRA guard over all blocks so far) ends the gate without
    a decision about the harness.
    """
    r = request
    task_type, baseline_tree, candidate_tree = r.task_type, r.baseline_tree, r.candidate_tree
    plan, questions, rollout, params = r.plan, r.questions, r.rollout, r.params
    gate_run_prefix, workspace_dir = r.gate_run_prefix, r.workspace_dir
    epoch, step, known_baseline, informing_samples = r.epoch, r.step, r.known_baseline, r.informing_samples
    planner = plan
    bets_on_values = rule_for(params).weighted  # the betting e-process uses a soft value itself, the others its rounding

    cand_run, base_run = f"{gate_run_prefix}_cand", f"{gate_run_prefix}_base"
    out = ValidationOutcome(action="reject", verdict=GateVerdict("reject", 0.0, 0.0, 0, 0, 0, 0, "not started"),
                            gate_run_id=gate_run_prefix)
    asked: set[str] = set()  # questions asked at least once (GEPA's known baseline serves the first ask only)
    cand_dir = materialize_candidate(workspace_dir, candidate_tree, f"{task_type}")
    try:
        cand_view = HarnessTree.load(cand_dir)  # what the solver reads is what is on disk
        if cand_view != candidate_tree:
            raise RuntimeError(f"gate {gate_run_prefix}: candidate tree changed on its way through {cand_dir}")
        def decide(pairs: Sequence[PairResult], final: bool) -> GateVerdict:
            return gate_decision(pairs, params, final=final)

        async def sample_block(block: list[BlockItem], b: int) -> list[PairResult]:
            missing = sorted({it.qid for it in block} - set(questions))
            if missing:
                raise KeyError(f"gate {gate_run_prefix}: plan names unknown qids {missing[:5]}")
            informing = {**(informing_samples or {})}
            for q, v in planner.informing_samples().items():
                informing[q] = frozenset(informing.get(q, ())) | frozenset(v)
            # -- 1. baseline (GEPA's known baseline first, run the rest); each slot has its own fresh sample index
            indices = [item.sample_index for item in block]
            slots = [(item.qid, item.sample_index) for item in block]
            baseline: list[Optional[GateValue]] = [None] * len(block)
            misses: list[int] = []
            for i, item in enumerate(block):
                first_ask = item.qid not in asked
                asked.add(item.qid)
                hit: Optional[GateValue] = None
                if first_ask and known_baseline is not None and item.qid in known_baseline:
                    hit = bool(known_baseline[item.qid])
                if hit is None:
                    misses.append(i)
                else:
                    baseline[i] = hit
                    out.known_baseline_hits += 1
            if misses:
                got = await rollout(baseline_tree, [(questions[block[i].qid], indices[i]) for i in misses], base_run)
                for i, value in zip(misses, got):
                    baseline[i] = value
                out.rollouts += len(misses)
            # -- 2. candidate on the whole block
            cand = await rollout(cand_view, [(questions[item.qid], indices[i]) for i, item in enumerate(block)], cand_run)
            out.rollouts += len(block)
            # -- 3. pairing (the INFRA guard and the decision run in `decide`, over all blocks so far)
            base_out, cand_out = gate_outcomes(baseline, slots), gate_outcomes(cand, slots)
            block_pairs = pair_block(block, base_out, cand_out, informing_samples=informing,
                                     baseline_values=soft_values(baseline) if bets_on_values else None,
                                     candidate_values=soft_values(cand) if bets_on_values else None,
                                     baseline_soft=soft_scores(baseline), candidate_soft=soft_scores(cand))
            for item, outcome in zip(block, cand_out):
                if outcome is not None:
                    out.candidate_correctness[item.qid] = outcome
            return block_pairs

        def on_block(b: int, block_pairs: Sequence[PairResult], verdict: GateVerdict) -> None:
            # -- 4. evidence rows; only the terminal block's rows carry a stop reason
            terminal = verdict.action != "continue"
            seq0 = len(out.evidence)
            for k, p in enumerate(block_pairs):
                out.evidence.append(dict(
                    gate_run_id=gate_run_prefix, seq=seq0 + k, block=b, epoch=epoch, step=step, task_type=task_type,
                    qid=p.qid, baseline=p.baseline, candidate=p.candidate, sample_index=p.sample_index, anchor=p.anchor,
                    sign=p.sign, log_e=verdict.log_e, log_lr_dir=verdict.log_lr_dir, action=verdict.action,
                    stop_reason=(verdict.reason or verdict.action) if terminal else None,
                ))
            out.pairs.extend(block_pairs)
            out.blocks = b + 1
            out.verdict = verdict
            if r.on_block is not None:
                r.on_block(b, block_pairs, verdict)

        run = await run_gate(planner, sample_block, decide, on_block=on_block, label=f"gate {gate_run_prefix}")
        out.action = run.decision.action
        return out
    finally:
        shutil.rmtree(cand_dir, ignore_errors=True)
        try:
            cand_dir.parent.rmdir()  # only when empty
        except OSError:
            pass
