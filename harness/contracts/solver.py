"""The solver's contract: harness tree layout, the messages it reads, the `ANSWER:` line it ends with.

AgentLoop renders these messages, real LLMs and the simulated solver
(harness/sim) read them, the benchmarks and the sim world lay out their base
harness by the same paths.

Layout of a native harness tree (see harness/h2/surfaces.py for other substrates):
  system_prompt.md              always-on
  tools/<tool>.md               always-on tool guides
  skills/<task_type>/SKILL.md   on demand, one per task type
  skills/default-strategy/SKILL.md  used when a task type has no skill

The protocol text below (how to call a tool, how to answer) is product code,
not trainable harness text, so every parser keeps working whatever the
editor writes.
"""

from __future__ import annotations

from typing import Any

from harness.contracts.answers import parse_answer  # noqa: F401  (the ANSWER line is read by the answer extractor)
from harness.questions import LETTERS

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
PROTOCOL_HEAD = PROTOCOL_TEXT.split("\n", 2)[1]  # "To call a tool, reply with exactly one block:" marks a solver call

QUESTION_PREFIX = "Question: "
CHOICES_HEADING = "Choices:"



def skill_path(task_type: str) -> str:
    return f"{SKILLS_PREFIX}{task_type}/SKILL.md"


def resolve_skill_file(tree_files: dict[str, str] | Any, task_type: str) -> str:
    """Path of the skill file the solver reads for `task_type` (falls back to default-strategy)."""
    own = skill_path(task_type)
    if own in tree_files:
        return own
    return skill_path(DEFAULT_SKILL)


def render_system_message(tree_files: dict[str, str] | Any, task_type: str) -> str:
    """The solver's system message: system prompt, tool guides, the task type's skill, the protocol."""
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
    """The solver's user message: `Question: <text>`, then the lettered choices."""
    lines = [f"{QUESTION_PREFIX}{question_text.strip()}"]
    if choices:
        lines.append("")
        lines.append(CHOICES_HEADING)
        for letter, choice in zip(LETTERS, choices):
            lines.append(f"{letter}. {choice}")
    return "\n".join(lines)


def question_text_of(user_message: str) -> str | None:
    """The question text of a `render_question` message; None when the message is not one."""
    if not user_message.startswith(QUESTION_PREFIX.rstrip()):
        return None
    first = user_message.split(f"\n\n{CHOICES_HEADING}", 1)[0]
    return first[len(QUESTION_PREFIX.rstrip()) :].strip()

