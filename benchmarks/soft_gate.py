"""What a gate on the soft score saves, and what it tests (issue 13 item 7: cost).

    python benchmarks/soft_gate.py            # reports/benchmarks/soft_gate.md
    python benchmarks/soft_gate.py --quick    # fewer runs, reports/benchmarks/soft_gate_quick.md
    (`python -m benchmarks.soft_gate` works too; results JSON next to the page)

A multiple-choice rollout's soft score v is the probability the model gave the
right letter at its answer position (harness/bench/soft.py); the letter is then
sampled from it, so the hard outcome is Bernoulli(v). Model of a rollout on a
question of accuracy p (the simulator's, harness/sim/solver.letter_distribution,
with its `soft_concentration` k): v ~ Beta(k p, k (1 - p)), correct ~ Bernoulli(v).
Large k: most of the randomness is settled before the answer token (v near p);
small k: v is near 0 or 1 and carries little more than the hard outcome.

Three pair statistics, each bet on by the product's accept e-process
(`kernel/betting.accept_bets`, `log_wealth_path`; uniform random order, weight 1):
- `hard`: C - B of the hard outcomes (gate.metric=hard, the default);
- `soft, rounded`: each arm's v rounded to {0, 1} with ONE uniform per (question,
  sample index), shared by the two arms of a pair (bench/soft.round_gate_value):
  what gate.metric=soft gives every rule that counts outcomes, and gave the
  betting rule before f630499;
- `soft, continuous`: v_C - v_B itself, in [-1, 1]: what the betting rule (the
  default) bets on under gate.metric=soft since f630499.

The accept e-process tests H0: E[Z] <= 0 for whichever Z it is fed. For the two
soft statistics that is the soft score's pool mean; it is the ACCURACY only when
the soft score is calibrated (E[v] = p for both harnesses). The last rows break
that on purpose: a candidate whose stated answer probability is inflated
(v reported as min(1, 1.3 v)) while its answers are exactly as often right.

Writes a Markdown report; figures are seeded (numpy default_rng) and measured in one run.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if __package__ in (None, ""):  # run as `python benchmarks/soft_gate.py`: the repo root makes `benchmarks` importable
    sys.path.insert(0, str(ROOT))

from benchmarks._report import publish, table  # noqa: E402
from harness.kernel.betting import accept_bets, log_wealth_path  # noqa: E402

STATISTICS = ("hard", "soft, rounded", "soft, continuous")
CONCENTRATIONS = (1.0, 4.0, 16.0)  # 4.0 is the simulator's soft_concentration (harness/sim/world.py)
LEVELS = {"0.0498 (lambda 3.0, one gate)": 3.0, "0.0085 (e-LOND's median level in e2e)": -math.log(0.0085)}
CAP = 4000
BUDGET = 400  # the product's gate.max_pairs
INFLATION = 1.3


def _sig(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def shift_for_gain(logits: np.ndarray, points: float) -> np.ndarray:
    """The candidate's accuracies: the same logit shift on every question, chosen (bisection) so that the pool's
    mean accuracy moves by `points` / 100."""
    base = _sig(logits)
    if points == 0:
        return base.copy()
    lo, hi = (0.0, 8.0) if points > 0 else (-8.0, 0.0)
    for _ in range(80):
        mid = (lo + hi) / 2
        gain = float(np.mean(_sig(logits + mid) - base)) * 100
        lo, hi = (mid, hi) if gain < points else (lo, mid)  # the gain rises with the shift
    return _sig(logits + (lo + hi) / 2)


@dataclass(frozen=True)
class Population:
    name: str
    baseline: np.ndarray  # per-question accuracy of the baseline harness
    candidate: np.ndarray  # ... of the candidate (the hard outcome's probability)
    inflate: bool = False  # the candidate's reported soft score is min(1, INFLATION v) (miscalibrated)

    @property
    def gain_points(self) -> float:
        return float(np.mean(self.candidate - self.baseline)) * 100


def populations(rng: np.random.Generator) -> list[Population]:
    wide = rng.normal(0.0, 2.5, 200)  # gate.md section 4: 200 questions, baseline logits N(0, 2.5^2)
    mid = np.log(p := rng.beta(2, 2, 60)) - np.log1p(-p)  # fdr.py's mid-difficulty pool: 60 questions, p ~ Beta(2, 2)
    out = []
    for label, logits in (("wide pool (200 q, logits N(0, 2.5²))", wide), ("mid pool (60 q, p ~ Beta(2, 2))", mid)):
        base = _sig(logits)
        for points in (0.0, 5.0, 10.0):
            out.append(Population(f"{label}, {points:+.0f} pts", base, shift_for_gain(logits, points)))
    base = _sig(wide)
    out.append(Population("wide pool, same accuracy, candidate's soft score inflated ×1.3", base, base.copy(), inflate=True))
    return out


def draw_z(rng: np.random.Generator, pop: Population, k: float, runs: int, n: int) -> dict[str, np.ndarray]:
    """(runs, n) pair statistics of uniform-random-order gates on `pop`, one array per statistic."""
    qi = rng.integers(0, pop.baseline.size, size=(runs, n))
    pb, pc = pop.baseline[qi], pop.candidate[qi]
    eps = 1e-9  # Beta parameters must be > 0 at p = 0 or 1
    vb = rng.beta(np.maximum(k * pb, eps), np.maximum(k * (1 - pb), eps))
    vc = rng.beta(np.maximum(k * pc, eps), np.maximum(k * (1 - pc), eps))
    hard_b = rng.random((runs, n)) < vb
    hard_c = rng.random((runs, n)) < vc
    reported_c = np.minimum(1.0, INFLATION * vc) if pop.inflate else vc
    shared = rng.random((runs, n))  # metric_outcome's uniform of (qid, sample index): the same for both arms
    return {
        "hard": hard_c.astype(float) - hard_b.astype(float),
        "soft, rounded": (shared < reported_c).astype(float) - (shared < vb).astype(float),
        "soft, continuous": reported_c - vb,
    }


def first_crossing(z: np.ndarray, bets: np.ndarray, threshold: float) -> np.ndarray:
    """Index (1-based pairs) of the first pair whose log E >= threshold, CAP + 1 when it never crosses.

    A vectorised copy of the betting gate's accept side, for speed: the kernel's gate loop accepts at the block holding
    this pair (tests/kernel/test_run_level_benchmarks.py checks it decision for decision on seeded draws)."""
    path = log_wealth_path(z, bets, 0.0, 1.0)
    crossed = path >= threshold
    return np.where(crossed.any(axis=1), crossed.argmax(axis=1) + 1, CAP + 1)


def measure(seed: int, runs: int, chunk: int = 250) -> list[dict]:
    bets = accept_bets(1.0)
    rows = []
    pops = populations(np.random.default_rng([seed, 0]))
    for p_index, pop in enumerate(pops):
        for k in CONCENTRATIONS:
            crossings: dict[tuple[str, str], list[np.ndarray]] = {}
            for start in range(0, runs, chunk):
                rng = np.random.default_rng([seed, 1, p_index, int(k * 10), start])
                zs = draw_z(rng, pop, k, min(chunk, runs - start), CAP)
                for stat, z in zs.items():
                    for level, threshold in LEVELS.items():
                        crossings.setdefault((stat, level), []).append(first_crossing(z, bets, threshold))
            for (stat, level), parts in crossings.items():
                n = np.concatenate(parts)
                accepted = n <= CAP
                rows.append({
                    "population": pop.name, "gain": pop.gain_points, "inflated": pop.inflate, "k": k, "statistic": stat,
                    "level": level, "runs": int(n.size), "p_accept_budget": float(np.mean(n <= BUDGET)),
                    "p_accept_cap": float(np.mean(accepted)),
                    "mean_pairs": float(np.mean(n[accepted])) if accepted.any() else math.nan,
                    "se_pairs": float(np.std(n[accepted], ddof=1) / math.sqrt(accepted.sum())) if accepted.sum() > 1 else math.nan,
                })
    return rows


def _se(p: float, n: int) -> float:
    return math.sqrt(max(p * (1 - p), 1e-12) / n)


def render(rows: list[dict], cmd: str, wall: float) -> str:
    lines = [
        "# Soft-score gate statistics", "",
        f"Command: `{cmd}` — measured {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, wall {wall:.0f} s.", "",
        (__doc__ or "").split("\n\n", 1)[1].split("Writes a Markdown")[0].strip(), "",
        f"Accept e-process alone (no reject side, no futility), bets {', '.join(f'{b:g}' for b in accept_bets(1.0))}, "
        f"cap {CAP} pairs; P(accept) within the product's budget of {BUDGET} pairs and within the cap; mean pairs to accept "
        "over the gates that accepted within the cap (± SE). Each cell: the runs column.", "",
    ]
    for level in LEVELS:
        by_key = {(r["population"], r["k"], r["statistic"]): r for r in rows if r["level"] == level}
        cells = []
        for r in (r for r in rows if r["level"] == level):
            hard = by_key[(r["population"], r["k"], "hard")]
            ratio = (f"{r['mean_pairs'] / hard['mean_pairs']:.2f}×"
                     if r["gain"] > 0 and not math.isnan(r["mean_pairs"]) and not math.isnan(hard["mean_pairs"]) else "–")
            pairs = "–" if math.isnan(r["mean_pairs"]) else f"{r['mean_pairs']:.0f} ± {r['se_pairs']:.0f}"
            cells.append([r["population"], f"{r['gain']:+.2f}", f"{r['k']:g}", r["statistic"], f"{r['p_accept_budget']:.3f}",
                          f"{r['p_accept_cap']:.3f} ± {_se(r['p_accept_cap'], r['runs']):.3f}", pairs, ratio, r["runs"]])
        lines += [f"## Accept level {level}", "",
                  *table(["population", "pool gain (pts)", "k", "statistic", "P(accept) ≤ 400", "P(accept) ≤ 4000 (± SE)",
                          "mean pairs to accept", "pairs vs hard", "runs"], cells), ""]
    lines += ["## Reading", ""]
    lines += summary_lines(rows)
    return "\n".join(lines) + "\n"


def summary_lines(rows: list[dict]) -> list[str]:
    """The findings the rows support, computed from them (nothing typed in by hand)."""
    out = []
    level = next(iter(LEVELS))
    real = [r for r in rows if r["level"] == level and r["gain"] > 0 and not r["inflated"]]
    for stat in STATISTICS[1:]:
        ratios = []
        for r in (r for r in real if r["statistic"] == stat):
            hard = next(h for h in real if h["population"] == r["population"] and h["k"] == r["k"] and h["statistic"] == "hard")
            if not (math.isnan(r["mean_pairs"]) or math.isnan(hard["mean_pairs"])):
                ratios.append((r["k"], r["mean_pairs"] / hard["mean_pairs"]))
        for k in CONCENTRATIONS:
            ks = [x for kk, x in ratios if kk == k]
            if ks:
                out.append(f"- `{stat}` at k = {k:g}: {min(ks):.2f}–{max(ks):.2f}× the pairs of `hard` to accept a real edit "
                           f"(level {level.split()[0]}, {len(ks)} cells).")
    nulls = [r for r in rows if r["gain"] == 0 and not r["inflated"]]
    worst = max(nulls, key=lambda r: r["p_accept_cap"])
    out.append(f"- Strong nulls (candidate = baseline): worst false accept within the cap {worst['p_accept_cap']:.3f} ± "
               f"{_se(worst['p_accept_cap'], worst['runs']):.3f} ({worst['statistic']}, k = {worst['k']:g}, level "
               f"{worst['level'].split()[0]}); each statistic's e-process is valid for its own mean.")
    inflated = [r for r in rows if r["inflated"] and r["level"] == level]
    for stat in STATISTICS:
        rs = [r for r in inflated if r["statistic"] == stat]
        if rs:
            out.append(f"- Inflated soft score, accuracy unchanged, `{stat}`: accepted within the cap in "
                       f"{min(r['p_accept_cap'] for r in rs):.3f}–{max(r['p_accept_cap'] for r in rs):.3f} of gates over k "
                       "(every accept is a false accept for the accuracy).")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="200 runs a cell instead of 1000")
    ap.add_argument("--runs", type=int, default=None)
    ap.add_argument("--seed", type=int, default=20261205)
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    runs = args.runs or (200 if args.quick else 1000)
    out = Path(args.out) if args.out else ROOT / "reports/benchmarks" / ("soft_gate_quick.md" if args.quick else "soft_gate.md")
    start = time.time()
    rows = measure(args.seed, runs)
    cmd = "python benchmarks/soft_gate.py" + (" --quick" if args.quick else "") + (f" --runs {args.runs}" if args.runs else "")
    wall = time.time() - start
    publish(out, render(rows, cmd, wall), {"command": cmd, "wall_seconds": wall, "seed": args.seed, "runs": runs, "cap": CAP, "budget": BUDGET,
                                           "levels": LEVELS, "rows": rows})
    print(f"wrote {out} ({time.time() - start:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
