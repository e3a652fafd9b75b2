"""Tables of reports/benchmarks/ideal_decisions.md from an e2e JSON with ideal rows (oracle_n<K>, oracle_seq<K>).

    python benchmarks/ideal_decisions.py /tmp/bayes_dev.json
    python benchmarks/ideal_decisions.py --own e2.json e3.json e4.json     # section 4: certified products vs GEPA's run

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
        curve = [{**c, "by_purpose": dict(c["by_purpose"])} for c in r["curve"]]  # the run's own dicts untouched
        charged = [{**g, "pairs": pairs} for g in r["ideal_gates"]]
        e2e.charge_ideal_pairs(curve, charged)
        out.append({**r, "rule": f"oracle_perfect{pairs}", "curve": curve, "ideal_gates": charged})
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


PERFECT_COSTS = (1, 2, 3, 6)


def _mean_se(xs: list[float]) -> tuple[float, float]:
    return statistics.mean(xs), (statistics.stdev(xs) / len(xs) ** 0.5 if len(xs) > 1 else 0.0)


def own_totals(files: list[dict]) -> tuple[dict[int, float], dict[tuple[str, int], dict[int, dict]]]:
    """Over e2e JSONs whose runs all end with the certify stage (one file per --max-epochs): GEPA's own run per seed
    (`gepa` at the most epochs any file ran it: training rollouts, no certificate) and, per (rule, epochs), each
    seed's run as a certified product: training + certificate rollouts, delivered gain (pts), certified, some task
    type worse than the base by > 2 pts, gated candidates and pairs a gate (ideal rows); the free ideal gate's runs
    also re-priced at K rollouts a gated candidate (`oracle_perfect<K>`, K in PERFECT_COSTS: same decisions, same
    certificate). A (seed, rule, epochs) met in two files (our rule, run at its own epochs in each) must be the same
    run."""
    by: dict[tuple[str, int], dict[int, dict]] = {}
    for saved in files:
        runs = [*saved["runs"], *(r for k in PERFECT_COSTS for r in perfect_at_cost(saved["runs"], k))]
        for r in runs:
            if r["tradeoff"] or not r["curve"] or not r.get("certificate"):
                continue
            gates = r.get("ideal_gates") or []
            row = {**e2e.as_product(r), "gated": len(gates), "pairs": sum(g["pairs"] for g in gates) if gates else None}
            epochs = row["epochs"]
            seen = by.setdefault((r["rule"], epochs), {})
            if r["seed"] in seen and abs(seen[r["seed"]]["total"] - row["total"]) > 1e-9:
                raise ValueError(f"{r['rule']} at {epochs} epochs, seed {r['seed']}: two different runs in the files")
            seen[r["seed"]] = row
    gepa_epochs = max((e for rule, e in by if rule == "gepa"), default=None)
    if gepa_epochs is None:
        raise ValueError("no gepa runs in the files: GEPA's own run is the reference")
    reference = {seed: row["training"] for seed, row in by[("gepa", gepa_epochs)].items()}
    return reference, by


def own_lines(files: list[dict]) -> list[str]:
    """Section 4's tables: per (rule, epochs), over the seeds GEPA's own run has, training + certificate as a certified
    product, its paired difference from the same seed's GEPA own run, gain, certified, type > 2 pts, ideal rows' gated
    candidates and pairs a gate, and the runs at or under GEPA's own. Rows missing some seed are listed apart."""
    reference, by = own_totals(files)
    seeds = sorted(reference)
    ref_mean, ref_se = _mean_se([reference[s] for s in seeds])
    L = [f"GEPA's own run (its rule, {max(e for rule, e in by if rule == 'gepa')} epochs, no certificate): {ref_mean:,.0f} a "
         f"run (± {ref_se:.0f}), {len(seeds)} seeds ({seeds[0]}-{seeds[-1]}).", "",
         "| rule | epochs | training | certificate | total (± se) | minus GEPA's own (± se, paired) | gain (pts) | certified | "
         "type > 2 pts | gated a run | pairs a gate | runs at or under GEPA's own |", "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    partial = []
    for (rule, epochs), rows in sorted(by.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        if any(s not in rows for s in seeds):
            partial.append(f"{rule} at {epochs} epochs ({len([s for s in seeds if s in rows])} of {len(seeds)} seeds)")
            continue
        got = [rows[s] for s in seeds]
        total, total_se = _mean_se([g["total"] for g in got])
        diff, diff_se = _mean_se([g["total"] - reference[s] for g, s in zip(got, seeds)])
        pairs = [g["pairs"] for g in got if g["pairs"] is not None]  # pairs a gate: pooled over the runs' gates
        L.append(f"| {rule} | {epochs} | {statistics.mean(g['training'] for g in got):,.0f} | "
                 f"{statistics.mean(g['certificate'] for g in got):,.0f} | {total:,.0f} (± {total_se:.0f}) | "
                 f"{diff:+,.0f} (± {diff_se:.0f}) | {statistics.mean(g['gain_pts'] for g in got):+.2f} | "
                 f"{sum(g['certified'] for g in got)}/{len(got)} | {sum(bool(g['type_worse_2pt']) for g in got)}/{len(got)} | "
                 + (f"{statistics.mean(g['gated'] for g in got):.1f} | {sum(pairs) / sum(g['gated'] for g in got):.1f} | " if pairs else " |  | ")
                 + f"{sum(g['total'] <= reference[s] + 1e-9 for g, s in zip(got, seeds))}/{len(got)} |")
    if partial:
        L += ["", "Not on every seed (left out): " + "; ".join(partial) + "."]
    return L


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("json", type=Path, nargs="+", help="e2e JSONs (benchmarks/e2e.py --out X.md writes X.json); one "
                    "unless --own")
    ap.add_argument("--own", action="store_true", help="section 4: every rule's own run as a certified product, paired "
                    "with the same seed's GEPA own run, over all the files' seeds")
    args = ap.parse_args(argv)
    files = [json.loads(path.read_text(encoding="utf-8")) for path in args.json]
    if args.own:
        print("\n".join(own_lines(files)))
    elif len(files) != 1:
        ap.error("one JSON (several only with --own)")
    else:
        print(tables(files[0]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
