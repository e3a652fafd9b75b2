"""batches@E: the epoch's mini-batches of the diagnosis pool.

    python -m stages.batches --epoch 1 --prev state/init --pools data/pools.json --out state/e1/batches.json
"""

from __future__ import annotations

import sys
from pathlib import Path

from harness.pipeline.entry import run_stage, stage_parser

# The config keys the stage reads: its `params:` in dvc.yaml (tests/pipeline/test_dvc_params.py), enforced by KeyView.
PARAMS = ("batching", "train.seed")
# Path keys DVC already sees in the stage's command line, deps or outs.
LOCATIONS = ("benchmark.questions_path",)


def main(argv: list[str] | None = None) -> int:
    parser = stage_parser("batches", "Build one epoch's mini-batches.")
    parser.add_argument("--epoch", required=True, type=int)
    parser.add_argument("--prev", required=True, type=Path, help="state the epoch starts from")
    parser.add_argument("--pools", required=True, type=Path)
    parser.add_argument("--out", required=True, type=Path)
    args = parser.parse_args(argv)

    def call(ctx, cfg) -> None:
        from harness.loop.stages.batches import stage_batches

        stage_batches(ctx, args.epoch, args.prev, args.pools, args.out)

    return run_stage(f"batches@e{args.epoch}", args, call, params=PARAMS, locations=LOCATIONS, out=args.out)


if __name__ == "__main__":
    sys.exit(main())
