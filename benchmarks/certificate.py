"""The delivery certificate on the simulated world, through the product's code path (issue 26 item 3).

    python benchmarks/certificate.py                  # ~300 certificates over 6 world shapes
    python benchmarks/certificate.py --runs-per-cell 5 --jobs 2 --out /tmp/cert.md

Each run: a world (seed, task types, questions per type), a population (a random subset of its questions, the
size of a test pool), a candidate harness built from the world's own rules, and one `run_certificate` (the
function training's certify stage and stages.compare call, sim provider, real prompts and parsers) of the
candidate against the base harness. The oracle gives the true gain Delta on the population. Candidates:

- null: neutral rules added to every skill file (Delta ~ 0, either sign);
- harmful: a trap added to one task type's skill file;
- hidden: an insight for one small task type and a trap for a larger one, Delta <= 0 (aggregates hide regressions);
- helpful: insights added to every task type with one (Delta > 0: power, cost, bound coverage and width);
- mixed: helpful on every type but one, which gets a trap instead (certifiable, one type truly worse: what the
  per-type rollback, `certify.per_type=rollback`, is for).

The certificate runs as the config says (`certify.per_type`: rollback by default); the delivered harness (the
candidate, its per-type rollback, or the base) is judged by the oracle too: certified and delivered truly not better,
and delivered with a task type truly worse than the base by > 2 pts.

Reported per world and overall: P(certified | Delta <= 0) (must be <= alpha), P(certified and Delta < 0), the
share of runs whose lower bound exceeds Delta (must be <= alpha), power, pairs and rollouts, mean width
(estimate - lower bound) and lower bound / Delta. Writes reports/benchmarks/certificate.md and .json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import multiprocessing as mp
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

# (label, n_task_types, questions_per_type, population size): the default world, a small-data world of the size a
# real user has, a 3-task-type world of ~120 questions, and skewed ones the product was not tuned on
WORLDS = [
    ("default 11x60, pop 330", 11, 60, 330),
    ("quick 4x45, pop 60", 4, 45, 60),
    ("3 types x40, pop 40", 3, 40, 40),
    ("3 types x40, pop 120", 3, 40, 120),
    ("6 types x30, pop 90", 6, 30, 90),
    ("11 types x20, pop 220", 11, 20, 220),
]
KINDS = ("null", "harmful", "hidden", "helpful", "mixed")


def _config(n_types: int, per_type: int, seed: int, overrides: tuple[str, ...] = ()) -> Any:
    from harness.config.load import load_config

    n = n_types * per_type
    third = max(n // 3, n_types)
    return load_config([f"benchmark.seed={seed}", f"benchmark.n_task_types={n_types}", f"benchmark.questions_per_type={per_type}",
                        f"pools.test_size={third}", f"pools.val_size={third}", f"pools.diagnosis_size={n - 2 * third}",
                        f"pools.eval_min_per_class={max(1, third // n_types)}", f"batching.batch_size={max(2, (n - 2 * third) // 2)}",
                        "batching.min_class_per_batch=1", "tracking=none", "train.epochs=1", *overrides], env_file=None, environ={})


def _candidate(world: Any, base: Any, kind: str, rng: random.Random) -> Any:
    from harness.contracts.solver import resolve_skill_file
    from harness.tree import HarnessTree

    files = {p: base[p] for p in base}
    types = list(world.task_type_names)

    def add(task_type: str, text: str) -> None:
        path = resolve_skill_file(base, task_type)
        files[path] = files[path].rstrip("\n") + f"\n- {text}\n"

    if kind == "null":
        for t in types:
            neutral = world.rules_of(t, "neutral")
            if neutral:
                add(t, rng.choice(neutral).text)
    elif kind == "harmful":
        t = rng.choice([t for t in types if world.rules_of(t, "trap")])
        add(t, world.rules_of(t, "trap")[0].text)
    elif kind == "hidden":
        with_insight = [t for t in types if world.rules_of(t, "insight")]
        small = rng.choice(with_insight)
        add(small, world.rules_of(small, "insight")[0].text)
        for t in rng.sample(types, k=max(1, len(types) // 2)):
            if t != small and world.rules_of(t, "trap"):
                add(t, world.rules_of(t, "trap")[0].text)
    elif kind == "helpful":
        for t in types:
            insight = world.rules_of(t, "insight")
            if insight:
                add(t, rng.choice(insight).text)
    elif kind == "mixed":
        trapped = rng.choice([t for t in types if world.rules_of(t, "trap")])
        for t in types:
            rules = world.rules_of(t, "trap" if t == trapped else "insight")
            if rules:
                add(t, rng.choice(rules).text)
    else:
        raise ValueError(kind)
    return HarnessTree(files)


def run_one(job: dict) -> dict:
    from harness.compose import build_benchmark, build_provider
    from harness.identity import CERTIFY_INDEX
    from harness.log import HarnessLog
    from harness.loop import rollouts as ro
    from harness.loop.certify import Contender, rollback_tree, run_certificate
    from harness.loop.context import make_context
    from harness.loop.stages.certify import certify_params
    from harness.sim.benchmark import SimBenchmark
    from harness.sim.oracle import Oracle

    label, n_types, per_type, pop = job["world"]
    seed, kind = job["seed"], job["kind"]
    root = Path(tempfile.mkdtemp(prefix="cert_bench_"))
    cfg = _config(n_types, per_type, seed, tuple(job.get("overrides", ())))
    bench = build_benchmark(cfg.benchmark, root)
    if not isinstance(bench, SimBenchmark):  # the oracle's true gains need the simulated world
        raise TypeError(f"benchmarks/certificate.py: benchmark.name must be 'sim', got {cfg.benchmark.name!r}")
    world = bench.world
    ctx = make_context(cfg, root, llm=build_provider(cfg.llm, world=world), bench=bench)
    rng = random.Random(f"{seed}|{kind}|{label}")
    base = world.base_harness()
    candidate = _candidate(world, base, kind, rng)
    qids = rng.sample(sorted(q.qid for q in world.questions), k=min(pop, len(world.questions)))
    oracle = Oracle(world)
    delta = oracle.expected_accuracy(candidate, qids) - oracle.expected_accuracy(base, qids)
    types = {q: world.question(q).task_type for q in qids}
    true_by_type = {}
    for t in sorted(set(types.values())):
        tq = [q for q in qids if types[q] == t]
        true_by_type[t] = oracle.expected_accuracy(candidate, tq) - oracle.expected_accuracy(base, tq)
    log = HarnessLog(root / "runlog.sqlite")
    started = time.monotonic()
    try:
        for arm in ("base", "candidate"):
            log.record_run(f"bench_certify_{arm}", "certify")
        cert = asyncio.run(run_certificate([Contender("candidate", candidate)], Contender("base", base), qids=qids,
                                           questions={q.qid: q for q in world.questions}, rollout=ro.rollout_fn(ctx, log),
                                           params=certify_params(cfg), fallback_share=0.2,
                                           run_id=lambda arm: f"bench_certify_{arm}", seed=seed, first_index=CERTIFY_INDEX,
                                           pool="bench", per_type=str(cfg.certify.per_type)))
    finally:
        log.close()
    a = cert.attempts[0]
    worst_type = min(true_by_type.values())
    chosen = cert.chosen
    delivered = base if chosen is None else candidate if not chosen.rollback else \
        rollback_tree(candidate, base, chosen.rollback["task_types"], shared=bool(chosen.rollback.get("shared")))[0]
    delivered_by_type = {t: oracle.expected_accuracy(delivered, [q for q in qids if types[q] == t])
                         - oracle.expected_accuracy(base, [q for q in qids if types[q] == t]) for t in true_by_type}
    retry = next((x for x in cert.attempts if x.rollback is not None), None)
    flagged = {r.task_type for r in a.per_task_type if r.flagged}
    return {"world": label, "seed": seed, "kind": kind, "delta": delta, "certified": cert.certified, "pairs": a.pairs,
            "rollouts": a.rollouts, "crossed_at": a.crossed_at, "estimate": a.estimate, "lower_bound": a.lower_bound, "upper_bound": a.upper_bound,
            "worst_type_delta": worst_type, "types_worse_2pts": sorted(t for t, d in true_by_type.items() if d < -0.02),
            "flagged": sorted(flagged), "per_type": cert.per_type, "cert_rollouts": cert.rollouts,
            "rollback": None if retry is None or retry.rollback is None else {
                "decision": retry.decision, "task_types": retry.rollback["task_types"], "rollouts": retry.rollouts},
            "delivered_delta": oracle.expected_accuracy(delivered, qids) - oracle.expected_accuracy(base, qids),
            "delivered_types_worse_2pts": sorted(t for t, d in delivered_by_type.items() if d < -0.02),
            "asked_share": a.share, "identical_types": list(a.identical_task_types),
            "wall_s": time.monotonic() - started}


def _rate(hits: int, n: int) -> str:
    if n == 0:
        return "n/a"
    p = hits / n
    return f"{p:.3f} ± {math.sqrt(max(p * (1 - p), 1e-12) / n):.3f} ({hits}/{n})"


def summarize(runs: list[dict], alpha: float, cmd: str, wall: float) -> tuple[str, dict]:
    lines = ["# Delivery certificate on the simulated world", "",
             f"Command: `{cmd}` — measured {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, wall {wall / 60:.1f} min. "
             f"alpha = {alpha}; each run is one `run_certificate` (the certify stage's and stages.compare's engine) of a "
             "candidate built from the world's rules against the base harness, on a random population of the world's "
             "questions; Delta = the oracle's true gain on that population.", "",
             "Columns up to `power` are about the first attempt (the candidate); `certified, delivered Delta <= 0` is about what "
             "is delivered (the candidate, its per-type rollback re-certified on fresh samples, or the base); rollouts include "
             "the re-certification.", "",
             "| world | candidates | runs | Delta <= 0 | certified given Delta <= 0 | certified and Delta < 0 | "
             "LCB > Delta | power (Delta > +3 pts) | certified, delivered Delta <= 0 | mean pairs | mean pairs to the crossing "
             "(certified runs) | mean rollouts | mean width (pts) | mean LCB / Delta |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    summary: dict[str, Any] = {"alpha": alpha, "worlds": {}}
    groups = [(w, [r for r in runs if r["world"] == w]) for w in dict.fromkeys(r["world"] for r in runs)]
    groups.append(("all worlds", runs))
    for name, rs in groups:
        null = [r for r in rs if r["delta"] <= 0]
        worse = [r for r in rs if r["delta"] < 0 and r["certified"]]
        miss = [r for r in rs if r["lower_bound"] is not None and r["lower_bound"] > r["delta"]]
        big = [r for r in rs if r["delta"] > 0.03]
        cert = [r for r in rs if r["certified"] and r["delta"] > 0]
        width = [100 * (r["estimate"] - r["lower_bound"]) for r in cert]
        ratio = [r["lower_bound"] / r["delta"] for r in cert]
        row = {"runs": len(rs), "null": len(null), "certified_null": sum(r["certified"] for r in null),
               "certified_worse": len(worse), "lcb_above_delta": len(miss), "power_n": len(big),
               "power_hits": sum(r["certified"] for r in big), "mean_pairs": statistics.mean(r["pairs"] for r in rs),
               "mean_rollouts": statistics.mean(r.get("cert_rollouts", r["rollouts"]) for r in rs),
               "certified_delivered_not_better": sum(r["certified"] and r.get("delivered_delta", r["delta"]) <= 0 for r in rs),
               "mean_width_pts": statistics.mean(width) if width else None,
               "mean_lcb_over_delta": statistics.mean(ratio) if ratio else None}
        summary["worlds"][name] = row
        kinds = ", ".join(sorted({r["kind"] for r in rs}))
        width_cell = "n/a" if not width else f"{statistics.mean(width):.1f}"
        crossed = [r["crossed_at"] for r in rs if r["certified"] and r["crossed_at"] is not None]
        crossed_cell = "n/a" if not crossed else f"{statistics.mean(crossed):.0f}"
        ratio_cell = "n/a" if not ratio else f"{statistics.mean(ratio):.2f}"
        lines.append(f"| {name} | {kinds} | {len(rs)} | {len(null)} | {_rate(row['certified_null'], len(null))} | "
                     f"{_rate(len(worse), len(rs))} | {_rate(len(miss), len(rs))} | {_rate(row['power_hits'], len(big))} | "
                     f"{_rate(row['certified_delivered_not_better'], len(rs))} | "
                     f"{row['mean_pairs']:.0f} | {crossed_cell} | {row['mean_rollouts']:.0f} | {width_cell} | {ratio_cell} |")
    # per kind, all worlds
    lines += ["", "## By candidate kind (all worlds)", "",
              "| kind | runs | mean Delta (pts) | certified | mean pairs | runs with a task type truly worse by > 2 pts | of those, flagged "
              "| rollbacks tried / certified | mean delivered Delta (pts) | delivered with a type truly worse by > 2 pts |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    for kind in KINDS:
        rs = [r for r in runs if r["kind"] == kind]
        if not rs:
            continue
        worse_type = [r for r in rs if r["types_worse_2pts"]]
        caught = [r for r in worse_type if set(r["flagged"]) & set(r["types_worse_2pts"])]
        lines.append(f"| {kind} | {len(rs)} | {100 * statistics.mean(r['delta'] for r in rs):+.1f} | "
                     f"{_rate(sum(r['certified'] for r in rs), len(rs))} | {statistics.mean(r['pairs'] for r in rs):.0f} | "
                     f"{len(worse_type)} | {len(caught)} | {sum(r.get('rollback') is not None for r in rs)} / "
                     f"{sum((r.get('rollback') or {}).get('decision') == 'certified' for r in rs)} | "
                     f"{100 * statistics.mean(r.get('delivered_delta', r['delta']) for r in rs):+.1f} | "
                     f"{sum(bool(r.get('delivered_types_worse_2pts')) for r in rs)} |")
    all_row = summary["worlds"]["all worlds"]
    lines += ["", "## Targets (issue 26 item 3)", "",
              f"- certified when Delta <= 0, over all worlds: {_rate(all_row['certified_null'], all_row['null'])} "
              f"(target <= alpha = {alpha}; refuses in {1 - all_row['certified_null'] / max(all_row['null'], 1):.1%}, target >= 95 %)",
              f"- lower bound above the true gain: {_rate(all_row['lcb_above_delta'], all_row['runs'])} (target <= alpha)",
              f"- certified and what is delivered truly not better (rollbacks included): "
              f"{_rate(all_row['certified_delivered_not_better'], all_row['runs'])} (target <= alpha)",
              f"- mean width of certified bounds (estimate - lower bound): {all_row['mean_width_pts']} pts; "
              f"lower bound / true gain: {all_row['mean_lcb_over_delta']}"]
    shares = [r["asked_share"] for r in runs if r.get("asked_share") is not None]
    if shares:  # certify.skip_identical: the first attempt asks only the questions whose input changed
        lines.append(f"- questions asked (`certify.skip_identical`): {sum(s < 1 for s in shares)}/{len(shares)} first attempts asked "
                     f"fewer than the whole population (the rest read identical input), mean share asked {statistics.mean(shares):.2f}")
    return "\n".join(lines) + "\n", summary


def kl_inf(gain: float, discordance: float) -> float:
    """max over bets lam in [0, 1) of E log(1 + lam Z) for Z in {-1, 0, 1} with mean `gain` and P(Z != 0) =
    `discordance`: the Kelly growth rate of the e-process, equal to the smallest KL divergence from this law to one
    with mean <= 0 (Honda & Takemura's KL_inf), so it bounds every level-alpha test, not only betting ones."""
    if gain <= 0:
        return 0.0
    d = max(discordance, gain + 1e-9)
    p, q = (d + gain) / 2, (d - gain) / 2
    lam = min(gain / d, 1 - 1e-9)
    return p * math.log1p(lam) + (q * math.log1p(-lam) if q > 0 else 0.0)


def wald_pairs(gain: float, discordance: float, alpha: float = 0.05, power: float = 0.95) -> float:
    """Wald's lower bound on E[pairs] of ANY sequential test at level alpha with this power against the gain:
    ((1 - b) log((1 - b) / alpha) + b log(b / (1 - alpha))) / KL_inf, b = 1 - power (the optional-stopping form of
    the data-processing inequality); inf when the gain is <= 0."""
    rate = kl_inf(gain, discordance)
    b = 1.0 - power
    num = power * math.log(power / alpha) + (b * math.log(b / (1 - alpha)) if b > 0 else 0.0)
    return math.inf if rate <= 0 else num / rate


def wald_report(path: Path, alpha: float = 0.05, power: float = 0.95) -> str:
    """Per certified run of an e2e JSON (our rule): the true gain of what the certificate tested (oracle, test pool),
    the discordance on its pairs, Wald's bound on the pairs any valid test needs, and the pairs it used."""
    doc = json.loads(path.read_text(encoding="utf-8"))
    rows = []
    for r in doc["runs"]:
        c = r.get("certificate")
        if r.get("rule") != "betting" or not c or not c.get("certified") or c.get("discordance") is None:  # our rule only
            continue
        gain = r["delivered_test"] - r["base_test"]
        rows.append((r["seed"], gain, c["discordance"], wald_pairs(gain, c["discordance"], alpha, power), c["pairs"]))
    lines = [f"{path}: Wald's bound at alpha {alpha}, power {power} (per certified run: seed, true gain, discordance, "
             "bound on E[pairs], pairs used by the certified attempt)"]
    lines += [f"  seed {s}: gain {100 * g:+.1f} pts, discordance {d:.2f}, bound {w:.0f} pairs, used {n}" for s, g, d, w, n in rows]
    finite = [w for _, _, _, w, _ in rows if math.isfinite(w)]
    if finite:
        lines.append(f"  mean bound {statistics.mean(finite):.0f} pairs = {2 * statistics.mean(finite):.0f} rollouts a run "
                     f"({len(finite)} certified runs with a positive true gain; refusals and rollback re-certifications not counted); "
                     f"mean pairs used {statistics.mean(n for *_, n in rows):.0f}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--wald", type=Path, nargs="+", metavar="E2E_JSON",
                    help="print Wald's bound on the pairs any valid certificate needs for the certified runs of e2e JSONs, and exit")
    ap.add_argument("--runs-per-cell", type=int, default=12, help="seeds per (world, candidate kind)")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--out", type=Path, default=ROOT / "reports" / "benchmarks" / "certificate.md")
    ap.add_argument("--worlds", nargs="+", default=None, metavar="PREFIX",
                    help="only the world shapes whose label starts with one of these (e.g. quick '3 types x40, pop 40')")
    ap.add_argument("--kinds", nargs="+", default=None, choices=KINDS, help="only these candidate kinds")
    ap.add_argument("--first-seed", type=int, default=100, help="seeds first-seed .. first-seed + runs-per-cell - 1")
    ap.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                    help="a config override for every certificate (e.g. certify.futility=predictive)")
    args = ap.parse_args(argv)
    if args.wald:
        print("\n".join(wald_report(p) for p in args.wald))
        return 0
    worlds = [w for w in WORLDS if args.worlds is None or w[0].startswith(tuple(args.worlds))]
    jobs = [{"world": w, "seed": args.first_seed + s, "kind": k, "overrides": list(args.override)}
            for w in worlds for k in (args.kinds or KINDS) for s in range(args.runs_per_cell)]
    started = time.monotonic()
    with mp.get_context("spawn").Pool(args.jobs) as pool:
        runs = []
        for i, r in enumerate(pool.imap_unordered(run_one, jobs), 1):
            runs.append(r)
            if i % 20 == 0 or i == len(jobs):
                print(f"[certificate] {i}/{len(jobs)} runs, {time.monotonic() - started:.0f} s", flush=True)
    runs.sort(key=lambda r: (r["world"], r["kind"], r["seed"]))
    cmd = ("python benchmarks/certificate.py" + (f" --runs-per-cell {args.runs_per_cell}" if args.runs_per_cell != 12 else "")
           + (" --worlds " + " ".join(repr(w) for w in args.worlds) if args.worlds else "")
           + (" --kinds " + " ".join(args.kinds) if args.kinds else "")
           + (f" --first-seed {args.first_seed}" if args.first_seed != 100 else "")
           + "".join(f" --override {o}" for o in args.override))
    text, summary = summarize(runs, 0.05, cmd, time.monotonic() - started)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text, encoding="utf-8")
    args.out.with_suffix(".json").write_text(json.dumps({"summary": summary, "runs": runs}, indent=1) + "\n", encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
