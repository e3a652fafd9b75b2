"""Run an external CLI agent on a harness in a fresh temporary worktree.

The command is a template (a list of arguments, no shell) with placeholders
`{workdir}`, `{prompt}` and `{prompt_file}`. The worktree gets the task's
source files first, then the harness tree installed over them (harness files
win). The agent runs with a timeout (its whole process group is killed),
its stdout/stderr form the transcript, and every text file it created or
changed is returned as a deliverable. Flags that disable an agent's sandbox
are refused: the agent's own sandbox is the safety boundary.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from harness.executors.types import ExecutionRequest, ExecutionResult
from harness.tree import check_relative_path

# Flags that turn off the sandbox / approvals of known CLI agents.
FORBIDDEN_FLAGS = (
    "--dangerously-bypass-approvals-and-sandbox",
    "--dangerously-skip-permissions",
    "--yolo",
    "danger-full-access",
    "--no-sandbox",
)
PROMPT_FILE = ".harness_prompt.md"
MAX_DELIVERABLE_BYTES = 256 * 1024
MAX_DELIVERABLE_FILES = 200
MAX_TRANSCRIPT_CHARS = 200_000


class CommandTemplateError(ValueError):
    pass


def check_command_template(template: list[str] | tuple[str, ...]) -> None:
    """Raise CommandTemplateError when the template is empty or disables the agent's sandbox."""
    if not template:
        raise CommandTemplateError("executor.command is empty: give the agent command as a list of arguments")
    for arg in template:
        low = str(arg).lower()
        for flag in FORBIDDEN_FLAGS:
            if flag in low:
                raise CommandTemplateError(
                    f"executor.command contains {arg!r}: flags that disable the agent's sandbox are refused"
                )


def install_tree(workdir: Path, files: dict[str, str]) -> None:
    """Write `files` under `workdir`, refusing any path that would leave it."""
    root = workdir.resolve()
    for rel, text in files.items():
        safe = check_relative_path(rel)
        target = (root / safe).resolve()
        if root != target and root not in target.parents:
            raise ValueError(f"harness path {rel!r} escapes the worktree {root}")
        if target.is_symlink():
            raise ValueError(f"worktree path {rel!r} is a symlink; refusing to write through it")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")


def snapshot(workdir: Path) -> dict[str, tuple[int, int]]:
    """(size, mtime_ns) of every regular file under workdir, symlinks skipped."""
    out: dict[str, tuple[int, int]] = {}
    for dirpath, _dirs, files in os.walk(workdir):
        for name in files:
            path = Path(dirpath) / name
            if path.is_symlink():
                continue
            st = path.stat()
            out[path.relative_to(workdir).as_posix()] = (st.st_size, st.st_mtime_ns)
    return out


def collect_deliverables(workdir: Path, before: dict[str, tuple[int, int]]) -> dict[str, str]:
    """Text files created or changed by the agent (bounded in size and count)."""
    after = snapshot(workdir)
    changed = sorted(p for p, sig in after.items() if before.get(p) != sig and p != PROMPT_FILE)
    files: dict[str, str] = {}
    for rel in changed[:MAX_DELIVERABLE_FILES]:
        path = workdir / rel
        if path.stat().st_size > MAX_DELIVERABLE_BYTES:
            continue
        try:
            files[rel] = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
    return files


@dataclass
class CommandExecutor:
    command: list[str]
    timeout_s: float = 3600.0
    work_root: Path | None = None  # parent dir of the temporary worktrees (default: system temp)
    keep_worktrees: bool = False
    env: dict[str, str] = field(default_factory=dict)  # extra environment for the agent

    def __post_init__(self) -> None:
        check_command_template(self.command)

    def execute(self, request: ExecutionRequest) -> ExecutionResult:
        """Run the agent once. Failures come back as a result with ok=False, never raise."""
        started = time.monotonic()
        if self.work_root is not None:
            Path(self.work_root).mkdir(parents=True, exist_ok=True)
        workdir = Path(tempfile.mkdtemp(prefix=f"wt-{_safe_label(request.label)}-", dir=self.work_root))
        try:
            if request.source_dir is not None:
                shutil.copytree(request.source_dir, workdir, dirs_exist_ok=True, symlinks=False)
            install_tree(workdir, request.harness.to_dict())
            (workdir / PROMPT_FILE).write_text(request.prompt, encoding="utf-8")
            before = snapshot(workdir)
            argv = [
                str(a).format(workdir=str(workdir), prompt=request.prompt, prompt_file=str(workdir / PROMPT_FILE))
                for a in self.command
            ]
            status, transcript, text, error = self._run(argv, workdir)
            files = collect_deliverables(workdir, before)
            return ExecutionResult(
                label=request.label,
                ok=status == "exit:0",
                text=text,
                transcript=transcript,
                deliverable_files=files,
                duration_s=time.monotonic() - started,
                error=error,
                status=status,
            )
        except Exception as exc:  # a broken worktree is a failed rollout, not a crash of the round
            return ExecutionResult(label=request.label, ok=False, error=f"{type(exc).__name__}: {exc}",
                                   status="setup_error", duration_s=time.monotonic() - started)
        finally:
            if not self.keep_worktrees:
                shutil.rmtree(workdir, ignore_errors=True)

    def _run(self, argv: list[str], workdir: Path) -> tuple[str, str, str, str]:
        env = {**os.environ, **self.env}
        try:
            proc = subprocess.Popen(argv, cwd=workdir, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True, env=env, start_new_session=True)
        except OSError as exc:
            return "spawn_error", "", "", f"could not start {argv[0]!r}: {exc}"
        try:
            out, err = proc.communicate(timeout=self.timeout_s)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            out, err = proc.communicate()
            transcript = _transcript(out, err)
            return "timeout", transcript, "", f"agent exceeded timeout of {self.timeout_s:g}s and was killed"
        transcript = _transcript(out, err)
        status = f"exit:{proc.returncode}"
        error = "" if proc.returncode == 0 else f"agent exited with code {proc.returncode}"
        return status, transcript, (out or "").strip(), error


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _transcript(out: str | None, err: str | None) -> str:
    text = (out or "") + (f"\n[stderr]\n{err}" if err else "")
    return text[-MAX_TRANSCRIPT_CHARS:]


def _safe_label(label: str) -> str:
    return "".join(c if c.isalnum() or c in "-_" else "_" for c in label)[:40] or "run"
