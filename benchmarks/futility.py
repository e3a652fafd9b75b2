"""Futility stopping of the betting gate (issue 13 item 7): what each `gate.futility` rule saves and what it costs.

    python benchmarks/futility.py            # reports/benchmarks/futility.md (+ futility.json)
    python benchmarks/futility.py --quick    # fewer gates, reports/benchmarks/futility_quick.md
    (`python -m benchmarks.futility` works too)

Every gate is the default gate of the composed config (`load_config`), run as
the loop runs it (`benchmarks/fdr.run_gate_verdict` on the kernel's gate loop
`kernel/engine.run_gate`: the configured plan from SAMPLING_PLANS over GatePools
fed by pre-gate runs, `pair_block`, `gate_decision` after every block), with `gate.futility` set to each
registered rule in turn. The gates of one cell are PAIRED: gate g of every
futility rule sees the same pool, the same questions and the same outcomes
(one generator per gate, drawn block by block), so a rule that stops earlier
sees a prefix of the same sequence. Two accept levels: exp(-gate.lambda)
(the per-gate level of gate.md) and 0.0012, about e-LOND's level for the
first gates of a run (fdr_level 0.1, horizon 50).
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if __package__ in (None, ""):  # run as `python benchmarks/futility.py`: the repo root makes `benchmarks` importable
    sys.path.insert(0, str(ROOT))

from benchmarks import fdr  # noqa: E402  (the loop's gate on a simulated pool)
from benchmarks._report import publish, table  # noqa: E402
from harness.kernel.futility import (
    FUTILITY_RULES,
    EstimateParams,
)
from harness.kernel.registry import params_of  # noqa: E402
from harness.kernel.types import GateParams  # noqa: E402

POOLS = {"mixed pool (discordance ~0.15)": "mixed", "mid-difficulty pool (discordance ~0.4)": "mid"}
EFFECTS = (0.0, 5.0, 10.0)
ELOND_FIRST_LEVEL = 0.0012
SOFT_K = 4.0  # the simulator's soft_concentration: the soft-score world of the last sections
SOFT_RULES = ("none", "estimate", "soft_estimate")
HARD_WORLD, SOFT_WORLD = "outcomes only", f"rollouts with soft scores (k = {SOFT_K:g})"


def pool_p(rng: np.random.Generator, kind: str) -> np.ndarray:
    return fdr.make_pool(rng) if kind == "mixed" else rng.beta(2, 2, size=fdr.POOL)


def cell(seed: int, gates: int, kind: str, points: float, params: GateParams, futility: str, soft_k: float | None = None) -> dict:
    """`gates` paired gates (gate g: generator [seed, g]) under `futility`; `soft_k`: rollouts with soft scores
    (fdr.run_gate_verdict)."""
    acc = rej = early = futile = 0
    pairs: list[int] = []
    for g in range(gates):
        rng = np.random.default_rng([seed, g])
        world = fdr.make_world(rng, params, p=pool_p(rng, kind))
        gate_rng = np.random.default_rng([seed, g, 1])
        verdict, n, _ = fdr.run_gate_verdict(gate_rng, world, fdr.shifted(world.p, points), dataclasses.replace(params, futility=futility),
                                             seed=g, soft_k=soft_k)
        action = verdict.action
        acc += action == "accept"
        rej += action != "accept"
        early += action != "accept" and n < params.max_pairs
        futile += action != "accept" and verdict.reason.startswith("futility")
        pairs.append(n)
    p_acc = acc / gates
    return {"accept": p_acc, "accept_se": math.sqrt(p_acc * (1 - p_acc) / gates), "reject_early": early / gates,
            "futile": futile / gates, "reject_evidence": (early - futile) / gates, "mean_pairs": float(np.mean(pairs)), "pairs_se": float(np.std(pairs) / math.sqrt(gates)), "gates": gates}


def render(rows: list[dict], params: GateParams, quick: bool, wall: float, cmd: str) -> str:
    L = [f"# Futility stopping of the betting gate{' — QUICK mode' if quick else ''}", "",
         f"Command: `{cmd}` — measured {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, wall {wall / 60:.1f} min.", "",
         f"Gate: the default config's ({fdr.describe(params)}), `gate.futility` varied; `estimate` with futility_gain "
         f"{params_of(EstimateParams, params).futility_gain}, futility_power {params_of(EstimateParams, params).futility_power}, futility_z {params_of(EstimateParams, params).futility_z}. Each gate draws its own 60-question pool and its plan's "
         f"prior from {fdr.PRE_GATE_OBS} pre-gate runs; the futility rules of one row see the same gates (paired). "
         "P(accept) ± SE; 'reject side' = stopped before the cap by the reject e-process (evidence that the gain is below "
         "`gate.reject_margin`: what issue 13 item 6 bounds); 'futile' = stopped by the futility rule (no accept reachable, or "
         "hardly, in the pairs left: a budget decision, installed no more than an undecided gate at the cap); "
         "every other gate ran to the cap. A futility rule only turns 'continue' into 'reject', so its accepts are a subset "
         "of `none`'s on the same outcomes: it cannot raise the false-accept rate (the 0-point rows).", ""]
    for world, level_label in dict.fromkeys((r["world"], r["level_label"]) for r in rows):
        title = f"## Accept level {level_label}" + ("" if world == HARD_WORLD else f", {world}")
        intro = [] if world == HARD_WORLD else [
            "Each rollout also has a soft score v ~ Beta(k acc, k (1 - acc)) and is right with probability v (the simulator's "
            "model), and the pairs carry both arms' soft scores: what `soft_estimate` reads (in the sections above, without "
            "soft scores, it is `estimate` exactly, so it is left out there). Same seeds as above, different draws.", ""]
        base = {(r["pool"], r["points"]): r for r in rows
                if r["world"] == world and r["level_label"] == level_label and r["futility"] == "none"}
        cells = []
        for r in rows:
            if r["world"] != world or r["level_label"] != level_label:
                continue
            ref = base[(r["pool"], r["points"])]
            saved = 1 - r["mean_pairs"] / ref["mean_pairs"] if ref["mean_pairs"] else 0.0
            cells.append([r["pool"], f"{r['points']:+.0f}", f"`{r['futility']}`", f"{r['accept']:.3f} ± {r['accept_se']:.3f}",
                          f"{r['reject_evidence']:.3f}", f"{r['futile']:.3f}", f"{r['mean_pairs']:.0f} ± {r['pairs_se']:.0f}", f"{100 * saved:.1f} %"])
        L += [title, "", *intro,
              *table(["pool", "edit (pool points)", "futility", "P(accept)", "reject side", "futile", "mean pairs", "pairs saved vs none"], cells), ""]
    return "\n".join(L)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--gates", type=int, default=None, help="gates per cell (default 400; --quick 60)")
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--override", action="append", default=[], metavar="gate.KEY=VALUE",
                    help="config override of the measured gate (repeatable), e.g. gate.futility_gain=0.1")
    args = ap.parse_args(argv)
    gates = args.gates or (60 if args.quick else 400)
    out = args.out or ROOT / "reports" / "benchmarks" / ("futility_quick.md" if args.quick else "futility.md")
    params = fdr.configured_gate(tuple(args.override))
    levels = [(f"exp(-gate.lambda) = {math.exp(-params.lambda_accept):.3f}", params.lambda_accept),
              (f"{ELOND_FIRST_LEVEL} (e-LOND's first gates)", -math.log(ELOND_FIRST_LEVEL))]
    started = time.monotonic()
    rows = []
    hard_rules = [name for name in FUTILITY_RULES.names() if not getattr(FUTILITY_RULES.get(name), "soft_evidence", False)]
    for world, soft_k, rules in ((HARD_WORLD, None, hard_rules), (SOFT_WORLD, SOFT_K, list(SOFT_RULES))):
        for li, (level_label, lam) in enumerate(levels):
            p_level = dataclasses.replace(params, lambda_accept=lam)
            for pi, (pool_label, kind) in enumerate(POOLS.items()):
                for ei, points in enumerate(EFFECTS):
                    for futility in rules:
                        res = cell(1000 * li + 100 * pi + ei, gates, kind, points, p_level, futility, soft_k)
                        rows.append(dict(world=world, level_label=level_label, pool=pool_label, points=points, futility=futility, **res))
                        print(f"[futility] {world} | {level_label} | {pool_label} | {points:+.0f} | {futility}: "
                              f"accept {res['accept']:.3f}, pairs {res['mean_pairs']:.0f}", flush=True)
    cmd = ("python benchmarks/futility.py" + (" --quick" if args.quick else "") + (f" --gates {args.gates}" if args.gates else "")
           + "".join(f" --override {o}" for o in args.override))
    wall = time.monotonic() - started
    results = {"command": cmd, "quick": args.quick, "wall_seconds": wall, "gates_per_cell": gates, "gate": dataclasses.asdict(params), "rows": rows}
    publish(out, render(rows, params, args.quick, wall, cmd), results, echo=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
