"""Real-model benchmark: SmolLM2-135M-Instruct (llama.cpp server, CPU) on the questions file the tests ship.

    python benchmarks/real.py                      # starts the server, writes reports/benchmarks/real.md
    python benchmarks/real.py --samples 1 --edit-calls 2 --out /tmp/real.md   # smaller
    python benchmarks/real.py --capture tests/fixtures/smollm2_replies.jsonl  # also record every solver reply

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
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
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
from harness.llm.local_server import LlamaServer  # noqa: E402
from harness.llm.openai_provider import OpenAIProvider  # noqa: E402
from harness.log import HarnessLog  # noqa: E402

QUESTIONS = ROOT / "tests/fixtures/real_mc.jsonl"
REPORT = ROOT / "reports/benchmarks/real.md"


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


async def editor_and_diagnoser(provider: OpenAIProvider, solver: dict[str, Any], calls: int, structured: str) -> dict[str, Any]:
    failures = [r for r in solver["records"] if not r.correct]
    qs = solver["questions"]
    cases = [CaseSample(qid=r.qid, task_type=r.task_type, question=qs[r.qid].question, predicted=r.predicted, answer=r.answer,
                        correct=False, trace_excerpt=f"[assistant] {r.reasoning or ''}") for r in failures]
    out: dict[str, Any] = {}
    for fmt in (TEXT, structured):
        if fmt in out:
            continue
        edit_ok = edit_applied = diag_ok = 0
        started = time.perf_counter()
        for i in range(calls):
            picked = [cases[(i * 3 + j) % len(cases)] for j in range(3)] if cases else []
            task_type = picked[0].task_type if picked else "capitals"
            record = await evolve_single_skill(provider, task_type=task_type, skill_file=skill_path(DEFAULT_SKILL),
                                               skill_text="Read the question and the choices, then answer.",
                                               case_pack=picked, diagnoses=[], rejected=[], edit_budget=1, sample_index=100 + i,
                                               reply_format=fmt)
            edit_ok += not record.parse_error
            edit_applied += record.changed
            diagnosis = await run_diagnosis(provider, run_id=f"real_diag_{fmt}_{i}", failures=picked[:1], concurrency=1,
                                            sample_index=200 + i, reply_format=fmt)
            diag_ok += len(picked[:1]) - diagnosis.n_unparseable
        out[fmt] = {"calls": calls, "edit_parsed": edit_ok, "edit_applied": edit_applied, "diag_parsed": diag_ok,
                    "wall_s": time.perf_counter() - started}
    return out


def render(args: argparse.Namespace, server: str, solver: dict[str, Any], probe: str, edits: dict[str, Any], total_s: float) -> str:
    n = solver["n"]

    def acc(k: int) -> str:
        lo, hi = wilson(k, n)
        return f"{k}/{n} = {k / n:.3f} (95 % CI {lo:.3f}-{hi:.3f})" if n else "n/a"

    lines = [
        "# Real-model benchmark: SmolLM2-135M-Instruct via llama.cpp",
        "",
        f"`python benchmarks/real.py --samples {args.samples} --edit-calls {args.edit_calls}` "
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
        "| reply format | editor calls | editor replies parsed (≤ 1 retry) | edit applied | diagnoser replies parsed | wall |",
        "|---|---|---|---|---|---|",
    ]
    for fmt, row in edits.items():
        c = row["calls"]
        lines.append(f"| {fmt} | {c} | {row['edit_parsed']}/{c} = {row['edit_parsed'] / c:.2f} | {row['edit_applied']}/{c} | "
                     f"{row['diag_parsed']}/{c} = {row['diag_parsed'] / c:.2f} | {row['wall_s']:.0f} s |")
    lines.append("")
    return "\n".join(lines)


async def main_async(args: argparse.Namespace) -> str:
    started = time.perf_counter()
    bench = JsonlBenchmark(read_user_questions(args.questions), scorer=load_scorer("exact"))
    server_cm = None
    if args.base_url:
        base_url, model, server = args.base_url, args.model, args.base_url
    else:
        server_cm = LlamaServer(threads=args.threads).start()
        base_url, model, server = server_cm.base_url, server_cm.model_id, f"llama_cpp.server, {args.threads} threads, 127.0.0.1"
    try:
        solver_llm = OpenAIProvider(llm_config(base_url, model, max_tokens=48, temperature=0.7))
        editor_llm = OpenAIProvider(llm_config(base_url, model, max_tokens=args.editor_max_tokens, temperature=0.7))
        with tempfile.TemporaryDirectory() as tmp:
            solver = await solver_run(solver_llm, bench, args.samples, Path(tmp))
        if args.capture:
            capture(Path(args.capture), solver)
        probe = await probe_reply_format(editor_llm, Role.EDITOR)
        edits = await editor_and_diagnoser(editor_llm, solver, args.edit_calls, probe)
        await solver_llm.aclose()
        await editor_llm.aclose()
    finally:
        if server_cm is not None:
            server_cm.stop()
    return render(args, server, solver, probe, edits, time.perf_counter() - started)


def capture(path: Path, solver: dict[str, Any]) -> None:
    """Every solver reply of the run as JSONL: qid, sample_index, choices, answer, reply (the recorded-replies fixture)."""
    qs = solver["questions"]
    with path.open("w", encoding="utf-8") as handle:
        for r in sorted(solver["records"], key=lambda r: (r.qid, r.sample_index)):
            handle.write(json.dumps({"qid": r.qid, "sample_index": r.sample_index, "choices": list(qs[r.qid].choices),
                                     "answer": r.answer, "reply": r.reasoning}, ensure_ascii=False) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--questions", default=str(QUESTIONS))
    parser.add_argument("--samples", type=int, default=2)
    parser.add_argument("--edit-calls", type=int, default=6)
    parser.add_argument("--editor-max-tokens", type=int, default=256)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--base-url", default=None, help="use a running server instead of starting one")
    parser.add_argument("--model", default="smollm2", help="model name with --base-url")
    parser.add_argument("--capture", default=None, help="write every solver reply to this JSONL file")
    parser.add_argument("--out", default=str(REPORT))
    args = parser.parse_args()
    text = asyncio.run(main_async(args))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(text, encoding="utf-8")
    print(text)


if __name__ == "__main__":
    main()
