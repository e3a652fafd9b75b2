"""Where the project is: the directory holding ``conf/config.yaml`` (and, for DVC, ``dvc.yaml``).

Every path in the config is relative to the project root, and the shared
stores (``mlflow.db``, ``mlruns/``, the LLM response cache ``.cache/llm``, ``runs/``)
live there. Entry points find the root from the working directory upwards, so
`python -m stages.train` started in ``docs/`` runs in (and writes to) the
project root, never into ``docs/``; outside any project they stop with a
message that says where to run and, when there is no git repository, how to
start one (DVC needs git).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

# What makes a directory the project root: the config tree every path is relative to. `dvc.yaml` sits beside
# it in a clone; a project run only with `python -m stages.train` may have conf/ alone.
MARKERS = ("conf/config.yaml",)


class ProjectRootError(RuntimeError):
    """No project root above the working directory (the message says where to run)."""


def is_project_root(path: Path) -> bool:
    return all((path / marker).is_file() for marker in MARKERS)


def find_project_root(start: Path | None = None) -> Path | None:
    """The nearest directory from `start` (default: the working directory) upwards that holds every marker."""
    here = (start or Path.cwd()).resolve()
    for candidate in (here, *here.parents):
        if is_project_root(candidate):
            return candidate
    return None


def git_root(path: Path) -> Path | None:
    """The nearest directory from `path` upwards with a ``.git`` (a directory, or a worktree's file)."""
    here = path.resolve()
    for candidate in (here, *here.parents):
        if (candidate / ".git").exists():
            return candidate
    return None


def _installed_checkout() -> Path | None:
    """The project this code was installed from (an editable install of a clone), if it is one."""
    checkout = Path(__file__).resolve().parents[2]
    return checkout if is_project_root(checkout) and (checkout / "dvc.yaml").is_file() else None


def how_to_start_git(root: Path | None) -> str:
    """What to run so DVC has the git repository it needs (a clone has one; an unpacked copy does not)."""
    if root is not None and (root / ".dvc").is_dir():
        return f"run `git init` in {root} (it already has .dvc/), or clone the project with `git clone`"
    where = f" in {root}" if root is not None else ""
    return f"run `git init && dvc init`{where}, or clone the project with `git clone`"


def not_found_message(entry: str, start: Path) -> str:
    lines = [f"{entry}: {start} is not inside a Harness Trainer project "
             f"(no directory from here upwards holds {' and '.join(MARKERS)}, with dvc.yaml beside it for DVC)."]
    checkout = _installed_checkout()
    if checkout is not None:
        lines.append(f"Run it from the project root: cd {checkout}")
    else:
        lines.append("Run it from the project root: the directory of your clone that holds conf/ and dvc.yaml.")
    if git_root(start) is None:
        lines.append(f"No git repository here either. To start a project, {how_to_start_git(None)}.")
    return "\n".join(lines)


def no_git_warning(root: Path) -> str | None:
    """A one-line warning when the project is not in a git repository (None when it is)."""
    if git_root(root) is not None:
        return None
    return (f"{root} is not a git repository: `dvc repro` and `dvc exp` need one; "
            f"{how_to_start_git(root)}. (`python -m stages.train` works without it.)")


def require_project_root(entry: str, start: Path | None = None) -> Path:
    """The project root above `start`; raises ProjectRootError with `not_found_message` otherwise."""
    here = (start or Path.cwd()).resolve()
    root = find_project_root(here)
    if root is None:
        raise ProjectRootError(not_found_message(entry, here))
    return root


def enter_project_root(entry: str) -> Path:
    """Find the project root above the working directory and make it the working directory.

    Prints one line on stderr when the working directory changes, and the git warning when there is no
    repository; on failure prints the message and exits with status 2 (nothing is written anywhere)."""
    from harness.config.secrets import print_error

    here = Path.cwd().resolve()
    try:
        root = require_project_root(entry, here)
    except ProjectRootError as exc:
        print_error(str(exc))
        raise SystemExit(2) from None
    if root != here:
        print(f"{entry}: running in the project root {root} (started in {here})", file=sys.stderr)
        os.chdir(root)
    warning = no_git_warning(root)
    if warning:
        print_error(f"{entry}: warning: {warning}")
    return root


def stage_root_message(entry: str, params: Path) -> str | None:
    """For DVC stage entry points, which run where DVC runs them (the project root): None when the file
    they need (`params`) exists; otherwise a message naming the project root to run from (or how to find one)."""
    if params.is_file():
        return None
    here = Path.cwd().resolve()
    root = find_project_root(here)
    if root is None:
        return not_found_message(entry, here)
    if root != here:
        return (f"{entry}: {params} not found in {here}; stages run in the project root, as `dvc repro` runs them: "
                f"cd {root} (or run `dvc repro` from anywhere inside the project)")
    return None
