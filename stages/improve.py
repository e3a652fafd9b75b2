"""improve: Harness² as a pipeline over tasks (seed 002 sweep layer).

    python -m stages.improve                       # pre-check + print the plan only (nothing runs)
    python -m stages.improve --check               # + executor preflight (service health, agent command), no task created
    python -m stages.improve --yes                 # run every domain, write reports/improve/sweep-report.json, log to MLflow
    python -m stages.improve --yes --domain D      # one domain only -> <improve.out_dir>/D/ (the DVC foreach stage)
    python -m stages.improve --aggregate           # domain reports -> sweep-report.json (+ MLflow): the DVC final stage

Settings come from the `improve` and `h2_round` groups of the config snapshot
(params.yaml); the options below override them for one invocation. The work is
one library call, harness/pipeline/improve.py `run_improve`. Tasks: the sim
benchmark's task types (improve.executor=sim, default) or a manifest
(--manifest / improve.manifest) run by an external CLI agent
(executor=command) or the remote task service (executor=service).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

# The config keys each DVC stage of this entry point reads (its `params:` in dvc.yaml,
# tests/pipeline/test_dvc_params.py), enforced by KeyView: improve@<domain> runs with --domain,
# improve_report with --aggregate; a whole sweep from the command line reads both.
PARAMS = {
    "improve": ("improve", "h2_round", "benchmark", "llm", "train.seed"),
    "improve_report": ("improve", "h2_round", "llm.model", "llm.models", "train.seed", "tracking"),
}


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m stages.improve", description="Harness² sweep over tasks: plan, check, run, report.")
    p.add_argument("--params", default="params.yaml", help="composed config snapshot (default: params.yaml)")
    p.add_argument("--quiet", action="store_true", help="warnings and errors only")
    p.add_argument("--manifest", help="sweep manifest (YAML/JSON); default improve.manifest, else the sim benchmark's tasks")
    p.add_argument("--domain", action="append", default=None, help="run only this domain (repeatable)")
    p.add_argument("--k", type=int, help="candidates per round (1..3; default h2_round.k)")
    p.add_argument("--mode", action="append", default=None, choices=("parallel", "sequential"), help="recursion mode (repeatable)")
    p.add_argument("--executor", choices=("sim", "command", "service"))
    p.add_argument("--backend", choices=("inprocess", "ray", "auto"), help="where command-executor probes run")
    p.add_argument("--run-tag", help="run tag (idempotency keys h2-<tag>-<role>-<label>; same tag = resume)")
    p.add_argument("--budget", type=float, help="USD cap per task and mode (default h2_round.budget_usd)")
    p.add_argument("--workers", type=int, help="domains run at the same time")
    p.add_argument("--out-dir", help="per-domain outputs (default improve.out_dir)")
    p.add_argument("--report-dir", help="sweep-report.json directory (default improve.report_dir)")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--yes", action="store_true", help="run the sweep (default: print the plan only)")
    g.add_argument("--check", action="store_true", help="preflight only: no task is created")
    g.add_argument("--aggregate", action="store_true", help="combine the domain reports into sweep-report.json")
    p.add_argument("--no-tracking", action="store_true", help="do not log to MLflow")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from harness.pipeline.entry import configure_and_load

    stage = "improve_report" if args.aggregate else "improve" if args.domain else None
    cfg = configure_and_load(stage or "improve", args)  # under `dvc repro`: `[k/N] improve@<domain>` and the time left
    if cfg is None:
        return 2
    from harness.config.key_view import KeyView
    from harness.pipeline.improve import ImproveOptions, run_improve

    cfg = KeyView(cfg, PARAMS[stage] if stage else PARAMS["improve"] + PARAMS["improve_report"], stage or "improve")
    options = ImproveOptions(action="aggregate" if args.aggregate else "check" if args.check else "run" if args.yes else "plan", manifest=args.manifest, domain=args.domain, k=args.k, mode=args.mode,
                             executor=args.executor, backend=args.backend, run_tag=args.run_tag, budget=args.budget,
                             workers=args.workers, out_dir=args.out_dir, report_dir=args.report_dir,
                             no_tracking=args.no_tracking)
    return run_improve(cfg, options, Path.cwd().resolve())


if __name__ == "__main__":
    sys.exit(main())
