"""rollout@E.S: the current harness on the step's batch.

    python -m stages.rollout --epoch 1 --step 1 --prev state/init --batches state/e1/batches.json --out state/e1/s1/rollout
"""

from __future__ import annotations

import sys
from pathlib import Path

from harness.pipeline.entry import run_stage, stage_parser

# The config keys the stage reads: its `params:` in dvc.yaml (tests/pipeline/test_dvc_params.py), enforced by KeyView.
PARAMS = ("benchmark", "llm", "train.run_name", "gate.infra_max_ratio", "gate.infra_min_denominator")
# Path keys DVC already sees in the stage's command line, deps or outs.
LOCATIONS = ()


def main(argv: list[str] | None = None) -> int:
    parser = stage_parser("rollout", "Run the current harness on one mini-batch.")
    parser.add_argument("--epoch", required=True, type=int)
    parser.add_argument("--step", required=True, type=int)
    parser.add_argument("--prev", required=True, type=Path, help="state the step starts from")
    parser.add_argument("--batches", required=True, type=Path)
    parser.add_argument("--out", required=True, type=Path)
    args = parser.parse_args(argv)

    def call(ctx, cfg) -> None:
        from harness.loop.stages.rollout import stage_rollout

        stage_rollout(ctx, args.epoch, args.step, args.prev, args.batches, args.out)

    return run_stage(f"rollout@e{args.epoch}.s{args.step}", args, call, params=PARAMS, locations=LOCATIONS, out=args.out)


if __name__ == "__main__":
    sys.exit(main())
