"""Sweep report: provenance, fallbacks, judged scores of the selected runs, warnings.

Only the selected (delivered) run of a task is judged. A judge failure is
*ungraded* (None), never a zero. Warnings: a stage fell back; the base was
delivered on >= 80 % of tasks of a configuration; scores in mixed units;
and at k = 1 the parallel/sequential gap is reported as the noise floor.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Mapping, Sequence

from harness.h2.adapters import TaskAdapter
from harness.h2.roles import Judge
from harness.h2.run import TaskResult
from harness.identity import idempotency_key

BASE_PICK_WARN = 0.8


@dataclass(frozen=True)
class Score:
    value: float | None  # None = ungraded
    unit: str  # e.g. "judge-grade", "oracle-accuracy"
    note: str = ""


async def judge_delivered(results: Sequence[TaskResult], adapters: Mapping[str, TaskAdapter], judge: Judge, run_tag: str) -> dict[tuple[str, str, int], Score]:
    """Judge each task's delivered deliverable once; failures are ungraded."""
    out: dict[tuple[str, str, int], Score] = {}
    for r in results:
        a = adapters[r.task_id]
        g = await judge.grade(key=idempotency_key(run_tag, "judge", f"{r.task_id}.{r.mode}.k{r.k}"), task_id=a.task_id, task_header=a.task_header(), prompt=a.prompt, deliverable=r.summary.get("delivered_deliverable", ""))
        out[(r.task_id, r.mode, r.k)] = Score(g.grade, "judge-grade", g.error or g.why)
    return out


async def judge_base(results: Sequence[TaskResult], adapters: Mapping[str, TaskAdapter], judge: Judge, run_tag: str,
                     delivered: Mapping[tuple[str, str, int], Score] | None = None,
                     graded: dict[tuple[str, str], Score] | None = None) -> dict[tuple[str, str, int], Score]:
    """Judge each task's base deliverable with the same judge, once per (task, base tree): the other half of the paired
    base-vs-improved comparison. A round that delivered the base's own rollout takes its `delivered` grade (the pair is
    equal, no second call); a summary without a base deliverable (written before it was recorded) is ungraded.
    `graded` carries the base grades across calls (modes share a task's base rollout)."""
    out: dict[tuple[str, str, int], Score] = {}
    graded = {} if graded is None else graded
    for r in results:
        a = adapters[r.task_id]
        key = (r.task_id, r.mode, r.k)
        deliverable = r.summary.get("base_deliverable")
        if deliverable is None:
            out[key] = Score(None, "judge-grade", "no base deliverable recorded (an older run's summary)")
            continue
        if r.summary.get("delivered_rollout") == (r.summary.get("base_rollout") or {}).get("label") and key in (delivered or {}):
            out[key] = (delivered or {})[key]
            continue
        label = f"{r.task_id}.base.{r.base_fingerprint}"
        if (r.task_id, label) not in graded:
            g = await judge.grade(key=idempotency_key(run_tag, "judge", label), task_id=a.task_id, task_header=a.task_header(),
                                  prompt=a.prompt, deliverable=deliverable)
            graded[(r.task_id, label)] = Score(g.grade, "judge-grade", g.error or g.why)
        out[key] = graded[(r.task_id, label)]
    return out


def render_report(results: Sequence[TaskResult], scores: Mapping[tuple[str, str, int], Score] | None = None, *, title: str = "Harness² sweep") -> str:
    scores = scores or {}
    lines = [f"# {title}", "", "| task | mode | k | base | delivered | selection | fallbacks | dead probes | USD | score |", "|---|---|---|---|---|---|---|---|---|---|"]
    warnings: list[str] = []
    for r in results:
        s = r.summary
        sc = scores.get((r.task_id, r.mode, r.k))
        score = "–" if sc is None else ("ungraded" if sc.value is None else f"{sc.value:.3f} ({sc.unit})")
        lines.append(
            f"| {r.task_id} | {r.mode} | {r.k} | {r.base_fingerprint} | {r.delivered_fingerprint}{' (base)' if r.delivered_is_base else ''} | "
            f"{s['selection']['method']} | {len(s['fallbacks'])} | {len(s['dead_probes'])} | {s['ledger']['total_usd']:.4f} | {score} |"
        )
        for f in s["fallbacks"]:
            warnings.append(f"{r.task_id}/{r.mode}: stage fell back — {f}")
        if s["selection"].get("error"):
            warnings.append(f"{r.task_id}/{r.mode}: selection fell back — {s['selection']['error']}")
        if sc is not None and sc.value is None:
            warnings.append(f"{r.task_id}/{r.mode}: judge failed, ungraded ({sc.note})")
    configs = sorted({(r.mode, r.k) for r in results})
    for mode, k in configs:
        rs = [r for r in results if r.mode == mode and r.k == k]
        share = sum(r.delivered_is_base for r in rs) / len(rs)
        if share >= BASE_PICK_WARN:
            warnings.append(f"{mode} k={k}: the base harness was delivered on {share:.0%} of tasks")
    units = {sc.unit for sc in scores.values() if sc.value is not None}
    if len(units) > 1:
        warnings.append(f"scores mix units {sorted(units)}; means across them are meaningless")
    means: dict[tuple[str, int], float] = {}
    for mode, k in configs:
        vals = [scores[(r.task_id, r.mode, r.k)].value for r in results if r.mode == mode and r.k == k and (r.task_id, r.mode, r.k) in scores]
        graded = [v for v in vals if v is not None]
        if graded:
            means[(mode, k)] = statistics.mean(graded)
    if ("parallel", 1) in means and ("sequential", 1) in means:
        lines += ["", f"k = 1 noise floor (same procedure in both modes): |parallel − sequential| = {abs(means[('parallel', 1)] - means[('sequential', 1)]):.3f}"]
    if warnings:
        lines += ["", "## Warnings", ""] + [f"- {w}" for w in warnings]
    return "\n".join(lines) + "\n"
