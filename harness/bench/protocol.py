"""What a benchmark gives the trainer: questions, a base harness, tools, scoring.

A `ToolDispatch` runs one tool call for one question: `(name, arguments) ->
result text` (sync or async). It raises `UnknownToolError` for a name it
does not serve and `ToolArgumentError` for bad arguments; AgentLoop records
any exception as a tool error in the trace and shows it to the model.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, Union, runtime_checkable

from harness.questions import Question
from harness.tree import HarnessTree

ToolResult = Union[str, Awaitable[str]]
ToolDispatch = Callable[[str, Mapping[str, Any]], ToolResult]
Scorer = Callable[[Question, Union[str, None]], Union[bool, float]]  # a float in [0, 1] is a soft score (bench/soft.py)


class ToolError(Exception):
    """A tool call that could not be served; the message is shown to the model."""


class UnknownToolError(ToolError):
    pass


class ToolArgumentError(ToolError):
    pass


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str


@runtime_checkable
class BenchmarkAdapter(Protocol):
    name: str
    task_types: tuple[str, ...]

    def questions(self) -> list[Question]:
        """Every question of the benchmark (validated)."""
        ...

    def base_harness(self) -> HarnessTree:
        """The starting harness in the native layout (system_prompt.md, tools/, skills/)."""
        ...

    def tools(self) -> list[ToolSpec]:
        ...

    def tool_dispatch(self, question: Question) -> ToolDispatch | None:
        """The tools the solver may call for `question`; None when it has none."""
        ...

    def score(self, question: Question, predicted: str | None) -> bool | float:
        """Right or wrong, or a soft score: a float in [0, 1] (harness/bench/soft.py)."""
        ...


def no_tools(name: str, arguments: Mapping[str, Any]) -> str:
    """Dispatch for a question without tools."""
    raise UnknownToolError(f"unknown tool {name!r}: no tools are available for this question")
