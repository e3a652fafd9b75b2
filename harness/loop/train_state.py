"""The training state carried across steps, epochs and stages (seed 000 §13) and its transitions.

`TrainState` holds the seed's field set; its methods are the state changes
the stages make (gate: step outcomes, case packs, cooldowns; slow: epoch
close and the next epoch's start). `Progress` says where in the schedule a
state directory is. Serialization: harness/loop/checkpoint.py.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, Optional

from harness.kernel.fdr import FdrState
from harness.kernel.types import CaseSample, Probation, RejectedEdit, SystemCasePack, ToolCasePack

TOOL_PACK_EXAMPLES = 8  # examples kept per tool pack


@dataclass
class EvalRef:
    """What eval_prev answered, in full (train.reuse_identical): its version pair, every validation question's outcome
    (None: an infrastructure failure) and soft score. A later evaluation copies the answers of the questions whose
    input is byte-identical under its own pair, so they need not be in its run's predictions."""

    run_id: str
    skills_version: str
    prompts_version: str
    outcomes: dict[str, Optional[bool]] = field(default_factory=dict)
    soft: dict[str, Optional[float]] = field(default_factory=dict)
    # qid -> the input key (harness.loop.certify.input_keys) its answer was produced with: what a later evaluation
    # compares before copying it (the version label alone can describe a merge of answers from different trees)
    inputs: dict[str, str] = field(default_factory=dict)


@dataclass
class TrainState:
    """The mutable training state carried across steps, epochs and stages (seed 000 §13 field set)."""

    correctness: dict[str, bool] = field(default_factory=dict)  # qid -> last observed correctness
    eval_prev_acc: float | None = None
    eval_prev_run_id: str | None = None
    eval_prev_ref: EvalRef | None = None  # eval_prev's full answers (set by every slow update; read with train.reuse_identical)
    baseline_skills_version: str = "v0"
    baseline_prompts_version: str = "v0"
    steps_since_best_improved: int = 0
    epoch_start_skills: dict[str, str] = field(default_factory=dict)  # skill file -> text at epoch start
    changed_task_types_this_epoch: set[str] = field(default_factory=set)
    rejected_buffer: dict[str, list[RejectedEdit]] = field(default_factory=dict)  # task_type -> rejected edits
    system_packs: list[SystemCasePack] = field(default_factory=list)
    tool_packs: dict[str, ToolCasePack] = field(default_factory=dict)  # tool -> pack
    probations: dict[str, Probation] = field(default_factory=dict)  # task_type -> its one open probation
    gate_cooldown: dict[str, int] = field(default_factory=dict)  # task_type -> steps left
    gate_epoch_observed: dict[str, bool] = field(default_factory=dict)  # task_type -> ladder warm (must survive resume)
    gate_fdr: FdrState = field(default_factory=FdrState)  # the run's e-LOND sequence (tests, discoveries, spent): resume continues it

    # -- transitions (seed 000 §15): the stages call these, in this order within a step / at an epoch end
    def absorb_step_outcomes(self, outcomes: Mapping[str, Optional[bool]]) -> None:
        """Incremental correctness: a question's latest definite outcome wins; an infra failure (None) changes nothing."""
        merged = dict(self.correctness)
        for qid, value in outcomes.items():
            if value is not None:
                merged[qid] = bool(value)
        self.correctness = merged

    def absorb_case_packs(self, epoch: int, system_cases: Sequence[CaseSample], tool_packs: Mapping[str, ToolCasePack]) -> None:
        """The step's failures for the slow system/tool update: one system pack, tool counts and examples merged."""
        if system_cases:
            self.system_packs.append(SystemCasePack(epoch=epoch, cases=list(system_cases)))
        for tool, step_pack in tool_packs.items():
            pack = self.tool_packs.setdefault(tool, ToolCasePack(tool=tool, epoch=epoch))
            pack.calls += int(step_pack.calls)
            pack.errors += int(step_pack.errors)
            for key, example in step_pack.examples.items():
                if len(pack.examples) < TOOL_PACK_EXAMPLES:
                    pack.examples.setdefault(key, example)

    def pass_cooldown_step(self, before_gate: Mapping[str, int], just_cooled: Iterable[str]) -> None:
        """One step of rest for every resting skill; the ones that started resting this step keep their full count."""
        fresh = set(just_cooled)
        counts = {**before_gate, **{key: self.gate_cooldown[key] for key in fresh}}
        out: dict[str, int] = {}
        for key, n in counts.items():
            n = int(n) if key in fresh else int(n) - 1
            if n > 0:
                out[key] = n
        self.gate_cooldown = out

    def close_epoch(self, improved_best: bool) -> None:
        """The early-stop counter after the slow update: reset when the best improved, else one more epoch."""
        self.steps_since_best_improved = 0 if improved_best else self.steps_since_best_improved + 1

    def open_probation(self, key: str, new: Probation) -> None:
        """At most one probation per skill: a second one merges into the open one, keeping the oldest anchor
        and snapshot (the anchor's outcomes win) and advancing the accepted version."""
        existing = self.probations.get(key)
        if existing is None:
            self.probations[key] = new
            return
        snapshot = dict(new.correctness_snapshot)
        snapshot.update(existing.correctness_snapshot)
        self.probations[key] = Probation(
            task_type=existing.task_type, skill_file=existing.skill_file,
            anchor_skills_version=existing.anchor_skills_version,
            opened_epoch=existing.opened_epoch, opened_step=existing.opened_step,
            correctness_snapshot=snapshot, pending_edits=list(existing.pending_edits) + list(new.pending_edits),
            accepted_version=new.accepted_version, kind="probation" if "probation" in (existing.kind, new.kind) else existing.kind,
        )

    def early_stop_due(self, patience: int) -> bool:
        """Stop once the best has not improved for `patience` consecutive epochs (patience <= 0 disables)."""
        return patience > 0 and self.steps_since_best_improved >= patience

    def begin_epoch(self, skills_version: str, prompts_version: str, skills: Mapping[str, str]) -> None:
        """A new epoch: the starting pair recorded, the epoch's accumulators cleared."""
        self.baseline_skills_version, self.baseline_prompts_version = skills_version, prompts_version
        self.epoch_start_skills = dict(skills)
        self.changed_task_types_this_epoch = set()
        self.system_packs = []
        self.tool_packs = {}


@dataclass
class Progress:
    epoch: int = 1
    step: int = 0
    phase: Literal["in_epoch", "epoch_done"] = "in_epoch"
    global_step: int = 0
