"""report: reports/ (DVC metrics and plots, Markdown and HTML run report) and the MLflow run.

    python -m stages.report --out reports

Reads the run laid out by the config (params.yaml): the state under
train.state_dir, the questions and pools files. This is the one DVC stage
that imports MLflow (when tracking.enabled).
"""

from __future__ import annotations

import sys
from pathlib import Path

from harness.pipeline.entry import run_stage, stage_parser

# The config keys the stage reads: its `params:` in dvc.yaml (tests/pipeline/test_dvc_params.py), enforced by KeyView.
PARAMS = ("benchmark", "llm", "gate", "evolve", "h2_round", "pools", "batching", "train", "tracking", "improve", "certify", "quiet")
# Path keys DVC already sees in the stage's command line, deps or outs.
LOCATIONS = ()


def main(argv: list[str] | None = None) -> int:
    parser = stage_parser("report", "Write the run report and log the run to MLflow.")
    parser.add_argument("--out", required=True, type=Path, help="reports directory")
    args = parser.parse_args(argv)

    def call(ctx, cfg) -> None:
        from harness.pipeline.collect import RunLayout
        from harness.pipeline.report import make_report

        make_report(cfg, RunLayout.from_config(cfg, ctx.root), args.out, project_root=ctx.root)

    return run_stage("report", args, call, params=PARAMS, locations=LOCATIONS, out=args.out)


if __name__ == "__main__":
    sys.exit(main())
