"""Real-model benchmark: SmolLM2-135M-Instruct (llama.cpp server, CPU) on the questions file the tests ship.

    python benchmarks/real.py                      # both parts; starts the server, writes reports/benchmarks/real.md
    python benchmarks/real.py --part parsing --samples 1 --edit-calls 3   # part 1 only (sections 1-2)
    python benchmarks/real.py --part train         # part 2 only (section 3): ~40 min on a loaded 2-core machine
    python benchmarks/real.py --part train --from-job runs/benchmarks-real/<job>   # section 3 again from a finished job
    python benchmarks/real.py --capture tests/fixtures/smollm2_replies.jsonl  # also record every solver reply

Each part rewrites only its own block of the report (between `<!-- begin:<part> -->`
and `<!-- end:<part> -->`), so the parts can be measured separately.

Measures, with the product's own code (run_inference, the answer extractor,
evolve_single_skill / run_diagnosis through OpenAIProvider):
1. solver accuracy on every question x `--samples` sample indices under
   strict and lenient answer parsing (the same replies read both ways: a
   reply without an ANSWER line and without a tool call ends the rollout in
   both modes, so one run gives both), Wilson 95 % intervals, the share of
   each parse mode;
2. the editor's and diagnoser's parseable-reply share in the text format and
   with structured output (the reply format the probe found), over
   `--edit-calls` calls each on real failure cases of step 1.
3. (`--part train`) training: `python -m stages.train llm=openai benchmark=jsonl` on
   tests/fixtures/real_easy_mc.jsonl (240 questions, 5 task types) with the sizes
   of TRAIN_OVERRIDES; base vs delivered accuracy on the held-out test pool (never
   seen by training) with Wilson 95 % intervals, the paired difference on the
   same questions, rollouts, wall time, rollouts/s, the parse-failure rate, every
   gate decision, and a plain statement whether training helped.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from harness.bench.jsonl import JsonlBenchmark, read_user_questions  # noqa: E402
from harness.bench.scoring import load_scorer  # noqa: E402
from harness.config.schema import LLMConfig  # noqa: E402
from harness.contracts.answers import ANSWER_MODES, STRICT  # noqa: E402
from harness.contracts.roles import Role  # noqa: E402
from harness.contracts.solver import DEFAULT_SKILL, skill_path  # noqa: E402
from harness.contracts.structured import TEXT  # noqa: E402
from harness.evolution.ask import probe_reply_format  # noqa: E402
from harness.evolution.diagnose import run_diagnosis  # noqa: E402
from harness.evolution.evolve import evolve_single_skill  # noqa: E402
from harness.inference import run_inference  # noqa: E402
from harness.kernel.types import CaseSample  # noqa: E402
from harness.llm.local_server import DEFAULT_THREADS, LlamaServer  # noqa: E402
from harness.llm.openai_provider import OpenAIProvider  # noqa: E402
from harness.log import HarnessLog  # noqa: E402

QUESTIONS = ROOT / "tests/fixtures/real_mc.jsonl"
TRAIN_QUESTIONS = ROOT / "tests/fixtures/real_easy_mc.jsonl"
REPORT = ROOT / "reports/benchmarks/real.md"
PARTS = ("parsing", "train")
BLOCKS = (*PARTS, "coupling", "compare", "threads", "h2_estimate", "editor")  # the report's blocks in order; "coupling" is written by benchmarks/real_coupling.py,
# "compare" by hand from `python -m stages.compare` runs (its commands are in the block), "threads" from
# benchmarks/llama_server.py and "h2_estimate" from benchmarks/h2_real_estimate.py (by hand), "editor" by benchmarks/real_editor.py
RUN_INFO = "real_bench.json"  # a train job's wall time and server, for --from-job
# 240 questions: test 40 (held out), validation 20, diagnosis 20 = 2 steps of 10; gates of at most 40 pairs: an accept
# needs log E >= log(1/level) (e-LOND gives the first gates ~0.0012, so ~6.7), which ~20 straight wins reach and 10
# pairs never can (the 10-pair sizing of an earlier run could only reject). ~40 min on a loaded 2-core machine;
# llm.max_tokens=96 bounds the solver's long replies, the editor and diagnoser get room for their JSON.
TRAIN_OVERRIDES = (
    "train.epochs=1", "train.slow_update=false", "train.momentum=false", "train.system_tool_update=false",
    "train.run_name=real_bench",
    "pools.test_size=40", "pools.val_size=20", "pools.diagnosis_size=20", "pools.eval_min_per_class=2",
    "batching.batch_size=10", "batching.min_class_per_batch=2",
    "gate.block_size=10", "gate.max_pairs=40", "gate.mcnemar_n=40", "gate.infra_min_denominator=3",
    "evolve.max_case_questions=2",
    "llm.max_tokens=96", "+llm.max_tokens_by_role.editor=512", "+llm.max_tokens_by_role.diagnoser=256", "llm.timeout_s=600", "llm.max_retries=1", "llm.concurrency=1", "tracking=none",
)


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    if n == 0:
        return (math.nan, math.nan)
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (max(0.0, centre - half), min(1.0, centre + half))


def llm_config(base_url: str, model: str, *, max_tokens: int, temperature: float) -> LLMConfig:
    return LLMConfig(provider="openai", model=model, base_url=base_url, timeout_s=300.0, max_retries=1,
                     temperature=temperature, max_tokens=max_tokens)


async def solver_run(provider: OpenAIProvider, bench: JsonlBenchmark, samples: int, log_dir: Path) -> dict[str, Any]:
    questions = bench.questions()
    asked = [q for q in questions for _ in range(samples)]
    indices = [s for _ in questions for s in range(samples)]
    log = HarnessLog(log_dir / "solver.sqlite")
    started = time.perf_counter()
    try:
        result = await run_inference(asked, harness_tree_for=bench.base_harness(), llm=provider, tool_dispatch_fn=bench.tool_dispatch,
                                     scorer=bench.score, log=log, run_id="real_solver", concurrency=1, max_steps=2,
                                     sample_indices=indices, params={"temperature": 0.7, "max_tokens": 48}, answer_parsing="lenient")
    finally:
        log.close()
    wall = time.perf_counter() - started
    records = [r for r in result.records.values() if r.correct is not None]
    modes = Counter(r.parse_mode for r in records)
    lenient_k = sum(bool(r.correct) for r in records)
    strict_k = sum(bool(r.correct) and r.parse_mode == STRICT for r in records)
    return {"records": records, "n": len(records), "n_infra": result.n_infra, "lenient_k": lenient_k, "strict_k": strict_k,
            "modes": modes, "wall_s": wall, "questions": {q.qid: q for q in questions}}


# The JSON instruction this project used before c016a35, measured beside the current one: an example object appended to
# the user message, the system message keeping the text contract (with its example values)
LEGACY_EDIT_OPS_JSON_INSTRUCTION = (
    "Reply with one JSON object instead of <edit> blocks: "
    '{"edits": [{"op": "add", "old": "", "new": "one rule sentence", "why": "short reason"}], "no_change": ""}. '
    '"op" is add, replace or delete; replace and delete quote "old" exactly as it is in the file; '
    '"no_change" is read only when "edits" is empty: when no edit is worth making, reply {"edits": [], "no_change": "the reason"}.'
)
LEGACY = "legacy_example_object"
SKILL_TEXT = "Read the question and the choices, then answer."


async def legacy_edit(provider: OpenAIProvider, picked: list[CaseSample], task_type: str, structured: str,
                      sample_index: int) -> tuple[bool, bool, str]:
    """(parsed, applied, parse error) of one editor call with the legacy JSON instruction (old schema order too)."""
    from harness.contracts.evolution import parse_edit_ops
    from harness.contracts.structured import edit_ops_schema, parse_edit_ops_json
    from harness.evolution.apply import apply_edits
    from harness.evolution.ask import ReplyContract, ask_parsed
    from harness.evolution.prompts import skill_editor_messages

    schema = edit_ops_schema(1)
    item = schema["properties"]["edits"]["items"]
    item["properties"] = {k: {kk: vv for kk, vv in item["properties"][k].items() if kk != "minLength"}
                          for k in ("op", "old", "new", "why")}
    contract = ReplyContract("edit-ops", parse_edit_ops, "edit_ops", schema, parse_edit_ops_json,
                             LEGACY_EDIT_OPS_JSON_INSTRUCTION)  # no text_contract: appended to the user message, as before
    messages = skill_editor_messages(task_type=task_type, skill_file=skill_path(DEFAULT_SKILL), skill_text=SKILL_TEXT,
                                     cases=picked, diagnoses=[], rejected=[], edit_budget=1)
    ops, error, _usd, _fmt = await ask_parsed(provider, Role.EDITOR, messages, contract, sample_index, reply_format=structured)
    if ops is None or ops.no_change is not None:
        return ops is not None, False, error
    new_text, _report = apply_edits(SKILL_TEXT, list(ops.edits), 1)
    return True, new_text != SKILL_TEXT, error


async def editor_and_diagnoser(provider: OpenAIProvider, solver: dict[str, Any], calls: int, structured: str) -> dict[str, Any]:
    failures = [r for r in solver["records"] if not r.correct]
    qs = solver["questions"]
    cases = [CaseSample.of(qs[r.qid], predicted=r.predicted, correct=False, trace_excerpt=f"[assistant] {r.reasoning or ''}")
             for r in failures]
    out: dict[str, Any] = {}
    formats = [TEXT, structured] + ([LEGACY] if structured != TEXT else [])
    for fmt in formats:
        if fmt in out:
            continue
        edit_ok = edit_applied = diag_ok = copies = 0
        started = time.perf_counter()
        for i in range(calls):
            picked = [cases[(i * 3 + j) % len(cases)] for j in range(3)] if cases else []
            task_type = picked[0].task_type if picked else "capitals"
            if fmt == LEGACY:
                parsed, applied, error = await legacy_edit(provider, picked, task_type, structured, 100 + i)
                edit_ok, edit_applied, copies = edit_ok + parsed, edit_applied + applied, copies + ("format example" in error)
                continue
            record = await evolve_single_skill(provider, task_type=task_type, skill_file=skill_path(DEFAULT_SKILL),
                                               skill_text=SKILL_TEXT, case_pack=picked, diagnoses=[], rejected=[],
                                               edit_budget=1, sample_index=100 + i, reply_format=fmt)
            edit_ok += not record.parse_error
            edit_applied += record.changed
            copies += "format example" in record.parse_error
            diagnosis = await run_diagnosis(provider, run_id=f"real_diag_{fmt}_{i}", failures=picked[:1], concurrency=1,
                                            sample_index=200 + i, reply_format=fmt)
            diag_ok += len(picked[:1]) - diagnosis.n_unparseable
        out[fmt] = {"calls": calls, "edit_parsed": edit_ok, "edit_applied": edit_applied, "copies": copies,
                    "diag_parsed": None if fmt == LEGACY else diag_ok, "wall_s": time.perf_counter() - started}
    return out


def render(args: argparse.Namespace, server: str, solver: dict[str, Any], probe: str, edits: dict[str, Any], total_s: float) -> str:
    n = solver["n"]

    def acc(k: int) -> str:
        lo, hi = wilson(k, n)
        return f"{k}/{n} = {k / n:.3f} (95 % CI {lo:.3f}-{hi:.3f})" if n else "n/a"

    lines = [
        "## Part 1: answer parsing and edit parsing",
        "",
        f"`python benchmarks/real.py --part parsing --samples {args.samples} --edit-calls {args.edit_calls}` "
        f"({total_s / 60:.1f} min wall on this machine; server: {server}).",
        "",
        f"Questions: `{Path(args.questions).relative_to(ROOT) if Path(args.questions).is_relative_to(ROOT) else args.questions}` "
        f"({len(solver['questions'])} multiple-choice questions, 4 choices, 4 task types; chance = 0.25), "
        f"{args.samples} sample(s) each, temperature 0.7, max_tokens 48, the default base harness of `benchmark=jsonl`.",
        "",
        "## 1. Solver accuracy by answer parsing",
        "",
        "| parsing | correct | accuracy |",
        "|---|---|---|",
        f"| strict (`ANSWER:` line only) | {solver['strict_k']} | {acc(solver['strict_k'])} |",
        f"| lenient (default) | {solver['lenient_k']} | {acc(solver['lenient_k'])} |",
        "",
        f"Infrastructure failures: {solver['n_infra']}. Solver wall time {solver['wall_s']:.0f} s "
        f"({solver['wall_s'] / max(1, n):.2f} s per rollout).",
        "",
        "Parse modes (share of judged rollouts):",
        "",
        "| mode | rollouts | share |",
        "|---|---|---|",
    ]
    for mode in ANSWER_MODES:
        k = solver["modes"].get(mode, 0)
        lines.append(f"| {mode} | {k} | {k / n:.3f} |" if n else f"| {mode} | 0 | n/a |")
    lines += [
        "",
        "## 2. Editor and diagnoser: parseable replies",
        "",
        f"Probe (`harness/evolution/ask.py`): this server's reply format is **{probe}**.",
        "",
        "| reply format | editor calls | editor replies parsed (≤ 1 retry) | unparsed, a copy of the example among the errors | edit applied "
        "| diagnoser replies parsed | wall |",
        "|---|---|---|---|---|---|---|",
    ]
    for fmt, row in edits.items():
        c = row["calls"]
        diag = "—" if row["diag_parsed"] is None else f"{row['diag_parsed']}/{c} = {row['diag_parsed'] / c:.2f}"
        lines.append(f"| {fmt} | {c} | {row['edit_parsed']}/{c} = {row['edit_parsed'] / c:.2f} | {row['copies']}/{c} | "
                     f"{row['edit_applied']}/{c} | {diag} | {row['wall_s']:.0f} s |")
    if LEGACY in edits:
        lines += ["", f"`{LEGACY}`: the same structured requests with the JSON instruction used before c016a35 (an example "
                  "object appended to the user message, the text contract with its example values kept in the system message, "
                  "the old schema order op/old/new/why); the current form replaces the text contract with a description of the "
                  "fields and no values, and the schema asks for \"why\" first and a non-empty \"new\"."]
    lines.append("")
    return "\n".join(lines)


async def parsing_part(args: argparse.Namespace, base_url: str, model: str, server: str) -> str:
    started = time.perf_counter()
    bench = JsonlBenchmark(read_user_questions(args.questions), scorer=load_scorer("exact"))
    solver_llm = OpenAIProvider(llm_config(base_url, model, max_tokens=48, temperature=0.7))
    editor_llm = OpenAIProvider(llm_config(base_url, model, max_tokens=args.editor_max_tokens, temperature=0.7))
    try:
        with tempfile.TemporaryDirectory() as tmp:
            solver = await solver_run(solver_llm, bench, args.samples, Path(tmp))
        if args.capture:
            capture(Path(args.capture), solver)
        probe = await probe_reply_format(editor_llm, Role.EDITOR)
        edits = await editor_and_diagnoser(editor_llm, solver, args.edit_calls, probe)
    finally:
        await solver_llm.aclose()
        await editor_llm.aclose()
    return render(args, server, solver, probe, edits, time.perf_counter() - started)


# ------------------------------------------------------------------ part 2: training on the easy set


def train_part(args: argparse.Namespace, base_url: str, model: str, server: str) -> str:
    """Run `stages.train` on the easy set against the server (a fresh response cache), then read what it wrote."""
    with tempfile.TemporaryDirectory(prefix="real-train-") as tmp:
        # the job's state must sit inside the project (train.state_dir is relative): runs/ (git-ignored), kept
        relative_job = f"runs/benchmarks-real/{time.strftime('%Y%m%d-%H%M%S')}"
        job = ROOT / relative_job
        overrides = ["llm=openai", "benchmark=jsonl", f"benchmark.path={_rel(Path(args.train_questions))}", f"llm.base_url={base_url}",
                     f"llm.model={model}", f"llm.cache_dir={Path(tmp) / 'cache'}", *TRAIN_OVERRIDES, f"hydra.run.dir={relative_job}"]
        command = [sys.executable, "-m", "stages.train", *overrides]
        started = time.perf_counter()
        done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)
        wall = time.perf_counter() - started
        job.mkdir(parents=True, exist_ok=True)
        (job / "stages_train.log").write_text(done.stdout + done.stderr, encoding="utf-8")
        if done.returncode != 0:
            raise SystemExit(f"stages.train failed ({done.returncode}); log in {job / 'stages_train.log'}:\n{done.stderr[-3000:]}")
        (job / RUN_INFO).write_text(json.dumps({"wall_s": wall, "server": server, "overrides": list(TRAIN_OVERRIDES)}), encoding="utf-8")
        run = read_training(job)
    return render_train(args, server, run, wall, TRAIN_OVERRIDES)


def rerender_train(args: argparse.Namespace) -> str:
    """Section 3 again from a finished `--part train` job directory (its state and RUN_INFO), without re-running it."""
    job = Path(args.from_job).resolve()
    info_path = job / RUN_INFO
    if not info_path.is_file():
        raise SystemExit(f"{info_path} is missing: --from-job takes a job directory written by `real.py --part train`")
    info = json.loads(info_path.read_text(encoding="utf-8"))
    return render_train(args, info["server"], read_training(job), float(info["wall_s"]), tuple(info["overrides"]))


def read_training(job: Path) -> dict[str, Any]:
    from harness.identity import holdout_run_id

    metrics = json.loads((job / "reports/metrics.json").read_text(encoding="utf-8"))
    gates = []
    for path in sorted((job / "state").glob("e*/s*/gate/report.json")):
        report = json.loads(path.read_text(encoding="utf-8"))
        gates += [{"epoch": report["epoch"], "step": report["step"], **row} for row in report.get("skills", [])]
    evolve_paths = sorted((job / "state").glob("e*/s*/evolve/evolve.json"))
    evolves = [json.loads(p.read_text(encoding="utf-8")) for p in evolve_paths]
    conn = sqlite3.connect(f"file:{job / 'state/holdout/runlog.sqlite'}?mode=ro", uri=True)
    try:
        held: dict[str, dict[str, bool | None]] = {}
        for which in ("base", "delivered"):
            rows = conn.execute("SELECT qid, correct FROM predictions WHERE run_id = ?", (holdout_run_id("real_bench", which),))
            held[which] = {qid: (None if c is None else bool(c)) for qid, c in rows}
    finally:
        conn.close()
    questions = {q.qid: q for q in read_user_questions(TRAIN_QUESTIONS)}
    return {"job": job, "metrics": metrics, "gates": gates, "evolves": evolves, "evolve_paths": evolve_paths, "held": held,
            "questions": questions,
            "delivered": json.loads((job / "state/holdout/holdout.json").read_text(encoding="utf-8"))}


def paired_difference(base: dict[str, bool | None], delivered: dict[str, bool | None]) -> dict[str, Any]:
    """Delivered minus base on the same test questions (both judged): wins, losses, the mean difference and a
    normal-approximation 95 % interval of it (paired, so the questions' difficulty cancels)."""
    both = [q for q in base if base[q] is not None and delivered.get(q) is not None]
    diffs = [int(bool(delivered[q])) - int(bool(base[q])) for q in both]
    n = len(diffs)
    mean = sum(diffs) / n if n else math.nan
    var = sum((d - mean) ** 2 for d in diffs) / (n - 1) if n > 1 else math.nan
    half = 1.96 * math.sqrt(var / n) if n > 1 else math.nan
    return {"n": n, "wins": diffs.count(1), "losses": diffs.count(-1), "mean": mean, "lo": mean - half, "hi": mean + half}


def _acc_cell(outcomes: dict[str, bool | None]) -> tuple[str, int, int]:
    judged = [v for v in outcomes.values() if v is not None]
    k, n = sum(judged), len(judged)
    lo, hi = wilson(k, n)
    return (f"{k}/{n} = {k / n:.3f} (95 % CI {lo:.3f}-{hi:.3f})" if n else "n/a"), k, n


def render_train(args: argparse.Namespace, server: str, run: dict[str, Any], wall: float, overrides: tuple[str, ...]) -> str:
    m, held, qs = run["metrics"], run["held"], run["questions"]
    base_cell, base_k, n = _acc_cell(held["base"])
    deliv_cell, deliv_k, _ = _acc_cell(held["delivered"])
    paired = paired_difference(held["base"], held["delivered"])
    actions = Counter(g["action"] for g in run["gates"])
    decided = sum(actions[a] for a in ("accept", "reject", "probation"))
    fallbacks = sum(1 for doc in run["evolves"] for s in doc["skipped"] if "unparseable" in str(s.get("reason", "")))
    proposed = sum(len(doc["candidates"]) for doc in run["evolves"])
    lines = [
        "## 3. Training on the easy set: base vs delivered on held-out questions",
        "",
        f"`python benchmarks/real.py --part train` ({wall / 60:.1f} min wall for `stages.train`; server: {server}; "
        f"the run's state and report: `{_rel(run['job'])}`): "
        f"`python -m stages.train llm=openai benchmark=jsonl benchmark.path={Path(args.train_questions).name}` with",
        f"`{' '.join(overrides)}`.",
        "",
        f"Questions: `{_rel(Path(args.train_questions))}` ({len(qs)} questions, 4 choices, "
        f"{len({q.task_type for q in qs.values()})} task types: {', '.join(sorted({q.task_type for q in qs.values()}))}; "
        f"chance = 0.25; written with `benchmarks/real_questions.py`). The pools stage holds out {n} test questions; "
        "training sees only the diagnosis and validation pools.",
        "",
        "| harness | held-out test accuracy |",
        "|---|---|",
        f"| base (v0) | {base_cell} |",
        f"| delivered ({run['delivered']['delivered']['skills_version']}/{run['delivered']['delivered']['prompts_version']}) "
        f"| {deliv_cell} |",
        "",
        f"Paired on the same {paired['n']} questions: delivered better on {paired['wins']}, worse on {paired['losses']}; "
        f"difference {paired['mean']:+.3f} (95 % CI {paired['lo']:+.3f} to {paired['hi']:+.3f}).",
        "",
        "Per task type on the held-out questions (base -> delivered correct):",
        "",
        "| task type | n | base | delivered |",
        "|---|---|---|---|",
    ]
    for task_type in sorted({qs[q].task_type for q in held["base"]}):
        ids = [q for q in held["base"] if qs[q].task_type == task_type]
        b = sum(bool(held["base"][q]) for q in ids)
        d = sum(bool(held["delivered"].get(q)) for q in ids)
        lines.append(f"| {task_type} | {len(ids)} | {b} | {d} |")
    rollouts = int(m["rollouts"])
    lines += [
        "",
        f"Rollouts {rollouts} in {wall:.0f} s = {rollouts / wall:.2f} rollouts/s (training and held-out evaluation; "
        "editor and diagnoser calls are not rollouts but are inside the wall time).",
        f"Parse-failure rate (ambiguous + none) over the run: {m['parse_failure_rate']:.3f}; parse modes: "
        + ", ".join(f"{k.removeprefix('parse_share_')} {v:.3f}" for k, v in m.items() if k.startswith("parse_share_") and v) + ".",
        f"Editor: {proposed} candidate edit(s) parsed and applied for gating, {fallbacks} reply(ies) unparseable after the "
        "retry (recorded as `skipped_no_change` fallbacks, never applied).",
        "",
        "What the editor proposed (every applied edit that went to a gate; SmolLM2's own words, cut at 120 characters):",
        "",
        "| epoch | step | task type | op | new text |",
        "|---|---|---|---|---|",
        *[f"| {e['epoch']} | {e['step']} | {e['task_type']} | {e['op']} | {_cell(e['text'], 120)} |" for e in proposed_edits(run)],
        "",
        "Gate decisions:",
        "",
        "| epoch | step | task type | action | wins | losses | ties | pairs | reason |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for g in run["gates"]:
        cells = [g.get(k) for k in ("epoch", "step", "task_type", "action", "wins", "losses", "ties", "n_pairs", "reason")]
        lines.append("| " + " | ".join("—" if c is None else str(c).replace("|", "\\|") for c in cells) + " |")
    lines += ["", "**Did training help this model?** " + verdict(actions, decided, paired, base_k, deliv_k, n), "",
              "**Why, from the numbers:** " + why(run, base_k, n), ""]
    return "\n".join(lines)


def why(run: dict[str, Any], base_k: int, n: int) -> str:
    """The circumstances of the verdict: the model's answers, its edits' fate, the gates' evidence."""
    m, gates = run["metrics"], run["gates"]
    gated = [g for g in gates if g["action"] in ("accept", "reject", "probation")]
    screened = sum("screen" in str(g.get("reason", "")) for g in gated)
    at_budget = sum("end of the budget" in str(g.get("reason", "")) for g in gated)
    pairs = [int(g["n_pairs"]) for g in gated if g.get("n_pairs") is not None]
    ties = sum(int(g.get("ties") or 0) for g in gated)
    skipped = [g for g in gates if g["action"] == "skipped_no_change"]
    unparsed = sum("unparseable" in str(g.get("reason", "")) for g in skipped)
    parts = [f"the base harness answers {base_k}/{n} held-out questions (chance 0.25), and "
             f"{m['parse_failure_rate']:.0%} of the run's replies designate no single choice (ambiguous or none), so most "
             "pairs are ties whatever the skill file says"]
    if gated:
        parts.append(f"{len(gated)} edit(s) reached a gate: {screened} rejected by the pre-gate screen, {at_budget} undecided "
                     f"at the budget of {max(pairs) if pairs else 0} pairs (rejected, `gate.undecided=reject`), "
                     f"{len(gated) - screened - at_budget} decided by the e-process; {ties} of {sum(pairs)} gate pairs were ties")
    if skipped:
        parts.append(f"{len(skipped)} gate row(s) had nothing to test ({unparsed} after an editor reply unparseable twice, "
                     f"{len(skipped) - unparsed} with no applicable edit)")
    parts.append("the edits the 135M editor wrote (listed above) are its own words under the JSON schema; whether they are "
                 "rules at all is for the reader, the gate only measured that none beat the baseline")
    return "; ".join(parts) + "."


def verdict(actions: Counter, decided: int, paired: dict[str, Any], base_k: int, deliv_k: int, n: int) -> str:
    """The plain answer, from the numbers only."""
    gates = sum(actions.values())
    if actions["accept"] == 0:
        return (f"No. No edit was accepted ({decided} of {gates} gate rows decided: "
                + ", ".join(f"{a} {k}" for a, k in sorted(actions.items()))
                + f"), so the delivered harness is the base harness and the held-out difference ({base_k}/{n} vs {deliv_k}/{n}) "
                "is sampling noise only. The gates found no edit whose candidate beat the baseline on paired samples.")
    if paired["lo"] > 0:
        return (f"Yes: {actions['accept']} edit(s) accepted and the delivered harness is better on the held-out questions "
                f"({paired['mean']:+.3f}, 95 % CI {paired['lo']:+.3f} to {paired['hi']:+.3f}, excluding 0).")
    return (f"Not shown: {actions['accept']} edit(s) accepted, but on the held-out questions the paired difference "
            f"{paired['mean']:+.3f} has a 95 % CI ({paired['lo']:+.3f} to {paired['hi']:+.3f}) that includes 0, so an "
            "improvement is not established at this size.")


def proposed_edits(run: dict[str, Any]) -> list[dict[str, Any]]:
    """Every applied edit of every gated candidate: epoch, step, task type, op and its new text."""
    out = []
    for doc, path in zip(run["evolves"], run["evolve_paths"]):
        epoch, step = int(path.parts[-4].lstrip("e")), int(path.parts[-3].lstrip("s"))
        for candidate in doc["candidates"]:
            record = candidate["record"]
            for application in record.get("apply_report", []):
                if application.get("status") == "applied":
                    edit = application["edit"]
                    out.append({"epoch": epoch, "step": step, "task_type": record.get("task_type", "?"), "op": edit["op"],
                                "text": edit.get("text") or edit.get("old", "")})
    return out


def _cell(text: str, limit: int) -> str:
    text = " ".join(str(text).split()).replace("|", "\\|")
    return text if len(text) <= limit else text[:limit] + " …"


def _rel(path: Path) -> str:
    resolved = path.resolve()
    return str(resolved.relative_to(ROOT)) if resolved.is_relative_to(ROOT) else str(path)


def merge_parts(old: str, parts: dict[str, str]) -> str:
    """The report with each part in `parts` replaced (or appended); other parts' blocks kept as they were."""
    title = "# Real-model benchmark: SmolLM2-135M-Instruct via llama.cpp\n"
    blocks = {}
    for name in BLOCKS:
        begin, end = f"<!-- begin:{name} -->", f"<!-- end:{name} -->"
        if begin in old and end in old:
            blocks[name] = old[old.index(begin) + len(begin):old.index(end)].strip("\n")
    blocks.update({k: v.strip("\n") for k, v in parts.items()})
    return title + "".join(f"\n<!-- begin:{name} -->\n{blocks[name]}\n<!-- end:{name} -->\n" for name in BLOCKS if name in blocks)


def run_parts(args: argparse.Namespace) -> dict[str, str]:
    wanted = PARTS if args.part == "all" else (args.part,)
    server_cm = None
    if args.base_url:
        base_url, model, server = args.base_url, args.model, args.base_url
    else:
        server_cm = LlamaServer(threads=args.threads).start()
        base_url, model, server = server_cm.base_url, server_cm.model_id, f"llama_cpp.server, {args.threads} threads, 127.0.0.1"
    out: dict[str, str] = {}
    try:
        if "parsing" in wanted:
            out["parsing"] = asyncio.run(parsing_part(args, base_url, model, server))
        if "train" in wanted:
            out["train"] = train_part(args, base_url, model, server)
    finally:
        if server_cm is not None:
            server_cm.stop()
    return out


def capture(path: Path, solver: dict[str, Any]) -> None:
    """Every solver reply of the run as JSONL: qid, sample_index, choices, answer, reply (the recorded-replies fixture)."""
    qs = solver["questions"]
    with path.open("w", encoding="utf-8") as handle:
        for r in sorted(solver["records"], key=lambda r: (r.qid, r.sample_index)):
            handle.write(json.dumps({"qid": r.qid, "sample_index": r.sample_index, "choices": list(qs[r.qid].choices),
                                     "answer": r.answer, "reply": r.reasoning}, ensure_ascii=False) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--part", choices=("all", *PARTS), default="all")
    parser.add_argument("--questions", default=str(QUESTIONS), help="part parsing: the questions file")
    parser.add_argument("--train-questions", default=str(TRAIN_QUESTIONS), help="part train: the questions file")
    parser.add_argument("--samples", type=int, default=2)
    parser.add_argument("--edit-calls", type=int, default=6)
    parser.add_argument("--editor-max-tokens", type=int, default=256)
    parser.add_argument("--threads", type=int, default=DEFAULT_THREADS)  # measured: reports/benchmarks/llama_server.md
    parser.add_argument("--base-url", default=None, help="use a running server instead of starting one")
    parser.add_argument("--model", default="smollm2", help="model name with --base-url")
    parser.add_argument("--capture", default=None, help="write every solver reply to this JSONL file")
    parser.add_argument("--from-job", default=None, help="part train: re-render section 3 from this finished job directory")
    parser.add_argument("--out", default=str(REPORT))
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # `kill <pid>` still stops the server it started
    parts = {"train": rerender_train(args)} if args.from_job else run_parts(args)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    text = merge_parts(out.read_text(encoding="utf-8") if out.is_file() else "", parts)
    out.write_text(text, encoding="utf-8")
    print(text)


if __name__ == "__main__":
    main()
