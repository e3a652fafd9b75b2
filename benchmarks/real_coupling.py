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
(discordance same / different). The rollouts ask for the answer's token
log-probabilities (top 5), so the same run also measures the soft score on this
model (harness/bench/soft.py): whether it is calibrated (mean soft score against
accuracy over the same rollouts, paired), and the second moment of the pair
statistic the betting gate uses under gate.metric=soft (v_C - v_B) against
hard outcomes (C - B) on the same-seed pairs. Writes the block between
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
if str(ROOT) not in sys.path:  # run as a file: the project root, so `benchmarks` and `harness` import as packages
    sys.path.insert(0, str(ROOT))

from benchmarks import real  # noqa: E402  (benchmarks/real.py: server, provider config, report merging)
from harness.bench.jsonl import JsonlBenchmark, read_user_questions  # noqa: E402
from harness.bench.scoring import load_scorer  # noqa: E402
from harness.inference import run_inference  # noqa: E402
from harness.llm.local_server import DEFAULT_THREADS, LlamaServer  # noqa: E402
from harness.llm.openai_provider import OpenAIProvider  # noqa: E402
from harness.log import HarnessLog  # noqa: E402

EXTRA = "Check each choice against the question before you answer."
SHIFT = 10_000


PARAMS = {"temperature": 0.7, "max_tokens": 48, "logprobs": True, "top_logprobs": 5}


async def arm(provider, questions, tree, bench, indices, log_dir: Path, run_id: str) -> dict[tuple[str, int], tuple[bool | None, float | None]]:
    """(qid, sample index) -> (correct, soft score); None = infra / no soft score."""
    log = HarnessLog(log_dir / f"{run_id}.sqlite")
    asked = [q for q in questions for _ in indices]
    idx = [i for _ in questions for i in indices]
    try:
        result = await run_inference(asked, harness_tree_for=tree, llm=provider, tool_dispatch_fn=bench.tool_dispatch,
                                     scorer=bench.score, log=log, run_id=run_id, concurrency=1, max_steps=2,
                                     sample_indices=idx, params=PARAMS, answer_parsing="lenient")
    finally:
        log.close()
    return {(r.qid, r.sample_index): (r.correct, r.soft_score) for r in result.records.values()}


def _hard(outcomes: dict) -> dict:
    return {k: v[0] for k, v in outcomes.items()}


def calibration(outcomes: dict) -> dict:
    """Mean soft score against accuracy over the judged rollouts that have a soft score, paired: gap = mean(v - correct),
    its SE over the rollouts; the share of judged rollouts with a soft score."""
    judged = [(c, v) for c, v in outcomes.values() if c is not None]
    both = [(float(c), v) for c, v in judged if v is not None]
    n = len(both)
    if n < 2:
        return {"n": n, "judged": len(judged)}
    diffs = [v - c for c, v in both]
    mean = sum(diffs) / n
    sd = math.sqrt(sum((d - mean) ** 2 for d in diffs) / (n - 1))
    return {"n": n, "judged": len(judged), "acc": sum(c for c, _ in both) / n, "soft": sum(v for _, v in both) / n,
            "gap": mean, "gap_se": sd / math.sqrt(n)}


def soft_pairs(base: dict, cand: dict) -> dict:
    """Same-seed pairs with both soft scores: E[(C - B)^2] of hard outcomes and of soft values (v_C - v_B)."""
    pairs = [(base[k], cand[k]) for k in base if k in cand and None not in (base[k][0], base[k][1], cand[k][0], cand[k][1])]
    n = len(pairs)
    if not n:
        return {"n": 0}
    return {"n": n, "m2_hard": sum((float(c[0]) - float(b[0])) ** 2 for b, c in pairs) / n,
            "m2_soft": sum((c[1] - b[1]) ** 2 for b, c in pairs) / n,
            "gain_hard": sum(float(c[0]) - float(b[0]) for b, c in pairs) / n, "gain_soft": sum(c[1] - b[1] for b, c in pairs) / n}


def stats(base: dict, cand: dict, shift: int) -> dict:
    base, cand = _hard(base), _hard(cand)
    aligned = [(b, cand.get((q, s + shift))) for (q, s), b in base.items()]
    pairs = [(b, c) for b, c in aligned if b is not None and c is not None]
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
    return {"same": stats(base, same, 0), "different": stats(base, other, SHIFT), "questions": len(questions), "samples": args.samples,
            "calibration": {"B": calibration(base), "C": calibration(same)}, "soft_pairs": soft_pairs(base, same)}


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
    L += ["", "### The soft score on this model (gate.metric=soft)", "",
          "The same rollouts asked for the answer's token log-probabilities (top 5). Soft score v = the probability the "
          "model gave the right letter at its answer position (harness/bench/soft.py). A soft gate tests the mean of v; "
          "it tests the accuracy only if mean(v) = accuracy (calibrated).", "",
          "| harness | judged rollouts | with a soft score | accuracy | mean soft score | gap mean(v - correct) ± SE |",
          "|---|---|---|---|---|---|"]
    for label, c in (("B (base)", res["calibration"]["B"]), ("C (same seeds)", res["calibration"]["C"])):
        if "gap" in c:
            L.append(f"| {label} | {c['judged']} | {c['n']} | {c['acc']:.3f} | {c['soft']:.3f} | {c['gap']:+.3f} ± {c['gap_se']:.3f} |")
        else:
            L.append(f"| {label} | {c['judged']} | {c['n']} | – | – | – |")
    sp = res["soft_pairs"]
    if sp.get("n"):
        ratio_m2 = sp["m2_soft"] / sp["m2_hard"] if sp["m2_hard"] else float("nan")
        L += ["", f"Same-seed pairs with both soft scores: {sp['n']}. E[(C - B)^2] = {sp['m2_hard']:.4f} for hard outcomes, "
              f"E[(v_C - v_B)^2] = {sp['m2_soft']:.4f} for soft values (ratio {ratio_m2:.2f}; the pairs a betting gate needs "
              f"scale with it); mean gain {sp['gain_hard']:+.4f} hard, {sp['gain_soft']:+.4f} soft."]
    return "\n".join(L) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--questions", type=int, default=80)
    ap.add_argument("--samples", type=int, default=2)
    ap.add_argument("--questions-file", default=str(real.TRAIN_QUESTIONS))
    ap.add_argument("--threads", type=int, default=DEFAULT_THREADS)  # measured: reports/benchmarks/llama_server.md
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
