"""gate@E.S: block-sequential validation of each candidate; the step's new state.

    python -m stages.gate --epoch 1 --step 1 --prev state/init --rollout state/e1/s1/rollout \
        --evolve state/e1/s1/evolve --out state/e1/s1/gate
"""

from __future__ import annotations

import sys
from pathlib import Path

from harness.pipeline.entry import run_stage, stage_parser

# The config keys the stage reads: its `params:` in dvc.yaml (tests/pipeline/test_dvc_params.py), enforced by KeyView.
PARAMS = ("benchmark", "llm", "gate", "evolve.cooldown_steps", "train.run_name", "train.seed")
# Path keys DVC already sees in the stage's command line, deps or outs.
LOCATIONS = ("train.state_dir", "pools.path")


def main(argv: list[str] | None = None) -> int:
    parser = stage_parser("gate", "Gate the step's candidate edits and write the new state.")
    parser.add_argument("--epoch", required=True, type=int)
    parser.add_argument("--step", required=True, type=int)
    parser.add_argument("--prev", required=True, type=Path)
    parser.add_argument("--rollout", required=True, type=Path)
    parser.add_argument("--evolve", required=True, type=Path)
    parser.add_argument("--out", required=True, type=Path)
    args = parser.parse_args(argv)

    def call(ctx, cfg) -> None:
        from harness.loop.stages.gate import stage_gate

        stage_gate(ctx, args.epoch, args.step, args.prev, args.rollout, args.evolve, args.out)

    return run_stage(f"gate@e{args.epoch}.s{args.step}", args, call, params=PARAMS, locations=LOCATIONS, out=args.out)


if __name__ == "__main__":
    sys.exit(main())
