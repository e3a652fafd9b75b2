"""Helpers of benchmarks/fdr.py and the aggregation of benchmarks/e2e.py (the parts that are pure)."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks import e2e, fdr, real, real_coupling, soft_gate


def test_shift_hits_the_stated_pool_points():
    p = fdr.make_pool(np.random.default_rng(0))
    for points in (-5.0, 5.0, 10.0):
        assert float(np.mean(fdr.shifted(p, points)) - np.mean(p)) == pytest.approx(points / 100, abs=1e-9)
    assert np.array_equal(fdr.shifted(p, 0.0), p)


def test_zero_sum_candidate_keeps_the_pool_mean_and_moves_questions_both_ways():
    for strata in (fdr.STRATA, (0.2, 0.2, 0.6)):
        p = fdr.make_pool(np.random.default_rng(3), 60, strata)
        q = fdr.zero_sum(p)
        assert float(np.mean(q)) == pytest.approx(float(np.mean(p)), abs=1e-12)
        assert (q > p).sum() >= 5 and (q < p).sum() >= 5 and np.all((q >= 0) & (q <= 1))


def test_the_fdr_benchmark_reads_the_default_gate_and_the_old_rule_from_the_config():
    old = fdr.configured_gate(fdr.OLD_RULE)
    assert (old.rule, old.plan) == ("sequential", "static")
    assert fdr.configured_gate(("gate.fdr=none",)).fdr == "none"


def _run(rule, seed, edits, curve, tradeoff=False, **extra):
    return {"seed": seed, "rule": rule, "tradeoff": tradeoff, "base_test": 0.5, "delivered_test": curve[-1]["best_test"],
            "curve": curve, "edits": edits, "gates": len(edits), "gate_rollouts": 10 * len(edits), **extra}


def test_e2e_summary_counts_harmful_null_and_reach():
    edit = lambda effect, epoch=1: {"epoch": epoch, "step": 1, "action": "accept", "skill_file": "x", "effect": effect,  # noqa: E731
                                    "tradeoff": False, "rollouts": 10}
    runs = [
        _run(e2e.OURS, 7, [edit(0.05), edit(0.0), edit(-0.02)],
             [{"epoch": 1, "rollouts": 100, "best_test": 0.6}, {"epoch": 2, "rollouts": 300, "best_test": 0.7}]),
        _run("gepa", 7, [edit(0.05)], [{"epoch": 1, "rollouts": 150, "best_test": 0.65}, {"epoch": 2, "rollouts": 400, "best_test": 0.8}]),
    ]
    text, summary = e2e.summarize(runs, quick=True, wall=1.0, cmd="x")
    s = summary[e2e.OURS]
    assert (s["installed"], s["hurt"], s["null"], s["helped"]) == (3, 1, 1, 1)
    assert s["bad_share"] == pytest.approx(2 / 3)
    reach = summary["reach_gepa"][e2e.OURS][0]
    assert reach["gepa_acc"] == 0.65 and reach["rule_rollouts"] == 300 and reach["ratio"] == pytest.approx(2.0)
    assert "NOT met" in text
    # a page re-rendered from a saved JSON keeps the time its runs were measured, not the time of rendering
    text, _ = e2e.summarize(runs, quick=True, wall=60.0, cmd="x", measured="2026-01-02 03:04 UTC")
    assert "measured 2026-01-02 03:04 UTC, wall 1.0 min" in text


def test_e2e_why_describes_the_gate_the_runs_used():
    """The 'Why' page text follows the runs' recorded gate: a 20-pair budget gate is not called a few-hundred-pair test."""
    short = e2e.gate_cost_text({"rule": "betting_budget", "fdr": "none", "max_pairs": 20, "lambda": 0.5}, run_level=False)
    assert "at most gate.max_pairs = 20 pairs" in short and "few hundred" not in short
    strict = e2e.gate_cost_text({"rule": "betting", "fdr": "elond", "max_pairs": 400, "lambda": 3.0}, run_level=True)
    assert "few hundred" in strict
    assert "not in this JSON" in e2e.gate_cost_text({}, run_level=False)


@pytest.mark.parametrize("seed", range(6))
def test_the_trade_off_editor_is_exactly_zero_sum_even_with_few_easy_answers(seed):
    """e2e's trade-off rule: expected wins (mid, wrong -> right at a') equal expected losses (easy, right -> wrong at b),
    also where a * gain > loss (few easy questions: a is scaled down instead of b capped at 1, which was not zero-sum)."""
    rng = np.random.default_rng(seed)
    p = rng.beta(*((0.6, 0.6) if seed % 2 else (3.0, 1.0)), size=40)  # even seeds: mostly easy; odd: U-shaped, few mid
    if seed == 4:
        p = np.concatenate([rng.uniform(0.3, 0.7, 30), rng.uniform(0.8, 0.85, 2)])  # many mid, two easy: b would cap
    a, b = e2e.tradeoff_rates(list(p), 0.6)
    mid, easy = (p >= 0.3) & (p <= 0.7), p >= 0.8
    assert 0.0 <= a <= 0.6 and 0.0 <= b <= 1.0
    assert float(((1 - p) * a)[mid].sum()) == pytest.approx(float((p * b)[easy].sum()), abs=1e-9)
    if seed == 4:
        assert b == 1.0 and a < 0.6  # the capped case: the flip rate on mid questions gave way
    assert e2e.tradeoff_rates([0.95, 0.9], 0.6) == (0.0, 0.0)  # nothing to gain: the rule does nothing


def test_the_real_report_keeps_the_blocks_it_does_not_rewrite():
    """benchmarks/real.py rewrites its parts, benchmarks/real_coupling.py its own block: neither drops the others'."""
    old = real.merge_parts("", {"parsing": "P1", "train": "T1", "coupling": "C1"})
    assert old.index("P1") < old.index("T1") < old.index("C1")
    new = real.merge_parts(old, {"train": "T2"})
    assert "P1" in new and "T2" in new and "C1" in new and "T1" not in new
    assert "P1" in real.merge_parts(new, {"coupling": "C2"}) and "C1" not in real.merge_parts(new, {"coupling": "C2"})


def test_coupled_arms_share_the_draws_of_one_question_and_sample_index_only():
    """e2e's world variant --arm-coupling: c = 1 makes two harnesses' draws of one (qid, sample index) identical,
    other sample indices stay independent; c = 0 restores the default world's independent arms."""
    import harness.sim.solver as solver

    original = solver.uniforms
    a, b = "7|t1-001|hashA|12", "7|t1-001|hashB|12"
    assert original(a, 5) != original(b, 5)
    try:
        e2e.couple_arms(1.0)
        assert solver.uniforms(a, 5) == solver.uniforms(b, 5) and solver.uniforms(a + "|say", 3) == solver.uniforms(b + "|say", 3)
        assert solver.uniforms(a, 5) != solver.uniforms("7|t1-001|hashB|13", 5)
        e2e.couple_arms(0.5)
        shared = sum(solver.uniforms(f"7|q{i}|hashA|1", 1) == solver.uniforms(f"7|q{i}|hashB|1", 1) for i in range(2000))
        assert 900 <= shared <= 1100  # about half the questions' draws are shared
    finally:
        e2e.couple_arms(0.0)
    assert solver.uniforms is original


def test_the_ideal_gate_accepts_exactly_the_helpful_edits_and_is_put_back():
    """e2e.oracle_gate: accept iff the true effect on the questions reading the edited file is > +0.1 pt, no rollouts;
    the loop's gate is restored after the job (a pool worker runs the next job with it: a patch left in place gave
    the next seed's runs the ideal gate of another world)."""
    import asyncio
    from types import SimpleNamespace

    import harness.loop.gating as gating
    from harness.sim.oracle import Oracle
    from harness.sim.world import World

    world = World.generate(7)
    base = world.base_harness()
    tt = "temporal_reasoning"
    path = f"skills/{tt}/SKILL.md"
    oracle = Oracle(world)
    real = gating.validate_skill_local
    restore = e2e.oracle_gate(world)
    try:
        decided = {"accept": 0, "reject": 0}
        for rule in world.spec_by_name[tt].rules:  # insights, traps and neutral rules, each added to the skill file
            cand = base.with_files({path: base[path] + f"- {rule.text}\n"})
            effect = oracle.edit_effect(base, cand, [q.qid for q in world.questions if q.task_type == tt])
            request = SimpleNamespace(baseline_tree=base, candidate_tree=cand, skill_file=path, gate_run_prefix="p_gate_x")
            outcome = asyncio.run(gating.validate_skill_local(request))
            assert outcome.rollouts == 0 and outcome.action == ("accept" if effect > 0.001 else "reject"), (rule, effect)
            decided[outcome.action] += 1
        assert decided["accept"] >= 1 and decided["reject"] >= 1  # both decisions are exercised
    finally:
        restore()
    assert gating.validate_skill_local is real


def test_the_ideal_decision_at_many_pairs_installs_a_good_edit_rejects_a_bad_one_and_charges_its_pairs():
    """e2e.bayes_gate (oracle_n<K>): at K = 4000 pairs the posterior mean sits on the true effect, so a clearly helpful
    rule is installed and a clearly harmful one rejected, each charged K rollouts; charge_ideal_pairs adds the pairs of
    the epochs up to each epoch end to its cumulative rollouts (the gate writes no predictions to count)."""
    import asyncio
    from types import SimpleNamespace

    import harness.loop.gating as gating
    from harness.sim.oracle import Oracle
    from harness.sim.world import World

    world = World.generate(7)
    base = world.base_harness()
    tt = "temporal_reasoning"
    path = f"skills/{tt}/SKILL.md"
    oracle = Oracle(world)
    qids = [q.qid for q in world.questions if q.task_type == tt]
    effects = {rule.text: oracle.edit_effect(base, base.with_files({path: base[path] + f"- {rule.text}\n"}), qids)
               for rule in world.spec_by_name[tt].rules}
    good, bad = max(effects, key=effects.__getitem__), min(effects, key=effects.__getitem__)
    assert effects[good] > 0.02 and effects[bad] < -0.02
    log: list[dict] = []
    real = gating.validate_skill_local
    restore = e2e.bayes_gate(world, 4000, start=[0.0, 0.05, -0.05], log=log)
    try:
        for epoch, text in ((1, good), (2, bad)):
            cand = base.with_files({path: base[path] + f"- {text}\n"})
            request = SimpleNamespace(baseline_tree=base, candidate_tree=cand, skill_file=path, gate_run_prefix=f"p_gate_{epoch}", epoch=epoch)
            outcome = asyncio.run(gating.validate_skill_local(request))
            assert outcome.rollouts == 4000 and outcome.verdict.n_pairs == 4000
            assert outcome.action == ("accept" if text == good else "reject"), (text, effects[text], log[-1])
    finally:
        restore()
    assert gating.validate_skill_local is real
    assert [row["effect"] for row in log] == pytest.approx([effects[good], effects[bad]])
    curve = [{"epoch": e, "rollouts": n, "by_purpose": {**dict.fromkeys(e2e.PURPOSES, 0), "step": n}}
             for e, n in ((1, 100), (2, 250), (3, 400))]
    e2e.charge_ideal_pairs(curve, log)
    assert [c["rollouts"] for c in curve] == [4100, 8250, 8400] and curve[2]["charged"] == 8000
    assert [c["by_purpose"]["gate"] for c in curve] == [4000, 8000, 8000]  # the charged pairs are gate rollouts
    e2e.check_purpose_split(curve)
    curve[0]["rollouts"] += 1
    with pytest.raises(AssertionError, match="epoch 1: rollouts by purpose"):
        e2e.check_purpose_split(curve)


def test_ideal_rows_run_in_the_ideal_gates_group_and_sort_by_pairs():
    assert e2e.config_group("oracle_n12") == e2e.config_group(e2e.ORACLE) == e2e.CONFIG_GROUP[e2e.ORACLE]
    assert e2e.config_group("gepa") == "gepa"
    runs = [{"rule": r} for r in ("oracle_seq12", "oracle_n24", "oracle_n3", "gepa")]
    assert e2e.ideal_rules(runs) == ["oracle_n3", "oracle_n24", "oracle_seq12"]


def test_soft_gate_populations_have_their_stated_gain_and_statistics_their_means():
    """benchmarks/soft_gate.py: the shift hits the pool gain; hard estimates the accuracy gain, both soft statistics the
    soft-score gain (equal when calibrated, larger for the inflated candidate)."""
    logits = np.random.default_rng(1).normal(0.0, 2.5, 200)
    base = 1 / (1 + np.exp(-logits))
    for points in (-5.0, 5.0, 10.0):
        assert float(np.mean(soft_gate.shift_for_gain(logits, points) - base)) * 100 == pytest.approx(points, abs=1e-6)
    calibrated = soft_gate.Population("p", base, soft_gate.shift_for_gain(logits, 5.0))
    inflated = soft_gate.Population("i", base, base.copy(), inflate=True)
    for pop in (calibrated, inflated):
        z = soft_gate.draw_z(np.random.default_rng(2), pop, 4.0, 200, 2000)
        se = {name: float(np.std(v) / np.sqrt(v.size)) for name, v in z.items()}
        assert float(np.mean(z["hard"])) == pytest.approx(pop.gain_points / 100, abs=4 * se["hard"])
        for name in ("soft, rounded", "soft, continuous"):
            assert np.all(np.abs(z[name]) <= 1.0)
            if pop.inflate:
                assert float(np.mean(z[name])) > 0.05  # the reported soft score rose; the accuracy did not
            else:
                assert float(np.mean(z[name])) == pytest.approx(pop.gain_points / 100, abs=4 * se[name])
    # the continuous statistic has the smallest second moment: fewer pairs for the same mean
    z = soft_gate.draw_z(np.random.default_rng(3), calibrated, 4.0, 200, 2000)
    assert np.mean(z["soft, continuous"] ** 2) < np.mean(z["soft, rounded"] ** 2) < np.mean(z["hard"] ** 2)


def test_real_coupling_soft_score_calibration_and_pair_moments():
    """benchmarks/real_coupling.py: the calibration gap is mean(v - correct) over rollouts with a soft score (infra and
    missing soft scores left out); the pair moments are over same-seed pairs with both soft scores."""
    rc = real_coupling
    base = {("q1", 0): (True, 0.75), ("q1", 1): (False, 0.25), ("q2", 0): (None, None), ("q2", 1): (True, None)}
    cal = rc.calibration(base)
    assert (cal["judged"], cal["n"]) == (3, 2)
    assert cal["acc"] == pytest.approx(0.5) and cal["soft"] == pytest.approx(0.5) and cal["gap"] == pytest.approx(0.0)
    assert cal["gap_se"] == pytest.approx(0.25)  # diffs -0.25, +0.25: sd 0.354, over sqrt(2)
    cand = {("q1", 0): (True, 1.0), ("q1", 1): (True, 0.75), ("q2", 0): (True, 0.5)}
    sp = rc.soft_pairs(base, cand)
    assert sp["n"] == 2
    assert sp["m2_hard"] == pytest.approx(0.5) and sp["m2_soft"] == pytest.approx((0.25**2 + 0.5**2) / 2)
    assert sp["gain_hard"] == pytest.approx(0.5) and sp["gain_soft"] == pytest.approx(0.375)
    assert rc.calibration({("q", 0): (True, 0.5)}) == {"n": 1, "judged": 1}


@pytest.mark.parametrize("statistic", ["hard", "soft, rounded", "soft, continuous"])
def test_soft_gate_vectorised_crossing_is_the_gate_loops_accept(statistic):
    """soft_gate.first_crossing (the vectorised accept e-process the benchmark measures) against the kernel's gate loop
    with the betting rule (reject and futility off, blocks of 20, cap 400) on the same pair statistics: every seeded
    gate accepts at the block holding the first crossing, or stays undecided when there is none."""
    from benchmarks._engine import decide_by, gate_now
    from harness.kernel.betting import accept_bets
    from harness.kernel.gate import pair_block
    from harness.kernel.plans import FixedBlocks
    from harness.kernel.types import BlockItem, GateParams

    params = GateParams(rule="betting", lambda_accept=3.0, lambda_dir=-1e9, futility="none", block_size=20, max_pairs=400, undecided="reject")
    logits = np.random.default_rng(1).normal(0.0, 2.5, 200)
    outcomes = set()
    for points in (0.0, 10.0):
        pop = soft_gate.Population("p", soft_gate._sig(logits), soft_gate.shift_for_gain(logits, points))
        z_all = soft_gate.draw_z(np.random.default_rng([4, int(points)]), pop, 4.0, 10, 400)[statistic]
        crossing = soft_gate.first_crossing(z_all, accept_bets(1.0), params.lambda_accept)
        for z, n in zip(z_all, crossing):
            blocks = [[BlockItem(f"q{i}", i) for i in range(start, start + 20)] for start in range(0, 400, 20)]

            def sample_block(block, b, z=z):
                part = z[20 * b:20 * b + 20]
                values = {"baseline_values": [float(max(0.0, -x)) for x in part], "candidate_values": [float(max(0.0, x)) for x in part]}
                return pair_block(block, [bool(x < 0) for x in part], [bool(x > 0) for x in part],
                                  **(values if statistic == "soft, continuous" else {}))

            verdict = gate_now(FixedBlocks(blocks), sample_block, decide_by(params)).decision
            expected = ("accept", -(-int(n) // 20) * 20) if n <= 400 else ("reject", 400)
            assert (verdict.action, verdict.n_pairs) == expected
            outcomes.add(verdict.action)
    assert outcomes == {"accept", "reject"}
