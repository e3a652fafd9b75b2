"""`[k/N]` and an estimate of the time left, logged as each `dvc repro` stage starts.

DVC runs every stage as its own process and tells it only its name
(``DVC_STAGE``), so the count and the estimate come from two things:

- the pipeline's stage order, derived from the config exactly as ``dvc.yaml``
  unrolls it (``library``, the training schedule, ``report``): k is the stage's
  position in it, N its length;
- a small ledger of stage start times (``.cache/pipeline/<state>/repro.jsonl``,
  outside DVC's view like the telemetry beside it). Entries of one `dvc repro`
  share the id of the ``dvc`` process that runs them. The time a stage took is
  the gap to the next start, DVC's own bookkeeping included. The time left is
  the sum, over this and every later stage, of the mean duration of its kind
  (rollout, evolve, gate, ...) measured in this invocation, or in the previous
  one for kinds not seen yet, or the mean of all measured stages.

Stages DVC skips as up to date are not counted as run; when a later stage is
skipped too the estimate is high by that stage's time.
"""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

from harness.atomic import atomic_write_text
from harness.kernel.schedule import STEP_KINDS, full_schedule
from harness.tracking.progress import format_seconds

LEDGER = "repro.jsonl"
KEEP_LINES = 600  # about ten full default runs


def pipeline_order(epochs: int, steps_per_epoch: int, improve_domains: Sequence[str] = ()) -> list[str]:
    """Every stage of dvc.yaml in the order `dvc repro` runs them, named as DVC names them.

    `foreach` over a list of mappings names items by index (``rollout@0`` is epoch 1, step 1), over a list of
    strings by value (``improve@counting``); the training chain comes first, the Harness² stages last."""
    order = ["library"]
    step_index = 0
    for item in full_schedule(epochs, steps_per_epoch):
        if item.kind in ("batches", "slow"):
            order.append(f"{item.kind}@{item.epoch - 1}")
        elif item.kind in STEP_KINDS:
            order.append(f"{item.kind}@{step_index}")
            step_index += item.kind == STEP_KINDS[-1]  # the step's last stage
        else:
            order.append(item.kind)
    order.append("report")
    order += [f"improve@{domain}" for domain in improve_domains]
    return order + (["improve_report"] if improve_domains else [])


def stage_kind(name: str) -> str:
    return name.split("@", 1)[0]


def _stat_fields(pid: int) -> list[str] | None:
    """The fields of /proc/<pid>/stat after the command name (index 0 = field 3, the state); None when gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def dvc_ancestor() -> tuple[int, int, str] | None:
    """(pid, generations up, start time) of the `dvc` process that runs this stage (Linux /proc; 1 = the
    parent); None when there is none."""
    pid = os.getppid()
    for generation in range(1, 5):  # dvc -> [shell] -> python
        try:
            argv = [a.decode(errors="replace") for a in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0") if a]
        except OSError:
            return None
        fields = _stat_fields(pid)
        if fields is None:
            return None
        if any(Path(arg).name == "dvc" for arg in argv[:3]):
            return pid, generation, fields[19]  # field 22 of stat: start time in clock ticks since boot
        pid = int(fields[1])
        if pid <= 1:
            return None
    return None


def dvc_invocation_id() -> str | None:
    """'<pid>:<start time>' of the `dvc` process that runs this stage; None when there is none."""
    found = dvc_ancestor()
    return None if found is None else f"{found[0]}:{found[2]}"


WATCH_INTERVAL_S = 0.1  # how often a stage under a shell looks whether its `dvc` process is still there


def end_with_dvc() -> bool:
    """Under `dvc repro`, have this stage sent SIGTERM when the `dvc` process that started it dies; True when
    arranged.

    DVC passes no signal on: `kill <dvc pid>` ends DVC at once and would leave the stage running, writing
    outputs DVC will never record, its MLflow run RUNNING. With this the stage ends as if it had been sent
    SIGTERM itself (the run KILLED, harness/pipeline/live_run.py). When DVC is the direct parent (bash runs the
    command with exec) the kernel sends it (Linux ``PR_SET_PDEATHSIG``). When a shell is in between (DVC runs
    ``$SHELL -c <cmd>``, ``/bin/sh`` when SHELL is unset: dash forks the command and waits) the parent-death
    signal would go to the shell, which survives DVC and passes nothing on; then a daemon thread looks every
    ``WATCH_INTERVAL_S`` whether that `dvc` process (pid and start time) is gone and sends this process SIGTERM."""
    if not os.environ.get("DVC_STAGE") or not sys.platform.startswith("linux"):
        return False
    found = dvc_ancestor()
    if found is None:
        return False
    dvc_pid, generation, started = found
    if generation == 1 and _parent_death_sigterm():
        if os.getppid() != dvc_pid:  # DVC died before the request: the kernel will not send it now
            _sigterm_self()
        return True
    import threading

    threading.Thread(target=_sigterm_when_gone, args=(dvc_pid, started), name="dvc-watch", daemon=True).start()
    return True


def _parent_death_sigterm() -> bool:
    import ctypes
    import signal

    pr_set_pdeathsig = 1
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(pr_set_pdeathsig, int(signal.SIGTERM), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def process_alive(pid: int, started: str) -> bool:
    """True while process `pid`, started at `started` (field 22 of its /proc stat), runs (a zombie has ended)."""
    fields = _stat_fields(pid)
    return fields is not None and len(fields) > 19 and fields[19] == started and fields[0] not in ("Z", "X", "x")


def _sigterm_when_gone(pid: int, started: str) -> None:
    while process_alive(pid, started):
        time.sleep(WATCH_INTERVAL_S)
    _sigterm_self()


def _sigterm_self() -> None:
    import signal

    os.kill(os.getpid(), signal.SIGTERM)


@dataclass(frozen=True)
class Start:
    invocation: str
    stage: str
    at: float  # wall-clock seconds


def read_ledger(path: Path) -> list[Start]:
    if not path.is_file():
        return []
    starts = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            row = json.loads(line)
            starts.append(Start(str(row["invocation"]), str(row["stage"]), float(row["at"])))
        except (ValueError, KeyError, TypeError):
            continue  # a line cut by a kill: the estimate just has one point less
    return starts


def append_start(path: Path, start: Start) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    line = json.dumps({"invocation": start.invocation, "stage": start.stage, "at": round(start.at, 3)}) + "\n"
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(line)
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    if len(lines) > KEEP_LINES:
        atomic_write_text(path, "".join(lines[-KEEP_LINES // 2:]))


def measured_durations(starts: Sequence[Start], now: float | None = None) -> list[tuple[str, float]]:
    """(stage, seconds) of each stage of one invocation whose successor started (or, with `now`, the last one)."""
    ordered = sorted(starts, key=lambda s: s.at)
    out = [(a.stage, b.at - a.at) for a, b in zip(ordered, ordered[1:])]
    if now is not None and ordered:
        out.append((ordered[-1].stage, now - ordered[-1].at))
    return out


def kind_means(durations: Iterable[tuple[str, float]]) -> dict[str, float]:
    sums: dict[str, list[float]] = {}
    for stage, seconds in durations:
        sums.setdefault(stage_kind(stage), []).append(seconds)
    return {kind: sum(values) / len(values) for kind, values in sums.items()}


def estimate_left(remaining: Sequence[str], current: dict[str, float], previous: dict[str, float]) -> float | None:
    """Seconds for `remaining` stages from per-kind means (this invocation first, then the previous one)."""
    measured = list(current.values()) or list(previous.values())
    if not measured:
        return None
    fallback = sum(measured) / len(measured)
    return sum(current.get(stage_kind(s), previous.get(stage_kind(s), fallback)) for s in remaining)


def progress_line(stage: str, order: Sequence[str], ledger: Sequence[Start], invocation: str | None, now: float,
                  label: str | None = None) -> str:
    """The line for `stage` (DVC's name; `label`: the entry point's, e.g. rollout@e1.s2) starting at `now`,
    given the ledger before this start."""
    shown = f"{stage} ({label})" if label and label != stage and not stage.startswith(f"{label}@") else stage
    if stage not in order:
        return f"[{shown}] starting"
    k, n = order.index(stage) + 1, len(order)
    head = f"[{k}/{n}] {shown}"
    if invocation is None:
        return f"{head} starting (time left: unknown outside `dvc repro`)"
    this_run = [s for s in ledger if s.invocation == invocation]
    earlier = [s for s in ledger if s.invocation != invocation]
    last_other = max(earlier, key=lambda s: s.at).invocation if earlier else None
    current = kind_means(measured_durations(this_run, now))
    previous = kind_means(measured_durations([s for s in earlier if s.invocation == last_other]))
    left = estimate_left(order[k - 1:], current, previous)
    if left is None:
        return f"{head} starting; time left: estimated once a stage has finished"
    done = f"{len(this_run)} stage{'s' if len(this_run) != 1 else ''} run in {format_seconds(now - min(s.at for s in this_run))}" \
        if this_run else "first stage of this run; estimate from the previous run"
    return f"{head} starting; about {format_seconds(left)} left ({done})"


def announce_stage(label: str, order: Sequence[str], ledger_dir: Path, *, now: float | None = None) -> str | None:
    """Record the start of the stage DVC is running (``DVC_STAGE``) and return its progress line; None when
    the process was not started by DVC."""
    stage = os.environ.get("DVC_STAGE")
    if not stage:
        return None
    now = time.time() if now is None else now
    invocation = dvc_invocation_id()
    path = Path(ledger_dir) / LEDGER
    ledger = read_ledger(path)
    line = progress_line(stage, order, ledger, invocation, now, label=label)
    if invocation is not None:
        append_start(path, Start(invocation, stage, now))
    return line
