"""Collect a finished run from its state directories into a `RunSummary`.

Reads only what the stages wrote (docs/ARCHITECTURE.md "Pipeline state"):
epoch reports (``e<E>/slow/report.json``), step reports
(``e<E>/s<S>/gate/report.json``), the holdout result, and the run-log
fragments of the final state's lineage (observation tables, predictions).
The paths come from the config's schedule, never from globbing, so stale
directories of an older, longer run are ignored. The sim oracle, when
available, is consulted here (reports may; the loop never does).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.contracts.answers import UNPARSED_MODES
from harness.identity import epoch_of_run, run_purpose
from harness.kernel.schedule import StateLayout
from harness.loop.observation import TABLES, read_table
from harness.loop.state import REPORT, RUNLOG, WORKSPACE, StateError, read_lineage, resolve_fragments
from harness.pipeline.summary import EpochSummary, GateDecision, RunSummary

OBSERVATION_TABLES = tuple(TABLES)
# gate actions counted as decisions in the per-epoch metrics
ACCEPTED, REJECTED, PROBATION = "accept", "reject", "probation"


@dataclass(frozen=True)
class RunLayout:
    """Where one run's state lives: project root + the config's schedule paths."""

    root: Path
    state_dir: str
    questions_path: str
    pools_path: str
    epochs: int
    steps_per_epoch: int

    @classmethod
    def from_config(cls, cfg: Any, root: Path) -> "RunLayout":
        return cls(Path(root), str(cfg.train.state_dir), str(cfg.benchmark.questions_path), str(cfg.pools.path),
                   int(cfg.train.epochs), int(cfg.train.steps_per_epoch))

    def path(self, relative: str) -> Path:
        return self.root / relative

    @property
    def state(self) -> Path:
        return self.root / self.state_dir

    @property
    def _layout(self) -> StateLayout:
        return StateLayout(self.state_dir)

    def epoch_dir(self, epoch: int) -> Path:
        return self.root / self._layout.epoch_dir(epoch)

    def slow(self, epoch: int) -> Path:
        return self.root / self._layout.slow(epoch)

    def gate(self, epoch: int, step: int) -> Path:
        return self.root / self._layout.of_step("gate", epoch, step)

    def evolve(self, epoch: int, step: int) -> Path:
        return self.root / self._layout.of_step("evolve", epoch, step)

    @property
    def holdout(self) -> Path:
        return self.root / self._layout.holdout

    @property
    def final_state(self) -> Path:
        return self.slow(self.epochs)

    def fragments(self) -> list[Path]:
        """Run-log fragments of the whole run: the final state's lineage plus the holdout stage's own."""
        lineage = read_lineage(self.final_state)
        paths = resolve_fragments(self.root, lineage)
        if (self.holdout / RUNLOG).is_file():
            paths.append(self.holdout / RUNLOG)
        return [p for p in paths if p.is_file()]


def _read_json(path: Path, what: str) -> Any:
    if not path.is_file():
        raise StateError(f"{what} {path} is missing; run the stage that writes it first")
    return json.loads(path.read_text(encoding="utf-8"))


def read_tables(layout: RunLayout) -> dict[str, list[dict[str, Any]]]:
    """The five observation tables over the run's fragments (rows sorted for determinism)."""
    fragments = layout.fragments()
    tables = {}
    for name in OBSERVATION_TABLES:
        rows = [{k: v for k, v in row.items() if k != "created_at"} for row in read_table(fragments, name)]
        tables[name] = sorted(rows, key=lambda r: json.dumps(r, sort_keys=True, default=str))
    return tables


def prediction_totals(layout: RunLayout) -> dict[str, dict[str, float]]:
    """run_id -> {rollouts, usd, prompt_tokens, completion_tokens} from every fragment's predictions."""
    from harness.log import RunLogReader

    fragments = layout.fragments()
    if not fragments:
        return {}
    rows = RunLogReader(fragments).query(
        "SELECT run_id, COUNT(*) AS n, COALESCE(SUM(cost_usd), 0) AS usd, COALESCE(SUM(prompt_tokens), 0) AS pt, "
        "COALESCE(SUM(completion_tokens), 0) AS ct FROM predictions GROUP BY run_id"
    )
    totals: dict[str, dict[str, float]] = {}
    for row in rows:
        t = totals.setdefault(str(row["run_id"]), {"rollouts": 0, "usd": 0.0, "prompt_tokens": 0, "completion_tokens": 0})
        t["rollouts"] += int(row["n"])
        t["usd"] += float(row["usd"])
        t["prompt_tokens"] += int(row["pt"])
        t["completion_tokens"] += int(row["ct"])
    return totals


def parse_mode_counts(layout: RunLayout) -> dict[str, dict[str, int]]:
    """run_id -> {answer parse mode: judged rollouts} from every fragment's predictions (infra rollouts left out)."""
    from harness.log import RunLogReader

    fragments = layout.fragments()
    if not fragments:
        return {}
    rows = RunLogReader(fragments).query("SELECT run_id, parse_mode, COUNT(*) AS n FROM predictions "
                                         "WHERE correct IS NOT NULL AND parse_mode IS NOT NULL GROUP BY run_id, parse_mode")
    counts: dict[str, dict[str, int]] = {}
    for row in rows:
        modes = counts.setdefault(str(row["run_id"]), {})
        modes[str(row["parse_mode"])] = modes.get(str(row["parse_mode"]), 0) + int(row["n"])
    return counts


def _merged(counts: list[dict[str, int]]) -> dict[str, int]:
    out: dict[str, int] = {}
    for modes in counts:
        for mode, n in modes.items():
            out[mode] = out.get(mode, 0) + n
    return out


def _failure_rate(modes: dict[str, int]) -> float | None:
    total = sum(modes.values())
    return round(sum(modes.get(m, 0) for m in UNPARSED_MODES) / total, 6) if total else None


def collect_run(cfg: Any, layout: RunLayout, *, with_oracle: bool = True) -> RunSummary:
    """The `RunSummary` of the run laid out at `layout` (which must be finished through holdout)."""
    per_run = prediction_totals(layout)
    modes_by_run = parse_mode_counts(layout)
    rollouts_by_epoch: dict[int, int] = {}
    usd_by_epoch: dict[int, float] = {}
    by_purpose: dict[int, dict[str, int]] = {}
    for run_id, t in per_run.items():
        epoch = epoch_of_run(run_id)
        if epoch is not None:
            rollouts_by_epoch[epoch] = rollouts_by_epoch.get(epoch, 0) + int(t["rollouts"])
            usd_by_epoch[epoch] = usd_by_epoch.get(epoch, 0.0) + float(t["usd"])
            purposes = by_purpose.setdefault(epoch, {})
            purposes[run_purpose(run_id)] = purposes.get(run_purpose(run_id), 0) + int(t["rollouts"])

    gates: list[GateDecision] = []
    epochs: list[EpochSummary] = []
    for epoch in range(1, layout.epochs + 1):
        epoch_gates = _gate_decisions(layout, epoch, modes_by_run)
        gates += epoch_gates
        report_path = layout.slow(epoch) / REPORT
        if not report_path.is_file():
            continue  # training stopped early: the state was passed through, no epoch ran
        report = _read_json(report_path, "epoch report")
        actions = [g.action for g in epoch_gates]
        epochs.append(EpochSummary(
            epoch=epoch,
            val_hard_acc=_num(report.get("eval_acc")),
            val_soft_score=_num(report.get("soft_score")),
            val_mixed_score=_num(report.get("mixed_score")),
            best_val_acc=_num(report.get("best_val_acc")),
            accepted=actions.count(ACCEPTED),
            rejected=actions.count(REJECTED),
            probation=actions.count(PROBATION),
            rollouts=rollouts_by_epoch.get(epoch, 0),
            usd=round(usd_by_epoch.get(epoch, 0.0), 6),
            early_stop=bool(report.get("early_stop")),
            epoch_parse_failure_rate=_failure_rate(_merged([m for r, m in modes_by_run.items() if epoch_of_run(r) == epoch])),
        ))

    holdout_doc = _read_json(layout.holdout / "holdout.json", "holdout result")
    holdout_rows = [{k: v for k, v in row.items() if k != "created_at"}
                    for row in read_table([layout.holdout / RUNLOG], "holdout_eval")]
    holdout_rows.sort(key=lambda r: (int(r["epoch"]), str(r["which"])))
    delivered = dict(holdout_doc.get("delivered") or {})

    gate_paths: dict[str, list[tuple[int, float]]] = {}
    for row in sorted(read_table(layout.fragments(), "gate_evidence"), key=lambda r: (r["gate_run_id"], int(r["seq"]))):
        gate_paths.setdefault(str(row["gate_run_id"]), []).append((int(row["seq"]), float(row["log_e"])))

    summary = RunSummary(
        run_name=str(cfg.train.run_name),
        benchmark=str(cfg.benchmark.name),
        epochs=tuple(epochs),
        gates=tuple(gates),
        holdout=tuple(holdout_rows),
        gate_paths={k: tuple(v) for k, v in gate_paths.items()},
        accept_threshold=_num(cfg.gate["lambda"]),
        reject_threshold=_num(cfg.gate["lambda_dir"]),
        delivered=delivered,
        rollouts_by_purpose={e.epoch: dict(sorted(by_purpose.get(e.epoch, {}).items())) for e in epochs},
        parse_modes=_merged(list(modes_by_run.values())),
    )
    if with_oracle and str(cfg.benchmark.name) == "sim":
        summary = _with_oracle(cfg, layout, summary)
    return summary


def _gate_decisions(layout: RunLayout, epoch: int, modes_by_run: dict[str, dict[str, int]]) -> list[GateDecision]:
    out = []
    for step in range(1, layout.steps_per_epoch + 1):
        path = layout.gate(epoch, step) / REPORT
        if not path.is_file():
            continue  # stopped early (pass-through state has no step report)
        report = _read_json(path, "step report")
        for row in report.get("skills", []):
            out.append(GateDecision(
                epoch=int(report["epoch"]), step=int(report["step"]), task_type=str(row.get("task_type")),
                action=str(row.get("action")), reason=str(row.get("reason") or ""),
                log_e=_num(row.get("log_e")), log_lr_dir=_num(row.get("log_lr_dir")),
                wins=_int(row.get("wins")), losses=_int(row.get("losses")), ties=_int(row.get("ties")),
                n_pairs=_int(row.get("n_pairs")), rollouts=_int(row.get("rollouts")),
                gate_run_id=row.get("gate_run_id"),
                fdr_level=_num(row.get("fdr_level")), fdr_test=_int(row.get("fdr_test")), fdr_spent=_num(row.get("fdr_spent")),
                parse_failure_base=_failure_rate(modes_by_run.get(f"{row.get('gate_run_id')}_base", {})),
                parse_failure_cand=_failure_rate(modes_by_run.get(f"{row.get('gate_run_id')}_cand", {})),
            ))
    return out


def _with_oracle(cfg: Any, layout: RunLayout, summary: RunSummary) -> RunSummary:
    """True (oracle) accuracy of each epoch's current harness and of the delivered one."""
    from dataclasses import replace

    from harness import workspace as wsp
    from harness.sim.oracle import Oracle
    from harness.sim.world import World
    from harness.tree import HarnessTree

    oracle = Oracle(World.from_config(cfg.benchmark))
    pools = _read_json(layout.path(layout.pools_path), "pools file")
    validation, test = list(pools["validation"]), list(pools["test"])
    epochs = []
    for e in summary.epochs:
        tree = wsp.harness_view(layout.slow(e.epoch) / WORKSPACE)
        epochs.append(replace(e, true_val_acc=round(oracle.expected_accuracy(tree, validation), 6),
                              true_test_acc=round(oracle.expected_accuracy(tree, test), 6)))
    delivered = dict(summary.delivered)
    delivered_dir = layout.holdout / "delivered"
    if delivered_dir.is_dir():
        tree = HarnessTree.load(delivered_dir)
        delivered["true_test_acc"] = round(oracle.expected_accuracy(tree, test), 6)
        base = wsp.harness_view(layout.final_state / WORKSPACE, "v0", "v0")
        delivered["true_test_acc_base"] = round(oracle.expected_accuracy(base, test), 6)
    return replace(summary, epochs=tuple(epochs), delivered=delivered, oracle_available=True)


def _num(value: Any) -> float | None:
    return None if value is None else float(value)


def _int(value: Any) -> int | None:
    return None if value is None else int(value)
