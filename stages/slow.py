"""slow@E: the slow update at the end of an epoch (full validation, probation, momentum, early stop).

    python -m stages.slow --epoch 1 --last-gate state/e1/s5/gate --epoch-dir state/e1 --out state/e1/slow

The epoch's step rollouts are `<epoch-dir>/s<S>/rollout` for S = 1..train.steps_per_epoch.
"""

from __future__ import annotations

import sys
from pathlib import Path

from harness.pipeline.entry import run_stage, stage_parser

# The config keys the stage reads: its `params:` in dvc.yaml (tests/pipeline/test_dvc_params.py), enforced by KeyView.
PARAMS = ("benchmark", "llm", "gate", "evolve.edit_budget_end", "evolve.max_skill_chars", "evolve.prompts_dir", "train.run_name",
          "train.steps_per_epoch", "train.early_stop_patience", "train.slow_update", "train.momentum", "train.momentum_check", "train.type_check_drop",
          "train.system_tool_update", "train.reuse_identical")
# Path keys DVC already sees in the stage's command line, deps or outs.
LOCATIONS = ("train.state_dir", "pools.path")


def main(argv: list[str] | None = None) -> int:
    parser = stage_parser("slow", "Run the epoch's slow update.")
    parser.add_argument("--epoch", required=True, type=int)
    parser.add_argument("--last-gate", required=True, type=Path, help="state after the epoch's last step")
    parser.add_argument("--epoch-dir", required=True, type=Path, help="the epoch's directory (holds s<S>/rollout)")
    parser.add_argument("--out", required=True, type=Path)
    args = parser.parse_args(argv)

    def call(ctx, cfg) -> None:
        from harness.loop.stages.slow import stage_slow

        rollouts = [args.epoch_dir / f"s{step}" / "rollout" for step in range(1, int(cfg.train.steps_per_epoch) + 1)]
        stage_slow(ctx, args.epoch, args.last_gate, rollouts, args.out)

    def log_epoch(cfg, root: Path) -> None:  # the epoch has ended: its metrics go to the live MLflow run now
        from harness.pipeline.tracking_run import log_stage_epoch

        log_stage_epoch(cfg, root, args.epoch)

    return run_stage(f"slow@e{args.epoch}", args, call, params=PARAMS, locations=LOCATIONS, out=args.out,
                     after=log_epoch)


if __name__ == "__main__":
    sys.exit(main())
