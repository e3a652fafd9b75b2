"""The finished run as plain data: what the report, DVC metrics/plots and MLflow show.

Built by `harness.pipeline.collect` from a state root; rendered by
`harness.pipeline.render`; handed to MLflow as a `TrackedRun`. Metrics that
do not exist are None (never 0).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from harness.contracts.answers import parse_shares

# Per-epoch counters: `epoch_<name>` in MLflow's per-epoch history; `<name>` alone is the run total
# (reports/metrics.json and MLflow's run-level metrics). One meaning per name (docs/tracking.md).
EPOCH_COUNTERS = ("accepted", "rejected", "probation", "rollouts", "usd", "cache_hits", "cache_misses")


@dataclass(frozen=True)
class EpochSummary:
    epoch: int
    val_hard_acc: float | None
    val_soft_score: float | None
    val_mixed_score: float | None
    best_val_acc: float | None
    accepted: int
    rejected: int
    probation: int
    rollouts: int
    usd: float
    cache_hits: int | None = None
    cache_misses: int | None = None
    early_stop: bool = False
    # sim only: the oracle's exact expected accuracy of the epoch's current harness
    true_val_acc: float | None = None
    true_test_acc: float | None = None
    # share of the epoch's judged rollouts whose reply designates no single choice (answers.UNPARSED_MODES)
    epoch_parse_failure_rate: float | None = None

    def metrics(self) -> dict[str, Any]:
        """This epoch's MLflow metrics (step = epoch; key "epoch" included, Nones kept).

        Counters of this epoch alone carry the ``epoch_`` prefix (`EPOCH_COUNTERS`), so they never share a
        name with the run totals of `RunSummary.final_metrics` (docs/tracking.md, "Metric names").
        """
        values = {k: v for k, v in asdict(self).items() if k != "early_stop"}
        return {(f"epoch_{k}" if k in EPOCH_COUNTERS else k): v for k, v in values.items()}


@dataclass(frozen=True)
class GateDecision:
    epoch: int
    step: int
    task_type: str
    action: str
    reason: str
    log_e: float | None
    log_lr_dir: float | None
    wins: int | None
    losses: int | None
    ties: int | None
    n_pairs: int | None
    rollouts: int | None
    gate_run_id: str | None
    fdr_level: float | None = None  # the level the gate was given (e-LOND alpha_t, or exp(-gate.lambda))
    fdr_test: int | None = None  # its index in the run's e-LOND sequence (None: gate.fdr=none or not an e-value rule)
    fdr_spent: float | None = None  # the run's e-LOND base budget spent after this gate
    parse_failure_base: float | None = None  # share of the gate's baseline / candidate rollouts with no readable answer
    parse_failure_cand: float | None = None


@dataclass(frozen=True)
class Proposal:
    """One proposed edit of the run (a candidate the gate decided, or an editor reply that gave no candidate)."""

    epoch: int
    step: int
    task_type: str
    skill_file: str
    source: str  # the evolve method, or the candidates file's `source`
    excerpt: str  # the proposed change: changed lines of the diff, or the edits' texts when none applied
    edits_proposed: int
    edits_applied: int
    decision: str  # accept | probation | reject | skipped_no_change | skipped_stale | ...
    cause: str  # why, in one word (`collect.CAUSES`): accepted, budget, futility, evidence_against, screen, parse_failure, ...
    reason: str  # the gate's or the editor's own words
    log_e: float | None = None
    n_pairs: int | None = None


@dataclass(frozen=True)
class RunSummary:
    run_name: str
    benchmark: str
    epochs: tuple[EpochSummary, ...]
    gates: tuple[GateDecision, ...]
    holdout: tuple[dict[str, Any], ...]  # holdout_eval rows (which, n, hard_acc, soft_score, mixed_score, ...)
    gate_paths: dict[str, tuple[tuple[int, float], ...]]  # gate run id -> ((seq, log_e), ...)
    accept_threshold: float | None  # gate.lambda (log scale), drawn on the evidence chart
    reject_threshold: float | None  # gate.lambda_dir
    delivered: dict[str, Any] = field(default_factory=dict)  # skills/prompts version, fingerprint, true test acc
    oracle_available: bool = False
    # role -> USD of the whole run's calls of that role (every stage, the final held-out included)
    usd_by_role: dict[str, float] = field(default_factory=dict)
    # epoch -> {purpose: rollouts} (harness.identity.run_purpose: training batch, gate screen, gate, ...)
    rollouts_by_purpose: dict[int, dict[str, int]] = field(default_factory=dict)
    parse_modes: dict[str, int] = field(default_factory=dict)  # answer parse mode -> judged rollouts of the whole run
    # the soft score against the hard outcome over the run's judged rollouts that have one: (n, mean(soft - correct),
    # its SE); None without soft scores. A soft gate (gate.metric=soft) tests the accuracy only where the gap is ~0.
    soft_calibration: tuple[int, float, float] | None = None
    # the delivery certificate (harness/contracts/certificate.py) the harness was delivered with; None before certify
    certificate: Any = None
    proposals: tuple[Proposal, ...] = ()  # every proposed edit, in (epoch, step, task type) order
    diagnosis_cases: int = 0  # failures sent to the diagnoser over the run
    diagnosis_unparseable: int = 0  # of which no reply parsed (the editor got no diagnosis for them)
    # stage kind (rollout, evolve, gate, slow, certify, holdout) -> role -> llm_spend.json fields (calls, tokens, USD,
    # seconds): seconds describe the execution and go to reports/timing.md only
    spend_by_stage: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)

    def final_metrics(self) -> dict[str, float | int | None]:
        """The flat metrics of reports/metrics.json (deterministic: no timings, no cache counters)."""
        last = self.epochs[-1] if self.epochs else None
        held = {str(row["which"]): row for row in self.holdout}
        delivered_row = held.get("best") or held.get("delivered")
        metrics: dict[str, float | int | None] = {
            "epochs_run": len(self.epochs),
            "val_hard_acc": last.val_hard_acc if last else None,
            "val_soft_score": last.val_soft_score if last else None,
            "val_mixed_score": last.val_mixed_score if last else None,
            "best_val_acc": max((e.best_val_acc for e in self.epochs if e.best_val_acc is not None), default=None),
            "test_hard_acc": delivered_row["hard_acc"] if delivered_row else None,
            "accepted": sum(e.accepted for e in self.epochs),
            "rejected": sum(e.rejected for e in self.epochs),
            "probation": sum(e.probation for e in self.epochs),
            "rollouts": sum(e.rollouts for e in self.epochs),
            "usd": round(sum(self.usd_by_role.values()), 6),  # every role, every stage (held-out included)
            "fdr_level_spent": max((g.fdr_spent for g in self.gates if g.fdr_spent is not None), default=None),
            "fdr_tests": max((g.fdr_test for g in self.gates if g.fdr_test is not None), default=None),
            **parse_shares(self.parse_modes),  # parse_share_<mode>, parse_failure_rate (contracts/answers.py)
            "soft_calibration_gap": round(self.soft_calibration[1], 6) if self.soft_calibration else None,
            "soft_calibration_se": round(self.soft_calibration[2], 6) if self.soft_calibration else None,
        }
        for role, usd in sorted(self.usd_by_role.items()):
            metrics[f"usd_{role}"] = usd
        for which, row in sorted(held.items()):
            metrics[f"holdout_{which}_hard_acc"] = row["hard_acc"]
        if self.oracle_available:
            metrics["true_test_acc_delivered"] = self.delivered.get("true_test_acc")
        if self.certificate is not None:
            from harness.loop.certify import certificate_metrics

            metrics.update({k: (round(v, 6) if isinstance(v, float) else v) for k, v in certificate_metrics(self.certificate).items()
                            if not k.startswith("certify_type/")})
        return metrics
