"""The unrolled training schedule (seed 000 §15: epochs × steps) and the state-directory layout it names.

The one place the schedule is derived: the OmegaConf resolvers
(harness/config/resolvers.py, whose items `dvc.yaml` loops over), the
in-process runner (harness/loop/runner.py), `StatePaths` and the telemetry
all call these functions. Pure: paths are strings relative to the project
root, built from `state_dir`.

    prepare → pools → [batches@e → (rollout@e.s → evolve@e.s → gate@e.s)* → slow@e]* → certify → holdout

Step 1 of epoch 1 starts from `<state>/init`, step S>1 from the previous
step's gate output, step 1 of epoch E>1 from the previous epoch's slow update.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Union

STEP_KINDS = ("rollout", "evolve", "gate")  # the stages of one step, in order
CARRYING_KINDS = ("pools", "gate", "slow")  # the stages whose output is a full state directory


def steps_per_epoch(diagnosis_size: int, batch_size: int) -> int:
    """ceil(diagnosis_size / batch_size), at least 1."""
    if batch_size <= 0:
        raise ValueError(f"batching.batch_size must be > 0, got {batch_size}")
    return max(1, -(-diagnosis_size // batch_size))


@dataclass(frozen=True)
class StageItem:
    """One stage invocation of the unrolled loop."""

    kind: str  # prepare | pools | batches | rollout | evolve | gate | slow | certify | holdout
    epoch: int = 0
    step: int = 0

    @property
    def name(self) -> str:
        """The stage's name as the entry points and the telemetry record it (e.g. `rollout@e1.s2`)."""
        if self.kind in STEP_KINDS:
            return f"{self.kind}@e{self.epoch}.s{self.step}"
        if self.kind in ("batches", "slow"):
            return f"{self.kind}@e{self.epoch}"
        return self.kind


def full_schedule(epochs: int, n_steps: int) -> list[StageItem]:
    """Every stage of the run in execution order."""
    if epochs < 1:
        raise ValueError(f"train.epochs must be >= 1, got {epochs}")
    if n_steps < 1:
        raise ValueError(f"train.steps_per_epoch must be >= 1, got {n_steps}")
    items = [StageItem("prepare"), StageItem("pools")]
    for epoch in range(1, epochs + 1):
        items.append(StageItem("batches", epoch))
        for step in range(1, n_steps + 1):
            items += [StageItem(kind, epoch, step) for kind in STEP_KINDS]
        items.append(StageItem("slow", epoch))
    items.append(StageItem("certify"))
    items.append(StageItem("holdout"))
    return items


@dataclass(frozen=True)
class StateLayout:
    """Directory of every stage output under `state_dir` (strings, '/'-joined)."""

    state_dir: str = "state"

    def __post_init__(self) -> None:
        if not str(self.state_dir).rstrip("/"):
            raise ValueError("train.state_dir must not be empty")

    def _at(self, *parts: str) -> str:
        return "/".join((str(self.state_dir).rstrip("/"), *parts))

    @property
    def init(self) -> str:
        return self._at("init")

    @property
    def certify(self) -> str:
        return self._at("certify")

    @property
    def holdout(self) -> str:
        return self._at("holdout")

    def batches(self, epoch: int) -> str:
        return self._at(f"e{epoch}", "batches.json")

    def epoch_dir(self, epoch: int) -> str:
        return self._at(f"e{epoch}")

    def step_dir(self, epoch: int, step: int) -> str:
        return self._at(f"e{epoch}", f"s{step}")

    def of_step(self, kind: str, epoch: int, step: int) -> str:
        """`<state>/e<E>/s<S>/<kind>` for kind in rollout | evolve | gate."""
        if kind not in STEP_KINDS:
            raise ValueError(f"not a step stage: {kind!r} (expected one of {STEP_KINDS})")
        return self._at(f"e{epoch}", f"s{step}", kind)

    def slow(self, epoch: int) -> str:
        return self._at(f"e{epoch}", "slow")

    def prev_of_epoch(self, epoch: int) -> str:
        """The state an epoch starts from: the previous epoch's slow update, or init."""
        return self.slow(epoch - 1) if epoch > 1 else self.init

    def prev_of_step(self, epoch: int, step: int) -> str:
        """The state a step starts from: the previous step's gate, or where the epoch starts."""
        return self.of_step("gate", epoch, step - 1) if step > 1 else self.prev_of_epoch(epoch)


ScheduleItem = dict[str, Union[int, str]]


def step_items(epochs: int, n_steps: int, state_dir: str = "state") -> list[ScheduleItem]:
    """`train.schedule`: one {epoch, step, prev} per (epoch, step), in execution order."""
    layout = StateLayout(state_dir)
    return [{"epoch": i.epoch, "step": i.step, "prev": layout.prev_of_step(i.epoch, i.step)}
            for i in full_schedule(epochs, n_steps) if i.kind == "rollout"]


def epoch_items(epochs: int, n_steps: int, state_dir: str = "state") -> list[ScheduleItem]:
    """`train.epoch_schedule`: one {epoch, prev} per epoch (where the epoch starts)."""
    layout = StateLayout(state_dir)
    return [{"epoch": i.epoch, "prev": layout.prev_of_epoch(i.epoch)} for i in full_schedule(epochs, n_steps) if i.kind == "slow"]
