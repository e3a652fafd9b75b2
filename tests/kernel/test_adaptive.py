import math

import numpy as np
import pytest

from benchmarks import gate as bench
from harness.kernel.adaptive import AdaptiveBlockPlanner
from harness.kernel.gate import LeakError, pair_block
from harness.kernel.ladder import GatePools, anchors_per_block
from harness.kernel.types import GateParams

QIDS = [f"q{i}" for i in range(40)]


def warm_pools(rng, p):
    gp = GatePools.build({"t": QIDS})
    for epoch in range(3):
        gp.update_from_run(f"exp_e{epoch}_slowR", [(q, 7 + epoch, bool(rng.random() < p[i])) for i, q in enumerate(QIDS)], gamma=0.3)
    return gp


def drive(planner, outcome_of, n_blocks=None):
    """Run the planner like the loop does; returns the blocks handed out."""
    fed, blocks = [], []
    while n_blocks is None or len(blocks) < n_blocks:
        block = planner.next_block(fed)
        if block is None:
            break
        blocks.append(block)
        fed += [outcome_of(item) for item in block]
    return blocks


def test_anchors_in_every_block_fresh_indices_and_budget():
    rng = np.random.default_rng(0)
    gp = warm_pools(rng, rng.random(40))
    params = GateParams(block_size=10, max_pairs=95, anchor_fraction=0.3)
    planner = AdaptiveBlockPlanner.from_gate_pools(gp, "t", params, seed=1, first_sample_index=7)
    blocks = drive(planner, lambda item: bool(rng.random() < 0.5))
    assert [len(b) for b in blocks] == [10] * 9 + [5] and planner.final
    for block in blocks:
        assert sum(item.anchor for item in block) == anchors_per_block(len(block), 0.3)
        ladder_qids = [item.qid for item in block if not item.anchor]
        assert len(ladder_qids) == len(set(ladder_qids))  # one ladder slot per question per block
    indices = [item.sample_index for block in blocks for item in block]
    assert len(indices) == len(set(indices))
    pre = gp.informing_samples("t")
    assert all(item.sample_index not in pre[item.qid] for block in blocks for item in block)  # 7, 8, 9 skipped


def alternating_feed():
    asked: dict[str, int] = {}

    def outcome(item):
        asked[item.qid] = asked.get(item.qid, 0) + 1
        return int(item.qid[1:]) < 10 and asked[item.qid] % 2 == 0

    return outcome


def test_order_depends_on_baseline_outcomes_only_and_never_touches_gate_pools():
    gp = GatePools.build({"t": QIDS})
    before = gp.to_json()
    params = GateParams(block_size=10, max_pairs=200, anchor_fraction=0.2, adaptive_top_fraction=0.25)
    planner = AdaptiveBlockPlanner.from_gate_pools(gp, "t", params, seed=3, first_sample_index=10_000)
    # q0..q9 alternate right/wrong -> informative; the rest always wrong -> their score falls
    blocks = drive(planner, alternating_feed(), n_blocks=12)
    last_ladder = [item.qid for item in blocks[-1] if not item.anchor]
    assert sum(int(q[1:]) < 10 for q in last_ladder) >= 6
    assert gp.to_json() == before  # persisted p_hat untouched
    # the same baseline feed gives the same plan (no hidden randomness beyond the seed)
    again = AdaptiveBlockPlanner.from_gate_pools(gp, "t", params, seed=3, first_sample_index=10_000)
    assert drive(again, alternating_feed(), n_blocks=12) == blocks


def test_informing_samples_cover_the_adaptive_path_and_pair_block_refuses_reuse():
    rng = np.random.default_rng(4)
    gp = warm_pools(rng, np.full(40, 0.5))
    params = GateParams(block_size=8, max_pairs=80)
    planner = AdaptiveBlockPlanner.from_gate_pools(gp, "t", params, seed=5, first_sample_index=7)
    blocks = drive(planner, lambda item: True, n_blocks=3)
    fed = [True] * sum(len(b) for b in blocks)
    block = planner.next_block(fed)
    informing = planner.informing_samples()
    # every earlier gate baseline sample now informs the order; pre-gate samples still do
    for item in (i for b in blocks for i in b):
        assert item.sample_index in informing[item.qid]
    assert all(7 in informing[q] for q in QIDS)
    pair_block(block, [True] * len(block), [False] * len(block), informing_samples=informing)  # fresh: fine
    reused = [blocks[0][0]] + block[1:]
    with pytest.raises(LeakError):
        pair_block(reused, [True] * len(reused), [False] * len(reused), informing_samples=informing)


def test_baseline_feed_is_checked():
    planner = AdaptiveBlockPlanner(QIDS, GateParams(block_size=5, max_pairs=20), seed=0, first_sample_index=0)
    block = planner.next_block([])
    with pytest.raises(ValueError, match="5 handed-out items"):
        planner.next_block([True])
    planner.next_block([True, False, None, True, True])
    with pytest.raises(ValueError, match="changed"):
        planner.next_block([False, False, None, True, True] + [True] * 5)
    with pytest.raises(ValueError, match="bool or None"):
        planner.next_block([True, False, None, True, True] + [1] * 5)
    assert len(block) == 5


def test_zero_information_questions_leave_the_ladder_but_anchors_still_reach_them():
    params = GateParams(block_size=10, max_pairs=2000, anchor_fraction=0.2, ladder_drop_min_obs=8, p_low=0.05, p_high=0.95)
    planner = AdaptiveBlockPlanner(QIDS[:12], params, seed=2, first_sample_index=0)
    blocks = drive(planner, lambda item: int(item.qid[1:]) < 6 and item.sample_index % 2 == 0 or int(item.qid[1:]) >= 6, n_blocks=60)
    ranking = planner.ranking()
    assert set(ranking) == {f"q{i}" for i in range(6)}  # always-right questions dropped after enough observations
    late_anchors = {item.qid for block in blocks[-20:] for item in block if item.anchor}
    assert late_anchors & {f"q{i}" for i in range(6, 12)}


def test_parameter_errors_name_the_key():
    with pytest.raises(ValueError, match="adaptive_top_fraction"):
        AdaptiveBlockPlanner(QIDS, GateParams(adaptive_top_fraction=0.0), seed=0, first_sample_index=0)
    with pytest.raises(ValueError, match="not in the pool"):
        AdaptiveBlockPlanner(QIDS, GateParams(), seed=0, first_sample_index=0, prior={"zz": (0.5, 1)})


def test_null_false_accepts_of_the_adaptive_gate_stay_below_alpha():
    # strong null (candidate = baseline per question), heterogeneous difficulties, 300 gates of up to 400 pairs,
    # direction reject OFF (hardest case). alpha = e^-3 = 0.0498; tolerance + 3 SE (SE ~ 0.0126).
    rng = np.random.default_rng(12)
    p = 1 / (1 + np.exp(-rng.normal(0, 2.0, 60)))
    pop = bench.Population(p, p)
    params = GateParams(max_pairs=400)
    accepted = 0
    for run in range(300):
        records = bench.population_path(rng, pop, params, order="adaptive", pre_gate_obs=2, run_seed=run)
        accepted += bench.decide_on_path(records, params, 400, direction=False)[0] == 1
    assert accepted / 300 <= math.exp(-3.0) + 3 * math.sqrt(0.05 * 0.95 / 300)
