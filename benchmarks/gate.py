"""Gate benchmark: the protocol of research/gate.md, run on the kernel's own code.

    python benchmarks/gate.py            # full run (~minutes on 2 cores) -> reports/benchmarks/gate.md
    python benchmarks/gate.py --quick    # CI smoke run (seconds), same sections, few runs

Sections:
1. Paired-outcome grid d x Delta with the `sequential` rule (GateParams
   defaults, a look after every block, cap >= 4,000 pairs): false-accept
   rate +- Monte-Carlo SE, power, mean/median/p80 pairs, P(reject),
   P(undecided), and reference lines (Wald bound, power-one bound, fixed-n
   exact McNemar at power .80).
2. Negative control: exact McNemar re-checked after every block (must
   inflate false accepts).
3. Every `gate.rule` through the real `gate_decision` on PairResult lists.
4. Ladder vs random order under a uniform log-odds effect, with the real
   GatePools / plan_blocks.
5. Trade-off null (helps mid-difficulty questions, breaks easy ones,
   population Delta = 0) with and without the anchor stratum.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import shlex
import sys
import time
from pathlib import Path

import numpy as np
from scipy.optimize import brentq
from scipy.special import expit
from scipy.stats import binom

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from harness.kernel.gate import gate_decision, pair_block  # noqa: E402
from harness.kernel.ladder import GatePools, plan_blocks  # noqa: E402
from harness.kernel.stats import kl_bernoulli_half, log_e_beta_mixture, log_lr_direction, mcnemar_one_sided_p  # noqa: E402
from harness.kernel.types import BlockItem, GateParams  # noqa: E402

D_VALUES = (0.1, 0.2, 0.4)
DELTA_POINTS = (-5, -2, 0, 2, 5, 10)
ALPHA = 0.05


# ---------------------------------------------------------------- paired-outcome simulation
def simulate_counts(rng: np.random.Generator, runs: int, d: float, theta: float, block: int, n_blocks: int):
    """Cumulative wins/losses at every block end: arrays (runs, n_blocks)."""
    p = np.array([d * theta, d * (1 - theta), 1 - d])
    p = np.clip(p, 0, 1)
    p = p / p.sum()
    draws = rng.multinomial(block, p, size=(runs, n_blocks))
    return np.cumsum(draws[..., 0], axis=1), np.cumsum(draws[..., 1], axis=1)


def sequential_first_decision(wins, losses, params: GateParams, *, direction: bool = True):
    """First look where the sequential rule decides. Returns (action, look index) arrays; action 1 accept, -1 reject, 0 undecided."""
    runs, n_looks = wins.shape
    action = np.zeros(runs, dtype=int)
    look = np.full(runs, n_looks - 1)
    alive = np.arange(runs)
    for j in range(n_looks):
        if alive.size == 0:
            break
        s, f = wins[alive, j], losses[alive, j]
        acc = log_e_beta_mixture(s, f) >= params.lambda_accept
        rej = (log_lr_direction(s, f, params.theta1) <= params.lambda_dir) & ~acc if direction else np.zeros_like(acc)
        done = acc | rej
        action[alive[acc]] = 1
        action[alive[rej]] = -1
        look[alive[done]] = j
        alive = alive[~done]
    return action, look


def rechecked_mcnemar_first_accept(wins, losses, alpha: float):
    runs, n_looks = wins.shape
    accepted = np.zeros(runs, dtype=bool)
    alive = np.arange(runs)
    for j in range(n_looks):
        if alive.size == 0:
            break
        hit = mcnemar_one_sided_p(wins[alive, j], losses[alive, j]) <= alpha
        accepted[alive[hit]] = True
        alive = alive[~hit]
    return accepted


# ---------------------------------------------------------------- reference lines
def wald_bound(d: float, theta: float, alpha: float = ALPHA, beta: float = 0.2) -> float:
    info = d * kl_bernoulli_half(theta)
    return ((1 - beta) * math.log((1 - beta) / alpha) + beta * math.log(beta / (1 - alpha))) / info


def power_one_bound(d: float, theta: float, alpha: float = ALPHA) -> float:
    return math.log(1 / alpha) / (d * kl_bernoulli_half(theta))


def mcnemar_fixed_power(n: int, d: float, theta: float, alpha: float = ALPHA) -> float:
    """Exact power of the one-sided exact McNemar with n pairs (conditional on D discordant)."""
    ds = np.arange(n + 1)
    # critical wins c(D): smallest c with P(Bin(D, 1/2) >= c) <= alpha
    crit = binom.isf(alpha, ds, 0.5) + 1
    crit = np.where(binom.sf(crit - 1, ds, 0.5) <= alpha, crit, crit + 1)
    power_given_d = binom.sf(crit - 1, ds, theta)
    return float(np.sum(binom.pmf(ds, n, d) * power_given_d))


def mcnemar_fixed_n(d: float, theta: float, target: float = 0.8, alpha: float = ALPHA) -> int:
    """Smallest n (coarse search then exact scan) with exact power >= target."""
    hi = 16
    while mcnemar_fixed_power(hi, d, theta, alpha) < target:
        hi *= 2
        if hi > 200_000:
            return -1
    lo = hi // 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if mcnemar_fixed_power(mid, d, theta, alpha) >= target:
            hi = mid
        else:
            lo = mid
    return hi


# ---------------------------------------------------------------- sections
def grid(rng, runs: int, cap: int, params: GateParams):
    rows = []
    n_blocks = cap // params.block_size
    for d in D_VALUES:
        for delta_pts in DELTA_POINTS:
            delta = delta_pts / 100
            theta = min(1.0, max(0.0, (1 + delta / d) / 2))
            wins, losses = simulate_counts(rng, runs, d, theta, params.block_size, n_blocks)
            action, look = sequential_first_decision(wins, losses, params)
            pairs = (look + 1) * params.block_size
            acc = float(np.mean(action == 1))
            rows.append(
                dict(
                    d=d,
                    delta=delta_pts,
                    theta=theta,
                    p_accept=acc,
                    se=math.sqrt(acc * (1 - acc) / runs),
                    p_reject=float(np.mean(action == -1)),
                    p_undecided=float(np.mean(action == 0)),
                    mean=float(pairs.mean()),
                    median=float(np.median(pairs)),
                    p80=float(np.percentile(pairs, 80)),
                    mean_accept=float(pairs[action == 1].mean()) if np.any(action == 1) else float("nan"),
                    wald=wald_bound(d, theta) if delta > 0 and theta < 1 else float("nan"),
                    power_one=power_one_bound(d, theta) if delta > 0 and theta < 1 else float("nan"),
                    mcnemar_n=mcnemar_fixed_n(d, theta) if delta > 0 and theta < 1 else -1,
                )
            )
    return rows


def negative_control(rng, runs: int, cap: int, params: GateParams):
    rows = []
    n_blocks = cap // params.block_size
    for d in D_VALUES:
        wins, losses = simulate_counts(rng, runs, d, 0.5, params.block_size, n_blocks)
        fa_mcnemar = float(np.mean(rechecked_mcnemar_first_accept(wins, losses, ALPHA)))
        action, _ = sequential_first_decision(wins, losses, params, direction=False)
        fa_mixture = float(np.mean(action == 1))
        rows.append(dict(d=d, mcnemar=fa_mcnemar, mixture=fa_mixture, runs=runs))
    return rows


def rules_through_gate_decision(rng, runs: int, d: float = 0.2):
    """Each selectable rule through the real gate_decision (product default max_pairs)."""
    rows = []
    for rule in ("sequential", "mcnemar", "gepa", "accept_all"):
        params = GateParams(rule=rule)
        for delta_pts in (0, 10):
            theta = (1 + delta_pts / 100 / d) / 2
            accepts, pairs_used = 0, []
            for _ in range(runs):
                pairs = []
                block_index = 0
                while True:
                    size = min(params.block_size, params.max_pairs - len(pairs))
                    u = rng.random(size)
                    discordant = rng.random(size) < d
                    win = discordant & (u < theta)
                    loss = discordant & ~(u < theta)
                    same = rng.random(size) < 0.5
                    base = np.where(win, False, np.where(loss, True, same))
                    cand = np.where(win, True, np.where(loss, False, same))
                    block = [BlockItem(f"q{block_index}_{i}", 10_000_000 + len(pairs) + i) for i in range(size)]
                    pairs += pair_block(block, [bool(x) for x in base], [bool(x) for x in cand])
                    block_index += 1
                    final = len(pairs) >= params.max_pairs
                    verdict = gate_decision(pairs, params, final=final)
                    if verdict.action != "continue":
                        break
                accepts += verdict.action == "accept"
                pairs_used.append(verdict.n_pairs)
            rows.append(dict(rule=rule, delta=delta_pts, p_accept=accepts / runs, mean_pairs=float(np.mean(pairs_used)), runs=runs))
    return rows


@dataclasses.dataclass(frozen=True)
class Population:
    p: np.ndarray  # baseline accuracy per question
    q: np.ndarray  # candidate accuracy per question


def uniform_log_odds_population(rng, n_questions: int, sd: float, gain_points: float) -> Population:
    logits = rng.normal(0.0, sd, n_questions)
    p = expit(logits)
    shift = brentq(lambda s: expit(logits + s).mean() - p.mean() - gain_points / 100, -10, 10)
    return Population(p, expit(logits + shift))


def trade_off_population(rng, n_questions: int, sd: float, help_points: float = 0.25) -> Population:
    """Helps mid-difficulty questions (0.3 <= p <= 0.7) by `help_points`, breaks easy ones (p >= 0.85) so that the mean is unchanged."""
    p = expit(rng.normal(0.0, sd, n_questions))
    q = p.copy()
    mid = (p >= 0.3) & (p <= 0.7)
    easy = p >= 0.85
    q[mid] = np.minimum(1.0, p[mid] + help_points)
    gained = float(np.sum(q[mid] - p[mid]))
    q[easy] = p[easy] - gained / max(1, int(easy.sum()))
    if np.any(q < 0):
        raise ValueError("trade-off population: not enough easy questions to balance the gain")
    return Population(p, q)


def gate_run_on_population(rng, pop: Population, params: GateParams, *, order: str, pre_gate_obs: int, run_seed: int, direction: bool = True):
    """One gate on a question population; the ladder comes from GatePools fed by pre-gate (non-gate) runs only."""
    n = pop.p.size
    qids = [f"q{i}" for i in range(n)]
    pools = GatePools.build({"t": qids})
    for epoch in range(pre_gate_obs):
        observed = rng.random(n) < pop.p
        pools.update_from_run(f"bench_e{epoch}_slowR", [(qids[i], 2000 * epoch, bool(observed[i])) for i in range(n)], gamma=params.ema_gamma)
    ladder = pools.ladder("t", params, warm=True) if order == "ladder" else []
    blocks = plan_blocks(ladder, qids, params, seed=run_seed, first_sample_index=10_000_000, informing_samples=pools.informing_samples("t"))
    index = np.array([int(item.qid[1:]) for block in blocks for item in block])
    base = rng.random(index.size) < pop.p[index]
    cand = rng.random(index.size) < pop.q[index]
    ends = np.cumsum([len(b) for b in blocks]) - 1
    wins = np.cumsum(cand & ~base)[ends][None, :]
    losses = np.cumsum(base & ~cand)[ends][None, :]
    action, look = sequential_first_decision(wins, losses, params, direction=direction)
    return int(action[0]), int(ends[look[0]] + 1)


def ladder_vs_random(rng, runs: int, n_questions: int, sd: float, pre_gate_obs: int, cap: int):
    pop = uniform_log_odds_population(rng, n_questions, sd, 5.0)
    out = {}
    for order in ("random", "ladder"):
        params = GateParams(max_pairs=cap, anchor_fraction=1.0 if order == "random" else GateParams().anchor_fraction)
        mixture_only = [gate_run_on_population(rng, pop, params, order=order, pre_gate_obs=pre_gate_obs, run_seed=r, direction=False) for r in range(runs)]
        hybrid = [gate_run_on_population(rng, pop, params, order=order, pre_gate_obs=pre_gate_obs, run_seed=r) for r in range(runs)]
        m_pairs = np.array([p for _, p in mixture_only])
        h = np.array(hybrid)
        out[order] = dict(
            mixture_mean=float(m_pairs.mean()),
            mixture_se=float(m_pairs.std(ddof=1) / math.sqrt(runs)),
            mixture_power=float(np.mean([a == 1 for a, _ in mixture_only])),
            hybrid_power=float(np.mean(h[:, 0] == 1)),
            hybrid_mean=float(h[:, 1].mean()),
        )
    mean_disc = float(np.mean(pop.p * (1 - pop.q) + pop.q * (1 - pop.p)))
    return out, mean_disc


def trade_off(rng, runs: int, n_questions: int, sd: float, pre_gate_obs: int, caps: tuple[int, ...]):
    pop = trade_off_population(rng, n_questions, sd)
    rows = []
    for label, order, anchor in (("pure ladder (anchor 0)", "ladder", 0.0), ("ladder + anchor stratum 0.25 (default)", "ladder", 0.25), ("ladder + anchor 0.5", "ladder", 0.5), ("random order (all anchor)", "random", 1.0)):
        for cap in caps:
            params = GateParams(max_pairs=cap, anchor_fraction=anchor)
            results = [gate_run_on_population(rng, pop, params, order=order, pre_gate_obs=pre_gate_obs, run_seed=r) for r in range(runs)]
            fa = float(np.mean([a == 1 for a, _ in results]))
            rows.append(dict(label=label, cap=cap, fa=fa, se=math.sqrt(fa * (1 - fa) / runs), mean_pairs=float(np.mean([p for _, p in results])), runs=runs))
    return rows, float(np.mean(pop.q - pop.p))


# ---------------------------------------------------------------- report
def fmt(x, digits=0):
    if isinstance(x, float) and math.isnan(x):
        return "–"
    return f"{x:.{digits}f}"


def write_report(path: Path, command: str, elapsed: float, sections: dict, settings: dict) -> str:
    lines = ["# Gate benchmark", "", f"Command: `{command}`  ", f"Wall time: {elapsed:.0f} s; settings: {settings}", ""]
    params = GateParams()
    lines += [
        "Rule `sequential` with GateParams defaults: accept at log E >= "
        f"{params.lambda_accept} (Beta-mixture e-process, uniform on theta in [1/2, 1]; e^{params.lambda_accept} = {math.exp(params.lambda_accept):.1f} so alpha = {math.exp(-params.lambda_accept):.4f}), "
        f"reject at direction log-LR(theta1 = {params.theta1}) <= {params.lambda_dir}; a look after every block of {params.block_size} pairs; "
        f"cap {settings['cap']} pairs (undecided at the cap). Pairs counted in whole blocks.",
        "",
        "## 1. Grid: false accepts, power, pairs",
        "",
        "| d | Δ pts | θ | P(accept) ± SE | P(reject) | P(undecided) | mean pairs | median | p80 | mean pairs to accept | Wald bound | power-one bound | fixed-n McNemar (power .8) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in sections["grid"]:
        lines.append(
            f"| {r['d']} | {r['delta']:+d} | {r['theta']:.3f} | {r['p_accept']:.4f} ± {r['se']:.4f} | {r['p_reject']:.3f} | {r['p_undecided']:.3f} | "
            f"{r['mean']:.0f} | {r['median']:.0f} | {r['p80']:.0f} | {fmt(r['mean_accept'])} | {fmt(r['wald'])} | {fmt(r['power_one'])} | {r['mcnemar_n'] if r['mcnemar_n'] > 0 else '–'} |"
        )
    lines += ["", "Rows with Δ ≤ 0 are null cells: P(accept) is the false-accept rate. Reference lines are per pair (d·KL(θ‖½) information); the Wald bound is the SPRT average sample number at α = .05, β = .2 (the physical limit); θ = 1 rows have no finite bound.", ""]
    lines += ["## 2. Negative control: McNemar re-checked after every block (Δ = 0)", "", "| d | re-checked McNemar false accepts | Beta-mixture alone (no direction reject) false accepts | runs |", "|---|---|---|---|"]
    for r in sections["negative"]:
        lines.append(f"| {r['d']} | {r['mcnemar']:.3f} | {r['mixture']:.4f} | {r['runs']} |")
    lines += ["", "Re-checking a fixed-n test inflates false accepts far above α; the e-process does not. This shows the simulation really exercises optional stopping.", ""]
    lines += ["## 3. Every `gate.rule` through the real `gate_decision` (d = 0.2, product default max_pairs = 400)", "", "| rule | Δ pts | P(accept) | mean pairs | runs |", "|---|---|---|---|---|"]
    for r in sections["rules"]:
        lines.append(f"| {r['rule']} | {r['delta']:+d} | {r['p_accept']:.3f} | {r['mean_pairs']:.0f} | {r['runs']} |")
    lines += [""]
    lv, disc, lv_set = sections["ladder"]
    gain = 1 - lv["ladder"]["mixture_mean"] / lv["random"]["mixture_mean"]
    lines += [
        "## 4. Information ladder vs random order (uniform log-odds effect, +5 points)",
        "",
        f"One task type, {lv_set['n_questions']} validation questions, baseline logits ~ N(0, {lv_set['sd']}²), candidate = same logit shift for every question "
        f"(+5 points on average; mean discordance {disc:.3f}). The ladder is `GatePools.ladder(warm=True)` fed by {lv_set['pre_gate_obs']} pre-gate "
        f"full-validation observations per question (γ-EMA), the blocks come from `plan_blocks` (anchor 0.25, re-ask passes over the top "
        f"{GateParams().reask_top_fraction:.0%} of the ladder); random order = `plan_blocks` with every slot an anchor. Cap {lv_set['cap']} pairs, {lv_set['runs']} runs per order.",
        "",
        "| order | mean pairs to accept, mixture only (± SE) | its power within cap | hybrid rule: mean pairs | hybrid power |",
        "|---|---|---|---|---|",
    ]
    for order in ("random", "ladder"):
        o = lv[order]
        lines.append(f"| {order} | {o['mixture_mean']:.0f} ± {o['mixture_se']:.0f} | {o['mixture_power']:.3f} | {o['hybrid_mean']:.0f} | {o['hybrid_power']:.3f} |")
    lines += ["", f"Ladder saving: **{gain:.1%}** fewer pairs to accept (target ≥ 30 %).", ""]
    to_rows, to_delta = sections["trade_off"]
    lines += [
        "## 5. Trade-off null: helps mid-difficulty, breaks easy questions (population Δ = 0)",
        "",
        f"Same population model; questions with 0.3 ≤ p ≤ 0.7 gain +25 points, questions with p ≥ 0.85 lose the same total (population Δ = {to_delta * 100:+.2f} points). Every accept is a false accept of a harmful-to-easy edit.",
        "",
        "| order | cap (max_pairs) | false-accept rate ± SE | mean pairs | runs |",
        "|---|---|---|---|---|",
    ]
    for r in to_rows:
        lines.append(f"| {r['label']} | {r['cap']} | {r['fa']:.3f} ± {r['se']:.3f} | {r['mean_pairs']:.0f} | {r['runs']} |")
    lines += ["", "## Targets", ""]
    lines += sections["targets"]
    lines += [
        "",
        "Why the missed targets are missed (not tuned away, because the only knobs that would close them break anytime validity):",
        "",
        "- +10 points at d = 0.2: the power-one bound is 115 pairs; looking only at block ends (20 pairs) adds the overshoot of the "
        "last block plus the mixture's regret. research/gate.md measured the same rule at 139 pairs looking after every pair and 160 "
        "every 20. Lowering lambda below ln 20 would break alpha = .05; a concentrated mixing prior (truncated Beta(a, b), tried offline) "
        "saved under 10 pairs. A smaller `gate.block_size` is the honest lever (more looks, more rollout round trips).",
        "- Ladder vs random: the ladder is static, built from a few noisy pre-gate observations (p_hat from 4 Bernoulli samples ranks "
        "questions poorly), and a +5 accept needs several passes over the pool, so re-asks dominate. The research figure (~46 %) used a "
        "dynamic in-gate ladder re-ordered on baseline-only samples; that is not implemented here.",
        "- Trade-off null: the ladder concentrates on mid-difficulty questions, exactly where this edit helps; the anchor stratum dilutes "
        "that bias but cannot cancel it (random order: ~0.01). The product's second line of defence is the slow update's full-validation "
        "re-run and probation rollback; a larger `gate.anchor_fraction` trades pairs for protection (see the 0.5 rows).",
        "",
    ]
    text = "\n".join(lines) + "\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return text


def targets(sections: dict, settings: dict) -> list[str]:
    grid_rows = sections["grid"]
    nulls = [r for r in grid_rows if r["delta"] <= 0]
    worst = max(nulls, key=lambda r: r["p_accept"])
    plus10 = next(r for r in grid_rows if r["d"] == 0.2 and r["delta"] == 10)
    null02 = next(r for r in grid_rows if r["d"] == 0.2 and r["delta"] == 0)
    lv, _, _ = sections["ladder"]
    gain = 1 - lv["ladder"]["mixture_mean"] / lv["random"]["mixture_mean"]
    to_rows, _ = sections["trade_off"]
    anchored = [r for r in to_rows if r["label"].startswith("ladder + anchor stratum 0.25")]

    def mark(ok: bool) -> str:
        return "met" if ok else "**missed**"

    out = [
        f"- False accepts ≤ 0.05 in every null cell: worst cell d = {worst['d']}, Δ = {worst['delta']:+d}: {worst['p_accept']:.4f} ± {worst['se']:.4f} — {mark(worst['p_accept'] <= 0.05)}.",
        f"- Mean pairs to accept +10 points at d = 0.2 ≤ 144: {plus10['mean_accept']:.0f} (all runs: {plus10['mean']:.0f}) — {mark(plus10['mean_accept'] <= 144)}.",
        f"- Mean pairs for a null edit at d = 0.2 ≤ 300: {null02['mean']:.0f} — {mark(null02['mean'] <= 300)}.",
        f"- Ladder ≥ 30 % fewer pairs than random order (uniform log-odds +5): {gain:.1%} — {mark(gain >= 0.30)}.",
    ]
    for r in anchored:
        out.append(f"- Trade-off null with the anchor stratum (cap {r['cap']}): false-accept rate {r['fa']:.3f} ± {r['se']:.3f} (reported; see section 5).")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="few runs per cell (CI smoke run, seconds)")
    parser.add_argument("--runs", type=int, default=None, help="runs per grid cell (default 10000, quick 300)")
    parser.add_argument("--seed", type=int, default=20260707)
    parser.add_argument("--out", type=Path, default=ROOT / "reports" / "benchmarks" / "gate.md")
    args = parser.parse_args(argv)
    started = time.time()
    rng = np.random.default_rng(args.seed)
    quick = args.quick
    settings = dict(
        runs=args.runs or (300 if quick else 10_000),
        cap=4000,
        negative_runs=300 if quick else 4000,
        rule_runs=20 if quick else 300,
        ladder=dict(runs=20 if quick else 400, n_questions=200, sd=2.5, pre_gate_obs=4, cap=4000),
        trade_off=dict(runs=20 if quick else 400, n_questions=200, sd=2.5, pre_gate_obs=4, caps=(400, 4000)),
        seed=args.seed,
        quick=quick,
    )
    params = GateParams()
    sections: dict = {}
    sections["grid"] = grid(rng, settings["runs"], settings["cap"], params)
    sections["negative"] = negative_control(rng, settings["negative_runs"], settings["cap"], params)
    sections["rules"] = rules_through_gate_decision(rng, settings["rule_runs"])
    lv = settings["ladder"]
    result, disc = ladder_vs_random(rng, lv["runs"], lv["n_questions"], lv["sd"], lv["pre_gate_obs"], lv["cap"])
    sections["ladder"] = (result, disc, lv)
    to = settings["trade_off"]
    sections["trade_off"] = trade_off(rng, to["runs"], to["n_questions"], to["sd"], to["pre_gate_obs"], to["caps"])
    sections["targets"] = targets(sections, settings)
    command = "python benchmarks/gate.py " + " ".join(shlex.quote(a) for a in (argv if argv is not None else sys.argv[1:]))
    text = write_report(args.out, command.strip(), time.time() - started, sections, {k: v for k, v in settings.items()})
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
