"""The report step: collect the finished run, write ``reports/``, log the run to MLflow.

Used by the DVC ``report`` stage (one process, where importing MLflow pays
off once) and by ``stages.train`` (per sweep job, as a child run).
"""

from __future__ import annotations

import dataclasses
import logging
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.loop.telemetry import per_epoch_cache, stage_names, telemetry_dir
from harness.pipeline.collect import RunLayout, collect_run, read_tables
from harness.pipeline.learned import append_learned, run_changes
from harness.pipeline.render import accuracy_chart, gate_evidence_chart, write_reports
from harness.pipeline.summary import RunSummary

log = logging.getLogger("harness.progress")


@dataclass(frozen=True)
class ReportResult:
    summary: RunSummary
    files: dict[str, Path]
    mlflow_run_id: str | None


def make_report(
    cfg: Any,
    layout: RunLayout,
    out_dir: Path,
    *,
    project_root: Path,
    mlflow_run_name: str | None = None,
    parent_run_id: str | None = None,
    telemetry: Path | None = None,
) -> ReportResult:
    """Collect, render into `out_dir`, then log to MLflow when ``tracking.enabled``."""
    summary = collect_run(cfg, layout)
    files = write_reports(summary, out_dir)
    # what was learned: diff base -> delivered per file, each line with its gate (harness/pipeline/learned.py)
    append_learned(files["markdown"], files["html"], run_changes(layout.root / layout.state_dir, layout.epochs))
    log.info("[report] %s", ", ".join(f"{k}={v}" for k, v in summary.final_metrics().items() if v is not None))
    run_id = None
    if bool(cfg.tracking.enabled):
        tel_dir = telemetry or telemetry_dir(project_root, layout.state_dir)
        run_id = log_to_mlflow(cfg, layout, summary, files, project_root=project_root,
                               run_name=mlflow_run_name or str(cfg.train.run_name), parent_run_id=parent_run_id,
                               telemetry=tel_dir)
    return ReportResult(summary, files, run_id)


def config_params(cfg: Any) -> dict[str, str]:
    """The resolved config as flat MLflow params, secrets redacted; the derived schedule lists are left out."""
    from harness.config.key_view import resolved
    from harness.config.secrets import redact, secret_values
    from harness.tracking.store import redact_uri

    data = resolved(cfg)
    data = redact(data, secret_values(cfg.llm))
    flat: dict[str, str] = {}

    def walk(prefix: str, value: Any) -> None:
        if isinstance(value, dict):
            for key, sub in value.items():
                walk(f"{prefix}.{key}" if prefix else str(key), sub)
        else:
            flat[prefix] = "null" if value is None else str(value)

    walk("", data)
    for derived in ("train.schedule", "train.epoch_schedule"):
        flat.pop(derived, None)
    if flat.get("tracking.tracking_uri") not in (None, "null"):
        flat["tracking.tracking_uri"] = redact_uri(flat["tracking.tracking_uri"])
    return flat


def run_level_metrics(final: dict[str, Any], epoch_metrics: list[dict[str, Any]]) -> dict[str, Any]:
    """End-of-run metrics for MLflow without clobbering per-epoch histories: totals of per-epoch
    counters are renamed ``total_<name>``; values that equal the last epoch's entry are dropped."""
    per_epoch_keys = {k for row in epoch_metrics for k in row}
    out: dict[str, Any] = {}
    for key, value in final.items():
        if key in ("accepted", "rejected", "probation", "rollouts", "usd"):
            out[f"total_{key}"] = value
        elif key not in per_epoch_keys:
            out[key] = value
    return out


def log_to_mlflow(
    cfg: Any,
    layout: RunLayout,
    summary: RunSummary,
    files: dict[str, Path],
    *,
    project_root: Path,
    run_name: str,
    parent_run_id: str | None,
    telemetry: Path,
) -> str:
    from harness.tracking.mlflow_log import log_tracked_run
    from harness.tracking.provenance import git_commit, git_dirty
    from harness.tracking.record import DatasetRef, TrackedRun
    from harness.tracking.store import redact_uri, resolve_tracking_uri

    uri = resolve_tracking_uri(cfg.tracking.tracking_uri, project_root)
    cache = per_epoch_cache(telemetry, stage_names(layout.epochs, layout.steps_per_epoch))
    epoch_metrics = []
    for e in summary.epochs:
        row = {k: v for k, v in e.metrics().items() if v is not None}
        if e.epoch in cache:
            row["cache_hits"], row["cache_misses"] = cache[e.epoch]
        epoch_metrics.append(row)
    tags = {"harness.kind": "training", "harness.benchmark": summary.benchmark, "harness.run_name": summary.run_name,
            "harness.state_dir": layout.state_dir, "harness.tracking_uri": redact_uri(uri)}
    commit = git_commit(project_root)
    if commit:
        tags["mlflow.source.git.commit"] = commit
        tags["harness.git_dirty"] = str(git_dirty(project_root))
    tables = read_tables(layout) if bool(cfg.tracking.log_tables) else {}
    if tables:  # per gate: the level it was given (e-LOND alpha_t under gate.fdr=elond) next to its decision
        tables["gate_decisions"] = [dataclasses.asdict(g) for g in summary.gates]
    with tempfile.TemporaryDirectory(prefix="harness-plots-") as tmp:
        accuracy_svg = Path(tmp) / "accuracy_per_epoch.svg"
        evidence_svg = Path(tmp) / "gate_evidence_paths.svg"
        accuracy_svg.write_text(accuracy_chart(summary), encoding="utf-8")
        evidence_svg.write_text(gate_evidence_chart(summary), encoding="utf-8")
        artifacts = [(accuracy_svg, "plots"), (evidence_svg, "plots"), (files["markdown"], "report"),
                     (files["html"], "report"), (files["metrics"], "report")]
        artifacts += [(p, "plots/gate_evidence") for p in sorted(files["gate_evidence"].glob("*.csv"))]
        delivered = layout.holdout / "delivered"
        if delivered.is_dir():
            artifacts.append((delivered, None))  # a directory: logged as delivered/...
        run = TrackedRun(
            run_name=run_name,
            params=config_params(cfg),
            tags=tags,
            epoch_metrics=epoch_metrics,
            summary_metrics=run_level_metrics(summary.final_metrics(), epoch_metrics),
            tables=tables,
            artifacts=artifacts,
            dataset=DatasetRef(layout.path(layout.questions_path), name=f"{summary.benchmark}-questions"),
        )
        run_id = log_tracked_run(run, tracking_uri=uri, experiment=str(cfg.tracking.experiment),
                                 project_root=project_root, parent_run_id=parent_run_id)
    log.info("[report] MLflow run %s in %s (experiment %s)", run_id, redact_uri(uri), cfg.tracking.experiment)
    return run_id
