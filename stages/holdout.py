"""holdout: deliver what the certify stage chose, with its certificate, and evaluate it on the test pool.

    python -m stages.holdout --final state/e3/slow --certify state/certify --pools data/pools.json --out state/holdout
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
    parser = stage_parser("holdout", "Deliver the certified harness and evaluate it on the test pool.")
    parser.add_argument("--final", required=True, type=Path, help="state after the last epoch")
    parser.add_argument("--certify", required=True, type=Path, help="the certify stage's output (what is delivered)")
    parser.add_argument("--pools", required=True, type=Path)
    parser.add_argument("--out", required=True, type=Path)
    args = parser.parse_args(argv)

    def call(ctx, cfg) -> None:
        from harness.loop.stages.holdout import stage_holdout

        stage_holdout(ctx, args.final, args.pools, args.out, args.certify)

    return run_stage("holdout", args, call, params=PARAMS, locations=LOCATIONS, out=args.out)


if __name__ == "__main__":
    sys.exit(main())
