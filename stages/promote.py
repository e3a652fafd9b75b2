"""promote: make the harness an eval run evaluated a seed (train.init_seed=DIR); refused without a matching eval run.

    python -m stages.promote --seed DIR --eval RUN_DIR [--harness HARNESS_DIR]

RUN_DIR is the --out of `python -m stages.eval` (eval.json, runlog.sqlite, harness/). Without --harness the harness
copied there is promoted; with it, that harness must be the one the eval evaluated (same fingerprint, or the same
workspace versions). The eval's questions file must still have the content it recorded. Exit 0 written, 2 refused or
error (one line). Seeds are immutable: an existing non-empty DIR is refused. Not a DVC stage (docs/evaluate.md).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m stages.promote", description=__doc__.splitlines()[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__.split("\n\n", 1)[1])
    parser.add_argument("--seed", required=True, type=Path, help="the seed directory to write (must not exist)")
    parser.add_argument("--eval", dest="eval_dir", type=Path, default=None, help="the eval run directory (stages.eval --out)")
    parser.add_argument("--harness", type=Path, default=None, help="the harness to promote (default: the one the eval evaluated)")
    args = parser.parse_args(argv)

    from harness.config.secrets import print_error
    from harness.pipeline.entry import one_line_errors
    from harness.pipeline.evaluate import EvalInputError, make_eval_hint, promote_evaluated
    from harness.store import StoreError

    if args.eval_dir is None:
        print_error(f"stages.promote: no eval run given for {args.harness or 'the harness'}: a harness is promoted only "
                    f"with the eval run that measured it; {make_eval_hint(args.harness)}")
        return 2
    try:
        seed = promote_evaluated(args.seed, args.eval_dir, args.harness, Path.cwd())
    except (EvalInputError, StoreError) as exc:
        print_error(f"stages.promote: refused: {exc}; {make_eval_hint(args.harness)}")
        return 2
    except one_line_errors() as exc:
        print_error(f"stages.promote: {exc}")
        return 2
    print(f"wrote seed {seed.path} ({len(seed.skills)} skill files, {len(seed.prompts)} prompt files) from eval run "
          f"{seed.meta['eval_run_id']} ({args.eval_dir}); start a run from it with train.init_seed={args.seed}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
