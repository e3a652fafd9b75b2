"""Gate benchmark, sections 8-12: the importance plan + betting e-process (issue 13 items 1, 5, 6, 8).

Imported by benchmarks/gate.py (which writes the report). Every gate draws its
own pre-gate prior (GatePools fed by non-gate runs), builds the real
`ImportancePlanner` (its pi and weight bound), and its e-processes are computed
by the kernel's `log_wealth_path` with the kernel's bets; the cross-check of
section 12 runs gates end to end through `ImportancePlanner.next_block`,
`pair_block` and `betting_look` and compares their verdicts with this
vectorised path on the same outcomes.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from benchmarks._engine import decide_by, gate_now
from harness.kernel.betting import accept_bets, betting_look, log_wealth_path, reject_bets
from harness.kernel.gate import pair_block
from harness.kernel.importance_plan import ImportancePlanner, floor_probabilities
from harness.kernel.ladder import GatePools, PoolParams
from harness.kernel.plans import ImportanceParams
from harness.kernel.registry import params_of
from harness.kernel.rules import BettingParams, SequentialParams
from harness.kernel.stats import log_e_accept, log_lr_direction
from harness.kernel.types import GateParams

INF = 10**12


def pre_gate_prior(rng, p: np.ndarray, pre_gate_obs: int, gamma: float) -> dict:
    """qid -> (p_hat, n_obs) of GatePools fed by `pre_gate_obs` full non-gate runs."""
    n = p.size
    qids = [f"q{i}" for i in range(n)]
    pools = GatePools.build({"t": qids})
    for epoch in range(pre_gate_obs):
        observed = rng.random(n) < p
        pools.update_from_run(f"bench_e{epoch}_slowR", [(qids[i], 2000 * epoch, bool(observed[i])) for i in range(n)], gamma=gamma)
    return {e.qid: (e.p_hat, e.n_obs) for e in pools.entries("t")}


def planner_for(rng, p: np.ndarray, params: GateParams, pre_gate_obs: int, seed: int) -> ImportancePlanner:
    prior = pre_gate_prior(rng, p, pre_gate_obs, params_of(PoolParams, params).ema_gamma)
    return ImportancePlanner(
        [f"q{i}" for i in range(p.size)], block_size=params.block_size, max_pairs=params.max_pairs, floor=params_of(ImportanceParams, params).importance_floor,
        seed=seed, first_sample_index=10_000_000, prior=prior, prior_obs=params_of(ImportanceParams, params).plan_prior_obs,
    )


def draw_outcomes(rng, p_rows: np.ndarray, q_rows: np.ndarray, coupling: float):
    """Baseline / candidate outcomes; with probability `coupling` a pair shares one uniform (correlated arms)."""
    u_base = rng.random(p_rows.shape)
    u_cand = np.where(rng.random(p_rows.shape) < coupling, u_base, rng.random(p_rows.shape))
    return u_base < p_rows, u_cand < q_rows


def first_index(mask: np.ndarray) -> int:
    hit = np.flatnonzero(mask)
    return int(hit[0]) if hit.size else INF


def look_of(index: int, block: int) -> int:
    """Pairs spent when the block holding pair `index` (0-based) ends."""
    return INF if index >= INF else (index // block + 1) * block


@dataclasses.dataclass
class Path:
    """Crossing indices of one simulated gate (0-based pair index; INF = never)."""

    accept: int
    reject: int
    guard: int  # first block end (pairs) where the INFRA guard trips
    horizon: int
    infra_share: float = 0.0  # share of the pairs with an infra failure


def betting_path(z: np.ndarray, bound: float, params: GateParams, infra: np.ndarray | None = None) -> Path:
    betting = params_of(BettingParams, params)
    a = log_wealth_path(z, accept_bets(bound, betting.bet_low, betting.bet_high, betting.bet_points), 0.0, bound)
    r = log_wealth_path(z, reject_bets(bound, betting.reject_margin, betting.bet_low, betting.bet_high, betting.bet_points), betting.reject_margin, bound)
    return Path(first_index(a >= params.lambda_accept), first_index(r >= -params.lambda_dir), guard_trip(infra, params), z.size,
                0.0 if infra is None else float(infra.mean()))


def sign_path(y: np.ndarray, params: GateParams, infra: np.ndarray | None = None) -> Path:
    """Today's `sequential` rule on +1/-1/0 signs (infra pairs dropped): grid accept, fixed-theta1 direction reject at block ends.
    Vectorised for speed; with `decide` it agrees with the kernel's gate loop decision for decision on seeded signs
    (tests/kernel/test_gate_benchmark.py)."""
    s, f = np.cumsum(y == 1), np.cumsum(y == -1)
    a = log_e_accept(s, f, params_of(SequentialParams, params))
    ends = np.arange(params.block_size - 1, y.size, params.block_size)
    rej = log_lr_direction(s[ends], f[ends], params_of(SequentialParams, params).theta1) <= params.lambda_dir
    hit = np.flatnonzero(rej)
    return Path(first_index(a >= params.lambda_accept), int(ends[hit[0]]) if hit.size else INF, guard_trip(infra, params), y.size,
                0.0 if infra is None else float(infra.mean()))


def guard_trip(infra: np.ndarray | None, params: GateParams) -> int:
    if infra is None or not infra.any():
        return INF
    n = np.arange(1, infra.size + 1)
    ratio = np.cumsum(infra) / n
    ends = np.arange(params.block_size - 1, infra.size, params.block_size)
    trip = (n[ends] >= params.infra_min_denominator) & (ratio[ends] > params.infra_max_ratio)
    hit = np.flatnonzero(trip)
    return int(n[ends[hit[0]]]) if hit.size else INF


def decide(path: Path, block: int, cap: int) -> tuple[int, int]:
    """(action, pairs): 1 accept, -1 reject, 0 undecided at the cap, 2 INFRA abort; the order of gate_decision.

    With `betting_path`, a vectorised copy of the betting gate for speed: `cross_check` (section 12, and
    tests/kernel/test_gate_benchmark.py on seeded worlds) shows it agrees with the kernel's gate loop decision for decision."""
    looks = {"accept": look_of(path.accept, block), "reject": look_of(path.reject, block), "guard": path.guard}
    first = min(looks.values())
    if first > cap:
        return 0, min(cap, path.horizon)
    if looks["guard"] == first:
        return 2, first
    return (1, first) if looks["accept"] == first else (-1, first)


def summarise(paths: list[Path], block: int, caps) -> dict:
    out = {}
    for cap in caps:
        dec = np.array([decide(p, block, cap) for p in paths])
        acc = dec[:, 0] == 1
        runs = len(paths)
        pa = float(acc.mean())
        out[cap] = dict(
            p_accept=pa, se=math.sqrt(pa * (1 - pa) / runs), p_reject=float(np.mean(dec[:, 0] == -1)),
            p_undecided=float(np.mean(dec[:, 0] == 0)), p_infra=float(np.mean(dec[:, 0] == 2)), mean_pairs=float(dec[:, 1].mean()),
            mean_accept=float(dec[acc, 1].mean()) if acc.any() else float("nan"),
            se_accept=float(dec[acc, 1].std(ddof=1) / math.sqrt(acc.sum())) if acc.sum() > 1 else float("nan"), runs=runs,
        )
    return out


def accept_only(paths: list[Path], block: int, cap: int) -> dict:
    """Mean pairs to accept without any reject (the efficiency measure of section 4), its SE and power within `cap`."""
    looks = np.array([look_of(p.accept, block) for p in paths])
    ok = looks <= cap
    return dict(mean=float(looks[ok].mean()) if ok.any() else float("nan"),
                se=float(looks[ok].std(ddof=1) / math.sqrt(ok.sum())) if ok.sum() > 1 else float("nan"), power=float(ok.mean()), runs=len(paths))


def population_paths(rng, p, q, runs: int, params: GateParams, *, horizon: int, pre_gate_obs: int, plan: str = "importance",
                     coupling: float = 0.0, infra_on_wrong: float = 0.0) -> list[Path]:
    """`runs` gates on population (p, q). plan: "importance" (params_of(ImportanceParams, params).importance_floor) | "random-signs" (uniform order,
    today's sequential statistic). `infra_on_wrong`: share of the candidate's WRONG answers lost to infrastructure
    (missing not at random): the betting rule imputes them against the candidate, today's rule drops them."""
    n = p.size
    out = []
    for r in range(runs):
        if plan == "importance":
            planner = planner_for(rng, p, params, pre_gate_obs, seed=r)
            pi, bound = planner.probabilities, planner.bound
        elif plan == "oracle":  # the ceiling of ANY importance plan: pi from the TRUE discordance (not implementable)
            pi = oracle_probabilities(p, q, params_of(ImportanceParams, params).importance_floor)
            bound = float(np.max(1.0 / (n * pi)))
        else:
            pi, bound = np.full(n, 1.0 / n), 1.0
        rows = rng.choice(n, size=horizon, p=pi)
        base, cand = draw_outcomes(rng, p[rows], q[rows], coupling)
        infra = (~cand) & (rng.random(horizon) < infra_on_wrong) if infra_on_wrong > 0 else None
        if plan in ("importance", "oracle"):
            z = (cand.astype(float) - base) / (n * pi[rows])  # imputing a lost wrong answer as wrong leaves z unchanged
            out.append(betting_path(z, bound, params, infra))
        else:
            y = cand.astype(int) - base.astype(int)
            if infra is not None:
                y = np.where(infra, 0, y)  # today's rule: an infra pair carries no evidence
            out.append(sign_path(y, params, infra))
    return out


def oracle_probabilities(p: np.ndarray, q: np.ndarray, floor: float) -> np.ndarray:
    """pi proportional to the true sd of C - B, sqrt(p (1 - q) + q (1 - p)) (independent arms), floored like the plan."""
    return floor_probabilities(np.sqrt(p * (1 - q) + q * (1 - p)), floor)


def second_moment_ratio(p: np.ndarray, q: np.ndarray, pi: np.ndarray) -> float:
    """E_pi[Z^2] / E_uniform[(C - B)^2]: the share of the uniform plan's variance an importance plan keeps (independent arms)."""
    v = p * (1 - q) + q * (1 - p)
    return float(np.sum(v / (p.size**2 * pi)) / np.mean(v))


def homogeneous_paths(rng, d: float, delta: float, runs: int, params: GateParams, *, horizon: int, rule: str) -> list[Path]:
    """Paired outcomes with discordance d and gain delta (every question alike: pi uniform, weight 1)."""
    theta = (1 + delta / d) / 2
    out = []
    for _ in range(runs):
        u = rng.random(horizon)
        y = np.where(u < d * theta, 1, np.where(u < d, -1, 0))
        out.append(betting_path(y.astype(float), 1.0, params) if rule == "betting" else sign_path(y, params))
    return out


# ---------------------------------------------------------------- populations of sections 8-9
def strata_population(rng, n: int, strata) -> tuple[np.ndarray, np.ndarray]:
    """Strata (share, baseline accuracy, gain): p jittered within a stratum (Beta with mean p, 40 pseudo-obs), q = p + gain, clipped;
    the gains are then re-centred on the largest stratum so that the population gain is exactly 0."""
    sizes = np.floor(np.array([s for s, _, _ in strata]) * n).astype(int)
    sizes[np.argmax(sizes)] += n - sizes.sum()
    p_parts, q_parts, which_parts = [], [], []
    for k, ((_, mean, gain), size) in enumerate(zip(strata, sizes)):
        pk = rng.beta(mean * 40, (1 - mean) * 40, size)
        p_parts.append(pk)
        q_parts.append(np.clip(pk + gain, 0.0, 1.0))
        which_parts.append(np.full(size, k))
    p, q, which = np.concatenate(p_parts), np.concatenate(q_parts), np.concatenate(which_parts)
    big = which == np.argmax(sizes)
    q[big] -= (q.sum() - p.sum()) / big.sum()
    if np.any(q < 0) or np.any(q > 1):
        raise ValueError("strata population: gains cannot be balanced inside [0, 1]")
    return p, q


OWN_MIXES = (
    # (label, strata (share, baseline accuracy, gain)): chosen before any run of the betting rule, not tuned
    ("mix A: 60 % easy (p .92) lose, 25 % mid (p .55) +20 pts, 15 % hard (p .12) +10 pts", ((0.60, 0.92, -0.108), (0.25, 0.55, 0.20), (0.15, 0.12, 0.10))),
    ("mix B: 30 % easy (p .97) +2 pts, 40 % mid (p .70) lose, 30 % hard (p .35) +18 pts", ((0.30, 0.97, 0.02), (0.40, 0.70, -0.15), (0.30, 0.35, 0.18))),
    ("mix C: 10 % mid (p .5) +40 pts, 90 % easy (p .95) lose", ((0.90, 0.95, -0.044), (0.10, 0.50, 0.40))),
    # D and E added with the wiring (issue 13 item 1, "two more of your own"), fixed before their first run
    ("mix D: 45 % mid (p .5) lose, 35 % hard (p .15) +8 pts, 20 % easy (p .85) +3 pts", ((0.45, 0.50, -0.075), (0.35, 0.15, 0.08), (0.20, 0.85, 0.03))),
    ("mix E: 24 % easy (p .95) lose, 19 % each at p .05 +15 / .30 −10 / .50 +8 / .70 −4 pts",
     ((0.24, 0.95, -0.071), (0.19, 0.05, 0.15), (0.19, 0.30, -0.10), (0.19, 0.50, 0.08), (0.19, 0.70, -0.04))),
)


def cross_check(rng, p, q, runs: int, params: GateParams, pre_gate_obs: int, infra_on_wrong: float = 0.0) -> dict:
    """Gates end to end on the kernel's gate loop (`run_gate`: ImportancePlanner.next_block -> pair_block ->
    gate_decision with the registered betting rule at every block end), compared with the vectorised decision of this
    module (`betting_path` + `decide`) on the same outcomes: the vectorised copy the sections above use for speed is
    valid only while `agree == runs` (tests/kernel/test_gate_benchmark.py checks it on seeded worlds, with and without
    infra failures: `infra_on_wrong` as in `population_paths`). The vectorised decision has no futility stop, so the
    production gates run with `gate.futility=none` here (futility only ever turns a "continue" into a reject:
    benchmarks/futility.py and tests/kernel/test_futility.py measure it)."""
    params = dataclasses.replace(params, futility="none")
    agree = accepts = trigger_ok = infra_aborts = 0
    for r in range(runs):
        planner = planner_for(rng, p, params, pre_gate_obs, seed=r)

        def sample_block(block, _b: int, planner=planner):
            rows = np.array([int(item.qid[1:]) for item in block])
            base, cand = draw_outcomes(rng, p[rows], q[rows], 0.0)
            lost = (~cand) & (rng.random(rows.size) < infra_on_wrong) if infra_on_wrong > 0 else np.zeros(rows.size, dtype=bool)
            candidate = [None if gone else bool(c) for c, gone in zip(cand, lost)]
            return pair_block(block, base.tolist(), candidate, informing_samples=planner.informing_samples())

        run = gate_now(planner, sample_block, decide_by(params), label="gate_betting cross-check")
        gate, pairs = run.decision, run.pairs
        undecided = gate.reason.startswith("undecided")  # the final look's params.undecided, not a crossing
        verdict = 0 if undecided else {"accept": 1, "reject": -1, "infra": 2}.get(gate.action, 0)
        infra = np.array([x.candidate is None for x in pairs])
        if any(x.baseline is None for x in pairs):
            raise ValueError("gate_betting cross-check: a pair without a baseline outcome (sample_block draws both arms of every pair)")
        z = np.array([(int(bool(x.candidate)) - int(bool(x.baseline))) * x.weight for x in pairs])  # a lost answer counts as wrong
        vec, _ = decide(betting_path(z, planner.bound, params, infra if infra.any() else None), params.block_size, params.max_pairs)
        agree += vec == verdict
        infra_aborts += verdict == 2
        if verdict == 1:
            accepts += 1
            trigger_ok += params.lambda_accept <= gate.log_e == betting_look(pairs, params).log_e_trigger
    return dict(runs=runs, agree=agree, accepts=accepts, trigger_at_or_above_lambda=trigger_ok, infra_aborts=infra_aborts)


def timed_sections(rng_for: Callable[[int], np.random.Generator], settings: dict, populations: dict) -> dict:
    """Run sections 8-12; `populations`: label -> (p, q) for the zero-sum / strong-null cells and "uplift" for +5."""
    params = GateParams(rule="betting", plan="importance")
    s = settings
    caps = s["caps"]
    out: dict = {}
    # 8. population validity of the default plan and of today's random order
    rows = []
    rng = rng_for(8)
    for label, (p, q) in populations["nulls"].items():
        res = summarise(population_paths(rng, p, q, s["null_runs"], params, horizon=max(caps), pre_gate_obs=s["pre_gate_obs"]), params.block_size, caps)
        rows.append(dict(population=label, delta=float(np.mean(q - p)), result=res))
    out["validity"] = rows
    # 9. efficiency on the uniform +5 population: floors, block sizes, correlated arms
    rng = rng_for(9)
    p, q = populations["uplift"]
    eff = []
    configs: list[tuple[str, str, dict[str, Any], float]] = [("uniform random order, today's sign statistic (grid θ 0.60-0.90)", "random-signs", {}, 0.0)]
    configs += [(f"importance plan, floor {f}" + (" (uniform random order)" if f == 1.0 else ""), "importance", dict(importance_floor=f), 0.0) for f in s["floors"]]
    configs += [("ORACLE importance plan, π ∝ true sd of C − B, floor 0.5 (not implementable: the ceiling of any plan)", "oracle", {}, 0.0)]
    configs += [(f"importance plan (default floor), block {b}", "importance", dict(block_size=b), 0.0) for b in s["blocks"]]
    configs += [(f"importance plan (default floor), correlated arms (coupling {c})", "importance", {}, c) for c in s["couplings"]]
    configs += [(f"uniform random order, today's sign statistic, correlated arms (coupling {c})", "random-signs", {}, c) for c in s["couplings"]]
    for label, plan, overrides, coupling in configs:
        pr = params.with_values(**overrides)
        paths = population_paths(rng, p, q, s["eff_runs"], pr, horizon=s["eff_cap"], pre_gate_obs=s["pre_gate_obs"], plan=plan, coupling=coupling)
        eff.append(dict(label=label, plan=plan, overrides=overrides, coupling=coupling, accept_only=accept_only(paths, pr.block_size, s["eff_cap"]),
                        product=summarise(paths, pr.block_size, (400,))[400]))
    out["efficiency"] = eff
    floor = params_of(ImportanceParams, params).importance_floor
    out["second_moment"] = dict(
        oracle=second_moment_ratio(p, q, oracle_probabilities(p, q, floor)),
        plan=float(np.mean([second_moment_ratio(p, q, planner_for(rng, p, params, s["pre_gate_obs"], seed=r).probabilities) for r in range(50)])),
    )
    # 10. power and reject side, homogeneous cells
    rng = rng_for(10)
    power = []
    for d in (0.2, 0.4):
        for delta_pts in (-5, 0, 2, 5, 10):
            for rule in ("betting", "sequential"):
                paths = homogeneous_paths(rng, d, delta_pts / 100, s["power_runs"], params, horizon=max(caps), rule=rule)
                power.append(dict(d=d, delta=delta_pts, rule=rule, result=summarise(paths, params.block_size, caps)))
    out["power"] = power
    # 11. infra failures missing not at random (only on the candidate's wrong answers), strong null
    rng = rng_for(11)
    p0, q0 = populations["strong_null"]
    infra_rows = []
    for share in s["infra_shares"]:
        for plan in ("importance", "random-signs"):
            paths = population_paths(rng, p0, q0, s["infra_runs"], params, horizon=max(caps), pre_gate_obs=s["pre_gate_obs"], plan=plan, infra_on_wrong=share)
            infra_rows.append(dict(share=share, plan=plan, infra_rate=float(np.mean([x.infra_share for x in paths])), result=summarise(paths, params.block_size, caps)))
    out["infra"] = infra_rows
    # 12. end-to-end cross-check through the real planner / pair_block / betting_look
    rng = rng_for(12)
    p, q = populations["uplift"]
    out["cross_check"] = cross_check(rng, p, q, s["cross_runs"], params, s["pre_gate_obs"])
    return out
