"""A whole tiny training run on the simulated world: stage contracts, observation, resume."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from conftest import Interrupt, make_runner, tiny_cfg

from harness import workspace as wsp
from harness.contracts.certificate import read_certificate
from harness.kernel.ladder import GatePools
from harness.kernel.schedule import full_schedule
from harness.loop.checkpoint import load_checkpoint
from harness.loop.state import is_done, read_lineage


def _runs(db: Path) -> set[str]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return {r[0] for r in conn.execute("SELECT DISTINCT run_id FROM predictions")}
    finally:
        conn.close()


def test_every_stage_done_and_delivered(tiny_run):
    root, result = tiny_run["root"], tiny_run["result"]
    state = root / "state"
    assert is_done(state / "init") and is_done(state / "holdout")
    for e in (1, 2):
        assert (state / f"e{e}" / "batches.json").is_file()
        assert is_done(state / f"e{e}" / "slow")
        for s in (1, 2):
            for kind in ("rollout", "evolve", "gate"):
                assert is_done(state / f"e{e}" / f"s{s}" / kind)
    best = wsp.read_best(state / "e2" / "slow" / "workspace")
    assert (result["delivered"]["skills_version"], result["delivered"]["prompts_version"]) == (best.skills, best.prompts)
    delivered = wsp.harness_view(state / "e2" / "slow" / "workspace", best.skills, best.prompts)
    assert delivered.fingerprint == result["delivered"]["fingerprint"]
    assert set(result["test"]) == {"base", "delivered"}
    assert not list(state.rglob("*-wal")) and not list(state.rglob("*-shm"))


def test_fragments_hold_only_their_own_rows(tiny_run):
    state = tiny_run["root"] / "state"
    name = tiny_run["cfg"].train.run_name
    assert _runs(state / "e1" / "s1" / "rollout" / "runlog.sqlite") == {f"{name}_e1_s1"}
    gate_runs = _runs(state / "e1" / "s1" / "gate" / "runlog.sqlite")
    assert gate_runs and all("_gate_" in r for r in gate_runs)
    slow_runs = _runs(state / "e1" / "slow" / "runlog.sqlite")
    assert f"{name}_e1_slowR" in slow_runs and not any("_gate_" in r or "_s1" in r for r in slow_runs)
    lineage = read_lineage(state / "e1" / "slow")
    assert lineage.fragments[0].endswith("e1/s1/rollout/runlog.sqlite")
    assert lineage.fragments[-1].endswith("e1/slow/runlog.sqlite")


def test_checkpoints_and_ladder_sources(tiny_run):
    state = tiny_run["root"] / "state"
    name = tiny_run["cfg"].train.run_name
    ck = load_checkpoint(state / "e1" / "s1" / "gate" / "checkpoint.json")
    assert ck.progress.phase == "in_epoch" and ck.progress.step == 1 and ck.progress.global_step == 1
    ck = load_checkpoint(state / "e1" / "slow" / "checkpoint.json")
    assert ck.progress.phase == "epoch_done"
    assert not ck.state.probations and not ck.state.system_packs and not ck.state.changed_task_types_this_epoch
    pools = GatePools.from_json(json.loads((state / "e1" / "slow" / "gate_pools.json").read_text()))
    sources = {run for tt in pools.task_types for e in pools.entries(tt) for run, _ in e.sources}
    assert sources and not any("_gate_" in r for r in sources)
    report = json.loads((state / "e1" / "slow" / "report.json").read_text())
    allowed = {f"{name}_e1_s1", f"{name}_e1_s2", f"{name}_e1_slowR"} | ({report["r2_run_id"]} if report["r2_kept"] else set())
    assert set(report["ladder_sources"]) <= allowed and f"{name}_e1_slowR" in report["ladder_sources"]
    assert sources <= allowed
    assert not any("holdout" in r or "shadow" in r for r in sources)
    if report["r2_run_id"] and not report["r2_kept"]:
        assert report["r2_run_id"] not in sources


def test_observation_tables_and_reports(tiny_run):
    state = tiny_run["root"] / "state"
    from harness.loop.observation import read_table

    dual = read_table(state / "e1" / "slow" / "runlog.sqlite", "dual_metric_eval")
    # the simulated world's soft score (token log-probabilities, harness/bench/soft.py): real values, never NULL here
    assert dual and all(0 <= r["soft_score"] <= 1 and r["mixed_score"] == (r["hard_acc"] + r["soft_score"]) / 2 for r in dual)
    hold = read_table(state / "e1" / "slow" / "runlog.sqlite", "holdout_eval")
    assert {r["which"] for r in hold} == {"base", "epoch_start", "current", "best"}
    ev = read_table(state / "e1" / "s1" / "gate" / "runlog.sqlite", "gate_evidence")
    step = json.loads((state / "e1" / "s1" / "gate" / "report.json").read_text())
    gated = [r for r in step["skills"] if r["gate_run_id"]]
    for row in gated:
        mine = [e for e in ev if e["gate_run_id"] == row["gate_run_id"]]
        last = max(e["block"] for e in mine)
        assert all((e["stop_reason"] is not None) == (e["block"] == last) for e in mine)
    epoch = json.loads((state / "e1" / "slow" / "report.json").read_text())
    for key in ("system_tool_action", "momentum_updated_task_types", "best_val_acc", "label"):
        assert key in epoch
    assert epoch["label"] in ("improved", "regressed", "unchanged")


def test_resume_after_any_interruption_repeats_no_call(tiny_run, tmp_path):
    """Kill after a stage, kill inside a stage, resume: same delivered harness, no provider call paid twice."""
    cfg = tiny_cfg()
    stages = [i.name for i in full_schedule(2, 2)]
    kill_after = stages.index("gate@e1.s1")

    runner, counting, cache = make_runner(tmp_path, cfg)

    def stop(item):
        if item.name == stages[kill_after]:
            raise Interrupt("killed after a stage")

    with pytest.raises(Interrupt):
        runner.train(after_stage=stop)
    cache.close()
    paid = counting.calls
    # second life: dies in the middle of a stage (a few calls into the rest of the run)
    runner, counting, cache = make_runner(tmp_path, cfg, die_after=25)
    with pytest.raises(Interrupt):
        runner.train()
    cache.close()
    paid += counting.calls
    # third life finishes
    runner, counting, cache = make_runner(tmp_path, cfg)
    result = runner.train()
    cache.close()
    paid += counting.calls
    assert result["delivered"] == tiny_run["result"]["delivered"]
    assert result["test"] == tiny_run["result"]["test"]
    assert paid == tiny_run["calls"]


def _digest_tree(root: Path) -> dict[str, str]:
    import hashlib

    return {str(p.relative_to(root)): hashlib.sha1(p.read_bytes()).hexdigest() for p in sorted(root.rglob("*")) if p.is_file()}


def test_a_stage_writes_only_its_output_and_reruns_for_free(tiny_run, tmp_path):
    root = tiny_run["root"]
    runner, counting, cache = make_runner(root, tiny_cfg())
    from harness.loop.stages.gate import stage_gate

    before = _digest_tree(root / "state")
    P = runner.paths
    out = tmp_path / "gate_again"
    stage_gate(runner.ctx, 1, 1, P.init, P.rollout(1, 1), P.evolve(1, 1), out)
    cache.close()
    assert _digest_tree(root / "state") == before  # nothing outside `out` changed
    assert counting.calls == 0  # every call of the re-run came from the response cache
    again = json.loads((out / "report.json").read_text())
    orig = json.loads((P.gate(1, 1) / "report.json").read_text())
    assert again == orig
    assert wsp.read_manifest(out / "workspace") == wsp.read_manifest(P.gate(1, 1) / "workspace")


def test_early_stop_passes_the_state_through(tmp_path):
    from conftest import FrozenEditor

    cfg = tiny_cfg("train.epochs=3")
    runner, counting, cache = make_runner(tmp_path, cfg, wrap=FrozenEditor)  # nothing ever improves: stop after e1
    result = runner.train()
    cache.close()
    state = tmp_path / "state"
    reports = {e: state / f"e{e}" / "slow" / "report.json" for e in (1, 2, 3)}
    stops = [e for e, p in reports.items() if p.exists() and json.loads(p.read_text()).get("early_stop")]
    assert stops == [1] and result["stopped_early"]
    first = stops[0]
    for e in range(first + 1, 4):
        for s in (1, 2):
            for kind in ("rollout", "evolve", "gate"):
                assert json.loads((state / f"e{e}" / f"s{s}" / kind / "DONE.json").read_text()).get("stopped") is True
        assert json.loads((state / f"e{e}" / "slow" / "DONE.json").read_text()).get("stopped") is True
        assert not (state / f"e{e}" / "s1" / "rollout" / "runlog.sqlite").exists()  # no rollout after the stop
        assert not reports[e].exists()
    stopped_at = wsp.read_best(state / f"e{first}" / "slow" / "workspace")
    assert (result["delivered"]["skills_version"], result["delivered"]["prompts_version"]) == (stopped_at.skills, stopped_at.prompts)
    # nothing was learned: the certificate says why there is nothing to certify, not only that no candidate differs
    cert = read_certificate(state / "certify")
    assert not cert.certified and cert.rollouts == 0
    assert cert.summary.startswith("not certified: nothing to certify: training's best checkpoint is the starting harness "
                                   "(no candidate differs from base)")
