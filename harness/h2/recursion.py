"""Propose–Probe–Compose, parallel and sequential.

Parallel (from the base evidence): k INV + k DOM proposals, each probed once;
then k compositions, each reading the whole pool; the k finals are rolled;
the pairwise line-Jaccard similarity of the final trees is recorded (a
collapse detector: 1.0 = all finals identical).

Sequential: for t = 1..k, INV_t and DOM_t from the current tree and the
rollouts so far, probe both, compose c_t from {INV_t, DOM_t}, roll c_t,
carry it as the current tree.

At k = 1 both modes run the same stages with the same labels (inv1, dom1,
agg1, final1). Every editor stage: the proposal is validated; a rejected
proposal gets one revision with the validator's messages; a second
rejection, an editor failure, a refused context or a closed budget gate
falls back to the current tree (recorded). A proposal equal to the current
tree is not probed (its evidence is the current tree's). A probe that fails
is recorded as dead and the round goes on. Stages run one after another so
the budget gate sees every spend before the next call.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from harness.evolution.ask import RETRY_REFUSED
from harness.h2.adapters import Rollout, TaskAdapter
from harness.h2.budget import ROLLOUT, SESSION, BudgetGate, Ledger, check_k
from harness.h2.context import ContextLeakError, PoolEntry, build_context
from harness.h2.prompts import COMPOSE, DOM, INV, STAGE_MISSIONS
from harness.h2.roles import FORMAT_RETRY_SUFFIX, Call, EditRequest, Roles
from harness.h2.selection import Final
from harness.h2.surfaces import Surface, line_jaccard
from harness.h2.validator import validate_tree
from harness.identity import idempotency_key
from harness.tree import HarnessTree

PARALLEL = "parallel"
SEQUENTIAL = "sequential"
MODES = (PARALLEL, SEQUENTIAL)


@dataclass(frozen=True)
class StageRecord:
    stage: str  # inv | dom | compose | probe | final
    label: str
    status: str  # adopted | no-change | fallback | ok | dead | skipped
    parent: str  # fingerprint of the tree the stage started from
    result: str  # fingerprint of the tree the stage produced / ran
    attempts: int = 0
    errors: tuple[str, ...] = ()
    notes: str = ""
    detail: str = ""

    def to_dict(self) -> dict[str, Any]:
        d = dict(self.__dict__)
        d["errors"] = list(self.errors)
        return d


@dataclass
class RoundEnv:
    """Everything one task × mode round needs; records accumulate here."""

    adapter: TaskAdapter
    roles: Roles
    run_tag: str
    work_dir: Path
    ledger: Ledger
    gate: BudgetGate
    label_prefix: str  # distinguishes sessions of different tasks/modes (fresh samples)
    library_files: Mapping[str, str] = field(default_factory=dict)
    obs_limit: int = 20_000
    records: list[StageRecord] = field(default_factory=list)

    @property
    def surface(self) -> Surface:
        return self.adapter.surface

    def key(self, role: str, label: str) -> str:
        return idempotency_key(self.run_tag, role, f"{self.label_prefix}.{label}")

    def book(self, calls: Sequence[Call]) -> None:
        for c in calls:
            self.ledger.record(SESSION, c.key, c.role, c.usd, counted=c.counted)
        self.gate.note_spend()

    def fallbacks(self) -> list[StageRecord]:
        return [r for r in self.records if r.status == "fallback"]


@dataclass(frozen=True)
class StageOutcome:
    tree: HarnessTree
    status: str
    notes: str


async def run_stage(env: RoundEnv, stage: str, label: str, current: HarnessTree, rollouts: Sequence[Rollout], pool: Sequence[PoolEntry] = ()) -> StageOutcome:
    """One editor stage with validation, one revision, and fallback to `current`."""
    errors: list[str] = []

    def done(tree: HarnessTree, status: str, attempts: int, notes: str = "", detail: str = "") -> StageOutcome:
        env.records.append(StageRecord(stage, label, status, current.fingerprint, tree.fingerprint, attempts, tuple(errors), notes, detail))
        return StageOutcome(tree, status, notes)

    if not env.gate.allow(f"editor {label}"):
        return done(current, "fallback", 0, detail=f"budget gate closed: {env.gate.tripped}")
    try:
        ctx = build_context(
            env.work_dir / "contexts" / label, env.adapter, mission=STAGE_MISSIONS[stage], current=current,
            rollouts=rollouts, pool=pool, library_files=env.library_files, obs_limit=env.obs_limit,
        )
    except ContextLeakError as exc:
        errors.append(str(exc))
        return done(current, "fallback", 0, detail="evidence context refused")
    feedback: str | None = None
    for attempt in (1, 2):
        if attempt == 2 and not env.gate.allow(f"editor {label}.rev2"):
            return done(current, "fallback", 1, detail=f"budget gate closed before the revision: {env.gate.tripped}")
        key = env.key("editor", label if attempt == 1 else f"{label}.rev2")
        res = await env.roles.editor.edit(EditRequest(
            stage=stage, key=key, surface=env.surface, task_id=env.adapter.task_id, task_header=env.adapter.task_header(),
            prompt=env.adapter.prompt, current=current, context_dir=ctx, pool=tuple(pool), validator_feedback=feedback,
            may_retry=lambda pending_usd: env.gate.allow_session(f"editor {label}{FORMAT_RETRY_SUFFIX}", pending_usd),
        ))
        env.book(res.calls)
        errors.extend(f"format: {e}" for e in res.format_errors)
        if res.output is None:
            errors.append(res.error or "editor gave no usable output")
            if res.error == RETRY_REFUSED:
                return done(current, "fallback", attempt, detail=f"{RETRY_REFUSED}: {env.gate.tripped}")
            return done(current, "fallback", attempt, detail="editor output unusable after the format retry" if res.format_errors else "editor call failed")
        if res.output.is_no_change:
            return done(current, "no-change", attempt, notes=res.output.no_change or "")
        verdict = validate_tree(res.output.apply(current), env.surface, adapter_checks=(env.adapter.validate_tree,))
        if verdict.ok:
            assert verdict.tree is not None
            status = "adopted" if verdict.tree != current else "no-change"
            detail = "; ".join(verdict.auto_added)
            return done(verdict.tree, status, attempt, notes=res.output.notes, detail=detail)
        errors.extend(f"validator: {e}" for e in verdict.errors)
        feedback = verdict.feedback()
    return done(current, "fallback", 2, detail="proposal rejected by the validator twice")


async def probe(env: RoundEnv, stage: str, label: str, tree: HarnessTree, parent: HarnessTree, role: str = "probe") -> Rollout | None:
    """Execute the task under `tree`; None when the budget gate refused (recorded)."""
    if not env.gate.allow(f"{stage} {label}", execution=True):
        env.records.append(StageRecord(stage, label, "skipped", parent.fingerprint, tree.fingerprint, detail=f"budget gate closed: {env.gate.tripped}"))
        return None
    key = env.key(role, label)
    try:
        rollout = await env.adapter.execute(key, tree)
    except Exception as exc:  # adapters must not raise; if one does, the probe is dead, not the round
        rollout = Rollout(key, tree.fingerprint, False, "", error=f"{type(exc).__name__}: {exc}")
    env.ledger.record(ROLLOUT, key, role, rollout.cost_usd)
    env.gate.note_spend()
    env.records.append(StageRecord(stage, label, "ok" if rollout.ok else "dead", parent.fingerprint, tree.fingerprint, detail=rollout.error or ""))
    return rollout


async def _propose(env: RoundEnv, kind: str, i: int, current: HarnessTree, rollouts: Sequence[Rollout]) -> PoolEntry:
    label = f"{kind}{i}"
    out = await run_stage(env, kind, label, current, rollouts)
    rollout = None
    if out.tree != current:
        rollout = await probe(env, "probe", f"probe-{label}", out.tree, current)
    else:
        env.records.append(StageRecord("probe", f"probe-{label}", "skipped", current.fingerprint, out.tree.fingerprint, detail="proposal equals the current tree"))
    status = out.status if rollout is None or rollout.ok else "dead"
    return PoolEntry(label, kind, out.tree, current, rollout, out.notes, status)


@dataclass
class ModeResult:
    mode: str
    k: int
    base: HarnessTree
    finals: list[Final]
    pool: list[PoolEntry]
    diversity: dict[str, Any]


def diversity(trees: Sequence[HarnessTree]) -> dict[str, Any]:
    pairs = [
        {"a": i + 1, "b": j + 1, "jaccard": round(line_jaccard(trees[i], trees[j]), 4)}
        for i, j in itertools.combinations(range(len(trees)), 2)
    ]
    mean = sum(p["jaccard"] for p in pairs) / len(pairs) if pairs else None
    return {"pairs": pairs, "mean_jaccard": mean, "collapsed": bool(pairs) and all(p["jaccard"] == 1.0 for p in pairs)}


async def run_parallel(env: RoundEnv, base: HarnessTree, base_rollout: Rollout, k: int) -> ModeResult:
    check_k(k)
    pool: list[PoolEntry] = []
    for i in range(1, k + 1):
        for kind in (INV, DOM):
            pool.append(await _propose(env, kind, i, base, [base_rollout]))
    finals: list[Final] = []
    composed: list[HarnessTree] = []
    for j in range(1, k + 1):
        out = await run_stage(env, COMPOSE, f"agg{j}", base, [base_rollout], pool)
        composed.append(out.tree)
    for j, tree in enumerate(composed, start=1):
        finals.append(Final(f"final{j}", tree, await probe(env, "final", f"final{j}", tree, base)))
    return ModeResult(PARALLEL, k, base, finals, pool, diversity([f.tree for f in finals]))


async def run_sequential(env: RoundEnv, base: HarnessTree, base_rollout: Rollout, k: int) -> ModeResult:
    check_k(k)
    current = base
    history: list[Rollout] = [base_rollout]
    pool: list[PoolEntry] = []
    finals: list[Final] = []
    for t in range(1, k + 1):
        round_pool = [await _propose(env, kind, t, current, history) for kind in (INV, DOM)]
        pool.extend(round_pool)
        out = await run_stage(env, COMPOSE, f"agg{t}", current, history, round_pool)
        rolled = await probe(env, "final", f"final{t}", out.tree, current)
        finals.append(Final(f"final{t}", out.tree, rolled))
        history.extend(p.rollout for p in round_pool if p.rollout is not None)
        if rolled is not None:
            history.append(rolled)
        current = out.tree
    return ModeResult(SEQUENTIAL, k, base, finals, pool, diversity([f.tree for f in finals]))


async def run_mode(env: RoundEnv, mode: str, base: HarnessTree, base_rollout: Rollout, k: int) -> ModeResult:
    if mode == PARALLEL:
        return await run_parallel(env, base, base_rollout, k)
    if mode == SEQUENTIAL:
        return await run_sequential(env, base, base_rollout, k)
    raise ValueError(f"h2 mode must be one of {MODES}, got {mode!r}")
