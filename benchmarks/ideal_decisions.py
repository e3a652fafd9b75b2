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


def decision_value(runs: list[dict]) -> dict:
    """Over every candidate the runs gated: the true effect installed per gate (pts) by the row's decisions, by "more
    wins than losses" on the same pairs, by the best rule of (wins, losses) in hindsight (install the cells whose
    candidates' summed effect is > 0: in-sample, so optimistic for any rule of the pair counts), and by the oracle."""
    rows = [g for r in runs for g in (r.get("ideal_gates") or [])]
    if not rows:
        return {}
    cells: dict[tuple[int, int], float] = {}
    for g in rows:
        cells[(g["wins"], g["losses"])] = cells.get((g["wins"], g["losses"]), 0.0) + g["effect"]
    per_gate = 100 / len(rows)
    return {"rule": per_gate * sum(g["effect"] for g in rows if g["action"] == "accept"),
            "sign": per_gate * sum(g["effect"] for g in rows if g["wins"] > g["losses"]),
            "hindsight": per_gate * sum(v for v in cells.values() if v > 0),
            "perfect": per_gate * sum(g["effect"] for g in rows if g["effect"] > HELPED),
            "accepted_true": 100 * statistics.mean([g["effect"] for g in rows if g["action"] == "accept"] or [0.0]),
            "accepted_posterior": 100 * statistics.mean([g["posterior_mean"] for g in rows if g["action"] == "accept"] or [0.0])}


def epoch_curve(runs: list[dict]) -> list[tuple[int, float, float]]:
    """(epoch, mean cumulative training rollouts, mean best-pointer gain in pts) at each epoch end all runs reached."""
    depth = min(len(r["curve"]) for r in runs)
    return [(e + 1, statistics.mean(r["curve"][e]["rollouts"] for r in runs),
             100 * statistics.mean(r["curve"][e]["best_test"] - r["base_test"] for r in runs)) for e in range(depth)]


def perfect_at_cost(runs: list[dict], pairs: int) -> list[dict]:
    """The free ideal gate's runs (`oracle`) with `pairs` rollouts charged per gated candidate: its exact decisions
    (every helped edit, nothing else) at that cost, a bound for every rule that pays `pairs` a gate."""
    out = []
    for r in runs:
        if r["rule"] != e2e.ORACLE or r["tradeoff"]:
            continue
        curve = [dict(c) for c in r["curve"]]
        e2e.charge_ideal_pairs(curve, [{**g, "pairs": pairs} for g in r["ideal_gates"]])
        out.append({**r, "rule": f"oracle_perfect{pairs}", "curve": curve})
    return out


def perfect_lines(runs: list[dict], costs: tuple[int, ...] = (1, 3, 6, 12, 24, 48)) -> list[str]:
    """Reach of GEPA's budget-matched accuracy by the ideal gate's exact decisions, charged `costs` rollouts a gate."""
    by = {(r["seed"], r["rule"]): r for r in runs if not r["tradeoff"]}
    seeds = sorted({s for s, rule in by if rule == e2e.ORACLE})
    L = ["| perfect decisions at | reached <= 1.0x | reached (any) | median ratio | epoch ends (mean cum. rollouts, gain) |", "|---|---|---|---|---|"]
    for k in costs:
        charged = {r["seed"]: r for r in perfect_at_cost(runs, k)}
        ratios = []
        for seed in seeds:
            gepa, ours = by[(seed, "gepa")], by[(seed, e2e.OURS)]
            target = e2e.at_budget(gepa, ours["curve"][-1]["rollouts"])["best_test"]
            got, own = e2e.rollouts_to_reach(charged[seed], target), e2e.rollouts_to_reach(gepa, target)
            ratios.append(got / own if got is not None and own else None)
        med = median_ratio(ratios)
        pts = " ".join(f"({x:,.0f}, {g:+.1f})" for _, x, g in epoch_curve(list(charged.values()))[:4])
        L.append(f"| {k} rollouts a gate | {sum(r is not None and r <= 1.0 + 1e-9 for r in ratios)}/{len(ratios)} | "
                 f"{sum(r is not None for r in ratios)}/{len(ratios)} | {'n/a' if med is None else f'{med:.2f}x'} | {pts} |")
    return L


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
    L += ["", "True effect installed per gated candidate (pts, all gates of the whole runs): the row's decisions, wins > losses on the "
          "same pairs, the best rule of (wins, losses) in hindsight, perfect decisions; and the mean true vs posterior-mean effect "
          "of the candidates it installed:", "",
          "| rule | its decisions | wins > losses | best (wins, losses) rule in hindsight | perfect | installed: true / posterior mean |",
          "|---|---|---|---|---|---|"]
    for rule in summary["rules"]:
        if rule.startswith("oracle_"):
            v = decision_value([r for r in runs if r["rule"] == rule])
            L.append(f"| {rule} | {v['rule']:+.2f} | {v['sign']:+.2f} | {v['hindsight']:+.2f} | {v['perfect']:+.2f} | "
                     f"{v['accepted_true']:+.2f} / {v['accepted_posterior']:+.2f} |")
    L += ["", "Mean true effect (pts) of the candidates gated in each epoch (the prior's population drifts down over a run):", ""]
    for rule in summary["rules"]:
        rows = [g for r in runs if r["rule"] == rule for g in (r.get("ideal_gates") or [])]
        if rows:
            L.append(f"- {rule}: " + " ".join(f"e{e} {100 * statistics.mean(g['effect'] for g in rows if g['epoch'] == e):+.2f}"
                                              for e in sorted({g["epoch"] for g in rows})))
    if any(r["rule"] == e2e.ORACLE and r.get("ideal_gates") for r in runs):
        L += ["", "The free ideal gate's exact decisions charged K rollouts a gated candidate (its runs re-priced, same decisions):", ""]
        L += perfect_lines(runs)
    return "\n".join(L) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("json", type=Path, help="an e2e JSON (benchmarks/e2e.py --out X.md writes X.json)")
    args = ap.parse_args(argv)
    print(tables(json.loads(args.json.read_text(encoding="utf-8"))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
