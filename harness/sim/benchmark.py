"""`SimBenchmark`: the simulated world as a BenchmarkAdapter (`benchmark=sim`).

One cheap simulated tool, `lookup_frames(focus)`, whose result is a
deterministic text per (world seed, qid, focus). It never changes the
solver's chance of being right (the simulated solver's sample depends only
on the harness text it reads); it exists so the tool-call path, tool guides
and tool usage packs are exercised offline.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from harness.bench.protocol import (
    ToolArgumentError,
    ToolDispatch,
    ToolSpec,
    UnknownToolError,
)
from harness.bench.scoring import choice_match
from harness.questions import Question
from harness.sim.world import STEM_OBJECTS, TOOL_GUIDES, World
from harness.tree import HarnessTree

_SCENES = ("a kitchen counter", "a busy street", "an office desk", "a living room", "a workshop bench", "a park path")
_ACTIONS = ("someone picks it up", "it stays still", "a hand points at it", "the camera pans past it", "a second person enters")


class SimBenchmark:
    """BenchmarkAdapter over a `World` (questions, base harness, the `lookup_frames` tool)."""

    name = "sim"

    def __init__(self, world: World):
        self.world = world
        self.task_types = tuple(world.task_type_names)

    @classmethod
    def from_config(cls, bench_cfg) -> "SimBenchmark":
        return cls(World.from_config(bench_cfg))

    def questions(self) -> list[Question]:
        return list(self.world.questions)

    def base_harness(self) -> HarnessTree:
        return self.world.base_harness()

    def tools(self) -> list[ToolSpec]:
        return [ToolSpec(name, guide.split("\n", 1)[0]) for name, guide in TOOL_GUIDES.items()]

    def tool_dispatch(self, question: Question) -> ToolDispatch | None:
        seed = self.world.seed

        def dispatch(name: str, arguments: Mapping[str, Any]) -> str:
            if name != "lookup_frames":
                raise UnknownToolError(f"unknown tool {name!r}; available: lookup_frames")
            focus = arguments.get("focus") if isinstance(arguments, Mapping) else None
            if not isinstance(focus, str) or not focus.strip():
                raise ToolArgumentError('lookup_frames needs {"focus": "<non-empty string>"}')
            return lookup_frames(seed, question.qid, focus.strip())

        return dispatch

    def score(self, question: Question, predicted: str | None) -> bool:
        return choice_match(question, predicted)


def lookup_frames(seed: int, qid: str, focus: str) -> str:
    """Deterministic frame description for (seed, qid, focus)."""
    d = hashlib.blake2b(f"{seed}|{qid}|{focus}".encode("utf-8"), digest_size=8).digest()
    start = d[0] % 90
    return (
        f"frames {start:02d}s-{start + 3 + d[1] % 6:02d}s: {_SCENES[d[2] % len(_SCENES)]}; "
        f"the {STEM_OBJECTS[d[3] % len(STEM_OBJECTS)]} is visible while {_ACTIONS[d[4] % len(_ACTIONS)]} "
        f"(focus: {focus[:60]})"
    )
