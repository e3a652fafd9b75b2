"""Tables of reports/benchmarks/ideal_decisions.md from an e2e JSON with ideal rows (oracle_n<K>, oracle_seq<K>).

    python benchmarks/ideal_decisions.py /tmp/bayes_dev.json

Per row, within our rule's budget B (e2e.summarize's cut): mean gain, rollouts used, installs by true effect, reach of
GEPA's budget-matched accuracy; per ideal row, over every candidate it gated in the whole run: pairs per gate and how
often it installed helped / null / harmful candidates; the best pointer at epoch ends (mean cumulative rollouts, gain).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks import e2e  # noqa: E402

HELPED = e2e.HELPED


def median_ratio(ratios: list[float | None]) -> float | None:
    """The median of the per-seed ratios, a seed that never reached counting as infinite (None when that is the
    median: fewer than half reached)."""
    if not ratios:
        return None
    xs = sorted(float("inf") if r is None else r for r in ratios)
    n = len(xs)
    mid = xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2
    return None if mid == float("inf") else mid


def decision_shares(runs: list[dict]) -> dict:
    """Over every candidate the rows' runs gated: mean pairs a gate, and the install share by true class."""
    rows = [g for r in runs for g in (r.get("ideal_gates") or [])]
    out = {"gates": len(rows), "pairs_per_gate": statistics.mean(g["pairs"] for g in rows) if rows else 0.0}
    for name, keep in (("helped", lambda x: x > HELPED), ("null", lambda x: abs(x) <= HELPED), ("harmful", lambda x: x < -HELPED)):
        cls = [g for g in rows if keep(g["effect"])]
        out[name] = (sum(g["action"] == "accept" for g in cls) / len(cls)) if cls else 0.0
    return out


def epoch_curve(runs: list[dict]) -> list[tuple[int, float, float]]:
    """(epoch, mean cumulative training rollouts, mean best-pointer gain in pts) at each epoch end all runs reached."""
    depth = min(len(r["curve"]) for r in runs)
    return [(e + 1, statistics.mean(r["curve"][e]["rollouts"] for r in runs),
             100 * statistics.mean(r["curve"][e]["best_test"] - r["base_test"] for r in runs)) for e in range(depth)]


def tables(saved: dict) -> str:
    runs = [r for r in saved["runs"] if not r["tradeoff"]]
    _, summary = e2e.summarize(runs, quick=False, wall=saved.get("wall_s", 0.0), cmd=saved.get("cmd", ""), measured=saved.get("measured"))
    n_seeds = len({r["seed"] for r in runs})
    L = [f"From `{saved.get('cmd', '?')}` (measured {saved.get('measured', '?')}), {n_seeds} seeds.", "",
         "| rule | pairs a gate | mean gain within B (pts) | rollouts used | installs | helped | null | harmful | "
         "reached <= 1.0x | reached (any) | median ratio | P(install) helped / null / harmful (all gates) |",
         "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for rule in summary["rules"]:
        s = summary[rule]
        ratios = [row["ratio"] for row in summary["reach_gepa"][rule]]
        within = sum(r is not None and r <= 1.0 + 1e-9 for r in ratios)
        anyr = sum(r is not None for r in ratios)
        med = median_ratio(ratios)
        rule_runs = [r for r in runs if r["rule"] == rule]
        d = decision_shares(rule_runs)
        pairs = f"{d['pairs_per_gate']:.1f}" if rule.startswith("oracle") else f"({s['rollouts_per_gate']:.1f} rollouts)"
        shares = f"{d['helped']:.2f} / {d['null']:.2f} / {d['harmful']:.2f}" if d["gates"] else "-"
        L.append(f"| {rule} | {pairs} | {s['mean_gain_pts']:+.2f} | {s['mean_rollouts']:,.0f} | {s['installed']} | {s['helped']} | "
                 f"{s['null']} | {s['hurt']} | {within}/{len(ratios)} | {anyr}/{len(ratios)} | "
                 f"{'n/a' if med is None else f'{med:.2f}x'} | {shares} |")
    L += ["", "Best pointer at epoch ends (mean cumulative training rollouts, gain in pts):", ""]
    for rule in summary["rules"]:
        pts = " ".join(f"({x:,.0f}, {g:+.1f})" for _, x, g in epoch_curve([r for r in runs if r["rule"] == rule]))
        L.append(f"- {rule}: {pts}")
    L += ["", "Per-seed ratios (rollouts to reach GEPA's accuracy within B / GEPA's; n/a = never):", "",
          "| rule | " + " | ".join(str(row["seed"]) for row in summary["reach_gepa"].get("gepa", [])) + " |",
          "|---|" + "---|" * len(summary["reach_gepa"].get("gepa", []))]
    for rule in summary["rules"]:
        L.append(f"| {rule} | " + " | ".join("n/a" if row["ratio"] is None else f"{row['ratio']:.2f}" for row in summary["reach_gepa"][rule]) + " |")
    return "\n".join(L) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("json", type=Path, help="an e2e JSON (benchmarks/e2e.py --out X.md writes X.json)")
    args = ap.parse_args(argv)
    print(tables(json.loads(args.json.read_text(encoding="utf-8"))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
