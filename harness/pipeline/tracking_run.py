"""The MLflow side of a training run beyond its live start: epochs as they end, and the finished run.

Used by the stages that log (``slow@e``: `log_stage_epoch`; ``report``:
`log_to_mlflow`) and by ``python -m stages.train`` (`tracked_training`,
`job_run_name`). When the run is created, resumed and ended:
harness/pipeline/live_run.py. Metric names and tables: docs/tracking.md.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import tempfile
import time
from pathlib import Path
from typing import Any

from harness.pipeline.collect import RunLayout, collect_epoch, gate_summary_rows, read_tables
from harness.pipeline.live_run import TrainingTracker, mark_interrupted, tracker_for
from harness.pipeline.summary import EpochSummary, RunSummary

log = logging.getLogger("harness.progress")

# MLflow tables the UI renders: one row per gate or per epoch (the per-pair tables stay Parquet only).
UI_TABLES = ("gate_summary", "dual_metric_eval", "shadow_gate", "holdout_eval")


def run_level_metrics(final: dict[str, Any], epoch_metrics: list[dict[str, Any]]) -> dict[str, Any]:
    """The run-level MLflow metrics: reports/metrics.json under the same names. A name that also has a
    per-epoch history (val_hard_acc, best_val_acc, ...) means the last epoch's value there, so it is not
    logged again; a value that disagrees with that history is a naming bug and raises."""
    last = max(epoch_metrics, key=lambda row: int(row["epoch"]), default={})
    per_epoch_keys = {k for row in epoch_metrics for k in row}
    out: dict[str, Any] = {}
    for key, value in final.items():
        if key not in per_epoch_keys:
            out[key] = value
        elif value is not None and last.get(key) is not None and abs(float(value) - float(last[key])) > 1e-12:
            raise ValueError(f"metric {key!r}: run-level value {value} differs from its last per-epoch value "
                             f"{last[key]}; give one of them another name (docs/tracking.md)")
    return out


def epoch_row(e: EpochSummary, cache: dict[int, tuple[int, int]]) -> dict[str, Any]:
    """The MLflow metrics of one epoch (EpochSummary.metrics names, cache counters from the telemetry)."""
    if e.epoch in cache:
        e = dataclasses.replace(e, cache_hits=cache[e.epoch][0], cache_misses=cache[e.epoch][1])
    return {k: v for k, v in e.metrics().items() if v is not None}


def _mtime_ms(path: Path) -> int | None:
    try:
        return int(path.stat().st_mtime * 1000)
    except OSError:
        return None


def end_epoch(tracker: TrainingTracker, layout: RunLayout, epoch: int, telemetry: Path) -> bool:
    """Log epoch `epoch` (just finished) into the live run, stamped now; False when it did not run or is logged."""
    from harness.loop.telemetry import per_epoch_cache, stage_names
    from harness.tracking.mlflow_log import log_epoch

    run_id = tracker.start()
    summary = collect_epoch(tracker.cfg, layout, epoch)
    if summary is None:
        return False
    cache = per_epoch_cache(telemetry, stage_names(layout.epochs, layout.steps_per_epoch))
    logged = log_epoch(tracker.uri, run_id, epoch, epoch_row(summary, cache), int(time.time() * 1000))
    if logged:
        log.info("[mlflow] epoch %d logged to run %s", epoch, run_id)
    return logged


def log_stage_epoch(cfg: Any, project_root: Path, epoch: int) -> bool:
    """What ``slow@e`` does once its telemetry is recorded: log epoch `epoch` (a no-op without tracking)."""
    from harness.loop.telemetry import telemetry_dir

    telemetry = telemetry_dir(project_root, str(cfg.train.state_dir))
    tracker = tracker_for(cfg, project_root, telemetry)
    if tracker is None:
        return False
    return end_epoch(tracker, RunLayout.from_config(cfg, project_root), epoch, telemetry)


def short_overrides(overrides: list[str]) -> str:
    """``gate.lambda=3.0 train=tiny`` -> ``lambda=3.0 train=tiny`` (the last part of each key; a run name)."""
    out = []
    for override in overrides:
        key, sep, value = override.partition("=")
        out.append(f"{key.lstrip('+~').rsplit('.', 1)[-1]}={value}" if sep else override)
    return " ".join(out)


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
    source: str = "dvc",
) -> str:
    """Finish the training run's live MLflow run (created now when training ran without one); its id."""
    from harness.loop.certify import certificate_tags
    from harness.loop.telemetry import per_epoch_cache, stage_names
    from harness.pipeline.render import accuracy_chart, gate_evidence_chart
    from harness.tracking.record import DatasetRef, TrackedRun

    tracker = TrainingTracker(cfg, layout.root, telemetry, run_name=run_name, source=source, parent_run_id=parent_run_id)
    cache = per_epoch_cache(telemetry, stage_names(layout.epochs, layout.steps_per_epoch))
    epoch_metrics = [epoch_row(e, cache) for e in summary.epochs]
    tables: dict[str, list[dict[str, Any]]] = read_tables(layout) if bool(cfg.tracking.log_tables) else {}
    if tables:  # one row per gate: decision, evidence at the stop, FDR level; what the UI shows
        tables["gate_summary"] = gate_summary_rows(summary)
    epoch_times = {e.epoch: t for e in summary.epochs if (t := _mtime_ms(layout.slow(e.epoch) / "DONE.json")) is not None}
    finished_ms = _mtime_ms(layout.holdout / "DONE.json") or int(time.time() * 1000)
    with tempfile.TemporaryDirectory(prefix="harness-plots-") as tmp:
        accuracy_svg = Path(tmp) / "accuracy_per_epoch.svg"
        evidence_svg = Path(tmp) / "gate_evidence_paths.svg"
        accuracy_svg.write_text(accuracy_chart(summary), encoding="utf-8")
        evidence_svg.write_text(gate_evidence_chart(summary), encoding="utf-8")
        artifacts: list[tuple[Path, str | None]] = [  # (path, artifact dir; None: a directory logged under its name)
            (accuracy_svg, "plots"), (evidence_svg, "plots"), (files["markdown"], "report"), (files["html"], "report"),
            (files["metrics"], "report")]
        if "timing" in files:  # wall time per stage kind and role (render.TIMING_MD)
            artifacts.append((files["timing"], "report"))
        artifacts += [(p, "plots/gate_evidence") for p in sorted(files["gate_evidence"].glob("*.csv"))]
        delivered = layout.holdout / "delivered"
        if delivered.is_dir():
            artifacts.append((delivered, None))  # a directory: logged as delivered/...
        if (layout.holdout / "certificate.json").is_file():
            artifacts.append((layout.holdout / "certificate.json", "delivered"))
        run = TrackedRun(
            run_name=run_name,
            params=tracker.params,
            tags={**tracker.tags(), **(certificate_tags(summary.certificate) if summary.certificate is not None else {})},
            epoch_metrics=epoch_metrics,
            summary_metrics=run_level_metrics(summary.final_metrics(), epoch_metrics),
            tables=tables,
            ui_tables=UI_TABLES,
            artifacts=artifacts,
            dataset=DatasetRef(layout.path(layout.questions_path), name=f"{summary.benchmark}-questions"),
        )
        run_id = tracker.finish(run, timestamp_ms=finished_ms, epoch_times_ms=epoch_times)
    log.info("[report] MLflow run %s in %s (experiment %s)", run_id, tracker.uri_key, cfg.tracking.experiment)
    return run_id


def job_run_name(run_name: str, overrides: list[str], swept_keys: list[str] | None) -> str:
    """A `stages.train` job's MLflow run name: ``train.run_name`` + the swept values (under a sweep, e.g.
    ``default lambda=3.0``) or + the command line's overrides (a single run), keys shortened to their last part."""
    job = [o for o in overrides if not o.lstrip("+~").startswith(("hydra", "sweep", "tracking", "quiet"))]
    if swept_keys is not None:
        job = [o for o in job if o.partition("=")[0].lstrip("+~") in swept_keys]
    shown = short_overrides(job)
    return f"{run_name} {shown}" if shown else run_name


@contextlib.contextmanager
def tracked_training(ctx: Any, tracker: TrainingTracker | None, telemetry: Path):
    """Around an in-process `runner.train`: start (or resume) the live run when a stage is left to run, yield the
    `after_stage` hook that logs each epoch after its slow stage, end the run FAILED or KILLED (SIGINT/SIGTERM)
    when training raises."""
    if tracker is None:
        yield None
        return
    from harness.kernel.schedule import full_schedule
    from harness.loop.state import resume_plan
    from harness.tracking.live import sigterm_raises

    if resume_plan(ctx.paths, full_schedule(int(ctx.cfg.train.epochs), int(ctx.cfg.train.steps_per_epoch))):
        tracker.start()

    layout = RunLayout.from_config(ctx.cfg, tracker.root)

    def after_stage(item: Any) -> None:
        if item.kind == "slow":
            end_epoch(tracker, layout, int(item.epoch), telemetry)

    with sigterm_raises():  # marked inside: a second SIGTERM is ignored until the run is marked
        try:
            yield after_stage
        except BaseException as error:
            mark_interrupted(tracker, error)
            raise
