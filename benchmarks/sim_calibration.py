"""Measure the simulated world's calibration and write reports/benchmarks/sim_calibration.md.

    /work/venv/bin/python benchmarks/sim_calibration.py [--seeds 7 1 2 3 4 5] [--steps 5] [--out PATH]

Every figure in the report is measured by this script (harness/sim/calibration.py
explains what each measurement runs).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from harness.atomic import atomic_write_text  # noqa: E402
from harness.sim.calibration import run_calibration  # noqa: E402
from harness.sim.world import WorldParams  # noqa: E402

TARGETS = {
    "base": (0.45, 0.60),
    "best": (0.80, 1.0),
    "helps": (0.25, 0.40),
    "hurts": (0.20, 0.33),
}


def _mean_range(xs: list[float]) -> str:
    return f"{statistics.mean(xs):.1%} (range {min(xs):.1%}–{max(xs):.1%})"


def _ok(value: float, bounds: tuple[float, float]) -> str:
    return "yes" if bounds[0] <= value <= bounds[1] else "**NO**"


def render(result, *, seeds, steps, val_size, diag_size, seconds: float, command: str) -> str:
    p = WorldParams()
    base, best = statistics.mean(result.base_accuracy_oracle), statistics.mean(result.best_accuracy_oracle)
    helps, hurts, neutral = (result.share_of_changed(c) for c in ("helps", "hurts", "neutral"))
    lines = [
        "# Sim world calibration",
        "",
        f"Command: `{command}` ({seconds:.1f} s wall).",
        f"Worlds: seeds {seeds}, default `WorldParams` (11 task types × 60 questions, 4 choices); "
        f"validation-sized pool = {val_size} questions, diagnosis pool = {diag_size}, {steps} editor steps per world.",
        "",
        "## Targets (issue 4 item 5)",
        "",
        "| measure | target | measured (mean over worlds) | ok |",
        "|---|---|---|---|",
        f"| base harness accuracy, validation pool (oracle) | 45–60 % | {_mean_range(result.base_accuracy_oracle)} | {_ok(base, TARGETS['base'])} |",
        f"| best reachable harness (all insights, no traps) | ≥ 80 % | {_mean_range(result.best_accuracy_oracle)} | {_ok(best, TARGETS['best'])} |",
        f"| editor proposals that help (of changed candidates) | 25–40 % | {helps:.1%} | {_ok(helps, TARGETS['helps'])} |",
        f"| editor proposals that hurt (of changed candidates) | 20–33 % | {hurts:.1%} | {_ok(hurts, TARGETS['hurts'])} |",
        "",
        "## Base harness",
        "",
        f"- oracle accuracy per world: {', '.join(f'{x:.1%}' for x in result.base_accuracy_oracle)}",
        f"- one sampled pass (sample index 0, real solver replies, scored by SimBenchmark): {', '.join(f'{x:.1%}' for x in result.base_accuracy_sampled)}",
        f"- best reachable per world: {', '.join(f'{x:.1%}' for x in result.best_accuracy_oracle)}",
        "",
        "## Discordance between two samples of the same harness",
        "",
        "Share of validation questions whose correctness differs between sample index 0 and 1 of the base harness",
        "(only discordant pairs carry gate evidence):",
        "",
        f"- measured: {_mean_range(result.discordance)}",
        f"- expected from the oracle, mean of 2p(1−p): {_mean_range(result.discordance_expected)}",
        "",
        "## Editor proposal mix",
        "",
        "Real `evolve_single_skill` (real prompts, real parser, real `apply_edits`) with the SimProvider on real failure",
        "case packs (rollouts of the current harness on the diagnosis pool → `run_diagnosis` → ≤ 8 cases per task type),",
        "edit budget 3 → 1 over the steps, blacklist of rejected applied edits carried; each changed candidate classified by",
        "`Oracle.classify_edit` on its task type's 60 questions (|Δ| ≤ 0.1 pp = neutral). A perfect (oracle) gate keeps the",
        "helping candidates, so later steps start from a harness that already states some insights.",
        "",
        "| class | count | share of changed | share of all editor calls |",
        "|---|---|---|---|",
    ]
    for cls in ("helps", "neutral", "hurts", "unchanged"):
        share_changed = f"{result.share_of_changed(cls):.1%}" if cls != "unchanged" else "—"
        lines.append(f"| {cls} | {result.proposals[cls]} | {share_changed} | {result.share_of_all(cls):.1%} |")
    lines += [
        "",
        f"Editor calls: {result.n_proposals}; declined (`<no-change>`): {result.no_change}; "
        f"unparseable twice (recorded `parse_error`, no change): {result.parse_errors}.",
        "",
        "Edit operations by apply status: "
        + ", ".join(f"{op}/{status} {n}" for (op, status), n in sorted(result.edit_ops.items())),
        "",
        f"Oracle validation accuracy after {steps} oracle-gated steps per world: {', '.join(f'{x:.1%}' for x in result.accuracy_after)}.",
        "",
        "## Knobs (WorldParams defaults)",
        "",
        f"insights/traps/neutrals per type {p.n_insights}/{p.n_traps}/{p.n_neutrals}; insight weight {p.insight_weight}, "
        f"trap weight {p.trap_weight}, coverage insight {p.insight_coverage} trap {p.trap_coverage}; base ability "
        f"N({p.base_ability_mean}, {p.base_ability_sd}); difficulty N(0, {p.difficulty_sd}); hint right {p.hint_right_prob}; "
        f"editor: malformed {p.editor_malformed_prob}, follow evidence {p.editor_follow_evidence_prob}, prior "
        f"(insight, neutral, trap, fix) {p.editor_prior}, edits per proposal {p.editor_n_edits}.",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[7, 1, 2, 3, 4, 5])
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--val-size", type=int, default=220)
    parser.add_argument("--diag-size", type=int, default=220)
    parser.add_argument("--out", type=Path, default=ROOT / "reports" / "benchmarks" / "sim_calibration.md")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    result = run_calibration(args.seeds, val_size=args.val_size, diag_size=args.diag_size, steps=args.steps)
    seconds = time.perf_counter() - started
    command = "python benchmarks/sim_calibration.py " + " ".join(argv if argv is not None else sys.argv[1:])
    text = render(result, seeds=args.seeds, steps=args.steps, val_size=args.val_size, diag_size=args.diag_size, seconds=seconds, command=command.strip())
    args.out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(args.out, text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
