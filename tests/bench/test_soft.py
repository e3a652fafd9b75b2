"""Soft scores (issue 14 item 9): token log-probabilities -> P(right letter); float scorers; the simulated world's."""

from __future__ import annotations

import asyncio
import json
import math
import statistics
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from harness.bench.soft import (
    PASS_THRESHOLD,
    MissingSoftScoreError,
    mean_soft_score,
    metric_outcome,
    metric_value,
    mixed_score,
    scored,
)
from harness.contracts.logprobs import TokenLogprob, answer_letter_probability, logprobs_from_json, parse_logprobs
from harness.inference import run_inference
from harness.llm.cache import CachedProvider, ResponseCache
from harness.llm.openai_provider import OpenAIProvider
from harness.log import HarnessLog
from harness.questions import Question
from harness.sim.provider import SimProvider
from harness.sim.world import World
from harness.tree import HarnessTree
from tests.support.http_json import send_json
from tests.support.llm_config import fast_llm_config

MC = Question(qid="q1", task_type="t", question="Which?", answer="B", choices=("red", "blue", "green", "pink"))
FREE = Question(qid="q2", task_type="t", question="Capital of France?", answer="Paris")


def tok(token: str, p: float, *top: tuple[str, float]) -> TokenLogprob:
    return TokenLogprob(token, math.log(p), tuple((t, math.log(q)) for t, q in top))


def test_right_letter_probability_at_the_answer_position():
    tokens = (tok("Reasoning: blue fits.\nANSWER:", 1.0), tok(" B", 0.6, (" B", 0.6), ("B", 0.1), (" A", 0.2), (" C", 0.05), ("the", 0.05)))
    # " B" and "B" are one letter; "the" is no letter: P(B) / P(any letter) = 0.7 / 0.95
    assert answer_letter_probability(tokens, "B", "B", "ABCD") == pytest.approx(0.7 / 0.95)
    assert answer_letter_probability(tokens, "B", "A", "ABCD") == pytest.approx(0.2 / 0.95)
    assert answer_letter_probability(tokens, "B", "D", "ABCD") == 0.0  # outside the listed top-k: lower bound 0
    assert answer_letter_probability(tokens, None, "B", "ABCD") == 0.0  # no answer: no mass on the right one
    assert answer_letter_probability(None, "B", "B", "ABCD") is None  # no log-probabilities: no soft score
    # the last letter token that states the predicted letter is the answer position
    earlier = (tok("A", 0.9, ("A", 0.9), ("B", 0.1)), tok(" ... so ANSWER: (", 1.0), tok("B", 0.5, ("B", 0.5), ("C", 0.5)))
    assert answer_letter_probability(earlier, "B", "B", "ABCD") == pytest.approx(0.5)


def test_wire_format_round_trip_and_malformed_blocks_are_named():
    choice = {"logprobs": {"content": [{"token": " B", "logprob": -0.5, "bytes": [32, 66],
                                        "top_logprobs": [{"token": " B", "logprob": -0.5}, {"token": " A", "logprob": -1.2}]}]}}
    tokens = parse_logprobs(choice)
    assert tokens == (TokenLogprob(" B", -0.5, ((" B", -0.5), (" A", -1.2))),)
    assert logprobs_from_json(json.loads(json.dumps([t.to_json() for t in tokens]))) == tokens
    assert parse_logprobs({"message": {}}) is None and parse_logprobs({"logprobs": None}) is None
    with pytest.raises(ValueError, match=r"logprobs.content\[0\] is malformed"):
        parse_logprobs({"logprobs": {"content": [{"token": "x"}]}})


def test_a_float_scorer_is_the_soft_score_and_decides_correctness_at_one_half():
    assert scored(FREE, "Paris", 0.8, None) == (True, 0.8)
    assert scored(FREE, "Lyon", 0.2, None) == (False, 0.2)
    assert scored(FREE, "P", PASS_THRESHOLD, None) == (True, 0.5)
    assert scored(FREE, "Paris", True, None) == (True, None)  # a bool scorer on free form: no soft score
    for bad in (1.5, -0.1, float("nan"), 1, "yes"):
        with pytest.raises(ValueError, match="expected a bool or a float in \\[0, 1\\]"):
            scored(FREE, "x", bad, None)
    assert mean_soft_score([0.2, 0.4]) == pytest.approx(0.3) and mean_soft_score([0.2, None]) is None and mean_soft_score([]) is None
    assert mixed_score(0.5, 0.7) == pytest.approx(0.6) and mixed_score(0.5, None) is None


def test_the_simulated_soft_score_is_unbiased_for_p_correct_and_less_noisy():
    world = World.generate(seed=5, n_task_types=2, questions_per_type=6)
    provider = SimProvider(world)
    from harness.contracts.solver import render_system_message

    read = provider.solver.read(render_system_message(world.base_harness(), world.questions[0].task_type))
    n = 3000
    for qid in [q.qid for q in world.questions[:4]]:
        right = world.truth[qid].answer
        draws = [provider.solver.draw(read, qid, s) for s in range(n)]
        q = [provider.solver.letter_distribution(read, qid, s, d)[right] for s, d in zip(range(n), draws)]
        p = draws[0].p_correct
        se = math.sqrt(p * (1 - p) / (world.params.soft_concentration + 1) / n)
        assert abs(statistics.fmean(q) - p) < 4 * se + 1e-9  # E[q] = p: seeded simulation, 4 standard errors
        hard = [float(d.correct) for d in draws]
        assert statistics.pvariance(q) < statistics.pvariance(hard)  # the soft score carries less sampling noise
        # conditioned on the outcome: right samples put more mass on the right letter than wrong ones
        assert statistics.fmean(x for x, d in zip(q, draws) if d.correct) > statistics.fmean(x for x, d in zip(q, draws) if not d.correct)


def _sim_inference(tmp_path, params, cache=None):
    world = World.generate(seed=3, n_task_types=2, questions_per_type=5)
    from harness.sim.benchmark import SimBenchmark

    bench = SimBenchmark(world)
    llm = SimProvider(world)
    if cache is not None:
        llm = CachedProvider(llm, cache)
    with HarnessLog(tmp_path / "log.sqlite") as log:
        result = asyncio.run(run_inference(bench.questions(), harness_tree_for=bench.base_harness(), llm=llm,
                                           tool_dispatch_fn=bench.tool_dispatch, scorer=bench.score, log=log, run_id="soft_run",
                                           params=params, sample_indices=7))
        stored = {r["qid"]: r["soft_score"] for r in log.query("SELECT qid, soft_score FROM predictions")}
    return result, stored


def test_simulated_rollouts_get_a_soft_score_through_the_real_parser_and_the_cache_replays_it(tmp_path):
    params = {"temperature": 0.7, "max_tokens": 256, "logprobs": True, "top_logprobs": 4}
    with ResponseCache(tmp_path / "cache") as cache:
        first, stored = _sim_inference(tmp_path / "a", params, cache)
        again, _ = _sim_inference(tmp_path / "b", params, cache)
    softs = list(first.soft_by_sample.values())
    assert softs and all(s is not None and 0.0 <= s <= 1.0 for s in softs)
    assert stored == {qid: s for (qid, _), s in first.soft_by_sample.items()}
    assert first.soft_score == pytest.approx(statistics.fmean(softs))
    assert again.soft_by_sample == first.soft_by_sample  # replayed from the cache with its log-probabilities
    plain, _ = _sim_inference(tmp_path / "c", {"temperature": 0.7, "max_tokens": 256})
    assert all(s is None for s in plain.soft_by_sample.values()) and plain.soft_score is None
    assert plain.correctness_by_sample == first.correctness_by_sample  # asking for log-probabilities changes no outcome


class LogprobServer:
    """A real OpenAI-compatible HTTP server on 127.0.0.1 whose replies carry token log-probabilities, and which
    records the request bodies."""

    def __init__(self, letter: str, top: list[tuple[str, float]]):
        self.bodies: list[dict] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_POST(self):
                outer.bodies.append(json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0)))))
                content = [{"token": "ANSWER:", "logprob": 0.0, "top_logprobs": []},
                           {"token": f" {letter}", "logprob": dict(top)[f" {letter}"],
                            "top_logprobs": [{"token": t, "logprob": lp} for t, lp in top]}]
                send_json(self, {"choices": [{"message": {"content": f"ANSWER: {letter}"}, "logprobs": {"content": content}}],
                                 "usage": {"prompt_tokens": 3, "completion_tokens": 2}})

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def test_openai_path_reads_the_servers_log_probabilities_into_the_soft_score(tmp_path):
    server = LogprobServer("A", [(" A", math.log(0.5)), (" B", math.log(0.3)), (" C", math.log(0.2))])
    try:
        provider = OpenAIProvider(fast_llm_config(base_url=server.base_url), api_key="local")
        tree = HarnessTree({"system_prompt.md": "Solve.", "skills/default-strategy/SKILL.md": "Think."})
        with HarnessLog(tmp_path / "log.sqlite") as log:
            async def go():
                try:
                    return await run_inference([MC], harness_tree_for=tree, llm=provider, tool_dispatch_fn=None,
                                               scorer=lambda q, p: p == q.answer, log=log, run_id="real_soft",
                                               params={"logprobs": True, "top_logprobs": 3})
                finally:
                    await provider.aclose()

            result = asyncio.run(go())
    finally:
        server.close()
    assert server.bodies[0]["logprobs"] is True and server.bodies[0]["top_logprobs"] == 3
    assert result.correctness_by_sample[("q1", 0)] is False  # it answered A; B is right
    assert result.soft_by_sample[("q1", 0)] == pytest.approx(0.3)  # the probability it gave B


def test_gate_metric_outcomes_are_unbiased_roundings_of_the_metric():
    assert metric_outcome("hard", True, 0.1, qid="q", sample_index=1) is True
    assert metric_value("mixed", True, 0.4, qid="q") == pytest.approx(0.7) and metric_value("soft", False, 0.4, qid="q") == 0.4
    n = 20_000
    for metric, correct, soft in (("soft", False, 0.3), ("mixed", True, 0.3), ("soft", True, 0.9)):
        value = metric_value(metric, correct, soft, qid="q7")
        draws = [metric_outcome(metric, correct, soft, qid="q7", sample_index=10_000_000 + i) for i in range(n)]
        assert abs(sum(draws) / n - value) < 4 * math.sqrt(value * (1 - value) / n)  # seeded: 4 standard errors
        assert draws == [metric_outcome(metric, correct, soft, qid="q7", sample_index=10_000_000 + i) for i in range(n)]  # replayable
    with pytest.raises(MissingSoftScoreError, match="gate.metric = soft but the rollout of qid 'q1' has no soft score.*llm.top_logprobs"):
        metric_outcome("soft", True, None, qid="q1", sample_index=0)
