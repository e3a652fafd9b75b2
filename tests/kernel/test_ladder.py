
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.kernel.gate import LeakError, pair_block
from harness.kernel.ladder import GatePools, LeakingRunError, cold_order, plan_blocks
from harness.kernel.types import GateParams


def pools_with(outcomes, qids=("a", "b", "c", "d", "e", "f")):
    gp = GatePools.build({"t": list(qids)})
    gp.update_from_run("exp_e1_slowR", [(q, 2000, y) for q, y in outcomes.items()], gamma=0.3)
    return gp


def test_cold_start_beta_smoothing_and_ema():
    gp = pools_with({"a": False, "b": True})
    e = {x.qid: x for x in gp.entries("t")}
    assert e["a"].p_hat == pytest.approx(1 / 3) and e["b"].p_hat == pytest.approx(2 / 3) and e["c"].p_hat is None
    gp.update_from_run("exp_e2_slowR", [("a", 4000, True)], gamma=0.3)
    assert e["a"].p_hat == pytest.approx(0.7 * (1 / 3) + 0.3) and e["a"].n_obs == 2
    # idempotent on resume: the same sample is not absorbed twice
    assert gp.update_from_run("exp_e2_slowR", [("a", 4000, True)], gamma=0.3) == 0


def test_entries_keep_storage_order():
    gp = pools_with({"f": False, "a": True, "c": False})
    assert [x.qid for x in gp.entries("t")] == ["a", "b", "c", "d", "e", "f"]


def test_cold_ladder_two_wrong_one_right_with_probes():
    gp = pools_with({"w1": False, "w2": False, "w3": False, "w4": False, "r1": True, "r2": True},
                    qids=("w1", "r1", "w2", "p1", "w3", "r2", "w4", "p2", "p3"))
    ladder = gp.ladder("t", GateParams.build(probe_every=3), warm=False)
    assert ladder == ["w1", "w2", "r1", "p1", "w3", "w4", "r2", "p2", "p3"]


def test_warm_ladder_orders_by_information_and_drops_outside_bounds():
    gp = GatePools.build({"t": ["easy", "mid", "hard", "lean", "new"]})
    for i in range(12):  # 'easy' always right, 'hard' always wrong -> beyond the bounds
        gp.update_from_run(f"r_e{i}_s1", [("easy", i, True), ("hard", i, False), ("mid", i, i % 2 == 0), ("lean", i, i % 4 != 0)], gamma=0.3)
    params = GateParams.build(p_low=0.05, p_high=0.95)
    ladder = gp.ladder("t", params, warm=True)
    assert ladder[0] == "new"  # never observed = p_hat 1/2 = maximum information
    assert ladder.index("mid") < ladder.index("lean")
    assert "easy" not in ladder and "hard" not in ladder
    assert "mid" not in gp.ladder("t", params, warm=True, exclude={"mid"})


def test_no_leak_rule_1_gate_runs_never_feed_p_hat():
    gp = pools_with({"a": False})
    before = gp.to_json()
    with pytest.raises(LeakingRunError, match="_gate_"):
        gp.update_from_run("exp_e1_s2_gate_t", [("a", 10_000_000, True)], gamma=0.3)
    assert gp.to_json() == before


def test_no_leak_rule_2_plan_never_reuses_an_informing_sample_and_pairing_refuses_it():
    qids = [f"q{i}" for i in range(5)]
    gp = GatePools.build({"t": qids})
    # informing samples sit exactly where the gate's counter starts
    gp.update_from_run("exp_e1_slowR", [(q, 100 + i, i % 2 == 0) for i, q in enumerate(qids)], gamma=0.3)
    informing = gp.informing_samples("t")
    params = GateParams(block_size=4, max_pairs=40)
    blocks = plan_blocks(gp.ladder("t", params, warm=True), qids, params, seed=1, first_sample_index=100, informing_samples=informing)
    items = [item for block in blocks for item in block]
    assert all(item.sample_index not in informing[item.qid] for item in items)
    assert len({item.sample_index for item in items}) == len(items)  # every slot a fresh sample
    first = blocks[0]
    pair_block(first, [False] * len(first), [True] * len(first), informing_samples=informing)
    leaked = [type(first[0])(first[0].qid, next(iter(informing[first[0].qid])))]
    with pytest.raises(LeakError):
        pair_block(leaked, [False], [True], informing_samples=informing)


def test_plan_blocks_anchor_stratum_and_reasking():
    pool = [f"q{i}" for i in range(30)]
    ladder = pool[:6]  # a short ladder: most of the pool only reachable through anchors
    params = GateParams.build(block_size=20, anchor_fraction=0.25, max_pairs=410, reask_top_fraction=0.5)
    blocks = plan_blocks(ladder, pool, params, seed=3, first_sample_index=10_000_000)
    assert sum(len(b) for b in blocks) == 410 and len(blocks[-1]) == 10
    for block in blocks[:-1]:
        assert sum(item.anchor for item in block) == 5
    anchors = [item.qid for block in blocks for item in block if item.anchor]
    assert set(anchors) == set(pool)  # uniform over the WHOLE pool, including off-ladder questions
    walked = [item.qid for block in blocks for item in block if not item.anchor]
    assert walked[:6] == ladder and set(walked[6:]) == set(ladder[:3])  # re-ask passes: top half
    again = plan_blocks(ladder, pool, params, seed=3, first_sample_index=10_000_000)
    assert again == blocks


def test_plan_blocks_zero_anchor_fraction_and_empty_ladder():
    pool = ["a", "b", "c"]
    no_anchor = plan_blocks(["a"], pool, GateParams.build(block_size=4, max_pairs=8, anchor_fraction=0.0), seed=0, first_sample_index=0)
    assert not any(item.anchor for b in no_anchor for item in b)
    all_anchor = plan_blocks([], pool, GateParams(block_size=4, max_pairs=8), seed=0, first_sample_index=0)
    assert all(item.anchor for b in all_anchor for item in b)
    with pytest.raises(ValueError, match="not in the pool"):
        plan_blocks(["z"], pool, GateParams(), seed=0, first_sample_index=0)


@settings(max_examples=40, deadline=None)
@given(
    n_pool=st.integers(1, 25),
    ladder_len=st.integers(0, 25),
    block=st.integers(1, 12),
    max_pairs=st.integers(1, 90),
    frac=st.sampled_from([0.0, 0.1, 0.25, 0.5, 1.0]),
    seed=st.integers(0, 5),
)
def test_plan_blocks_properties(n_pool, ladder_len, block, max_pairs, frac, seed):
    pool = [f"q{i}" for i in range(n_pool)]
    ladder = pool[: min(ladder_len, n_pool)]
    params = GateParams.build(block_size=block, max_pairs=max_pairs, anchor_fraction=frac)
    blocks = plan_blocks(ladder, pool, params, seed=seed, first_sample_index=500)
    assert sum(len(b) for b in blocks) == max_pairs
    assert all(len(b) == block for b in blocks[:-1])
    indices = [item.sample_index for b in blocks for item in b]
    assert len(set(indices)) == len(indices) and min(indices) >= 500
    if frac > 0:
        assert all(any(item.anchor for item in b) for b in blocks)


def test_cold_order_validates_probe_every():
    with pytest.raises(ValueError, match="probe_every"):
        cold_order([], probe_every=0)
