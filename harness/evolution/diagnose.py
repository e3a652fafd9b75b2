"""Per-failure diagnosis of one rollout run (seed 000 §15 `_run_step`: diagnose).

One diagnoser call per failing question, at most `concurrency` in flight.
A reply that does not parse gets one retry with feedback; a second failure
drops that case's diagnosis with a logged warning (the case itself stays in
`DiagnosisResult.failures`). Provider errors propagate.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

from harness.contracts.evolution import FORMAT_DIAGNOSIS, parse_diagnosis
from harness.kernel.types import CaseSample, DiagnosisResult
from harness.llm.protocol import LLMProvider, Role

from .ask import ask_parsed
from .prompts import diagnosis_messages

log = logging.getLogger(__name__)


async def diagnose_case(llm: LLMProvider, case: CaseSample, sample_index: int = 0) -> tuple[str | None, str, float]:
    """(diagnosis or None, error, usd) for one failure."""
    return await ask_parsed(llm, Role.DIAGNOSER, diagnosis_messages(case), parse_diagnosis, FORMAT_DIAGNOSIS, sample_index)


async def run_diagnosis(
    llm: LLMProvider, *, run_id: str, failures: Sequence[CaseSample], concurrency: int, sample_index: int = 0
) -> DiagnosisResult:
    """Diagnose every failure of `run_id`; results grouped by task type in input order."""
    if not run_id:
        raise ValueError("run_diagnosis: run_id must be a non-empty string")
    if concurrency < 1:
        raise ValueError(f"run_diagnosis: concurrency must be >= 1, got {concurrency}")
    cases = [c for c in failures if not c.correct]
    semaphore = asyncio.Semaphore(concurrency)

    async def one(case: CaseSample):
        async with semaphore:
            return await diagnose_case(llm, case, sample_index)

    outcomes = await asyncio.gather(*(one(c) for c in cases))
    result = DiagnosisResult(run_id=run_id)
    for case, (diagnosis, error, usd) in zip(cases, outcomes):
        result.usd += usd
        result.failures.setdefault(case.task_type, []).append(case)
        if diagnosis is None:
            log.warning("run %s: diagnosis of %s dropped, reply unparseable (%s)", run_id, case.qid, error)
            continue
        result.by_task_type.setdefault(case.task_type, []).append(diagnosis)
    return result
