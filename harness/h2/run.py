"""One Harness² round per task (`improve_task`) and a sweep over tasks (`run_sweep`).

`improve_task` = base rollout (or the sweep's shared one) -> parallel or
sequential recursion -> selection -> reflection -> library write (unless the
budget gate tripped) -> outputs, with the completion mark written last::

    <work_dir>/summary.json      what happened (stages, fallbacks, selection, ledger, costs)
    <work_dir>/selection.json
    <work_dir>/ledger.json
    <work_dir>/delivered/...     the delivered harness tree
    <work_dir>/contexts/<label>/ the evidence each session saw
    <work_dir>/DONE.json         completion mark {version, run_id, at, fingerprint}

On resume a task is skipped only when `task_intact` holds (mark, summary,
selection, delivered tree and fingerprint all agree); otherwise it re-runs
(the response cache makes finished calls free).

`run_sweep` runs domains concurrently and the tasks of one domain in stream
order (each sees only earlier library entries); modes share the task's base
rollout; a task that crashes is recorded and the sweep goes on.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from harness.atomic import atomic_write_json
from harness.h2.adapters import Rollout, TaskAdapter
from harness.h2.budget import ROLLOUT, BudgetGate, Ledger, check_k, executions_for
from harness.h2.context import build_context
from harness.h2.library import Library
from harness.h2.recursion import MODES, RoundEnv, run_mode
from harness.h2.resume import ARTIFACT_DIR, SELECTION_FILE, SUMMARY_FILE, RunIdentity, ensure_run_identity, task_intact, write_completion_mark
from harness.h2.roles import Roles
from harness.h2.selection import select_final
from harness.h2.validator import validate_tree
from harness.identity import idempotency_key, sweep_task_run_id, validate_run_tag
from harness.tree import HarnessTree

REFLECT_MISSION = "Write down one reusable lesson (cue, lesson, evidence) from the adopted harness change, only if the rollouts support it."


@dataclass
class TaskResult:
    task_id: str
    domain: str
    mode: str
    k: int
    base_fingerprint: str
    delivered_fingerprint: str
    delivered: HarnessTree
    summary: dict[str, Any]
    skipped: bool = False  # resumed from an intact earlier run
    base_rollout: Rollout | None = None  # for sharing with the next mode (None when resumed)

    @property
    def delivered_is_base(self) -> bool:
        return self.delivered_fingerprint == self.base_fingerprint


async def execute_base(adapter: TaskAdapter, run_tag: str, base: HarnessTree) -> Rollout:
    """The task's reference rollout under its base harness (shared by modes)."""
    key = idempotency_key(run_tag, "base", f"{adapter.task_id}.base")
    try:
        return await adapter.execute(key, base)
    except Exception as exc:
        return Rollout(key, base.fingerprint, False, "", error=f"{type(exc).__name__}: {exc}")


async def improve_task(
    adapter: TaskAdapter,
    roles: Roles,
    *,
    work_dir: Path,
    k: int = 1,
    mode: str = "parallel",
    run_tag: str,
    library: Library | None = None,
    stream_index: int = 0,
    budget_usd: float | None = None,
    max_sessions: int | None = None,
    auto_apply: bool = False,
    base_rollout: Rollout | None = None,
    base_paid: bool = False,
    obs_limit: int = 20_000,
    resume: bool = True,
) -> TaskResult:
    """One Harness² round for one task; see the module docstring for outputs."""
    validate_run_tag(run_tag)
    check_k(k)
    if mode not in MODES:
        raise ValueError(f"h2 mode must be one of {MODES}, got {mode!r}")
    work_dir = Path(work_dir)
    run_id = sweep_task_run_id(run_tag, adapter.task_id, mode, k)
    if resume:
        ok, _why = task_intact(work_dir, run_id)
        if ok:
            done = json.loads((work_dir / SUMMARY_FILE).read_text(encoding="utf-8"))
            return TaskResult(adapter.task_id, adapter.domain, mode, k, done["base_fingerprint"], done["delivered_fingerprint"], HarnessTree.load(work_dir / ARTIFACT_DIR), done, skipped=True)

    default_base = adapter.base_harness()
    base, base_source = library.base_for(stream_index, default_base, auto_apply) if library else (default_base, "project base (no library)")
    base_verdict = validate_tree(base, adapter.surface, adapter_checks=(adapter.validate_tree,))
    ledger = Ledger()
    gate = BudgetGate(ledger, budget_usd=budget_usd, max_sessions=max_sessions, max_executions=executions_for(k))

    if base_rollout is None or base_rollout.harness_fingerprint != base.fingerprint:
        base_rollout = await execute_base(adapter, run_tag, base)
        base_paid = False
    ledger.record(ROLLOUT, base_rollout.label, "base", 0.0 if base_paid else base_rollout.cost_usd, detail="shared base rollout, paid once" if base_paid else "")
    gate.note_spend()

    env = RoundEnv(
        adapter=adapter, roles=roles, run_tag=run_tag, work_dir=work_dir, ledger=ledger, gate=gate,
        label_prefix=f"{adapter.task_id}.{mode}.k{k}", library_files=library.context_files(stream_index) if library else {}, obs_limit=obs_limit,
    )
    result = await run_mode(env, mode, base, base_rollout, k)

    selection, sel_call = await select_final(
        result.finals, k=k, mode=mode, task_id=adapter.task_id, task_header=adapter.task_header(), prompt=adapter.prompt,
        selector=roles.selector, key=env.key("selector", "select"),
        may_call=lambda: None if gate.allow_session("selector select") else f"budget gate closed: {gate.tripped}",
    )
    if sel_call is not None:
        env.book([sel_call])
    chosen = next((f for f in result.finals if f.label == selection.chosen), None)
    delivered = chosen.tree if chosen else base
    delivered_rollout = chosen.rollout if chosen else base_rollout

    experience = None
    library_note = "no library configured"
    if library is not None:
        if not gate.allow_session("reflector reflect"):  # no paid reflection after a trip, and an incomplete round is not stored
            library_note = f"not written: budget gate tripped ({gate.tripped})"
        elif roles.reflector is None:
            library_note = "not written: no reflector configured"
        else:
            ctx = build_context(
                work_dir / "contexts" / "reflect", adapter, mission=REFLECT_MISSION, current=delivered,
                rollouts=[r for r in (base_rollout, delivered_rollout) if r is not None], library_files=env.library_files, obs_limit=obs_limit,
            )
            ref = await roles.reflector.reflect(
                key=env.key("reflector", "reflect"), task_id=adapter.task_id, task_header=adapter.task_header(), prompt=adapter.prompt,
                base=base, adopted=delivered, context_dir=ctx, selection_note=f"{selection.method}: {selection.why or selection.error or ''}",
            )
            if ref.call is not None:
                env.book([ref.call])
            if ref.experience is None:
                library_note = f"not written: experience dropped ({ref.dropped})"
            else:
                experience = ref.experience
                harness_verdict = validate_tree(delivered, adapter.surface, adapter_checks=(adapter.validate_tree,))
                if not harness_verdict.ok and delivered != base:
                    library_note = f"not written: delivered tree fails validation ({harness_verdict.errors[:3]})"
                else:
                    entry = library.adopt(adapter.task_id, stream_index, delivered, experience, reason=f"{selection.method}: {selection.why}")
                    written = Path(entry.directory).resolve()
                    with contextlib.suppress(ValueError):  # inside the project: relative, so clones write the same
                        written = written.relative_to(Path.cwd().resolve())
                    library_note = f"written: {written.as_posix()}"

    summary: dict[str, Any] = {
        "run_id": run_id,
        "task_id": adapter.task_id,
        "domain": adapter.domain,
        "mode": mode,
        "k": k,
        "run_tag": run_tag,
        "stream_index": stream_index,
        "base_source": base_source,
        "base_fingerprint": base.fingerprint,
        "base_validation": base_verdict.to_dict(),
        "base_rollout": {"label": base_rollout.label, "ok": base_rollout.ok, "paid_here": not base_paid},
        "base_deliverable": base_rollout.deliverable,  # judged beside the delivered one: the base-vs-improved comparison
        "delivered_fingerprint": delivered.fingerprint,
        "delivered_is_base": delivered == base,
        "delivered_rollout": delivered_rollout.label if delivered_rollout else None,
        "stages": [r.to_dict() for r in env.records],
        "fallbacks": [f"{r.stage} {r.label}: {r.detail}" for r in env.fallbacks()],
        "dead_probes": [r.label for r in env.records if r.status == "dead"],
        "finals": [{"label": f.label, "fingerprint": f.tree.fingerprint, "rollout": f.rollout.label if f.rollout else None, "ok": bool(f.rollout and f.rollout.ok)} for f in result.finals],
        "diversity": result.diversity,
        "selection": selection.to_dict(),
        "experience": experience.to_dict() if experience else None,
        "library": library_note,
        "budget": gate.to_dict(),
        "ledger": ledger.summary(),
        "census": validate_tree(delivered, adapter.surface).census.to_dict(),  # type: ignore[union-attr]
        "delivered_deliverable": delivered_rollout.deliverable if delivered_rollout else "",
    }
    work_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_json(work_dir / "ledger.json", ledger.to_list())
    atomic_write_json(work_dir / SELECTION_FILE, selection.to_dict())
    delivered.save(work_dir / ARTIFACT_DIR)
    atomic_write_json(work_dir / SUMMARY_FILE, summary)
    write_completion_mark(work_dir, run_id, delivered)
    return TaskResult(adapter.task_id, adapter.domain, mode, k, base.fingerprint, delivered.fingerprint, delivered, summary, base_rollout=base_rollout)


@dataclass
class SweepResult:
    results: list[TaskResult] = field(default_factory=list)
    crashed: list[dict[str, str]] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


async def run_sweep(
    adapters: Sequence[TaskAdapter],
    roles: Roles,
    *,
    run_dir: Path,
    run_tag: str,
    k: int = 1,
    modes: Sequence[str] = ("parallel",),
    library_root: Path | None = None,
    models: Mapping[str, str] | None = None,
    budget_usd: float | None = None,
    max_sessions: int | None = None,
    auto_apply: bool = False,
    seed: int = 0,
    split: str = "",
) -> SweepResult:
    """Every task (stream order within its domain) in every mode; see module docstring."""
    validate_run_tag(run_tag)
    check_k(k)
    for m in modes:
        if m not in MODES:
            raise ValueError(f"h2 mode must be one of {MODES}, got {m!r}")
    ids = [a.task_id for a in adapters]
    if len(set(ids)) != len(ids):
        raise ValueError(f"task ids must be unique in a sweep: {sorted(i for i in ids if ids.count(i) > 1)}")
    run_dir = Path(run_dir)
    surfaces = sorted({a.surface.name for a in adapters})
    ensure_run_identity(run_dir, RunIdentity(run_tag, dict(models or {}), tuple(ids), split, seed, k, tuple(modes), ",".join(surfaces)))
    out = SweepResult()
    domains: dict[str, list[TaskAdapter]] = {}
    for a in adapters:
        domains.setdefault(a.domain, []).append(a)

    async def one_domain(domain: str, tasks: list[TaskAdapter]) -> None:
        for index, adapter in enumerate(tasks):
            shared: Rollout | None = None
            for mode in modes:
                library = Library(library_root, run_tag, mode, domain) if library_root else None
                try:
                    base_paid = shared is not None
                    res = await improve_task(
                        adapter, roles, work_dir=run_dir / adapter.task_id / f"{mode}-k{k}", k=k, mode=mode, run_tag=run_tag,
                        library=library, stream_index=index, budget_usd=budget_usd, max_sessions=max_sessions,
                        auto_apply=auto_apply, base_rollout=shared, base_paid=base_paid,
                    )
                except Exception as exc:  # failure isolation: one task's crash is recorded, the sweep goes on
                    out.crashed.append({"task_id": adapter.task_id, "mode": mode, "error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc(limit=5)})
                    continue
                out.results.append(res)
                if res.skipped:
                    out.skipped.append(f"{adapter.task_id}/{mode}")
                if shared is None and res.base_rollout is not None and not auto_apply:
                    shared = res.base_rollout  # modes share the base rollout (paid once)

    await asyncio.gather(*(one_domain(d, t) for d, t in domains.items()))
    order = {(a.task_id): i for i, a in enumerate(adapters)}
    out.results.sort(key=lambda r: (order[r.task_id], modes.index(r.mode)))
    return out

