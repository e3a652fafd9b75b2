"""The report step: collect the finished run, write ``reports/``, log the run to MLflow.

Used by the DVC ``report`` stage (one process, where importing MLflow pays
off once) and by ``stages.train`` (per sweep job, as a child run).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.loop.telemetry import telemetry_dir
from harness.pipeline.collect import RunLayout, collect_run
from harness.pipeline.learned import append_learned, run_changes
from harness.pipeline.render import tried_lines, write_reports
from harness.pipeline.summary import RunSummary
from harness.tracking.readable import readable

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
    source: str = "dvc",
) -> ReportResult:
    """Collect, render into `out_dir`, then finish the run's MLflow run when ``tracking.enabled``
    (harness/pipeline/tracking_run.py)."""
    started = time.monotonic()
    oracle = "; true accuracies from the simulator's oracle" if str(cfg.benchmark.name) == "sim" else ""
    log.info("[report] reading the run in %s: %d epochs x %d steps of reports and run logs%s",
             layout.state_dir, layout.epochs, layout.steps_per_epoch, oracle)
    summary = collect_run(cfg, layout)
    log.info("[report] read %d epochs and %d gate decisions in %.1f s; writing %s/ (metrics.json, plots, report.md, "
             "report.html)", len(summary.epochs), len(summary.gates), time.monotonic() - started, out_dir)
    files = write_reports(summary, out_dir)
    # what was learned: diff base -> delivered per file, each line with its gate (harness/pipeline/learned.py)
    append_learned(files["markdown"], files["html"], run_changes(layout.root / layout.state_dir, layout.epochs))
    log.info("[report] %s", ", ".join(f"{k}={readable(v)}" for k, v in summary.final_metrics().items() if v is not None))
    for line in tried_lines(summary):  # what was tried and, when nothing was installed, why (the report's "What was tried")
        log.info("[report] %s", line)
    run_id = None
    if bool(cfg.tracking.enabled):
        log.info("[report] logging the run to MLflow (experiment %s; importing mlflow takes a few seconds)",
                 cfg.tracking.experiment)
        from harness.pipeline.live_run import default_run_name
        from harness.pipeline.tracking_run import log_to_mlflow

        tel_dir = telemetry or telemetry_dir(project_root, layout.state_dir)
        run_id = log_to_mlflow(cfg, layout, summary, files, project_root=project_root,
                               run_name=mlflow_run_name or default_run_name(cfg), parent_run_id=parent_run_id,
                               telemetry=tel_dir, source=source)
    return ReportResult(summary, files, run_id)
