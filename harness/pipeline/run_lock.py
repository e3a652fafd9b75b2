"""One job per run directory: an exclusive `flock` on ``<run dir>/.job.lock`` held for the job's life.

A second `python -m stages.train` whose run directory (``hydra.run.dir``, or a
sweep job's ``<sweep dir>/<n>``) is held by a live job is refused at once with
`RunDirInUse`, naming the directory and the owner's PID. The kernel drops the
lock when its owner exits however it exits (``kill -9`` included), so a killed
job's directory is free to resume; the PID left in the file is only a label.
"""

from __future__ import annotations

import fcntl
import os
import socket
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

LOCK_NAME = ".job.lock"

# Lock files this process holds, with their descriptor: flock locks belong to an open
# file description, so a second open() of the same file in this process would refuse its own owner.
_held: dict[Path, int] = {}


class RunDirInUse(RuntimeError):
    """The run directory is locked by another live job."""


def _owner(fd: int) -> str:
    os.lseek(fd, 0, os.SEEK_SET)
    text = os.read(fd, 256).decode("utf-8", "replace").strip()
    return text or "unknown (the owner is starting)"


def acquire(directory: Path, name: str = LOCK_NAME, *, wait: bool = False) -> bool:
    """Lock `directory` (created if missing) for this process through its file `name`; False when this process
    already holds it. With `wait`, block until the holder lets go (a short critical section, not a job).

    Raises RunDirInUse naming the directory and the owner's PID when another process holds it (without `wait`)."""
    directory = Path(directory).resolve()
    if directory / name in _held:
        return False
    directory.mkdir(parents=True, exist_ok=True)
    fd = os.open(directory / name, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
    except BlockingIOError:
        owner = _owner(fd)
        os.close(fd)
        raise RunDirInUse(
            f"run directory {directory} is in use by another job (PID {owner}, lock {directory / LOCK_NAME}); "
            "wait for it to finish, or give this job another directory (hydra.run.dir=..., or leave the "
            "default, which is unique per job)") from None
    os.ftruncate(fd, 0)
    os.write(fd, f"{os.getpid()} on {socket.gethostname()}\n".encode())
    _held[directory / name] = fd
    return True


def release(directory: Path, name: str = LOCK_NAME) -> None:
    """Drop this process's lock on `directory` (no-op when it holds none)."""
    fd = _held.pop(Path(directory).resolve() / name, None)
    if fd is not None:
        os.close(fd)  # closing the last descriptor of the open file description releases the flock


@contextmanager
def run_dir_lock(directory: Path, name: str = LOCK_NAME, *, wait: bool = False) -> Iterator[None]:
    """Hold the lock on `directory` (file `name`) for the block; a lock this process already held stays held."""
    acquired = acquire(directory, name, wait=wait)
    try:
        yield
    finally:
        if acquired:
            release(directory, name)


def explicit_dirs(argv: Sequence[str]) -> list[Path]:
    """Run/sweep directories given literally on a `stages.train` command line (``hydra.run.dir=X``,
    ``hydra.sweep.dir=X`` with ``-m``/``--multirun``), so they can be locked before Hydra writes into them.
    Values with interpolations (``${now:...}``) are left to the job's own lock."""
    multirun = any(arg in ("-m", "--multirun") for arg in argv)
    wanted = "hydra.sweep.dir=" if multirun else "hydra.run.dir="
    found: list[Path] = []
    for arg in argv:
        if arg.startswith(wanted):
            value = arg[len(wanted):].strip().strip("'\"")
            if value and "${" not in value:
                found.append(Path(value))
    return found
