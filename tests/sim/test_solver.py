import asyncio

import pytest

from harness.agent.prompts import solver_messages
from harness.contracts.solver import parse_answer, skill_path
from harness.contracts.tool_calls import parse_tool_call, render_tool_result
from harness.llm.protocol import ChatMessage, LLMError, LLMRequest, Role
from harness.sim.oracle import Oracle
from harness.sim.provider import SimProvider
from harness.sim.world import World

WORLD = World.generate(7)
TREE = WORLD.base_harness()
NO_TOOLS = TREE.with_files({"tools/lookup_frames.md": None})


def ask(provider, tree, q, sample_index, role=Role.SOLVER):
    msgs = solver_messages(tree, q.task_type, q.question, q.choices)
    return asyncio.run(provider.complete(LLMRequest.make(role, msgs, sample_index=sample_index))).text


def test_same_inputs_same_reply_new_sample_index_can_differ():
    provider = SimProvider(WORLD)
    other = SimProvider(World.generate(7))  # a fresh process rebuilding the world from config
    oracle = Oracle(WORLD)
    mid = [q for q in WORLD.questions if 0.3 < oracle.p_correct(NO_TOOLS, q.qid) < 0.7][:5]
    assert mid
    for q in mid:
        assert ask(provider, NO_TOOLS, q, 3) == ask(provider, NO_TOOLS, q, 3) == ask(other, NO_TOOLS, q, 3)
        answers = {parse_answer(ask(provider, NO_TOOLS, q, s)) == q.answer for s in range(40)}
        assert answers == {True, False}


def test_harness_content_changes_the_sample():
    provider = SimProvider(WORLD)
    q = WORLD.questions[0]
    edited = NO_TOOLS.with_files({"system_prompt.md": NO_TOOLS["system_prompt.md"] + "\nBe brief.\n"})
    a = [ask(provider, NO_TOOLS, q, s) for s in range(30)]
    b = [ask(provider, edited, q, s) for s in range(30)]
    assert a != b  # same P(correct) (neutral text) but a different content hash -> different draws


def test_insight_raises_and_trap_lowers_p_correct_on_questions_it_applies_to():
    oracle = Oracle(WORLD)
    tt = "counting_problem"
    insight, trap = WORLD.rules_of(tt, "insight")[0], WORLD.rules_of(tt, "trap")[0]
    path = skill_path(tt)
    with_insight = NO_TOOLS.with_files({path: NO_TOOLS[path] + f"- {insight.text}\n"})
    with_trap = NO_TOOLS.with_files({path: NO_TOOLS[path] + f"- {trap.text}\n"})
    for qid in WORLD.qids_of(tt):
        applies = dict(WORLD.truth[qid].applies)
        base = oracle.p_correct(NO_TOOLS, qid)
        if insight.rule_id in applies:
            assert oracle.p_correct(with_insight, qid) > base
        else:
            assert oracle.p_correct(with_insight, qid) == pytest.approx(base)
        if trap.rule_id in applies:
            assert oracle.p_correct(with_trap, qid) < base


def test_bloated_always_on_text_costs_accuracy():
    oracle = Oracle(WORLD)
    bloated = NO_TOOLS.with_files({"system_prompt.md": NO_TOOLS["system_prompt.md"] + "Stay focused on the video.\n" * 200})
    assert oracle.expected_accuracy(bloated) < oracle.expected_accuracy(NO_TOOLS) - 0.05


def test_wrong_answers_carry_a_hint_cue_of_the_task_type():
    provider = SimProvider(WORLD)
    wrong = 0
    for q in WORLD.questions[:120]:
        text = ask(provider, NO_TOOLS, q, 0)
        if parse_answer(text) != q.answer:
            wrong += 1
            cues = [r.cue for r in WORLD.rules_of(q.task_type)]
            assert any(f"the {c}" in text for c in cues), text
    assert wrong > 10


def test_tool_call_on_first_turn_then_answer_after_tool_result():
    provider = SimProvider(WORLD)
    calls = 0
    for q in WORLD.questions[:200]:
        msgs = solver_messages(TREE, q.task_type, q.question, q.choices)
        text = asyncio.run(provider.complete(LLMRequest.make(Role.SOLVER, msgs, sample_index=1))).text
        call = parse_tool_call(text)
        if call is None:
            assert parse_answer(text) is not None
            continue
        calls += 1
        assert call.name == "lookup_frames" and isinstance(call.arguments.get("focus"), str)
        msgs += [ChatMessage("assistant", text), ChatMessage("user", render_tool_result(call.name, "frames 01s-04s"))]
        final = asyncio.run(provider.complete(LLMRequest.make(Role.SOLVER, msgs, sample_index=1))).text
        assert parse_tool_call(final) is None and parse_answer(final) is not None
    assert 10 < calls < 60  # tool_call_prob = 0.15 of 200
    assert all(parse_tool_call(ask(provider, NO_TOOLS, q, 1)) is None for q in WORLD.questions[:50])


def test_probe_role_is_answered_like_the_solver():
    provider = SimProvider(WORLD)
    q = WORLD.questions[5]
    assert ask(provider, NO_TOOLS, q, 2, Role.PROBE) == ask(provider, NO_TOOLS, q, 2, Role.SOLVER)


def test_unknown_question_is_a_clear_error():
    provider = SimProvider(WORLD)
    msgs = solver_messages(TREE, "counting_problem", "How many moons has Mars?", ["1", "2", "3", "4"])
    with pytest.raises(LLMError, match="question not in the world") as info:
        asyncio.run(provider.complete(LLMRequest.make(Role.SOLVER, msgs)))
    assert info.value.kind == "bad_request"


def test_stated_confidence_is_a_noisy_signal_of_the_sampled_answer():
    """Right answers say 'Confidence: high' with confidence_when_right, wrong ones with confidence_when_wrong;
    both name a cue, so no wording gives correctness away."""
    provider = SimProvider(WORLD)
    said = {True: [], False: []}
    for q in WORLD.questions[:300]:
        text = ask(provider, NO_TOOLS, q, 4)
        conf = "Confidence: high" in text
        assert conf != ("Confidence: low" in text), text
        said[parse_answer(text) == q.answer].append(conf)
        cues = [r.cue for r in WORLD.rules_of(q.task_type)]
        assert any(f"the {c}" in text for c in cues), text
    p = WORLD.params
    for right, expected in ((True, p.confidence_when_right), (False, p.confidence_when_wrong)):
        rate = sum(said[right]) / len(said[right])
        assert len(said[right]) > 60 and abs(rate - expected) < 0.1, (right, rate)


def test_confidence_draws_leave_correctness_draws_unchanged():
    from harness.sim.solver import SolverModel

    model = SolverModel(WORLD)
    read = model.read("plain system message")
    q = WORLD.questions[3]
    draws = [model.draw(read, q.qid, s) for s in range(50)]
    quiet = SolverModel(World.generate(7, params=WORLD.params.replace(confidence_when_right=0.0, confidence_when_wrong=0.0)))
    assert [d.correct for d in draws] == [quiet.draw(quiet.read("plain system message"), q.qid, s).correct for s in range(50)]
    assert not any(quiet.draw(quiet.read("plain system message"), q.qid, s).confident for s in range(50))
