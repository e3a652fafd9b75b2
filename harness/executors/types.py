"""Request/result records shared by every executor."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from harness.tree import HarnessTree


@dataclass(frozen=True)
class ExecutionRequest:
    label: str  # unique within a run, e.g. "base", "inv-1", "final-2"
    role: str  # "probe" | "editor" | "selector" | "reflector" | "judge"
    prompt: str
    harness: HarnessTree
    source_dir: Path | None = None  # task source files, copied into the worktree first


@dataclass
class ExecutionResult:
    label: str
    ok: bool
    text: str = ""  # the agent's final reply
    transcript: str = ""
    deliverable_files: dict[str, str] = field(default_factory=dict)
    cost_usd: float = 0.0
    duration_s: float = 0.0
    error: str = ""
    status: str = ""  # executor-specific terminal status ("exit:0", "timeout", "completed", ...)
    task_id: str = ""
