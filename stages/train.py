"""Train in one process: the same stage functions as `dvc repro`, as a Hydra app.

    python -m stages.train                                  # default config, state under runs/<run_name>/<time>_<pid>/
    python -m stages.train gate.lambda=2.0 train=tiny       # any override
    python -m stages.train +sweep=gate_lambda               # multirun over gate.lambda (MLflow parent + children)
    python -m stages.train +sweep=gate_lambda hydra/launcher=processes hydra.launcher.n_jobs=2   # a killed job fails alone

Each job writes its state and reports under its Hydra output directory and
logs one MLflow run (a child of the sweep's parent run under a multirun).
"""

from __future__ import annotations

from pathlib import Path

import hydra
from omegaconf import DictConfig

import harness.config  # noqa: F401  (registers the ht.* resolvers and the schema before composition)

# Run directories named on the command line that existed before this process: never removed on an error.
_EXISTING_RUN_DIRS: set[Path] = set()


@hydra.main(config_path="../conf", config_name="config", version_base="1.3")
def main(cfg: DictConfig) -> float | None:
    from harness.pipeline.entry import one_line_errors
    from harness.pipeline.train_job import run_training_job
    from harness.tracking.progress import configure_logging

    configure_logging(quiet=bool(cfg.get("quiet", False)), use_existing_handlers=True)
    from harness.config.secrets import install_redaction, print_error, secret_values

    install_redaction(secret_values(cfg.llm))  # on Hydra's console and train.log handlers: no key in a log line
    try:
        return run_training_job(cfg)
    except one_line_errors() as exc:  # a bad config, an INFRA abort, unreadable answers: one line, exit 2, no traceback
        from harness.bench.jsonl import HarnessDirError
        from harness.config.errors import ConfigError

        if isinstance(exc, (ConfigError, HarnessDirError)):  # missed by the pre-check: leave no empty job directory behind
            from hydra.core.hydra_config import HydraConfig

            from harness.config.precheck import remove_unused_job_dir

            job_dir = Path(HydraConfig.get().runtime.output_dir).resolve()
            remove_unused_job_dir(job_dir, existed_before=job_dir in _EXISTING_RUN_DIRS, up_to=Path.cwd())
        print_error(f"stages.train: {exc}", cfg.llm)
        raise SystemExit(2) from None


if __name__ == "__main__":
    import sys

    from harness.config.precheck import precheck_or_exit
    from harness.config.project import enter_project_root
    from harness.config.secrets import print_error, refuse_secrets_on_command_line
    from harness.pipeline import run_lock
    from harness.pipeline.train_job import harness_dir_violations, rebase_outputs

    refuse_secrets_on_command_line(sys.argv[1:], "stages.train")  # before Hydra saves the overrides in .hydra/
    root = enter_project_root("stages.train")  # runs/, mlflow.db and the caches belong in the project root, not in cwd
    # every job's config is validated before Hydra creates a directory or a sweep opens its MLflow parent run
    precheck_or_exit("stages.train", sys.argv[1:], root, rebase_outputs, harness_dir_violations)
    try:  # no cluster at hydra/launcher=ray's address: one line before the sweep opens its MLflow parent run
        from hydra_plugins.harness_launcher.ray_launcher import RayClusterUnreachable, check_command_line

        check_command_line(sys.argv[1:])
    except RayClusterUnreachable as exc:
        print_error(f"stages.train: {exc}")
        sys.exit(2)
    try:  # a directory named on the command line is locked before Hydra writes .hydra/ and its log into it
        for directory in run_lock.explicit_dirs(sys.argv[1:]):
            if directory.exists():
                _EXISTING_RUN_DIRS.add(directory.resolve())
            run_lock.acquire(directory)
    except run_lock.RunDirInUse as exc:
        print_error(f"stages.train: {exc}")
        sys.exit(2)
    main()
