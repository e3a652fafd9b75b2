"""What the editor and diagnoser send when the provider enforces a JSON schema, over a real HTTP server on 127.0.0.1.

A model shown the text contract's example values (or a JSON example object) copies them back as its edit: SmolLM2
answered 7 of 8 editor requests with "one rule sentence" (reports/benchmarks/real.md). So in structured mode the
system message's text contract is replaced by the JSON instruction, which describes the fields and shows no values.
"""

from __future__ import annotations

import asyncio
import json

from harness.contracts.evolution import DIAGNOSIS_CONTRACT, EDIT_OPS_CONTRACT
from harness.contracts.structured import (
    DIAGNOSIS_JSON_INSTRUCTION,
    EDIT_OPS_JSON_INSTRUCTION,
    EXAMPLE_EDIT_TEXTS,
    JSON_OBJECT_SCHEMA,
    MIN_NEW_CHARS,
)
from harness.evolution.diagnose import diagnose_case
from harness.evolution.evolve import evolve_single_skill
from harness.kernel.types import CaseSample
from harness.llm.openai_provider import OpenAIProvider
from tests.support.llm_config import fast_llm_config
from tests.support.openai_server import FakeOpenAIServer

CASE = CaseSample(qid="q1", task_type="capitals", question="What is the capital of Japan?\nA. Beijing\nB. Tokyo",
                  predicted="A", answer="B", correct=False, trace_excerpt="[assistant] A. Beijing")


def json_model(body: dict) -> str:
    schema = body["response_format"]["schema"]
    if "edits" in schema["properties"]:
        return json.dumps({"edits": [{"why": "picks the first choice", "op": "add", "old": "",
                                      "new": "Compare every choice with the question before answering."}], "no_change": ""})
    return json.dumps({"diagnosis": "The agent picked the first choice without reading the others."})


async def _ask(server: FakeOpenAIServer) -> tuple:
    llm = OpenAIProvider(fast_llm_config(base_url=server.base_url, model="m"), api_key="local")
    try:
        record = await evolve_single_skill(llm, task_type="capitals", skill_file="skills/capitals/SKILL.md",
                                           skill_text="Read the question, then answer.", case_pack=[CASE], diagnoses=[],
                                           rejected=[], edit_budget=1, sample_index=0, reply_format=JSON_OBJECT_SCHEMA)
        diagnosis = await diagnose_case(llm, CASE, reply_format=JSON_OBJECT_SCHEMA)
    finally:
        await llm.aclose()
    return record, diagnosis


def test_structured_requests_carry_the_json_instruction_instead_of_the_text_contract():
    with FakeOpenAIServer(reply=json_model) as server:
        record, (diagnosis, error, _usd) = asyncio.run(_ask(server))
        bodies = [r.body for r in server.requests]
    assert record.changed and not record.parse_error, record
    assert "Compare every choice" in record.new_text
    assert diagnosis and not error
    editor, diagnoser = bodies
    for body, contract, instruction in ((editor, EDIT_OPS_CONTRACT, EDIT_OPS_JSON_INSTRUCTION),
                                        (diagnoser, DIAGNOSIS_CONTRACT, DIAGNOSIS_JSON_INSTRUCTION)):
        text = "\n".join(m["content"] for m in body["messages"])
        system = body["messages"][0]
        assert system["role"] == "system" and system["content"].endswith(instruction)
        assert contract not in text and "<edit" not in text and "<diagnosis>" not in text
        assert text.count(instruction) == 1  # once, in the system message; not also appended to the user message
        assert body["response_format"]["type"] == "json_object"
    # no example value a model could copy back is shown in the editor's request ("no_change" is the key's name)
    editor_text = "\n".join(m["content"] for m in editor["messages"]).lower()
    assert not [t for t in EXAMPLE_EDIT_TEXTS - {"no_change"} if t in editor_text]
    item = editor["response_format"]["schema"]["properties"]["edits"]["items"]
    assert list(item["properties"]) == ["why", "op", "old", "new"]  # the cause before the rule
    assert item["properties"]["new"]["minLength"] == MIN_NEW_CHARS


def test_text_requests_keep_the_text_contract():
    def text_model(body: dict) -> str:
        assert "response_format" not in body
        return '<edit op="add"><new>Compare every choice first.</new><why>x</why></edit>'

    async def ask(server: FakeOpenAIServer):
        llm = OpenAIProvider(fast_llm_config(base_url=server.base_url, model="m"), api_key="local")
        try:
            return await evolve_single_skill(llm, task_type="capitals", skill_file="skills/capitals/SKILL.md",
                                             skill_text="Read.", case_pack=[CASE], diagnoses=[], rejected=[], edit_budget=1,
                                             sample_index=0, reply_format="text")
        finally:
            await llm.aclose()

    with FakeOpenAIServer(reply=text_model) as server:
        record = asyncio.run(ask(server))
        system = server.requests[0].body["messages"][0]["content"]
    assert record.changed
    assert system.endswith(EDIT_OPS_CONTRACT) and EDIT_OPS_JSON_INSTRUCTION not in system
