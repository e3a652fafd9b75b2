"""Sweep manifest, pre-check, plan, domain-parallel run with failure isolation, and the sweep report."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field, replace

import pytest

from harness.h2.report import Score
from harness.h2.roles import FunctionResponder, Judge
from harness.h2.surfaces import CODEX
from harness.h2.sweep import (
    DOMAIN_REPORT,
    Manifest,
    ManifestError,
    SweepSettings,
    TaskSpec,
    aggregate,
    load_manifest,
    plan_dict,
    precheck,
    read_domain_report,
    render_plan,
    run_plan,
    sim_manifest,
)
from harness.h2.sweep_report import build_report, crashed_row, pick_provenance, render_markdown
from harness.questions import Question
from tests.h2.conftest import ToyTask, make_roles


def _write_manifest(tmp_path, text: str):
    (tmp_path / "base").mkdir(exist_ok=True)
    (tmp_path / "base" / "AGENTS.md").write_text("# Agent\n")
    (tmp_path / "src").mkdir(exist_ok=True)
    (tmp_path / "p.md").write_text("Total the ledger.")
    path = tmp_path / "tasks.yaml"
    path.write_text(text)
    return path


GOOD = """
version: 1
surface: codex
tasks:
  - {id: t1, domain: acc, prompt_file: p.md, source_dir: src, base_harness_dir: base}
  - {id: t2, domain: acc, prompt: "Write the weekly report.", base_harness_dir: base}
  - {id: t3, domain: ops, prompt: "Reconcile.", base_harness_dir: base, leak_globs: ["*key*"]}
"""


def test_manifest_loads_with_paths_relative_to_the_file(tmp_path):
    m = load_manifest(_write_manifest(tmp_path, GOOD))
    assert m.domains() == ["acc", "ops"] and m.surface == "codex"
    t1 = m.tasks[0]
    assert t1.prompt_text() == "Total the ledger." and t1.source_dir == tmp_path / "src"
    assert m.tasks[2].leak_globs == ("*key*",)
    assert precheck(m, SweepSettings(executor="command"), CODEX) == []
    assert [t.task_id for t in m.select(["ops"]).tasks] == ["t3"]
    with pytest.raises(ManifestError, match="no tasks for domain"):
        m.select(["nope"])


def test_manifest_errors_name_the_file_and_key(tmp_path):
    path = _write_manifest(tmp_path, "tasks:\n  - {id: t1, prompt: x, promt_file: y}\n  - {domain: d, prompt: x, prompt_file: p.md}\n")
    with pytest.raises(ManifestError) as err:
        load_manifest(path)
    msg = str(err.value)
    assert "tasks[0]: unknown keys ['promt_file']" in msg and "tasks[0].domain: expected a non-empty string" in msg
    assert "tasks[1].id" in msg and "tasks[1]: give exactly one of `prompt` and `prompt_file`" in msg
    assert str(path) in msg
    with pytest.raises(ManifestError, match="non-empty list `tasks`"):
        load_manifest(_write_manifest(tmp_path, "tasks: []\n"))
    with pytest.raises(ManifestError, match="not found"):
        load_manifest(tmp_path / "missing.yaml")


def test_precheck_finds_every_problem_before_anything_runs(tmp_path):
    m = load_manifest(_write_manifest(tmp_path, GOOD))
    (tmp_path / "p.md").unlink()
    bad_tree = tmp_path / "bad"
    (bad_tree / ".agents" / "skills" / "x").mkdir(parents=True)
    (bad_tree / "AGENTS.md").write_text("# Agent\n")
    (bad_tree / ".agents" / "skills" / "x" / "SKILL.md").write_text("no frontmatter\n")
    tasks = (m.tasks[0], replace(m.tasks[1], base_harness_dir=bad_tree), replace(m.tasks[2], task_id="t1", source_dir=tmp_path / "nosrc"))
    settings = SweepSettings(executor="command", k=4, modes=("parallel", "diagonal"), run_tag="-x", workers=0)
    problems = precheck(Manifest(tasks, "m.yaml"), settings, CODEX)
    text = "\n".join(problems)
    for expected in ("improve.run_tag", "h2_round.k", "improve.modes: 'diagonal'", "improve.workers", "task ids must be unique",
                     "prompt_file", "skill-description", "source_dir"):
        assert expected in text, expected


def _questions(types=("a", "b"), n=5):
    return [Question(qid=f"{t}{i}", task_type=t, question=f"q {t}{i}", choices=["w", "x", "y", "z"], answer="x") for t in types for i in range(n)]


def test_sim_manifest_chunks_questions_per_domain_in_order():
    m = sim_manifest(_questions(), ["b", "a"], tasks_per_domain=2, questions_per_task=2)
    assert m.domains() == ["b", "a"]
    assert [(t.task_id, t.qids) for t in m.tasks[:2]] == [("b-0", ("b0", "b1")), ("b-1", ("b2", "b3"))]
    with pytest.raises(ManifestError, match="'c' is not a task type"):
        sim_manifest(_questions(), ["c"], 1, 1)
    with pytest.raises(ManifestError, match="6 needed"):
        sim_manifest(_questions(), ["a"], 3, 2)
    plan = plan_dict(m, SweepSettings(k=1, modes=("parallel", "sequential")))
    assert plan["max_executions_per_task"] == 4 + 3  # the base rollout is shared by the two modes
    text = render_plan(plan)
    assert "b: b-0, b-1" in text and "k = 1, modes parallel, sequential" in text


# ------------------------------------------------------------------ running


@dataclass
class SlowToy(ToyTask):
    """A toy task whose executions take a moment, recording how many domains run at once."""

    tracker: dict = field(default_factory=dict)

    async def execute(self, label, harness):
        active = self.tracker.setdefault("active", set())
        active.add(self.domain)
        self.tracker["max"] = max(self.tracker.get("max", 0), len(active))
        await asyncio.sleep(0.01)
        active.discard(self.domain)
        return await super().execute(label, harness)


def _grade_by_level(role, messages, key):
    text = messages[-1].content
    if "t-b1" in text:
        return "no grade here"  # a judge failure: ungraded, never zero
    return "<grade>0.5</grade><why>ok</why>"


def test_run_plan_isolates_failures_and_writes_reports(tmp_path):
    specs = [TaskSpec(f"t-{d}{i}", d) for d in ("a", "b", "c") for i in range(2)]
    tracker: dict = {}

    def make_adapter(spec):
        if spec.task_id == "t-c0":
            raise FileNotFoundError("base harness missing")
        toy = SlowToy(task_id=spec.task_id, domain=spec.domain, tracker=tracker)
        if spec.task_id == "t-a1":
            def boom():
                raise RuntimeError("task exploded")
            toy.base_harness = boom  # improve_task itself crashes for this task
        return toy

    roles = make_roles()
    roles.judge = Judge(FunctionResponder(_grade_by_level))
    settings = SweepSettings(k=1, modes=("parallel",), run_tag="sw", workers=2, out_dir=tmp_path / "out", report_dir=tmp_path / "rep")
    manifest = Manifest(tuple(specs), "test")
    reports = asyncio.run(run_plan(manifest, settings, make_adapter, roles))
    assert tracker["max"] == 2  # at most `workers` domains at once, and they did overlap
    by = {r["task_id"]: r for d in reports for r in d["rows"]}
    assert by["t-c0"]["status"] == "crashed" and "base harness missing" in by["t-c0"]["error"]
    assert by["t-a1"]["status"] == "crashed" and "task exploded" in by["t-a1"]["error"]
    assert by["t-c1"]["status"] == "done" and by["t-a0"]["status"] == "done"
    assert by["t-b1"]["judged"] and by["t-b1"]["score"] is None  # ungraded
    assert by["t-b0"]["score"] == 0.5
    # stream order within a domain: the second task saw the first one's library entry
    assert read_domain_report(tmp_path / "out", "b")["rows"][0]["task_id"] == "t-b0"
    ctx = tmp_path / "out" / "b" / "runs" / "t-b1" / "parallel-k1" / "contexts" / "inv1" / "library" / "INDEX.md"
    assert "t-b0" in ctx.read_text()
    report = aggregate(reports, tmp_path / "rep", meta={"run_tag": "sw"})
    saved = json.loads((tmp_path / "rep" / "sweep-report.json").read_text())
    assert saved == json.loads(json.dumps(report))
    (c,) = saved["configs"]
    assert (c["tasks"], c["crashed"], c["graded"], c["ungraded"]) == (6, 2, 3, 1)
    assert c["score_mean"] == 0.5 and sum(c["picks"].values()) == 4
    assert any("judge failed, ungraded" in w for w in saved["warnings"])
    assert sum("crashed" in w for w in saved["warnings"]) == 2
    assert (tmp_path / "rep" / "sweep-report.md").read_text().startswith("# Harness² sweep sw")
    # re-running resumes every finished task (completion marks) and re-records the crashed ones
    again = asyncio.run(run_plan(manifest, settings, make_adapter, roles))
    rows = {r["task_id"]: r["status"] for d in again for r in d["rows"]}
    assert rows["t-b0"] == "resumed" and rows["t-a1"] == "crashed"
    assert (tmp_path / "out" / "a" / DOMAIN_REPORT).is_file()


def _row(mode="parallel", k=1, pick="final", score=0.5, unit="judge-grade", judged=True, fallbacks=()):
    return {"task_id": f"t{id(object())}", "domain": "d", "mode": mode, "k": k, "status": "done", "pick": pick, "selection": "trivial",
            "selection_error": None, "fallbacks": list(fallbacks), "dead_probes": 0, "usd": 0.1, "rollout_usd": 0.06, "session_usd": 0.04,
            "judged": judged, "score": score, "score_unit": unit, "score_note": ""}


def test_report_warnings_noise_floor_and_units():
    rows = [_row(pick="base", score=0.6), _row(pick="base", score=0.4), _row(pick="base", fallbacks=["inv inv1: editor call failed"]),
            _row(mode="sequential", score=0.9, unit="oracle-accuracy", pick="candidate"), crashed_row("tx", "d", "sequential", 1, "boom")]
    rep = build_report(rows)
    par = next(c for c in rep["configs"] if c["mode"] == "parallel")
    assert par["base_share"] == 1.0 and par["fallbacks"] == 1 and par["usd"] == pytest.approx(0.3)
    w = "\n".join(rep["warnings"])
    assert "parallel k=1: the base harness was delivered on 100% of tasks" in w
    assert "stage fell back — inv inv1: editor call failed" in w and "mix units" in w and "crashed — boom" in w
    assert rep["noise_floor"]["gap"] == pytest.approx(abs(0.5 - 0.9))
    assert "noise floor" in render_markdown(rep)
    assert build_report([_row(k=3)])["noise_floor"] is None
    unscored = build_report([_row(judged=False, score=None)])["configs"][0]
    assert (unscored["graded"], unscored["ungraded"], unscored["unscored"], unscored["score_mean"]) == (0, 0, 1, None)


def test_pick_provenance():
    stages = [{"stage": "inv", "status": "adopted", "result": "aaa"}, {"stage": "compose", "status": "adopted", "result": "ccc"}]
    assert pick_provenance({"delivered_is_base": True, "stages": stages}) == "base"
    assert pick_provenance({"delivered_is_base": False, "delivered_fingerprint": "aaa", "stages": stages}) == "candidate"
    assert pick_provenance({"delivered_is_base": False, "delivered_fingerprint": "ccc", "stages": stages}) == "final"


def test_score_of_judge_failure_is_none_not_zero():
    assert Score(None, "judge-grade").value is None
