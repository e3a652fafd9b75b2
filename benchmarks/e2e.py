"""End-to-end benchmark of the training loop on the simulated world (issue 5 items 8-9).

    python benchmarks/e2e.py            # 5 seeds, default config, 4 acceptance rules + trade-off null
    python benchmarks/e2e.py --quick    # CI: 1 seed, a small world, 2 epochs

For every world seed:

1. our rule (`gate=sequential`, the default config) trains for `train.epochs`
   epochs; its training rollouts (step + gate + slow R/R0/R2; held-out
   observation excluded) define the budget B;
2. `accept_all`, `gepa` and `mcnemar` run in the same loop on the same world
   for up to `--max-epochs` epochs (early stop out of the way); each is cut at
   the last epoch end whose cumulative training rollouts are <= B, and the
   best pointer of that epoch is what it delivers (same rollout budget);
3. the ORACLE (exact expected accuracy; only this benchmark uses it, never the
   loop) scores the base and delivered harnesses on the test pool, and every
   edit a gate installed (accept or probation) on the questions that read the
   edited file: `hurts` = expected accuracy went down;
4. trade-off null: our rule with an editor that, on a share of its skill
   edits, proposes a rule that helps mid-difficulty questions and breaks easy
   ones of the same task type by exactly the same expected total; we count
   how many survive probation and the slow update into the delivered harness.

Runs use a state root under /dev/shm when it exists (the kernel's baseline
cache fsyncs every put) and no response cache (one process per run, nothing
to resume). Writes reports/benchmarks/e2e.md and a JSON next to it.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import multiprocessing as mp
import os
import re
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

RULES = ("sequential", "accept_all", "gepa", "mcnemar")
TRADEOFF_TAG = "Tradeoff heuristic"
QUICK_OVERRIDES = [
    "benchmark.n_task_types=4", "benchmark.questions_per_type=45", "pools.test_size=60", "pools.val_size=60",
    "pools.diagnosis_size=60", "pools.eval_min_per_class=10", "batching.batch_size=30",
]


# ---------------------------------------------------------------- the trade-off editor (benchmark only)


def _u(*parts: Any) -> float:
    return int(hashlib.sha1("|".join(map(str, parts)).encode()).hexdigest()[:12], 16) / 16**12


class TradeoffProvider:
    """LLMProvider wrapper: a share of skill edits become a zero-sum trade-off rule.

    Editor (FORMAT: edit-ops on a SKILL.md): with probability `share` the reply
    is one `add` of a line "Tradeoff heuristic <k>: ...". Solver: the lines are
    stripped before the simulated solver sees the prompt (so the base sample
    is unchanged) and, when the skill states one, the answer is flipped to the
    right letter w.p. `a` on mid-difficulty questions (0.3 <= p <= 0.7) that
    were wrong and to a wrong letter w.p. `b` on easy ones (p >= 0.8) that were
    right, `b` chosen per task type so that the expected gain equals the
    expected loss on that type's questions (population effect exactly 0).
    """

    def __init__(self, inner: Any, world: Any, share: float = 0.35, a: float = 0.6):
        from harness.sim.solver import SolverModel

        self.inner, self.world, self.share, self.a = inner, world, share, a
        self.name = inner.name
        self.solver = SolverModel(world)
        self._b: dict[str, float] = {}
        self.proposed = 0

    def model_for(self, role):
        return self.inner.model_for(role)

    async def complete(self, request):
        from harness.llm.protocol import ChatMessage, LLMRequest, LLMResponse

        msgs = request.messages
        system = msgs[0].content if msgs else ""
        if "FORMAT: edit-ops" in system and any("SKILL.md" in m.content for m in msgs[1:]):
            key = hashlib.sha1("".join(m.content for m in msgs).encode()).hexdigest()
            if _u(key, request.sample_index, "tradeoff") < self.share:
                self.proposed += 1
                k = int(_u(key, "id") * 1e6)
                text = (f'<edit op="add"><new>{TRADEOFF_TAG} {k}: when two choices look alike, prefer the one that '
                        f'matches the longest visible action.</new><why>recurring confusion between similar choices</why></edit>')
                return LLMResponse(text=text, model=self.inner.model_for(request.role), provider=self.name)
            return await self.inner.complete(request)
        if TRADEOFF_TAG not in system:
            return await self.inner.complete(request)
        stripped = "\n".join(line for line in system.split("\n") if TRADEOFF_TAG not in line)
        new_msgs = (ChatMessage(msgs[0].role, stripped),) + tuple(msgs[1:])
        inner_req = LLMRequest(role=request.role, messages=new_msgs, params=request.params, sample_index=request.sample_index)
        response = await self.inner.complete(inner_req)
        m = re.search(r"ANSWER:\s*([A-J])\s*$", response.text)
        if not m:
            return response
        from harness.sim.solver import question_text_of

        qid = self.world.qid_by_text.get(question_text_of(msgs[1].content) or "")
        if qid is None:
            return response
        q = self.world.question(qid)
        read = self.solver.read(stripped)
        p = self.solver.p_correct(read, qid)
        b = self._b_for(q.task_type, read)
        right = m.group(1) == q.answer
        u = _u(qid, request.sample_index, read.content_hash, "flip")
        letter = m.group(1)
        if not right and 0.3 <= p <= 0.7 and u < self.a:
            letter = q.answer
        elif right and p >= 0.8 and u < b:
            letters = "ABCDEFGHIJ"[: len(q.choices) or 4]
            wrong = [x for x in letters if x != q.answer]
            letter = wrong[int(_u(qid, request.sample_index, "wrong") * len(wrong))]
        if letter == m.group(1):
            return response
        return replace(response, text=response.text[: m.start(1)] + letter + response.text[m.end(1):])

    def _b_for(self, task_type: str, read: Any) -> float:
        key = f"{task_type}|{read.content_hash}"
        if key not in self._b:
            gain = loss = 0.0
            for qid in self.world.qids_of(task_type):
                p = self.solver.p_correct(read, qid)
                if 0.3 <= p <= 0.7:
                    gain += (1 - p) * self.a
                elif p >= 0.8:
                    loss += p
            self._b[key] = min(1.0, gain / loss) if loss > 0 else 0.0
        return self._b[key]


# ---------------------------------------------------------------- one run


def _count_rollouts(fragments: list[Path]) -> dict[str, int]:
    out: dict[str, int] = {}
    for db in fragments:
        if not db.exists():
            continue
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        try:
            for kind, n in conn.execute("SELECT r.kind, COUNT(*) FROM predictions p JOIN _runs r USING (run_id) GROUP BY r.kind"):
                out[kind] = out.get(kind, 0) + n
        finally:
            conn.close()
    return out


def _training(counts: dict[str, int]) -> int:
    return sum(n for kind, n in counts.items() if kind != "holdout")


def run_one(job: dict) -> dict:
    """Train one (seed, rule) and measure it with the oracle."""
    from harness import workspace as wsp
    from harness.compose import build_benchmark, build_provider
    from harness.contracts.solver import resolve_skill_file
    from harness.loop.runner import Runner, steps_in_epoch
    from harness.loop.state import is_done, read_lineage, resolve_fragments
    from harness.sim.oracle import Oracle
    from harness.store import read_version_tree

    seed, rule, epochs = job["seed"], job["rule"], job["epochs"]
    if job.get("skip_epoch_holdout"):
        # the per-epoch four-way held-out is observation only (never a decision, excluded from the rollout
        # counts); the benchmark judges with the oracle instead, so it skips those rollouts to save time
        import harness.loop.slow_update as su

        su._four_way_holdout = lambda deps, state, log: []
    base_dir = Path("/dev/shm") if Path("/dev/shm").is_dir() else Path(tempfile.gettempdir())
    root = Path(tempfile.mkdtemp(prefix=f"e2e_{rule}_{seed}_", dir=base_dir))
    started = time.monotonic()
    try:
        from omegaconf import OmegaConf

        cfg = OmegaConf.create(job["cfg"])  # composed once in the parent: immune to conf/ edits during the run
        OmegaConf.set_readonly(cfg, True)
        bench = build_benchmark(cfg.benchmark, root)
        world = bench.world
        provider = build_provider(cfg.llm, world=world)
        if job.get("tradeoff"):
            provider = TradeoffProvider(provider, world)
        result = Runner(cfg, root, llm=provider, bench=bench).train()
        oracle = Oracle(world)
        pools = json.loads((root / str(cfg.pools.path)).read_text())
        test = pools["test"]
        n_steps = steps_in_epoch(cfg)
        state = root / str(cfg.train.state_dir)
        ws_final = state / f"e{epochs}" / "slow" / "workspace"
        base_tree = world.base_harness()
        curve = []
        for e in range(1, epochs + 1):
            slow = state / f"e{e}" / "slow"
            if not is_done(slow):
                break
            lineage = read_lineage(slow)
            counts = _count_rollouts(resolve_fragments(root, lineage))
            best = wsp.read_best(slow / "workspace")
            m = wsp.read_manifest(slow / "workspace")
            report = json.loads((slow / "report.json").read_text())
            curve.append({
                "epoch": e, "rollouts": _training(counts), "stopped": lineage.stopped,
                "best": [best.skills, best.prompts], "best_test": oracle.expected_accuracy(wsp.harness_view(slow / "workspace", best.skills, best.prompts), test),
                "current_test": oracle.expected_accuracy(wsp.harness_view(slow / "workspace", m.skills_version, m.prompts_version), test),
                "rollbacks": len(report["rollbacks"]),
            })
        # every edit a gate installed, judged by the oracle on the questions that read the edited file
        edits = []
        gates = gate_rollouts = 0
        for e in range(1, epochs + 1):
            for s in range(1, n_steps + 1):
                rep = state / f"e{e}" / f"s{s}" / "gate" / "report.json"
                if not rep.exists():
                    continue
                doc = json.loads(rep.read_text())
                for row in doc["skills"]:
                    if row.get("gate_run_id") and row.get("n_pairs") is not None:
                        gates += 1
                        gate_rollouts += int(row["rollouts"] or 0)
                    if row["action"] not in ("accept", "probation"):
                        continue
                    old_sv, new_sv = row["skills_version_before"], row["skills_version_after"]
                    gate_ws = state / f"e{e}" / f"s{s}" / "gate" / "workspace"
                    pv = wsp.read_manifest(gate_ws).prompts_version
                    old = wsp.harness_view(gate_ws, old_sv, pv)
                    new = wsp.harness_view(gate_ws, new_sv, pv)
                    target = f"skills/{row['skill_file']}"
                    qids = [q.qid for q in world.questions if resolve_skill_file(old, q.task_type) == target]
                    effect = oracle.edit_effect(old, new, qids)
                    new_text = read_version_tree(gate_ws / "skills", new_sv)[row["skill_file"]]
                    old_text = read_version_tree(gate_ws / "skills", old_sv).get(row["skill_file"], "")
                    tradeoff = TRADEOFF_TAG in new_text and new_text.count(TRADEOFF_TAG) > old_text.count(TRADEOFF_TAG)
                    edits.append({"epoch": e, "step": s, "action": row["action"], "skill_file": row["skill_file"],
                                  "effect": effect, "tradeoff": tradeoff, "rollouts": row["rollouts"]})
        delivered_dir = state / "holdout" / "delivered"
        from harness.tree import HarnessTree

        delivered = HarnessTree.load(delivered_dir)
        out = {
            "seed": seed, "rule": rule, "epochs": epochs, "tradeoff": bool(job.get("tradeoff")),
            "base_test": oracle.expected_accuracy(base_tree, test),
            "delivered_test": oracle.expected_accuracy(delivered, test),
            "sampled_test": result["test"], "delivered": result["delivered"], "stopped_early": result["stopped_early"],
            "curve": curve, "edits": edits, "gates": gates, "gate_rollouts": gate_rollouts,
            "tradeoff_in_delivered": sum(text.count(TRADEOFF_TAG) for text in delivered.values()),
            "tradeoff_in_final_current": sum(t.count(TRADEOFF_TAG) for t in wsp.harness_view(ws_final).values()) if ws_final.exists() else None,
            "tradeoff_proposed": getattr(provider, "proposed", None),
            "wall_s": time.monotonic() - started,
        }
        return out
    finally:
        shutil.rmtree(root, ignore_errors=True)


# ---------------------------------------------------------------- aggregation


def at_budget(run: dict, budget: int) -> dict:
    """The last epoch end within `budget` training rollouts (its best pointer is what the rule delivers)."""
    ok = [c for c in run["curve"] if c["rollouts"] <= budget]
    return ok[-1] if ok else {"epoch": 0, "rollouts": 0, "best_test": run["base_test"]}


def rollouts_to_reach(run: dict, acc: float) -> int | None:
    for c in run["curve"]:
        if c["best_test"] >= acc - 1e-12:
            return c["rollouts"]
    return None


def summarize(runs: list[dict], quick: bool, wall: float, cmd: str) -> tuple[str, dict]:
    seeds = sorted({r["seed"] for r in runs})
    by = {(r["seed"], r["rule"], r["tradeoff"]): r for r in runs}
    rows, summary = [], {}
    for rule in RULES:
        gains, accs, spent, n_acc, n_hurt, n_help, reach = [], [], [], 0, 0, 0, []
        for seed in seeds:
            ours = by[(seed, "sequential", False)]
            run = by.get((seed, rule, False))
            if run is None:
                continue
            budget = ours["curve"][-1]["rollouts"]
            if rule == "sequential":
                point = {"best_test": run["delivered_test"], "rollouts": budget, "epoch": run["curve"][-1]["epoch"]}
            else:
                point = at_budget(run, budget)
            accs.append(point["best_test"])
            gains.append(point["best_test"] - run["base_test"])
            spent.append(point["rollouts"])
            cut = point["epoch"]
            installed = [e for e in run["edits"] if e["epoch"] <= cut]
            n_acc += len(installed)
            n_hurt += sum(e["effect"] < -0.001 for e in installed)
            n_help += sum(e["effect"] > 0.001 for e in installed)
        summary[rule] = {"mean_test": statistics.mean(accs), "mean_gain_pts": 100 * statistics.mean(gains),
                         "gains_pts": [round(100 * g, 2) for g in gains], "mean_rollouts": statistics.mean(spent),
                         "installed": n_acc, "hurt": n_hurt, "helped": n_help,
                         "hurt_share": (n_hurt / n_acc) if n_acc else 0.0}
    # ours vs GEPA: rollouts ours needs to reach GEPA's budget-matched accuracy, vs GEPA's own
    ratios = []
    for seed in seeds:
        ours, gepa = by[(seed, "sequential", False)], by.get((seed, "gepa", False))
        if gepa is None:
            continue
        target = at_budget(gepa, ours["curve"][-1]["rollouts"])
        r_ours = rollouts_to_reach(ours, target["best_test"])
        r_gepa = rollouts_to_reach(gepa, target["best_test"])
        ratios.append({"seed": seed, "gepa_acc": target["best_test"], "ours_rollouts": r_ours, "gepa_rollouts": r_gepa,
                       "ratio": (r_ours / r_gepa) if (r_ours is not None and r_gepa) else None})
    summary["ours_vs_gepa"] = ratios
    trade = [r for r in runs if r["tradeoff"]]
    tsum = None
    if trade:
        t_inst = sum(sum(e["tradeoff"] for e in r["edits"]) for r in trade)
        t_acc = sum(sum(e["tradeoff"] and e["action"] == "accept" for e in r["edits"]) for r in trade)
        t_prob = sum(sum(e["tradeoff"] and e["action"] == "probation" for e in r["edits"]) for r in trade)
        tsum = {"proposed": sum(r["tradeoff_proposed"] or 0 for r in trade), "installed": t_inst, "accepted": t_acc,
                "probation": t_prob, "in_final_current": sum(r["tradeoff_in_final_current"] or 0 for r in trade),
                "in_delivered": sum(r["tradeoff_in_delivered"] for r in trade),
                "delivered_gain_pts": 100 * statistics.mean(r["delivered_test"] - r["base_test"] for r in trade)}
    summary["tradeoff"] = tsum
    # markdown
    L = [f"# End-to-end benchmark (simulated world){' — QUICK mode' if quick else ''}", "",
         f"Command: `{cmd}` — measured {time.strftime('%Y-%m-%d')}, wall {wall / 60:.1f} min on this machine.",
         f"Seeds (world `benchmark.seed`): {seeds}. Oracle = exact expected accuracy on the test pool (never seen by the loop).", "",
         "## Base vs delivered, same rollout budget", "",
         "Budget B = training rollouts our rule spent (step + gate + slow R/R0/R2; held-out observation excluded). "
         "Other rules run up to the max epochs and deliver the best pointer of the last epoch end within B.", "",
         "| rule | mean test acc (oracle) | mean gain over base (pts) | per-seed gain (pts) | mean rollouts used | edits installed | oracle: hurt | helped | hurt share |",
         "|---|---|---|---|---|---|---|---|---|"]
    for rule in RULES:
        s = summary[rule]
        L.append(f"| {rule} | {s['mean_test']:.4f} | {s['mean_gain_pts']:+.2f} | {s['gains_pts']} | {s['mean_rollouts']:.0f} | "
                 f"{s['installed']} | {s['hurt']} | {s['helped']} | {100 * s['hurt_share']:.1f} % |")
    base = statistics.mean(by[(s, "sequential", False)]["base_test"] for s in seeds)
    L += ["", f"Mean base test accuracy (oracle): {base:.4f}.", "",
          "An installed edit = a gate accept or a probation install; `hurt` = the oracle's expected accuracy on the questions "
          "that read the edited file went down by more than 0.1 pt (counted whatever happened to the edit later).", "",
          "## Our rule vs GEPA's rule", "", "| seed | GEPA acc within B | rollouts ours needs | rollouts GEPA needs | ratio |", "|---|---|---|---|---|"]
    for r in ratios:
        ratio = f"{r['ratio']:.2f}" if r["ratio"] is not None else "n/a"
        L.append(f"| {r['seed']} | {r['gepa_acc']:.4f} | {r['ours_rollouts']} | {r['gepa_rollouts']} | {ratio} |")
    if any("gates" in r for r in runs):
        L += ["", "## Cost of a gate (rollouts per gated candidate, all epochs)", "",
              "| rule | gates run | mean rollouts per gate | gate rollouts per installed edit that helped |", "|---|---|---|---|"]
    for rule in RULES if any("gates" in r for r in runs) else ():
        gated = [r for r in runs if r["rule"] == rule and not r["tradeoff"]]
        n_inst = sum(len(r["edits"]) for r in gated)
        gate_cost = sum(r.get("gate_rollouts", 0) for r in gated)
        n_gates = sum(r.get("gates", 0) for r in gated)
        helped = sum(sum(e["effect"] > 0.001 for e in r["edits"]) for r in gated)
        L.append(f"| {rule} | {n_gates} | {gate_cost / n_gates if n_gates else 0:.1f} | {gate_cost / helped if helped else float('nan'):.1f} |")
    if tsum:
        L += ["", "## Trade-off null editor (our rule)", "",
              "A share of skill edits is replaced by a rule that helps mid-difficulty questions and breaks easy ones of the same "
              "task type by the same expected total (population effect 0).", "",
              f"- proposed: {tsum['proposed']}; installed by a gate: {tsum['installed']} (accept {tsum['accepted']}, probation {tsum['probation']})",
              f"- still in the final current harness: {tsum['in_final_current']}; in the DELIVERED harness: {tsum['in_delivered']}",
              f"- mean delivered gain over base in these runs: {tsum['delivered_gain_pts']:+.2f} pts"]
    L += _reading(summary, runs, seeds, by)
    return "\n".join(L) + "\n", summary


def _reading(summary: dict, runs: list[dict], seeds: list[int], by: dict) -> list[str]:
    """The targets of issue 5, checked against this run's numbers, and why a missed one was missed."""
    ours, gepa = summary["sequential"], summary.get("gepa")
    reached = [r for r in summary["ours_vs_gepa"] if r["ratio"] is not None]
    budgets = [by[(s, "sequential", False)]["curve"][-1]["rollouts"] for s in seeds]
    cost = {}
    for rule in RULES:
        gated = [r for r in runs if r["rule"] == rule and not r["tradeoff"] and "gates" in r]
        n = sum(r["gates"] for r in gated)
        cost[rule] = sum(r["gate_rollouts"] for r in gated) / n if n else float("nan")
    L = ["", "## Targets (issue 5, item 8)", "",
         f"- delivered >= +8 pts over base on average: **{ours['mean_gain_pts']:+.2f} pts** — "
         f"{'met' if ours['mean_gain_pts'] >= 8 else 'NOT met'} (every seed: {ours['gains_pts']}).",
         f"- harmful accepts <= 5 % of accepts: **{ours['hurt']} of {ours['installed']} "
         f"({100 * ours['hurt_share']:.1f} %)** — {'met' if ours['hurt_share'] <= 0.05 else 'NOT met'}.",
         f"- our rule reaches GEPA's budget-matched accuracy with <= half GEPA's rollouts: reached in "
         f"{len(reached)} of {len(summary['ours_vs_gepa'])} seeds"
         + (f" (ratios ours/GEPA {[round(r['ratio'], 2) for r in reached]})" if reached else "")
         + (" — met." if reached and len(reached) == len(summary["ours_vs_gepa"]) and all(r["ratio"] <= 0.5 for r in reached)
            else " — **NOT met**.")]
    if gepa:
        L += ["", "Why the GEPA comparison is lost here (measured in this run):",
              f"- a gate of our rule costs {cost['sequential']:.0f} rollouts on average, GEPA's rule {cost['gepa']:.1f} "
              f"(one minibatch of the step's questions, baseline reused from the step rollout). An anytime-valid e-process "
              "pays for optional stopping: a +5..10 pt edit on ~20 noisy validation questions needs a few hundred pairs "
              "(research/gate.md), and a null or trade-off edit often runs to `gate.max_pairs` and ends on probation;",
              f"- GEPA's rule installs more harmful edits ({gepa['hurt']} of {gepa['installed']}, {100 * gepa['hurt_share']:.1f} %) "
              "but, plugged into this loop, it inherits the safety nets that do not depend on the gate: every accept is "
              "watched by a probation settled against the full-validation re-run (file-level rollback), and only the best "
              "full-validation version (strict argmax) is delivered. In this simulated world traps are large effects, so "
              "those nets remove most of the damage, and GEPA's many cheap steps win on accuracy per rollout;",
              f"- GEPA used {gepa['mean_rollouts']:.0f} of a mean budget of {statistics.mean(budgets):.0f} rollouts: it hit the "
              "`--max-epochs` cap, so its accuracy within the budget is a lower bound;",
              "- what our rule buys for its rollouts is the per-gate guarantee: "
              f"{ours['hurt']} harmful installs vs {gepa['hurt']} (GEPA) and {summary['accept_all']['hurt']} (accept-all). "
              "Where harm is subtle (small or population-null effects) the cheap rule has no such protection."]
    t = summary.get("tradeoff")
    if t:
        L += ["", "## Trade-off null: reading", "",
              f"Of {t['installed']} installed trade-off edits, {t['accepted']} passed the gate outright (the information ladder "
              f"puts mid-difficulty questions first, where the edit wins) and {t['probation']} ended undecided and were installed "
              f"on probation (`gate.undecided=probation`). {t['in_delivered']} survive into the delivered harnesses: probation "
              "settlement and the full-validation re-run compare accuracies, and a zero-sum edit shows no regression there "
              "either, so nothing removes it. Their expected effect is 0 by construction (positive only where a task type has "
              "too few easy questions to pay for the gain; the oracle figures above do not include it), so they do not lower "
              "the delivered accuracy, but they are not improvements and they crowd out real edits (the delivered gain of these runs is "
              f"{t['delivered_gain_pts']:+.2f} pts vs {ours['mean_gain_pts']:+.2f} pts without the trade-off editor)."]
    return L


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="CI mode: 1 seed, small world, 2 epochs")
    ap.add_argument("--seeds", type=int, nargs="*", default=None)
    ap.add_argument("--epochs", type=int, default=None, help="our rule's epochs (default: the config's train.epochs)")
    ap.add_argument("--max-epochs", type=int, default=None, help="cap for the other rules under the same budget")
    ap.add_argument("--jobs", type=int, default=2, help="worker processes (spawned)")
    ap.add_argument("--no-tradeoff", action="store_true")
    ap.add_argument("--epoch-holdout", action="store_true", help="keep the per-epoch four-way held-out observation (slower)")
    ap.add_argument("--from-json", type=Path, default=None, help="re-render the report from a saved e2e JSON (no training)")
    ap.add_argument("--out", type=Path, default=None, help="default reports/benchmarks/e2e.md (--quick: e2e_quick.md)")
    args = ap.parse_args(argv)
    args.out = args.out or ROOT / "reports" / "benchmarks" / ("e2e_quick.md" if args.quick else "e2e.md")
    if args.from_json:
        saved = json.loads(args.from_json.read_text(encoding="utf-8"))
        text, _ = summarize(saved["runs"], args.quick, saved.get("wall_s", 0.0), saved.get("cmd", "python benchmarks/e2e.py"))
        args.out.write_text(text, encoding="utf-8")
        print(text)
        return 0
    seeds = args.seeds or ([7] if args.quick else [7, 8, 9, 10, 11])
    overrides = QUICK_OVERRIDES if args.quick else []
    epochs = args.epochs or (2 if args.quick else 3)
    max_epochs = args.max_epochs or (4 if args.quick else 6)
    jobs = []
    for seed in seeds:
        jobs.append({"seed": seed, "rule": "sequential", "epochs": epochs, "overrides": overrides, "tradeoff": False})
        for rule in RULES[1:]:
            jobs.append({"seed": seed, "rule": rule, "epochs": max_epochs, "overrides": overrides, "patience": max_epochs})
        if not args.no_tradeoff:
            jobs.append({"seed": seed, "rule": "sequential", "epochs": epochs, "overrides": overrides, "tradeoff": True})
    from harness.config.load import load_config
    from omegaconf import OmegaConf

    for job in jobs:
        job["skip_epoch_holdout"] = not args.epoch_holdout
        overrides = [f"benchmark.seed={job['seed']}", f"gate={job['rule']}", f"train.epochs={job['epochs']}", "tracking=none",
                     "quiet=true", f"train.run_name={job['rule']}_s{job['seed']}", *job["overrides"]]
        if job.get("patience"):
            overrides.append(f"train.early_stop_patience={job['patience']}")
        job["cfg"] = OmegaConf.to_container(load_config(overrides, env_file=None, environ={}), resolve=True)
    started = time.monotonic()
    partial = args.out.with_suffix(".partial.jsonl")
    partial.parent.mkdir(parents=True, exist_ok=True)
    partial.write_text("")
    runs = []
    with mp.get_context("spawn").Pool(args.jobs) as pool:
        for run in pool.imap_unordered(run_one, jobs, chunksize=1):
            runs.append(run)
            with open(partial, "a", encoding="utf-8") as fh:
                fh.write(json.dumps(run, default=str) + "\n")
            print(f"[e2e] {len(runs)}/{len(jobs)} seed {run['seed']} {run['rule']}{' tradeoff' if run['tradeoff'] else ''}: "
                  f"base {run['base_test']:.3f} -> delivered {run['delivered_test']:.3f} ({run['wall_s']:.0f} s)", flush=True)
    wall = time.monotonic() - started
    partial.unlink()
    cmd = "python benchmarks/e2e.py" + (" --quick" if args.quick else "") + (f" --seeds {' '.join(map(str, args.seeds))}" if args.seeds else "")
    text, summary = summarize(runs, args.quick, wall, cmd)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text, encoding="utf-8")
    args.out.with_suffix(".json").write_text(json.dumps({"summary": summary, "runs": runs, "wall_s": wall, "cmd": cmd}, indent=1, default=str),
                                             encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
