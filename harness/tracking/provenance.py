"""Provenance of a run: the git commit of the code that produced it, and who ran it."""

from __future__ import annotations

import getpass
import os
import subprocess
from pathlib import Path


def git_commit(root: Path) -> str | None:
    """HEAD's commit hash of the repository at `root`, or None outside a git work tree."""
    try:
        done = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    commit = done.stdout.strip()
    return commit if done.returncode == 0 and len(commit) >= 40 else None


def git_dirty(root: Path) -> bool | None:
    """True when tracked files differ from HEAD (None outside a git work tree)."""
    try:
        done = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=root, capture_output=True, text=True, timeout=10, check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return bool(done.stdout.strip()) if done.returncode == 0 else None


def current_user() -> str | None:
    """The login name running this process (MLflow's ``mlflow.user``), None when the system cannot tell."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no passwd entry for this uid (containers) and no LOGNAME/USER
        return os.environ.get("USER") or None
