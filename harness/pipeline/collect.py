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
import logging
import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from harness.contracts.answers import UNPARSED_MODES
from harness.identity import epoch_of_run, run_purpose
from harness.inputs import read_json
from harness.kernel.schedule import StateLayout
from harness.llm.metering import SPEND_FILE, StageSpend
from harness.loop.observation import TABLES, read_table
from harness.loop.state import REPORT, RUNLOG, WORKSPACE, StateError, read_lineage, resolve_fragments
from harness.pipeline.summary import EpochSummary, GateDecision, Proposal, RunSummary

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

    def step_stage(self, kind: str, epoch: int, step: int) -> Path:
        return self.root / self._layout.of_step(kind, epoch, step)

    @property
    def holdout(self) -> Path:
        return self.root / self._layout.holdout

    @property
    def certify(self) -> Path:
        return self.root / self._layout.certify

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

    def epoch_fragments(self, epoch: int) -> list[Path]:
        """Run-log fragments of the run up to the end of `epoch` (the lineage of its slow state)."""
        return [p for p in resolve_fragments(self.root, read_lineage(self.slow(epoch))) if p.is_file()]


def _read_json(path: Path, what: str) -> Any:
    if not path.is_file():
        raise StateError(f"{what} {path} is missing; run the stage that writes it first")
    return read_json(path, what)


# Each observation table's natural order (its primary key, epoch first where it has one): what a reader
# scans for. Rows tied on these keys (none, given the keys) would fall back to their JSON text.
TABLE_ORDER: dict[str, tuple[str, ...]] = {
    "dual_metric_eval": ("epoch", "kind", "run_id"),
    "shadow_gate": ("epoch",),
    "holdout_eval": ("epoch", "which"),
    "quadrant_pair": ("epoch", "step", "task_type", "gate_run_id", "qid"),
    "gate_evidence": ("epoch", "step", "task_type", "gate_run_id", "seq"),
}


def _ordered(rows: list[dict[str, Any]], keys: tuple[str, ...]) -> list[dict[str, Any]]:
    def key(row: dict[str, Any]) -> tuple:
        return (*((row.get(k) is None, row.get(k) if row.get(k) is not None else 0) for k in keys),
                json.dumps(row, sort_keys=True, default=str))

    return sorted(rows, key=key)


def read_tables(layout: RunLayout) -> dict[str, list[dict[str, Any]]]:
    """The five observation tables over the run's fragments, each sorted by its `TABLE_ORDER`."""
    fragments = layout.fragments()
    tables = {}
    for name in OBSERVATION_TABLES:
        rows = [{k: v for k, v in row.items() if k != "created_at"} for row in read_table(fragments, name)]
        tables[name] = _ordered(rows, TABLE_ORDER.get(name, ()))
    return tables


GATE_SUMMARY_ORDER = ("epoch", "step", "task_type", "gate_run_id")


def gate_summary_rows(summary: RunSummary) -> list[dict[str, Any]]:
    """One row per gate (its decision, evidence at the stop, pairs, rollouts, FDR level), sorted by
    epoch, step, task type: the table MLflow's UI shows (the per-pair evidence stays Parquet)."""
    rows = []
    for g in summary.gates:
        points = summary.gate_paths.get(str(g.gate_run_id), ()) if g.gate_run_id else ()
        rows.append({
            "epoch": g.epoch, "step": g.step, "task_type": g.task_type, "action": g.action, "reason": g.reason,
            "log_e": g.log_e, "max_log_e": max((v for _, v in points), default=None), "log_lr_dir": g.log_lr_dir,
            "n_pairs": g.n_pairs, "wins": g.wins, "losses": g.losses, "ties": g.ties, "rollouts": g.rollouts,
            "fdr_level": g.fdr_level, "fdr_test": g.fdr_test, "fdr_spent": g.fdr_spent,
            "parse_failure_base": g.parse_failure_base, "parse_failure_cand": g.parse_failure_cand,
            "gate_run_id": g.gate_run_id,
        })
    return _ordered(rows, GATE_SUMMARY_ORDER)


def prediction_totals(layout: RunLayout, fragments: list[Path] | None = None) -> dict[str, dict[str, float]]:
    """run_id -> {rollouts, usd, prompt_tokens, completion_tokens} from every fragment's predictions
    (`fragments`: the whole run's when None)."""
    from harness.log import RunLogReader

    fragments = layout.fragments() if fragments is None else fragments
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


def read_spend(stage_dir: Path) -> StageSpend:
    """The stage's LLM spend (`llm_spend.json`); empty for a stage that made no LLM call (no file: a stopped
    or LLM-free stage)."""
    path = Path(stage_dir) / SPEND_FILE
    if not path.is_file():
        return StageSpend()
    return StageSpend.from_json(_read_json(path, "LLM spend"), where=str(path))


def epoch_spend(layout: RunLayout, epoch: int) -> StageSpend:
    """The LLM spend of the epoch's rollout, evolve and gate stages and its slow update, every role."""
    total = StageSpend()
    for step in range(1, layout.steps_per_epoch + 1):
        for kind in ("rollout", "evolve", "gate"):
            total.add(read_spend(layout.step_stage(kind, epoch, step)))
    total.add(read_spend(layout.slow(epoch)))
    return total


def spend_by_stage_kind(layout: RunLayout) -> dict[str, StageSpend]:
    """stage kind (rollout, evolve, gate, slow, certify, holdout) -> the LLM spend of all its stages, every role."""
    kinds: dict[str, StageSpend] = {}
    for epoch in range(1, layout.epochs + 1):
        for step in range(1, layout.steps_per_epoch + 1):
            for kind in ("rollout", "evolve", "gate"):
                kinds.setdefault(kind, StageSpend()).add(read_spend(layout.step_stage(kind, epoch, step)))
        kinds.setdefault("slow", StageSpend()).add(read_spend(layout.slow(epoch)))
    kinds.setdefault("certify", StageSpend()).add(read_spend(layout.certify))
    kinds.setdefault("holdout", StageSpend()).add(read_spend(layout.holdout))
    return {kind: spend for kind, spend in kinds.items() if spend.roles}


def spend_by_epoch(layout: RunLayout) -> dict[int, StageSpend]:
    """epoch -> `epoch_spend` of every epoch of the schedule."""
    return {epoch: epoch_spend(layout, epoch) for epoch in range(1, layout.epochs + 1)}


def parse_mode_counts(layout: RunLayout, fragments: list[Path] | None = None) -> dict[str, dict[str, int]]:
    """run_id -> {answer parse mode: judged rollouts} from every fragment's predictions (infra rollouts left out;
    `fragments`: the whole run's when None)."""
    from harness.log import RunLogReader

    fragments = layout.fragments() if fragments is None else fragments
    if not fragments:
        return {}
    rows = RunLogReader(fragments).query("SELECT run_id, parse_mode, COUNT(*) AS n FROM predictions "
                                         "WHERE correct IS NOT NULL AND parse_mode IS NOT NULL GROUP BY run_id, parse_mode")
    counts: dict[str, dict[str, int]] = {}
    for row in rows:
        modes = counts.setdefault(str(row["run_id"]), {})
        modes[str(row["parse_mode"])] = modes.get(str(row["parse_mode"]), 0) + int(row["n"])
    return counts


def soft_calibration(fragments: list[Path]) -> tuple[int, float, float] | None:
    """(n, mean(soft - correct), SE) over the judged rollouts of `fragments` that have a soft score (every stage's, gate
    pairs included: calibration is a property of each rollout); None when fewer than 2 have one."""
    from harness.log import RunLogReader

    if not fragments:
        return None
    rows = RunLogReader(fragments).query(
        "SELECT COUNT(*) AS n, SUM(soft_score - correct) AS s, SUM((soft_score - correct) * (soft_score - correct)) AS s2 "
        "FROM predictions WHERE correct IS NOT NULL AND soft_score IS NOT NULL")
    n = sum(int(r["n"] or 0) for r in rows)
    if n < 2:
        return None
    total = math.fsum(float(r["s"] or 0.0) for r in rows)
    squares = math.fsum(float(r["s2"] or 0.0) for r in rows)
    mean = total / n
    variance = max(squares - n * mean * mean, 0.0) / (n - 1)
    return n, mean, math.sqrt(variance / n)


def _merged(counts: list[dict[str, int]]) -> dict[str, int]:
    out: dict[str, int] = {}
    for modes in counts:
        for mode, n in modes.items():
            out[mode] = out.get(mode, 0) + n
    return out


def _failure_rate(modes: dict[str, int]) -> float | None:
    total = sum(modes.values())
    return round(sum(modes.get(m, 0) for m in UNPARSED_MODES) / total, 6) if total else None


def _epoch_failure_rate(modes_by_run: dict[str, dict[str, int]], epoch: int) -> float | None:
    return _failure_rate(_merged([m for r, m in modes_by_run.items() if epoch_of_run(r) == epoch]))


def _per_epoch_cost(per_run: dict[str, dict[str, float]]) -> tuple[dict[int, int], dict[int, dict[str, int]]]:
    """(epoch -> rollouts, epoch -> {purpose: rollouts}) of the runs whose id names an epoch (USD: `epoch_spend`,
    every role)."""
    rollouts_by_epoch: dict[int, int] = {}
    by_purpose: dict[int, dict[str, int]] = {}
    for run_id, t in per_run.items():
        epoch = epoch_of_run(run_id)
        if epoch is not None:
            rollouts_by_epoch[epoch] = rollouts_by_epoch.get(epoch, 0) + int(t["rollouts"])
            purposes = by_purpose.setdefault(epoch, {})
            purposes[run_purpose(run_id)] = purposes.get(run_purpose(run_id), 0) + int(t["rollouts"])
    return rollouts_by_epoch, by_purpose


def _epoch_summary(layout: RunLayout, epoch: int, epoch_gates: list[GateDecision], rollouts: int, usd: float,
                   parse_failure_rate: float | None) -> EpochSummary | None:
    """Epoch `epoch` from its slow report, None when it did not run (stopped early: state passed through)."""
    report_path = layout.slow(epoch) / REPORT
    if not report_path.is_file():
        return None
    report = _read_json(report_path, "epoch report")
    actions = [g.action for g in epoch_gates]
    return EpochSummary(
        epoch=epoch,
        val_hard_acc=_num(report.get("eval_acc")),
        val_soft_score=_num(report.get("soft_score")),
        val_mixed_score=_num(report.get("mixed_score")),
        best_val_acc=_num(report.get("best_val_acc")),
        accepted=actions.count(ACCEPTED),
        rejected=actions.count(REJECTED),
        probation=actions.count(PROBATION),
        rollouts=rollouts,
        usd=round(usd, 6),
        early_stop=bool(report.get("early_stop")),
        epoch_parse_failure_rate=parse_failure_rate,
    )


def collect_epoch(cfg: Any, layout: RunLayout, epoch: int, *, with_oracle: bool = True) -> EpochSummary | None:
    """Epoch `epoch` as soon as its slow stage is done (the run need not be finished): the same values
    `collect_run` gives that epoch later. None when the epoch did not run."""
    if not (layout.slow(epoch) / REPORT).is_file():
        return None
    fragments = layout.epoch_fragments(epoch)
    rollouts, _ = _per_epoch_cost(prediction_totals(layout, fragments))
    modes_by_run = parse_mode_counts(layout, fragments)
    summary = _epoch_summary(layout, epoch, _gate_decisions(layout, epoch, modes_by_run), rollouts.get(epoch, 0),
                             epoch_spend(layout, epoch).usd, _epoch_failure_rate(modes_by_run, epoch))
    if summary is not None and with_oracle and str(cfg.benchmark.name) == "sim":
        oracle, validation, test = _oracle_and_pools(cfg, layout)
        summary = _with_true_accuracy(layout, summary, oracle, validation, test)
    return summary


def collect_run(cfg: Any, layout: RunLayout, *, with_oracle: bool = True) -> RunSummary:
    """The `RunSummary` of the run laid out at `layout` (which must be finished through holdout)."""
    rollouts_by_epoch, by_purpose = _per_epoch_cost(prediction_totals(layout))
    modes_by_run = parse_mode_counts(layout)
    spend = spend_by_epoch(layout)  # USD of every role (solver, diagnoser, editor, ...), not only the rollouts'
    usd_by_epoch = {epoch: s.usd for epoch, s in spend.items()}
    run_spend = StageSpend()
    for s in spend.values():
        run_spend.add(s)
    run_spend.add(read_spend(layout.holdout))

    gates: list[GateDecision] = []
    epochs: list[EpochSummary] = []
    for epoch in range(1, layout.epochs + 1):
        epoch_gates = _gate_decisions(layout, epoch, modes_by_run)
        gates += epoch_gates
        epoch_summary = _epoch_summary(layout, epoch, epoch_gates, rollouts_by_epoch.get(epoch, 0),
                                       usd_by_epoch.get(epoch, 0.0), _epoch_failure_rate(modes_by_run, epoch))
        if epoch_summary is not None:
            epochs.append(epoch_summary)

    holdout_doc = _read_json(layout.holdout / "holdout.json", "holdout result")
    holdout_rows = [{k: v for k, v in row.items() if k != "created_at"}
                    for row in read_table([layout.holdout / RUNLOG], "holdout_eval")]
    holdout_rows.sort(key=lambda r: (int(r["epoch"]), str(r["which"])))
    delivered = dict(holdout_doc.get("delivered") or {})
    from harness.contracts.certificate import CERTIFICATE_FILE, read_certificate

    certificate = read_certificate(layout.holdout / CERTIFICATE_FILE) if (layout.holdout / CERTIFICATE_FILE).is_file() else None
    if certificate is not None:
        from harness.loop.stages.holdout import rolled_back_types

        types = rolled_back_types(certificate)
        if types:  # the versions name the parent; the delivered tree is its rollback
            delivered["rolled_back"] = ", ".join(types)
    run_spend.add(read_spend(layout.certify))

    proposals, diagnosis_cases, diagnosis_unparseable = _proposals(layout, gates)
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
        usd_by_role={role: round(s.usd, 6) for role, s in sorted(run_spend.roles.items())},
        rollouts_by_purpose={e.epoch: dict(sorted(by_purpose.get(e.epoch, {}).items())) for e in epochs},
        parse_modes=_merged(list(modes_by_run.values())),
        soft_calibration=soft_calibration(layout.fragments()),
        certificate=certificate,
        proposals=tuple(proposals),
        diagnosis_cases=diagnosis_cases,
        diagnosis_unparseable=diagnosis_unparseable,
        spend_by_stage={kind: {role: asdict(r) for role, r in sorted(spend.roles.items())}
                        for kind, spend in spend_by_stage_kind(layout).items()},
    )
    if with_oracle and str(cfg.benchmark.name) == "sim":
        summary = _with_oracle(cfg, layout, summary)
    return summary


# Why a proposal did not become (or became) an install, in one word; `cause_of` reads the gate's and the editor's reason.
CAUSES = {
    "accepted": "accepted by the gate",
    "probation": "installed on probation (undecided gate)",
    "budget": "gate undecided at its pair budget (gate.max_pairs)",
    "futility": "gate stopped for futility",
    "settled": "gate settled before its budget: the pairs left would not change its decision (betting_budget)",
    "evidence_against": "gate's evidence pointed against the edit",
    "screen": "failed the pre-gate screen on the step's questions",
    "parse_failure": "editor reply did not parse",
    "no_change": "editor proposed no change",
    "not_applied": "editor's edits could not be applied",
    "stale": "skill file changed earlier in the step",
    "other": "other",
}


def cause_of(action: str, reason: str, *, parse_error: str = "", edits_proposed: int = 0) -> str:
    """The `CAUSES` key of one decision: the gate action, else the words of its reason."""
    text = reason.lower()
    if action == "accept":
        return "accepted"
    if action == "probation":
        return "probation"
    if action == "skipped_stale":
        return "stale"
    if action == "skipped_no_change":
        return "parse_failure" if parse_error else "not_applied" if edits_proposed else "no_change"
    if action != "reject":
        return "other"
    if text.startswith("screen"):
        return "screen"
    if "futility" in text:
        return "futility"
    if "settled after" in text:
        return "settled"
    if "undecided" in text or "end of the budget" in text:
        return "budget"
    if "reached log" in text or "lambda_dir" in text or "direction" in text or text.startswith(("gepa", "minibatch", "skillopt", "cap_evolve", "mcnemar", "re-checked")):
        return "evidence_against"
    return "other"


EXCERPT_LINES = 6
EXCERPT_CHARS = 160


def _clip(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= EXCERPT_CHARS else text[:EXCERPT_CHARS - 1] + "…"


def change_excerpt(old_text: str, new_text: str, edits: list[Any]) -> str:
    """The changed lines of old -> new (`+ line` / `- line`, at most EXCERPT_LINES), else the proposed edits' texts."""
    import difflib

    lines = [f"{row[0]} {_clip(row[1:])}" for row in difflib.unified_diff(old_text.splitlines(), new_text.splitlines(), lineterm="", n=0)
             if row[:1] in "+-" and not row.startswith(("+++", "---")) and row[1:].strip()]
    if not lines:
        lines = [f"{e.op}: {_clip(e.text or e.old)}" for e in edits]
    more = len(lines) - EXCERPT_LINES
    return "\n".join(lines[:EXCERPT_LINES] + ([f"(+{more} more lines)"] if more > 0 else []))


def _proposals(layout: RunLayout, gates: list[GateDecision]) -> tuple[list[Proposal], int, int]:
    """(every proposal of the run with its decision, failures diagnosed, diagnoses unparseable) from each step's
    evolve.json and the gate's decision rows."""
    from harness.loop.documents import EVOLVE, DocumentError, EvolveDoc, read_document

    decided = {(g.epoch, g.step, g.task_type): g for g in gates}
    out: list[Proposal] = []
    cases = unparseable = 0
    for epoch in range(1, layout.epochs + 1):
        for step in range(1, layout.steps_per_epoch + 1):
            path = layout.evolve(epoch, step) / EVOLVE
            if not path.is_file():
                continue
            try:
                doc = read_document(path, EvolveDoc)
            except DocumentError as exc:  # written by an older version (a run resumed across an upgrade)
                logging.getLogger("harness.progress").warning("[report] proposals of e%d.s%d left out: %s", epoch, step, exc)
                continue
            if doc.stopped:
                continue
            cases += doc.diagnosis_cases
            unparseable += doc.diagnosis_unparseable
            for cand in doc.candidates:
                rec = cand.record
                g = decided.get((epoch, step, cand.task_type))
                action, reason = (g.action, g.reason) if g else ("not gated", "no decision row in the gate's report")
                out.append(Proposal(epoch, step, cand.task_type, cand.skill_file, cand.source or doc.method,
                                    change_excerpt(rec.old_text, rec.new_text, rec.edits), len(rec.edits), len(rec.applied_edits),
                                    action, cause_of(action, reason), reason, g.log_e if g else None, g.n_pairs if g else None))
            for skip in doc.skipped:
                if skip.action != "skipped_no_change":
                    continue  # cooldown, no failures: nothing was proposed
                reply = skip.record
                parse_error = reply.parse_error if reply else ""
                edits = reply.edits if reply else []
                excerpt = change_excerpt("", "", edits) if edits else "(no edit)"
                proposed = skip.edits_proposed or 0
                out.append(Proposal(epoch, step, skip.task_type, skip.skill_file, skip.source or doc.method, excerpt, proposed, 0,
                                    skip.action, cause_of(skip.action, skip.reason, parse_error=parse_error, edits_proposed=proposed),
                                    skip.reason))
    out.sort(key=lambda p: (p.epoch, p.step, p.task_type, p.skill_file))
    return out, cases, unparseable


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
    from harness.tree import HarnessTree

    oracle, validation, test = _oracle_and_pools(cfg, layout)
    epochs = [_with_true_accuracy(layout, e, oracle, validation, test) for e in summary.epochs]
    delivered = dict(summary.delivered)
    delivered_dir = layout.holdout / "delivered"
    if delivered_dir.is_dir():
        tree = HarnessTree.load(delivered_dir)
        delivered["true_test_acc"] = round(oracle.expected_accuracy(tree, test), 6)
        base = wsp.harness_view(layout.final_state / WORKSPACE, "v0", "v0")
        delivered["true_test_acc_base"] = round(oracle.expected_accuracy(base, test), 6)
    return replace(summary, epochs=tuple(epochs), delivered=delivered, oracle_available=True)


def _oracle_and_pools(cfg: Any, layout: RunLayout) -> tuple[Any, list, list]:
    from harness.sim.oracle import Oracle
    from harness.sim.world import World

    pools = _read_json(layout.path(layout.pools_path), "pools file")
    return Oracle(World.from_config(cfg.benchmark)), list(pools["validation"]), list(pools["test"])


def _with_true_accuracy(layout: RunLayout, e: EpochSummary, oracle: Any, validation: list, test: list) -> EpochSummary:
    """`e` with the oracle's true accuracy of the epoch's current harness on validation and test."""
    from dataclasses import replace

    from harness import workspace as wsp

    tree = wsp.harness_view(layout.slow(e.epoch) / WORKSPACE)
    return replace(e, true_val_acc=round(oracle.expected_accuracy(tree, validation), 6),
                   true_test_acc=round(oracle.expected_accuracy(tree, test), 6))


def _num(value: Any) -> float | None:
    return None if value is None else float(value)


def _int(value: Any) -> int | None:
    return None if value is None else int(value)
