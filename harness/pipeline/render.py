"""Render a `RunSummary` into the files of ``reports/``.

- ``metrics.json``                 flat final metrics (`dvc metrics show/diff`)
- ``plots/accuracy.svg``           accuracy per epoch: measured, best, and (simulator) true      } `dvc plots show`:
- ``plots/gate_evidence.svg``      the gates' log E paths, one small multiple per task type       } images, readable
- ``plots/cost.svg``               rollouts per epoch by purpose (and USD when there is any)     } offline
- ``plots/accuracy.json``          the accuracy chart's data, one row per epoch
- ``plots/gate_evidence/<gate>.csv``  the accept e-process path of each gate (seq, log_e)
- ``report.md``                    the run report in Markdown (the three charts as images)
- ``report.html``                  the same, self-contained, with the charts inline
- ``timing.md``                    LLM calls and wall time per stage kind and role (this execution's measurement)

Everything but ``timing.md`` is deterministic (no timestamps, no wall times), so an interrupted-and-resumed
run renders byte-identical files to an uninterrupted one. Writes are atomic.
"""

from __future__ import annotations

import csv
import io
import math
import re
import shutil
import statistics
from html import escape
from pathlib import Path
from typing import Any, Sequence

from harness.atomic import atomic_write_json, atomic_write_text
from harness.identity import PURPOSES
from harness.pipeline.collect import CAUSES
from harness.pipeline.evaluate import wilson_interval
from harness.pipeline.summary import RunSummary
from harness.pipeline.svg import PALETTE, Panel, Series, line_chart_svg, small_multiples_svg, stacked_bars_svg

METRICS_FILE = "metrics.json"
ACCURACY_PLOT = "plots/accuracy.json"
GATE_EVIDENCE_DIR = "plots/gate_evidence"
# The charts `dvc plots show` renders (dvc.yaml `plots:`) and report.md shows, as SVG images.
CHARTS = {"accuracy_chart": "plots/accuracy.svg", "gate_evidence_chart": "plots/gate_evidence.svg",
          "cost_chart": "plots/cost.svg"}
REPORT_MD = "report.md"
REPORT_HTML = "report.html"
TIMING_MD = "timing.md"


def write_reports(summary: RunSummary, out_dir: Path) -> dict[str, Path]:
    """Write every report file under `out_dir`; returns {kind: path}."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {
        "metrics": atomic_write_json(out_dir / METRICS_FILE, summary.final_metrics()),
        "accuracy_plot": atomic_write_json(out_dir / ACCURACY_PLOT, accuracy_rows(summary)),
        "gate_evidence": _write_gate_paths(summary, out_dir / GATE_EVIDENCE_DIR),
        "accuracy_chart": atomic_write_text(out_dir / CHARTS["accuracy_chart"], accuracy_chart(summary)),
        "gate_evidence_chart": atomic_write_text(out_dir / CHARTS["gate_evidence_chart"], gate_evidence_chart(summary)),
        "cost_chart": atomic_write_text(out_dir / CHARTS["cost_chart"], cost_chart(summary)),
        "markdown": atomic_write_text(out_dir / REPORT_MD, render_markdown(summary)),
        "html": atomic_write_text(out_dir / REPORT_HTML, render_html(summary)),
        "timing": atomic_write_text(out_dir / TIMING_MD, render_timing(summary)),
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
    """Accuracy per epoch. "Best so far" equals the measured validation at every epoch that improved it, so the
    measured line is drawn first, wide with filled dots, and "best so far" on top of it, thin and dotted with hollow
    squares: where they coincide both stay visible (tests/pipeline/test_render.py checks the styles)."""
    def series(label: str, attr: str, color: str, **style: Any) -> Series | None:
        points = [(e.epoch, getattr(e, attr)) for e in summary.epochs if getattr(e, attr) is not None]
        return Series(label, points, color=color, **style) if points else None

    wanted = [
        series("validation (measured)", "val_hard_acc", PALETTE[0], width=3.5, marker="dot"),
        series("best validation so far", "best_val_acc", PALETTE[1], width=1.5, dash="2,3", marker="square"),
        series("validation (true, oracle)", "true_val_acc", PALETTE[0], width=1.2, dashed=True, marker="ring"),
        series("test (true, oracle)", "true_test_acc", PALETTE[2], width=1.2, dashed=True, marker="ring"),
    ]
    return line_chart_svg([s for s in wanted if s], title="Accuracy per epoch", x_label="epoch", y_label="accuracy",
                          chart="accuracy", integer_x=True)


# colour of a gate's path by its decision
ACTION_COLORS = {"accept": "#2ca02c", "probation": "#ff7f0e", "reject": "#b0b0b0"}


def gate_evidence_chart(summary: RunSummary) -> str:
    """The log E path of every gate, one panel per task type (same scales), coloured by the decision."""
    decisions = {g.gate_run_id: g for g in summary.gates if g.gate_run_id}
    panels = []
    for task_type, gates in _gates_by_task_type(summary).items():
        series = []
        for g in gates:
            points = summary.gate_paths.get(g.gate_run_id or "", ())
            if points:
                series.append(Series(f"e{g.epoch}.s{g.step}", [(float(seq), log_e) for seq, log_e in points],
                                     color=ACTION_COLORS.get(g.action, PALETTE[4])))
        series.sort(key=lambda s: s.color == ACTION_COLORS["reject"], reverse=True)  # accepts drawn on top
        counts = _action_counts(gates)
        title = f"{task_type}: {counts['accept']}/{len(gates)} accepted"
        panels.append(Panel(title, series, key=task_type))
    # gates whose evidence path has no decision row (none expected) still show, in their own panel
    orphans = [Series(run_id, [(float(q), v) for q, v in points], color=PALETTE[4])
               for run_id, points in sorted(summary.gate_paths.items()) if run_id not in decisions]
    if orphans:
        panels.append(Panel("no decision recorded", orphans, key="unknown"))
    hlines = accept_line(summary)
    legend = [("accepted", ACTION_COLORS["accept"], False), ("probation", ACTION_COLORS["probation"], False),
              ("rejected", ACTION_COLORS["reject"], False)]
    return small_multiples_svg(panels, title="Gate evidence: log E per pair, one panel per task type",
                               x_label="pairs", y_label="log E", legend=legend, hlines=hlines, chart="gate-evidence")


def accept_line(summary: RunSummary) -> dict[str, float]:
    """The accept threshold to draw on the log E axis. A gate accepts when log E reaches log(1/level) of the
    level it was given: under e-LOND that level differs per gate (the line is the median, the label gives the
    range); with a fixed level it is gate.lambda for every gate."""
    thresholds = sorted(math.log(1.0 / g.fdr_level) for g in summary.gates if g.fdr_level)
    if not thresholds:
        return {"accept at gate.lambda": summary.accept_threshold} if summary.accept_threshold is not None else {}
    median = statistics.median(thresholds)
    if math.isclose(thresholds[0], thresholds[-1], abs_tol=1e-9):
        return {f"accept at log(1/level) = {median:.2f}": median}
    return {f"accept at log(1/level): median {median:.2f}, {thresholds[0]:.2f}-{thresholds[-1]:.2f} per gate": median}


def cost_chart(summary: RunSummary) -> str:
    """Rollouts per epoch, stacked by what they were for; the USD per epoch in a note under the bars."""
    epochs = [e.epoch for e in summary.epochs]
    present = {p for e in epochs for p in summary.rollouts_by_purpose.get(e, {})}
    stacks = {p: [float(summary.rollouts_by_purpose.get(e, {}).get(p, 0)) for e in epochs] for p in PURPOSES if p in present}
    if not stacks:  # no per-purpose split (an older summary): the totals
        stacks = {"rollouts": [float(e.rollouts) for e in summary.epochs]}
    usd = [e.usd for e in summary.epochs]
    note = ("USD per epoch: " + ", ".join(f"e{e.epoch} {e.usd:.4f}" for e in summary.epochs)) if any(usd) else \
        "USD: 0 (no priced calls in this run)"
    return stacked_bars_svg([f"epoch {e}" for e in epochs], stacks, title="Cost per epoch: rollouts by purpose",
                            x_label="", y_label="rollouts", note=note, chart="cost")


def _gates_by_task_type(summary: RunSummary) -> dict[str, list[Any]]:
    grouped: dict[str, list[Any]] = {}
    for g in summary.gates:
        grouped.setdefault(g.task_type, []).append(g)
    return dict(sorted(grouped.items()))


def _action_counts(gates: Sequence[Any]) -> dict[str, int]:
    counts = {"accept": 0, "reject": 0, "probation": 0}
    for g in gates:
        counts[g.action] = counts.get(g.action, 0) + 1
    return counts


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


def _gate_summary_table(summary: RunSummary) -> tuple[list[str], list[list[str]]]:
    """One row per task type: its gates and decisions, the evidence they used and the largest log E reached."""
    header = ["task type", "gates", "accepted", "probation", "rejected", "skipped", "pairs (median)", "rollouts",
              "max log E"]
    rows = []
    for task_type, gates in _gates_by_task_type(summary).items():
        counts = _action_counts(gates)
        skipped = len(gates) - counts["accept"] - counts["probation"] - counts["reject"]  # cooldown, no failures
        pairs = sorted(g.n_pairs for g in gates if g.n_pairs is not None)
        median = None if not pairs else (pairs[(len(pairs) - 1) // 2] + pairs[len(pairs) // 2]) / 2
        median = int(median) if median is not None and float(median).is_integer() else median
        log_es = [g.log_e for g in gates if g.log_e is not None]
        rows.append([task_type] + [_fmt(v) for v in (len(gates), counts["accept"], counts["probation"], counts["reject"],
                                                     skipped, median, sum(g.rollouts or 0 for g in gates),
                                                     max(log_es) if log_es else None)])
    return header, rows


def _gate_table(summary: RunSummary) -> tuple[list[str], list[list[str]]]:
    header = ["epoch", "step", "task type", "action", "level", "log E", "wins", "losses", "ties", "pairs",
              "unparsed base", "unparsed cand", "reason"]
    rows = [[_fmt(v) for v in (g.epoch, g.step, g.task_type, g.action, None if g.fdr_level is None else f"{g.fdr_level:.3g}",
                               g.log_e, g.wins, g.losses, g.ties, g.n_pairs, g.parse_failure_base, g.parse_failure_cand, g.reason)]
            for g in summary.gates]
    return header, rows


HOLDOUT_INTERVAL = "95 % interval (Wilson, per rollout)"


def _wilson(row: dict[str, Any]) -> str:
    n, acc = row.get("n"), row.get("hard_acc")
    if not n or acc is None:
        return "n/a"
    low, high = wilson_interval(round(float(acc) * int(n)), int(n))
    return f"[{low:.4f}, {high:.4f}]"


def _holdout_table(summary: RunSummary) -> tuple[list[str], list[list[str]]]:
    header = ["which", "skills", "prompts", "n", "hard acc", HOLDOUT_INTERVAL, "soft", "mixed"]
    rows = [[_fmt(r.get("which")), _fmt(r.get("skills_version")) + (f" with {r['rolled_back']} rolled back" if r.get("rolled_back") else "")]
            + [_fmt(r.get(k)) for k in ("prompts_version", "n", "hard_acc")] + [_wilson(r)]
            + [_fmt(r.get(k)) for k in ("soft_score", "mixed_score")] for r in summary.holdout]
    return header, rows


# ------------------------------------------------------------------ what was tried, and why nothing was installed


def _proposal_table(summary: RunSummary) -> tuple[list[str], list[list[str]]]:
    header = ["epoch.step", "task type", "file", "proposed change", "edits applied / proposed", "decision", "why", "log E",
              "pairs", "reason"]
    rows = [[f"{p.epoch}.{p.step}", p.task_type, p.skill_file, p.excerpt, f"{p.edits_applied} / {p.edits_proposed}", p.decision,
             p.cause, _fmt(p.log_e), _fmt(p.n_pairs), p.reason] for p in summary.proposals]
    return header, rows


def cause_counts(summary: RunSummary) -> dict[str, int]:
    """`collect.CAUSES` key -> proposals of the run with that outcome (zero counts left out)."""
    counts: dict[str, int] = {}
    for p in summary.proposals:
        counts[p.cause] = counts.get(p.cause, 0) + 1
    return {cause: counts[cause] for cause in CAUSES if counts.get(cause)}


def _cause_table(summary: RunSummary) -> tuple[list[str], list[list[str]]]:
    return ["outcome", "proposals"], [[CAUSES[c], str(n)] for c, n in cause_counts(summary).items()]


def tried_lines(summary: RunSummary) -> list[str]:
    """The measured account of the proposals: the gates' pairs and ties, the diagnoser's parse count, and when nothing
    was installed, the largest cause."""
    gated = [g for g in summary.gates if g.n_pairs]
    pairs = sum(g.n_pairs or 0 for g in gated)
    ties = sum(g.ties or 0 for g in gated)
    wins = sum(g.wins or 0 for g in gated)
    losses = sum(g.losses or 0 for g in gated)
    lines = [f"{len(summary.proposals)} edits proposed; {len(gated)} gates ran {pairs} pairs: {wins} wins, {losses} losses, "
             f"{ties} ties" + (f" ({100 * ties / pairs:.0f} % ties)" if pairs else "") + "."]
    if summary.diagnosis_cases:
        lines.append(f"Diagnoser: {summary.diagnosis_unparseable} of {summary.diagnosis_cases} failure diagnoses did not parse "
                     "(those failures reached the editor without a diagnosis).")
    counts = cause_counts(summary)
    if not counts.get("accepted") and not counts.get("probation"):
        refused = {c: n for c, n in counts.items() if c not in ("accepted", "probation")}
        if refused:
            top = max(refused, key=lambda c: refused[c])
            lines.append(f"Nothing was installed. Largest measured cause: {CAUSES[top].lower()} ({refused[top]} of "
                         f"{len(summary.proposals)} proposals); " + ", ".join(f"{CAUSES[c].lower()}: {n}" for c, n in refused.items()) + ".")
        else:
            lines.append("Nothing was installed: the editor proposed no edit (no failures, or every skill in cooldown).")
    return lines


# ------------------------------------------------------------------ LLM calls per stage and role


def _role_table(summary: RunSummary) -> tuple[list[str], list[list[str]]]:
    header = ["stage", "role", "calls", "prompt tokens", "completion tokens", "USD"]
    rows = [[kind, role, str(r["calls"]), str(r["prompt_tokens"]), str(r["completion_tokens"]), f"{r['usd']:.4f}"]
            for kind, roles in summary.spend_by_stage.items() for role, r in roles.items()]
    return header, rows


ROLES_NOTE = (f"Wall time per stage and role: [{TIMING_MD}]({TIMING_MD}) (a measurement of this execution, kept out of this "
              "report so that a resumed run renders it byte-identical).")


def render_timing(summary: RunSummary) -> str:
    """reports/timing.md: each stage kind's LLM calls per role with the seconds this execution waited for them."""
    rows = []
    for kind, roles in summary.spend_by_stage.items():
        for role, r in roles.items():
            fresh = int(r["calls"]) - int(r["replayed"])
            seconds = float(r.get("seconds", 0.0))
            rows.append([kind, role, str(r["calls"]), str(r["replayed"]), f"{seconds:.2f}",
                         f"{seconds / r['calls']:.3f}" if r["calls"] else "n/a", str(fresh)])
    return (f"# Timing: {summary.run_name}\n\n"
            "LLM calls per stage kind and role, and the seconds this execution waited for their replies (the sum of the "
            "calls' latencies: calls run `llm.concurrency` at a time, so the sum can exceed the stage's wall time; a "
            "replayed call is a response-cache lookup). This file describes one execution: a resumed or re-run "
            "stage has more replayed calls and fewer seconds.\n\n"
            + _markdown_table(["stage", "role", "calls", "replayed", "seconds", "seconds / call", "calls to the server"], rows))


def _pts(value: Any) -> str:
    return "n/a" if value is None else f"{100 * value:+.1f}"


def _certificate_tables(summary: RunSummary) -> tuple[tuple[list[str], list[list[str]]], tuple[list[str], list[list[str]]]]:
    """(attempts, per task type of the delivered attempt, or of the first one tried) of the delivery certificate."""
    cert = summary.certificate
    header = ["candidate", "alpha", "decision", "pairs", "wins / losses / ties", "rollouts", "gain (pts)",
              "anytime bounds (pts)", "width (pts)", "log E / threshold", "reason"]
    rows = [[a.label, f"{a.alpha:.4g}", a.decision, str(a.pairs), f"{a.wins} / {a.losses} / {a.ties}", str(a.rollouts),
             _pts(a.estimate), f"[{_pts(a.lower_bound)}, {_pts(a.upper_bound)}]", "n/a" if a.width is None else f"{100 * a.width:.1f}",
             "n/a" if a.log_e is None else f"{a.log_e:.2f} / {a.threshold:.2f}", a.reason] for a in cert.attempts]
    shown = cert.described
    type_header = ["task type", "pairs", "gain (pts)", "95 % interval (fixed-n, indicative)", "flagged"]
    # a type that reads identical input under both harnesses: its gain is exactly 0, not estimated (no pairs)
    type_rows = [[t.task_type, str(t.pairs), "0 (identical input)" if t.identical_input else _pts(t.estimate),
                  "exact" if t.identical_input else f"[{_pts(t.ci_low)}, {_pts(t.ci_high)}]", "YES" if t.flagged else ""]
                 for t in (shown.per_task_type if shown else [])]
    return (header, rows), (type_header, type_rows)


def _certificate_intro(summary: RunSummary) -> str:
    cert = summary.certificate
    pop = cert.population
    flagged = (f" Task types whose estimated change is below the flag: {', '.join(cert.flagged_task_types)} — check their skill files."
               if cert.flagged_task_types else "")
    identical = pop.get("identical_task_types") or []
    asked = (f" Only the questions whose input changed were asked ({pop.get('asked_questions')} of them); task types that read "
             f"identical input under both harnesses (gain exactly 0): {', '.join(identical)}." if identical else "")
    return (f"{cert.summary}. Population: {pop.get('n_questions')} questions of the {pop.get('pool')} pool, sampled "
            f"{pop.get('sampling')}; baseline: {cert.baseline.get('label')}; {cert.rollouts} rollouts.{asked}{flagged}")


def _markdown_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    if not rows:
        return "_none_\n"
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell.replace("|", "\\|").replace("\n", "<br>") for cell in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def _html_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    if not rows:
        return "<p><em>none</em></p>\n"
    head = "".join(f"<th>{escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{escape(c).replace(chr(10), '<br>')}</td>" for c in row) + "</tr>\n" for row in rows)
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
    if summary.soft_calibration is not None:  # what a soft gate (gate.metric=soft) tests is the accuracy only if this is ~0
        n, gap, se = summary.soft_calibration
        items.append(("soft score minus accuracy (calibration gap)", f"{gap:+.4f} ± {se:.4f} over {n} judged rollouts"))
    if summary.usd_by_role:  # every role's calls, replayed ones at their original price
        items.append(("USD by role", ", ".join(f"{role} {_fmt(usd)}" for role, usd in sorted(summary.usd_by_role.items()))))
    if summary.delivered:
        items.append(("delivered harness", ", ".join(f"{k}={_fmt(v)}" for k, v in sorted(summary.delivered.items()))))
    if summary.oracle_available:
        items.append(("true test accuracy (oracle, delivered)", _fmt(m.get("true_test_acc_delivered"))))
    if summary.certificate is not None:
        items.insert(5, ("delivery certificate", summary.certificate.summary))
    return items


def render_markdown(summary: RunSummary) -> str:
    parts = [f"# Training report: {summary.run_name}\n"]
    parts.append("\n".join(f"- **{k}**: {v}" for k, v in _headline(summary)) + "\n")
    parts.append("\n## Per-epoch metrics\n")
    if summary.oracle_available:
        parts.append("True accuracies come from the simulated world's oracle (exact expectation); the loop never sees them.\n\n")
    parts.append(_markdown_table(*_epoch_table(summary)))
    parts.append(f"\n![Accuracy per epoch]({CHARTS['accuracy_chart']})\n\n![Cost per epoch]({CHARTS['cost_chart']})\n")
    parts.append("\n## Gate decisions\n")
    parts.append(f"\n![Gate evidence per task type]({CHARTS['gate_evidence_chart']})\n\n")
    parts.append(_markdown_table(*_gate_summary_table(summary)))
    parts.append(f"\n<details><summary>All {len(summary.gates)} gate decisions</summary>\n\n")
    parts.append(_markdown_table(*_gate_table(summary)))
    parts.append("\n</details>\n")
    parts.append("\n## What was tried\n\n" + "\n".join(tried_lines(summary)) + "\n\n")
    parts.append(_markdown_table(*_cause_table(summary)))
    parts.append(f"\n<details><summary>All {len(summary.proposals)} proposed edits</summary>\n\n")
    parts.append(_markdown_table(*_proposal_table(summary)))
    parts.append("\n</details>\n")
    parts.append("\n## LLM calls per stage and role\n\n" + ROLES_NOTE + "\n\n")
    parts.append(_markdown_table(*_role_table(summary)))
    if summary.certificate is not None:
        attempts, types = _certificate_tables(summary)
        parts.append("\n## Delivery certificate\n\n" + _certificate_intro(summary) + "\n\n")
        parts.append(_markdown_table(*attempts) + "\n" + _markdown_table(*types))
    parts.append("\n## Held-out evaluation (test pool)\n")
    parts.append(_markdown_table(*_holdout_table(summary)))
    return "".join(parts)


_CSS = (
    "body{font-family:sans-serif;max-width:1100px;margin:2em auto;color:#222}"
    "table{border-collapse:collapse;margin:.5em 0 1.5em}td,th{border:1px solid #ccc;padding:3px 8px;font-size:13px}"
    "th{background:#f3f3f3}table.summary th{text-align:left;vertical-align:top;width:22em}"
    "table.summary td{vertical-align:top}"
    "svg{display:block;margin:.5em 0;max-width:100%;height:auto}summary{cursor:pointer;margin:.5em 0 1em}"
)


def _certificate_html(summary: RunSummary) -> str:
    if summary.certificate is None:
        return ""
    attempts, types = _certificate_tables(summary)
    return (f"<h2>Delivery certificate</h2>\n<p>{escape(_certificate_intro(summary))}</p>\n"
            f"{_html_table(*attempts)}{_html_table(*types)}")


def render_html(summary: RunSummary) -> str:
    # a table, not floated <dt>/<dd>: a label that wraps can never push its value beside the next label
    headline = "".join(f'<tr><th scope="row">{escape(k)}</th><td>{escape(v)}</td></tr>\n' for k, v in _headline(summary))
    oracle_note = (
        "<p>Dashed lines: true accuracy from the simulated world's oracle (exact expectation); the loop never sees it.</p>\n"
        if summary.oracle_available else ""
    )
    return (
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head><meta charset=\"utf-8\">"
        f"<title>Training report: {escape(summary.run_name)}</title><style>{_CSS}</style></head>\n<body>\n"
        f"<h1>Training report: {escape(summary.run_name)}</h1>\n<table class=\"summary\">\n<tbody>\n{headline}</tbody>\n</table>\n"
        "<h2>Per-epoch metrics</h2>\n"
        f"{accuracy_chart(summary)}{oracle_note}{cost_chart(summary)}{_html_table(*_epoch_table(summary))}"
        "<h2>Gate decisions</h2>\n"
        f"{gate_evidence_chart(summary)}<h3>Per task type</h3>\n{_html_table(*_gate_summary_table(summary))}"
        f"<details><summary>All {len(summary.gates)} gate decisions</summary>\n{_html_table(*_gate_table(summary))}</details>\n"
        "<h2>What was tried</h2>\n" + "".join(f"<p>{escape(line)}</p>\n" for line in tried_lines(summary))
        + f"{_html_table(*_cause_table(summary))}"
        f"<details><summary>All {len(summary.proposals)} proposed edits</summary>\n{_html_table(*_proposal_table(summary))}</details>\n"
        f"<h2>LLM calls per stage and role</h2>\n<p>Wall time per stage and role: <a href=\"{TIMING_MD}\">{TIMING_MD}</a> "
        "(a measurement of this execution, kept out of this report so that a resumed run renders it byte-identical).</p>\n"
        f"{_html_table(*_role_table(summary))}"
        f"{_certificate_html(summary)}"
        "<h2>Held-out evaluation (test pool)</h2>\n"
        f"{_html_table(*_holdout_table(summary))}"
        "</body>\n</html>\n"
    )
