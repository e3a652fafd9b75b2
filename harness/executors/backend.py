"""Where a batch of executions runs: in this process (default) or as Ray tasks.

`executor.backend=ray` sends each execution to a Ray task on the cluster that
`ray.init()` finds (a local instance when none is configured). Without Ray
installed, `make_backend("auto")` falls back to the in-process backend and
says so in the log; asking for "ray" explicitly without Ray is an error.
"""

from __future__ import annotations

import importlib.util
import logging
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Protocol

from harness.executors.types import ExecutionRequest, ExecutionResult

log = logging.getLogger(__name__)


class Executor(Protocol):
    def execute(self, request: ExecutionRequest) -> ExecutionResult: ...


class InProcessBackend:
    name = "inprocess"

    def __init__(self, max_workers: int = 1):
        self.max_workers = max(1, max_workers)

    def run_all(self, executor: Executor, requests: Sequence[ExecutionRequest]) -> list[ExecutionResult]:
        if self.max_workers == 1 or len(requests) <= 1:
            return [executor.execute(r) for r in requests]
        with ThreadPoolExecutor(max_workers=self.max_workers) as pool:
            return list(pool.map(executor.execute, requests))


def _execute_remote(executor: Executor, request: ExecutionRequest) -> ExecutionResult:
    return executor.execute(request)


class RayBackend:
    name = "ray"

    def __init__(self, address: str | None = None, num_cpus: int | None = None):
        import ray

        self._ray = ray
        if not ray.is_initialized():
            ray.init(address=address, num_cpus=num_cpus, include_dashboard=False, log_to_driver=False,
                     ignore_reinit_error=True)
        self._task = ray.remote(_execute_remote)

    def run_all(self, executor: Executor, requests: Sequence[ExecutionRequest]) -> list[ExecutionResult]:
        refs = [self._task.remote(executor, r) for r in requests]
        return list(self._ray.get(refs))


def ray_available() -> bool:
    return importlib.util.find_spec("ray") is not None


def make_backend(name: str = "auto", *, max_workers: int = 1, address: str | None = None):
    """`inprocess`, `ray`, or `auto` (Ray when installed, else in-process)."""
    if name == "inprocess":
        return InProcessBackend(max_workers)
    if name == "ray":
        if not ray_available():
            raise RuntimeError("executor.backend=ray but Ray is not installed: pip install 'harness-trainer[ray]'")
        return RayBackend(address=address)
    if name == "auto":
        if ray_available():
            return RayBackend(address=address)
        log.info("Ray is not installed; running executions in-process")
        return InProcessBackend(max_workers)
    raise ValueError(f"executor.backend must be 'inprocess', 'ray' or 'auto', got {name!r}")
