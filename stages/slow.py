"""slow@E: the slow update at the end of an epoch (full validation, probation, momentum, early stop).

    python -m stages.slow --epoch 1 --last-gate state/e1/s5/gate --epoch-dir state/e1 --out state/e1/slow

The epoch's step rollouts are `<epoch-dir>/s<S>/rollout` for S = 1..train.steps_per_epoch.
"""

from __future__ import annotations

import sys
from pathlib import Path

from harness.pipeline.entry import run_stage, stage_parser


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

    return run_stage(f"slow@e{args.epoch}", args, call, out=args.out)


if __name__ == "__main__":
    sys.exit(main())
