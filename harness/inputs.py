"""Reading what a stage wrote: a missing, corrupt, truncated or unreadable input is one named error.

`InputFileError` names the file, what it is, the cause, and what to do: usually
re-run the stage that wrote it, whose DVC name is looked up in the project's
``dvc.lock`` (`dvc repro -f <stage>`). SQLite failures of our own stores are
named the same way by `sqlite_failure` (disk full, read-only, not a
database, malformed).
"""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path
from typing import Any


class InputFileError(RuntimeError):
    """An input or store file that cannot be used (the message names the path, the cause and what to do)."""


def _lock_file(path: Path) -> Path | None:
    for directory in path.resolve().parents:
        if (directory / "dvc.lock").is_file():
            return directory / "dvc.lock"
    return None


def producing_stage(path: str | os.PathLike[str]) -> str | None:
    """The DVC stage whose output holds `path`, from the nearest ``dvc.lock`` above it (None if none)."""
    target = Path(path).resolve()
    lock = _lock_file(target)
    if lock is None:
        return None
    import yaml

    try:
        stages = (yaml.safe_load(lock.read_text(encoding="utf-8")) or {}).get("stages", {})
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return None
    for name, stage in stages.items():
        for out in stage.get("outs", []) or []:
            produced = (lock.parent / str(out.get("path", ""))).resolve()
            if target == produced or produced in target.parents:
                return str(name)
    return None


def rerun_advice(path: str | os.PathLike[str]) -> str:
    """What to do about a bad file another stage wrote."""
    stage = producing_stage(path)
    if stage is not None:
        return f"re-run the stage that wrote it: `dvc repro -f {stage}` (then `dvc repro`)"
    return ("re-run the stage that wrote it (`dvc repro -f <stage>`; `python -m stages.train` re-runs a stage "
            "whose directory has no DONE.json, so delete that directory and run again)")


def read_json(path: str | os.PathLike[str], what: str) -> Any:
    """The JSON document at `path`; InputFileError names `what` and the path when it is missing or unreadable."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputFileError(f"{p}: {what} is missing; {rerun_advice(p)}") from None
    except UnicodeDecodeError as exc:
        raise InputFileError(f"{p}: {what} is not UTF-8 text (byte {exc.start}): the file is corrupt; "
                             f"{rerun_advice(p)}") from None
    except OSError as exc:
        raise InputFileError(f"{p}: {what} cannot be read ({exc.strerror or exc}); {rerun_advice(p)}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        state = "empty" if not text.strip() else f"not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})"
        raise InputFileError(f"{p}: {what} is {state}: the file is corrupt or truncated; {rerun_advice(p)}") from None


_SQLITE_ADVICE = (
    ("full", "free disk space, then re-run the stage"),
    ("readonly", "make the file and its directory writable, then re-run the stage"),
    ("read-only", "make the file and its directory writable, then re-run the stage"),
    ("unable to open", "check that the directory exists and is writable, then re-run the stage"),
)


_FILE_WORDS = ("disk", "full", "readonly", "read-only", "unable to open", "not a database", "malformed", "i/o error")


def is_file_failure(exc: sqlite3.Error) -> bool:
    """True when SQLite failed because of the file (corrupt, read-only, disk full), not the statement."""
    if type(exc) is sqlite3.DatabaseError:  # "file is not a database", "database disk image is malformed"
        return True
    if isinstance(exc, sqlite3.OperationalError):  # also raised for bad SQL: only file causes count
        return any(word in str(exc).lower() for word in _FILE_WORDS)
    return False  # integrity, programming (bad binding), interface errors: the caller's, not the file's


def sqlite_failure(path: str | os.PathLike[str], what: str, exc: sqlite3.Error, *, corrupt_advice: str | None = None
                   ) -> InputFileError:
    """A named error for a failing SQLite file: the path, `what` it is, SQLite's cause and what to do."""
    p = Path(path)
    cause = str(exc) or type(exc).__name__
    if not os.access(p.parent, os.W_OK) or (p.exists() and not os.access(p, os.W_OK)):
        cause += " (read-only file or directory)"
    lowered = cause.lower()
    if "not a database" in lowered or "malformed" in lowered:
        advice = corrupt_advice or f"the file is corrupt; {rerun_advice(p)}"
    else:
        advice = next((hint for word, hint in _SQLITE_ADVICE if word in lowered), rerun_advice(p))
    return InputFileError(f"{p}: {what}: {cause}; {advice}")
