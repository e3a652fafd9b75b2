import asyncio
import math
import random

from harness.agent.prompts import solver_messages
from harness.contracts.solver import parse_answer, skill_path
from harness.llm.protocol import LLMRequest, Role
from harness.sim.matching import normalize
from harness.sim.oracle import CLASSIFY_THRESHOLD, Oracle
from harness.sim.provider import SimProvider
from harness.sim.world import World

WORLD = World.generate(11)
TREE = WORLD.base_harness().with_files({"tools/lookup_frames.md": None})  # no tool turns: every reply answers


def test_oracle_agrees_with_empirical_accuracy_of_many_samples():
    oracle, provider = Oracle(WORLD), SimProvider(WORLD)
    qids = random.Random(0).sample([q.qid for q in WORLD.questions], 120)
    n_samples = 25

    async def run():
        hits = 0
        for s in range(n_samples):
            for qid in qids:
                q = WORLD.question(qid)
                r = await provider.complete(LLMRequest.make(Role.SOLVER, solver_messages(TREE, q.task_type, q.question, q.choices), sample_index=s))
                hits += parse_answer(r.text) == q.answer
        return hits / (n_samples * len(qids))

    empirical = asyncio.run(run())
    expected = oracle.expected_accuracy(TREE, qids)
    se = math.sqrt(sum(oracle.p_correct(TREE, q) * (1 - oracle.p_correct(TREE, q)) for q in qids) / n_samples) / len(qids)
    assert abs(empirical - expected) < 4 * se, (empirical, expected, se)


def test_best_reachable_tree_states_all_insights_and_no_trap():
    oracle = Oracle(WORLD)
    best = oracle.best_reachable_tree()
    assert oracle.expected_accuracy(best) >= 0.8
    assert oracle.expected_accuracy(best) > oracle.expected_accuracy(WORLD.base_harness()) + 0.2
    text = "\n".join(best.values()).lower()
    assert all(r.text.lower() in text for r in WORLD.rules.values() if r.kind == "insight")
    assert not any(r.text.lower() in text for r in WORLD.rules.values() if r.kind == "trap")


def test_classify_edit_and_edit_effect():
    oracle = Oracle(WORLD)
    tt = WORLD.task_type_names[0]
    path = skill_path(tt)
    qids = WORLD.qids_of(tt)
    add = lambda rule: TREE.with_files({path: TREE[path] + f"- {rule.text}\n"})  # noqa: E731
    insight = next(r for r in WORLD.rules_of(tt, "insight") if r.norm not in normalize(TREE[path]))
    assert oracle.classify_edit(TREE, add(insight), qids) == "helps"
    assert oracle.edit_effect(TREE, add(insight), qids) > CLASSIFY_THRESHOLD
    assert oracle.classify_edit(TREE, add(WORLD.rules_of(tt, "trap")[-1]), qids) == "hurts"
    assert oracle.classify_edit(TREE, add(WORLD.rules_of(tt, "neutral")[-1]), qids) == "neutral"
    assert oracle.edit_effect(TREE, add(WORLD.rules_of(tt, "neutral")[-1]), qids) == 0.0
    # an edit to one task type's skill does not move another type's questions
    other = WORLD.qids_of(WORLD.task_type_names[1])
    assert oracle.edit_effect(TREE, add(insight), other) == 0.0


def test_p_correct_each_is_p_correct_per_question_across_task_types():
    oracle = Oracle(WORLD)
    qids = [q.qid for q in WORLD.questions][::7]
    assert len({WORLD.question(q).task_type for q in qids}) > 1
    assert oracle.p_correct_each(TREE, qids) == [oracle.p_correct(TREE, q) for q in qids]
    assert oracle.expected_accuracy(TREE, qids) == sum(oracle.p_correct(TREE, q) for q in qids) / len(qids)
