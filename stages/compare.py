"""compare: put a harness change through the product's evidence — certified better, or not (exit 0 / 1; 2 = error).

    python -m stages.compare --candidate DIR [--baseline DIR] [--pool all|test|validation] [--margin M]
                             [--alpha A] [--max-pairs N] [--seed S] [--out DIR] [--no-tracking] [OVERRIDE ...]

OVERRIDE: the configuration, as for `python -m stages.train` (e.g. `llm=openai benchmark=jsonl
benchmark.path=questions.jsonl`). `--baseline` defaults to the configured starting harness. A new `--seed` draws new
questions and fresh samples; the same seed replays from the response cache. Not a DVC stage (docs/compare.md).
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from pathlib import Path
from typing import Any


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m stages.compare", description=__doc__.splitlines()[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__.split("\n\n", 1)[1])
    parser.add_argument("--candidate", required=True, type=Path, help="the changed harness (a directory)")
    parser.add_argument("--baseline", type=Path, default=None, help="the current harness (default: the configured start)")
    parser.add_argument("--pool", choices=("all", "test", "validation"), default="all",
                        help="questions to draw from: all of the benchmark's (default), or a pool of pools.path")
    parser.add_argument("--margin", type=float, default=None,
                        help="non-inferiority: certify 'not worse by more than M' (accuracy scale, e.g. 0.02) instead of 'better'")
    parser.add_argument("--alpha", type=float, default=None, help="level (default certify.alpha, 0.05)")
    parser.add_argument("--max-pairs", type=int, default=None, help="pair budget (default certify.max_pairs)")
    parser.add_argument("--seed", type=int, default=0, help="which draws (a new seed is a fresh comparison)")
    parser.add_argument("--out", type=Path, default=None, help="where certificate.json goes (default runs/compare/<time>)")
    parser.add_argument("--no-tracking", action="store_true", help="do not log an MLflow run")
    parser.add_argument("overrides", nargs="*", help="config overrides (Hydra syntax)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    from harness.tracking.progress import quiet_third_party_loggers

    quiet_third_party_loggers()

    from harness.config.errors import ConfigError
    from harness.config.load import load_config
    from harness.config.secrets import install_redaction, print_error, secret_values
    from harness.pipeline.compare import CompareInputError, CompareRequest, run_compare
    from harness.pipeline.entry import command_exit, one_line_errors

    overrides = list(args.overrides)
    for key, value in (("certify.margin", args.margin), ("certify.alpha", args.alpha), ("certify.max_pairs", args.max_pairs)):
        if value is not None:
            overrides.append(f"{key}={value}")
    if args.seed < 0:
        print_error("error: --seed must be >= 0")
        return 2
    out = args.out or Path("runs") / "compare" / time.strftime("%Y-%m-%d_%H-%M-%S", time.gmtime())
    errors: tuple[type[BaseException], ...] = (ConfigError, CompareInputError, *one_line_errors())
    llm_cfg: Any = None  # until the config names llm.api_key_env, the environment's secret-looking variables are masked

    def body() -> int:
        nonlocal llm_cfg
        cfg = load_config(overrides)
        llm_cfg = cfg.llm
        install_redaction(secret_values(llm_cfg))  # the key's value never reaches a log line
        certificate = run_compare(cfg, CompareRequest(args.candidate, args.baseline, args.pool, args.seed, out,
                                                      not args.no_tracking), Path.cwd())
        print(certificate.summary)
        return 0 if certificate.certified else 1

    return command_exit("stages.compare", body, errors, lambda: llm_cfg, prefix="error:")


if __name__ == "__main__":
    sys.exit(main())
