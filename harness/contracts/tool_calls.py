"""The solver protocol's tool blocks: `<tool_call>{json}</tool_call>` in, `<tool_result name=…>` back."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

TOOL_CALL_OPEN, TOOL_CALL_CLOSE = "<tool_call>", "</tool_call>"

_TOOL_RE = re.compile(r"<tool_call>\s*(\{.*?\})\s*</tool_call>", re.DOTALL)


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: dict[str, Any]


class ToolCallFormatError(ValueError):
    pass


def render_tool_call(name: str, arguments: dict[str, Any]) -> str:
    """One tool-call block, as the protocol asks the solver to write it."""
    return f"{TOOL_CALL_OPEN}{json.dumps({'name': name, 'arguments': arguments})}{TOOL_CALL_CLOSE}"


def parse_tool_call(text: str) -> ToolCall | None:
    """The first <tool_call> block, None when there is none; malformed JSON raises ToolCallFormatError."""
    m = _TOOL_RE.search(text or "")
    if not m:
        return None
    try:
        payload = json.loads(m.group(1))
    except json.JSONDecodeError as exc:
        raise ToolCallFormatError(f"tool call is not valid JSON: {exc}") from exc
    if not isinstance(payload, dict) or not isinstance(payload.get("name"), str):
        raise ToolCallFormatError("tool call must be an object with a string 'name'")
    args = payload.get("arguments", {})
    if not isinstance(args, dict):
        raise ToolCallFormatError("tool call 'arguments' must be an object")
    return ToolCall(payload["name"], args)


def render_tool_result(name: str, result: str) -> str:
    return f'<tool_result name="{name}">\n{result}\n</tool_result>'
