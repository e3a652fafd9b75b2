"""The per-skill gate's accept / probation / reject bookkeeping on a real workspace (rollouts injected)."""

from __future__ import annotations

import hashlib

import pytest

from harness import workspace as wsp
from harness.kernel.ladder import GatePools
from harness.kernel.types import Edit, EditApplication, EvolutionRecord, GateParams, RejectedEdit
from harness.loop.checkpoint import TrainState
from harness.loop.gating import Candidate, GateContext, gate_batch_skills
from harness.questions import Question, write_questions
from harness.tree import HarnessTree

TYPES = ("alpha", "beta", "gamma")
QS = {f"{t}-{i}": Question(f"{t}-{i}", t, f"{t} question {i}", "A", ("a", "b")) for t in TYPES for i in range(20)}


def _u(*parts) -> float:
    return int(hashlib.sha1("|".join(map(str, parts)).encode()).hexdigest()[:8], 16) / 16**8


def rollout_by_marker(calls):
    """p(correct) = 0.9 when the question's skill says GOOD, 0.1 when BAD, else 0.5."""

    async def rollout(tree, requests, run_id):
        calls.append(run_id)
        out = []
        for q, idx in requests:
            own = f"skills/{q.task_type}/SKILL.md"
            text = tree.get(own, tree["skills/default-strategy/SKILL.md"])
            p = 0.9 if "GOOD" in text else 0.1 if "BAD" in text else 0.5
            out.append(_u(q.qid, idx, text) < p)
        return out

    return rollout


@pytest.fixture()
def ws(tmp_path):
    qfile = tmp_path / "questions.parquet"
    write_questions(qfile, list(QS.values()))
    skills = HarnessTree({"alpha/SKILL.md": "alpha skill\n", "beta/SKILL.md": "beta skill\n", "default-strategy/SKILL.md": "default\n"})
    prompts = HarnessTree({"system_prompt.md": "sys\n"})
    wsp.init_workspace(tmp_path / "ws", skills, prompts, str(qfile))
    return tmp_path / "ws"


def _record(tt_file, old, new, applied=True):
    e = Edit("add", new.strip())
    return EvolutionRecord(tt_file.split("/")[0], tt_file, old, new if applied else old, edits=[e, Edit("add", "never applied")],
                           apply_report=[EditApplication(e, "applied" if applied else "duplicate"), EditApplication(Edit("add", "never applied"), "not_found")])


def _ctx(ws, calls, **params):
    val = {t: [f"{t}-{i}" for i in range(20)] for t in TYPES}
    return GateContext(run_name="r", epoch=1, step=1, params=GateParams.build(**{"block_size": 10, "max_pairs": 200, **params}), questions=QS,
                       validation_by_type=val, rollout=rollout_by_marker(calls), workspace_dir=ws, runlog_path=ws.parent / "log.sqlite",
                       cooldown_steps=1), GatePools.build(val)


def test_accept_reject_bookkeeping(ws):
    calls: list = []
    gc, pools = _ctx(ws, calls)
    state = TrainState(correctness={"alpha-0": False, "alpha-1": True})
    state.rejected_buffer = {"alpha": [RejectedEdit("alpha", "alpha/SKILL.md", "old idea", 0, 0)]}
    cands = [Candidate("alpha", ["alpha"], "alpha/SKILL.md", _record("alpha/SKILL.md", "alpha skill\n", "alpha skill\n- GOOD\n")),
             Candidate("beta", ["beta"], "beta/SKILL.md", _record("beta/SKILL.md", "beta skill\n", "beta skill\n- BAD\n"))]
    rows, cooled = gate_batch_skills(gc, state, cands, pools)
    by = {r["task_type"]: r for r in rows}
    assert by["alpha"]["action"] == "accept" and by["beta"]["action"] == "reject"
    m = wsp.read_manifest(ws)
    assert m.skills_version == by["alpha"]["skills_version_after"] != "v0"
    assert "GOOD" in wsp.harness_view(ws)["skills/alpha/SKILL.md"]
    assert "BAD" not in wsp.harness_view(ws)["skills/beta/SKILL.md"]
    # accept: snapshot taken before merging, blacklist cleared, probation opened, cooldown
    p = state.probations["alpha"]
    assert p.kind == "accepted" and p.anchor_skills_version == "v0" and p.accepted_version == m.skills_version
    assert p.correctness_snapshot["alpha-0"] is False and p.correctness_snapshot["alpha-1"] is True
    assert "alpha" not in state.rejected_buffer and cooled == ["alpha"] and state.gate_cooldown == {"alpha": 1}
    merged = set(state.correctness) - {"alpha-0", "alpha-1"}
    assert merged and all(q.startswith("alpha") for q in merged)  # candidate outcomes merged; the rejected beta's are not
    # reject: only the applied edit is blacklisted
    [rej] = state.rejected_buffer["beta"]
    assert "BAD" in rej.summary and "never applied" not in rej.summary
    assert all("_gate_" in c for c in calls)
    assert state.changed_task_types_this_epoch == {"alpha"}


def test_default_strategy_never_on_probation(ws):
    calls: list = []
    gc, pools = _ctx(ws, calls, max_pairs=20, lambda_dir=-50.0, undecided="probation")  # one block, no direction reject: undecided
    state = TrainState()
    cand = Candidate("gamma", ["gamma"], "default-strategy/SKILL.md", _record("default-strategy/SKILL.md", "default\n", "default\n- neutral\n"))
    rows, _ = gate_batch_skills(gc, state, [cand], pools)
    assert rows[0]["action"] == "reject" and "default strategy" in rows[0]["reason"]
    assert not state.probations
    good = Candidate("gamma", ["gamma"], "default-strategy/SKILL.md", _record("default-strategy/SKILL.md", "default\n", "default\n- GOOD\n"))
    gc2, _ = _ctx(ws, calls, max_pairs=200)
    gc2.step = 2
    rows, _ = gate_batch_skills(gc2, state, [good], pools)
    assert rows[0]["action"] == "accept" and not state.probations  # accepted, no probation for the default strategy


def test_undecided_goes_to_probation_and_stale_candidates_skip(ws):
    calls: list = []
    gc, pools = _ctx(ws, calls, max_pairs=20, lambda_dir=-50.0, undecided="probation")  # one block, no direction reject: undecided
    state = TrainState()
    first = Candidate("alpha", ["alpha"], "alpha/SKILL.md", _record("alpha/SKILL.md", "alpha skill\n", "alpha skill\n- neutral\n"))
    stale = Candidate("alpha2", ["alpha"], "alpha/SKILL.md", _record("alpha/SKILL.md", "alpha skill\n", "alpha skill\n- other\n"))
    rows, _ = gate_batch_skills(gc, state, [first, stale], pools)
    assert rows[0]["action"] == "probation" and state.probations["alpha"].kind == "probation"
    assert rows[1]["action"] == "skipped_stale"


def test_accept_all_rule_spends_no_rollout(ws):
    calls: list = []
    gc, pools = _ctx(ws, calls, rule="accept_all")
    state = TrainState()
    cand = Candidate("beta", ["beta"], "beta/SKILL.md", _record("beta/SKILL.md", "beta skill\n", "beta skill\n- BAD\n"))
    rows, _ = gate_batch_skills(gc, state, [cand], pools)
    assert rows[0]["action"] == "accept" and rows[0]["rollouts"] == 0 and not calls


@pytest.mark.parametrize("lam, action", [(0.0, "accept"), (0.5, "accept"), (1.0, "reject")])
def test_minibatch_rule_asks_only_the_candidate_on_the_minibatch_and_lambda_decides(ws, lam, action):
    """gate=minibatch: GEPA's questions and known baseline (only the candidate arm is asked). On these three questions
    the seeded candidate wins one discordant pair and loses none: accepted while 1 >= sqrt(2 x lambda x 1), i.e. up to
    lambda 0.5, rejected at 1."""
    calls: list = []
    gc, pools = _ctx(ws, calls, rule="minibatch", lambda_accept=lam)
    gc.batch_outcomes = {"alpha-0": False, "alpha-1": False, "alpha-2": True, "beta-0": True}
    state = TrainState()
    cand = Candidate("alpha", ["alpha"], "alpha/SKILL.md", _record("alpha/SKILL.md", "alpha skill\n", "alpha skill\n- GOOD\n"))
    rows, _ = gate_batch_skills(gc, state, [cand], pools)
    assert rows[0]["n_pairs"] == 3 and rows[0]["rollouts"] == 3 and calls == ["r_e1_s1_gate_alpha_cand"]
    assert rows[0]["action"] == action and rows[0]["reason"].startswith("minibatch: wins 1 - losses 0 = 1 ")


def test_gepa_rule_uses_the_minibatch(ws):
    calls: list = []
    gc, pools = _ctx(ws, calls, rule="gepa")
    gc.batch_outcomes = {"alpha-0": False, "alpha-1": False, "alpha-2": True, "beta-0": True}
    state = TrainState()
    cand = Candidate("alpha", ["alpha"], "alpha/SKILL.md", _record("alpha/SKILL.md", "alpha skill\n", "alpha skill\n- GOOD\n"))
    rows, _ = gate_batch_skills(gc, state, [cand], pools)
    assert rows[0]["n_pairs"] == 3 and rows[0]["rollouts"] == 3  # candidate only: the baseline is the step rollout
    assert calls == ["r_e1_s1_gate_alpha_cand"]
