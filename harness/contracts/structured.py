"""Structured output: the diagnoser's and editor's replies as JSON objects under a JSON schema.

Where the provider honours `response_format` with a JSON schema (the OpenAI
API, llama.cpp's server), the editor and diagnoser ask for these JSON forms
of their text formats (harness/contracts/evolution.py) and small models emit
parseable replies; elsewhere the text formats stay. Which one a provider
gets is decided once by a probe (harness/evolution/ask.py).

Reply formats (`REPLY_FORMATS`):
  text                the text contracts (`<edit …>` blocks, `<diagnosis>`)
  json_schema         OpenAI's `{"type": "json_schema", "json_schema": {"name", "strict", "schema"}}`
  json_object_schema  llama-cpp-python's `{"type": "json_object", "schema": …}`

The JSON parsers return the same data as the text parsers (`EditOps`, the
diagnosis paragraph) and raise `ReplyFormatError` naming what is wrong, so a
malformed reply is recorded as a fallback and never applied. The editor's
parser refuses exactly what its schema refuses by structure; a schema-valid
edit that cannot be applied is recorded with its reason, never a fallback
(tests/contracts/test_edit_ops_schema.py generates replies from the schema).
"""

from __future__ import annotations

import json
import re
from typing import Any

from harness.contracts.evolution import EditOps, ReplyFormatError
from harness.kernel.types import Edit, EditApplication

TEXT = "text"
JSON_SCHEMA = "json_schema"
JSON_OBJECT_SCHEMA = "json_object_schema"
REPLY_FORMATS: tuple[str, ...] = (TEXT, JSON_SCHEMA, JSON_OBJECT_SCHEMA)
STRUCTURED_FORMATS: tuple[str, ...] = (JSON_OBJECT_SCHEMA, JSON_SCHEMA)  # the order the probe tries them

MAX_FIELD_CHARS = 160  # bounds a constrained model's strings (a grammar-constrained reply may take a token per character)
MAX_DIAGNOSIS_CHARS = 400
MIN_NEW_CHARS = 12  # the schema's floor for an edit's "new" text: a rule sentence, not a word
EDIT_OPS = ("add", "replace", "delete")

# the probe's schema admits one value no model writes unasked: only a server that enforces the schema returns it
PROBE_VALUE = "structured-output-ok"
PROBE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"probe": {"type": "string", "enum": [PROBE_VALUE]}},
    "required": ["probe"],
    "additionalProperties": False,
}
PROBE_PROMPT = "Say hello in one word."


def _string(max_chars: int) -> dict[str, Any]:
    return {"type": "string", "maxLength": max_chars}


def edit_ops_schema(edit_budget: int) -> dict[str, Any]:
    """The JSON schema of an editor reply: at most `edit_budget` edits, or none and a `no_change` reason."""
    # "why" first: a grammar-constrained model writes the properties in this order, so it states the cause before the
    # rule; "new" is never empty (an add or replace needs it, a delete ignores it), so an empty "new" cannot cost a retry
    edit = {
        "type": "object",
        "properties": {"why": _string(MAX_FIELD_CHARS), "op": {"type": "string", "enum": list(EDIT_OPS)},
                       "old": _string(MAX_FIELD_CHARS), "new": {**_string(MAX_FIELD_CHARS), "minLength": MIN_NEW_CHARS}},
        "required": ["why", "op", "old", "new"],
        "additionalProperties": False,
    }
    return {
        "type": "object",
        "properties": {"edits": {"type": "array", "items": edit, "maxItems": max(1, int(edit_budget))},
                       "no_change": _string(MAX_FIELD_CHARS)},
        "required": ["edits", "no_change"],
        "additionalProperties": False,
    }


DIAGNOSIS_SCHEMA: dict[str, Any] = {
    "type": "object",
    # pattern \S: some non-whitespace character, the parser's own rule (a blank diagnosis is dropped, never admitted)
    "properties": {"diagnosis": {"type": "string", "minLength": 1, "maxLength": MAX_DIAGNOSIS_CHARS, "pattern": "\\S"}},
    "required": ["diagnosis"],
    "additionalProperties": False,
}

# The JSON forms replace the text contract in the system message (harness/evolution/ask.py), and they describe each
# field instead of showing an example object: a small model copies example values back as its reply (SmolLM2 answered
# 7 of 8 editor requests with the old example's "one rule sentence"; scratch measurement in reports/benchmarks/real.md)
EDIT_OPS_JSON_INSTRUCTION = (
    'FORMAT: JSON. Reply with one JSON object with the keys "edits" and "no_change". "edits" is a list of at most the '
    'edit budget of edits. Each edit has "why" (what the failures have in common), "op" (add, replace or delete), "old" '
    '(for replace and delete: text copied exactly from the current file; for add: empty) and "new" (for add and replace: '
    'the new rule for this task type, one sentence in your own words; ignored for delete). "no_change" is empty when you '
    'give edits; when no edit is worth making, "edits" is empty and "no_change" says why.'
)
# example values of the text contract (and of the JSON instruction before it described fields): a small model copies
# them back as its "edit" (SmolLM2 added the rule "one rule sentence" and "no_change"); such an edit is malformed, not applied
EXAMPLE_EDIT_TEXTS = frozenset({"one rule sentence", "replacement text", "exact text now in the file", "no_change",
                                "no change", "the reason", "short reason"})
DIAGNOSIS_JSON_INSTRUCTION = ('FORMAT: JSON. Reply with one JSON object with one key, "diagnosis": one paragraph, in your own '
                              'words, on why the agent failed this case.')


def response_format(reply_format: str, name: str, schema: dict[str, Any]) -> dict[str, Any]:
    """The `response_format` request field of `reply_format` for `schema`, without `pattern` keywords.

    A server turns the schema into a decoding grammar, and llama.cpp's converter refuses an unanchored pattern and
    reads `\\S` as a literal; patterns stay a check of the parser side (tests/evolution/test_diagnosis_schema.py)."""
    schema = _without_patterns(schema)
    if reply_format == JSON_SCHEMA:
        return {"type": "json_schema", "json_schema": {"name": name, "strict": True, "schema": schema}}
    if reply_format == JSON_OBJECT_SCHEMA:
        return {"type": "json_object", "schema": schema}
    raise ValueError(f"reply format {reply_format!r} has no response_format; structured formats are {list(STRUCTURED_FORMATS)}")


def _without_patterns(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: _without_patterns(v) for k, v in node.items() if k != "pattern"}
    if isinstance(node, list):
        return [_without_patterns(v) for v in node]
    return node


def _json_object(text: str) -> dict[str, Any]:
    try:
        # strict=False: a raw newline or tab inside a string (llama.cpp's JSON grammar lets small models emit one) is
        # read as that character; the reply's meaning is unambiguous, so refusing it would only lose the edit
        value = json.loads(text or "", strict=False)
    except json.JSONDecodeError as exc:
        raise ReplyFormatError(f"expected one JSON object, the reply is not JSON ({exc.msg} at char {exc.pos})") from exc
    if not isinstance(value, dict):
        raise ReplyFormatError(f"expected one JSON object, got a JSON {type(value).__name__}")
    return value


def _text_field(obj: dict[str, Any], key: str, where: str, *, collapse: bool = True) -> str:
    value = obj.get(key, "")
    if not isinstance(value, str):
        raise ReplyFormatError(f"{where}: {key!r} must be a string, got {type(value).__name__}")
    return " ".join(value.split()) if collapse else value.strip()


def parse_diagnosis_json(text: str) -> str:
    """The diagnosis paragraph of a `{"diagnosis": "..."}` reply, whitespace collapsed."""
    body = _text_field(_json_object(text), "diagnosis", "diagnosis reply")
    if not body:
        raise ReplyFormatError('the "diagnosis" field is missing or empty')
    return body


COPIED_RUN_WORDS = 5  # an edit whose "new" shares this many consecutive words with the JSON instruction copies it


def _words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9_]+", text.lower())


def _runs_of(words: list[str]) -> set[tuple[str, ...]]:
    return {tuple(words[i:i + COPIED_RUN_WORDS]) for i in range(len(words) - COPIED_RUN_WORDS + 1)}


_INSTRUCTION_RUNS = frozenset(_runs_of(_words(EDIT_OPS_JSON_INSTRUCTION)))


def _instruction_run(new: str) -> str:
    """The first run of COPIED_RUN_WORDS words of `new` that the JSON instruction also contains, else "".

    SmolLM2 wrote "for each sentence in your own words; ignored for delete." as a rule (reports/benchmarks/real.md)."""
    words = _words(new)
    for i in range(len(words) - COPIED_RUN_WORDS + 1):
        if tuple(words[i:i + COPIED_RUN_WORDS]) in _INSTRUCTION_RUNS:  # the first copied run, in reading order
            return " ".join(words[i:i + COPIED_RUN_WORDS])
    return ""


EDIT_KEYS = ("why", "op", "old", "new")
NO_EDIT_NO_REASON = "the editor gave no edit and no reason"


def _unusable(op: str, old: str, new: str) -> str:
    """Why an edit the schema admits cannot be applied as a rule ("" when it can)."""
    if " ".join(new.lower().strip(" .").split()) in EXAMPLE_EDIT_TEXTS:
        return f'copies the format example ("new": {new!r}) instead of writing a rule'
    copied = _instruction_run(new)
    if copied:
        return f'copies the reply instruction ("{copied}" in "new") instead of writing a rule'
    if op in ("replace", "delete") and not old:
        return f'{op} with an empty "old": no text of the file to {op}'
    if op in ("add", "replace") and not new:
        return f'{op} with an empty "new": no rule to write'
    return ""


def parse_edit_ops_json(text: str) -> EditOps:
    """`EditOps` of a `{"edits": [...], "no_change": "..."}` reply, for exactly the replies `edit_ops_schema` admits.

    Refused (ReplyFormatError, naming what is wrong) only what the schema refuses by structure: not one JSON object,
    a missing or unknown key, a field of the wrong type, an op outside add/replace/delete. The length keywords are
    not re-checked (a provider that does not enforce them still gives a usable edit). Every schema-valid reply
    parses: an edit the schema admits that cannot be applied (an empty "old" on replace/delete, an empty "new", a
    copy of the format example or of the instruction) is kept in `EditOps.refused` with its reason, and when no
    usable edit is left the reply is a no-change whose reason says why (`NO_EDIT_NO_REASON` for empty "edits" and
    an empty "no_change"). With usable edits, "no_change" is ignored.
    """
    obj = _json_object(text)
    _exact_keys(obj, ("edits", "no_change"), "editor reply")
    edits_value = obj["edits"]
    if not isinstance(edits_value, list):
        raise ReplyFormatError(f'"edits" must be a list, got {type(edits_value).__name__}')
    no_change = _text_field(obj, "no_change", "editor reply")
    edits: list[Edit] = []
    refused: list[EditApplication] = []
    for i, item in enumerate(edits_value, 1):
        if not isinstance(item, dict):
            raise ReplyFormatError(f"edit {i} must be an object, got {type(item).__name__}")
        _exact_keys(item, EDIT_KEYS, f"edit {i}")
        op = _text_field(item, "op", f"edit {i}").lower()
        if op not in EDIT_OPS:
            raise ReplyFormatError(f"edit {i} has op {op!r}; expected one of {list(EDIT_OPS)}")
        old, new = (_text_field(item, key, f"edit {i}", collapse=False) for key in ("old", "new"))  # quoted file text
        edit = Edit(op=op, text=new, old="" if op == "add" else old, rationale=_text_field(item, "why", f"edit {i}"))
        problem = _unusable(op, old, new)
        if problem:
            refused.append(EditApplication(edit, "invalid", f"edit {i} ({op}) {problem}"))
        else:
            edits.append(edit)
    if edits:
        return EditOps(edits=edits, refused=refused)
    if refused:
        return EditOps(edits=[], no_change="no usable edit: " + "; ".join(r.detail for r in refused), refused=refused)
    return EditOps(edits=[], no_change=no_change or NO_EDIT_NO_REASON)


def _exact_keys(obj: dict[str, Any], keys: tuple[str, ...], where: str) -> None:
    missing, extra = [k for k in keys if k not in obj], sorted(set(obj) - set(keys))
    if missing or extra:
        raise ReplyFormatError(f"{where}: expected exactly the keys {list(keys)}"
                               + (f"; missing {missing}" if missing else "") + (f"; unknown {extra}" if extra else ""))


def is_probe_reply(text: str) -> bool:
    """True when `text` is exactly the probe schema's one admitted object."""
    try:
        value = json.loads(text or "")
    except json.JSONDecodeError:
        return False
    return value == {"probe": PROBE_VALUE}
