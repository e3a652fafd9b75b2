"""pools: test -> validation -> diagnosis split, and the initial state (workspace v0 + checkpoint).

    python -m stages.pools --questions data/questions.parquet --out-pools data/pools.json --out-init state/init
"""

from __future__ import annotations

import sys
from pathlib import Path

from harness.pipeline.entry import run_stage, stage_parser

# The config keys the stage reads: its `params:` in dvc.yaml (tests/pipeline/test_dvc_params.py), enforced by KeyView.
PARAMS = ("benchmark", "pools", "train.init_seed")
# Path keys DVC already sees in the stage's command line, deps or outs.
LOCATIONS = ()


def main(argv: list[str] | None = None) -> int:
    parser = stage_parser("pools", "Split the questions into pools and write the initial state.")
    parser.add_argument("--questions", required=True, type=Path)
    parser.add_argument("--out-pools", required=True, type=Path)
    parser.add_argument("--out-init", required=True, type=Path)
    args = parser.parse_args(argv)

    def call(ctx, cfg) -> None:
        from harness.loop.stages.pools import stage_pools

        stage_pools(ctx, args.questions, args.out_pools, args.out_init)

    return run_stage("pools", args, call, params=PARAMS, locations=LOCATIONS, out=args.out_init)


if __name__ == "__main__":
    sys.exit(main())
