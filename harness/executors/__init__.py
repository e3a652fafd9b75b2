"""Executors run one agent rollout of a harness on a task, outside this process.

- `command.CommandExecutor`: an external CLI agent (Codex, OpenCode, ...) in a
  fresh temporary worktree with the harness installed over the task's source.
- `remote.TaskServiceExecutor`: a remote task service (upload bundle, create
  task with an idempotency key, poll, read trace/cost/files, cancel on timeout).
- `backend`: where probes run — in-process (default) or as Ray tasks.
"""

from harness.executors.types import ExecutionRequest, ExecutionResult

__all__ = ["ExecutionRequest", "ExecutionResult"]
