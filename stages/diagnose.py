"""diagnose: a harness on a pool, then the diagnoser role on each failure — what is missing, per task type (exit 0; 2 = error).

    python -m stages.diagnose --harness DIR [--pool test|validation|all] [--samples K] [--out DIR] [--no-tracking] [OVERRIDE ...]

The evaluation is the one of `python -m stages.eval` (same files in --out); the diagnoses (harness/evolution/diagnose.py,
the diagnoser the evolve stage uses) go to diagnosis.md and diagnosis.json in --out (default runs/diagnose/<time>).
Not a DVC stage (docs/evaluate.md).
"""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    from harness.pipeline.evaluate import eval_command, run_diagnose

    def run(cfg, request, root):
        doc = run_diagnose(cfg, request, root)
        lines = [f"diagnosed {doc.diagnosed} of {doc.failures} failures of {doc.harness} (pool {doc.pool}, accuracy "
                 f"{doc.accuracy['accuracy']:.3f}); {doc.unparseable} unparseable diagnoser replies"]
        for task_type, block in doc.by_task_type.items():
            first = " ".join(block["diagnoses"][0][1].split())[:160] if block["diagnoses"] else "(no parsed diagnosis)"
            lines.append(f"  {task_type}: {block['failures']} failures; e.g. {first}")
        return lines + [f"wrote {request.out}/diagnosis.md and diagnosis.json"]

    return eval_command("stages.diagnose", __doc__, argv, run)


if __name__ == "__main__":
    sys.exit(main())
