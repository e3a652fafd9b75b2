"""One `python -m stages.train` job: rebase the state under the job's directory,
run the whole schedule in process (harness/loop/runner.py `train`, resuming a finished part), write the job's reports and log an MLflow run
(a child of the sweep's parent run under a multirun).

Paths of outputs (``train.state_dir``, ``benchmark.questions_path``,
``pools.path``) are moved under the Hydra job directory, so parallel sweep
jobs never share state; inputs (``llm.cache_dir``: the shared response
cache, ``benchmark.path``) stay where they are, relative to the project root.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from omegaconf import DictConfig, OmegaConf, open_dict

from harness.config.errors import Violation

log = logging.getLogger("harness.progress")


def rebase_outputs(cfg: DictConfig, job_dir: Path, project_root: Path) -> None:
    """Move the run's output paths under `job_dir` (in place, before the config is resolved)."""
    try:
        prefix = Path(os.path.relpath(job_dir.resolve(), project_root.resolve()))
        if prefix.parts and prefix.parts[0] == "..":
            prefix = job_dir.resolve()
    except ValueError:  # another drive
        prefix = job_dir.resolve()
    readonly = OmegaConf.is_readonly(cfg)
    OmegaConf.set_readonly(cfg, False)
    with open_dict(cfg):
        cfg.train.state_dir = (prefix / str(cfg.train.state_dir)).as_posix()
        cfg.benchmark.questions_path = (prefix / str(cfg.benchmark.questions_path)).as_posix()
        cfg.pools.path = (prefix / str(cfg.pools.path)).as_posix()
    OmegaConf.set_readonly(cfg, readonly)


def run_training_job(cfg: DictConfig) -> float | None:
    """The body of the Hydra app; returns the best validation accuracy (a sweeper's objective)."""
    from hydra.core.hydra_config import HydraConfig

    from harness.pipeline.run_lock import run_dir_lock

    hydra_cfg = HydraConfig.get()
    job_dir = Path(hydra_cfg.runtime.output_dir)
    with run_dir_lock(job_dir):  # one job per run directory (RunDirInUse names the owner's PID)
        return _run_locked_job(cfg, hydra_cfg, job_dir)


def _run_locked_job(cfg: DictConfig, hydra_cfg, job_dir: Path) -> float | None:
    from harness.config.load import finalize_config
    from harness.loop.context import make_context
    from harness.loop.runner import train
    from harness.loop.telemetry import telemetry_dir
    from harness.pipeline.collect import RunLayout
    from harness.pipeline.live_run import tracker_for
    from harness.pipeline.report import make_report
    from harness.pipeline.tracking_run import job_run_name, tracked_training
    from harness.tracking.hydra_callback import parent_run_id_for_job, swept_keys_for_job

    project_root = Path.cwd().resolve()  # hydra.job.chdir=false: the directory the command ran in
    cli_overrides = list(hydra_cfg.overrides.task)
    rebase_outputs(cfg, job_dir, project_root)
    frozen = finalize_config(cfg, cli_overrides=cli_overrides)
    from harness.llm.preflight import require_api_key

    require_api_key(frozen.llm)  # a missing key is one line before prepare/pools run (PreflightError)
    log.info("[train] job dir %s, overrides: %s", job_dir, " ".join(cli_overrides) or "(none)")

    ctx = make_context(frozen, project_root)
    telemetry = telemetry_dir(project_root, str(frozen.train.state_dir))
    # the run's name: train.run_name + the swept values (a sweep job) or the command line's overrides
    run_name = job_run_name(str(frozen.train.run_name), cli_overrides, swept_keys_for_job(hydra_cfg))
    parent_run_id = parent_run_id_for_job(hydra_cfg)
    tracker = tracker_for(frozen, project_root, telemetry, run_name=run_name, source="train",
                          parent_run_id=parent_run_id, run_dir=job_dir)
    try:
        with tracked_training(ctx, tracker, telemetry) as after_stage:  # the live MLflow run
            train(ctx, telemetry=telemetry, after_stage=after_stage)
    finally:
        ctx.close()
    result = make_report(frozen, RunLayout.from_config(frozen, project_root), job_dir / "reports",
                         project_root=project_root, mlflow_run_name=run_name,
                         parent_run_id=parent_run_id, telemetry=telemetry, source="train")
    return result.summary.final_metrics().get("best_val_acc")


def harness_dir_violations(cfg: DictConfig, project_root: Path) -> list[Violation]:
    """The pre-check's job check (harness/config/precheck.py `CheckJob`): a `benchmark.harness_dir` that is not a
    harness tree is a config problem of the job, refused before Hydra creates a directory like any other bad value
    (the loader's reason: an empty tree, a non-UTF-8 file, a symlink)."""
    from harness.bench.jsonl import HarnessDirError
    from harness.compose import start_harness
    try:
        start_harness(cfg.benchmark, project_root)
    except HarnessDirError as exc:
        return [Violation("benchmark.harness_dir", str(cfg.benchmark.harness_dir), exc.reason)]
    return []
