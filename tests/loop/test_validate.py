"""validate_skill_local: block barrier, temp dir, anti-leak, fresh baselines, evidence rows (real kernel gate)."""

from __future__ import annotations

import asyncio
import hashlib

import pytest

from harness.identity import GATE_SAMPLE_BASE, gate_sample_start
from harness.kernel.gate import LeakError
from harness.kernel.ladder import plan_blocks
from harness.kernel.plans import FixedBlocks
from harness.kernel.types import BlockItem, GateParams
from harness.loop.validate import GateRequest, validate_skill_local
from harness.questions import Question
from harness.tree import HarnessTree

SKILL = "skills/t/SKILL.md"
QS = {f"q{i}": Question(f"q{i}", "t", f"question {i}", "A", ("a", "b")) for i in range(20)}


def _u(*parts) -> float:
    return int(hashlib.sha1("|".join(map(str, parts)).encode()).hexdigest()[:8], 16) / 16**8


def make_rollout(p_base: float, p_cand: float, calls: list, infra_every: int = 0):
    """Outcome = deterministic in (tree text, qid, sample index); the candidate is the tree containing 'better'."""

    async def rollout(tree, requests, run_id):
        calls.append((run_id, [(q.qid, i) for q, i in requests]))
        out = []
        for n, (q, idx) in enumerate(requests):
            if infra_every and n % infra_every == 0:
                out.append(None)
                continue
            p = p_cand if "better" in tree[SKILL] or "worse" in tree[SKILL] else p_base
            out.append(_u(q.qid, idx) < p)
        return out

    return rollout


def run(coro):
    return asyncio.run(coro)


PARAMS = GateParams.build(block_size=10, max_pairs=400, lambda_accept=3.0, lambda_dir=-1.56, anchor_fraction=0.2)


def _gate(tmp_path, cand_text, plan, calls, p_base=0.5, p_cand=0.5, prefix="r_e1_s1_gate_t", infra_every=0, **kw):
    base = HarnessTree({SKILL: "base skill", "system_prompt.md": "sys"})
    cand = base.with_files({SKILL: cand_text})
    params = PARAMS
    return run(validate_skill_local(GateRequest(
        task_type="t", skill_file=SKILL, baseline_tree=base, candidate_tree=cand, plan=FixedBlocks(plan), questions=QS,
        rollout=make_rollout(p_base, p_cand, calls, infra_every), params=params, gate_run_prefix=prefix,
        workspace_dir=tmp_path, epoch=1, step=1, **kw)))


def _plan(prefix="r_e1_s1_gate_t"):
    qids = [f"q{i}" for i in range(20)]
    return plan_blocks(qids, qids, PARAMS, seed=1, first_sample_index=gate_sample_start(prefix))


def test_prefix_without_gate_mark_is_refused(tmp_path):
    with pytest.raises(ValueError, match="_gate_"):
        _gate(tmp_path, "better", _plan(), [], prefix="r_e1_s1")


def test_good_candidate_accepted_blocks_in_order_and_tmp_removed(tmp_path):
    calls: list = []
    out = _gate(tmp_path, "better skill", _plan(), calls, p_base=0.3, p_cand=0.9)
    assert out.action == "accept"
    assert not (tmp_path / ".cand_tmp").exists() or not any((tmp_path / ".cand_tmp").iterdir())
    # strict block barrier: per block, baseline misses then the whole candidate block
    kinds = [c[0].rsplit("_", 1)[1] for c in calls]
    assert kinds == ["base", "cand"] * out.blocks
    for (_, base_req), (_, cand_req) in zip(calls[0::2], calls[1::2]):
        assert len(cand_req) == 10 and {r for r in base_req} <= set(cand_req)
    # fresh, unique sample indices far above step/slow indices
    idx = [i for _, req in calls[1::2] for _, i in req]
    assert len(set(idx)) == len(idx) and min(idx) >= GATE_SAMPLE_BASE
    # evidence: stop reason only on the terminal block
    assert {r["block"] for r in out.evidence if r["stop_reason"]} == {out.blocks - 1}
    assert all(r["stop_reason"] is None for r in out.evidence if r["block"] < out.blocks - 1)
    assert set(out.candidate_correctness) <= {p.qid for p in out.pairs}


def test_harmful_candidate_rejected(tmp_path):
    out = _gate(tmp_path, "worse skill", _plan(), [], p_base=0.8, p_cand=0.2)
    assert out.action == "reject"


def test_tmp_dir_removed_when_rollout_fails(tmp_path):
    async def boom(tree, requests, run_id):
        assert any((tmp_path / ".cand_tmp").iterdir())
        raise RuntimeError("provider down")

    base = HarnessTree({SKILL: "base"})
    with pytest.raises(RuntimeError, match="provider down"):
        run(validate_skill_local(GateRequest(
            task_type="t", skill_file=SKILL, baseline_tree=base, candidate_tree=base.with_files({SKILL: "x"}),
            plan=FixedBlocks(_plan()), questions=QS, rollout=boom, params=GateParams(block_size=10),
            gate_run_prefix="a_gate_t", workspace_dir=tmp_path)))
    assert not (tmp_path / ".cand_tmp").exists()


def test_every_gate_runs_its_baseline_fresh(tmp_path):
    """Every gate runs its whole baseline (issue 29 removed gate.baseline_reuse and the baseline cache)."""

    def plan(start):  # every question asked twice, fresh indices
        return [[BlockItem(f"q{i}", start + k * 10 + i) for i in range(10)] for k in range(2)]

    for n, (start, prefix) in enumerate(((GATE_SAMPLE_BASE, "r_e1_s1_gate_t"), (GATE_SAMPLE_BASE + 100, "r_e1_s2_gate_t"))):
        calls: list = []
        out = _gate(tmp_path, f"neutral {n}", plan(start), calls, prefix=prefix)
        assert sum(len(r) for c, r in calls if c.endswith("_base")) == 20 and out.known_baseline_hits == 0


def test_infra_failures_end_gate_without_decision(tmp_path):
    out = _gate(tmp_path, "better", _plan(), [], p_base=0.3, p_cand=0.9, infra_every=2)
    assert out.action == "infra" and out.blocks == 1


def test_pair_never_reuses_informing_sample(tmp_path):
    start = gate_sample_start("r_e1_s1_gate_t")
    plan = [[BlockItem(f"q{i}", start + i) for i in range(10)]]
    with pytest.raises(LeakError):
        _gate(tmp_path, "better", plan, [], informing_samples={"q0": {start}})
    with pytest.raises(ValueError, match="reuses a sample index"):
        _gate(tmp_path, "better", [[BlockItem("q1", 5), BlockItem("q2", 5)]], [])


def make_soft_rollout(calls: list):
    """A soft metric's values: the baseline's and the candidate's ('better' in the tree) scores, deterministic in
    (tree, qid, sample index), floats in [0, 1]; about one request in ten an infrastructure failure (by qid and index)."""

    async def rollout(tree, requests, run_id):
        calls.append(run_id)
        shift = 0.3 if "better" in tree[SKILL] else 0.0
        return [None if _u("infra", tree[SKILL], q.qid, idx) < 0.1 else min(1.0, 0.4 * _u("soft", q.qid, idx) + shift)
                for q, idx in requests]

    return rollout


@pytest.mark.parametrize("rule", ["betting", "sequential"])
def test_a_soft_gate_rounds_each_value_with_its_pairs_uniform_and_the_betting_rule_also_gets_the_value(tmp_path, rule):
    """gate.metric soft / mixed: pair outcomes are the values rounded by (qid, sample index), the same uniform for both
    arms; only a weighted rule (betting) carries the values on its pairs."""
    from harness.bench.soft import round_gate_value

    calls: list = []
    base = HarnessTree({SKILL: "base skill", "system_prompt.md": "sys"})
    rollout = make_soft_rollout(calls)
    params = GateParams.build(rule=rule, block_size=10, max_pairs=60, lambda_accept=3.0, lambda_dir=-1.56, anchor_fraction=0.2,
                        undecided="reject", plan="static" if rule == "sequential" else "importance")
    plan = [[BlockItem(f"q{i}", GATE_SAMPLE_BASE + k * 10 + i) for i in range(10)] for k in range(6)]
    out = run(validate_skill_local(GateRequest(
        task_type="t", skill_file=SKILL, baseline_tree=base, candidate_tree=base.with_files({SKILL: "better skill"}),
        plan=FixedBlocks(plan), questions=QS, rollout=rollout, params=params, gate_run_prefix="r_e1_s1_gate_t",
        workspace_dir=tmp_path)))
    base_values = run(rollout(base, [(QS[p.qid], p.sample_index) for p in out.pairs], "replay"))
    cand_values = run(rollout(base.with_files({SKILL: "better skill"}), [(QS[p.qid], p.sample_index) for p in out.pairs], "replay"))
    assert out.pairs and any(p.infra for p in out.pairs)
    for pair, vb, vc in zip(out.pairs, base_values, cand_values):
        for outcome, value, carried in ((pair.baseline, vb, pair.baseline_value), (pair.candidate, vc, pair.candidate_value)):
            assert outcome == (None if value is None else round_gate_value(value, qid=pair.qid, sample_index=pair.sample_index))
            assert carried == (value if rule == "betting" else None)
    assert out.candidate_correctness == {p.qid: p.candidate for p in out.pairs if p.candidate is not None}


def test_a_hard_gate_keeps_each_rollouts_soft_score_on_its_pairs_for_futility(tmp_path):
    """gate.metric=hard with soft scores (GateSample): outcomes are the hard values, the pairs carry both arms' soft
    scores (what `gate.futility=soft_estimate` reads), the e-process bets on the outcomes only."""
    from harness.kernel.betting import betting_look
    from harness.loop.validate import GateSample

    async def rollout(tree, requests, run_id):
        better = "better" in tree[SKILL]
        out = []
        for q, idx in requests:
            soft = min(1.0, 0.5 * _u("soft", q.qid, idx) + (0.3 if better else 0.1))
            out.append(None if _u("infra", tree[SKILL], q.qid, idx) < 0.1 else GateSample(_u("hard", q.qid, idx) < soft, soft))
        return out

    base = HarnessTree({SKILL: "base skill", "system_prompt.md": "sys"})
    plan = [[BlockItem(f"q{i}", GATE_SAMPLE_BASE + k * 10 + i) for i in range(10)] for k in range(4)]
    params = GateParams(block_size=10, max_pairs=40, undecided="reject")
    out = run(validate_skill_local(GateRequest(
        task_type="t", skill_file=SKILL, baseline_tree=base, candidate_tree=base.with_files({SKILL: "better skill"}),
        plan=FixedBlocks(plan), questions=QS, rollout=rollout, params=params, gate_run_prefix="r_e1_s1_gate_t",
        workspace_dir=tmp_path)))
    replay_b = run(rollout(base, [(QS[p.qid], p.sample_index) for p in out.pairs], "replay"))
    replay_c = run(rollout(base.with_files({SKILL: "better skill"}), [(QS[p.qid], p.sample_index) for p in out.pairs], "replay"))
    assert any(p.infra for p in out.pairs) and any(not p.infra for p in out.pairs)
    for pair, b, c in zip(out.pairs, replay_b, replay_c):
        assert pair.baseline == (None if b is None else b.value) and pair.candidate == (None if c is None else c.value)
        assert pair.baseline_soft == (None if b is None else b.soft) and pair.candidate_soft == (None if c is None else c.soft)
        assert pair.baseline_value is None and pair.candidate_value is None  # hard: the betting statistic is the outcome
    look = betting_look(out.pairs, params)
    assert len(look.z_soft) == len(look.z) and any(a != b for a, b in zip(look.z, look.z_soft))
