"""The loop's port to inference and to the run log: rollouts, case samples, tool packs, traces.

`rollout_fn(ctx, log)` returns the `RolloutFn` of step rollouts, R/R2 and
held-out, `gate_rollout_fn(ctx, log)` the gate's (the values of
`gate.metric`): `run_inference` with the benchmark's tools and scorer, the
configured solver params, the stage's run log. Outcomes are per request, None
for an infrastructure failure.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import Callable, Coroutine, Mapping, Sequence
from pathlib import Path
from typing import Any, Optional

from harness.bench.soft import gate_value, mean_soft_score, metric_outcome
from harness.config.schema import max_tokens_for
from harness.identity import run_kind
from harness.inference import InferenceResult, run_inference
from harness.kernel.types import CaseSample, ToolCasePack
from harness.log import RunLogReader
from harness.loop.validate import GateRolloutFn, GateSample, GateValue, RolloutFn
from harness.questions import Question
from harness.tree import HarnessTree

TRACE_EXCERPT_CHARS = 2000


def solver_params(llm_cfg: Any) -> dict[str, Any]:
    """The solver's sampling parameters; `llm.top_logprobs` > 0 also asks for the answer's token log-probabilities
    (the multiple-choice soft score, harness/bench/soft.py)."""
    params: dict[str, Any] = {"temperature": float(llm_cfg.temperature), "max_tokens": max_tokens_for(llm_cfg, "solver")}
    top = int(llm_cfg.top_logprobs)
    if top > 0:
        params.update(logprobs=True, top_logprobs=top)
    return params


def soft_score_fn(log: Any) -> Callable[[str], Optional[float]]:
    """run_id -> the run's soft score from the stage's run log (mean over its judged rollouts, None unless every
    one has a soft score)."""
    def soft(run_id: str) -> Optional[float]:
        rows = log.query("SELECT soft_score FROM predictions WHERE run_id = ? AND correct IS NOT NULL", (run_id,))
        return mean_soft_score([r["soft_score"] for r in rows])

    return soft


def soft_by_question_fn(log: Any) -> Callable[[str], dict[str, Optional[float]]]:
    """run_id -> qid -> the soft score of the run's judged rollout of that question (None where it has none); the
    mean of its values is `soft_score_fn`'s, for a run that asks each question once (the slow update's R and R2)."""
    def soft(run_id: str) -> dict[str, Optional[float]]:
        rows = log.query("SELECT qid, soft_score FROM predictions WHERE run_id = ? AND correct IS NOT NULL", (run_id,))
        return {str(r["qid"]): None if r["soft_score"] is None else float(r["soft_score"]) for r in rows}

    return soft


def gate_rollout_fn(ctx: Any, log: Any) -> GateRolloutFn:
    """The gate's `GateRolloutFn`: per request a `GateSample` of the value of `gate.metric` (bench/soft.gate_value: the
    hard outcome, a bool, for `hard`; the soft or mixed score, a float in [0, 1], otherwise) and the rollout's soft
    score (None without one); None for an infrastructure failure. The gate rounds a float where it needs an outcome
    in {0, 1} (validate.gate_outcomes); a weighted rule bets on it; the `soft_estimate` futility reads the soft score."""
    metric = str(ctx.cfg.gate.metric)
    run = _inference_fn(ctx, log)

    async def rollout(tree: HarnessTree, requests: Sequence[tuple[Question, int]], run_id: str) -> list[Optional[GateValue]]:
        if not requests:
            return []
        result = await run(tree, requests, run_id)
        out: list[Optional[GateValue]] = []
        for q, i in requests:
            correct, soft = result.correctness_by_sample[(q.qid, i)], result.soft_by_sample[(q.qid, i)]
            out.append(None if correct is None else GateSample(gate_value(metric, correct, soft, qid=q.qid), soft))
        return out

    return rollout


def metric_batch_outcomes(ctx: Any, runlog: Path, run_id: str, sample_index: Optional[int],
                          outcomes: Mapping[str, Optional[bool]]) -> dict[str, Optional[bool]]:
    """The step rollout's outcomes as `gate.metric` outcomes (the screen's and GEPA's baseline must be the same
    metric as the gate's candidate side); `outcomes` themselves for `hard`."""
    metric = str(ctx.cfg.gate.metric)
    if metric == "hard" or sample_index is None:
        return dict(outcomes)
    soft = {r["qid"]: r["soft_score"] for r in RunLogReader([Path(runlog)]).query(
        "SELECT qid, soft_score FROM predictions WHERE run_id = ? AND sample_index = ?", (run_id, sample_index))}
    return {qid: None if value is None else metric_outcome(metric, value, soft.get(qid), qid=qid, sample_index=sample_index)
            for qid, value in outcomes.items()}


def _inference_fn(ctx: Any, log: Any) -> Callable[[HarnessTree, Sequence[tuple[Question, int]], str], Coroutine[Any, Any, InferenceResult]]:
    """`run_inference` with the benchmark's tools and scorer, the configured solver params and the stage's run log."""
    bench, llm, cfg = ctx.bench(), ctx.llm(), ctx.cfg
    params = solver_params(cfg.llm)

    async def run(tree: HarnessTree, requests: Sequence[tuple[Question, int]], run_id: str) -> InferenceResult:
        return await run_inference(
            [q for q, _ in requests], harness_tree_for=tree, llm=llm, tool_dispatch_fn=bench.tool_dispatch, scorer=bench.score,
            log=log, run_id=run_id, concurrency=int(cfg.llm.concurrency), max_steps=int(cfg.llm.max_agent_steps),
            sample_indices=[i for _, i in requests], params=params, run_kind=run_kind(run_id), keep_traces=False,
            answer_parsing=str(cfg.benchmark.answer_parsing),
        )

    return run


def rollout_fn(ctx: Any, log: Any) -> RolloutFn:
    """Outcomes per request: correct / wrong, None for an infrastructure failure."""
    run = _inference_fn(ctx, log)

    async def rollout(tree: HarnessTree, requests: Sequence[tuple[Question, int]], run_id: str) -> list[Optional[bool]]:
        if not requests:
            return []
        result = await run(tree, requests, run_id)
        return [result.correctness_by_sample[(q.qid, i)] for q, i in requests]

    return rollout


def run_rollouts(ctx: Any, log: Any, tree: HarnessTree, requests: Sequence[tuple[Question, int]], run_id: str) -> list[Optional[bool]]:
    return asyncio.run(rollout_fn(ctx, log)(tree, requests, run_id))


def _excerpt(text: str) -> str:
    # the end of a trace holds the final reasoning (and the hint of what was missing)
    return text if len(text) <= TRACE_EXCERPT_CHARS else "…" + text[-TRACE_EXCERPT_CHARS:]


def case_samples(reader: RunLogReader, run_id: str, questions: Mapping[str, Question], outcomes: Mapping[str, Optional[bool]]) -> list[CaseSample]:
    """One CaseSample per judged question of the run (failures carry their trace excerpt), in qid order."""
    preds = {r["qid"]: r for r in reader.predictions(run_id=run_id)}
    out: list[CaseSample] = []
    for qid in sorted(outcomes):
        value = outcomes[qid]
        if value is None or qid not in preds:
            continue
        q = questions[qid]
        trace = ""
        if not value:
            trace = "\n".join(f"[{t['kind']}] {t['content']}" for t in reader.traces(run_id, qid))
        out.append(CaseSample.of(q, predicted=preds[qid]["predicted"], correct=bool(value), trace_excerpt=_excerpt(trace)))
    return out


def tool_packs(reader: RunLogReader, run_id: str, epoch: int) -> dict[str, ToolCasePack]:
    """Tool usage of one run from the predictions' evidence (calls, errors, a few examples per tool)."""
    packs: dict[str, ToolCasePack] = {}
    for row in reader.predictions(run_id=run_id):
        if not row.get("evidence"):
            continue
        try:
            items = json.loads(row["evidence"])
        except json.JSONDecodeError:
            continue
        for item in items if isinstance(items, list) else []:
            tool = item.get("tool") if isinstance(item, dict) else None
            if not isinstance(tool, str) or not tool:
                continue
            pack = packs.setdefault(tool, ToolCasePack(tool=tool, epoch=epoch))
            pack.calls += 1
            if "error" in item:
                pack.errors += 1
                if len(pack.examples) < 4:
                    pack.examples.setdefault(f"{row['qid']}:error", str(item["error"])[:300])
            elif len(pack.examples) < 4:
                pack.examples.setdefault(f"{row['qid']}:call", json.dumps(item.get("arguments"), sort_keys=True)[:300])
    return packs


def trace_text(db: Path, run_id: str, qid: str, sample_index: int) -> str:
    """The trace of one rollout in a run-log fragment (read-only), excerpted."""
    if not Path(db).exists():
        return ""
    conn = sqlite3.connect(f"file:{Path(db).resolve()}?mode=ro", uri=True, timeout=30.0)
    try:
        rows = conn.execute("SELECT kind, content FROM traces WHERE run_id=? AND qid=? AND sample_index=? ORDER BY step",
                            (run_id, qid, sample_index)).fetchall()
    except sqlite3.OperationalError:
        return ""
    finally:
        conn.close()
    return _excerpt("\n".join(f"[{k}] {c}" for k, c in rows))


def probation_verdict_fn(ctx: Any):
    """The kernel's probation settlement: `gate.probation_settlement=snapshot` (snapshot vs full-validation re-run)
    or `eprocess` (an e-process on fresh anchor-vs-installed pairs; called with the anchor re-run)."""
    from harness.kernel.probation import ProbationParams, probation_settlement, probation_verdict
    from harness.kernel.registry import params_of

    if params_of(ProbationParams, ctx.gate).probation_settlement == "eprocess":
        def settle(p, rerun, anchor=None, /):
            if anchor is None:
                raise ValueError("gate.probation_settlement = eprocess: the settlement needs the anchor re-run")
            return probation_settlement(p, anchor, rerun, ctx.gate)

        return settle

    def verdict(p, rerun: Mapping[str, Optional[bool]], anchor=None, /):  # the snapshot settlement ignores an anchor
        return probation_verdict(p, rerun)

    return verdict
