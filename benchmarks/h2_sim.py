"""Harness² on the simulated world: does one round improve the oracle score?

For every task type of a seeded sim world, one task = the first
`--questions` questions of that type. Each configuration (k in {1, 3} x
mode in {parallel, sequential}) runs one Harness² round per task through
`run_sweep` with the SimProvider answering every role (solver, editor,
selector, reflector). The method never sees the oracle; this script scores
the base and the delivered harness with `harness.sim.oracle.Oracle` on the
task's own questions and on the held-out questions of the same type.

Noise floor: at k = 1 both modes are the same procedure with different
samples, so |mean delta(parallel) - mean delta(sequential)| at k = 1 is the
noise floor of a single round.

    python benchmarks/h2_sim.py                      # writes reports/benchmarks/h2_sim.md
    python benchmarks/h2_sim.py --seeds 0 1 --questions 8
    python benchmarks/h2_sim.py --seeds 0 1 2 --null-control   # + k = 1 with uninformative stated confidence

Null-signal control: the same k = 1 rounds in worlds whose solver states
"Confidence: high" with the same probability whether right or wrong
(correctness draws unchanged). The composer then has no behavioural signal;
a k = 1 gain that survives there would mean something other than the probe
evidence (e.g. a leak) drives it.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

from harness.h2.adapters import QuestionTaskAdapter
from harness.h2.roles import Roles
from harness.h2.run import run_sweep
from harness.sim.oracle import Oracle
from harness.sim.provider import SimProvider
from harness.sim.world import World, WorldParams

ROOT = Path(__file__).resolve().parents[1]
MODEL = "sim-model"
# Illustrative price (USD per million tokens, gpt-4o-mini class); sim usage is counted as chars/4.
PRICES = {MODEL: {"input": 0.15, "output": 0.60}}
CONFIGS = ((1, "parallel"), (1, "sequential"), (3, "parallel"), (3, "sequential"))
NULL_CONFIDENCE = 0.5


def make_tasks(world: World, provider: SimProvider, n_questions: int) -> list[QuestionTaskAdapter]:
    tasks = []
    for task_type in sorted({q.task_type for q in world.questions}):
        qs = [q for q in world.questions if q.task_type == task_type][:n_questions]
        tasks.append(QuestionTaskAdapter(f"{task_type}-0", task_type, qs, world.base_harness(), provider))
    return tasks


async def run_config(world: World, seed: int, k: int, mode: str, n_questions: int, out: Path) -> list[dict]:
    provider = SimProvider(world, SimpleNamespace(model=MODEL, models={}, prices=PRICES))
    tasks = make_tasks(world, provider, n_questions)
    oracle = Oracle(world)
    tag = f"bench-w{seed}-k{k}-{mode[:3]}" + ("-null" if world.params.confidence_when_right == world.params.confidence_when_wrong else "")
    sweep = await run_sweep(tasks, Roles.from_provider(provider), run_dir=out / tag, run_tag=tag, k=k, modes=(mode,), library_root=out / "library", models={"all": MODEL}, seed=seed)
    if sweep.crashed:
        raise RuntimeError(f"tasks crashed: {sweep.crashed}")
    rows = []
    by_id = {t.task_id: t for t in tasks}
    for res in sweep.results:
        task = by_id[res.task_id]
        own = task.qids
        held = [q for q in world.qids_of(task.task_type) if q not in set(own)]
        base = task.base_harness()
        led = res.summary["ledger"]
        rows.append({
            "seed": seed, "k": k, "mode": mode, "task": res.task_id,
            "base": oracle.expected_accuracy(base, own), "delivered": oracle.expected_accuracy(res.delivered, own),
            "base_held": oracle.expected_accuracy(base, held) if held else None,
            "delivered_held": oracle.expected_accuracy(res.delivered, held) if held else None,
            "is_base": res.delivered_is_base, "fallbacks": len(res.summary["fallbacks"]), "dead": len(res.summary["dead_probes"]),
            "rollouts": led["rollouts"], "sessions": led["sessions"], "rollout_usd": led["rollout_usd"], "session_usd": led["session_usd"],
            "selection": res.summary["selection"]["method"], "diversity": res.summary["diversity"]["mean_jaccard"],
            "compositions": sum(st["stage"] == "compose" for st in res.summary["stages"]),
            "kept_base": sum(st["stage"] == "compose" and st["status"] == "no-change" for st in res.summary["stages"]),
        })
    return rows


def summarise(rows: list[dict]) -> dict:
    d = [r["delivered"] - r["base"] for r in rows]
    dh = [r["delivered_held"] - r["base_held"] for r in rows if r["base_held"] is not None]
    rollouts = sum(r["rollouts"] for r in rows)
    usd = sum(r["rollout_usd"] + r["session_usd"] for r in rows)
    div = [r["diversity"] for r in rows if r["diversity"] is not None]
    return {
        "n": len(rows),
        "base": statistics.mean(r["base"] for r in rows),
        "delivered": statistics.mean(r["delivered"] for r in rows),
        "delta": statistics.mean(d),
        "delta_sd": statistics.stdev(d) if len(d) > 1 else 0.0,
        "delta_se": statistics.stdev(d) / len(d) ** 0.5 if len(d) > 1 else 0.0,
        "compositions": sum(r["compositions"] for r in rows),
        "kept_base": sum(r["kept_base"] for r in rows),
        "delta_held": statistics.mean(dh) if dh else float("nan"),
        "improved": sum(x > 1e-9 for x in d),
        "worse": sum(x < -1e-9 for x in d),
        "is_base": sum(r["is_base"] for r in rows),
        "fallbacks": sum(r["fallbacks"] for r in rows),
        "dead": sum(r["dead"] for r in rows),
        "rollouts": rollouts,
        "sessions": sum(r["sessions"] for r in rows),
        "usd": usd,
        "usd_rollout_share": sum(r["rollout_usd"] for r in rows),
        "usd_per_rollout": sum(r["rollout_usd"] for r in rows) / rollouts if rollouts else 0.0,
        "diversity": statistics.mean(div) if div else None,
    }


def render_control(rows: list[dict], conf: float) -> list[str]:
    lines = [
        "",
        f"## Null-signal control (k = 1, stated confidence uninformative: P(high | right) = P(high | wrong) = {conf})",
        "",
        "Same worlds, tasks and correctness draws; only what the solver says about its confidence carries no information.",
        "",
        "| k | mode | tasks | base | delivered | Δ own (pts) | SE | Δ held-out (pts) | improved / worse | compositions kept base |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for k, mode in CONFIGS[:2]:
        s = summarise([r for r in rows if r["k"] == k and r["mode"] == mode])
        lines.append(
            f"| {k} | {mode} | {s['n']} | {s['base']:.3f} | {s['delivered']:.3f} | {100 * s['delta']:+.1f} | {100 * s['delta_se']:.1f} | "
            f"{100 * s['delta_held']:+.1f} | {s['improved']} / {s['worse']} | {s['kept_base']} / {s['compositions']} |"
        )
    return lines


def render(all_rows: list[dict], seeds: list[int], n_questions: int, elapsed: float, command: str, control: list[dict] | None = None) -> str:
    lines = [
        "# Harness² on the simulated world",
        "",
        f"Command: `{command}` ({elapsed:.0f} s wall). World seeds {seeds}; 11 task types; one task per type = its first "
        f"{n_questions} questions; SimProvider answers every role; the method never sees the oracle. "
        "Scores are the oracle's exact expected accuracy (mean P(correct)) of the base and of the delivered harness, "
        "on the task's own questions and on the held-out questions of the same type. Costs use an illustrative price "
        f"of {PRICES[MODEL]['input']}/{PRICES[MODEL]['output']} USD per million input/output tokens (sim usage = chars/4).",
        "",
        "Compositions are evidence-driven: the composer sees the base rollout and every candidate's diff and probe rollout, "
        "and keeps only candidates whose probe behaved better (the sim composer, `harness/sim/composer.py`, reads only the share of "
        "answers the solver stated with high confidence — P(high | right) = "
        f"{WorldParams().confidence_when_right}, P(high | wrong) = {WorldParams().confidence_when_wrong}, i.e. AUROC "
        f"{0.5 + (WorldParams().confidence_when_right - WorldParams().confidence_when_wrong) / 2:.3f} as a correctness detector; "
        f"keep when the gain over the base exceeds {WorldParams().composer_min_gain} ± {WorldParams().composer_gain_jitter / 2})."
        " The selector at k = 3 is the sim `choice` role (docs/sim.md), which picks the candidate with the most right answers with "
        f"prob. {WorldParams().selector_best_prob}.",
        "",
        "| k | mode | tasks | base | delivered | Δ own (pts) | sd | SE | Δ held-out (pts) | improved / worse | delivered = base | compositions kept base | fallbacks | dead probes | rollouts | sessions | USD total | USD / rollout | mean final Jaccard |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    summaries = {}
    for k, mode in CONFIGS:
        rows = [r for r in all_rows if r["k"] == k and r["mode"] == mode]
        s = summaries[(k, mode)] = summarise(rows)
        div = "–" if s["diversity"] is None else f"{s['diversity']:.3f}"
        lines.append(
            f"| {k} | {mode} | {s['n']} | {s['base']:.3f} | {s['delivered']:.3f} | {100 * s['delta']:+.1f} | {100 * s['delta_sd']:.1f} | "
            f"{100 * s['delta_se']:.1f} | {100 * s['delta_held']:+.1f} | {s['improved']} / {s['worse']} | {s['is_base']} | "
            f"{s['kept_base']} / {s['compositions']} | {s['fallbacks']} | {s['dead']} | {s['rollouts']} | "
            f"{s['sessions']} | {s['usd']:.4f} | {s['usd_per_rollout']:.6f} | {div} |"
        )
    p1, s1 = summaries[(1, "parallel")], summaries[(1, "sequential")]
    noise = abs(p1["delta"] - s1["delta"])
    lines += [
        "",
        f"**k = 1 noise floor** (same procedure, different samples): |Δ parallel − Δ sequential| = {100 * noise:.1f} pts "
        f"(own questions), {100 * abs(p1['delta_held'] - s1['delta_held']):.1f} pts (held-out). "
        f"Standard error of the mean Δ at k = 1: {100 * p1['delta_se']:.1f} pts (parallel), {100 * s1['delta_se']:.1f} pts (sequential); "
        "a mean Δ is taken as an improvement only when it exceeds both.",
        "",
        "Differences between modes at k = 3 smaller than the noise floor are not evidence that one mode is better.",
        "Δ held-out shows whether the edit generalises to other questions of the task type (the round saw only the task's own questions).",
        "",
        *(render_control(control, NULL_CONFIDENCE) + [""] if control else []),
        "## Per task",
        "",
        "| seed | k | mode | task | base | delivered | Δ (pts) | held-out Δ (pts) | selection | fallbacks |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in all_rows:
        held = "–" if r["base_held"] is None else f"{100 * (r['delivered_held'] - r['base_held']):+.1f}"
        lines.append(f"| {r['seed']} | {r['k']} | {r['mode']} | {r['task']} | {r['base']:.3f} | {r['delivered']:.3f} | {100 * (r['delivered'] - r['base']):+.1f} | {held} | {r['selection']} | {r['fallbacks']} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    ap.add_argument("--questions", type=int, default=8, help="questions per task (evolve.h2_probe_questions)")
    ap.add_argument("--out", type=Path, default=ROOT / "reports" / "benchmarks" / "h2_sim.md")
    ap.add_argument("--null-control", action="store_true", help="also run k = 1 with uninformative stated confidence")
    args = ap.parse_args(argv)
    started = time.time()
    rows: list[dict] = []
    control: list[dict] = []
    null = WorldParams().replace(confidence_when_right=NULL_CONFIDENCE, confidence_when_wrong=NULL_CONFIDENCE)
    with tempfile.TemporaryDirectory() as tmp:
        for seed in args.seeds:
            world = World.generate(seed=seed, n_task_types=11, questions_per_type=60, n_choices=4)
            for k, mode in CONFIGS:
                rows += asyncio.run(run_config(world, seed, k, mode, args.questions, Path(tmp)))
            if args.null_control:
                null_world = World.generate(seed=seed, n_task_types=11, questions_per_type=60, n_choices=4, params=null)
                for k, mode in CONFIGS[:2]:
                    control += asyncio.run(run_config(null_world, seed, k, mode, args.questions, Path(tmp)))
    command = "python benchmarks/h2_sim.py " + " ".join(argv if argv is not None else sys.argv[1:])
    text = render(rows, args.seeds, args.questions, time.time() - started, command.strip(), control)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text, encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
