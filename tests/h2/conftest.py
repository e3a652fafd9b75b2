"""Deterministic roles and a toy task for the Harness² tests (real files, real parsers)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable, Mapping, Sequence

import pytest

from harness.h2.adapters import Observation, Rollout
from harness.h2.roles import Editor, FunctionResponder, Reflector, Roles, Selector
from harness.h2.surfaces import CODEX, Surface
from harness.tree import HarnessTree

SKILL = "---\nname: ledger\ndescription: totalling a ledger\n---\nRun `python scripts/total.py`.\n"
BASE = HarnessTree({"AGENTS.md": "# Agent\nUse the ledger skill.\nlevel: 0\n", ".agents/skills/ledger/SKILL.md": SKILL, "scripts/total.py": "print(0)\n"})


def level(tree: Mapping[str, str]) -> int:
    m = re.search(r"level: (\d+)", tree.get("AGENTS.md", ""))
    return int(m.group(1)) if m else -1


@dataclass
class ToyTask:
    """Deliverable = the harness's 'level' line; labels in `dead` fail; each execution costs `usd`."""

    task_id: str = "toy-1"
    domain: str = "toys"
    surface: Surface = CODEX
    leak_globs: tuple[str, ...] = ("*answer_key*",)
    base: HarnessTree = BASE
    dead: Callable[[str], bool] = lambda label: False
    usd: float = 0.01
    executed: list[str] = field(default_factory=list)
    source: Mapping[str, str] = field(default_factory=lambda: {"data.csv": "a,b\n1,2\n", "answer_key.txt": "42\n"})

    @property
    def prompt(self) -> str:
        return "Raise the level."

    def task_header(self) -> str:
        return "Task type: toy"

    def base_harness(self) -> HarnessTree:
        return self.base

    def source_files(self) -> Mapping[str, str]:
        return self.source

    def validate_tree(self, tree: HarnessTree) -> Sequence[str]:
        return []

    async def execute(self, label: str, harness: HarnessTree) -> Rollout:
        self.executed.append(label)
        if self.dead(label):
            return Rollout(label, harness.fingerprint, False, "", (Observation("1", "error", "crashed"),), cost_usd=self.usd, error="agent crashed")
        return Rollout(label, harness.fingerprint, True, f"level {level(harness)}\n", (Observation("1", "output", f"level {level(harness)}"),), cost_usd=self.usd)


def stage_of(messages) -> str:
    return re.search(r"^STAGE: (\w+)$", messages[0].content, re.M).group(1)


def current_level(messages) -> int:
    m = re.search(r"=== HARNESS FILE: AGENTS.md ===\n(.*?)=== END HARNESS FILE ===", messages[-1].content, re.S)
    return level({"AGENTS.md": m.group(1)}) if m else -1


def bump_reply(messages, by: int = 1) -> str:
    n = current_level(messages) + by
    return f"=== HARNESS FILE: AGENTS.md ===\n# Agent\nUse the ledger skill.\nlevel: {n}\n=== END HARNESS FILE ===\n<notes>level {n}</notes>"


def leveller(role, messages, key) -> str:
    """INV +1, DOM +2; compose adopts the best pool entry's level."""
    stage = stage_of(messages)
    if stage == "inv":
        return bump_reply(messages, 1)
    if stage == "dom":
        return bump_reply(messages, 2)
    pool = messages[-1].content.split("## Pool", 1)[-1]
    levels = [int(x) for x in re.findall(r"\+level: (\d+)", pool)]
    if not levels:
        return "<no-change>nothing in the pool</no-change>"
    return bump_reply(messages, max(levels) - current_level(messages))


def pick_highest(role, messages, key) -> str:
    cands = dict(re.findall(r"^## Candidate (\w+)\nlevel (\d+)", messages[-1].content, re.M))
    best = max(cands, key=lambda c: (int(cands[c]), c))
    return f"```choice\n{best}\n```\n<why>highest level</why>"


def good_reflection(role, messages, key) -> str:
    return '<experience>{"cue": "levels", "lesson": "raise the level", "evidence": "final rollout shows a higher level", "confidence": 0.7}</experience>'


def make_roles(editor=leveller, selector=pick_highest, reflector=good_reflection, usd: float = 0.0) -> Roles:
    return Roles(
        editor=Editor(FunctionResponder(editor, usd)),
        selector=Selector(FunctionResponder(selector, usd)) if selector else None,
        reflector=Reflector(FunctionResponder(reflector, usd)) if reflector else None,
    )


@pytest.fixture
def toy():
    return ToyTask()
