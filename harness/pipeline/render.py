"""Render a `RunSummary` into the files of ``reports/``.

- ``metrics.json``                 flat final metrics (`dvc metrics show/diff`)
- ``plots/accuracy.json``          one row per epoch (`dvc plots show`)
- ``plots/gate_evidence/<gate>.csv``  the accept e-process path of each gate (seq, log_e)
- ``report.md``                    the run report in Markdown
- ``report.html``                  the same, self-contained, with inline SVG charts

Everything is deterministic (no timestamps), so an interrupted-and-resumed
run renders byte-identical files to an uninterrupted one. Writes are atomic.
"""

from __future__ import annotations

import csv
import io
import re
import shutil
from html import escape
from pathlib import Path
from typing import Any, Sequence

from harness.atomic import atomic_write_json, atomic_write_text
from harness.pipeline.summary import RunSummary
from harness.pipeline.svg import Series, line_chart_svg

METRICS_FILE = "metrics.json"
ACCURACY_PLOT = "plots/accuracy.json"
GATE_EVIDENCE_DIR = "plots/gate_evidence"
REPORT_MD = "report.md"
REPORT_HTML = "report.html"


def write_reports(summary: RunSummary, out_dir: Path) -> dict[str, Path]:
    """Write every report file under `out_dir`; returns {kind: path}."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {
        "metrics": atomic_write_json(out_dir / METRICS_FILE, summary.final_metrics()),
        "accuracy_plot": atomic_write_json(out_dir / ACCURACY_PLOT, accuracy_rows(summary)),
        "gate_evidence": _write_gate_paths(summary, out_dir / GATE_EVIDENCE_DIR),
        "markdown": atomic_write_text(out_dir / REPORT_MD, render_markdown(summary)),
        "html": atomic_write_text(out_dir / REPORT_HTML, render_html(summary)),
    }
    return paths


def accuracy_rows(summary: RunSummary) -> list[dict[str, Any]]:
    """Per-epoch plot rows; absent values are left out of a row (not 0)."""
    keys = ("val_hard_acc", "best_val_acc", "val_soft_score", "val_mixed_score", "true_val_acc", "true_test_acc")
    rows = []
    for e in summary.epochs:
        row: dict[str, Any] = {"epoch": e.epoch}
        row.update({k: getattr(e, k) for k in keys if getattr(e, k) is not None})
        rows.append(row)
    return rows


def _write_gate_paths(summary: RunSummary, directory: Path) -> Path:
    if directory.exists():
        shutil.rmtree(directory)
    directory.mkdir(parents=True)
    for gate_run_id, points in sorted(summary.gate_paths.items()):
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        writer.writerow(["seq", "log_e"])
        writer.writerows((seq, f"{log_e:.6f}") for seq, log_e in points)
        atomic_write_text(directory / f"{_safe_name(gate_run_id)}.csv", buffer.getvalue())
    return directory


def _safe_name(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text)


# ------------------------------------------------------------------ charts


def accuracy_chart(summary: RunSummary) -> str:
    def series(label: str, attr: str, dashed: bool = False) -> Series | None:
        points = [(e.epoch, getattr(e, attr)) for e in summary.epochs if getattr(e, attr) is not None]
        return Series(label, points, dashed) if points else None

    wanted = [
        series("val accuracy (measured)", "val_hard_acc"),
        series("best val accuracy", "best_val_acc"),
        series("val accuracy (true, oracle)", "true_val_acc", dashed=True),
        series("test accuracy (true, oracle)", "true_test_acc", dashed=True),
    ]
    return line_chart_svg([s for s in wanted if s], title="Accuracy per epoch", x_label="epoch", y_label="accuracy")


def gate_evidence_chart(summary: RunSummary) -> str:
    series = [Series(gate, [(float(seq), log_e) for seq, log_e in points]) for gate, points in sorted(summary.gate_paths.items())]
    hlines = {}
    if summary.accept_threshold is not None:
        hlines["accept (gate.lambda)"] = summary.accept_threshold
    return line_chart_svg(series, title="Gate evidence: log e-process per pair", x_label="pair", y_label="log E", hlines=hlines)


# ------------------------------------------------------------------ tables


def _fmt(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.4f}"
    return str(value)


def _epoch_table(summary: RunSummary) -> tuple[list[str], list[list[str]]]:
    header = ["epoch", "val acc", "soft", "mixed", "best val", "accepted", "rejected", "probation", "rollouts", "USD"]
    if summary.oracle_available:
        header += ["true val acc", "true test acc"]
    rows = []
    for e in summary.epochs:
        row = [e.epoch, e.val_hard_acc, e.val_soft_score, e.val_mixed_score, e.best_val_acc,
               e.accepted, e.rejected, e.probation, e.rollouts, e.usd]
        if summary.oracle_available:
            row += [e.true_val_acc, e.true_test_acc]
        rows.append([_fmt(v) for v in row])
    return header, rows


def _gate_table(summary: RunSummary) -> tuple[list[str], list[list[str]]]:
    header = ["epoch", "step", "task type", "action", "level", "log E", "wins", "losses", "ties", "pairs",
              "unparsed base", "unparsed cand", "reason"]
    rows = [[_fmt(v) for v in (g.epoch, g.step, g.task_type, g.action, None if g.fdr_level is None else f"{g.fdr_level:.3g}",
                               g.log_e, g.wins, g.losses, g.ties, g.n_pairs, g.parse_failure_base, g.parse_failure_cand, g.reason)]
            for g in summary.gates]
    return header, rows


def _holdout_table(summary: RunSummary) -> tuple[list[str], list[list[str]]]:
    header = ["which", "skills", "prompts", "n", "hard acc", "soft", "mixed"]
    rows = [[_fmt(r.get(k)) for k in ("which", "skills_version", "prompts_version", "n", "hard_acc", "soft_score", "mixed_score")]
            for r in summary.holdout]
    return header, rows


def _markdown_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    if not rows:
        return "_none_\n"
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def _html_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    if not rows:
        return "<p><em>none</em></p>\n"
    head = "".join(f"<th>{escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{escape(c)}</td>" for c in row) + "</tr>\n" for row in rows)
    return f"<table>\n<thead><tr>{head}</tr></thead>\n<tbody>\n{body}</tbody>\n</table>\n"


# ------------------------------------------------------------------ documents


def _headline(summary: RunSummary) -> list[tuple[str, str]]:
    m = summary.final_metrics()
    items = [
        ("run", summary.run_name),
        ("benchmark", summary.benchmark),
        ("epochs run", _fmt(m["epochs_run"])),
        ("best validation accuracy", _fmt(m["best_val_acc"])),
        ("test accuracy (delivered harness)", _fmt(m["test_hard_acc"])),
        ("edits accepted / rejected / probation", f"{m['accepted']} / {m['rejected']} / {m['probation']}"),
        ("answers with no readable choice (parse failure rate)", _fmt(m["parse_failure_rate"])),
        ("answer parse modes (share of judged rollouts)",
         ", ".join(f"{k.removeprefix('parse_share_')} {_fmt(v)}" for k, v in m.items() if k.startswith("parse_share_"))),
        ("rollouts", _fmt(m["rollouts"])),
        ("USD", _fmt(m["usd"])),
    ]
    if summary.delivered:
        items.append(("delivered harness", ", ".join(f"{k}={_fmt(v)}" for k, v in sorted(summary.delivered.items()))))
    if summary.oracle_available:
        items.append(("true test accuracy (oracle, delivered)", _fmt(m.get("true_test_acc_delivered"))))
    return items


def render_markdown(summary: RunSummary) -> str:
    parts = [f"# Training report: {summary.run_name}\n"]
    parts.append("\n".join(f"- **{k}**: {v}" for k, v in _headline(summary)) + "\n")
    parts.append("\n## Per-epoch metrics\n")
    if summary.oracle_available:
        parts.append("True accuracies come from the simulated world's oracle (exact expectation); the loop never sees them.\n\n")
    parts.append(_markdown_table(*_epoch_table(summary)))
    parts.append("\nCurves: `dvc plots show` or report.html.\n")
    parts.append("\n## Gate decisions\n")
    parts.append(_markdown_table(*_gate_table(summary)))
    parts.append("\n## Held-out evaluation (test pool)\n")
    parts.append(_markdown_table(*_holdout_table(summary)))
    return "".join(parts)


_CSS = (
    "body{font-family:sans-serif;max-width:1100px;margin:2em auto;color:#222}"
    "table{border-collapse:collapse;margin:.5em 0 1.5em}td,th{border:1px solid #ccc;padding:3px 8px;font-size:13px}"
    "th{background:#f3f3f3}dt{font-weight:bold;float:left;clear:left;width:22em}dd{margin-left:23em}"
)


def render_html(summary: RunSummary) -> str:
    headline = "".join(f"<dt>{escape(k)}</dt><dd>{escape(v)}</dd>\n" for k, v in _headline(summary))
    oracle_note = (
        "<p>Dashed lines: true accuracy from the simulated world's oracle (exact expectation); the loop never sees it.</p>\n"
        if summary.oracle_available else ""
    )
    return (
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head><meta charset=\"utf-8\">"
        f"<title>Training report: {escape(summary.run_name)}</title><style>{_CSS}</style></head>\n<body>\n"
        f"<h1>Training report: {escape(summary.run_name)}</h1>\n<dl>\n{headline}</dl>\n"
        "<h2>Per-epoch metrics</h2>\n"
        f"{accuracy_chart(summary)}{oracle_note}{_html_table(*_epoch_table(summary))}"
        "<h2>Gate decisions</h2>\n"
        f"{gate_evidence_chart(summary)}{_html_table(*_gate_table(summary))}"
        "<h2>Held-out evaluation (test pool)</h2>\n"
        f"{_html_table(*_holdout_table(summary))}"
        "</body>\n</html>\n"
    )
