"""Load-time checks of where a run writes and logs: output paths and the tracking URI.

An output path (`OUTPUT_PATH_KEYS`) is either relative and inside the project
(no `..` out of it, not under `.git/` or `.dvc/`), or explicitly absolute and
writable. Either way no existing part of it may be a file (`/dev/null/x`). The
directories whose stages replace their own subdirectories (`train.state_dir`,
`improve.out_dir`) may not be the project root, above it, or inside its code
and config (`conf/`, `harness/`, ...).
The project is the working directory: DVC runs every stage from the
repository root, `stages.train` from where the command ran.

A tracking URI must be one MLflow can open: `sqlite:///<path>` (three
slashes; the path obeys the output-path rule), a server (`http(s)://host`),
a database (`postgresql://...`, `mysql://...`, `mssql://...`), `file:` or
`databricks`. A misspelt URI such as `sqlite://x.db` is refused at load, not
in the report stage at the end of a run.
"""

from __future__ import annotations

import os
import re
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import urlsplit

from harness.config.errors import Violation

OUTPUT_PATH_KEYS = (
    "train.state_dir", "benchmark.questions_path", "pools.path", "llm.cache_dir", "improve.out_dir",
    "improve.report_dir",
)
_RESERVED = (".git", ".dvc")  # a repository's own metadata: never a place for run outputs
# Directories whose stages replace their own subdirectories (`fresh_output` empties init/, e1/s1/rollout/, <domain>/):
# they must be a directory of their own, never the project root or its code and config.
OWN_DIRECTORY_KEYS = ("train.state_dir", "improve.out_dir")
PROJECT_SOURCES = ("conf", "harness", "stages", "hydra_plugins", "tests")
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*):")
_DATABASE_SCHEMES = ("postgresql", "postgres", "mysql", "mssql")
RULE = "must be a relative path inside the project, or an absolute path to a writable place"


def _existing_ancestor(path: Path) -> Path:
    probe = path
    while not os.path.lexists(probe) and probe.parent != probe:
        probe = probe.parent
    return probe


def output_path_problem(value: Any, root: Path | None = None) -> str | None:
    """Why `value` cannot be an output path (None when it can); relative paths are taken against `root`
    (default: the working directory)."""
    if not isinstance(value, str) or value.strip() == "":
        return "must be a non-empty path"
    if any(ord(ch) < 32 for ch in value):
        return "must not contain control characters (newline, tab, ...)"
    base = Path.cwd() if root is None else Path(root)
    if os.path.isabs(value):
        target = Path(value)
    else:
        parts = PurePosixPath(os.path.normpath(value.replace("\\", "/"))).parts
        if parts[:1] == ("..",):
            return f"{RULE}: {value!r} leaves the project (give an absolute path to write outside it)"
        if parts[:1] and parts[0] in _RESERVED:
            return f"{RULE}: {value!r} is inside {parts[0]}/, the repository's own metadata"
        target = base / value
    ancestor = _existing_ancestor(target)
    if ancestor != target and not ancestor.is_dir():
        return f"{RULE}: {ancestor} exists and is not a directory"
    directory = ancestor if ancestor != target or target.is_dir() else target.parent
    if not os.access(directory, os.W_OK | os.X_OK):
        return f"{RULE}: {directory} is not writable"
    return None


def own_directory_problem(value: Any, root: Path | None = None) -> str | None:
    """Why `value` cannot hold a run's stage directories (None when it can): the project root, a directory above
    it, or the project's code and config would get init/, e1/, holdout/ ... written (and replaced) inside them."""
    if not isinstance(value, str) or value.strip() == "":
        return None  # output_path_problem reports it
    base = (Path.cwd() if root is None else Path(root)).resolve()
    target = Path(os.path.normpath(base / value.replace("\\", "/")))
    rule = "must be a directory of its own inside the project (e.g. state)"
    if target == base or target in base.parents:
        return (f"{rule}: {value!r} is the project root{' or above it' if target != base else ''}, where each stage "
                "would write (and first empty) its own directories beside conf/ and dvc.yaml")
    try:
        first = target.relative_to(base).parts[0]
    except ValueError:
        return None  # outside the project: an explicit absolute path
    if first in PROJECT_SOURCES:
        return f"{rule}: {value!r} is inside {first}/, the project's own code and config"
    return None


def tracking_uri_problem(uri: Any, root: Path | None = None) -> str | None:
    """Why `uri` cannot be a tracking URI (None when it can; None and "" mean the default database)."""
    if uri in (None, ""):
        return None
    if not isinstance(uri, str):
        return "must be a URI string"
    match = _SCHEME.match(uri)
    if match is None:
        problem = output_path_problem(uri, root)  # a bare path: MLflow's file store
        return None if problem is None else f"a bare path is MLflow's file store, which {problem}"
    scheme = match.group(1).lower()
    base = scheme.split("+", 1)[0]
    if base == "sqlite":
        if not uri.startswith("sqlite:///") or uri == "sqlite:///":
            return ("a SQLite URI is sqlite:///<file> (three slashes, then the database file; "
                    "sqlite:////abs/mlflow.db for an absolute path)")
        problem = output_path_problem(uri[len("sqlite:///"):], root)
        return None if problem is None else f"the database file {problem}"
    parts = urlsplit(uri)
    if base in ("http", "https"):
        return None if parts.hostname else f"a tracking server URI is {base}://<host>[:port] (no host in {uri!r})"
    if base in _DATABASE_SCHEMES:
        return None if parts.netloc else f"a database URI is {scheme}://<user>@<host>/<database> (no host)"
    if base in ("file", "databricks", "databricks-uc", "uc"):
        return None
    return (f"unknown scheme {match.group(1)!r}: use sqlite:///<file>, http(s)://<host>, "
            "postgresql://<user>@<host>/<db>, mysql://..., file:<dir> or databricks")


def location_violations(cfg: Any, root: Path | None = None) -> list[Violation]:
    """Every output path and tracking URI of `cfg` that cannot be used, as violations naming the key."""
    from omegaconf import OmegaConf

    found: list[Violation] = []
    for key in OUTPUT_PATH_KEYS:
        value = OmegaConf.select(cfg, key, default=None)
        if value is None:
            continue
        problem = output_path_problem(value, root) or (own_directory_problem(value, root) if key in OWN_DIRECTORY_KEYS else None)
        if problem:
            found.append(Violation(key, value, problem))
    uri = OmegaConf.select(cfg, "tracking.tracking_uri", default=None)
    problem = tracking_uri_problem(uri, root)
    if problem:
        found.append(Violation("tracking.tracking_uri", uri, problem))
    return found
