"""The run figures README.md and docs/pipeline.md quote, written from the measured JSON, never typed by hand.

    python benchmarks/doc_figures.py --write    # after `python benchmarks/pipeline.py` (a fresh clone's `dvc repro`)
    python benchmarks/doc_figures.py --check    # exit 1 when a quoted block differs (tests/docs/test_doc_figures.py)

Each quoted block sits between `<!-- figures:<name> -->` and `<!-- /figures -->`; its text is rendered here from
reports/benchmarks/pipeline.json (the default run's wall and CPU time, its reports/metrics.json).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "reports" / "benchmarks" / "pipeline.json"
DOCS = (ROOT / "README.md", ROOT / "docs" / "pipeline.md")
BLOCK = re.compile(r"(<!-- figures:([a-z-]+) -->\n)(.*?)(<!-- /figures -->)", re.S)


def _pts(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:+.1f} pts"


def quickstart(res: dict[str, Any]) -> str:
    m, full = res["metrics"], res["full"]
    cert = ("certified" if m.get("certify_certified") == 1.0 else "not certified") if "certify_certified" in m else "no certificate"
    return (f"On the 2-core development machine (load {res['load_start']} at start) `dvc repro` took "
            f"{full['wall'] / 60:.1f} min wall ({full['cpu'] / 60:.1f} min CPU) for {res['stages']} stages, and a second "
            f"`dvc repro` {res['noop']['wall_median']:.1f} s (nothing to do); the delivered harness was {cert} "
            f"(gain {_pts(m.get('certify_estimate'))}, lower bound {_pts(m.get('certify_lower_bound'))}), held-out "
            f"accuracy {m['holdout_base_hard_acc']:.3f} -> {m['test_hard_acc']:.3f} (base -> delivered), "
            f"{m['rollouts']:,} training rollouts + {int(m.get('certify_rollouts') or 0):,} for the certificate "
            f"(commit {res['commit']}, `reports/benchmarks/pipeline.md`).\n")


def default_run(res: dict[str, Any]) -> str:
    m = res["metrics"]
    oracle = f", oracle {m['true_test_acc_delivered']:.3f}" if m.get("true_test_acc_delivered") is not None else ""
    return (f"The default run (commit {res['commit']}, `python benchmarks/pipeline.py`) moves held-out accuracy from "
            f"{m['holdout_base_hard_acc']:.3f} to {m['test_hard_acc']:.3f}{oracle} (`holdout_base_hard_acc` -> "
            f"`test_hard_acc` in `reports/metrics.json`) with {m['accepted']} accepted edits and {m['rollouts']:,} "
            f"training rollouts; its certificate: {_pts(m.get('certify_estimate'))}, anytime lower bound "
            f"{_pts(m.get('certify_lower_bound'))} on {int(m.get('certify_pairs') or 0)} pairs.\n")


RENDERERS: dict[str, Callable[[dict[str, Any]], str]] = {"quickstart": quickstart, "default-run": default_run}


def rendered(text: str, res: dict[str, Any], where: Path) -> str:
    def one(match: re.Match) -> str:
        name = match.group(2)
        if name not in RENDERERS:
            raise SystemExit(f"{where}: unknown figures block {name!r} (known: {', '.join(RENDERERS)})")
        return match.group(1) + RENDERERS[name](res) + match.group(4)

    return BLOCK.sub(one, text)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--write", action="store_true")
    mode.add_argument("--check", action="store_true")
    args = ap.parse_args(argv)
    if not SOURCE.is_file():
        print(f"{SOURCE} is missing: run python benchmarks/pipeline.py first", file=sys.stderr)
        return 2
    res = json.loads(SOURCE.read_text(encoding="utf-8"))
    stale = []
    for doc in DOCS:
        text = doc.read_text(encoding="utf-8")
        new = rendered(text, res, doc)
        if new != text:
            stale.append(doc)
            if args.write:
                doc.write_text(new, encoding="utf-8")
    if args.check and stale:
        print(f"quoted figures differ from {SOURCE.relative_to(ROOT)} in: {', '.join(str(d.relative_to(ROOT)) for d in stale)}; "
              "run python benchmarks/doc_figures.py --write", file=sys.stderr)
        return 1
    print(("updated " if args.write else "up to date: ") + (", ".join(str(d.relative_to(ROOT)) for d in stale) or "nothing to change"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
