"""The questions schema (see docs/data.md).

Required: qid, task_type, question, answer. Optional: choices (list of
strings; multiple choice when present), difficulty (float, IRT logit),
context (list of media/context references), metadata (free JSON object).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Question:
    qid: str
    task_type: str
    question: str
    answer: str
    choices: tuple[str, ...] = ()
    difficulty: float | None = None
    context: tuple[str, ...] = ()
    metadata: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    @property
    def is_multiple_choice(self) -> bool:
        return bool(self.choices)
