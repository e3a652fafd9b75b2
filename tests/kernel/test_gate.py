import functools
import math

import numpy as np
import pytest

from benchmarks import gate as bench
from benchmarks._engine import decide_by, gate_now
from harness.kernel.gate import LeakError, gate_decision, infra_guard, pair_block
from harness.kernel.plans import FixedBlocks
from harness.kernel.registry import params_of
from harness.kernel.rules import SequentialParams
from harness.kernel.stats import log_e_accept, log_e_beta_mixture, log_lr_direction
from harness.kernel.types import BlockItem, GateParams, PairResult

# these tests are about the sign e-process rule (`sequential`) on a plan fixed in advance; the betting rule has its own
SIGN = functools.partial(GateParams.build, rule="sequential", plan="static")


def pairs_from(signs, start=0):
    """+1 win, -1 loss, 0 tie, None infra."""
    out = []
    for i, s in enumerate(signs):
        if s is None:
            out.append(PairResult(f"q{start + i}", None, True, sample_index=start + i))
        elif s == 1:
            out.append(PairResult(f"q{start + i}", False, True, sample_index=start + i))
        elif s == -1:
            out.append(PairResult(f"q{start + i}", True, False, sample_index=start + i))
        else:
            out.append(PairResult(f"q{start + i}", True, True, sample_index=start + i))
    return out


def test_pair_block_pairs_by_position_and_checks_lengths():
    block = [BlockItem("a", 10), BlockItem("b", 11, anchor=True)]
    pairs = pair_block(block, [False, True], [True, None])
    assert pairs[0].sign == 1 and pairs[0].sample_index == 10
    assert pairs[1].infra and pairs[1].anchor
    with pytest.raises(ValueError, match="2 items"):
        pair_block(block, [True], [True, True])
    with pytest.raises(ValueError, match="bool or None"):
        pair_block(block, [1, True], [True, True])


def test_pair_block_refuses_a_ladder_informing_sample():
    block = [BlockItem("a", 2000)]
    with pytest.raises(LeakError, match="fresh sample"):
        pair_block(block, [False], [True], informing_samples={"a": frozenset({2000})})
    assert pair_block(block, [False], [True], informing_samples={"a": frozenset({4000})})[0].sign == 1


def test_block_barrier():
    params = SIGN(block_size=20)
    with pytest.raises(ValueError, match="block barrier"):
        gate_decision(pairs_from([1] * 19), params, final=False)
    with pytest.raises(ValueError, match="block barrier"):
        gate_decision([], params, final=False)
    assert gate_decision(pairs_from([1] * 19), params, final=True).n_pairs == 19


def test_accept_reject_and_undecided_per_config():
    params = SIGN(block_size=20, max_pairs=400, undecided="probation")
    accept = gate_decision(pairs_from([1] * 20), params, final=False)
    # the recorded log E of an accept is the value at the first crossing of lambda (item 8), not the block end's
    first = next(k for k in range(1, 21) if log_e_accept(k, 0, params_of(SequentialParams, params)) >= params.lambda_accept)
    assert accept.action == "accept" and accept.log_e == pytest.approx(log_e_accept(first, 0, params_of(SequentialParams, params)))
    assert accept.log_e < log_e_accept(20, 0, params_of(SequentialParams, params))
    uniform = gate_decision(pairs_from([1] * 20), SIGN(accept_prior="uniform", accept_within_block=False), final=False)
    assert uniform.action == "accept" and uniform.log_e == pytest.approx(log_e_beta_mixture(20, 0))
    reject = gate_decision(pairs_from([-1] * 6 + [0] * 14), params, final=False)
    assert reject.action == "reject" and reject.log_lr_dir == pytest.approx(log_lr_direction(0, 6, 0.625))
    middle = pairs_from([1, -1] * 10)
    assert gate_decision(middle, params, final=False).action == "continue"
    assert gate_decision(middle, params, final=True).action == "probation"
    assert gate_decision(middle, SIGN(undecided="reject"), final=True).action == "reject"
    # reaching max_pairs makes the look final
    assert gate_decision(middle, SIGN(block_size=20, max_pairs=20, undecided="probation"), final=False).action == "probation"


def test_infra_guard_judged_only_from_min_denominator():
    params = SIGN(block_size=5, infra_min_denominator=10, infra_max_ratio=0.2)
    assert infra_guard(pairs_from([None] * 5), params) is None  # 5 < 10: not judged yet
    assert gate_decision(pairs_from([None] * 5), params, final=False).action == "continue"
    # counted across blocks: 3 infra in block 1 + 0 in block 2 -> 3/10 > 0.2
    across = pairs_from([None, None, None, 0, 0]) + pairs_from([0] * 5, start=5)
    verdict = gate_decision(across, params, final=False)
    assert verdict.action == "infra" and verdict.infra_failures == 3 and "3/10" in verdict.reason
    assert gate_decision(pairs_from([None, None] + [0] * 8), params, final=False).action == "continue"  # 0.2 is not above


def test_infra_pairs_carry_no_evidence():
    verdict = gate_decision(pairs_from([1, None, 0, -1]), SIGN(block_size=4, infra_min_denominator=100), final=False)
    assert (verdict.wins, verdict.losses, verdict.ties, verdict.infra_failures) == (1, 1, 1, 1)


def _simulate_gate(rng, runs, d, theta, params, n_blocks):
    """Run gate_decision block by block on simulated pairs; returns (accepted, pairs used)."""
    accepted, used = [], []
    for _ in range(runs):
        pairs = []
        for b in range(n_blocks):
            u = rng.random(params.block_size)
            disc = rng.random(params.block_size) < d
            signs = np.where(disc, np.where(u < theta, 1, -1), 0)
            pairs += pairs_from(signs.tolist(), start=len(pairs))
            verdict = gate_decision(pairs, params, final=b == n_blocks - 1)
            if verdict.action != "continue":
                break
        accepted.append(verdict.action == "accept")
        used.append(verdict.n_pairs)
    return np.array(accepted), np.array(used)


def test_false_accept_rate_under_optional_stopping_is_at_most_alpha():
    # 1,500 null gates with a look after every block of 20, up to 1,000 pairs, direction reject OFF
    # (the hardest case for the accept side). alpha = e^-3 = 0.0498; tolerance: + 3 SE (SE ~ 0.0056).
    rng = np.random.default_rng(7)
    params = SIGN(lambda_dir=-1e9, max_pairs=10**6, undecided="reject")
    sequential_first_decision, simulate_counts = bench.sequential_first_decision, bench.simulate_counts

    wins, losses = simulate_counts(rng, 1500, 0.2, 0.5, 20, 50)
    action, _ = sequential_first_decision(wins, losses, params, direction=False)
    fa = float(np.mean(action == 1))
    assert fa <= math.exp(-3.0) + 3 * math.sqrt(0.05 * 0.95 / 1500)


def test_vectorised_benchmark_path_agrees_with_the_gate_loop_decision_for_decision():
    sequential_first_decision = bench.sequential_first_decision

    rng = np.random.default_rng(3)
    for params in (SIGN(max_pairs=400, undecided="probation"),
                   SIGN(max_pairs=400, accept_within_block=False, accept_prior="uniform", undecided="probation")):
        for _ in range(30):
            signs = np.where(rng.random(400) < 0.3, np.where(rng.random(400) < 0.62, 1, -1), 0)
            pairs = pairs_from(signs.tolist())
            blocks = [[BlockItem(p.qid, p.sample_index) for p in pairs[i:i + 20]] for i in range(0, 400, 20)]
            # the product's decision: the kernel's gate loop with gate_decision, served these pairs block by block
            verdict = gate_now(FixedBlocks(blocks), lambda block, b: pairs[20 * b:20 * b + 20], decide_by(params)).decision
            wins = np.cumsum(signs == 1)[None, :]
            losses = np.cumsum(signs == -1)[None, :]
            action, look = sequential_first_decision(wins, losses, params, block=20)
            expected = {1: "accept", -1: "reject", 0: "probation"}[int(action[0])]
            assert verdict.action == expected and verdict.n_pairs == (look[0] + 1) * 20


def test_direction_rejection_ends_null_gates_early_and_power_holds():
    # 300 runs each; d = 0.2. Null: mean pairs well under 400 (benchmark figure ~270 +- a few).
    # +10 points: accepted in >= 95% (benchmark power ~0.996; 3 SE at n=300 is ~0.01).
    rng = np.random.default_rng(11)
    params = SIGN(max_pairs=4000)
    accepted, used = _simulate_gate(rng, 300, 0.2, 0.5, params, 200)
    assert used.mean() < 400 and accepted.mean() < 0.05 + 3 * math.sqrt(0.05 * 0.95 / 300)
    accepted, used = _simulate_gate(rng, 300, 0.2, 0.75, params, 200)
    assert accepted.mean() >= 0.95


def test_within_block_peak_accepts_a_crossing_inside_the_block_only_when_enabled():
    # 11 straight wins push the grid e-process over lambda = 3 mid-block; 9 losses pull it back under by the block end
    signs = [1] * 11 + [-1] * 9
    params = SIGN(lambda_dir=-1e9)
    assert log_e_accept(11, 0, params_of(SequentialParams, params)) >= 3.0 > log_e_accept(11, 9, params_of(SequentialParams, params))
    assert gate_decision(pairs_from(signs), params, final=False).action == "accept"
    crossed = gate_decision(pairs_from(signs), params, final=False)
    first = next(k for k in range(1, 12) if log_e_accept(k, 0, params_of(SequentialParams, params)) >= params.lambda_accept)
    assert crossed.log_e == pytest.approx(log_e_accept(first, 0, params_of(SequentialParams, params))) and "at the block end" in crossed.reason
    off = params.with_values(accept_within_block=False)
    assert gate_decision(pairs_from(signs), off, final=False).action == "continue"
