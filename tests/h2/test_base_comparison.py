"""Base vs improved on the same tasks with a paired 95 % CI before anything is called a gain (issue 28 item 6c, seed 002)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.h2.sweep_report import paired_comparison
from stages import improve
from tests.stages.test_improve import write_params


def test_gain_only_when_the_paired_interval_lies_above_zero() -> None:
    gain = paired_comparison([(0.5, 0.7), (0.4, 0.65), (0.6, 0.8), (0.5, 0.72)])  # differences 0.20, 0.25, 0.20, 0.22
    assert gain["diff_mean"] == pytest.approx(0.2175) and gain["ci_low"] == pytest.approx(0.2175 - 3.182446 * 0.023629 / 2, abs=1e-5)
    assert gain["ci_low"] > 0 and gain["verdict"] == "gain (+0.217, 95 % CI [+0.180, +0.255], 4 pairs)"
    loss = paired_comparison([(0.7, 0.5), (0.65, 0.4), (0.8, 0.6)])
    assert loss["ci_high"] < 0 and loss["verdict"].startswith("loss (")
    mixed = paired_comparison([(0.5, 0.6), (0.5, 0.8)])  # differences 0.1, 0.3: t(0.975, 1) = 12.71 -> [-1.07, 1.47], clipped
    assert (mixed["ci_low"], mixed["ci_high"]) == (-1.0, 1.0)
    assert mixed["verdict"] == "no measurable gain (+0.200, 95 % CI [-1.000, +1.000], 2 pairs)"
    one = paired_comparison([(0.2, 0.9)])
    assert one["ci_low"] is None and one["verdict"].startswith("no measurable gain (1 pair, difference +0.700")
    assert paired_comparison([])["verdict"].startswith("not compared")


def test_sim_sweep_reports_base_and_improved_per_domain_with_a_paired_interval(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                                capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    write_params(tmp_path, "improve.tasks_per_domain=3")
    assert improve.main(["--yes", "--no-tracking"]) == 0
    report = json.loads((tmp_path / "reports/improve/sweep-report.json").read_text())
    rows = report["tasks"]
    assert len(rows) == 6 and all(r["base_score"] is not None and r["score"] is not None for r in rows)
    for r in rows:  # a round that delivered the base's own rollout is compared with itself: difference 0
        summary = json.loads((tmp_path / "state/improve" / r["domain"] / "runs" / r["task_id"] / "parallel-k1/summary.json").read_text())
        if summary["delivered_rollout"] == summary["base_rollout"]["label"]:
            assert r["base_score"] == r["score"]
    by_domain = {c["domain"]: c for c in report["comparison"]}
    assert sorted(by_domain) == ["all", "object_recognition", "temporal_reasoning"]
    for domain, c in by_domain.items():
        mine = [r for r in rows if domain in ("all", r["domain"])]
        assert c["pairs"] == len(mine) and c["diff_mean"] == pytest.approx(sum(r["score"] - r["base_score"] for r in mine) / len(mine))
        assert c["base_mean"] == pytest.approx(sum(r["base_score"] for r in mine) / len(mine))
        assert c["ci_low"] <= c["diff_mean"] <= c["ci_high"]
        assert c["verdict"].startswith("gain (") == (c["ci_low"] > 0)
        assert c["verdict"].startswith(("gain (", "loss (", "no measurable gain ("))
    markdown = (tmp_path / "reports/improve/sweep-report.md").read_text()
    assert "## Base vs improved (same tasks, same judge" in markdown and by_domain["all"]["verdict"] in markdown
    out = capsys.readouterr().out
    assert f"base vs improved, parallel k=1 all: base {by_domain['all']['base_mean']:.3f}" in out
