"""The CI model live: SmolLM2-135M-Instruct on llama.cpp's server (the session fixture `llama_server`).

Not skipped when llama_cpp or the model is missing: the fixture fails with the install command.
"""

from __future__ import annotations

import asyncio

import pytest

from harness.bench.jsonl import JsonlBenchmark, read_user_questions
from harness.bench.scoring import load_scorer
from harness.contracts.answers import NONE, STRICT
from harness.contracts.roles import Role
from harness.contracts.solver import DEFAULT_SKILL, skill_path
from harness.contracts.structured import JSON_OBJECT_SCHEMA, TEXT
from harness.evolution.ask import probe_reply_format, reply_format_of
from harness.evolution.evolve import evolve_single_skill
from harness.inference import run_inference
from harness.kernel.types import CaseSample
from harness.llm.openai_provider import OpenAIProvider
from harness.log import HarnessLog, RunLogReader
from tests.support.llm_config import fast_llm_config

pytestmark = pytest.mark.timeout(600)

QUESTIONS = "tests/fixtures/real_mc.jsonl"


def provider(server, *, max_tokens: int) -> OpenAIProvider:
    cfg = fast_llm_config(model=server.model_id, base_url=server.base_url, timeout_s=240.0, max_retries=1,
                          temperature=0.7, max_tokens=max_tokens)
    return OpenAIProvider(cfg)


def test_the_probe_finds_llama_cpp_structured_output(llama_server):
    async def go():
        llm = provider(llama_server, max_tokens=64)
        try:
            first = await reply_format_of(llm, Role.EDITOR)
            again = await reply_format_of(llm, Role.EDITOR)  # remembered: no second probe
            return first, again, await probe_reply_format(llm, Role.DIAGNOSER)
        finally:
            await llm.aclose()

    assert asyncio.run(go()) == (JSON_OBJECT_SCHEMA, JSON_OBJECT_SCHEMA, JSON_OBJECT_SCHEMA)


def test_a_structured_edit_from_the_real_model_parses(llama_server, repo_root):
    case = CaseSample(qid="capitals-01", task_type="capitals", question="What is the capital of France?", predicted="D",
                      answer="A", correct=False, trace_excerpt="[assistant] D. Berlin", choices=["Paris", "London", "Madrid", "Berlin"])

    async def go(reply_format):
        # the text attempts run to max_tokens twice on this model (they do not parse): 256 keeps the test's time bounded
        llm = provider(llama_server, max_tokens=512 if reply_format is None else 256)
        try:
            return await evolve_single_skill(llm, task_type="capitals", skill_file=skill_path(DEFAULT_SKILL),
                                             skill_text="Read the question and the choices, then answer.", case_pack=[case],
                                             diagnoses=[], rejected=[], edit_budget=1, sample_index=7, reply_format=reply_format)
        finally:
            await llm.aclose()

    record = asyncio.run(go(None))  # the probed format
    assert record.reply_format == JSON_OBJECT_SCHEMA
    # the server enforces the schema and the parser takes every schema-valid reply (issue 32 item 2): never a fallback;
    # a copied example or an inapplicable edit is a no-change with its reason, never applied
    assert not record.parse_error, record.parse_error
    assert record.changed or record.no_change_reason or all(a.detail for a in record.apply_report)
    if not record.changed:
        assert record.new_text == record.old_text
    text = asyncio.run(go(TEXT))  # the same model in the text format: recorded, never applied, when it does not parse
    assert text.reply_format == TEXT
    assert text.parse_error or text.edits or text.no_change_reason
    if text.parse_error:
        assert not text.changed and text.new_text == text.old_text


def test_the_real_solver_is_read_leniently_and_logged(llama_server, repo_root, tmp_path):
    questions = read_user_questions(repo_root / QUESTIONS)[::5]  # 8 questions, every task type
    bench = JsonlBenchmark(questions, scorer=load_scorer("exact"))

    async def go(parsing):
        llm = provider(llama_server, max_tokens=48)
        log = HarnessLog(tmp_path / f"{parsing}.sqlite")
        try:
            return await run_inference(questions, harness_tree_for=bench.base_harness(), llm=llm, tool_dispatch_fn=bench.tool_dispatch,
                                       scorer=bench.score, log=log, run_id=f"live_{parsing}", concurrency=1, max_steps=2,
                                       params={"temperature": 0.0, "max_tokens": 48}, answer_parsing=parsing)
        finally:
            log.close()
            await llm.aclose()

    lenient = asyncio.run(go("lenient"))
    assert lenient.n_infra == 0
    answered = sum(k for mode, k in lenient.parse_modes.items() if mode not in (NONE, "ambiguous"))
    # the model answers "B. London"-style replies; measured at temperature 0: 3 of 8 read, 5 ambiguous (letter and text
    # designate different choices). Before the lenient extractor every one of them was `no_answer`.
    assert answered >= 1, lenient.parse_modes
    rows = RunLogReader(tmp_path / "lenient.sqlite").query("SELECT parse_mode FROM predictions")
    assert sorted(r["parse_mode"] for r in rows) == sorted(r.parse_mode for r in lenient.records.values())
    strict = asyncio.run(go("strict"))  # temperature 0: the same replies, read strictly
    assert strict.parse_modes.get(STRICT, 0) == lenient.parse_modes.get(STRICT, 0)
    assert strict.n_correct <= lenient.n_correct
