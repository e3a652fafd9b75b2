"""evolve@E.S: diagnosis and per-skill candidate edits from the step's rollout.

    python -m stages.evolve --epoch 1 --step 1 --prev state/init --rollout state/e1/s1/rollout --out state/e1/s1/evolve
"""

from __future__ import annotations

import sys
from pathlib import Path

from harness.pipeline.entry import run_stage, stage_parser

# The config keys the stage reads: its `params:` in dvc.yaml (tests/pipeline/test_dvc_params.py), enforced by KeyView.
PARAMS = ("benchmark", "llm", "evolve.method", "evolve.max_case_questions", "evolve.edit_budget_start",
          "evolve.edit_budget_end", "evolve.max_skill_chars", "h2_round", "evolve.h2_probe_questions", "evolve.new_skill_min_failures", "evolve.prompts_dir", "evolve.candidates_path", "train.epochs", "train.steps_per_epoch", "train.run_name",
          "train.seed")
# Path keys DVC already sees in the stage's command line, deps or outs (state_dir: evolve=candidates reads the
# earlier steps' evolve.json to know what they proposed).
LOCATIONS = ("train.state_dir",)


def main(argv: list[str] | None = None) -> int:
    parser = stage_parser("evolve", "Diagnose failures and propose candidate edits.")
    parser.add_argument("--epoch", required=True, type=int)
    parser.add_argument("--step", required=True, type=int)
    parser.add_argument("--prev", required=True, type=Path)
    parser.add_argument("--rollout", required=True, type=Path)
    parser.add_argument("--out", required=True, type=Path)
    args = parser.parse_args(argv)

    def call(ctx, cfg) -> None:
        from harness.loop.stages.evolve import stage_evolve

        stage_evolve(ctx, args.epoch, args.step, args.prev, args.rollout, args.out)

    return run_stage(f"evolve@e{args.epoch}.s{args.step}", args, call, params=PARAMS, locations=LOCATIONS, out=args.out)


if __name__ == "__main__":
    sys.exit(main())
