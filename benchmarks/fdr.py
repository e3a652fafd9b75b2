"""Run-level gate benchmark (issue 13 items 2-4): e-LOND over a run, follow-up gates, probation settlement.

    python benchmarks/fdr.py            # reports/benchmarks/fdr.md
    python benchmarks/fdr.py --quick    # fewer runs (CI smoke), reports/benchmarks/fdr_quick.md

Every gate here is driven through the production code: `pair_block` +
`gate_decision` block by block (the loop's order), the e-LOND levels of
`harness.kernel.fdr`, and the settlements of `harness.kernel.probation`.
Paired outcomes are simulated: a pool of questions with per-question
baseline accuracy p_i (40 % easy p ~ 0.95, 30 % hard p ~ 0.05, 30 % mid
p ~ Beta(2, 2); discordance ~ 0.2), the candidate's p_i shifted by one
log-odds delta chosen so that the POOL accuracy changes by exactly the
stated points (0 = strong null: no question changes). Questions are drawn
uniformly at random with a fresh sample each (the population-valid plan;
the ladder question is E1's benchmark, reports/benchmarks/gate.md).

1. Run-level FDR: runs of 80 gates, all-null and 30 % +5 / 50 % null /
   20 % -5 points; per-gate alpha (gate.lambda = 3, no run-level control)
   against e-LOND (gate.fdr=elond, fdr_level 0.1, fdr_horizon 50).
2. Follow-up gate: a null edit is accepted (by chance), rolled back, and
   the next null edit is gated on the same baseline; with
   `gate.baseline_reuse=gates` its baseline is served first from the
   earlier gate's outcomes (each cached sample once per gate, as
   `validate_skill_local` does), with `none` every baseline sample is fresh.
3. Probation settlement: P(keep) of null / -5 / +5 / +10 point edits under
   the old rule (losses > wins on one sample per question) and the
   e-process settlement on fresh pairs, for both kinds of probation.
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
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from harness.kernel.fdr import FdrState, elond_level, elond_record, level_lambda  # noqa: E402
from harness.kernel.gate import gate_decision, pair_block  # noqa: E402
from harness.kernel.probation import probation_settlement, probation_verdict  # noqa: E402
from harness.kernel.types import BlockItem, GateParams, Probation  # noqa: E402

POOL = 60
BASE = GateParams(undecided="reject", max_pairs=400, block_size=20)  # rule: the product default (betting); --rule picks another


def make_pool(rng: np.random.Generator, n: int = POOL) -> np.ndarray:
    kind = rng.choice(3, size=n, p=[0.4, 0.3, 0.3])
    easy = rng.beta(19, 1, size=n)
    hard = rng.beta(1, 19, size=n)
    mid = rng.beta(2, 2, size=n)
    return np.where(kind == 0, easy, np.where(kind == 1, hard, mid))


def shifted(p: np.ndarray, points: float) -> np.ndarray:
    """p shifted by one log-odds delta so that mean(p_c) - mean(p) = points / 100 (0 -> p itself)."""
    if points == 0:
        return p.copy()
    logit = np.log(p) - np.log1p(-p)
    lo, hi = (-12.0, 0.0) if points < 0 else (0.0, 12.0)
    for _ in range(80):
        mid = (lo + hi) / 2
        gain = float(np.mean(1 / (1 + np.exp(-(logit + mid)))) - np.mean(p))
        if gain < points / 100:  # gain increases with the shift
            lo = mid
        else:
            hi = mid
    return 1 / (1 + np.exp(-(logit + (lo + hi) / 2)))


def run_gate(rng, p_base, p_cand, params: GateParams, *, cached: dict[int, list[bool]] | None = None):
    """One gate through pair_block + gate_decision; returns (action, n_pairs, baseline outcomes by qid in draw order).

    `cached`: qid -> earlier gates' baseline outcomes, served first (each once per gate), like the BaselineCache.
    """
    pairs: list = []
    seen: dict[int, list[bool]] = {}
    served: dict[int, int] = {}
    sample = 0
    while True:
        qids = rng.integers(0, len(p_base), size=params.block_size)
        block = [BlockItem(str(int(q)), sample + i) for i, q in enumerate(qids)]
        sample += params.block_size
        base: list = []
        for q in qids:
            q = int(q)
            k = served.get(q, 0)
            if cached is not None and k < len(cached.get(q, ())):
                b = cached[q][k]
                served[q] = k + 1
            else:
                b = bool(rng.random() < p_base[q])
                seen.setdefault(q, []).append(b)
            base.append(b)
        cand = [bool(rng.random() < p_cand[int(q)]) for q in qids]
        pairs.extend(pair_block(block, base, cand))
        final = len(pairs) >= params.max_pairs
        verdict = gate_decision(pairs, params, final=final)
        if verdict.action != "continue":
            return verdict.action, len(pairs), seen


# ---------------------------------------------------------------- 1. run-level FDR


def fdr_runs(seed: int, runs: int, gates: int, mix: str, method: str) -> dict:
    rng = np.random.default_rng(seed)
    any_false = false_total = true_total = pairs_total = 0
    fdp: list[float] = []
    levels: list[float] = []
    for _ in range(runs):
        state = FdrState()
        false = true = 0
        for _ in range(gates):
            p = make_pool(rng)
            points = 0.0 if mix == "null" else float(rng.choice([5.0, 0.0, -5.0], p=[0.3, 0.5, 0.2]))
            if method == "elond":
                level = elond_level(state, 0.1, 50)
                params = dataclasses.replace(BASE, lambda_accept=level_lambda(level))
            else:
                level = math.exp(-BASE.lambda_accept)
                params = BASE
            levels.append(level)
            action, n, _ = run_gate(rng, p, shifted(p, points), params)
            pairs_total += n
            accept = action == "accept"
            if method == "elond":
                state = elond_record(state, 0.1, 50, discovered=accept)
            false += accept and points <= 0
            true += accept and points > 0
        any_false += false > 0
        false_total += false
        true_total += true
        fdp.append(false / max(false + true, 1))
    p_any = any_false / runs
    return {"mix": mix, "method": method, "runs": runs, "gates": gates, "p_any_false": p_any,
            "p_any_se": math.sqrt(p_any * (1 - p_any) / runs), "false_per_run": false_total / runs,
            "true_per_run": true_total / runs, "fdr": float(np.mean(fdp)), "fdr_se": float(np.std(fdp) / math.sqrt(runs)),
            "false_share_of_installs": false_total / max(false_total + true_total, 1),
            "pairs_per_gate": pairs_total / (runs * gates), "median_level": float(np.median(levels))}


# ---------------------------------------------------------------- 2. follow-up gate after an accepted-then-rolled-back edit


def follow_up(seed: int, first_gates: int) -> dict:
    rng = np.random.default_rng(seed)
    out = {"first_gates": first_gates, "first_accepts": 0, "reuse_fa": 0, "fresh_fa": 0, "reuse_fa_all": 0, "fresh_fa_all": 0}
    for _ in range(first_gates):
        p = make_pool(rng)
        action, _, seen = run_gate(rng, p, p, BASE)  # a null edit
        # the next null edit on the same baseline, both ways (every first gate: the unconditional rate)
        reuse = run_gate(rng, p, p, BASE, cached=seen)[0] == "accept"
        fresh = run_gate(rng, p, p, BASE)[0] == "accept"
        out["reuse_fa_all"] += reuse
        out["fresh_fa_all"] += fresh
        if action == "accept":  # accepted by chance, later rolled back: the baseline is the same harness again
            out["first_accepts"] += 1
            out["reuse_fa"] += reuse
            out["fresh_fa"] += fresh
    return out


# ---------------------------------------------------------------- 3. probation settlement


def settlement(seed: int, sims: int, n_questions: int = 45) -> list[dict]:
    rng = np.random.default_rng(seed)
    rows = []
    for points in (0.0, -5.0, 5.0, 10.0):
        keep_old = keep_prob = keep_acc = 0
        for _ in range(sims):
            p = make_pool(rng, n_questions)
            pc = shifted(p, points)
            qids = [f"q{i}" for i in range(n_questions)]
            snapshot = {q: bool(rng.random() < p[i]) for i, q in enumerate(qids)}  # best case for the old rule: a clean sample
            anchor = {q: bool(rng.random() < p[i]) for i, q in enumerate(qids)}  # fresh anchor re-run
            rerun = {q: bool(rng.random() < pc[i]) for i, q in enumerate(qids)}  # R on the installed version
            for kind in ("probation", "accepted"):
                pr = Probation("t", "t/SKILL.md", "v0", 1, 1, correctness_snapshot=snapshot, kind=kind)
                new = probation_settlement(pr, anchor, rerun, BASE).action == "keep"
                if kind == "probation":
                    keep_prob += new
                    keep_old += probation_verdict(pr, rerun).action == "keep"
                else:
                    keep_acc += new
        rows.append({"points": points, "sims": sims, "keep_old": keep_old / sims, "keep_probation": keep_prob / sims,
                     "keep_accepted": keep_acc / sims})
    return rows


def render(fdr_rows: list[dict], fu: dict, settle: list[dict], quick: bool, wall: float, cmd: str) -> str:
    alpha = math.exp(-BASE.lambda_accept)
    L = [f"# Run-level gate benchmark{' — QUICK mode' if quick else ''}", "",
         f"Command: `{cmd}` — measured {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, wall {wall / 60:.1f} min.",
         f"Every gate runs through `pair_block` + `gate_decision` (rule `{BASE.rule}`, lambda_dir {BASE.lambda_dir}, blocks of {BASE.block_size}, "
         f"cap {BASE.max_pairs}, undecided -> reject); questions uniformly at random from a 60-question pool (discordance ~0.2; every slot weight 1, "
         "the uniform case of the importance plan).", "",
         "## 1. False discoveries over a run of 80 gates", "",
         "| edits | per-gate level | P(>= 1 false install) | false installs / run | real installs / run | FDR (mean FDP) | false share of all installs | pairs / gate | median level |",
         "|---|---|---|---|---|---|---|---|---|"]
    for r in fdr_rows:
        mix = "all null" if r["mix"] == "null" else "30 % +5 / 50 % null / 20 % -5"
        how = "e-LOND (fdr_level 0.1, horizon 50)" if r["method"] == "elond" else f"alpha = {alpha:.3f} each, no run-level control"
        L.append(f"| {mix} | {how} | {r['p_any_false']:.3f} ± {r['p_any_se']:.3f} | {r['false_per_run']:.2f} | {r['true_per_run']:.2f} | "
                 f"{r['fdr']:.3f} ± {r['fdr_se']:.3f} | {100 * r['false_share_of_installs']:.1f} % | {r['pairs_per_gate']:.0f} | {r['median_level']:.2g} |")
    by = {(r["mix"], r["method"]): r for r in fdr_rows}
    n, m = by[("null", "elond")], by[("mixed", "elond")]
    L += ["", f"Targets: all-null P(>= 1 false install) <= 0.10: **{n['p_any_false']:.3f}** — {'met' if n['p_any_false'] <= 0.10 else 'NOT met'}; "
          f"mixed run, false discoveries among installs <= 10 %: **{100 * m['fdr']:.1f} % (mean FDP), {100 * m['false_share_of_installs']:.1f} % of all installs** — "
          f"{'met' if m['fdr'] <= 0.10 else 'NOT met'}.", "",
          "The price is power: e-LOND's levels are far below 0.05 (the median level above), so a +5-point edit needs more "
          "pairs to be installed, and fewer +5 edits are installed within the 400-pair cap (real installs / run).", "",
          "## 2. The gate after an accepted-then-rolled-back null edit (same baseline harness)", ""]
    k = fu["first_accepts"]
    se = lambda x: math.sqrt(x * (1 - x) / k) if k else float("nan")  # noqa: E731
    reuse, fresh = (fu["reuse_fa"] / k if k else float("nan")), (fu["fresh_fa"] / k if k else float("nan"))
    g = fu["first_gates"]
    L += ["| baseline of the follow-up gate | false accepts after an accepted null edit | over all first gates |", "|---|---|---|",
          f"| `gate.baseline_reuse=gates` (earlier gate's samples served first) | {reuse:.3f} ± {se(reuse):.3f} ({fu['reuse_fa']}/{k}) | {fu['reuse_fa_all'] / g:.3f} |",
          f"| `gate.baseline_reuse=none` (fresh samples) | {fresh:.3f} ± {se(fresh):.3f} ({fu['fresh_fa']}/{k}) | {fu['fresh_fa_all'] / g:.3f} |",
          "", f"{g} first gates on null edits, {k} accepted by chance. Target: follow-up false-accept rate <= alpha = {alpha:.3f} "
          f"with fresh samples: **{fresh:.3f}** — {'met' if fresh <= alpha + 2 * se(fresh) else 'NOT met'} (within 2 SE).", "",
          "## 3. Probation settlement", "",
          "P(the edit is kept) over 45 questions of its task type, one fresh sample each of the anchor and the installed version.", "",
          "| edit (pool points) | old rule: keep unless losses > wins | e-process, kind=probation: keep iff improvement certified | e-process, kind=accepted: keep unless harm certified |",
          "|---|---|---|---|"]
    for r in settle:
        L.append(f"| {r['points']:+.0f} | {r['keep_old']:.3f} | {r['keep_probation']:.3f} | {r['keep_accepted']:.3f} |")
    L += ["", f"{settle[0]['sims']} simulations per row. An undecided install (kind=probation) is kept with probability <= alpha "
          "when it does not help; a certified install (kind=accepted) is rolled back with probability <= alpha when it does not "
          "hurt. One sample of a few dozen questions has little power, so real +5 edits installed on probation are mostly "
          "rolled back too: undecided is not installed by default (`gate.undecided=reject`)."]
    return "\n".join(L) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    out = args.out or ROOT / "reports" / "benchmarks" / ("fdr_quick.md" if args.quick else "fdr.md")
    runs = 40 if args.quick else 200
    started = time.monotonic()
    fdr_rows = [fdr_runs(100 + i, runs, 80, mix, method)
                for i, (mix, method) in enumerate([("null", "none"), ("null", "elond"), ("mixed", "none"), ("mixed", "elond")])]
    fu = follow_up(7, 1500 if args.quick else 8000)
    settle = settlement(8, 500 if args.quick else 4000)
    cmd = "python benchmarks/fdr.py" + (" --quick" if args.quick else "")
    text = render(fdr_rows, fu, settle, args.quick, time.monotonic() - started, cmd)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
