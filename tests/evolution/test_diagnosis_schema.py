"""The diagnoser's JSON schema and its parser accept the same replies: a blank diagnosis is refused by both.

Before, the schema's `minLength: 1` admitted a whitespace-only diagnosis that `parse_diagnosis_json` drops, so a
schema-enforcing provider could spend the format retry on a reply the schema itself allowed.
"""

from __future__ import annotations

import json

import jsonschema
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.contracts.evolution import ReplyFormatError
from harness.contracts.structured import DIAGNOSIS_SCHEMA, MAX_DIAGNOSIS_CHARS, parse_diagnosis_json

SPECIAL = ["", " ", "\n", "\t \n ", "\u00a0", "x", " The skill never checks units. ", "line one\nline two"]


def schema_admits(diagnosis: str) -> bool:
    try:
        jsonschema.validate({"diagnosis": diagnosis}, DIAGNOSIS_SCHEMA)
    except jsonschema.ValidationError:
        return False
    return True


def parser_admits(diagnosis: str) -> bool:
    try:
        parse_diagnosis_json(json.dumps({"diagnosis": diagnosis}))
    except ReplyFormatError:
        return False
    return True


def test_blank_diagnoses_are_refused_by_schema_and_parser_alike() -> None:
    verdicts = {text: (schema_admits(text), parser_admits(text)) for text in SPECIAL}
    assert verdicts[" "] == (False, False) and verdicts["\t \n "] == (False, False)
    assert verdicts["x"] == (True, True)
    assert all(schema == parser for schema, parser in verdicts.values()), verdicts


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(" \t\n\r\u00a0\u2003abc.,"), max_size=40))
def test_schema_and_parser_agree_on_any_short_reply(text: str) -> None:
    assert len(text) <= MAX_DIAGNOSIS_CHARS
    assert schema_admits(text) == parser_admits(text), repr(text)
