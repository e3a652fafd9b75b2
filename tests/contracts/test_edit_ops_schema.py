"""Issue 32 item 2: the editor's JSON schema and its parser accept the same replies.

Replies are generated from the schema itself (`edit_ops_schema`, so a schema change changes what is generated),
checked valid by `jsonschema`, then parsed: every one parses, and through `evolve_single_skill` none is a fallback.
Structural mutations of a valid reply (a key dropped or added, a wrong type, an op outside the enum) are refused by
both. The parser does not re-check the length keywords (documented in `parse_edit_ops_json`), so they are not mutated.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import jsonschema
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.contracts.evolution import ReplyFormatError
from harness.contracts.structured import (
    EDIT_OPS_JSON_INSTRUCTION,
    EXAMPLE_EDIT_TEXTS,
    JSON_OBJECT_SCHEMA,
    edit_ops_schema,
    parse_edit_ops_json,
)
from harness.evolution.evolve import evolve_single_skill
from harness.llm.protocol import LLMRequest, LLMResponse, Role, Usage

SKILL = "# Skill\n\n## Rules\n- Read the question.\n- Name the unit of the answer.\n"
# strings a model under the schema writes: empty, blank, the file's own lines, the examples and the instruction
SPECIAL = ["", " ", "\n", "Read the question.", "- Name the unit of the answer.", "Read", "text not in the file at all",
           *sorted(EXAMPLE_EDIT_TEXTS), EDIT_OPS_JSON_INSTRUCTION[120:200], "Compare every choice with the question."]


def from_schema(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    """Values valid under the subset of JSON Schema the editor's schema uses (object, array, string, enum, lengths)."""
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    kind = schema["type"]
    if kind == "object":
        return st.fixed_dictionaries({key: from_schema(sub) for key, sub in schema["properties"].items()})
    if kind == "array":
        return st.lists(from_schema(schema["items"]), min_size=schema.get("minItems", 0), max_size=schema.get("maxItems", 3))
    if kind == "string":
        low, high = schema.get("minLength", 0), schema.get("maxLength", 200)
        special = [s for s in SPECIAL if low <= len(s) <= high]
        return st.one_of(st.sampled_from(special), st.text(min_size=low, max_size=high)) if special else st.text(min_size=low, max_size=high)
    raise AssertionError(f"the test's generator does not know schema type {kind!r}: extend from_schema")


class OneReply:
    """A provider that enforces nothing and answers every request with `reply` (the structured path is forced)."""

    name = "one-reply"

    def __init__(self, reply: str):
        self.reply, self.requests = reply, 0

    def model_for(self, role: Role) -> str:
        return "one-reply"

    async def complete(self, request: LLMRequest) -> LLMResponse:
        self.requests += 1
        return LLMResponse(self.reply, "one-reply", self.name, Usage(1, 1), 0.0)


def _valid(schema: dict[str, Any], value: Any) -> bool:
    return jsonschema.Draft202012Validator(schema).is_valid(value)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(budget=st.integers(1, 3), data=st.data())
def test_every_reply_valid_under_the_schema_parses_and_is_never_a_fallback(budget, data):
    schema = edit_ops_schema(budget)
    reply = data.draw(from_schema(schema))
    assert _valid(schema, reply)
    text = json.dumps(reply, ensure_ascii=False)
    ops = parse_edit_ops_json(text)  # never ReplyFormatError
    assert ops.edits or (ops.no_change or "").strip()  # either something to apply or a stated reason
    assert len(ops.edits) + len(ops.refused) == len(reply["edits"])
    assert all(a.status == "invalid" and a.detail for a in ops.refused)

    llm = OneReply(text)
    record = asyncio.run(evolve_single_skill(llm, task_type="t", skill_file="skills/t/SKILL.md", skill_text=SKILL, case_pack=[],
                                             diagnoses=[], rejected=[], edit_budget=budget, sample_index=0,
                                             reply_format=JSON_OBJECT_SCHEMA))
    assert record.parse_error == "" and llm.requests == 1  # no retry, no fallback
    assert record.changed or record.no_change_reason  # applied, or a no-change with its reason
    assert len(record.apply_report) == len(record.edits) == len(reply["edits"])


def _mutations(reply: dict[str, Any]) -> list[dict[str, Any]]:
    """Structural breaks of a valid reply, one at a time."""
    out: list[dict[str, Any]] = [{k: v for k, v in reply.items() if k != "no_change"}, {**reply, "extra": ""},
                                 {**reply, "edits": "none"}, {**reply, "no_change": 0}]
    for i, edit in enumerate(reply["edits"]):
        for broken in ({k: v for k, v in edit.items() if k != "old"}, {**edit, "file": "x.md"}, {**edit, "op": "rewrite"},
                       {**edit, "new": None}, "add"):
            out.append({**reply, "edits": [*reply["edits"][:i], broken, *reply["edits"][i + 1:]]})
    return out


@settings(max_examples=100, deadline=None)
@given(data=st.data())
def test_what_the_schema_refuses_by_structure_the_parser_refuses(data):
    schema = edit_ops_schema(2)
    for broken in _mutations(data.draw(from_schema(schema))):
        assert not _valid(schema, broken)
        try:
            parse_edit_ops_json(json.dumps(broken))
        except ReplyFormatError:
            continue
        raise AssertionError(f"the parser accepted a reply the schema refuses: {broken!r}")


def test_the_edge_cases_of_the_issue_are_schema_valid_no_changes():
    schema = edit_ops_schema(1)
    cases = [
        {"edits": [], "no_change": ""},
        {"edits": [{"why": "", "op": "replace", "old": "", "new": "Compare every choice."}], "no_change": ""},
        {"edits": [{"why": "", "op": "delete", "old": "", "new": "nothing to say"}], "no_change": ""},
    ]
    for reply in cases:
        assert _valid(schema, reply)
        ops = parse_edit_ops_json(json.dumps(reply))
        assert ops.edits == [] and ops.no_change
    # an "old" that is not in the file parses; applying it records not_found (the record says why nothing changed)
    record = asyncio.run(evolve_single_skill(
        OneReply(json.dumps({"edits": [{"why": "", "op": "delete", "old": "text not in the file", "new": "nothing to say"}],
                             "no_change": ""})),
        task_type="t", skill_file="skills/t/SKILL.md", skill_text=SKILL, case_pack=[], diagnoses=[], rejected=[],
        edit_budget=1, sample_index=0, reply_format=JSON_OBJECT_SCHEMA))
    assert not record.changed and [a.status for a in record.apply_report] == ["not_found"] and not record.parse_error
    assert record.no_change_reason == "no edit applied: delete not_found (the <old> text does not occur in the file)"
