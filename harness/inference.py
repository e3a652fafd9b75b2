"""Async batch inference (seed 000 §7): questions x harness -> logged, scored predictions.

`run_inference` runs one AgentLoop rollout per (question, sample index)
under `asyncio.Semaphore(concurrency)` + `asyncio.gather`. Everything is
injected (provider, tool dispatch, scorer, run log); nothing here knows a
concrete backend.

Defensive rules kept from the seed:
- pessimistic default: a record starts as stop_reason="error" and is only
  overwritten by a finished rollout;
- every prediction is logged whether the rollout succeeded or not (the
  insert happens after the try/except; rows are batched per chunk and the
  last batch is flushed in a `finally`);
- `run_id` is required (empty -> ValueError);
- results are aggregated in memory, never SELECTed back from `predictions`;
- non-string evidence/reasoning is stored as JSON (`_to_text_field`).

Correctness is None for a rollout that failed for infrastructure reasons
(LLM error, crash): it is no evidence about the harness, and accuracy is
computed over the other rollouts only. A failure on our side
(`LocalStoreError`: the response cache file, the disk) is not a rollout
outcome at all: it propagates and stops the run.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Union

from harness.agent.loop import AgentLoop, AgentResult, TraceStep
from harness.bench.protocol import Scorer, ToolDispatch
from harness.bench.soft import mean_soft_score, scored
from harness.contracts.solver import resolve_skill_file
from harness.llm.protocol import LLMProvider, StageStopError, Usage
from harness.questions import Question
from harness.tree import HarnessTree

logger = logging.getLogger("harness.inference")

HarnessSource = Union[HarnessTree, Mapping[str, str], Callable[[str], Mapping[str, str]]]
ToolDispatchFactory = Callable[[Question], Union[ToolDispatch, None]]
SampleKey = tuple[str, int]

DEFAULT_FLUSH_EVERY = 512
_GATHER_CHUNK_PER_SLOT = 64  # questions per gather chunk = concurrency x this (bounds live tasks)


def _to_text_field(value: Any) -> str | None:
    """str as is, None as NULL, anything else as JSON (non-JSON leaves via str())."""
    if value is None or isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)


@dataclass(frozen=True)
class PredictionRecord:
    """One row of `predictions`, plus the in-memory trace."""

    run_id: str
    qid: str
    sample_index: int
    task_type: str
    answer: str
    predicted: str | None = None
    correct: bool | None = None  # None: infra failure, not evidence
    stop_reason: str = "error"  # pessimistic default until a rollout finishes
    n_steps: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    latency_s: float = 0.0
    error: str | None = "rollout did not finish"
    evidence: str | None = None
    reasoning: str | None = None
    skill_hash: str | None = None
    parse_mode: str | None = None  # the answer extractor's rule (contracts/answers.ANSWER_MODES); None: no final reply
    soft_score: float | None = None  # in [0, 1] (harness/bench/soft.py); None: no soft score for this rollout
    trace: tuple[TraceStep, ...] = field(default=(), repr=False)

    @property
    def infra(self) -> bool:
        return self.correct is None

    @property
    def key(self) -> SampleKey:
        return (self.qid, self.sample_index)

    def prediction_row(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "qid": self.qid,
            "sample_index": self.sample_index,
            "task_type": self.task_type,
            "predicted": self.predicted,
            "answer": self.answer,
            "correct": None if self.correct is None else int(self.correct),
            "stop_reason": self.stop_reason,
            "n_steps": self.n_steps,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "cost_usd": self.cost_usd,
            "latency_s": self.latency_s,
            "error": self.error,
            "evidence": self.evidence,
            "reasoning": self.reasoning,
            "skill_hash": self.skill_hash,
            "parse_mode": self.parse_mode,
            "soft_score": self.soft_score,
        }

    def trace_rows(self) -> list[dict[str, Any]]:
        return [
            {"run_id": self.run_id, "qid": self.qid, "sample_index": self.sample_index, "step": s.step, "kind": s.kind, "content": s.content}
            for s in self.trace
        ]


@dataclass(frozen=True)
class InferenceResult:
    run_id: str
    # repr=False: asyncio.run formats the finished main task (with its result) when it restores the
    # SIGINT handler, so a full repr would render every record of a large run
    records: dict[SampleKey, PredictionRecord] = field(repr=False)  # (qid, sample_index) -> record, in input order
    correctness_by_sample: dict[SampleKey, bool | None] = field(repr=False)
    soft_by_sample: dict[SampleKey, float | None] = field(repr=False)  # None: infra, or no soft score
    accuracy: float | None  # over non-infra rollouts; None when there are none
    n: int
    n_correct: int
    n_infra: int
    usd: float
    usage: Usage
    wall_s: float
    stop_reasons: dict[str, int] = field(default_factory=dict)
    parse_modes: dict[str, int] = field(default_factory=dict)  # answer-extractor rule -> rollouts (infra rollouts left out)
    soft_score: float | None = None  # mean soft score over the judged rollouts; None unless every one has one

    @property
    def tokens(self) -> int:
        return self.usage.total_tokens

    @property
    def correctness(self) -> dict[str, bool | None]:
        """qid -> correct (None = infra). Only defined when each qid was asked once."""
        out: dict[str, bool | None] = {}
        for (qid, _), value in self.correctness_by_sample.items():
            if qid in out:
                raise ValueError(f"run {self.run_id}: qid {qid!r} was asked with several sample indices; use correctness_by_sample")
            out[qid] = value
        return out


def _aggregate_results(run_id: str, records: list[PredictionRecord], wall_s: float) -> InferenceResult:
    """Aggregate in memory (never SELECT the predictions back)."""
    by_key = {r.key: r for r in records}
    judged = [r for r in records if r.correct is not None]
    n_correct = sum(1 for r in judged if r.correct)
    stop_reasons: dict[str, int] = {}
    parse_modes: dict[str, int] = {}
    for r in records:
        stop_reasons[r.stop_reason] = stop_reasons.get(r.stop_reason, 0) + 1
        if r.correct is not None and r.parse_mode is not None:
            parse_modes[r.parse_mode] = parse_modes.get(r.parse_mode, 0) + 1
    return InferenceResult(
        run_id=run_id,
        records=by_key,
        correctness_by_sample={k: r.correct for k, r in by_key.items()},
        soft_by_sample={k: r.soft_score for k, r in by_key.items()},
        accuracy=(n_correct / len(judged)) if judged else None,
        n=len(records),
        n_correct=n_correct,
        n_infra=len(records) - len(judged),
        usd=math.fsum(r.cost_usd for r in records),
        usage=Usage(sum(r.prompt_tokens for r in records), sum(r.completion_tokens for r in records)),
        wall_s=wall_s,
        stop_reasons=stop_reasons,
        parse_modes=parse_modes,
        soft_score=mean_soft_score([r.soft_score for r in judged]),
    )


class _LogBuffer:
    """Collects prediction and trace rows; writes them in one transaction per batch."""

    def __init__(self, log: Any, flush_every: int):
        self.log = log
        self.flush_every = flush_every
        self.predictions: list[dict[str, Any]] = []
        self.traces: list[dict[str, Any]] = []

    def add(self, record: PredictionRecord) -> None:
        self.predictions.append(record.prediction_row())
        self.traces.extend(record.trace_rows())
        if len(self.predictions) >= self.flush_every:
            self.flush()

    def flush(self) -> None:
        predictions, traces = self.predictions, self.traces
        self.predictions, self.traces = [], []
        if predictions:
            self.log.insert("predictions", predictions)
        if traces:
            self.log.insert("traces", traces)


def _harness_lookup(harness_tree_for: HarnessSource) -> Callable[[str], Mapping[str, str]]:
    if callable(harness_tree_for) and not isinstance(harness_tree_for, Mapping):
        return harness_tree_for
    if isinstance(harness_tree_for, Mapping):
        tree = harness_tree_for
        return lambda task_type: tree
    raise TypeError(f"harness_tree_for must be a HarnessTree/mapping or a callable task_type -> tree, got {type(harness_tree_for).__name__}")


def _skill_hash(tree: Mapping[str, str], task_type: str) -> str:
    text = tree.get(resolve_skill_file(tree, task_type), "")
    return hashlib.sha1(text.encode("utf-8")).hexdigest()[:16]


def _expand_samples(questions: Sequence[Question], sample_indices: int | Sequence[int]) -> list[tuple[Question, int]]:
    if isinstance(sample_indices, bool):
        raise TypeError("sample_indices must be an int or a sequence of ints, got a bool")
    if isinstance(sample_indices, int):
        pairs = [(q, sample_indices) for q in questions]
    else:
        indices = list(sample_indices)
        if len(indices) != len(questions):
            raise ValueError(f"sample_indices has {len(indices)} entries for {len(questions)} questions (one per question expected)")
        pairs = list(zip(questions, indices))
    seen: set[SampleKey] = set()
    for q, idx in pairs:
        if isinstance(idx, bool) or not isinstance(idx, int):
            raise TypeError(f"sample index of qid {q.qid!r} must be an int, got {idx!r}")
        if (q.qid, idx) in seen:
            raise ValueError(f"qid {q.qid!r} with sample index {idx} appears twice; each (qid, sample_index) is one rollout")
        seen.add((q.qid, idx))
    return pairs


def _record_from(base: Mapping[str, Any], skill_hash: str | None, result: AgentResult, question: Question, scorer: Scorer) -> PredictionRecord:
    correct: bool | None = None
    soft: float | None = None
    error = result.error
    stop_reason: str = result.stop_reason
    if not result.infra:
        try:
            correct, soft = scored(question, result.answer, scorer(question, result.answer), result.logprobs)
        except Exception as exc:  # a scorer bug must not lose the prediction; recorded as infra
            logger.error("scorer failed on qid %s: %s: %s", question.qid, type(exc).__name__, exc)
            stop_reason, error = "error", f"scorer failed: {type(exc).__name__}: {exc}"
    return PredictionRecord(
        **base,
        predicted=result.answer,
        correct=correct,
        stop_reason=stop_reason,
        n_steps=result.n_steps,
        prompt_tokens=result.usage.prompt_tokens,
        completion_tokens=result.usage.completion_tokens,
        cost_usd=result.cost_usd,
        latency_s=result.latency_s,
        error=error,
        evidence=_to_text_field(list(result.evidence)) if result.evidence else None,
        reasoning=_to_text_field(result.reasoning),
        skill_hash=skill_hash,
        parse_mode=result.parse_mode,
        soft_score=soft,
        trace=result.trace,
    )


async def run_inference(
    questions: Sequence[Question],
    *,
    harness_tree_for: HarnessSource,
    llm: LLMProvider,
    tool_dispatch_fn: ToolDispatchFactory | None,
    scorer: Scorer,
    log: Any,
    run_id: str,
    concurrency: int = 16,
    max_steps: int = 4,
    sample_indices: int | Sequence[int] = 0,
    params: Mapping[str, Any] | None = None,
    run_kind: str = "inference",
    keep_traces: bool = True,
    flush_every: int = DEFAULT_FLUSH_EVERY,
    answer_parsing: str = "lenient",
) -> InferenceResult:
    """Run, score and log one rollout per (question, sample index).

    harness_tree_for: the solver's view (`prompts ∪ skills.prefixed("skills")`), either one tree for
      every question or a callable task_type -> tree (the gate swaps one task type's skill).
    tool_dispatch_fn: question -> ToolDispatch or None (from the benchmark adapter).
    scorer: (question, predicted) -> bool.
    log: a HarnessLog (`record_run`, `insert`); `_runs` gets (run_id, run_kind) if not there yet.
    sample_indices: one int for all questions, or one per question (the same qid may appear several
      times with different indices; records are keyed by (qid, sample_index)).
    params: LLM params of every solver call (temperature, max_tokens...; part of the cache key).
    keep_traces: keep each rollout's trace on its in-memory record (always written to `traces`).
    answer_parsing: "strict" | "lenient" (`benchmark.answer_parsing`, harness/contracts/answers.py).
    """
    if not isinstance(run_id, str) or not run_id.strip():
        raise ValueError("run_inference: run_id is required (got an empty run_id)")
    if concurrency < 1:
        raise ValueError(f"run_inference: concurrency must be >= 1, got {concurrency}")
    if flush_every < 1:
        raise ValueError(f"run_inference: flush_every must be >= 1, got {flush_every}")
    pairs = _expand_samples(questions, sample_indices)
    tree_for = _harness_lookup(harness_tree_for)
    agent = AgentLoop(llm, max_steps=max_steps, params=params, answer_parsing=answer_parsing)
    semaphore = asyncio.Semaphore(concurrency)
    buffer = _LogBuffer(log, flush_every)
    skill_hashes: dict[tuple[str, str], str] = {}
    records: list[PredictionRecord | None] = [None] * len(pairs)
    started = time.perf_counter()
    log.record_run(run_id, run_kind)

    def skill_hash_of(tree: Mapping[str, str], task_type: str) -> str:
        if not isinstance(tree, HarnessTree):
            return _skill_hash(tree, task_type)
        key = (tree.fingerprint, task_type)  # the fingerprint is cached on the tree
        if key not in skill_hashes:
            skill_hashes[key] = _skill_hash(tree, task_type)
        return skill_hashes[key]

    async def one(position: int, question: Question, sample_index: int) -> None:
        pessimistic: dict[str, Any] = dict(run_id=run_id, qid=question.qid, sample_index=sample_index, task_type=question.task_type,
                                           answer=question.answer)
        skill_hash: str | None = None
        try:
            tree = tree_for(question.task_type)
            skill_hash = skill_hash_of(tree, question.task_type)
            dispatch = tool_dispatch_fn(question) if tool_dispatch_fn is not None else None
            async with semaphore:
                result = await agent.run(tree, question, tool_dispatch=dispatch, sample_index=sample_index)
            record = _record_from(pessimistic, skill_hash, result, question, scorer)
        except (asyncio.CancelledError, StageStopError):  # a local failure or an unusable endpoint is no rollout outcome: it stops the run
            raise
        except Exception as exc:  # anything unexpected is recorded on the pessimistic record
            logger.exception("rollout of qid %s (sample %d) in run %s crashed", question.qid, sample_index, run_id)
            record = PredictionRecord(**pessimistic, skill_hash=skill_hash, error=f"{type(exc).__name__}: {exc}")
        buffer.add(record)  # after the try/except: logged whatever happened
        records[position] = record if keep_traces else replace(record, trace=())

    chunk = max(concurrency * _GATHER_CHUNK_PER_SLOT, 1)
    try:
        for start in range(0, len(pairs), chunk):
            await asyncio.gather(*(one(start + i, q, idx) for i, (q, idx) in enumerate(pairs[start : start + chunk])))
    finally:
        buffer.flush()
    done = [r for r in records if r is not None]
    return _aggregate_results(run_id, done, time.perf_counter() - started)

