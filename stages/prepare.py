"""prepare: the benchmark adapter writes the questions file.

    python -m stages.prepare --out data/questions.parquet
"""

from __future__ import annotations

import sys
from pathlib import Path

from harness.pipeline.entry import run_stage, stage_parser

# The config keys the stage reads: its `params:` in dvc.yaml (tests/pipeline/test_dvc_params.py), enforced by KeyView.
PARAMS = ("benchmark",)
# Path keys DVC already sees in the stage's command line, deps or outs.
LOCATIONS = ()


def main(argv: list[str] | None = None) -> int:
    parser = stage_parser("prepare", "Write the benchmark's questions (Parquet).")
    parser.add_argument("--out", required=True, type=Path, help="questions file to write")
    args = parser.parse_args(argv)

    def call(ctx, cfg) -> None:
        from harness.loop.stages.prepare import stage_prepare

        stage_prepare(ctx, args.out)

    return run_stage("prepare", args, call, params=PARAMS, locations=LOCATIONS, out=args.out)


if __name__ == "__main__":
    sys.exit(main())
