"""Structured editor/diagnoser replies: JSON parsers, response_format dialects, the probe on the sim provider."""

from __future__ import annotations

import asyncio

import pytest

from harness.contracts.evolution import ReplyFormatError
from harness.contracts.roles import Role
from harness.contracts.structured import (
    JSON_OBJECT_SCHEMA,
    JSON_SCHEMA,
    TEXT,
    edit_ops_schema,
    parse_diagnosis_json,
    parse_edit_ops_json,
    response_format,
)
from harness.evolution.ask import probe_reply_format
from harness.sim.provider import SimProvider
from harness.sim.world import World


def test_edit_ops_json_gives_the_text_parsers_data():
    ops = parse_edit_ops_json('{"edits": [{"op": "add", "old": "", "new": " Check twice. ", "why": "misread"},'
                              ' {"op": "replace", "old": "Read.", "new": "Read slowly.", "why": "x"}], "no_change": "ignored"}')
    assert [(e.op, e.text, e.old) for e in ops.edits] == [("add", "Check twice.", ""), ("replace", "Read slowly.", "Read.")]
    assert ops.no_change is None
    assert parse_edit_ops_json('{"edits": [], "no_change": "nothing  to do"}').no_change == "nothing to do"


@pytest.mark.parametrize("reply, message", [
    ('{"edits": [{"op": "rewrite", "old": "a", "new": "b", "why": ""}], "no_change": ""}', "op 'rewrite'"),
    ('{"edits": [{"op": "add", "old": "", "new": "x"', "not JSON"),
    ('[1, 2]', "JSON list"),
    ('{"edits": []}', "missing \\['no_change'\\]"),
    ('{"edits": [{"op": "add", "new": "Check twice.", "why": ""}], "no_change": ""}', "missing \\['old'\\]"),
    ('{"edits": [], "no_change": "x", "note": 1}', "unknown \\['note'\\]"),
    ('{"edits": {"op": "add"}, "no_change": ""}', "must be a list"),
])
def test_replies_the_schema_refuses_are_refused_with_the_problem(reply, message):
    with pytest.raises(ReplyFormatError, match=message):
        parse_edit_ops_json(reply)


@pytest.mark.parametrize("reply, reason", [
    ('{"edits": [], "no_change": ""}', "no edit and no reason"),
    ('{"edits": [{"op": "delete", "old": "", "new": "", "why": ""}], "no_change": ""}', 'delete with an empty "old"'),
    ('{"edits": [{"op": "replace", "old": " ", "new": "Read every choice.", "why": ""}], "no_change": ""}', 'replace with an empty "old"'),
    # SmolLM2's replies under the schema: the instruction's example values copied back as the edit
    ('{"edits": [{"op": "add", "old": "", "new": "one rule sentence", "why": "short reason"}], "no_change": ""}', "format example"),
    ('{"edits": [{"op": "add", "old": "", "new": "no_change", "why": "short reason"}], "no_change": ""}', "format example"),
    # and under the field-describing instruction, its own words as the rule (real.py --part train, 2026-12-02)
    ('{"edits": [{"why": "", "op": "add", "old": "", "new": "for each sentence in your own words; ignored for delete."}], '
     '"no_change": ""}', "copies the reply instruction"),
])
def test_schema_valid_replies_that_cannot_be_applied_are_a_no_change_with_the_reason(reply, reason):
    ops = parse_edit_ops_json(reply)
    assert ops.edits == [] and ops.no_change is not None and reason in ops.no_change
    assert all(a.status == "invalid" and reason in a.detail for a in ops.refused)


def test_usable_edits_are_kept_beside_a_refused_one():
    ops = parse_edit_ops_json('{"edits": [{"op": "delete", "old": "", "new": "", "why": ""}, '
                              '{"op": "add", "old": "", "new": "Check the units.", "why": ""}], "no_change": ""}')
    assert [e.text for e in ops.edits] == ["Check the units."] and ops.no_change is None
    assert [(a.edit.op, a.status) for a in ops.refused] == [("delete", "invalid")]


def test_a_rule_that_shares_a_few_words_with_the_instruction_is_still_a_rule():
    ops = parse_edit_ops_json('{"edits": [{"why": "x", "op": "add", "old": "",'
                              ' "new": "Write the new rule in your notes before you answer."}], "no_change": ""}')
    assert [e.text for e in ops.edits] == ["Write the new rule in your notes before you answer."]  # 4-word runs only


def test_diagnosis_json():
    assert parse_diagnosis_json('{"diagnosis": "missed\\n the clock"}') == "missed the clock"
    with pytest.raises(ReplyFormatError, match="diagnosis"):
        parse_diagnosis_json('{"diagnosis": ""}')
    # a raw newline inside the string (SmolLM2 under llama.cpp's JSON grammar wrote one: "Invalid control character")
    assert parse_diagnosis_json('{"diagnosis": "the model\n\tanswered B"}') == "the model answered B"
    with pytest.raises(ReplyFormatError, match="not JSON"):
        parse_diagnosis_json('{"diagnosis": "unterminated\n')


def test_response_format_dialects():
    schema = edit_ops_schema(2)
    assert schema["properties"]["edits"]["maxItems"] == 2
    assert response_format(JSON_OBJECT_SCHEMA, "edit_ops", schema) == {"type": "json_object", "schema": schema}
    assert response_format(JSON_SCHEMA, "edit_ops", schema)["json_schema"]["schema"] == schema
    with pytest.raises(ValueError, match="text"):
        response_format(TEXT, "edit_ops", schema)


def test_the_sim_provider_probes_to_the_text_format():
    sim = SimProvider(World.generate(seed=3, n_task_types=2, questions_per_type=4))
    assert asyncio.run(probe_reply_format(sim, Role.EDITOR)) == TEXT


def test_sent_schemas_compile_to_a_llama_cpp_grammar():
    """The schemas a server receives convert with llama.cpp's converter (the CI model's server): DIAGNOSIS_SCHEMA's
    unanchored `\\S` pattern raised there ("Pattern must start with ^"), so patterns are not sent."""
    import json

    from llama_cpp import llama_grammar  # the test extra installs llama-cpp-python

    from harness.contracts.structured import DIAGNOSIS_SCHEMA

    assert "pattern" in json.dumps(DIAGNOSIS_SCHEMA)  # the parser-side schema keeps its check
    for name, schema in (("diagnosis", DIAGNOSIS_SCHEMA), ("edit_ops", edit_ops_schema(3))):
        sent = response_format(JSON_SCHEMA, name, schema)["json_schema"]["schema"]
        assert "pattern" not in json.dumps(sent)
        grammar = llama_grammar.json_schema_to_gbnf(json.dumps(sent))
        assert "root ::=" in grammar, name
