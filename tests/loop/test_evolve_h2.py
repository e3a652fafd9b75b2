"""`evolve=h2`: Harness² proposes per skill, the gate decides (tiny sim world, real stages, real files and SQLite)."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path

import pytest
from conftest import tiny_cfg

from harness import workspace as wsp
from harness.h2.loop_bridge import PROBE_RUN_KIND, AsRole, SkillStepTask, restrict_to
from harness.h2.roles import Editor, FunctionResponder, Roles
from harness.h2.run import improve_task
from harness.identity import PROBE_INDEX_BASE, STEP_STRIDE, probe_sample_index
from harness.kernel.types import EditApplication
from harness.llm.protocol import LLMRequest, Role
from harness.loop.checkpoint import load_checkpoint
from harness.loop.evolve_h2 import (
    hunk_edits,
    probe_qids,
    record_from_delivered,
    run_tag_for,
)
from harness.loop.state import read_lineage, resolve_fragments
from harness.store import read_version_tree
from harness.tree import HarnessTree

STEP_SAMPLE_INDEX = 1001  # e1.s1


class Recording:
    """Above the response cache: every request the loop makes, with the model that answered it."""

    def __init__(self, inner):
        self.inner, self.name = inner, inner.name
        self.calls: list[tuple[Role, str, int]] = []

    def model_for(self, role):
        return self.inner.model_for(role)

    async def complete(self, request: LLMRequest):
        response = await self.inner.complete(request)
        self.calls.append((request.role, response.model, request.sample_index))
        return response


def first_step(root: Path, *overrides: str):
    """prepare .. gate@e1.s1 of train=tiny evolve=h2 (real stage functions); returns (ctx, recorder)."""
    from harness.compose import build_benchmark, build_provider
    from harness.kernel.schedule import full_schedule
    from harness.llm.cache import CachedProvider, ResponseCache
    from harness.loop.context import make_context
    from harness.loop.runner import run_stage_item, steps_in_epoch

    cfg = tiny_cfg("evolve=h2", *overrides)
    bench = build_benchmark(cfg.benchmark, root)
    cache = ResponseCache(root / ".cache" / "llm")
    rec = Recording(CachedProvider(build_provider(cfg.llm, world=bench.world), cache))
    ctx = make_context(cfg, root, llm=rec, bench=bench)
    n = steps_in_epoch(cfg)
    try:
        for item in full_schedule(int(cfg.train.epochs), n):
            run_stage_item(ctx, item)
            if item.kind == "gate":
                break
    finally:
        cache.close()
    return ctx, rec


def _step_dirs(root: Path) -> tuple[Path, Path, Path]:
    s = root / "state" / "e1" / "s1"
    return s / "rollout", s / "evolve", s / "gate"


def _rows(db: Path, sql: str) -> list[tuple]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


# ---------------------------------------------------------------- the whole step, through the gate


@pytest.fixture(scope="module")
def gated_step(tmp_path_factory):
    """Default gate (sequential); editor and probe on their own models, selector falls back to llm.model."""
    root = tmp_path_factory.mktemp("h2_step")
    ctx, rec = first_step(root, "+llm.models.editor=sim-editor-x", "+llm.models.probe=sim-probe-y",
                          "+llm.prices.sim-probe-y.input=1.0", "+llm.prices.sim-probe-y.output=2.0")
    return root, ctx, rec


def test_h2_candidates_change_only_their_skill_and_reach_the_gate(gated_step):
    root, ctx, _ = gated_step
    rollout, evolve, gate = _step_dirs(root)
    doc = json.loads((evolve / "evolve.json").read_text())
    assert doc["method"] == "h2" and doc["candidates"], doc["skipped"]
    step_tree = wsp.harness_view(root / "state" / "init" / "workspace")
    v0 = read_version_tree(root / "state" / "init" / "workspace" / "skills", "v0")
    report = {r["skill_file"]: r for r in json.loads((gate / "report.json").read_text())["skills"]}
    for cand in doc["candidates"]:
        f = cand["skill_file"]
        rec = cand["record"]
        assert rec["old_text"] == v0[f] and rec["new_text"] != rec["old_text"]
        assert rec["edits"] and all(a["status"] == "applied" for a in rec["apply_report"])
        delivered = HarnessTree.load(evolve / "h2" / cand["skill_file"].split("/")[0] / "delivered")
        d = step_tree.diff(delivered)
        assert (d.added, d.removed, d.changed) == ((), (), (f"skills/{f}",))  # the composed tree touches only this skill
        assert delivered[f"skills/{f}"] == rec["new_text"]
        row = report[f]  # every h2 candidate went through the sequential gate with its own paired rollouts
        assert row["action"] in ("accept", "reject", "probation", "infra") and row["gate_run_id"] and row["n_pairs"] > 0
        assert set(cand["case_qids"]) == set(cand["h2"]["probe_qids"])


def test_probe_rollouts_are_logged_counted_and_fresh_samples(gated_step):
    root, ctx, rec = gated_step
    rollout, evolve, gate = _step_dirs(root)
    runs = _rows(evolve / "runlog.sqlite", "SELECT run_id, kind FROM _runs")
    assert runs and all(kind == PROBE_RUN_KIND and "_gate_" not in r and r.startswith("tiny_e1_s1_h2_") for r, kind in runs)
    idx = _rows(evolve / "runlog.sqlite", "SELECT DISTINCT sample_index FROM predictions")
    assert idx and all(PROBE_INDEX_BASE <= i < 2 * PROBE_INDEX_BASE for (i,) in idx)
    gate_idx = {i for (i,) in _rows(gate / "runlog.sqlite", "SELECT DISTINCT sample_index FROM predictions")}
    assert gate_idx and not gate_idx & {i for (i,) in idx}
    # the step's rollout/USD totals see the probes: the evolve fragment is in the lineage
    lineage = read_lineage(gate)
    assert any(f.endswith("e1/s1/evolve/runlog.sqlite") for f in lineage.fragments)
    n_probe = _rows(evolve / "runlog.sqlite", "SELECT COUNT(*) FROM predictions")[0][0]
    doc = json.loads((evolve / "evolve.json").read_text())
    assert doc["h2"]["probe_rollouts"] == n_probe > 0
    rounds = [c["h2"] for c in doc["candidates"]] + [s["h2"] for s in doc["skipped"] if "h2" in s]
    executions = sum(r["ledger"]["rollouts"] - 1 for r in rounds)  # minus the shared base (the step rollout)
    assert doc["h2"]["probe_executions"] == executions
    assert n_probe == sum((r["ledger"]["rollouts"] - 1) * len(r["probe_qids"]) for r in rounds)
    # one fresh rollout sample index per execution (the agent loop sends index * STEP_STRIDE + turn)
    assert len({i // STEP_STRIDE for role, _, i in rec.calls if role == Role.PROBE}) == executions
    usd = _rows(evolve / "runlog.sqlite", "SELECT SUM(cost_usd) FROM predictions")[0][0]
    assert usd > 0 and doc["h2"]["probe_usd"] == pytest.approx(usd)
    assert doc["h2"]["usd"] == pytest.approx(sum(r["ledger"]["total_usd"] for r in rounds))
    frags = resolve_fragments(root, lineage)
    counted = sum(_rows(f, "SELECT COUNT(*) FROM predictions WHERE run_id LIKE '%\\_h2\\_%' ESCAPE '\\'")[0][0] for f in frags)
    assert counted == n_probe


def test_role_models_per_role_with_fallback(gated_step):
    _, ctx, rec = gated_step
    models: dict[Role, set[str]] = {}
    for role, model, _ in rec.calls:
        models.setdefault(role, set()).add(model)
    shared = str(ctx.cfg.llm.model)
    assert models[Role.EDITOR] == {"sim-editor-x"}
    assert models[Role.PROBE] == {"sim-probe-y"}
    assert models[Role.SOLVER] == {shared}  # step and gate rollouts: the solver model
    assert models.get(Role.SELECTOR) == {shared}  # k=2: two finals -> the selector ran, on the shared model
    assert Role.REFLECTOR not in models  # no library is written from the loop
    assert all(i // STEP_STRIDE >= PROBE_INDEX_BASE for role, _, i in rec.calls if role == Role.PROBE)
    assert not any(i // STEP_STRIDE >= PROBE_INDEX_BASE for role, _, i in rec.calls if role == Role.SOLVER)


# ---------------------------------------------------------------- the gate decides: reject and accept


def test_rejected_h2_candidate_is_not_installed(tmp_path):
    ctx, _ = first_step(tmp_path, "gate.lambda=1000000000.0", "gate.undecided=reject")
    rollout, evolve, gate = _step_dirs(tmp_path)
    cands = json.loads((evolve / "evolve.json").read_text())["candidates"]
    assert cands, "the h2 round must deliver a changed skill for this test to mean anything"
    rows = {r["skill_file"]: r for r in json.loads((gate / "report.json").read_text())["skills"]}
    assert {rows[c["skill_file"]]["action"] for c in cands} == {"reject"}
    ws = gate / "workspace"
    assert wsp.read_manifest(ws).skills_version == "v0"  # Harness² adoption never bypasses the gate
    assert read_version_tree(ws / "skills", "v0") == read_version_tree(tmp_path / "state" / "init" / "workspace" / "skills", "v0")
    state = load_checkpoint(gate / "checkpoint.json").state
    for c in cands:
        key = c["skill_file"].split("/")[0]
        assert state.rejected_buffer[key] and state.rejected_buffer[key][-1].summary.startswith("- ")


def test_accepted_h2_candidate_is_installed_as_delivered(tmp_path):
    ctx, _ = first_step(tmp_path, "gate=accept_all")
    rollout, evolve, gate = _step_dirs(tmp_path)
    cands = json.loads((evolve / "evolve.json").read_text())["candidates"]
    assert cands
    ws = gate / "workspace"
    sv = wsp.read_manifest(ws).skills_version
    assert sv != "v0"
    new = read_version_tree(ws / "skills", sv)
    old = read_version_tree(ws / "skills", "v0")
    d = old.diff(new)
    assert not d.added and not d.removed and set(d.changed) == {c["skill_file"] for c in cands}
    for c in cands:
        assert new[c["skill_file"]] == c["record"]["new_text"]
    # a re-run of the evolve stage is answered entirely by the response cache and proposes the same candidates
    from harness.llm.cache import CachedProvider, ResponseCache
    from harness.loop.context import make_context
    from harness.loop.stages.evolve import stage_evolve

    class NoCalls:
        def __init__(self, inner):
            self.inner, self.name = inner, inner.name

        def model_for(self, role):
            return self.inner.model_for(role)

        def request_identity(self, request):
            return self.inner.request_identity(request)

        async def complete(self, request):
            raise AssertionError(f"a re-run reached the provider ({request.role})")

    cache = ResponseCache(tmp_path / ".cache" / "llm")
    try:
        ctx2 = make_context(ctx.cfg, tmp_path, llm=CachedProvider(NoCalls(ctx.llm().inner.inner), cache), bench=ctx.bench())
        stage_evolve(ctx2, 1, 1, tmp_path / "state" / "init", rollout, evolve)
    finally:
        cache.close()
    again = json.loads((evolve / "evolve.json").read_text())["candidates"]
    assert [(c["skill_file"], c["record"]["new_text"]) for c in again] == [(c["skill_file"], c["record"]["new_text"]) for c in cands]


# ---------------------------------------------------------------- units


def _tree() -> HarnessTree:
    return HarnessTree({"system_prompt.md": "Answer carefully.\n", "skills/a/SKILL.md": "rule one\n", "skills/b/SKILL.md": "rule b\n"})


def test_restrict_to_rejects_every_other_file():
    base = _tree()
    check = restrict_to(base, "skills/a/SKILL.md")
    assert check(base.with_files({"skills/a/SKILL.md": "rule one\nrule two\n"})) == []
    msgs = check(base.with_files({"system_prompt.md": "x\n", "skills/c/SKILL.md": "new\n", "skills/b/SKILL.md": None}))
    assert any("system_prompt.md" in m and "changed" in m for m in msgs)
    assert any("skills/c/SKILL.md" in m and "added" in m for m in msgs)
    assert any("skills/b/SKILL.md" in m and "deleted" in m for m in msgs)
    assert any("non-empty" in m for m in check(base.with_files({"skills/a/SKILL.md": "  \n"})))


def test_editor_touching_other_files_falls_back_and_is_recorded(tmp_path):
    """An editor that also rewrites the system prompt is rejected twice by the validator -> the base is delivered."""
    from harness.questions import Question

    qs = [Question(qid=f"q{i}", task_type="a", question=f"What is {i}?", choices=["A", "B"], answer="A") for i in range(2)]

    def editor(role, messages, key):
        return ("=== HARNESS FILE: skills/a/SKILL.md ===\nrule one\nrule two\n=== END HARNESS FILE ===\n"
                "=== HARNESS FILE: system_prompt.md ===\nAlways answer A.\n=== END HARNESS FILE ===\n<notes>both</notes>")

    class NoLLM:
        name = "none"

        def model_for(self, role):
            return "none"

        async def complete(self, request):  # probes are never reached: nothing valid to probe
            raise AssertionError("no probe expected")

    task = SkillStepTask(task_id="a", task_type="a", task_types=["a"], target="skills/a/SKILL.md", base=_tree(), questions=qs,
                         llm=NoLLM(), log=None, run_id_prefix="r_e1_s1_h2_a", scorer=lambda q, p: p == q.answer)
    from harness.h2.adapters import Rollout

    base_rollout = Rollout("base", _tree().fingerprint, True, "q0: A\nq1: B\n")
    result = asyncio.run(improve_task(task, Roles(Editor(FunctionResponder(editor))), work_dir=tmp_path / "w", k=1,
                                      run_tag=run_tag_for("r", 1, 1), base_rollout=base_rollout, base_paid=True, resume=False))
    assert result.delivered_is_base
    inv = next(s for s in result.summary["stages"] if s["label"] == "inv1")
    assert inv["status"] == "fallback" and any("[adapter] system_prompt.md" in e for e in inv["errors"])


def test_probe_sample_indices_and_role_relabel():
    a, b = probe_sample_index("h2-x-probe-a.parallel.k1.probe-inv1"), probe_sample_index("h2-x-probe-a.parallel.k1.probe-dom1")
    assert PROBE_INDEX_BASE <= a < 2 * PROBE_INDEX_BASE and PROBE_INDEX_BASE <= b < 2 * PROBE_INDEX_BASE and a != b
    assert a == probe_sample_index("h2-x-probe-a.parallel.k1.probe-inv1")  # stable: a re-run hits the cache

    class Inner:
        name = "inner"

        def model_for(self, role):
            return {"probe": "P", "solver": "S"}.get(Role(role).value, "M")

        async def complete(self, request):
            return request.role

    wrapped = AsRole(Inner())
    req = LLMRequest.make(Role.SOLVER, [])
    assert asyncio.run(wrapped.complete(req)) == Role.PROBE and wrapped.model_for(Role.SOLVER) == "P"
    assert asyncio.run(wrapped.complete(LLMRequest.make(Role.EDITOR, []))) == Role.EDITOR


def test_probe_qids_failing_first_with_a_quarter_passing():
    fail, ok = [f"f{i}" for i in range(10)], [f"p{i}" for i in range(10)]
    got = probe_qids(fail, ok, 8, "s")
    assert len(got) == 8 and sum(q.startswith("p") for q in got) == 2
    few = probe_qids(fail[:2], ok, 8, "s")  # too few failures: passing ones fill the set
    assert len(few) == 8 and set(fail[:2]) <= set(few) and few == sorted(few)
    assert probe_qids(fail, [], 3, "s") == probe_qids(fail, [], 3, "s") and len(probe_qids(fail, [], 3, "s")) == 3


def test_record_from_delivered_hunks_feed_the_blacklist():
    from harness.evolution.evolve import rejected_summary

    old, new = "keep\nold rule\n", "keep\nnew rule\nextra\n"
    rec = record_from_delivered("a", "a/SKILL.md", old, new, notes="n", usd=0.25)
    assert rec.changed and rec.usd == 0.25 and [e.op for e in rec.edits] == ["replace"]
    assert all(isinstance(a, EditApplication) and a.status == "applied" for a in rec.apply_report)
    assert "old rule" in rejected_summary(rec) and "extra" in rejected_summary(rec)
    assert [e.op for e in hunk_edits("a\nb\n", "a\n")] == ["delete"] and [e.op for e in hunk_edits("a\n", "a\nb\n")] == ["add"]
    assert not record_from_delivered("a", "a/SKILL.md", old, old, notes="", usd=0.0).edits
