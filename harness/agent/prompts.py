"""The solver's two messages (system, question) as chat messages; the text formats are harness/contracts/solver.py."""

from __future__ import annotations

from typing import Any

from harness.contracts.solver import render_question, render_system_message
from harness.llm.protocol import ChatMessage


def solver_messages(tree_files: dict[str, str] | Any, task_type: str, question_text: str, choices) -> list[ChatMessage]:
    return [
        ChatMessage("system", render_system_message(tree_files, task_type)),
        ChatMessage("user", render_question(question_text, choices)),
    ]
