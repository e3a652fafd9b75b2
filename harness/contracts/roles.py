"""The roles an LLM call is made in; config keys (`llm.models.<role>`), providers and prompts name them."""

from __future__ import annotations

import enum


class Role(str, enum.Enum):
    SOLVER = "solver"
    DIAGNOSER = "diagnoser"
    EDITOR = "editor"
    SELECTOR = "selector"
    REFLECTOR = "reflector"
    JUDGE = "judge"
    PROBE = "probe"  # Harness² probe rollouts (an agent run on a candidate tree)
