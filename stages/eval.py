"""eval: a harness on a pool, on its own — accuracy per task type with 95 % intervals, parse-mode shares (exit 0; 2 = error).

    python -m stages.eval --harness DIR [--pool test|validation|all] [--samples K] [--out DIR] [--no-tracking] [OVERRIDE ...]

OVERRIDE: the configuration, as for `python -m stages.train` (e.g. `llm=openai benchmark=jsonl
benchmark.path=questions.jsonl`). DIR is a harness in the layout `benchmark.harness_surface`, a seed or a workspace.
`--pool test|validation` reads `pools.path` (written by `dvc repro pools`). Writes eval.json, eval.md, runlog.sqlite
(the eval run `python -m stages.promote --eval DIR` checks), questions.parquet and harness/ to --out (default
runs/eval/<time>), and logs one MLflow run. Not a DVC stage (docs/evaluate.md).
"""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    from harness.pipeline.evaluate import eval_command, report_lines, run_eval

    def run(cfg, request, root):
        report = run_eval(cfg, request, root)
        lines = report_lines(report)
        mlflow = f"; MLflow run {report.mlflow_run_id}" if report.mlflow_run_id else ""
        return lines + [f"wrote {request.out}/eval.json, eval.md, runlog.sqlite{mlflow}; promote this harness with "
                        f"`python -m stages.promote --seed SEED_DIR --eval {request.out}`"]

    return eval_command("stages.eval", __doc__, argv, run)


if __name__ == "__main__":
    sys.exit(main())
