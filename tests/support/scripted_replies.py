"""A scripted OpenAI-compatible "model" for end-to-end tests of the real path (served by tests/support/openai_server.py).

It answers every role in its real reply format, from the request text only:
- editor (FORMAT: edit-ops): adds the rule `Rule for <task type>: check every step.` to the target file;
- diagnoser (FORMAT: diagnosis), momentum (FORMAT: momentum): a fixed well-formed block;
- solver: the right letter (from `answers`, qid-free: keyed by question text) when its skill states the rule of
  the question's task type, else the right letter for one question in three (by a stable hash), else a wrong one.
So an edit that states a task type's rule really helps that task type, and the gate can see it.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from typing import Any

LETTERS = "ABCD"
_TASK_TYPE = re.compile(r"^Task type: (\S+)$", re.M)
_SKILL = re.compile(r"^# Skill: (\S+)$", re.M)
_QUESTION = re.compile(r"^Question: (.*)$", re.M)


def rule_for(task_type: str) -> str:
    return f"Rule for {task_type}: check every step."


class ScriptedModel:
    def __init__(self, answers: Mapping[str, str]):
        self.answers = dict(answers)  # question text -> right letter

    def __call__(self, body: Any) -> str:
        messages = body.get("messages", []) if isinstance(body, dict) else []
        system = messages[0]["content"] if messages else ""
        user = "\n".join(m["content"] for m in messages[1:2])
        if "FORMAT: edit-ops" in system:
            task_type = _TASK_TYPE.search(user)
            if not task_type:
                return "<no-change>nothing to add</no-change>"
            return f'<edit op="add"><new>{rule_for(task_type.group(1))}</new><why>the failures skip steps</why></edit>'
        if "FORMAT: diagnosis" in system:
            return "<diagnosis>The agent skipped a step of the calculation.</diagnosis>"
        if "FORMAT: momentum" in system:
            return "<guidance>\n- Keep checking every step.\n</guidance>"
        question = _QUESTION.search(user)
        skill = _SKILL.search(system)
        if not question or not skill or question.group(1).strip() not in self.answers:
            return "I cannot tell.\nANSWER: A"
        right = self.answers[question.group(1).strip()]
        lucky = int(hashlib.sha1(question.group(1).encode()).hexdigest(), 16) % 3 == 0
        if rule_for(skill.group(1)) in system or lucky:
            return f"Checked every step.\nANSWER: {right}"
        return f"Guessing.\nANSWER: {LETTERS[(LETTERS.index(right) + 1) % 4]}"
