"""The solver's prompt and answer format — the contract between AgentLoop,
the real LLM and the simulated solver (which parses these same messages).

Layout of a native harness tree (see harness/surfaces for other substrates):
  system_prompt.md              always-on
  tools/<tool>.md               always-on tool guides
  skills/<task_type>/SKILL.md   on demand, one per task type
  skills/default-strategy/SKILL.md  used when a task type has no skill

The protocol text below (how to call a tool, how to answer) is product code,
not trainable harness text, so every parser keeps working whatever the
editor writes.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from harness.llm.protocol import ChatMessage

SYSTEM_PROMPT_PATH = "system_prompt.md"
TOOLS_PREFIX = "tools/"
SKILLS_PREFIX = "skills/"
DEFAULT_SKILL = "default-strategy"

SECTION_SKILL = "# Skill: "
SECTION_TOOLS = "# Tool guides"
SECTION_PROTOCOL = "# Protocol"

PROTOCOL_TEXT = (
    f"{SECTION_PROTOCOL}\n"
    "To call a tool, reply with exactly one block:\n"
    '<tool_call>{"name": "<tool>", "arguments": {...}}</tool_call>\n'
    "You will receive the result in a <tool_result> block.\n"
    "When you are done, reply with your reasoning and end with a final line\n"
    "ANSWER: <letter>   (for multiple choice)  or  ANSWER: <short answer>"
)

_ANSWER_RE = re.compile(r"^\s*ANSWER\s*:\s*(.+?)\s*$", re.MULTILINE | re.IGNORECASE)
_TOOL_RE = re.compile(r"<tool_call>\s*(\{.*?\})\s*</tool_call>", re.DOTALL)
LETTERS = "ABCDEFGHIJ"


def skill_path(task_type: str) -> str:
    return f"{SKILLS_PREFIX}{task_type}/SKILL.md"


def resolve_skill_file(tree_files: dict[str, str] | Any, task_type: str) -> str:
    """Path of the skill file the solver reads for `task_type` (falls back to default-strategy)."""
    own = skill_path(task_type)
    if own in tree_files:
        return own
    return skill_path(DEFAULT_SKILL)


def render_system_message(tree_files: dict[str, str] | Any, task_type: str) -> str:
    parts: list[str] = [tree_files.get(SYSTEM_PROMPT_PATH, "").strip()]
    tools = sorted(p for p in tree_files if p.startswith(TOOLS_PREFIX))
    if tools:
        parts.append(SECTION_TOOLS)
        for path in tools:
            parts.append(f"## {path[len(TOOLS_PREFIX):].removesuffix('.md')}\n{tree_files[path].strip()}")
    skill_file = resolve_skill_file(tree_files, task_type)
    skill_text = tree_files.get(skill_file, "").strip()
    parts.append(f"{SECTION_SKILL}{task_type}\n{skill_text}")
    parts.append(PROTOCOL_TEXT)
    return "\n\n".join(p for p in parts if p)


def render_question(question_text: str, choices: list[str] | tuple[str, ...] | None) -> str:
    lines = [f"Question: {question_text.strip()}"]
    if choices:
        lines.append("")
        lines.append("Choices:")
        for letter, choice in zip(LETTERS, choices):
            lines.append(f"{letter}. {choice}")
    return "\n".join(lines)


def solver_messages(tree_files: dict[str, str] | Any, task_type: str, question_text: str, choices) -> list[ChatMessage]:
    return [
        ChatMessage("system", render_system_message(tree_files, task_type)),
        ChatMessage("user", render_question(question_text, choices)),
    ]


def parse_answer(text: str) -> str | None:
    """The last `ANSWER:` line's value, or None when there is none."""
    matches = _ANSWER_RE.findall(text or "")
    return matches[-1].strip() if matches else None


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: dict[str, Any]


class ToolCallFormatError(ValueError):
    pass


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
