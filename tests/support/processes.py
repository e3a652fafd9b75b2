"""Processes of a test, seen through /proc: the members of a process group with their command lines, and a
SIGSTOP that waits until the process is really stopped (for tests that must act on a process at an exact point)."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path


def _stat_fields(pid: int | str) -> list[str]:
    """The fields of /proc/<pid>/stat after the command name (state first, then ppid, pgrp, ...)."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def _processes() -> Iterator[tuple[int, list[str]]]:
    """(pid, stat fields) of every live process (processes that end while looked at are skipped)."""
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, IndexError):
                yield int(entry.name), _stat_fields(entry.name)


def group_members(pgid: int) -> Iterator[tuple[int, list[bytes]]]:
    """(pid, argv) of every live process of group `pgid`."""
    for pid, fields in _processes():
        if fields[2] == str(pgid):
            with contextlib.suppress(OSError):
                yield pid, Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")


def stop(pid: int, timeout: float = 10.0) -> bool:
    """SIGSTOP `pid` and wait until it is stopped (the signal is delivered asynchronously); False when the process
    ended (or became a zombie) first or did not stop within `timeout` seconds."""
    deadline = time.monotonic() + timeout
    try:
        os.kill(pid, signal.SIGSTOP)
        while (state := _stat_fields(pid)[0]) not in "tT":
            if state in "ZX" or time.monotonic() > deadline:
                return False
            time.sleep(0.0005)
    except (ProcessLookupError, FileNotFoundError):
        return False
    return True


def resume(pid: int) -> None:
    """SIGCONT `pid`, if it still exists."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGCONT)


def children(pid: int) -> list[int]:
    """The live child processes of `pid`."""
    return [child for child, fields in _processes() if fields[1] == str(pid)]


def stop_when(pids: Callable[[], list[int]], ready: Callable[[], bool], what: str, timeout: float,
              appear: bool = False) -> list[int]:
    """Step the processes `pids()` names (SIGSTOP them all, look, SIGCONT, ~2 ms) until `ready()` holds while they
    are stopped; they are left stopped and returned. For a test that must act on a process at an exact point of its
    run, closer than a polling loop can be sure to catch on a loaded machine. No process to stop fails at once,
    unless `appear` (processes still to be started: wait for them)."""
    deadline = time.monotonic() + timeout
    while True:
        stopped = [pid for pid in pids() if stop(pid)]
        assert stopped or appear, f"the processes ended before {what}"
        if stopped and ready():
            return stopped
        for pid in stopped:
            resume(pid)
        assert time.monotonic() < deadline, f"never {what}"
        time.sleep(0.002)
