"""How far a zero-sum edit is from zero on a validation pool of one task type (issue 13 item 7, the zero-sum target).

    python benchmarks/zero_sum_pool.py [--seeds 7 8 9 10 11] [--draws 2000]

The trade-off editor of benchmarks/e2e.py (`TradeoffProvider`) writes rules whose
expected effect over ALL questions of their task type is exactly 0: right
w.p. a = 0.6 on mid-difficulty questions (0.3 <= p <= 0.7) that were wrong,
wrong w.p. b on easy ones (p >= 0.8) that were right, b balancing the two. The
gate, rightly, tests the accuracy gain on the validation pool, which holds only
`pools.val_size / n_task_types` questions of each type. This prints, for the
base harness of each world seed, the distribution of that rule's exact
expected gain (oracle p, no sampling noise) on random pools of that many
questions of one type: its SD, and the share of pools on which the edit is
worth >= +3 / +5 points, i.e. an edit the gate should accept on the pool it was
given although it is null for the population.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if __package__ in (None, ""):  # run as `python benchmarks/zero_sum_pool.py`: the repo root makes `benchmarks` importable
    sys.path.insert(0, str(ROOT))

from benchmarks import e2e  # noqa: E402  (the trade-off editor's rates)

A = 0.6  # the trade-off editor's flip rate on mid-difficulty questions (benchmarks/e2e.py TradeoffProvider default)


def effects(p: np.ndarray, rates=None) -> np.ndarray:
    """Per-question expected effect of one trade-off rule on questions of base accuracy p, with the rates
    `rates(p, a) -> (a', b)` (default: e2e.tradeoff_rates, exactly zero-sum over p)."""
    a, b = (rates or e2e.tradeoff_rates)(list(p), A)
    mid, easy = (p >= e2e.MID[0]) & (p <= e2e.MID[1]), p >= e2e.EASY
    e = np.zeros_like(p)
    e[mid] = (1 - p[mid]) * a
    e[easy] = -p[easy] * b
    return e


def capped_rates(p, a):
    """The rates before the fix: b = min(1, a * gain / loss), a unchanged (not zero-sum when b is capped)."""
    gain, loss = sum(1 - x for x in p if e2e.MID[0] <= x <= e2e.MID[1]), sum(x for x in p if x >= e2e.EASY)
    return a, (min(1.0, a * gain / loss) if loss > 0 else 0.0)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, nargs="*", default=[7, 8, 9, 10, 11])
    ap.add_argument("--draws", type=int, default=2000, help="random pools per task type and seed")
    args = ap.parse_args(argv)
    from harness.compose import build_benchmark
    from harness.config.load import load_config
    from harness.sim.oracle import Oracle

    for label, rates in (("rates before the fix (b capped at 1)", capped_rates), ("e2e.tradeoff_rates (exact)", None)):
        report(label, rates, args, build_benchmark, load_config, Oracle)
    return 0


def report(label, rates, args, build_benchmark, load_config, Oracle) -> None:
    rng = np.random.default_rng(0)
    per_pool = None
    pool_gains: list[float] = []
    population: list[float] = []
    for seed in args.seeds:
        cfg = load_config([f"benchmark.seed={seed}", "tracking=none"], env_file=None, environ={})
        per_pool = int(cfg.pools.val_size) // int(cfg.benchmark.n_task_types)
        with tempfile.TemporaryDirectory() as tmp:
            world = build_benchmark(cfg.benchmark, Path(tmp)).world
            oracle, tree = Oracle(world), world.base_harness()
            for task_type in world.task_type_names:
                qids = world.qids_of(task_type)
                e = effects(np.array(oracle.p_correct_each(tree, qids)), rates)
                population.append(float(e.mean()))
                for _ in range(args.draws):
                    pool_gains.append(float(e[rng.choice(len(qids), size=min(per_pool, len(qids)), replace=False)].mean()))
    pop = 100 * np.array(population)
    g = 100 * np.array(pool_gains).reshape(len(population), args.draws)
    zero = np.abs(pop) < 0.1
    print(f"## {label}: seeds {args.seeds}, {len(population)} task types, pools of {per_pool} questions of one type, "
          f"{args.draws} random pools each")
    print(f"population effect (points): exactly 0 (|mean| < 0.1) on {int(zero.sum())} of {len(pop)} task types; on the "
          f"other {int((~zero).sum())} the rule is not null: {np.round(np.sort(pop[~zero]), 1).tolist()}")
    for label, rows in (("population-zero task types", g[zero]), ("all task types", g)):
        if rows.size:
            print(f"pool effect (points), {label}: SD {rows.std():.2f}; P(>= +3) {np.mean(rows >= 3):.3f}; "
                  f"P(>= +5) {np.mean(rows >= 5):.3f}; P(>= +10) {np.mean(rows >= 10):.3f}")


if __name__ == "__main__":
    sys.exit(main())
