"""Train in one process: the same stage functions as `dvc repro`, as a Hydra app.

    python -m stages.train                                  # default config, state under runs/<run_name>/<time>_<pid>/
    python -m stages.train gate.lambda=2.0 train=tiny       # any override
    python -m stages.train +sweep=gate_lambda               # multirun over gate.lambda (MLflow parent + children)
    python -m stages.train +sweep=gate_lambda hydra/launcher=joblib hydra.launcher.n_jobs=2

Each job writes its state and reports under its Hydra output directory and
logs one MLflow run (a child of the sweep's parent run under a multirun).
"""

from __future__ import annotations

import hydra
from omegaconf import DictConfig

import harness.config  # noqa: F401  (registers the ht.* resolvers and the schema before composition)


@hydra.main(config_path="../conf", config_name="config", version_base="1.3")
def main(cfg: DictConfig) -> float | None:
    import sys

    from harness.pipeline.entry import one_line_errors
    from harness.pipeline.train_job import run_training_job
    from harness.tracking.progress import configure_logging

    configure_logging(quiet=bool(cfg.get("quiet", False)), use_existing_handlers=True)
    try:
        return run_training_job(cfg)
    except one_line_errors() as exc:  # an INFRA abort or unreadable answers: one line, exit 2, no traceback
        print(f"stages.train: {exc}", file=sys.stderr)
        raise SystemExit(2) from None


if __name__ == "__main__":
    import sys

    from harness.config.project import enter_project_root
    from harness.config.secrets import refuse_secrets_on_command_line
    from harness.pipeline import run_lock

    refuse_secrets_on_command_line(sys.argv[1:], "stages.train")  # before Hydra saves the overrides in .hydra/
    enter_project_root("stages.train")  # runs/, mlflow.db and the caches belong in the project root, not in cwd
    try:  # a directory named on the command line is locked before Hydra writes .hydra/ and its log into it
        for directory in run_lock.explicit_dirs(sys.argv[1:]):
            run_lock.acquire(directory)
    except run_lock.RunDirInUse as exc:
        print(f"stages.train: {exc}", file=sys.stderr)
        sys.exit(2)
    main()
