"""Does the real model couple a gate's two arms? Discordance of base vs candidate with the same seed and with different seeds.

    python benchmarks/real_coupling.py [--questions N] [--samples K]   # starts the llama.cpp server (SmolLM2)

A gate pair asks one question of the baseline and of the candidate with the
SAME sample index, and OpenAIProvider sends `seed = sample_seed(index)`
(harness/llm/protocol.py): where the server honours seeds, the two arms draw
their tokens from the same random stream (common random numbers). The pairs a
gate needs grow with the discordance P(C != B), so an arm coupling that lowers
it makes every gate cheaper on that server without touching validity (the
betting e-process only needs pairs independent of each other, whatever the
joint law of C and B within a pair). The simulated solver draws the arms
independently (its uniforms are keyed by the harness's content hash), so its
gate costs assume no coupling.

Measured here on tests/fixtures/real_easy_mc.jsonl: the base harness B and a
candidate C (B plus one sentence in every skill file) on N questions x K
sample indices, C once with B's sample indices (same seeds, as the gate runs)
and once with indices shifted by 10,000 (different seeds); temperature 0.7,
48 tokens, lenient parsing, through `run_inference` as the loop runs it.
Prints P(C != B), P(C = B = right), accuracies, and the pairs ratio implied
(discordance same / different). Writes the block between
`<!-- begin:coupling -->` and `<!-- end:coupling -->` of reports/benchmarks/real.md.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
for extra in (ROOT, ROOT / "benchmarks"):
    if str(extra) not in sys.path:
        sys.path.insert(0, str(extra))

import real  # noqa: E402  (benchmarks/real.py: server, provider config, report merging)

from harness.bench.jsonl import JsonlBenchmark, read_user_questions  # noqa: E402
from harness.bench.scoring import load_scorer  # noqa: E402
from harness.inference import run_inference  # noqa: E402
from harness.llm.local_server import LlamaServer  # noqa: E402
from harness.llm.openai_provider import OpenAIProvider  # noqa: E402
from harness.log import HarnessLog  # noqa: E402

EXTRA = "Check each choice against the question before you answer."
SHIFT = 10_000


async def arm(provider, questions, tree, bench, indices, log_dir: Path, run_id: str) -> dict[tuple[str, int], bool | None]:
    log = HarnessLog(log_dir / f"{run_id}.sqlite")
    asked = [q for q in questions for _ in indices]
    idx = [i for _ in questions for i in indices]
    try:
        result = await run_inference(asked, harness_tree_for=tree, llm=provider, tool_dispatch_fn=bench.tool_dispatch,
                                     scorer=bench.score, log=log, run_id=run_id, concurrency=1, max_steps=2,
                                     sample_indices=idx, params={"temperature": 0.7, "max_tokens": 48}, answer_parsing="lenient")
    finally:
        log.close()
    return {(r.qid, r.sample_index): r.correct for r in result.records.values()}


def stats(base: dict, cand: dict, shift: int) -> dict:
    pairs = [(b, cand.get((q, s + shift))) for (q, s), b in base.items()]
    pairs = [(b, c) for b, c in pairs if b is not None and c is not None]
    n = len(pairs)
    disc = sum(b != c for b, c in pairs) / n
    return {"n": n, "discordance": disc, "disc_se": math.sqrt(disc * (1 - disc) / n), "both_right": sum(b and c for b, c in pairs) / n,
            "acc_b": sum(b for b, _ in pairs) / n, "acc_c": sum(c for _, c in pairs) / n}


async def measure(args, base_url: str, model: str) -> dict:
    bench = JsonlBenchmark(read_user_questions(args.questions_file), scorer=load_scorer("exact"))
    every = bench.questions()
    questions = every[:: max(1, len(every) // args.questions)][: args.questions]  # spread over the task types
    base_tree = bench.base_harness()
    skills = [p for p in base_tree if p.startswith("skills/") and p.endswith("SKILL.md")]
    if not skills:
        raise SystemExit(f"{args.questions_file}: the base harness has no skill file to edit")
    cand_tree = base_tree.with_files({p: base_tree[p].rstrip("\n") + f"\n- {EXTRA}\n" for p in skills})
    provider = OpenAIProvider(real.llm_config(base_url, model, max_tokens=48, temperature=0.7))
    indices = list(range(args.samples))
    try:
        with tempfile.TemporaryDirectory() as tmp:
            base = await arm(provider, questions, base_tree, bench, indices, Path(tmp), "coupling_base")
            same = await arm(provider, questions, cand_tree, bench, indices, Path(tmp), "coupling_cand_same")
            other = await arm(provider, questions, cand_tree, bench, [i + SHIFT for i in indices], Path(tmp), "coupling_cand_shifted")
    finally:
        await provider.aclose()
    return {"same": stats(base, same, 0), "different": stats(base, other, SHIFT), "questions": len(questions), "samples": args.samples}


def render(res: dict, cmd: str, wall: float, server: str) -> str:
    s, d = res["same"], res["different"]
    ratio = s["discordance"] / d["discordance"] if d["discordance"] else float("nan")
    L = ["## 4. Coupling of a gate's two arms on the real model", "",
         f"Command: `{cmd}` — measured {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, wall {wall / 60:.1f} min; server: {server}.", "",
         f"Base harness B against C = B plus one sentence (\"{EXTRA}\") in every skill file, {res['questions']} questions of "
         f"`tests/fixtures/real_easy_mc.jsonl` x {res['samples']} sample indices, temperature 0.7, 48 tokens, lenient parsing. "
         "Same seeds = C asked with B's sample indices, as every gate pair is (OpenAIProvider sends seed = sample index); "
         f"different seeds = C's indices shifted by {SHIFT}.", "",
         "| C's seeds | pairs | P(C != B) ± SE | P(both right) | accuracy B | accuracy C |", "|---|---|---|---|---|---|"]
    for label, r in (("same as B's (the gate)", s), ("different", d)):
        L.append(f"| {label} | {r['n']} | {r['discordance']:.3f} ± {r['disc_se']:.3f} | {r['both_right']:.3f} | {r['acc_b']:.3f} | {r['acc_c']:.3f} |")
    L += ["", f"Discordance ratio same / different: {ratio:.2f}. The pairs a gate needs for a given gain scale roughly with the "
          "discordance, so on this server the gate's same-seed pairs cost about that fraction of what independent arms "
          "would (the simulated solver's arms are independent)."]
    return "\n".join(L) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--questions", type=int, default=80)
    ap.add_argument("--samples", type=int, default=2)
    ap.add_argument("--questions-file", default=str(real.TRAIN_QUESTIONS))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", default=str(real.REPORT))
    args = ap.parse_args()
    started = time.monotonic()
    server = LlamaServer(threads=args.threads).start()
    try:
        res = asyncio.run(measure(args, server.base_url, server.model_id))
    finally:
        server.stop()
    cmd = f"python benchmarks/real_coupling.py --questions {args.questions} --samples {args.samples}"
    text = render(res, cmd, time.monotonic() - started, f"llama_cpp.server, {args.threads} threads, 127.0.0.1")
    out = Path(args.out)
    out.write_text(real.merge_parts(out.read_text(encoding="utf-8") if out.is_file() else "", {"coupling": text}), encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
