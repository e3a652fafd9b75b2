"""The certificate's null side at scale: error rates with exact binomial p-values, from benchmarks/certificate.py's JSON.

    python benchmarks/certificate.py --kinds null harmful hidden --runs-per-cell 50 --first-seed 1000 --jobs 1 \
        --override certify.useful_pairs_ratio=0.5 --out /tmp/n.md
    python benchmarks/certificate_null.py /tmp/n.json

benchmarks/certificate.py runs every certificate through the product's code path and writes each run (world, kind,
seed, true gain Delta, certified, lower bound, ...) to its JSON; this script only counts. For each world shape, each
(world, candidate kind) cell, Delta exactly 0 against Delta < 0, and overall it reports

- certified given Delta <= 0 (the guarantee: <= alpha),
- certified and Delta < 0, over all runs,
- the lower bound above Delta, over all runs (the bound's guarantee: <= alpha),

each with its standard error and the exact one-sided binomial p-value P(X >= k | n, alpha) of the hypothesis "the
rate is alpha" against "above it" (small p: above alpha beyond its noise, a validity bug), and lists every run
certified with Delta <= 0 (the reproducer: world, kind, seed).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from scipy.stats import binom

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.certificate import _rate  # noqa: E402  (the same rate cell as the certificate report)

EXACT_ZERO = 1e-12  # |Delta| below this is a candidate that moves no population question's accuracy


def p_above(hits: int, n: int, alpha: float) -> float:
    """Exact one-sided binomial p-value P(X >= hits | n, alpha): how surprising `hits` of `n` is if the rate is alpha."""
    return 1.0 if n == 0 or hits == 0 else float(binom.sf(hits - 1, n, alpha))


def rates(runs: list[dict[str, Any]], alpha: float) -> dict[str, Any]:
    """The three error counts of a group of runs, with their denominators and p-values against alpha."""
    null = [r for r in runs if r["delta"] <= 0]
    out: dict[str, Any] = {"runs": len(runs), "null": len(null),
                           "exact_zero": sum(abs(r["delta"]) < EXACT_ZERO for r in null),
                           "certified_null": sum(bool(r["certified"]) for r in null),
                           "certified_worse": sum(bool(r["certified"]) and r["delta"] < 0 for r in runs),
                           "lcb_above": sum(r["lower_bound"] is not None and r["lower_bound"] > r["delta"] for r in runs)}
    out["p_certified_null"] = p_above(out["certified_null"], out["null"], alpha)
    out["p_certified_worse"] = p_above(out["certified_worse"], out["runs"], alpha)
    out["p_lcb_above"] = p_above(out["lcb_above"], out["runs"], alpha)
    return out


def _row(name: str, row: dict[str, Any]) -> str:
    return (f"| {name} | {row['runs']} | {row['null']} ({row['exact_zero']} at exactly 0) | "
            f"{_rate(row['certified_null'], row['null'])} | {row['p_certified_null']:.3f} | "
            f"{_rate(row['certified_worse'], row['runs'])} | {row['p_certified_worse']:.3f} | "
            f"{_rate(row['lcb_above'], row['runs'])} | {row['p_lcb_above']:.3f} |")


HEADER = ["| group | runs | Delta <= 0 | certified given Delta <= 0 | p (vs alpha) | certified and Delta < 0 | p | "
          "LCB > Delta | p |", "|---|---|---|---|---|---|---|---|---|"]


def report(runs: list[dict[str, Any]], alpha: float) -> tuple[str, dict[str, Any]]:
    worlds = list(dict.fromkeys(r["world"] for r in sorted(runs, key=lambda r: r["world"])))
    kinds = list(dict.fromkeys(r["kind"] for r in runs))
    summary: dict[str, Any] = {"alpha": alpha, "overall": rates(runs, alpha), "worlds": {}, "cells": {}, "kinds": {}}
    lines = ["## By world shape (all candidate kinds)", "", *HEADER]
    for w in worlds:
        summary["worlds"][w] = rates([r for r in runs if r["world"] == w], alpha)
        lines.append(_row(w, summary["worlds"][w]))
    lines.append(_row("**all worlds**", summary["overall"]))
    lines += ["", "## By candidate kind (all worlds)", "", *HEADER]
    for k in kinds:
        summary["kinds"][k] = rates([r for r in runs if r["kind"] == k], alpha)
        lines.append(_row(k, summary["kinds"][k]))
    lines += ["", "## By cell (world x kind)", "", *HEADER]
    for w in worlds:
        for k in kinds:
            cell = [r for r in runs if r["world"] == w and r["kind"] == k]
            if cell:
                summary["cells"][f"{w} | {k}"] = rates(cell, alpha)
                lines.append(_row(f"{w} / {k}", summary["cells"][f"{w} | {k}"]))
    zero = [r for r in runs if abs(r["delta"]) < EXACT_ZERO]
    below = [r for r in runs if r["delta"] < -EXACT_ZERO]
    summary["exact_zero"], summary["below_zero"] = rates(zero, alpha), rates(below, alpha)
    lines += ["", "## Delta exactly 0 against Delta < 0 (all worlds)", "", *HEADER,
              _row("Delta exactly 0", summary["exact_zero"]), _row("Delta < 0", summary["below_zero"])]
    bad = sorted((r for r in runs if r["delta"] <= 0 and r["certified"]), key=lambda r: (r["world"], r["kind"], r["seed"]))
    lines += ["", f"## Runs certified with Delta <= 0 ({len(bad)})", ""]
    if bad:
        lines += ["| world | kind | seed | Delta (pts) | share asked | pairs | crossed at | estimate (pts) | lower bound (pts) |",
                  "|---|---|---|---|---|---|---|---|---|"]
        lines += [f"| {r['world']} | {r['kind']} | {r['seed']} | {100 * r['delta']:+.2f} | {r.get('asked_share', 1.0):.2f} | "
                  f"{r['pairs']} | {r['crossed_at']} | {100 * r['estimate']:+.2f} | {100 * r['lower_bound']:+.2f} |"
                  for r in bad]
    lines += ["", "p: the exact one-sided binomial P(X >= k | n, alpha = %g); a p below 0.05 / (number of cells) would be a "
              "rate above alpha beyond its noise." % alpha]
    return "\n".join(lines) + "\n", summary


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("json", type=Path, help="the JSON benchmarks/certificate.py wrote beside its --out")
    ap.add_argument("--alpha", type=float, default=0.05)
    ap.add_argument("--out", type=Path, default=None, help="write the tables here (markdown) and the counts beside it (.json)")
    args = ap.parse_args(argv)
    runs = json.loads(args.json.read_text(encoding="utf-8"))["runs"]
    text, summary = report(runs, args.alpha)
    if args.out is not None:
        args.out.write_text(text, encoding="utf-8")
        args.out.with_suffix(".json").write_text(json.dumps(summary, indent=1) + "\n", encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
