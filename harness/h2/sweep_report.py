"""The sweep report: one row per (task, mode), summarised per (mode, k).

Rows are plain JSON (domain processes write them, the aggregate reads them).
Per (mode, k): tasks, crashed, graded / ungraded counts (a judge failure is
*ungraded*, never a zero; no judge configured = unscored), mean score over
graded tasks, pick provenance of the delivered harness (``final``: a
composed final that differs from every proposal; ``candidate``: the
delivered tree is one of the INV/DOM proposals; ``base``: the base tree),
fallbacks, USD. Warnings: a stage or the selector fell back, the judge
failed, the base was delivered on >= 80 % of a configuration's tasks
(harness/h2/report.py `BASE_PICK_WARN`), scores in mixed units, crashed
tasks. At k = 1 both modes are the same procedure, so their gap is the
noise floor, not a mode effect (stated in the report).

Base vs improved (seed 002: no gain is claimed without a base comparison on
the same tasks): each task's base deliverable is graded by the same judge as
its delivered one, and per (mode, k) and domain, and over all domains, the
report gives the base mean, the improved mean and the mean paired difference
(improved - base, paired over the same tasks) with a two-sided 95 % Student-t
interval (clipped to [-1, 1]). Its verdict says "gain" only when the interval lies above 0, "loss"
when below, and otherwise "no measurable gain (CI ...)"; fewer than two
graded pairs give no interval and no claim.
"""

from __future__ import annotations

import statistics
from typing import Any, Mapping, Sequence

from harness.h2.report import BASE_PICK_WARN, Score
from harness.h2.run import TaskResult

REPORT_VERSION = 1
PICKS = ("final", "candidate", "base")
NOISE_FLOOR_NOTE = (
    "At k = 1 parallel and sequential run the identical procedure (one unselected edit), so the gap between "
    "their scores is the noise floor of a single round, not a difference between the modes."
)


def pick_provenance(summary: Mapping[str, Any]) -> str:
    """Where the delivered tree came from: 'base', 'candidate' (an INV/DOM proposal) or 'final'."""
    if summary.get("delivered_is_base"):
        return "base"
    delivered = summary.get("delivered_fingerprint")
    proposals = {s.get("result") for s in summary.get("stages", []) if s.get("stage") in ("inv", "dom") and s.get("status") == "adopted"}
    return "candidate" if delivered in proposals else "final"


def _library_status(note: str | None) -> str | None:
    """'written' or the reason it was not (the entry's absolute path stays out of the report: reports must not depend on where the project lives)."""
    return "written" if note and note.startswith("written:") else note


def task_row(result: TaskResult, score: Score | None, *, judged: bool, base_score: Score | None = None) -> dict[str, Any]:
    """One finished (or resumed) task x mode; `base_score`: the same judge's grade of the task's base deliverable."""
    s = result.summary
    ledger = s.get("ledger", {})
    selection = s.get("selection", {})
    return {
        "task_id": result.task_id,
        "domain": result.domain,
        "mode": result.mode,
        "k": result.k,
        "status": "resumed" if result.skipped else "done",
        "pick": pick_provenance(s),
        "selection": selection.get("method"),
        "selection_error": selection.get("error"),
        "fallbacks": list(s.get("fallbacks", [])),
        "dead_probes": len(s.get("dead_probes", [])),
        "usd": float(ledger.get("total_usd", 0.0)),
        "rollout_usd": float(ledger.get("rollout_usd", 0.0)),
        "session_usd": float(ledger.get("session_usd", 0.0)),
        "budget_tripped": (s.get("budget") or {}).get("tripped"),
        "library": _library_status(s.get("library")),
        "base_fingerprint": result.base_fingerprint,
        "delivered_fingerprint": result.delivered_fingerprint,
        "judged": judged,
        "score": None if score is None else score.value,
        "score_unit": None if score is None else score.unit,
        "score_note": "" if score is None else score.note,
        "base_score": None if base_score is None else base_score.value,
        "base_score_note": "" if base_score is None else base_score.note,
        "error": None,
    }


def crashed_row(task_id: str, domain: str, mode: str, k: int, error: str) -> dict[str, Any]:
    """A task x mode that crashed (recorded, the sweep went on)."""
    return {
        "task_id": task_id, "domain": domain, "mode": mode, "k": k, "status": "crashed", "pick": None,
        "selection": None, "selection_error": None, "fallbacks": [], "dead_probes": 0, "usd": 0.0,
        "rollout_usd": 0.0, "session_usd": 0.0, "budget_tripped": None, "library": None,
        "base_fingerprint": None, "delivered_fingerprint": None, "judged": False, "score": None,
        "score_unit": None, "score_note": "", "base_score": None, "base_score_note": "", "error": error,
    }


def _config_summary(mode: str, k: int, rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    ran = [r for r in rows if r["status"] != "crashed"]
    judged = [r for r in ran if r["judged"]]
    graded = [r for r in judged if r["score"] is not None]
    picks = {p: sum(r["pick"] == p for r in ran) for p in PICKS}
    return {
        "mode": mode,
        "k": k,
        "tasks": len(rows),
        "crashed": len(rows) - len(ran),
        "graded": len(graded),
        "ungraded": len(judged) - len(graded),
        "unscored": len(ran) - len(judged),
        "score_mean": statistics.mean(r["score"] for r in graded) if graded else None,
        "score_units": sorted({r["score_unit"] for r in graded}),
        "picks": picks,
        "base_share": picks["base"] / len(ran) if ran else None,
        "fallbacks": sum(len(r["fallbacks"]) for r in ran),
        "tasks_with_fallback": sum(bool(r["fallbacks"]) or bool(r["selection_error"]) for r in ran),
        "dead_probes": sum(r["dead_probes"] for r in ran),
        "usd": sum(r["usd"] for r in ran),
        "rollout_usd": sum(r["rollout_usd"] for r in ran),
        "session_usd": sum(r["session_usd"] for r in ran),
    }


ALL_DOMAINS = "all"
CI_LEVEL = 0.95


def paired_comparison(pairs: Sequence[tuple[float, float]]) -> dict[str, Any]:
    """(base, improved) scores of the same tasks -> means, the mean paired difference with its two-sided 95 % Student-t
    interval, and the verdict: "gain" only when the interval lies above 0."""
    n = len(pairs)
    out: dict[str, Any] = {"pairs": n, "base_mean": None, "improved_mean": None, "diff_mean": None, "ci_low": None, "ci_high": None}
    if n == 0:
        return {**out, "verdict": "not compared: no task has both a graded base and a graded improved deliverable"}
    diffs = [improved - base for base, improved in pairs]
    out.update(base_mean=statistics.mean(b for b, _ in pairs), improved_mean=statistics.mean(i for _, i in pairs),
               diff_mean=statistics.mean(diffs))
    if n < 2:
        return {**out, "verdict": f"no measurable gain (1 pair, difference {out['diff_mean']:+.3f}: no interval)"}
    from scipy.stats import t  # lazily: only the report's aggregate needs it

    half = float(t.ppf(0.5 + CI_LEVEL / 2, n - 1)) * statistics.stdev(diffs) / n ** 0.5
    # scores lie in [0, 1], so a difference lies in [-1, 1]: the interval is clipped there (tiny n gives wide ones)
    low, high = max(-1.0, out["diff_mean"] - half), min(1.0, out["diff_mean"] + half)
    out.update(ci_low=low, ci_high=high)
    ci = f"{out['diff_mean']:+.3f}, 95 % CI [{low:+.3f}, {high:+.3f}], {n} pairs"
    verdict = f"gain ({ci})" if low > 0 else f"loss ({ci})" if high < 0 else f"no measurable gain ({ci})"
    return {**out, "verdict": verdict}


def comparisons(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Base vs improved per (mode, k) and domain, then over all domains (`domain` = "all"), graded pairs only."""
    out: list[dict[str, Any]] = []
    for mode, k in sorted({(r["mode"], int(r["k"])) for r in rows}, key=lambda mk: (mk[1], mk[0])):
        ran = [r for r in rows if r["mode"] == mode and int(r["k"]) == k and r["status"] != "crashed"]
        domains = list(dict.fromkeys(r["domain"] for r in ran))
        for domain in [*domains, ALL_DOMAINS]:
            chosen = [r for r in ran if domain in (ALL_DOMAINS, r["domain"])]
            pairs = [(float(r["base_score"]), float(r["score"])) for r in chosen
                     if r.get("judged") and r.get("score") is not None and r.get("base_score") is not None]
            out.append({"mode": mode, "k": k, "domain": domain, "tasks": len(chosen), **paired_comparison(pairs)})
    return out


def build_report(rows: Sequence[Mapping[str, Any]], *, meta: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The sweep-report.json content for `rows` (task x mode rows of every domain)."""
    configs_keys = sorted({(r["mode"], int(r["k"])) for r in rows}, key=lambda mk: (mk[1], mk[0]))
    configs = [_config_summary(m, k, [r for r in rows if r["mode"] == m and int(r["k"]) == k]) for m, k in configs_keys]
    warnings: list[str] = []
    for r in rows:
        where = f"{r['domain']}/{r['task_id']}/{r['mode']}/k{r['k']}"
        if r["status"] == "crashed":
            warnings.append(f"{where}: crashed — {r['error']}")
            continue
        for f in r["fallbacks"]:
            warnings.append(f"{where}: stage fell back — {f}")
        if r["selection_error"]:
            warnings.append(f"{where}: selection fell back — {r['selection_error']}")
        if r["judged"] and r["score"] is None:
            warnings.append(f"{where}: judge failed, ungraded ({r['score_note']})")
    for c in configs:
        if c["base_share"] is not None and c["base_share"] >= BASE_PICK_WARN:
            warnings.append(f"{c['mode']} k={c['k']}: the base harness was delivered on {c['base_share']:.0%} of tasks")
    units = sorted({r["score_unit"] for r in rows if r["score"] is not None})
    if len(units) > 1:
        warnings.append(f"scores mix units {units}; means across them are meaningless")
    noise: dict[str, Any] | None = None
    if any(c["k"] == 1 for c in configs):
        means = {c["mode"]: c["score_mean"] for c in configs if c["k"] == 1}
        gap = abs(means["parallel"] - means["sequential"]) if means.get("parallel") is not None and means.get("sequential") is not None else None
        noise = {"note": NOISE_FLOOR_NOTE, "gap": gap,
                 "detail": "measured: |mean parallel - mean sequential| at k = 1" if gap is not None else
                           "not measured: run both modes at k = 1 with a judge to measure it"}
    return {
        "version": REPORT_VERSION,
        "meta": dict(meta or {}),
        "configs": configs,
        "noise_floor": noise,
        "comparison": comparisons(rows),
        "warnings": warnings,
        "crashed": [{"task_id": r["task_id"], "domain": r["domain"], "mode": r["mode"], "k": r["k"], "error": r["error"]} for r in rows if r["status"] == "crashed"],
        "tasks": [dict(r) for r in rows],
    }


def _fmt(value: Any, spec: str = ".3f") -> str:
    return "–" if value is None else format(value, spec)


def render_markdown(report: Mapping[str, Any]) -> str:
    """The report as Markdown: the per-(mode, k) table, the noise-floor note, warnings, per-task rows."""
    meta = report.get("meta", {})
    lines = [f"# Harness² sweep {meta.get('run_tag', '')}".rstrip(), ""]
    if meta:
        lines += [", ".join(f"{k}: {v}" for k, v in meta.items() if not isinstance(v, (dict, list))), ""]
    lines += [
        "| mode | k | tasks | crashed | graded | ungraded | unscored | score | pick final / candidate / base | fallbacks | dead probes | USD |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for c in report["configs"]:
        unit = f" ({', '.join(c['score_units'])})" if c["score_units"] else ""
        p = c["picks"]
        lines.append(
            f"| {c['mode']} | {c['k']} | {c['tasks']} | {c['crashed']} | {c['graded']} | {c['ungraded']} | {c['unscored']} | "
            f"{_fmt(c['score_mean'])}{unit} | {p['final']} / {p['candidate']} / {p['base']} | {c['fallbacks']} | {c['dead_probes']} | {c['usd']:.4f} |"
        )
    if report.get("comparison"):
        lines += ["", "## Base vs improved (same tasks, same judge; paired difference improved − base, 95 % Student-t CI)", "",
                  "| mode | k | domain | pairs | base | improved | difference | 95 % CI | verdict |", "|---|---|---|---|---|---|---|---|---|"]
        for c in report["comparison"]:
            ci = "–" if c["ci_low"] is None else f"[{c['ci_low']:+.3f}, {c['ci_high']:+.3f}]"
            diff = "–" if c["diff_mean"] is None else f"{c['diff_mean']:+.3f}"
            lines.append(f"| {c['mode']} | {c['k']} | {c['domain']} | {c['pairs']} | {_fmt(c['base_mean'])} | {_fmt(c['improved_mean'])} | "
                         f"{diff} | {ci} | {c['verdict']} |")
    noise = report.get("noise_floor")
    if noise:
        lines += ["", f"**k = 1 noise floor.** {noise['note']} Gap: {_fmt(noise['gap'])} ({noise['detail']})."]
    if report["warnings"]:
        lines += ["", "## Warnings", ""] + [f"- {w}" for w in report["warnings"]]
    lines += ["", "## Tasks", "", "| domain | task | mode | k | status | pick | selection | fallbacks | USD | base score | score |",
              "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in report["tasks"]:
        score = ("ungraded" if r["score"] is None else f"{r['score']:.3f}") if r["judged"] else "–"
        base = r.get("base_score")
        base_score = ("ungraded" if base is None else f"{base:.3f}") if r["judged"] else "–"
        lines.append(
            f"| {r['domain']} | {r['task_id']} | {r['mode']} | {r['k']} | {r['status']} | {r['pick'] or '–'} | {r['selection'] or '–'} | "
            f"{len(r['fallbacks'])} | {r['usd']:.4f} | {base_score} | {score} |"
        )
    return "\n".join(lines) + "\n"
