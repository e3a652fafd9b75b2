"""The delivery certificate (harness/kernel/certificate.py): validity in worlds it was not tuned on, bounds, stop rule.

Tolerances: rates are checked against alpha + 3 standard errors of the simulated rate.
"""

from __future__ import annotations

import math
from dataclasses import fields, replace

import numpy as np
import pytest

from harness.config.errors import ConfigError
from harness.config.load import load_config
from harness.kernel.certificate import (
    BETS,
    EXACT_ZERO,
    GRID_STEP,
    CertifyParams,
    UniformDraws,
    _log_wealth,
    certify_decision,
    confidence_bounds,
    differences,
    on_changed_questions,
    per_type_estimates,
)
from harness.kernel.types import PairResult


def _world(rng: np.random.Generator, n: int, kind: str) -> tuple[np.ndarray, np.ndarray]:
    """Per-question accuracies (p baseline, q candidate) of a population of n questions."""
    p = rng.beta(2, 2, size=n)
    if kind == "strong_null":  # same harness
        return p, p.copy()
    if kind == "tradeoff_null":  # helps hard questions, hurts easy ones, population gain exactly 0
        up = np.where(p < 0.5, 0.3 * (1 - p), 0.0)
        down = np.where(p >= 0.5, p, 0.0)
        q = p + up - down * (up.sum() / down.sum())
        return p, np.clip(q, 0, 1)
    if kind == "harmful":
        return p, np.clip(p - 0.03, 0, 1)
    if kind == "few_types_skewed":  # 3 strata of very different size and accuracy, zero total gain
        p = np.concatenate([np.full(n // 10, 0.9), np.full(n // 3, 0.2), np.full(n - n // 10 - n // 3, 0.6)])
        q = p.copy()
        q[: n // 10] -= 0.2
        q[n // 10: n // 10 + n // 3] += 0.2 * (n // 10) / (n // 3)
        return p, q
    raise ValueError(kind)


def _draw(rng: np.random.Generator, p: np.ndarray, q: np.ndarray, t: int, coupling: float) -> np.ndarray:
    """t paired differences C - B on uniform draws; with probability `coupling` the two arms share their uniform."""
    idx = rng.integers(0, len(p), size=t)
    u_b, u_c = rng.random(t), rng.random(t)
    shared = rng.random(t) < coupling
    u_c = np.where(shared, u_b, u_c)
    return (u_c < q[idx]).astype(float) - (u_b < p[idx]).astype(float)


@pytest.mark.parametrize("kind,n,coupling", [
    ("strong_null", 60, 0.0), ("tradeoff_null", 120, 0.0), ("tradeoff_null", 40, 0.74), ("harmful", 200, 0.5),
    ("few_types_skewed", 90, 0.0),
])
def test_false_certification_rate_is_at_most_alpha_under_optional_stopping(kind, n, coupling):
    rng = np.random.default_rng(hash((kind, n, coupling)) % 2**32)
    alpha, runs, horizon = 0.05, 3000, 400
    p, q = _world(rng, n, kind)
    assert q.mean() - p.mean() <= 1e-9  # every world here is a null: the candidate is not better
    z = np.stack([_draw(rng, p, q, horizon, coupling) for _ in range(runs)])
    # the e-process at m = 0, looked at after EVERY pair (a superset of any block schedule); vectorised over runs,
    # cross-checked against the production function on a few of them
    bets = np.asarray(BETS)
    logs = np.cumsum(np.log1p(z[..., None] * bets), axis=1)
    log_k = np.log(np.mean(np.exp(logs), axis=2))
    for row in (0, 1, runs - 1):
        assert np.allclose(log_k[row], _log_wealth(z[row], np.array([0.0]), bets)[0])
    rate = float(np.mean(log_k.max(axis=1) >= math.log(1 / alpha)))
    se = math.sqrt(alpha * (1 - alpha) / runs)
    assert rate <= alpha + 3 * se, f"{kind}: false certification {rate:.4f} > {alpha} + 3 SE"


@pytest.mark.parametrize("gain,coupling", [(0.0, 0.0), (0.08, 0.0), (0.2, 0.5), (-0.1, 0.0)])
def test_lower_and_upper_bounds_cover_the_true_gain_at_every_time(gain, coupling):
    """The bounds miss Delta at some time iff the e-process at the grid point next to Delta crossed (K_t(m) is monotone
    in m): the rate is measured on that path over many runs, and the equivalence on the production bounds of a few."""
    rng = np.random.default_rng(int(1000 * gain) % 97 + 5)
    alpha, runs, horizon = 0.05, 3000, 300
    p = rng.beta(2, 2, size=150)
    q = np.clip(p + gain, 0, 1)
    delta = float(q.mean() - p.mean())
    grid = np.round(np.arange(-0.9, 0.9 + GRID_STEP / 2, GRID_STEP), 6)
    g_up, g_down = grid[grid >= delta - 1e-12].min(), grid[grid <= delta + 1e-12].max()
    z = np.stack([_draw(rng, p, q, horizon, coupling) for _ in range(runs)])
    bets, threshold = np.asarray(BETS), math.log(1 / alpha)
    low = np.log(np.mean(np.exp(np.cumsum(np.log1p((z[..., None] - g_up) * bets), axis=1)), axis=2)) >= threshold
    high = np.log(np.mean(np.exp(np.cumsum(np.log1p(-(z[..., None] - g_down) * bets), axis=1)), axis=2)) >= threshold
    for row in range(25):  # the production bounds miss exactly when these paths cross
        lcb, ucb = confidence_bounds(z[row], alpha)
        assert bool(np.any(lcb >= g_up)) == bool(low[row].any())
        assert bool(np.any(ucb <= g_down)) == bool(high[row].any())
        assert np.all(np.diff(lcb) >= 0) and np.all(np.diff(ucb) <= 0)  # running intersection
    se = math.sqrt(alpha * (1 - alpha) / runs)
    assert low.any(axis=1).mean() <= alpha + 3 * se
    assert high.any(axis=1).mean() <= alpha + 3 * se


def test_grid_bound_is_never_tighter_than_the_exact_inversion():
    rng = np.random.default_rng(3)
    z = _draw(rng, np.full(50, 0.5), np.full(50, 0.7), 200, 0.0)
    lcb, ucb = confidence_bounds(z, 0.05)
    threshold = math.log(20)
    for t in (19, 99, 199):
        lo, hi = -0.9, 0.9  # bisection on the exact (monotone) wealth at time t
        for _ in range(60):
            mid = (lo + hi) / 2
            if _log_wealth(z[: t + 1], np.array([mid]), np.asarray(BETS))[0][-1] >= threshold:
                lo = mid
            else:
                hi = mid
        exact = lo
        assert lcb[t] <= max(exact, lcb[max(t - 1, 0)]) + 1e-9  # the running max may carry an earlier, larger L_s
        assert exact - lcb[t] <= GRID_STEP + 1e-9 or lcb[t] >= exact - GRID_STEP  # at most one grid step looser
    assert ucb[-1] >= lcb[-1]


def _pairs(z: np.ndarray, qids: list[str]) -> list[PairResult]:
    out = []
    for k, zi in enumerate(z):
        base, cand = {1.0: (False, True), -1.0: (True, False), 0.0: (True, True)}[float(zi)]
        out.append(PairResult(qids[k % len(qids)], base, cand, sample_index=k))
    return out


def test_decision_certifies_a_large_gain_then_samples_on_until_the_bound_is_useful():
    rng = np.random.default_rng(11)
    params = CertifyParams(alpha=0.05, max_pairs=600, block_size=20, useful_fraction=0.5, useful_pairs_ratio=None)
    z = _draw(rng, np.full(100, 0.5), np.full(100, 0.75), 600, 0.0)
    pairs = _pairs(z, [f"q{i}" for i in range(100)])
    first_cross = None
    for n in range(20, 601, 20):
        d = certify_decision(pairs[:n], params, final=n == 600)
        if d.look.certified and first_cross is None:
            first_cross = n
        if d.action != "continue":
            break
    assert d.action == "certified"
    assert d.look.lower_bound >= 0.5 * d.look.estimate > 0
    assert first_cross is not None and n >= first_cross


def test_decision_stops_not_certified_when_the_upper_bound_falls_below_zero():
    rng = np.random.default_rng(12)
    params = CertifyParams(alpha=0.05, max_pairs=2000, block_size=20, futility="none")  # the UCB stop alone
    z = _draw(rng, np.full(100, 0.6), np.full(100, 0.35), 2000, 0.0)
    pairs = _pairs(z, [f"q{i}" for i in range(100)])
    for n in range(20, 2001, 20):
        d = certify_decision(pairs[:n], params, final=n == 2000)
        if d.action != "continue":
            break
    assert d.action == "not_certified" and n < 2000 and d.look.upper_bound <= 0
    assert "upper bound" in d.reason


def _run_to_stop(pairs: list[PairResult], params: CertifyParams, share: float = 1.0) -> tuple[str, int]:
    """(action, pairs used) of the certificate looking every block_size pairs up to max_pairs."""
    for n in range(params.block_size, params.max_pairs + 1, params.block_size):
        d = certify_decision(pairs[:n], params, final=n == params.max_pairs, share=share)
        if d.action != "continue":
            return d.action, n
    raise AssertionError("no terminal decision at the budget")


def test_futility_only_refuses_and_saves_pairs_on_null_and_small_gains():
    """Every sequence certified with futility is certified without it (validity untouched); on nulls it stops sooner."""
    rng = np.random.default_rng(21)
    used = {"none": [], "bound": [], "estimate": []}
    for trial in range(24):
        gain = (0.0, 0.02, 0.15)[trial % 3]
        z = _draw(rng, np.full(80, 0.55), np.full(80, 0.55 + gain), 300, 0.0)
        pairs = _pairs(z, [f"q{i}" for i in range(80)])
        got = {f: _run_to_stop(pairs, CertifyParams(max_pairs=300, block_size=20, futility=f)) for f in used}
        for f, (action, n) in got.items():
            if action == "certified":
                assert got["none"][0] == "certified", (trial, f)
            if gain == 0.0:
                used[f].append(n)
    assert np.mean(used["estimate"]) < np.mean(used["bound"]) <= np.mean(used["none"])


def test_futility_bound_refuses_once_the_threshold_is_out_of_reach():
    params = CertifyParams(alpha=0.05, max_pairs=30, block_size=10, futility="bound")
    pairs = _pairs(np.array([-1.0] * 2 + [0.0] * 18), [f"q{i}" for i in range(20)])
    d = certify_decision(pairs, params, final=False)  # 2 losses, 10 pairs left: even 10 wins reach log E 1.92 < log 20
    assert d.action == "not_certified" and "futility (bound)" in d.reason
    assert certify_decision(pairs, replace(params, futility="none"), final=False).action == "continue"
    assert CertifyParams(futility="sometimes").check()[0][0] == "certify.futility"


def test_budget_end_gives_a_terminal_decision_and_infra_counts_against_the_candidate():
    params = CertifyParams(alpha=0.05, max_pairs=40, block_size=20)
    pairs = [PairResult(f"q{k}", True, None, sample_index=k) for k in range(40)]
    assert differences(pairs).tolist() == [-1.0] * 40
    d = certify_decision(pairs, params, final=False)  # max_pairs reached: final whatever the caller says
    assert d.action == "not_certified"


def test_non_inferiority_certifies_an_equal_harness_that_superiority_refuses():
    rng = np.random.default_rng(5)
    z = _draw(rng, np.full(80, 0.6), np.full(80, 0.6), 300, 0.9)  # same accuracy, strongly coupled arms
    pairs = _pairs(z, [f"q{i}" for i in range(80)])
    sup = certify_decision(pairs, CertifyParams(max_pairs=300), final=True)
    noninf = certify_decision(pairs, CertifyParams(max_pairs=300, margin=0.05), final=True)
    assert sup.action == "not_certified" and noninf.action == "certified"


def test_uniform_draws_are_seeded_fresh_and_cover_the_population():
    qids = [f"q{i}" for i in range(30)]
    a = UniformDraws(qids, max_pairs=50, block_size=20, seed=1, first_index=5_000_000)
    b = UniformDraws(list(reversed(qids)), max_pairs=50, block_size=20, seed=1, first_index=5_000_000)
    blocks_a = [a.next_block() for _ in range(3)]
    assert a.final and a.next_block() is None
    assert [len(x) for x in blocks_a] == [20, 20, 10]
    assert blocks_a == [b.next_block() for _ in range(3)]
    indices = [it.sample_index for blk in blocks_a for it in blk]
    assert indices == list(range(5_000_000, 5_000_050))
    c = UniformDraws(qids, max_pairs=50, block_size=20, seed=2, first_index=5_000_000)
    assert [it.qid for it in c.next_block()] != [it.qid for it in blocks_a[0]]


def test_per_type_estimates_flag_a_type_that_lost_more_than_the_drop():
    params = CertifyParams(flag_drop=0.02, min_type_pairs=5)
    pairs = ([PairResult("a1", False, True, sample_index=k) for k in range(10)]
             + [PairResult("b1", True, False, sample_index=100 + k) for k in range(3)]
             + [PairResult("b2", True, True, sample_index=200 + k) for k in range(7)]
             + [PairResult("c1", True, False, sample_index=300 + k) for k in range(2)])
    rows = {r.task_type: r for r in per_type_estimates(pairs, {"a1": "A", "b1": "B", "b2": "B", "c1": "C"}, params)}
    assert rows["A"].estimate == 1.0 and not rows["A"].flagged
    assert rows["B"].estimate == pytest.approx(-0.3) and rows["B"].flagged and rows["B"].pairs == 10
    assert rows["C"].estimate == -1.0 and not rows["C"].flagged  # 2 pairs: too few to flag
    for row in rows.values():
        assert row.ci_low <= row.estimate <= row.ci_high


def test_per_type_interval_of_all_tied_pairs_is_wide_not_zero():
    # 5 tied pairs say little about the type: the old plug-in normal interval was [0, 0]
    params = CertifyParams(flag_drop=0.02, min_type_pairs=5)
    ties = [PairResult("t1", True, True, sample_index=k) for k in range(5)]
    many = [PairResult("t1", True, True, sample_index=k) for k in range(400)]
    (few,) = per_type_estimates(ties, {"t1": "T"}, params)
    (lots,) = per_type_estimates(many, {"t1": "T"}, params)
    assert few.estimate == 0.0 and not few.flagged
    assert few.ci_low < -0.3 and few.ci_high > 0.3  # 5 pairs: about +-39 points
    assert -0.02 < lots.ci_low < 0.0 < lots.ci_high < 0.02  # 400 pairs: the interval narrows as 1/n


def test_every_default_is_the_config_files():
    """CertifyParams() is the product's certificate: each field's default equals conf/certify/default.yaml's value,
    read from the file (a value changed there fails here until the kernel's default follows)."""
    import yaml

    from tests.conftest import REPO_ROOT

    path = REPO_ROOT / "conf" / "certify" / "default.yaml"
    conf = yaml.safe_load(path.read_text(encoding="utf-8"))
    differ = {f.name: (f.default, conf.get(f.name, "<missing>")) for f in fields(CertifyParams)
              if f.name not in conf or f.default != conf[f.name] or isinstance(f.default, bool) != isinstance(conf[f.name], bool)}
    assert differ == {}, f"CertifyParams default != {path} (field: (default, file)): {differ}"


def test_params_check_names_each_bad_key():
    bad = CertifyParams(alpha=0.7, max_pairs=0, block_size=5, margin=-0.1, useful_fraction=1.0).check()
    assert {k for k, _, _ in bad} == {"certify.alpha", "certify.max_pairs", "certify.margin", "certify.useful_fraction"}
    assert CertifyParams().check() == []
    for bad_pairs in (-1, True, 1.5, 1001):
        assert [k for k, _, _ in CertifyParams(type_pairs=bad_pairs).check()] == ["certify.type_pairs"]
    for key in ("margin", "useful_fraction", "flag_drop"):  # a bool is no number, as for the other numeric keys
        assert [k for k, _, _ in CertifyParams(**{key: False}).check()] == [f"certify.{key}"]
    assert [k for k, _, _ in CertifyParams(flag_drop=math.inf).check()] == ["certify.flag_drop"]  # would flag nothing


def test_pool_budget_scales_with_the_population_and_is_checked():
    params = CertifyParams(max_pairs=1000, block_size=20, pairs_per_question=8)
    assert params.for_population(60).max_pairs == 480  # the quick world's test pool
    assert params.for_population(36).max_pairs == 300  # 288 -> whole blocks of 20
    assert params.for_population(10).max_pairs == 200  # the floor: a +10-point gain needs ~150-250 pairs to cross
    assert params.for_population(330).max_pairs == 1000  # the default world's pool: max_pairs stays the cap
    assert replace(params, pairs_per_question=0.0).for_population(60).max_pairs == 1000  # off
    for bad in (-1.0, True, "auto", 5000.0):
        assert [k for k, _, _ in replace(params, pairs_per_question=bad).check()] == ["certify.pairs_per_question"]
    with pytest.raises(ConfigError, match=r"certify\.pairs_per_question = -1"):  # the config loader names the key too
        load_config(["certify.pairs_per_question=-1"], env_file=None, environ={})


def test_pool_budget_refuses_a_null_sooner_and_certifies_only_what_the_full_budget_would():
    """The smaller budget is fixed before the first pair: every certified sequence is certified with the full budget
    too (same e-process on a prefix), a null is refused within the smaller budget, and a +15-point gain is still
    certified (the stop fires on gains, not only on refusals)."""
    rng = np.random.default_rng(8)
    full = CertifyParams(max_pairs=1000, block_size=20)
    small = replace(full, pairs_per_question=8).for_population(60)
    used_full, used_small = [], []
    for trial in range(15):
        gain = (0.0, 0.03, 0.15)[trial % 3]
        z = _draw(rng, np.full(60, 0.55), np.full(60, 0.55 + gain), 1000, 0.0)
        pairs = _pairs(z, [f"q{i}" for i in range(60)])
        a_full, n_full = _run_to_stop(pairs, full)
        a_small, n_small = _run_to_stop(pairs, small)
        assert n_small <= small.max_pairs == 480
        if a_small == "certified":
            assert a_full == "certified", trial
        if gain == 0.15:
            assert a_small == "certified", trial
        if gain == 0.0:
            assert a_small == "not_certified", trial
            used_full.append(n_full)
            used_small.append(n_small)
    assert np.mean(used_small) < np.mean(used_full)


def _stops_on_small_and_large_gains(default: CertifyParams, lever: CertifyParams, seed: int, trials: int) -> list[tuple]:
    """(gain, (action, pairs) at `default`, (action, pairs) with `lever`) on the same seeded streams of +2 and +15 pts
    at discordance ~0.25 on a 60-question pool (the quick world's shape)."""
    rng = np.random.default_rng(seed)
    out = []
    for trial in range(trials):
        gain = (0.02, 0.15)[trial % 2]
        pairs = _pairs(_draw(rng, np.full(60, 0.6), np.full(60, 0.6 + gain), 1000, 0.0), [f"q{i}" for i in range(60)])
        out.append((gain, _run_to_stop(pairs, default), _run_to_stop(pairs, lever)))
    return out


def test_futility_z_below_the_upper_bound_refuses_a_small_gain_sooner_and_never_certifies_more():
    """certify.futility_z < 1.645 takes the conditional power at a smaller gain: a +2-point candidate (the quick
    world's futility refusals, reports/benchmarks/cert_cost.md) is refused in fewer pairs, every sequence it certifies
    is certified at the default too (it only refuses), and a +15-point gain is still certified."""
    default = CertifyParams(max_pairs=1000, block_size=20, futility="estimate")
    runs = _stops_on_small_and_large_gains(default, replace(default, futility_z=0.5), seed=26, trials=12)
    for gain, (a_default, _), (a_low, _) in runs:
        if a_low == "certified":
            assert a_default == "certified", gain
        if gain == 0.15:
            assert a_low == "certified"  # must not refuse a gain of a delivered harness's size
    small = [(n_default, n_low) for gain, (_, n_default), (_, n_low) in runs if gain == 0.02]
    assert np.mean([n for _, n in small]) < 0.7 * np.mean([n for n, _ in small]), small
    assert [k for k, _, _ in replace(default, futility_z=-1.0).check()] == ["certify.futility_z"]


def test_predictive_futility_refuses_a_hopeless_small_gain_sooner_and_only_refuses():
    """certify.futility=predictive at futility_power 0.2 after futility_min_n 200 pairs (set here, not read from the
    defaults, which the config may move; test_every_default_is_the_config_files keeps those equal): a +2-point
    candidate - the quick world's seeds 5 and 26, refused by `estimate` only after 840 / 740 pairs - is refused in
    fewer pairs; every sequence it certifies is certified by `estimate` too (it adds a refusal, nothing else); a
    +15-point gain is never refused."""
    predictive = CertifyParams(max_pairs=1000, block_size=20, futility="predictive", futility_min_n=200, futility_power=0.2)
    estimate = replace(predictive, futility="estimate")
    runs = _stops_on_small_and_large_gains(estimate, predictive, seed=5, trials=8)
    for gain, (a_estimate, n_estimate), (a_predictive, n_predictive) in runs:
        assert n_predictive <= n_estimate  # the same rule plus one more way to refuse
        if n_predictive < n_estimate:
            assert n_predictive >= predictive.futility_min_n  # early luck alone never refuses
        if a_predictive == "certified":
            assert a_estimate == "certified" and n_predictive == n_estimate
        if gain == 0.15:
            assert a_predictive == "certified"
    small = [(n_estimate, n_predictive) for gain, (_, n_estimate), (_, n_predictive) in runs if gain == 0.02]
    assert np.mean([n for _, n in small]) < 0.5 * np.mean([n for n, _ in small]), small  # seeded: 185 against 640
    assert [k for k, _, _ in replace(predictive, futility_min_n=1).check()] == ["certify.futility_min_n"]


# certify.skip_identical: a population of 4 task types of 30 questions; the candidate changes types 0 and 1 only, so
# the questions of types 2 and 3 read identical input (q = p there exactly) and S = types 0-1, pi = 0.5
_TYPES, _PER = 4, 30


def _changed_world(rng: np.random.Generator, delta_s: float, tradeoff: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(p, q, changed mask) of 120 questions whose changed half has mean gain exactly `delta_s` (tradeoff: helps hard
    questions, hurts easy ones, as in `_world`)."""
    p = rng.beta(2, 2, size=_TYPES * _PER)
    changed = np.arange(p.size) < 2 * _PER
    q = p.copy()
    if tradeoff:
        ps = p[changed]
        up, down = np.where(ps < 0.5, 0.3 * (1 - ps), 0.0), np.where(ps >= 0.5, ps, 0.0)
        q[changed] = ps + up - down * ((up.sum() - delta_s * ps.size) / down.sum())
    else:  # a gain proportional to the room left (a loss to the accuracy there): q stays in [0, 1]
        ps = p[changed]
        q[changed] = ps + (delta_s / (1 - ps).mean() * (1 - ps) if delta_s >= 0 else delta_s / ps.mean() * ps)
    assert 0.0 <= q.min() and q.max() <= 1.0 and abs((q - p)[changed].mean() - delta_s) < 1e-9
    return p, q, changed


@pytest.mark.parametrize("margin,tradeoff,coupling", [(0.0, True, 0.0), (0.02, False, 0.0), (0.03, True, 0.5)])
def test_changed_questions_test_is_valid_under_optional_stopping_at_the_boundary_null(margin, tradeoff, coupling):
    """Delta = pi Delta_S exactly (the unchanged questions' difference is 0), so Delta = -margin is Delta_S = -margin / pi:
    the e-process on S at that null mean, looked at after every pair, crosses with probability <= alpha (tolerance: 3
    standard errors of the simulated rate), and the production decision agrees with the crossing on a few streams."""
    rng = np.random.default_rng(int(1000 * margin) + 7 * tradeoff)
    alpha, runs, horizon, share = 0.05, 3000, 400, 0.5
    p, q, changed = _changed_world(rng, -margin / share, tradeoff)
    assert q.mean() - p.mean() == pytest.approx(-margin)  # the population gain is the null's boundary
    z = np.stack([_draw(rng, p[changed], q[changed], horizon, coupling) for _ in range(runs)])
    m = -on_changed_questions(CertifyParams(margin=margin), share).margin
    assert m == pytest.approx(-margin / share)
    bets = np.asarray(BETS)
    log_k = np.log(np.mean(np.exp(np.cumsum(np.log1p((z[..., None] - m) * bets), axis=1)), axis=2))
    crossed = log_k.max(axis=1) >= math.log(1 / alpha)
    rate = float(np.mean(crossed))
    assert rate <= alpha + 3 * math.sqrt(alpha * (1 - alpha) / runs), f"false certification {rate:.4f}"
    params = CertifyParams(max_pairs=horizon, block_size=20, margin=margin)
    qids = [f"q{i}" for i in range(int(changed.sum()))]
    for row in range(12):  # at the budget: certified iff the e-process crossed at some pair
        decision = certify_decision(_pairs(z[row], qids), params, final=True, share=share)
        assert (decision.action == "certified") == bool(crossed[row])


@pytest.mark.parametrize("delta_s,coupling", [(0.0, 0.0), (0.16, 0.0), (0.3, 0.6)])
def test_changed_questions_bounds_in_population_units_cover_the_true_gain(delta_s, coupling):
    """pi x the S-test's bounds bound Delta = pi Delta_S at every time with probability >= 1 - alpha each (production
    `certify_decision` at share pi; tolerance 3 standard errors)."""
    rng = np.random.default_rng(int(100 * delta_s) + 3)
    alpha, runs, horizon, share = 0.05, 600, 200, 0.5
    p, q, changed = _changed_world(rng, delta_s)
    delta = float(q.mean() - p.mean())
    params = CertifyParams(max_pairs=horizon, block_size=horizon, futility="none")
    qids = [f"q{i}" for i in range(int(changed.sum()))]
    low_miss = high_miss = 0
    for _ in range(runs):
        look = certify_decision(_pairs(_draw(rng, p[changed], q[changed], horizon, coupling), qids), params, final=True,
                                share=share).look
        assert -share <= look.lower_bound <= look.upper_bound <= share  # |Delta| <= pi: the unchanged questions add 0
        low_miss += look.lower_bound > delta + 1e-12  # running bounds: the last look is the tightest
        high_miss += look.upper_bound < delta - 1e-12
    tolerance = alpha + 3 * math.sqrt(alpha * (1 - alpha) / runs)
    assert low_miss / runs <= tolerance and high_miss / runs <= tolerance


def test_asking_only_the_changed_questions_needs_fewer_pairs_when_the_unchanged_ones_are_noisy():
    """Independent arms: an unchanged question's pair is discordant with probability 2p(1 - p) and mean 0. Sampling
    the whole pool (pi = 0.4 of it changed, Delta_S = +15 pts, Delta = +6 pts) against sampling S at share pi, with the
    default stop rule and budget, stopped at the crossing: the S-test certifies at least as often in well under half
    the pairs (theory ~pi^2)."""
    rng = np.random.default_rng(17)
    n, share = 150, 0.4
    p = rng.beta(2, 2, size=n)
    changed = np.arange(n) < int(share * n)
    q = np.where(changed, np.clip(p + 0.15, 0, 1), p)
    params = CertifyParams(max_pairs=1000, block_size=20, useful_fraction=0.0)  # stop at the crossing: pairs to cross
    qids = [f"q{i}" for i in range(n)]
    whole, on_s = [], []
    for _ in range(16):
        whole.append(_run_to_stop(_pairs(_draw(rng, p, q, 1000, 0.0), qids), params))
        on_s.append(_run_to_stop(_pairs(_draw(rng, p[changed], q[changed], 1000, 0.0), qids[: int(changed.sum())]), params,
                                 share=share))
    certified = lambda runs: sum(a == "certified" for a, _ in runs)  # noqa: E731
    assert certified(on_s) >= certified(whole) and certified(on_s) >= 15
    assert np.mean([k for _, k in on_s]) < 0.5 * np.mean([k for _, k in whole]), (whole, on_s)


def test_changed_share_maps_the_null_mean_and_refuses_a_share_out_of_range():
    params = CertifyParams(margin=0.05)
    assert on_changed_questions(params, 1.0) is params
    assert on_changed_questions(params, 0.25).margin == pytest.approx(0.2)
    assert on_changed_questions(params, 0.01).margin == 0.9  # beyond the grid: tested at -M_MAX, the stronger claim
    for bad in (0.0, -0.1, 1.5):
        with pytest.raises(ValueError, match="share"):
            on_changed_questions(params, bad)
    assert [k for k, _, _ in replace(params, skip_identical="yes").check()] == ["certify.skip_identical"]


def test_share_zero_certifies_exactly_with_a_margin_and_refuses_without_one():
    """No question's input changed (share 0): Delta = 0 exactly, so "not worse by more than m" holds without pairs and
    without sampling error; "better" does not (0 is not better)."""
    noninf = certify_decision([], CertifyParams(margin=0.02), final=True, share=0.0)
    assert noninf.action == "certified" and EXACT_ZERO in noninf.reason
    look = noninf.look
    assert (look.pairs, look.estimate, look.lower_bound, look.upper_bound, look.certified) == (0, 0.0, 0.0, 0.0, True)
    sup = certify_decision([], CertifyParams(margin=0.0), final=True, share=0.0)
    assert sup.action == "not_certified" and not sup.look.certified and "not better" in sup.reason
    with pytest.raises(ValueError, match="share 0"):  # a pair at share 0 means the caller's S is wrong
        certify_decision([PairResult("q0", True, True, sample_index=0)], CertifyParams(margin=0.02), final=True, share=0.0)


def test_useful_pairs_ratio_caps_the_phase_after_the_crossing_at_r_times_its_pairs():
    """A stream that crosses early and then drifts (a +20-point gain at first, ties after): with useful_fraction 0.9
    the bound never becomes useful, so without the cap the certificate samples to its budget; with r it stops at the
    first look with >= (1 + r) x crossing pairs, certified at the same crossing, with a lower bound no tighter."""
    rng = np.random.default_rng(3)
    head = _draw(rng, np.full(100, 0.5), np.full(100, 0.7), 100, 0.0)
    z = np.concatenate([head, np.zeros(500)])
    pairs = _pairs(z, [f"q{i}" for i in range(100)])
    base = CertifyParams(alpha=0.05, max_pairs=600, block_size=20, useful_fraction=0.9, futility="none", useful_pairs_ratio=None)
    open_action, open_n = _run_to_stop(pairs, base)
    assert (open_action, open_n) == ("certified", 600)
    crossed = certify_decision(pairs, base, final=True).look.crossed_at
    assert crossed is not None and crossed <= 100
    for ratio in (0.0, 0.5, 1.0, 2.0):
        capped = replace(base, useful_pairs_ratio=ratio)
        action, n = _run_to_stop(pairs, capped)
        want = math.ceil((1 + ratio) * crossed / 20) * 20
        assert (action, n) == ("certified", want), ratio
        d = certify_decision(pairs[:n], capped, final=False)
        assert d.look.crossed_at == crossed and "capped" in d.reason
        assert d.look.lower_bound <= certify_decision(pairs, base, final=True).look.lower_bound
    assert _run_to_stop(pairs, replace(base, useful_pairs_ratio=1000.0)) == ("certified", 600)  # large: as today


def test_useful_pairs_ratio_never_changes_which_streams_are_certified():
    """The cap only stops a certified stream sooner: over null, small and large gains (futility on, as by default),
    every stream gets the same outcome with and without it, and never more pairs."""
    rng = np.random.default_rng(8)
    for trial in range(30):
        gain = (0.0, 0.04, 0.15)[trial % 3]
        z = _draw(rng, np.full(80, 0.5), np.full(80, 0.5 + gain), 400, 0.0)
        pairs = _pairs(z, [f"q{i}" for i in range(80)])
        base = CertifyParams(max_pairs=400, block_size=20, useful_fraction=0.25, futility_min_n=100, useful_pairs_ratio=None)
        action, n = _run_to_stop(pairs, base)
        for ratio in (0.0, 0.5, 1.0):
            capped_action, capped_n = _run_to_stop(pairs, replace(base, useful_pairs_ratio=ratio))
            assert capped_action == action and capped_n <= n, (trial, ratio)


def test_useful_pairs_ratio_is_checked():
    assert CertifyParams(useful_pairs_ratio=None).check() == []
    assert [k for k, _, _ in CertifyParams(useful_pairs_ratio=-0.5).check()] == ["certify.useful_pairs_ratio"]
    assert [k for k, _, _ in CertifyParams(useful_pairs_ratio=True).check()] == ["certify.useful_pairs_ratio"]
