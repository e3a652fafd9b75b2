"""Per-failure diagnosis of one rollout run (seed 000 §15 `_run_step`: diagnose).

One diagnoser call per failing question, at most `concurrency` in flight,
in the provider's reply format (structured JSON where the provider enforces a
schema, else text; harness/evolution/ask.py). A reply that does not parse
gets one retry with feedback; a second failure drops that case's diagnosis
with a logged warning (the case itself stays in `DiagnosisResult.failures`,
counted in `n_unparseable`). Provider errors propagate.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

from harness.contracts.evolution import DIAGNOSIS_CONTRACT, FORMAT_DIAGNOSIS, parse_diagnosis
from harness.contracts.structured import DIAGNOSIS_JSON_INSTRUCTION, DIAGNOSIS_SCHEMA, parse_diagnosis_json
from harness.kernel.types import CaseSample, DiagnosisResult
from harness.llm.protocol import LLMProvider, Role

from .ask import ReplyContract, ask_parsed, reply_format_of
from .prompts import MetaPrompts, diagnosis_messages

log = logging.getLogger(__name__)


DIAGNOSIS_REPLY = ReplyContract(FORMAT_DIAGNOSIS, parse_diagnosis, "diagnosis", DIAGNOSIS_SCHEMA, parse_diagnosis_json,
                                DIAGNOSIS_JSON_INSTRUCTION, DIAGNOSIS_CONTRACT)


async def diagnose_case(llm: LLMProvider, case: CaseSample, sample_index: int = 0, *,
                        reply_format: str | None = None, prompts: MetaPrompts | None = None) -> tuple[str | None, str, float]:
    """(diagnosis or None, error, usd) for one failure; `reply_format` None = the provider's probed format."""
    diagnosis, error, usd, _ = await ask_parsed(llm, Role.DIAGNOSER, diagnosis_messages(case, prompts), DIAGNOSIS_REPLY, sample_index,
                                                reply_format=reply_format)
    return diagnosis, error, usd


async def run_diagnosis(
    llm: LLMProvider, *, run_id: str, failures: Sequence[CaseSample], concurrency: int, sample_index: int = 0,
    reply_format: str | None = None, prompts: MetaPrompts | None = None,
) -> DiagnosisResult:
    """Diagnose every failure of `run_id`; results grouped by task type in input order.

    `reply_format` None: the provider's format, probed once before the first call (harness/evolution/ask.py).
    """
    if not run_id:
        raise ValueError("run_diagnosis: run_id must be a non-empty string")
    if concurrency < 1:
        raise ValueError(f"run_diagnosis: concurrency must be >= 1, got {concurrency}")
    cases = [c for c in failures if not c.correct]
    semaphore = asyncio.Semaphore(concurrency)
    fmt = reply_format if reply_format is not None or not cases else await reply_format_of(llm, Role.DIAGNOSER)

    async def one(case: CaseSample):
        async with semaphore:
            return await diagnose_case(llm, case, sample_index, reply_format=fmt, prompts=prompts)

    outcomes = await asyncio.gather(*(one(c) for c in cases))
    result = DiagnosisResult(run_id=run_id, reply_format=fmt or "")
    for case, (diagnosis, error, usd) in zip(cases, outcomes):
        result.usd += usd
        result.failures.setdefault(case.task_type, []).append(case)
        if diagnosis is None:
            result.n_unparseable += 1
            log.warning("run %s: diagnosis of %s dropped, reply unparseable (%s)", run_id, case.qid, error)
            continue
        result.by_task_type.setdefault(case.task_type, []).append(diagnosis)
    return result
