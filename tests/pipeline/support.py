"""Helpers of the end-to-end pipeline tests: a temporary git+DVC project and real command lines."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
# The smallest run that still has every stage kind: 1 epoch x 1 step of the tiny config.
TEST_OVERRIDES = ("train=tiny", "tracking=none", "train.epochs=1", "pools.diagnosis_size=4")
PROJECT_FILES = ("harness", "stages", "conf", "hydra_plugins", "dvc.yaml", ".dvcignore", "pyproject.toml")


def env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a command: the venv's python/dvc first, no HT__/MLflow leaks from the shell."""
    out = {k: v for k, v in os.environ.items() if not k.startswith(("HT__", "MLFLOW_", "HARNESS_"))}
    out.update(extra or {})
    out["PATH"] = f"{BIN}{os.pathsep}{out.get('PATH', '')}"
    out["PYTHONDONTWRITEBYTECODE"] = "1"
    return out


def run(args: list[str], cwd: Path, timeout: float = 600, extra_env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    done = subprocess.run(args, cwd=cwd, env=env(extra_env), capture_output=True, text=True, timeout=timeout, check=False)
    if done.returncode != 0:
        raise AssertionError(f"{' '.join(args)} failed ({done.returncode}):\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}")
    return done


def make_project(dest: Path, overrides: tuple[str, ...] = TEST_OVERRIDES, files: tuple[str, ...] | dict[str, Path] = (),
                 source: Path = REPO_ROOT) -> Path:
    """Copy the project's code and config from `source` (the repository's working tree unless told, e.g. a commit's
    export), and `files` (paths relative to `source`, e.g. a questions file, or {relative path in the project: source
    file}) into `dest`, write params.yaml for `overrides`, commit it."""
    dest.mkdir(parents=True)
    sources = dict(files) if isinstance(files, dict) else {name: source / name for name in files}
    for relative, origin in sources.items():
        (dest / relative).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(origin, dest / relative)
    for name in PROJECT_FILES:
        src = source / name
        if src.is_dir():
            shutil.copytree(src, dest / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(src, dest / name)
    (dest / ".dvc").mkdir()
    shutil.copy2(source / ".dvc" / "config", dest / ".dvc" / "config")
    (dest / ".gitignore").write_text("/.cache/\n/mlflow.db\n/mlruns/\n/runs/\n/multirun/\n__pycache__/\n")
    run([str(BIN / "python"), "-m", "harness.config.snapshot", *overrides], dest)
    run(["git", "init", "-q"], dest)
    run(["git", "add", "-A"], dest)
    run(["git", "-c", "user.email=test@example.com", "-c", "user.name=test", "commit", "-q", "-m", "init"], dest)
    return dest


def file_digests(root: Path) -> dict[str, str]:
    """relative path -> sha256 of every file under `root`."""
    return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def cache_counts(project: Path) -> tuple[int, int]:
    """(stored responses, persisted misses) of the project's LLM response cache."""
    db = project / ".cache" / "llm" / "responses.sqlite"
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        entries = conn.execute("SELECT COUNT(*) FROM responses").fetchone()[0]
        misses = conn.execute("SELECT value FROM cache_stats WHERE name = 'misses'").fetchone()[0]
    finally:
        conn.close()
    return int(entries), int(misses)


def table_rows(fragments: list[Path], table: str) -> list[tuple]:
    """All rows' primary-key-ish identity of `table` across fragments (created_at dropped)."""
    rows: list[tuple] = []
    for path in fragments:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            if not conn.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name=?", (table,)).fetchone():
                continue
            columns = [r[1] for r in conn.execute(f"PRAGMA table_info({table})") if r[1] != "created_at"]
            rows += [tuple(r) for r in conn.execute(f"SELECT {', '.join(columns)} FROM {table}")]
        finally:
            conn.close()
    return rows


def questions_and_harness(tmp_path: Path) -> Path:
    """9 questions of 3 task types in tmp_path/q.jsonl (returned) and a one-file harness in tmp_path/h."""
    questions = tmp_path / "q.jsonl"
    questions.write_text("".join(json.dumps({"qid": f"{t}-{i}", "task_type": t, "question": f"{t} {i}?",
                                             "choices": ["x", "y"], "answer": "A"}) + "\n"
                                 for t in ("a", "b", "c") for i in range(3)))
    (tmp_path / "h").mkdir()
    (tmp_path / "h" / "system_prompt.md").write_text("Answer with one letter.\n")
    return questions
