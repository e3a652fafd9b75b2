"""Reports render from a RunSummary: DVC metrics/plots files, Markdown, self-contained HTML."""

from __future__ import annotations

import json
from pathlib import Path

from harness.pipeline.render import write_reports
from harness.pipeline.summary import EpochSummary, GateDecision, RunSummary


def _summary(oracle: bool = True) -> RunSummary:
    epochs = (
        EpochSummary(1, 0.50, None, None, 0.50, accepted=1, rejected=2, probation=0, rollouts=120, usd=0.0,
                     true_val_acc=0.48 if oracle else None, true_test_acc=0.47 if oracle else None),
        EpochSummary(2, 0.58, None, None, 0.58, accepted=0, rejected=1, probation=1, rollouts=90, usd=0.0,
                     true_val_acc=0.55 if oracle else None, true_test_acc=0.54 if oracle else None),
    )
    gates = (
        GateDecision(1, 1, "counting", "accept", "e-process crossed", 3.2, -0.1, 9, 2, 5, 16, 32, "r_e1_s1_gate_counting"),
        GateDecision(1, 2, "ocr|text", "reject", "direction", -0.8, -1.7, 1, 6, 3, 10, 20, "r_e1_s2_gate_ocr"),
    )
    holdout = ({"epoch": 0, "which": "base", "run_id": "r_holdout_base", "skills_version": "v0", "prompts_version": "v0",
                "n": 6, "hard_acc": 0.5, "soft_score": None, "mixed_score": None},
               {"epoch": 0, "which": "delivered", "run_id": "r_holdout_delivered", "skills_version": "v2",
                "prompts_version": "v0", "n": 6, "hard_acc": 0.6667, "soft_score": None, "mixed_score": None})
    return RunSummary(
        run_name="tiny", benchmark="sim", epochs=epochs, gates=gates, holdout=holdout,
        gate_paths={"r_e1_s1_gate_counting": ((1, 0.2), (2, 1.1), (3, 3.2)), "r_e1_s2_gate_ocr": ((1, -0.3), (2, -0.8))},
        accept_threshold=3.0, reject_threshold=-1.56,
        delivered={"skills_version": "v2", "prompts_version": "v0", "true_test_acc": 0.54} if oracle else {"skills_version": "v2"},
        oracle_available=oracle,
    )


def test_metrics_and_plot_files(tmp_path: Path) -> None:
    files = write_reports(_summary(), tmp_path)
    metrics = json.loads(files["metrics"].read_text())
    assert metrics["epochs_run"] == 2
    assert metrics["best_val_acc"] == 0.58
    assert metrics["test_hard_acc"] == 0.6667  # the delivered harness on the test pool
    assert metrics["holdout_base_hard_acc"] == 0.5
    assert (metrics["accepted"], metrics["rejected"], metrics["probation"]) == (1, 3, 1)
    assert metrics["rollouts"] == 210
    assert metrics["val_soft_score"] is None  # absent, never 0
    assert metrics["true_test_acc_delivered"] == 0.54
    rows = json.loads((tmp_path / "plots" / "accuracy.json").read_text())
    assert rows[0] == {"epoch": 1, "val_hard_acc": 0.5, "best_val_acc": 0.5, "true_val_acc": 0.48, "true_test_acc": 0.47}
    csvs = sorted(p.name for p in (tmp_path / "plots" / "gate_evidence").iterdir())
    assert csvs == ["r_e1_s1_gate_counting.csv", "r_e1_s2_gate_ocr.csv"]
    assert (tmp_path / "plots" / "gate_evidence" / "r_e1_s1_gate_counting.csv").read_text().splitlines() == [
        "seq,log_e", "1,0.200000", "2,1.100000", "3,3.200000"]


def test_markdown_and_html_report(tmp_path: Path) -> None:
    files = write_reports(_summary(), tmp_path)
    md = files["markdown"].read_text()
    assert "| epoch | val acc |" in md and "true val acc" in md
    assert "ocr\\|text" in md  # a pipe in a cell is escaped, not a column break
    html = files["html"].read_text()
    assert html.count("<svg") == 3 and "<script" not in html and "http" not in html.replace('xmlns="http://www.w3.org/2000/svg"', "")
    assert "accept at gate.lambda" in html  # threshold line on the evidence chart
    assert "true accuracy" in html.lower()
    # the gate section: one row per task type, then every decision inside a collapsed <details>
    assert html.index("<h3>Per task type</h3>") < html.index("<details><summary>All 2 gate decisions</summary>")
    assert "<details open" not in html


def test_chart_files_are_the_report_charts(tmp_path: Path) -> None:
    files = write_reports(_summary(), tmp_path)
    html = files["html"].read_text()
    for kind, chart in (("accuracy_chart", "accuracy"), ("gate_evidence_chart", "gate-evidence"), ("cost_chart", "cost")):
        svg = files[kind].read_text()
        assert f'data-chart="{chart}"' in svg and svg in html, kind  # the same chart inline and as the DVC plot
        assert "<script" not in svg and "href" not in svg
    evidence = files["gate_evidence_chart"].read_text()
    assert evidence.count("<g data-panel=") == 2  # one panel per task type: counting, ocr|text
    assert 'data-panel="ocr|text"' in evidence and "counting: 1/1 accepted" in evidence


def test_accept_line_is_the_level_each_gate_was_given() -> None:
    from dataclasses import replace

    from harness.pipeline.render import accept_line

    summary = _summary()
    assert accept_line(summary) == {"accept at gate.lambda": 3.0}  # no level recorded: the configured threshold
    levels = (0.01, 0.001)  # e-LOND gives each gate its own level: log(1/0.01) = 4.61, log(1/0.001) = 6.91
    with_levels = replace(summary, gates=tuple(replace(g, fdr_level=lv) for g, lv in zip(summary.gates, levels)))
    ((label, value),) = accept_line(with_levels).items()
    assert abs(value - (4.60517 + 6.90776) / 2) < 1e-4 and "4.61-6.91 per gate" in label
    fixed = replace(summary, gates=tuple(replace(g, fdr_level=0.05) for g in summary.gates))
    assert list(accept_line(fixed)) == ["accept at log(1/level) = 3.00"]


def test_without_oracle_no_true_columns(tmp_path: Path) -> None:
    files = write_reports(_summary(oracle=False), tmp_path)
    assert "true val acc" not in files["markdown"].read_text()
    assert "true_test_acc_delivered" not in json.loads(files["metrics"].read_text())


def test_rendering_is_deterministic_and_replaces_stale_plots(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    write_reports(_summary(), a)
    (b / "plots" / "gate_evidence").mkdir(parents=True)
    (b / "plots" / "gate_evidence" / "stale_gate.csv").write_text("seq,log_e\n")
    write_reports(_summary(), b)
    for name in ("metrics.json", "report.md", "report.html", "plots/accuracy.json", "plots/accuracy.svg",
                 "plots/gate_evidence.svg", "plots/cost.svg"):
        assert (a / name).read_bytes() == (b / name).read_bytes(), name
    assert not (b / "plots" / "gate_evidence" / "stale_gate.csv").exists()


def test_one_meaning_per_metric_name() -> None:
    """Run totals keep metrics.json's names in MLflow; per-epoch counters are epoch_<name>; a run-level value
    that disagrees with the per-epoch history of the same name is refused."""
    import dataclasses

    import pytest

    from harness.pipeline.tracking_run import run_level_metrics

    summary = _summary()
    final = summary.final_metrics()
    epochs = [e.metrics() for e in summary.epochs]
    for key in ("accepted", "rejected", "probation", "rollouts", "usd", "cache_hits", "cache_misses"):
        assert all(key not in row and f"epoch_{key}" in row for row in epochs), key
    run_level = run_level_metrics(final, epochs)
    assert run_level["accepted"] == final["accepted"] == sum(row["epoch_accepted"] for row in epochs)
    assert run_level["usd"] == final["usd"] and not any(k.startswith("total_") for k in run_level)
    assert "val_hard_acc" not in run_level and run_level["test_hard_acc"] == 0.6667  # the history's last value says it
    bent = [dict(row) for row in epochs]
    bent[-1]["val_hard_acc"] = 0.01
    with pytest.raises(ValueError, match="val_hard_acc"):
        run_level_metrics(final, bent)
    assert dataclasses.asdict(summary.epochs[0])["accepted"] == epochs[0]["epoch_accepted"]


def test_measured_validation_stays_visible_under_best_so_far(tmp_path: Path) -> None:
    """Every epoch of `_summary` improves, so "best so far" has the measured line's points exactly: the two
    series differ in width, dashes and marker, and the measured one is drawn first and wider, so it shows around
    the best line on top of it; both mark every point."""
    import xml.etree.ElementTree as ET

    files = write_reports(_summary(), tmp_path)
    root = ET.fromstring(files["accuracy_chart"].read_text())
    ns = {"s": "http://www.w3.org/2000/svg"}
    lines = root.findall("s:polyline", ns)
    order = [line.get("data-series") for line in lines]
    measured, best = (lines[order.index(name)] for name in ("validation (measured)", "best validation so far"))
    assert measured.get("points") == best.get("points")  # the case the chart must handle: one on top of the other
    assert order.index("validation (measured)") < order.index("best validation so far")  # measured underneath
    assert float(measured.get("stroke-width")) >= 2 * float(best.get("stroke-width"))  # and wide enough to show
    styles = {(line.get("stroke"), line.get("stroke-width"), line.get("stroke-dasharray")) for line in lines}
    assert len(styles) == len(lines) == 4  # every series drawn in a style of its own
    assert measured.get("stroke-dasharray") is None and best.get("stroke-dasharray")  # solid vs dotted
    markers = {g.get("data-markers"): g for g in root.findall("s:g[@data-markers]", ns)}
    kinds = {name: markers[name].get("data-marker") for name in ("validation (measured)", "best validation so far")}
    assert kinds == {"validation (measured)": "dot", "best validation so far": "square"}
    assert len(markers["validation (measured)"]) == len(markers["best validation so far"]) == len(_summary().epochs)
    legend = [t.text for t in root.findall("s:text", ns)]
    assert "validation (measured)" in legend and "best validation so far" in legend


def test_a_series_names_a_known_marker() -> None:
    import pytest

    from harness.pipeline.svg import Series

    with pytest.raises(ValueError, match="marker 'star' is not one of dot, ring, square, none"):
        Series("x", [(1.0, 1.0)], marker="star")


def test_numbers_shown_are_rounded(tmp_path: Path) -> None:
    """No number a person reads in report.md, report.html or the charts has more than 4 significant decimals,
    from a run whose values are all unrounded (metrics.json keeps them whole)."""
    import re
    from dataclasses import replace

    third = 1 / 3
    base = _summary()
    epochs = tuple(replace(e, val_hard_acc=e.val_hard_acc + third / 100, val_soft_score=0.674815492920, best_val_acc=0.68181818,
                           usd=0.000123456789 * e.epoch, true_val_acc=0.7006781234) for e in base.epochs)
    gates = tuple(replace(g, log_e=3.14159265, fdr_level=0.0012190138, parse_failure_base=2 / 7) for g in base.gates)
    holdout = tuple({**row, "hard_acc": 0.6863636363636364, "soft_score": 0.69005687} for row in base.holdout)
    summary = replace(base, epochs=epochs, gates=gates, holdout=holdout, soft_calibration=(21652, -0.000822317, 0.0024621),
                      usd_by_role={"solver": 0.0123456789, "editor": 1 / 7}, parse_modes={"strict": 2, "none": 1},
                      delivered={**base.delivered, "true_test_acc": 0.700678123})
    files = write_reports(summary, tmp_path)
    assert json.loads(files["metrics"].read_text())["usd"] == round(0.0123456789 + 1 / 7, 6)  # stored: full
    for kind in ("markdown", "html", "accuracy_chart", "cost_chart", "gate_evidence_chart"):
        text = files[kind].read_text()
        too_precise = [m.group(0) for m in re.finditer(r"\d+\.0*(\d+)", text) if len(m.group(1)) > 4]
        assert too_precise == [], (kind, too_precise[:5])
    md = files["markdown"].read_text()
    assert "**USD**: 0.1552" in md and "-0.0008 ± 0.0025 over 21652" in md and "| 0.6864 |" in md


def test_a_per_type_rollback_delivery_is_not_labelled_as_its_parent_version(tmp_path: Path) -> None:
    """A delivery that put task types back to the start's files is not the workspace version its labels name: the
    held-out row and the "delivered harness" line say which types were rolled back (the epoch-best row of the same
    version keeps its plain label and its own accuracy)."""
    from dataclasses import replace

    summary = _summary()
    holdout = (summary.holdout[0], {**summary.holdout[1], "rolled_back": "counting, ocr"},
               {"epoch": 2, "which": "best", "run_id": "r_e2_best", "skills_version": "v2", "prompts_version": "v0", "n": 6,
                "hard_acc": 0.8333, "soft_score": None, "mixed_score": None, "rolled_back": None})
    summary = replace(summary, holdout=holdout, delivered={**summary.delivered, "rolled_back": "counting, ocr"})
    md = write_reports(summary, tmp_path)["markdown"].read_text()
    assert "| delivered | v2 with counting, ocr rolled back | v0 | 6 | 0.6667 |" in md
    assert "| best | v2 | v0 | 6 | 0.8333 |" in md
    assert "rolled_back=counting, ocr" in md
