"""Harness² against the simulated provider: the real prompts, parsed by the sim, answered in the real formats."""

from __future__ import annotations

import asyncio

from harness.h2.adapters import QuestionTaskAdapter
from harness.h2.roles import Roles
from harness.h2.run import improve_task
from harness.h2.surfaces import NATIVE
from harness.h2.validator import validate_tree
from harness.sim.provider import SimProvider
from harness.sim.world import World


def make(seed=3, n=6):
    world = World.generate(seed=seed, n_task_types=3, questions_per_type=12, n_choices=4)
    provider = SimProvider(world)
    tt = world.questions[0].task_type
    qs = [q for q in world.questions if q.task_type == tt][:n]
    return world, provider, QuestionTaskAdapter(f"{tt}-0", tt, qs, world.base_harness(), provider)


def test_sim_base_harness_is_valid_on_the_native_surface():
    world, _, _ = make()
    v = validate_tree(world.base_harness(), NATIVE)
    assert v.ok, v.errors


def test_question_adapter_solves_every_question_through_the_provider():
    _, _, task = make()
    r = asyncio.run(task.execute("h2-t-base-x", task.base_harness()))
    assert r.ok and len(r.deliverable.strip().splitlines()) == len(task.questions)
    assert "(no answer)" not in r.deliverable
    assert all(r.meta["answers"][q.qid] in "ABCD" for q in task.questions)


def test_one_round_k3_parallel_with_sim_roles(tmp_path):
    _, provider, task = make()
    res = asyncio.run(improve_task(task, Roles.from_provider(provider), work_dir=tmp_path / "w", k=3, mode="parallel", run_tag="simt"))
    s = res.summary
    statuses = {st["label"]: st["status"] for st in s["stages"]}
    assert set(statuses) >= {"inv1", "dom1", "inv3", "dom3", "agg1", "agg2", "agg3", "final1", "final2", "final3"}
    assert any(v == "adopted" for k, v in statuses.items() if k.startswith(("inv", "dom", "agg")))  # the sim editor understood the prompt
    assert s["selection"]["method"] in ("selector", "fallback", "single-live") and s["selection"]["anon"]
    assert s["ledger"]["rollouts"] <= 10
    assert validate_tree(res.delivered, NATIVE).ok
