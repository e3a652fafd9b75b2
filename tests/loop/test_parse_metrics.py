"""The answer parse modes of a finished run as metrics: per run (metrics.json, report), per epoch and per gate."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from harness.contracts.answers import UNPARSED_MODES
from harness.pipeline.collect import RunLayout, collect_run
from harness.pipeline.render import write_reports


def _modes(fragments: list[Path], where: str = "") -> dict[str, int]:
    """mode -> judged rollouts, counted straight from the SQLite fragments (not through collect)."""
    counts: dict[str, int] = {}
    for db in fragments:
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        try:
            for mode, n in conn.execute("SELECT parse_mode, COUNT(*) FROM predictions WHERE correct IS NOT NULL "
                                        f"{where} GROUP BY parse_mode"):
                counts[mode] = counts.get(mode, 0) + n
        finally:
            conn.close()
    return counts


def test_parse_modes_are_run_epoch_and_gate_metrics(tiny_run, tmp_path):
    cfg, root = tiny_run["cfg"], tiny_run["root"]
    layout = RunLayout.from_config(cfg, root)
    summary = collect_run(cfg, layout)
    fragments = layout.fragments()
    expected = _modes(fragments)
    assert summary.parse_modes == expected and sum(expected.values()) > 0
    metrics = summary.final_metrics()
    total = sum(expected.values())
    for mode, n in expected.items():
        assert metrics[f"parse_share_{mode}"] == round(n / total, 6)
    assert metrics["parse_failure_rate"] == round(sum(expected.get(m, 0) for m in UNPARSED_MODES) / total, 6)
    assert all(e.epoch_parse_failure_rate is not None for e in summary.epochs)
    gated = [g for g in summary.gates if g.gate_run_id and g.n_pairs]
    assert gated
    for g in gated:
        cand = _modes(fragments, f"AND run_id = '{g.gate_run_id}_cand'")
        assert g.parse_failure_cand == round(sum(cand.get(m, 0) for m in UNPARSED_MODES) / sum(cand.values()), 6)
    files = write_reports(summary, tmp_path)
    md = files["markdown"].read_text()
    assert f"**answers with no readable choice (parse failure rate)**: {metrics['parse_failure_rate']:.4f}" in md
    assert "unparsed cand" in md and "answer parse modes" in files["html"].read_text()
