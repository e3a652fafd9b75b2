"""Run rollouts as tasks of a remote task service (seed 002, wiring layer).

Protocol (all JSON unless said, API key in the `X-API-Key` header):
  GET  /health                      -> 200 when the service is up
  POST /uploads  (multipart "file": a .tar.gz bundle)      -> {"upload_id"}
  POST /tasks    {"prompt", "upload_id", "idempotency_key", ...options} -> {"id", "status"}
       (the same idempotency key returns the existing task: a re-run resumes)
  GET  /tasks/{id}                  -> {"id", "status", "result_text"?, "error"?}
  GET  /tasks/{id}/trace            -> {"events": [...]}
  GET  /tasks/{id}/cost             -> {"usd_micros": int}
  GET  /tasks/{id}/files            -> {"files": [{"path", "content"}]}  (409: not readable here)
  POST /tasks/{id}/cancel

`result_text` is a JSON envelope {task, thread_id, cwd, status, text, usage};
the agent's reply is its `text`. It is unwrapped exactly once, in
`TaskServiceExecutor.run_task`, the single choke point every role goes through.
The API key comes from the environment only and is never logged.
"""

from __future__ import annotations

import io
import json
import logging
import os
import tarfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from harness.executors.types import ExecutionRequest, ExecutionResult
from harness.tree import HarnessTree, check_relative_path

log = logging.getLogger(__name__)

TERMINAL_STATES = frozenset({"completed", "succeeded", "failed", "error", "cancelled", "canceled"})
SUCCESS_STATES = frozenset({"completed", "succeeded"})


class TaskServiceError(RuntimeError):
    pass


def unwrap_result_text(result_text: str | None) -> str:
    """The agent's reply inside the service's JSON envelope (plain text is returned as is)."""
    if not result_text:
        return ""
    try:
        envelope = json.loads(result_text)
    except (json.JSONDecodeError, TypeError):
        return result_text
    if isinstance(envelope, dict) and isinstance(envelope.get("text"), str):
        return envelope["text"]
    return result_text


def make_bundle(files: dict[str, str], source_dir: Path | None = None) -> bytes:
    """A .tar.gz of the source files with the harness files over them (harness wins)."""
    merged: dict[str, bytes] = {}
    if source_dir is not None:
        for path in sorted(Path(source_dir).rglob("*")):
            if path.is_file() and not path.is_symlink():
                merged[path.relative_to(source_dir).as_posix()] = path.read_bytes()
    for rel, text in files.items():
        merged[check_relative_path(rel)] = text.encode("utf-8")
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for rel, data in sorted(merged.items()):
            info = tarfile.TarInfo(rel)
            info.size = len(data)
            info.mtime = 0
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


@dataclass
class TaskServiceExecutor:
    base_url: str
    run_tag: str
    api_key_env: str = "TASK_SERVICE_API_KEY"
    timeout_s: float = 3600.0
    poll_interval_s: float = 2.0
    request_timeout_s: float = 30.0
    task_options: dict[str, Any] = field(default_factory=dict)  # model, effort, ... passed through untouched

    def __post_init__(self) -> None:
        from harness.identity import validate_run_tag

        validate_run_tag(self.run_tag)
        self._client = httpx.Client(base_url=self.base_url.rstrip("/"), timeout=self.request_timeout_s,
                                    headers=self._headers())

    def _headers(self) -> dict[str, str]:
        key = os.environ.get(self.api_key_env, "")
        return {"X-API-Key": key} if key else {}

    def close(self) -> None:
        self._client.close()

    # -- HTTP helpers ------------------------------------------------------
    def _json(self, method: str, path: str, **kwargs: Any) -> Any:
        try:
            resp = self._client.request(method, path, **kwargs)
        except httpx.HTTPError as exc:
            raise TaskServiceError(f"{method} {path}: {type(exc).__name__}") from None
        if resp.status_code >= 400:
            raise TaskServiceError(f"{method} {path}: HTTP {resp.status_code}: {resp.text[:300]}")
        try:
            return resp.json()
        except ValueError:
            raise TaskServiceError(f"{method} {path}: response is not JSON") from None

    def health(self) -> bool:
        try:
            return self._client.get("/health").status_code == 200
        except httpx.HTTPError:
            return False

    def idempotency_key(self, role: str, label: str) -> str:
        from harness.identity import idempotency_key

        return idempotency_key(self.run_tag, role, label)

    # -- the single choke point ---------------------------------------------
    def run_task(self, *, role: str, label: str, prompt: str, bundle: bytes) -> ExecutionResult:
        """Upload, create (idempotent), poll to a terminal state, read cost/trace/files; cancel on timeout."""
        started = time.monotonic()
        key = self.idempotency_key(role, label)
        try:
            upload = self._json("POST", "/uploads", files={"file": (f"{label}.tar.gz", bundle, "application/gzip")})
            task = self._json("POST", "/tasks", json={"prompt": prompt, "upload_id": upload["upload_id"],
                                                       "idempotency_key": key, **self.task_options})
            task_id = str(task["id"])
        except (TaskServiceError, KeyError) as exc:
            return ExecutionResult(label=label, ok=False, error=f"create failed: {exc}", status="create_error",
                                   duration_s=time.monotonic() - started)
        state = task
        while str(state.get("status", "")).lower() not in TERMINAL_STATES:
            if time.monotonic() - started > self.timeout_s:
                try:
                    self._json("POST", f"/tasks/{task_id}/cancel")
                except TaskServiceError as exc:
                    log.warning("cancel of task %s failed: %s", task_id, exc)
                return ExecutionResult(label=label, ok=False, task_id=task_id, status="timeout",
                                       error=f"task {task_id} exceeded {self.timeout_s:g}s; cancelled",
                                       duration_s=time.monotonic() - started, cost_usd=self._cost(task_id))
            time.sleep(self.poll_interval_s)
            try:
                state = self._json("GET", f"/tasks/{task_id}")
            except TaskServiceError as exc:
                log.warning("poll of task %s failed (will retry): %s", task_id, exc)
        if state is task and "result_text" not in state:
            # resumed by idempotency key: the create reply of a finished task carries no result
            try:
                state = self._json("GET", f"/tasks/{task_id}")
            except TaskServiceError as exc:
                log.warning("read of resumed task %s failed: %s", task_id, exc)
        status = str(state.get("status", "")).lower()
        text = unwrap_result_text(state.get("result_text"))
        return ExecutionResult(
            label=label,
            ok=status in SUCCESS_STATES,
            text=text,
            transcript=self._trace(task_id),
            deliverable_files=self._files(task_id),
            cost_usd=self._cost(task_id),
            duration_s=time.monotonic() - started,
            error="" if status in SUCCESS_STATES else str(state.get("error") or f"task ended {status}"),
            status=status,
            task_id=task_id,
        )

    def execute(self, request: ExecutionRequest) -> ExecutionResult:
        bundle = make_bundle(request.harness.to_dict(), request.source_dir)
        return self.run_task(role=request.role, label=request.label, prompt=request.prompt, bundle=bundle)

    def _cost(self, task_id: str) -> float:
        try:
            return int(self._json("GET", f"/tasks/{task_id}/cost").get("usd_micros", 0)) / 1e6
        except (TaskServiceError, ValueError, TypeError):
            return 0.0

    def _trace(self, task_id: str) -> str:
        try:
            events = self._json("GET", f"/tasks/{task_id}/trace").get("events", [])
        except TaskServiceError:
            return ""
        return "\n".join(json.dumps(e, ensure_ascii=False) if not isinstance(e, str) else e for e in events)

    def _files(self, task_id: str) -> dict[str, str]:
        try:
            listing = self._json("GET", f"/tasks/{task_id}/files").get("files", [])
        except TaskServiceError:  # 409: the worktree is not readable from here
            return {}
        files: dict[str, str] = {}
        for entry in listing:
            try:
                files[check_relative_path(entry["path"])] = str(entry.get("content", ""))
            except (KeyError, ValueError):
                continue  # a bad entry is dropped, the round goes on
        return files


def preflight_checks(*, run_tag: str, base_dir: Path, prompt: str, source_dir: Path | None,
                     executor: TaskServiceExecutor | None) -> list[str]:
    """Problems that would make a run fail, found without creating any task (empty list = ready)."""
    from harness.identity import validate_run_tag

    problems: list[str] = []
    try:
        validate_run_tag(run_tag)
    except ValueError as exc:
        problems.append(f"run tag: {exc}")
    base = Path(base_dir)
    if not base.is_dir():
        problems.append(f"base harness dir {base} does not exist")
    else:
        try:
            tree = HarnessTree.load(base)
            if "AGENTS.md" not in tree and "system_prompt.md" not in tree:
                problems.append(f"base harness dir {base} has neither AGENTS.md nor system_prompt.md")
        except ValueError as exc:
            problems.append(f"base harness dir {base}: {exc}")
    if source_dir is not None and not Path(source_dir).is_dir():
        problems.append(f"source dir {source_dir} does not exist")
    if not prompt or not prompt.strip():
        problems.append("task prompt is empty")
    if executor is not None and not executor.health():
        problems.append(f"task service at {executor.base_url} did not answer GET /health with 200")
    return problems
