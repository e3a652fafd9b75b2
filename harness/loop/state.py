"""Pipeline state directories, the stage schedule and resume planning.

A *state directory* is what a workspace-carrying stage (pools/init, gate,
slow) writes, and what the next stage reads:

    <dir>/workspace/        the workspace (harness/workspace.py layout: versions, manifest, best pointer)
    <dir>/checkpoint.json   TrainState (harness/loop/checkpoint.py)
    <dir>/gate_pools.json   the information ladder (kernel GatePools)
    <dir>/lineage.json      run-log fragments of every earlier stage of this chain + stop flag
    <dir>/runlog.sqlite     this stage's own rows only
    <dir>/report.json       step or epoch report
    <dir>/llm_spend.json    what the stage's LLM calls cost, per role (harness/llm/metering.py; LLM stages)
    <dir>/DONE.json         written last; its presence means the stage finished

Non-carrying stages (batches, rollout, evolve, holdout) write their own
files plus DONE.json. `copy_state_dir` copies a predecessor's carried files
(never its runlog/report/DONE) into a fresh output directory.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.atomic import atomic_write_json
from harness.inputs import read_json
from harness.kernel.schedule import STEP_KINDS, StageItem, StateLayout
from harness.llm.metering import SPEND_FILE, StageSpend
from harness.loop.checkpoint import load_checkpoint, save_checkpoint
from harness.loop.train_state import Progress, TrainState
from harness.workspace import copy_workspace, drop_empty_run_scratch

DONE = "DONE.json"
LINEAGE = "lineage.json"
RUNLOG = "runlog.sqlite"
CHECKPOINT = "checkpoint.json"
WORKSPACE = "workspace"
GATE_POOLS = "gate_pools.json"
REPORT = "report.json"
CARRIED = (WORKSPACE, CHECKPOINT, GATE_POOLS)


class StateError(RuntimeError):
    """A state directory is missing, unfinished or inconsistent."""


def is_done(path: str | Path) -> bool:
    return (Path(path) / DONE).is_file()


def require_done(path: str | Path, what: str) -> Path:
    p = Path(path)
    if not is_done(p):
        raise StateError(f"{what} state {p} is not finished (no {DONE}); run the stage that writes it first")
    return p


def fresh_output(out: str | Path) -> Path:
    """Empty `out` (a stage re-run starts from nothing; the response cache makes it cheap)."""
    p = Path(out)
    if p.exists():
        shutil.rmtree(p)
    p.mkdir(parents=True)
    return p


def finalize_runlog(db: str | Path) -> None:
    """Fold the WAL into the file and leave rollback-journal mode: the file alone is the artifact.

    Readers of a WAL-mode file create -wal/-shm files next to it, which would
    change another stage's (DVC-hashed) output; a DELETE-mode file is read
    without touching its directory.
    """
    import sqlite3

    path = Path(db)
    if not path.exists():
        return
    conn = sqlite3.connect(str(path), timeout=30.0)
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        conn.execute("PRAGMA journal_mode=DELETE")
    finally:
        conn.close()


def mark_done(out: str | Path, info: dict[str, Any] | None = None, *, spend: StageSpend | None = None) -> None:
    """Finalize the stage's run log (if any), drop the workspace's empty run scratch dirs, write the stage's
    LLM spend (`llm_spend.json`, when given: every stage that calls the LLM passes `ctx.take_spend()`), then
    DONE.json — always the last write of a stage."""
    if spend is not None:
        atomic_write_json(Path(out) / SPEND_FILE, spend.to_json())
    finalize_runlog(Path(out) / RUNLOG)
    if (Path(out) / WORKSPACE).is_dir():
        drop_empty_run_scratch(Path(out) / WORKSPACE)
    atomic_write_json(Path(out) / DONE, {"done": True, **(info or {})})


@dataclass(frozen=True)
class Lineage:
    """Run-log fragments of the chain up to (not including) this stage, and whether training stopped."""

    fragments: tuple[str, ...] = ()
    stopped: bool = False
    stop_reason: str = ""

    def with_fragment(self, path: str) -> Lineage:
        return Lineage(self.fragments + (path,), self.stopped, self.stop_reason)

    def to_dict(self) -> dict[str, Any]:
        return {"fragments": list(self.fragments), "stopped": self.stopped, "stop_reason": self.stop_reason}


def read_lineage(state: str | Path) -> Lineage:
    path = Path(state) / LINEAGE
    if not path.is_file():
        raise StateError(f"state {state} has no {LINEAGE}")
    d = read_json(path, "lineage file")
    return Lineage(tuple(d["fragments"]), bool(d["stopped"]), str(d["stop_reason"]))


def write_lineage(out: str | Path, lineage: Lineage) -> None:
    atomic_write_json(Path(out) / LINEAGE, lineage.to_dict())


def rel_to(root: Path, path: Path) -> str:
    """`path` relative to the project root when inside it (state stays relocatable), else absolute."""
    try:
        return Path(os.path.relpath(path.resolve(), root.resolve())).as_posix() if path.resolve().is_relative_to(root.resolve()) else str(path.resolve())
    except ValueError:
        return str(path.resolve())


def resolve_fragments(root: Path, lineage: Lineage) -> list[Path]:
    return [p if p.is_absolute() else root / p for p in (Path(f) for f in lineage.fragments)]


# --- the carried files of a state directory ------------------------------------


def copy_state_dir(prev: Path, out: Path) -> None:
    """Carried files of `prev` into the fresh `out` (the workspace through wsp.copy_workspace)."""
    for name in (CHECKPOINT, GATE_POOLS):
        src = prev / name
        if src.is_file():
            read_json(src, f"carried {name}")  # a corrupt predecessor file is named at its own path, not the copy's
            (out / name).write_bytes(src.read_bytes())
    if (prev / WORKSPACE).is_dir():
        copy_workspace(prev / WORKSPACE, out / WORKSPACE)


def pass_through(prev: Path, out: Path, lineage: Lineage, stage: str) -> None:
    """After an early stop: `out` is `prev` unchanged, marked stopped."""
    copy_state_dir(prev, out)
    write_lineage(out, lineage)
    mark_done(out, {"stopped": True, "stop_reason": lineage.stop_reason, "stage": stage})


@dataclass
class CarriedState:
    """A workspace-carrying stage's fresh output, holding a copy of the previous state."""

    prev: Path
    out: Path
    lineage: Lineage
    state: TrainState
    progress: Progress


def open_carried_state(prev_state: Path, out: Path, what: str, stage: str) -> CarriedState | None:
    """Copy the finished state `prev_state` into the fresh `out` and load it; None after an early stop
    (the state then passes through unchanged, marked stopped)."""
    prev = require_done(Path(prev_state), what)
    out_dir = fresh_output(Path(out))
    lineage = read_lineage(prev)
    if lineage.stopped:
        pass_through(prev, out_dir, lineage, stage)
        return None
    state, progress = load_state(prev)  # read from the source: an error names the file to repair, not its copy
    copy_state_dir(prev, out_dir)
    return CarriedState(prev, out_dir, lineage, state, progress)


def load_state(state_dir: Path) -> tuple[TrainState, Progress]:
    ck = load_checkpoint(state_dir / CHECKPOINT)
    return ck.state, ck.progress


def save_state(out: Path, state: TrainState, progress: Progress, config: Mapping[str, Any]) -> None:
    save_checkpoint(out / CHECKPOINT, state, progress, config)


# --- the pipeline state under a project root ------------------------------------


@dataclass(frozen=True)
class StatePaths:
    """Paths of the pipeline state under a root: harness.kernel.schedule.StateLayout anchored at `root`."""

    root: Path
    state_dir: str = "state"
    questions_path: str = "data/questions.parquet"
    pools_path: str = "data/pools.json"

    @property
    def layout(self) -> StateLayout:
        return StateLayout(self.state_dir)

    @property
    def state(self) -> Path:
        return self.root / self.state_dir

    @property
    def questions(self) -> Path:
        return self.root / self.questions_path

    @property
    def pools(self) -> Path:
        return self.root / self.pools_path

    @property
    def init(self) -> Path:
        return self.root / self.layout.init

    def batches(self, epoch: int) -> Path:
        return self.root / self.layout.batches(epoch)

    def epoch_dir(self, epoch: int) -> Path:
        return self.root / self.layout.epoch_dir(epoch)

    def step_dir(self, epoch: int, step: int) -> Path:
        return self.root / self.layout.step_dir(epoch, step)

    def rollout(self, epoch: int, step: int) -> Path:
        return self.root / self.layout.of_step("rollout", epoch, step)

    def evolve(self, epoch: int, step: int) -> Path:
        return self.root / self.layout.of_step("evolve", epoch, step)

    def gate(self, epoch: int, step: int) -> Path:
        return self.root / self.layout.of_step("gate", epoch, step)

    def slow(self, epoch: int) -> Path:
        return self.root / self.layout.slow(epoch)

    @property
    def certify(self) -> Path:
        return self.root / self.layout.certify

    @property
    def holdout(self) -> Path:
        return self.root / self.layout.holdout

    def prev_of_step(self, epoch: int, step: int) -> Path:
        """State a step starts from: previous step's gate, or the previous epoch's slow state, or init."""
        return self.root / self.layout.prev_of_step(epoch, step)

    def prev_of_epoch(self, epoch: int) -> Path:
        return self.root / self.layout.prev_of_epoch(epoch)

    def output_of(self, item: StageItem) -> Path:
        if item.kind == "prepare":
            return self.questions
        if item.kind == "pools":
            return self.init
        if item.kind == "batches":
            return self.batches(item.epoch)
        if item.kind in STEP_KINDS:
            return self.root / self.layout.of_step(item.kind, item.epoch, item.step)
        if item.kind == "slow":
            return self.slow(item.epoch)
        if item.kind == "certify":
            return self.certify
        if item.kind == "holdout":
            return self.holdout
        raise ValueError(f"unknown stage kind {item.kind!r}")


def stage_done(paths: StatePaths, item: StageItem) -> bool:
    """A stage is done when its DONE.json exists (prepare, batches: their single file, written atomically)."""
    if item.kind == "prepare":
        return paths.questions.is_file()
    if item.kind == "batches":
        return paths.batches(item.epoch).is_file()
    if item.kind == "pools":
        return paths.pools.is_file() and is_done(paths.init)
    return is_done(paths.output_of(item))


def resume_plan(paths: StatePaths, schedule: list[StageItem]) -> list[StageItem]:
    """The stages still to run, in order: everything from the first stage without its DONE marker.

    Later stages that happen to be marked done are re-run too (their inputs
    are about to change); the response cache makes re-running them free.
    """
    for i, item in enumerate(schedule):
        if not stage_done(paths, item):
            return schedule[i:]
    return []
