"""Shared plumbing of the `python -m stages.X` entry points.

An entry point parses its paths from argv, then `run_stage` loads the
config snapshot DVC tracks (``params.yaml``), configures logging (progress
lines on ``harness.progress``; ``--quiet`` shows warnings only), builds the
stage context rooted at the project directory (the working directory: DVC
runs every stage from the repository root) and calls the stage function.
Heavy modules are imported only inside the stage call, so start-up stays
cheap for the ~50 processes of a `dvc repro`.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Callable

from harness.loop.telemetry import StageTelemetry, cache_stats_of, record_stage, telemetry_dir
from harness.tracking.progress import PROGRESS_LOGGER, configure_logging

log = logging.getLogger(PROGRESS_LOGGER)


def stage_parser(stage: str, description: str) -> argparse.ArgumentParser:
    """An argument parser with the options every stage shares (--params, --quiet)."""
    parser = argparse.ArgumentParser(prog=f"python -m stages.{stage}", description=description)
    parser.add_argument("--params", default="params.yaml", help="composed config snapshot (default: params.yaml)")
    parser.add_argument("--quiet", action="store_true", help="warnings and errors only")
    parser.add_argument("--debug", action="store_true", help="show the traceback of an error (also HYDRA_FULL_ERROR=1)")
    return parser


def run_stage(
    stage: str,
    args: argparse.Namespace,
    call: Callable[[Any, Any], None],
    *,
    params: Sequence[str],
    locations: Sequence[str] = (),
    root: Path | None = None,
    out: Path | None = None,
    after: Callable[[Any, Path], None] | None = None,
) -> int:
    """Load the config, set up logging, build the context and run `call(ctx, cfg)`; returns an exit code.

    The stage sees the config through a KeyView of `params` (the keys its computation reads, its DVC
    `params:`) and `locations` (path keys DVC already sees in the stage's command line, deps or outs);
    reading any other key raises UndeclaredKeyError. `after(cfg, project_root)` runs once the stage's telemetry is
    recorded, with the whole config (``slow@e`` logs its epoch to MLflow there). A configuration, state or local
    store error (`LocalStoreError`: the response cache file), an INFRA-guard abort or an unreadable-answers stop
    (`one_line_errors`) is printed as one clear line (exit 2, no DONE.json: the stage did not finish);
    anything else propagates with its traceback.
    """
    cfg = configure_and_load(stage, args)
    if cfg is None:
        return 2
    project_root = (root or Path.cwd()).resolve()
    cfg = share_response_cache(cfg, project_root)
    from harness.config.key_view import KeyView
    from harness.config.secrets import print_error
    from harness.loop.context import make_context

    started = time.monotonic()
    if any(key == "llm" or key.startswith("llm.") for key in params):
        from harness.llm.preflight import require_api_key
        from harness.llm.protocol import PreflightError

        try:  # a missing key is said before the stage does any work
            require_api_key(cfg.llm)
        except PreflightError as exc:
            print_error(f"stages.{stage}: {exc}", cfg.llm)
            return 2
    view = KeyView(cfg, (*params, *locations), stage)
    ctx = make_context(view, project_root)
    tracked = stage_tracking(stage, cfg, project_root)  # the live MLflow run (harness/pipeline/live_run.py)
    try:
        with tracked:
            call(ctx, view)
    except one_line_errors() as exc:
        print_error(f"stages.{stage}: {exc}", cfg.llm)
        return 2
    finally:
        hits, misses, saved = cache_stats_of(ctx)
        ctx.close()  # flushes the response cache's counters
    seconds = time.monotonic() - started
    record_stage(telemetry_dir(project_root, str(cfg.train.state_dir)),
                 StageTelemetry(stage, hits, misses, round(saved, 6), round(seconds, 3)))
    if after is not None:
        after(cfg, project_root)
    rollouts, usd = stage_rollouts(out)
    log.info("[%s] finished in %.1f s: rollouts %d, USD %.4f, LLM cache %d hits / %d misses",
             stage, seconds, rollouts, usd, hits, misses)
    return 0


def stage_tracking(stage: str, cfg: Any, project_root: Path):
    """The stage's part in the run's live MLflow run (a no-op unless ``tracking.enabled``)."""
    from harness.pipeline.live_run import StageTracking

    return StageTracking(stage, cfg, project_root)


def show_tracebacks() -> bool:
    """``--debug`` on the command line or ``HYDRA_FULL_ERROR=1``: errors propagate with their traceback."""
    return os.environ.get("HYDRA_FULL_ERROR") == "1" or "--debug" in sys.argv[1:]


def command_exit(prog: str, body: Callable[[], int], known: tuple[type[BaseException], ...],
                 llm_cfg: Callable[[], Any], prefix: str) -> int:
    """Run a command line's `body` (stages.compare, stages.eval, stages.diagnose) and turn how it ended into its exit
    status with one line on stderr, never a traceback, so a CI check can tell a verdict from a fault: the body's own
    status when it returns; 2 for a `known` error (bad input, an outage: ``prefix`` and its message) and for any
    other exception (a fault, named as one: never a result); 130 for Ctrl-C and 143 for SIGTERM (how `timeout`, CI
    and `kill` stop a job), which raises inside the body like Ctrl-C, so its cleanup runs and a stopped run leaves
    no result behind. `llm_cfg()` is the loaded llm config once there is one (the API key's value is masked in the
    line). With ``--debug`` / ``HYDRA_FULL_ERROR=1`` an error propagates with its traceback."""
    from harness.config.secrets import print_error
    from harness.tracking.live import RunKilled, sigterm_raises

    try:
        with sigterm_raises():
            return body()
    except KeyboardInterrupt:
        print_error(f"{prog}: interrupted (Ctrl-C) before its result; what it had written is removed", llm_cfg())
        return 130
    except RunKilled:
        print_error(f"{prog}: stopped by SIGTERM before its result; what it had written is removed", llm_cfg())
        return 143
    except known as exc:
        print_error(f"{prefix} {exc}", llm_cfg())
        return 2
    except Exception as exc:
        if show_tracebacks():
            raise
        print_error(f"{prefix} failed with {type(exc).__name__}: {exc} (a fault, not a result; --debug or "
                    "HYDRA_FULL_ERROR=1 shows the traceback)", llm_cfg())
        return 2


def one_line_errors() -> tuple[type[BaseException], ...]:
    """Errors that stop a stage or a run with their one-line message, not a traceback: a bad config (`ConfigError`,
    every violation as `key = value: rule`), bad state, the local
    response store and an unusable endpoint (`StageStopError`: `LocalStoreError`, `PreflightError`), an LLM call
    that failed for good outside a rollout (`LLMError`: an editor or diagnoser call), the INFRA and scored-share guards (`InfraFailureError`), unreadable solver answers (`AnswerFormatError`) and
    a run directory another job holds (`RunDirInUse`), a resume the changed config refuses (`ResumeRefused`), a
    starting harness that is not a harness tree (`HarnessDirError`), and every corrupt or unreadable input or store
    named with its path (`InputFileError`, questions, documents, checkpoints, the tracking database). With
    ``--debug`` or ``HYDRA_FULL_ERROR=1`` nothing is caught: the traceback is shown."""
    if show_tracebacks():
        return ()
    from harness.bench.jsonl import HarnessDirError
    from harness.config.errors import ConfigError
    from harness.contracts.answers import AnswerFormatError
    from harness.inputs import InputFileError
    from harness.llm.protocol import LLMError, StageStopError
    from harness.loop.checkpoint import CheckpointError, ResumeRefused
    from harness.loop.documents import DocumentError
    from harness.loop.state import StateError
    from harness.loop.validate import InfraFailureError
    from harness.pipeline.run_lock import RunDirInUse
    from harness.questions import QuestionsError
    from harness.store import StoreError
    from harness.tracking.store import TrackingConfigError, TrackingDbError
    from harness.workspace import WorkspaceError

    return (ConfigError, StateError, StageStopError, LLMError, InfraFailureError, AnswerFormatError, RunDirInUse, InputFileError,
            QuestionsError, DocumentError, CheckpointError, StoreError, WorkspaceError, TrackingDbError,
            TrackingConfigError, HarnessDirError, ResumeRefused)


def stage_rollouts(out: Path | None) -> tuple[int, float]:
    """(rollouts, USD) recorded in the run-log fragment of a stage's output directory (0, 0.0 if none)."""
    import sqlite3

    from harness.loop.state import RUNLOG

    db = Path(out) / RUNLOG if out is not None else None
    if db is None or not db.is_file():
        return 0, 0.0
    conn = sqlite3.connect(f"file:{db.resolve()}?mode=ro", uri=True)
    try:
        if not conn.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name='predictions'").fetchone():
            return 0, 0.0
        count, usd = conn.execute("SELECT COUNT(*), COALESCE(SUM(cost_usd), 0) FROM predictions").fetchone()
    finally:
        conn.close()
    return int(count), float(usd)


def share_response_cache(cfg, project_root: Path):
    """`cfg` with a relative ``llm.cache_dir`` anchored in the shared project (DVC temp/queue copies
    reuse the original project's response cache instead of paying for every call again)."""
    import copy

    from omegaconf import open_dict

    from harness.config.load import freeze
    from harness.tracking.store import shared_project_root

    shared = shared_project_root(project_root)
    cache_dir = Path(str(cfg.llm.cache_dir))
    if shared == project_root.resolve() or cache_dir.is_absolute():
        return cfg
    moved = copy.deepcopy(cfg)
    from omegaconf import OmegaConf

    OmegaConf.set_readonly(moved, False)
    with open_dict(moved):
        moved.llm.cache_dir = str(shared / cache_dir)
    return freeze(moved)


def configure_and_load(stage: str, args: argparse.Namespace) -> Any | None:
    """Logging from `--quiet` (then the snapshot's `quiet`), and the config of `--params`; None after printing
    one clear line when the configuration is bad (the caller exits 2)."""
    configure_logging(quiet=args.quiet)
    from harness.config.errors import ConfigError
    from harness.config.project import stage_root_message
    from harness.config.secrets import print_error

    wrong_place = stage_root_message(f"stages.{stage}", Path(args.params))
    if wrong_place:
        print_error(wrong_place)
        return None

    try:
        cfg = load_stage_config(Path(args.params))
    except ConfigError as exc:
        print_error(f"stages.{stage}: bad configuration in {args.params}: {exc}")
        return None
    if cfg.get("quiet", False):
        configure_logging(quiet=True)
    from harness.config.secrets import install_redaction, secret_values

    install_redaction(secret_values(cfg.llm))  # the key's value never reaches a log line
    announce_progress(stage, cfg)
    from harness.pipeline.repro_progress import end_with_dvc

    end_with_dvc()  # `kill <dvc pid>` ends this stage too, not only DVC
    return cfg


def announce_progress(stage: str, cfg: Any) -> None:
    """Under `dvc repro`: log `[k/N] <stage>` and the time left (harness/pipeline/repro_progress.py)."""
    from harness.pipeline.repro_progress import announce_stage, pipeline_order

    improve = cfg.get("improve")
    order = pipeline_order(int(cfg.train.epochs), int(cfg.train.steps_per_epoch),
                           [str(d) for d in improve.domains] if improve is not None else ())
    line = announce_stage(stage, order, telemetry_dir(Path.cwd(), str(cfg.train.state_dir)))
    if line:
        log.info(line)


def load_stage_config(params_path: Path):
    """The frozen, validated config of the snapshot at `params_path`."""
    from harness.config.load import load_params

    return load_params(params_path)

