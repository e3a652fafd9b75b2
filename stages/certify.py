"""certify: the delivery certificate — the trained harness against the starting one, on fresh test-pool samples.

    python -m stages.certify --final state/e3/slow --pools data/pools.json --out state/certify
"""

from __future__ import annotations

import sys
from pathlib import Path

from harness.pipeline.entry import run_stage, stage_parser

# The config keys the stage reads: its `params:` in dvc.yaml (tests/pipeline/test_dvc_params.py), enforced by KeyView.
PARAMS = ("benchmark", "llm", "certify", "train.run_name", "train.seed", "train.epochs", "gate.infra_max_ratio",
          "gate.infra_min_denominator")
# Path keys DVC already sees in the stage's command line, deps or outs.
LOCATIONS = ("train.state_dir",)


def main(argv: list[str] | None = None) -> int:
    parser = stage_parser("certify", "Certify the trained harness against the starting one (certificate.json + delivered/).")
    parser.add_argument("--final", required=True, type=Path, help="state after the last epoch (its best pointer is certified)")
    parser.add_argument("--pools", required=True, type=Path)
    parser.add_argument("--out", required=True, type=Path)
    args = parser.parse_args(argv)

    def call(ctx, cfg) -> None:
        from harness.loop.stages.certify import stage_certify

        stage_certify(ctx, args.final, args.pools, args.out)

    return run_stage("certify", args, call, params=PARAMS, locations=LOCATIONS, out=args.out)


if __name__ == "__main__":
    sys.exit(main())
