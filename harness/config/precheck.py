"""`stages.train`'s command line checked before Hydra writes anything.

Hydra creates a job's output directory (``runs/<run_name>/<time>_<pid>/``,
``multirun/<time>/<n>/``), writes ``.hydra/`` and a log into it and, for a
sweep, opens the MLflow parent run, all before the job's code sees its config.
A configuration error found by the job would leave those behind. So the
entry point composes every job the command line would run (a sweep's jobs
expanded as Hydra's basic sweeper expands them), moves its outputs under the
job directory as the job will (`prepare_job`), and validates it
(`finalize_config`) first: a bad config stops with one message and exit 2,
and nothing is created. Hydra's own composition errors are printed as Hydra
prints them (exit 1) with "did you mean" for a misspelt key.

Budget sizing (issue 32 item 3, `budget_sizing`): each job's gate and
delivery certificate are sized from the config alone (harness/kernel/sizing.py:
the smallest gain the decision code accepts within the pair budget at a
pessimistic discordance). A budget that cannot accept even if every pair were a
win is refused like a bad config, naming the budget that would; one that needs
more than a plausible gain gets one warning line. docs/own-run.md "Budget
sizing" has the table.

`remove_unused_job_dir` is the fallback for an error the pre-check cannot see
(another sweeper, an unusual command line): it removes a job directory that
holds only what Hydra wrote into it.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf, open_dict

from harness.config.errors import ConfigError
from harness.config.suggest import did_you_mean, renamed_key_message, unknown_key_in_error

PrepareJob = Callable[[DictConfig, Path, Path], None]  # (task cfg, job dir, project root), in place
CheckJob = Callable[[DictConfig, Path], list[Any]]  # (final cfg, project root) -> Violations a layer above config finds
BASIC_SWEEPER = "hydra._internal.core_plugins.basic_sweeper.BasicSweeper"
HYDRA_FILES = {".hydra/config.yaml", ".hydra/hydra.yaml", ".hydra/overrides.yaml"}
LOCK_FILE = ".job.lock"  # harness/pipeline/run_lock.py LOCK_NAME (config sits below pipeline; a test keeps them equal)
# Options after which Hydra runs no job (help, printing the config, shell completion): nothing to check.
_NO_JOB = ("help", "hydra_help", "cfg", "info", "shell_completion", "experimental_rerun")


@dataclass(frozen=True)
class JobProblem:
    """A job of the command line whose config is invalid: its overrides, the error, and how many jobs the command
    line has (1 in run mode, the sweep's size in multirun)."""

    overrides: tuple[str, ...]
    error: ConfigError
    of_jobs: int = 1


class HydraCompositionError(Exception):
    """Hydra could not compose the command line; `message` is what Hydra prints, with "did you mean" added."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def _parse_args(argv: Sequence[str]) -> Any | None:
    """Hydra's own argument parser over `argv`; None when it refuses them (Hydra then reports it itself)."""
    from hydra._internal.utils import get_args_parser

    parser = get_args_parser()

    def refuse(message: str) -> None:
        raise ValueError(message)

    parser.error = refuse  # type: ignore[method-assign,assignment]  # Hydra's own run prints the usage error
    try:
        return parser.parse_args(list(argv))
    except (ValueError, SystemExit):
        return None


def _hydra_message(exc: BaseException) -> str:
    """The text Hydra's `run_and_report` prints for a compact Hydra error, plus "did you mean"."""
    from omegaconf.errors import OmegaConfBaseException

    renamed = renamed_key_message(unknown_key_in_error(exc))
    if renamed:  # one line naming the new key
        return renamed
    lines = [str(exc)]
    if isinstance(exc.__cause__, OmegaConfBaseException):
        lines.append(str(exc.__cause__))
    unknown = unknown_key_in_error(exc)
    hint = did_you_mean(unknown).lstrip("; ") if unknown else ""
    if hint:
        lines.append(hint[0].upper() + hint[1:])
    return "\n".join(lines)


def _task_part(cfg: DictConfig) -> DictConfig:
    """The job's config as the task function receives it: a copy without the `hydra` node."""
    task = copy.deepcopy(cfg)
    OmegaConf.set_readonly(task, False)
    with open_dict(task):
        del task["hydra"]
    return task


def _job_dir(cfg: DictConfig, key: str) -> Path:
    from hydra.core.hydra_config import HydraConfig

    HydraConfig.instance().set_config(cfg)  # `${hydra:...}` interpolations resolve as in the job
    if key == "run":
        return Path(str(cfg.hydra.run.dir))
    return Path(str(cfg.hydra.sweep.dir)) / str(cfg.hydra.sweep.subdir)


def _sweep_jobs(hydra_app: Any, cfg: DictConfig) -> list[list[str]] | None:
    """Each job's overrides as Hydra's basic sweeper makes them (None for another sweeper: not expanded here)."""
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
    from hydra.core.override_parser.overrides_parser import OverridesParser

    if str(cfg.hydra.sweeper.get("_target_")) != BASIC_SWEEPER:
        return None
    params = cfg.hydra.sweeper.get("params") or {}
    arguments = [f"{key}={value}" for key, value in params.items()] + list(cfg.hydra.overrides.task)
    parsed = OverridesParser.create(config_loader=hydra_app.config_loader).parse_overrides(arguments)
    return [list(job) for job in BasicSweeper.split_arguments(parsed, None)[0]]


def _pct(gain: float) -> str:
    return f"{100 * gain:.1f} points"


def _sizing_line(sizing: Any, keys: str) -> str:
    from harness.kernel.sizing import PESSIMISTIC_DISCORDANCE

    level = f"log E >= {sizing.level:.2f}" if sizing.what == "gate" else f"alpha {sizing.level:g}"
    rule = f"{sizing.rule}, " if sizing.what == "gate" else ""
    head = (f"{sizing.what} ({keys}; {rule}{level}, {sizing.max_pairs} pairs) at {PESSIMISTIC_DISCORDANCE:.0%} "
            "discordant pairs")
    if sizing.smallest_gain is None:
        return f"{head}: accepts no gain up to {_pct(sizing.discordance)} (gains cannot exceed the discordance)"
    return (f"{head}: accepts at about +{_pct(sizing.smallest_gain)}, more than a plausible "
            f"{'edit' if sizing.what == 'gate' else 'delivered harness'} (+{_pct(sizing.target_gain)})")


def budget_sizing(cfg: DictConfig) -> tuple[list[str], list[Any]]:
    """(warnings, violations) of the job's pair budgets (module doc): a violation when the gate or the certificate
    cannot accept even if every pair were a win; a warning when the smallest gain they accept at the pessimistic
    discordance is above a plausible one. Rules that do not spend `gate.max_pairs` are not sized. The certificate is
    sized with the budget it really has on the test pool (`CertifyParams.for_population`, as `run_certificate`)."""
    from harness.config.errors import Violation
    from harness.kernel.certificate import CertifyParams
    from harness.kernel.sizing import size_certificate, size_gate
    from harness.kernel.types import gate_params_from_config

    warnings: list[str] = []
    violations: list[Violation] = []
    sized = [("gate.max_pairs / gate.lambda", "gate.max_pairs", size_gate(gate_params_from_config(cfg.gate), suggest=False, refine=False))]
    if cfg.get("certify") is not None:
        certify = CertifyParams(**{k: cfg.certify[k] for k in CertifyParams.keys()})
        # the budget the certificate really has: sized on the test pool it certifies on (run_certificate does the same)
        pooled = certify.for_population(int(cfg.pools.test_size))
        keys = ("certify.max_pairs / certify.alpha" if pooled.max_pairs == certify.max_pairs else
                "certify.pairs_per_question x pools.test_size, certify.max_pairs / certify.alpha")
        sized.append((keys, "certify.max_pairs", size_certificate(pooled, suggest=False, refine=False)))
    for keys, budget_key, sizing in sized:
        if sizing is None:
            continue
        if not sizing.can_accept:
            would = (f"{budget_key} >= {sizing.pairs_needed}" if sizing.pairs_needed is not None
                     else f"a lower level ({keys.split(' / ')[1]})")
            violations.append(Violation(budget_key, sizing.max_pairs,
                                        f"the {sizing.what} cannot accept within {sizing.max_pairs} pairs even if every pair "
                                        f"were a win ({'log E >= %.2f' % sizing.level if sizing.what == 'gate' else 'alpha %g' % sizing.level}); "
                                        f"{would} would (docs/own-run.md, Budget sizing)"))
        elif not sizing.reaches_target:
            warnings.append(f"{_sizing_line(sizing, keys)}; see docs/own-run.md, Budget sizing")
    return warnings, violations


def check_train_command_line(argv: Sequence[str], project_root: Path, prepare_job: PrepareJob, *,
                             config_name: str = "config", warnings: list[str] | None = None,
                             check_job: CheckJob | None = None) -> list[JobProblem]:
    """Compose and validate every job `argv` would run (run mode: one; multirun: each sweep job), as the job will
    see its config after `prepare_job`, and size its pair budgets (`budget_sizing`); returns the jobs whose config
    is invalid (empty: all valid, or nothing to check), and appends each distinct sizing warning to `warnings`.
    Raises HydraCompositionError when Hydra cannot compose the command line."""
    from hydra import initialize_config_dir
    from hydra._internal.config_loader_impl import ConfigLoaderImpl
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import CompactHydraException
    from hydra.types import RunMode

    from harness.config.hydra_store import register_schema
    from harness.config.load import finalize_config

    args = _parse_args(argv)
    if args is None or any(getattr(args, name, None) for name in _NO_JOB):
        return []
    if args.config_path is not None or args.config_dir is not None or args.config_name is not None:
        return []  # another config tree: the job's own check (and `remove_unused_job_dir`) covers it
    conf = project_root / "conf"
    if not (conf / f"{config_name}.yaml").is_file() or GlobalHydra.instance().is_initialized():
        return []
    register_schema()
    overrides = list(args.overrides)
    problems: list[JobProblem] = []
    with initialize_config_dir(str(conf.resolve()), version_base="1.3", job_name="train"):
        hydra_app = GlobalHydra.instance().hydra
        assert hydra_app is not None  # initialize_config_dir created it
        try:
            # one composition serves both modes (Hydra's get_mode composes the same way); the sweep-override checks
            # of the mode actually run are applied below, as Hydra applies them
            cfg = hydra_app.compose_config(config_name=config_name, overrides=overrides, with_log_configuration=False,
                                           run_mode=RunMode.MULTIRUN, validate_sweep_overrides=False)
            multirun = args.multirun or cfg.hydra.mode == RunMode.MULTIRUN
            parsed = OverridesParser.create(config_loader=hydra_app.config_loader).parse_overrides(overrides)
            ConfigLoaderImpl.validate_sweep_overrides_legal(parsed, RunMode.MULTIRUN if multirun else RunMode.RUN,
                                                            from_shell=True)
            if not multirun:
                jobs: list[tuple[DictConfig, str]] = [(cfg, "run")]
            else:
                expanded = _sweep_jobs(hydra_app, cfg)
                if expanded is None:
                    return []
                jobs = []
                for number, job_overrides in enumerate(expanded):
                    job_cfg = hydra_app.config_loader.load_sweep_config(cfg, job_overrides)
                    with open_dict(job_cfg):
                        job_cfg.hydra.job.id = number
                        job_cfg.hydra.job.num = number
                    jobs.append((job_cfg, "sweep"))
        except CompactHydraException as exc:
            raise HydraCompositionError(_hydra_message(exc)) from exc
        for job_cfg, kind in jobs:
            task_overrides = tuple(str(o) for o in job_cfg.hydra.overrides.task)
            job_dir = _job_dir(job_cfg, kind)
            task = _task_part(job_cfg)
            try:
                prepare_job(task, job_dir, project_root)
                final = finalize_config(task, cli_overrides=list(task_overrides))
                job_warnings, refused = budget_sizing(final)
                refused = [*refused, *(check_job(final, project_root) if check_job is not None else [])]
                if refused:
                    raise ConfigError(refused)
            except ConfigError as exc:
                problems.append(JobProblem(task_overrides, exc, len(jobs) if multirun else 1))
                continue
            if warnings is not None:
                warnings.extend(w for w in job_warnings if w not in warnings)
    return problems


def problems_message(entry: str, problems: Sequence[JobProblem]) -> str:
    """One message for every invalid job; jobs with the same error share it (a bad key fails every sweep job)."""
    by_error: dict[str, list[tuple[str, ...]]] = {}
    for problem in problems:
        by_error.setdefault(str(problem.error), []).append(problem.overrides)
    of_jobs = max(problem.of_jobs for problem in problems)
    if of_jobs == 1:
        return f"{entry}: {next(iter(by_error))}"
    if len(by_error) == 1 and len(problems) == of_jobs:
        return f"{entry}: every job of the sweep ({of_jobs}): {next(iter(by_error))}"
    parts = []
    for error, jobs in by_error.items():
        which = "; ".join(" ".join(job) for job in jobs)
        parts.append(f"{entry}: {len(jobs)} of the sweep's {of_jobs} jobs ({which}): {error}")
    return "\n".join(parts)


def precheck_or_exit(entry: str, argv: Sequence[str], project_root: Path, prepare_job: PrepareJob,
                     check_job: CheckJob | None = None) -> None:
    """Run `check_train_command_line`; on an invalid config print one message and exit 2, on a Hydra composition
    error print Hydra's message (with "did you mean") and exit 1, as Hydra would. With ``HYDRA_FULL_ERROR=1`` or
    ``--debug`` the error propagates with its traceback."""
    from harness.config.secrets import print_error

    full_error = os.environ.get("HYDRA_FULL_ERROR") == "1" or "--debug" in argv
    warnings: list[str] = []
    try:
        problems = check_train_command_line(argv, project_root, prepare_job, warnings=warnings, check_job=check_job)
    except HydraCompositionError as exc:
        if full_error:
            raise
        print_error(exc.message + "\n\nSet the environment variable HYDRA_FULL_ERROR=1 for a complete stack trace.")
        raise SystemExit(1) from None
    except ConfigError as exc:
        problems = [JobProblem((), exc)]
    except Exception:  # noqa: BLE001  anything else the real run meets again and reports itself, as Hydra does
        if full_error:
            raise
        return
    if problems:
        if full_error:
            raise problems[0].error
        print_error(problems_message(entry, problems))
        raise SystemExit(2)
    for line in warnings:  # not "<entry>: ...": that prefix is the one line of an error (tests/pipeline/test_one_line_errors.py)
        print_error(f"warning ({entry}): {line}")


def remove_unused_job_dir(job_dir: Path, *, existed_before: bool, up_to: Path | None = None) -> bool:
    """Remove `job_dir` when this process created it and it holds only what Hydra wrote (``.hydra/``'s three files,
    an empty log, the job lock); returns whether it was removed. Parents below `up_to` (the project root) that are
    left empty go too (``runs/<run_name>/``); a parent holding anything (other runs) stays."""
    import shutil

    if existed_before or not job_dir.is_dir():
        return False
    files = {p.relative_to(job_dir).as_posix(): p for p in job_dir.rglob("*") if not p.is_dir()}
    for name, path in files.items():
        hydra_own = name in HYDRA_FILES or name == LOCK_FILE
        empty_log = "/" not in name and name.endswith(".log") and path.stat().st_size == 0
        if not (hydra_own or empty_log):
            return False
    dirs = {p.relative_to(job_dir).as_posix() for p in job_dir.rglob("*") if p.is_dir()}
    if dirs - {".hydra"}:
        return False
    shutil.rmtree(job_dir)
    if up_to is not None:
        stop = up_to.resolve()
        parent = job_dir.resolve().parent
        while parent != stop and stop in parent.parents and not any(parent.iterdir()):
            parent.rmdir()
            parent = parent.parent
    return True
