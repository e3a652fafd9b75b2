"""dual_metric_eval, shadow_gate and holdout_eval carry real soft and mixed values on the simulator (issue 14 item 9)."""

from __future__ import annotations

import pytest

from harness.loop.observation import read_table
from harness.loop.slow_update import next_shadow_best
from harness.loop.state import RUNLOG
from harness.pipeline.collect import RunLayout


def _tables(tiny_run):
    layout = RunLayout.from_config(tiny_run["cfg"], tiny_run["root"])
    fragments = layout.fragments()
    return {name: read_table(fragments, name) for name in ("dual_metric_eval", "shadow_gate")}, layout


def test_dual_metric_rows_have_soft_and_mixed_scores(tiny_run):
    tables, _ = _tables(tiny_run)
    rows = tables["dual_metric_eval"]
    assert rows
    for row in rows:
        assert row["soft_score"] is not None and 0.0 <= row["soft_score"] <= 1.0
        assert row["mixed_score"] == pytest.approx((row["hard_acc"] + row["soft_score"]) / 2)


def test_next_shadow_best_keeps_the_best_mixed_score_of_the_epochs_so_far():
    first = next_shadow_best(None, 0.6, "v1", "v0")
    assert first == (0.6, "v1", "v0")
    assert next_shadow_best(first, 0.5, "v2", "v0") == first  # a worse epoch does not move the shadow best
    assert next_shadow_best(first, 0.6, "v2", "v0") == first  # a tie neither (strictly greater, like the hard best)
    assert next_shadow_best(first, 0.7, "v3", "v1") == (0.7, "v3", "v1")
    assert next_shadow_best(first, None, "v3", "v1") == first and next_shadow_best(None, None, "v1", "v0") is None


def test_shadow_best_is_the_running_argmax_of_the_mixed_score(tmp_path):
    from conftest import make_runner, tiny_cfg

    cfg = tiny_cfg("train.epochs=3", "train.early_stop_patience=3")
    runner, _, cache = make_runner(tmp_path, cfg)
    try:
        runner.train()
    finally:
        cache.close()
    tables, _ = _tables({"cfg": cfg, "root": tmp_path})
    rows = sorted(tables["shadow_gate"], key=lambda r: int(r["epoch"]))
    assert len(rows) == 3
    best = None
    for row in rows:
        assert row["mixed_score"] is not None
        if best is None or row["mixed_score"] > best[0]:
            best = (row["mixed_score"], row["run_id"])
        assert row["shadow_best_mixed"] == pytest.approx(best[0])  # never just the current epoch's value
        assert row["shadow_skills_version"] is not None and row["disagrees"] in (0, 1)


def test_final_holdout_rows_have_soft_scores(tiny_run):
    _, layout = _tables(tiny_run)
    rows = read_table([layout.holdout / RUNLOG], "holdout_eval")
    assert {r["which"] for r in rows} == {"base", "delivered"}
    for row in rows:
        assert 0.0 <= row["soft_score"] <= 1.0
        assert row["mixed_score"] == pytest.approx((row["hard_acc"] + row["soft_score"]) / 2)


def test_gate_metric_soft_pairs_are_the_rounded_soft_scores_of_the_gate_rollouts(tmp_path):
    from conftest import make_runner, tiny_cfg

    from harness.bench.soft import metric_outcome
    from harness.log import RunLogReader

    cfg = tiny_cfg("gate.metric=soft")
    runner, _, cache = make_runner(tmp_path, cfg)
    try:
        runner.train()
    finally:
        cache.close()
    fragments = RunLayout.from_config(cfg, tmp_path).fragments()
    evidence = [r for r in read_table(fragments, "gate_evidence") if r["candidate"] is not None]
    assert evidence
    predictions = {(r["run_id"], r["qid"], r["sample_index"]): r for r in RunLogReader(fragments).query(
        "SELECT run_id, qid, sample_index, correct, soft_score FROM predictions WHERE run_id LIKE '%_gate_%'")}
    differs = 0
    for row in evidence:
        p = predictions[(f"{row['gate_run_id']}_cand", row["qid"], row["sample_index"])]
        assert p["soft_score"] is not None
        expected = metric_outcome("soft", bool(p["correct"]), p["soft_score"], qid=row["qid"], sample_index=row["sample_index"])
        assert bool(row["candidate"]) == expected
        differs += bool(row["candidate"]) != bool(p["correct"])
    assert differs > 0  # the gate saw the soft metric, not the hard outcomes


def test_gate_metric_soft_without_a_soft_score_is_refused_at_load():
    from conftest import tiny_cfg

    from harness.config.errors import ConfigError

    with pytest.raises(ConfigError, match=r"gate.metric.*llm.top_logprobs > 0"):
        tiny_cfg("gate.metric=soft", "llm.top_logprobs=0")
    with pytest.raises(ConfigError, match=r"gate.metric.*must be one of hard, soft, mixed"):
        tiny_cfg("gate.metric=fuzzy")


def test_the_run_reports_its_soft_score_calibration_gap(tiny_run):
    """metrics.json's soft_calibration_gap / _se: mean(soft - correct) over every judged rollout with a soft score, as
    the predictions say; the simulator's soft score is calibrated by construction, so the gap is within 4 SE of 0."""
    import math

    from harness.log import RunLogReader
    from harness.pipeline.collect import collect_run

    layout = RunLayout.from_config(tiny_run["cfg"], tiny_run["root"])
    rows = RunLogReader(layout.fragments()).query(
        "SELECT soft_score, correct FROM predictions WHERE correct IS NOT NULL AND soft_score IS NOT NULL")
    diffs = [float(r["soft_score"]) - float(r["correct"]) for r in rows]
    n = len(diffs)
    mean = math.fsum(diffs) / n
    se = math.sqrt(math.fsum((d - mean) ** 2 for d in diffs) / (n - 1) / n)
    metrics = collect_run(tiny_run["cfg"], layout).final_metrics()
    assert metrics["soft_calibration_gap"] == pytest.approx(mean, abs=1e-6)
    assert metrics["soft_calibration_se"] == pytest.approx(se, abs=1e-6)
    assert n >= 50 and abs(mean) <= 4 * se
