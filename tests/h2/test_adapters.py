"""QuestionTaskAdapter runs the training agent loop: same answers, traces and sample indices as AgentLoop itself."""

from __future__ import annotations

import asyncio

from harness.agent.loop import AgentLoop
from harness.h2.adapters import QuestionTaskAdapter
from harness.identity import STEP_STRIDE, label_sample_index
from harness.llm.protocol import LLMRequest, LLMResponse, Role
from harness.sim.benchmark import SimBenchmark
from harness.sim.provider import SimProvider
from harness.sim.world import World


class Recording:
    """The real SimProvider, recording every request it answers."""

    name = "recording"

    def __init__(self, inner):
        self.inner, self.requests = inner, []

    def model_for(self, role: Role) -> str:
        return self.inner.model_for(role)

    async def complete(self, request: LLMRequest) -> LLMResponse:
        self.requests.append(request)
        return await self.inner.complete(request)


def _setup():
    world = World.generate(seed=3, n_task_types=2, questions_per_type=6, n_choices=4)
    bench = SimBenchmark(world)
    task_type = world.task_type_names[0]
    questions = [world.question(q) for q in world.qids_of(task_type)]
    return world, bench, task_type, questions


def test_probe_rollout_equals_the_training_agent_loop_on_every_question():
    world, bench, task_type, questions = _setup()
    tree = SimBenchmark(world).base_harness()
    tool = bench.tools()[0].name
    probe_llm = Recording(SimProvider(world))
    adapter = QuestionTaskAdapter("t", task_type, questions, tree, probe_llm, role=Role.PROBE,
                                  tools={tool: lambda args, q=questions[0]: bench.tool_dispatch(q)(tool, args)})
    label = "h2-x-probe-t.parallel.k1.probe-inv1"
    rollout = asyncio.run(adapter.execute(label, tree))

    agent_llm = Recording(SimProvider(world))
    agent = AgentLoop(agent_llm, max_steps=adapter.max_turns + 1, params={"max_tokens": adapter.max_tokens}, role=Role.PROBE)
    idx = label_sample_index(label)
    direct = [asyncio.run(agent.run(tree, q, tool_dispatch=lambda n, a, q=questions[0]: bench.tool_dispatch(q)(n, a), sample_index=idx))
              for q in questions]

    assert rollout.ok and rollout.meta["sample_index"] == idx
    assert rollout.meta["answers"] == {q.qid: r.answer for q, r in zip(questions, direct)}
    for q, r in zip(questions, direct):
        shown = [(o.kind, o.content) for o in rollout.observations if o.step == q.qid][1:]  # after the question itself
        assert shown == [(t.kind, t.content) for t in r.trace]
    # the same requests, call for call: step k of sample s is sample index s * STEP_STRIDE + k
    key = lambda req: (req.messages, req.sample_index, req.params, req.role)  # noqa: E731
    assert sorted(map(key, probe_llm.requests), key=repr) == sorted(map(key, agent_llm.requests), key=repr)
    assert {req.sample_index // STEP_STRIDE for req in probe_llm.requests} == {idx}
    assert any(req.sample_index % STEP_STRIDE == 1 for req in probe_llm.requests), "no tool call round in this world: pick another seed"


def test_an_unknown_tool_is_an_error_result_shown_to_the_model():
    world, _bench, task_type, questions = _setup()
    tree = SimBenchmark(world).base_harness()
    for tools, message in (({}, "no tools are available for this question"), ({"other": lambda args: "x"}, "is not available in this task")):
        adapter = QuestionTaskAdapter("t", task_type, questions, tree, SimProvider(world), tools=tools)
        rollout = asyncio.run(adapter.execute("h2-x-probe-none", tree))
        errors = [o.content for o in rollout.observations if o.kind == "tool_error"]
        assert errors and all(message in e for e in errors)
        assert rollout.ok  # a tool error is data for the model, not an infrastructure failure
