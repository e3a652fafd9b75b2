"""certify.per_type=rollback (harness/loop/certify.py): on a small simulated world, a candidate that helps every task
type but one, which a trap makes truly worse, is certified, flagged on that type, rolled back to the start's skill file
for it and certified once more on fresh sample indices at its parent's level; a candidate that helps every type is
certified with nothing rolled back. certify.type_pairs: a certified attempt's per-type rows are topped up on fresh
samples of each changed type, the e-process untouched. The sim provider reads the real prompts; the oracle gives the
true per-type change.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest

from harness.config.load import load_config
from harness.contracts.solver import resolve_skill_file
from harness.identity import CERTIFY_INDEX
from harness.loop.certify import RECERTIFY_OFFSET, TOPUP_OFFSET, Contender, changed_types, run_certificate
from harness.loop.stages.certify import certify_params
from harness.tree import HarnessTree

N_TYPES, PER_TYPE = 3, 40  # seed 3: the trapped type loses ~29 pts, the others gain ~26 and ~45 (oracle)


@pytest.fixture(scope="module")
def world_ctx(tmp_path_factory):
    from harness.compose import build_benchmark, build_provider
    from harness.log import HarnessLog
    from harness.loop import rollouts as ro
    from harness.loop.context import make_context

    root = tmp_path_factory.mktemp("rollback_world")
    n = N_TYPES * PER_TYPE
    cfg = load_config([f"benchmark.n_task_types={N_TYPES}", f"benchmark.questions_per_type={PER_TYPE}", "benchmark.seed=3",
                       f"pools.test_size={n // 3}", f"pools.val_size={n // 3}", f"pools.diagnosis_size={n - 2 * (n // 3)}",
                       "pools.eval_min_per_class=5", "batching.batch_size=20", "batching.min_class_per_batch=1",
                       "tracking=none", "train.epochs=1", "certify.max_pairs=600"], env_file=None, environ={})
    bench = build_benchmark(cfg.benchmark, root)
    ctx = make_context(cfg, root, llm=build_provider(cfg.llm, world=bench.world), bench=bench)
    log = HarnessLog(root / "runlog.sqlite")
    for arm in ("base", "candidate", "candidate-rolled-back"):
        log.record_run(f"t_certify_{arm}", "certify")
    yield {"cfg": cfg, "world": bench.world, "rollout": ro.rollout_fn(ctx, log)}
    log.close()


def _with_rules(world, base: HarnessTree, kinds: dict[str, str]) -> HarnessTree:
    """`base` with, in each named type's skill file, every world rule of the given kind (insight / trap) stated."""
    files = dict(base)
    for task_type, kind in kinds.items():
        path = resolve_skill_file(base, task_type)
        files[path] = files[path].rstrip("\n") + "".join(f"\n- {r.text}" for r in world.rules_of(task_type, kind)) + "\n"
    return HarnessTree(files)


def _certify(ctx, candidate: HarnessTree, per_type: str = "rollback", **params_over):
    world, cfg = ctx["world"], ctx["cfg"]
    seen: dict[str, set[int]] = {}

    async def rollout(tree, items, run_id):  # records which sample indices each arm was asked with
        seen.setdefault(run_id, set()).update(i for _, i in items)
        return await ctx["rollout"](tree, items, run_id)

    params = replace(certify_params(cfg), **params_over)
    qids = sorted(q.qid for q in world.questions)
    cert = asyncio.run(run_certificate(
        [Contender("candidate", candidate)], Contender("base", world.base_harness()), qids=qids,
        questions={q.qid: q for q in world.questions}, rollout=rollout, params=params, fallback_share=0.2,
        run_id=lambda arm: f"t_certify_{arm}", seed=5, first_index=CERTIFY_INDEX, pool="test", per_type=per_type))
    return cert, seen, params


def test_a_truly_regressing_type_is_rolled_back_and_recertified_on_fresh_samples(world_ctx):
    from harness.sim.oracle import Oracle

    world = world_ctx["world"]
    base = world.base_harness()
    types = list(world.task_type_names)
    bad = next(t for t in types if world.rules_of(t, "trap"))
    kinds = {t: "insight" for t in types if t != bad and world.rules_of(t, "insight")}
    candidate = _with_rules(world, base, {**kinds, bad: "trap"})
    oracle = Oracle(world)
    bad_qids = [q.qid for q in world.questions if q.task_type == bad]
    all_qids = [q.qid for q in world.questions]
    assert oracle.expected_accuracy(candidate, bad_qids) < oracle.expected_accuracy(base, bad_qids) - 0.05  # truly worse
    assert oracle.expected_accuracy(candidate, all_qids) > oracle.expected_accuracy(base, all_qids)  # better overall

    cert, seen, params = _certify(world_ctx, candidate)
    first, retry = cert.attempts[0], cert.attempts[-1]
    assert first.decision == "certified" and bad in {t.task_type for t in first.per_task_type if t.flagged}
    assert retry.rollback is not None and retry.rollback["of"] == "candidate" and bad in retry.rollback["task_types"]
    assert retry.rollback["files"] == {resolve_skill_file(base, bad): "restored"}
    # the alpha split: the first attempts' levels sum to certify.alpha; the re-certification runs at its parent's
    assert sum(a.alpha for a in cert.attempts if a.rollback is None) == pytest.approx(params.alpha)
    assert cert.levels["total"] == params.alpha and retry.alpha == first.alpha
    # fresh sample indices: none the first attempt (or its baseline) used
    first_idx = seen["t_certify_candidate"]
    retry_idx = seen["t_certify_candidate-rolled-back"]
    assert retry_idx and not retry_idx & first_idx and min(retry_idx) >= CERTIFY_INDEX + RECERTIFY_OFFSET
    assert seen["t_certify_base"] >= retry_idx  # the baseline was asked again with the fresh indices
    assert retry.decision == "certified" and cert.delivered == retry.label and cert.chosen is retry
    assert "rolled back" in cert.summary and bad not in cert.flagged_task_types
    # what is delivered is the candidate with the trapped type's skill file back to the start's, truly not worse on it
    delivered = candidate.with_files({resolve_skill_file(base, bad): base[resolve_skill_file(base, bad)]})
    assert delivered.fingerprint == retry.fingerprint
    assert oracle.expected_accuracy(delivered, bad_qids) == pytest.approx(oracle.expected_accuracy(base, bad_qids))


def test_nothing_is_rolled_back_when_no_type_regresses(world_ctx):
    world = world_ctx["world"]
    base = world.base_harness()
    candidate = _with_rules(world, base, {t: "insight" for t in world.task_type_names if world.rules_of(t, "insight")})
    cert, seen, _ = _certify(world_ctx, candidate)
    assert cert.certified and cert.delivered == "candidate" and cert.flagged_task_types == []
    assert [a.rollback for a in cert.attempts] == [None] and "t_certify_candidate-rolled-back" not in seen


def test_flag_mode_never_rolls_back(world_ctx):
    world = world_ctx["world"]
    base = world.base_harness()
    types = list(world.task_type_names)
    bad = next(t for t in types if world.rules_of(t, "trap"))
    candidate = _with_rules(world, base, {**{t: "insight" for t in types if t != bad and world.rules_of(t, "insight")}, bad: "trap"})
    cert, seen, _ = _certify(world_ctx, candidate, per_type="flag")
    assert cert.per_type == "flag" and len(cert.attempts) == 1 and cert.delivered == "candidate"
    assert bad in cert.flagged_task_types and "t_certify_candidate-rolled-back" not in seen



def test_rollback_tree_puts_back_the_flagged_types_files_and_with_shared_the_system_prompt():
    from harness.loop.certify import rollback_tree

    base = HarnessTree({"system_prompt.md": "be brief\n", "skills/a/SKILL.md": "a0\n", "skills/b/SKILL.md": "b0\n",
                        "skills/default-strategy/SKILL.md": "d0\n"})
    parent = base.with_files({"system_prompt.md": "be brief\n- For a questions, trap\n", "skills/a/SKILL.md": "a1\n",
                              "skills/b/SKILL.md": "b1\n", "skills/c/SKILL.md": "c1\n"})
    tree, files, kept = rollback_tree(parent, base, ["a", "c", "e"])
    # a: its own file back; c: a file the base does not have is removed; e reads default-strategy, unchanged: kept
    assert files == {"skills/a/SKILL.md": "restored", "skills/c/SKILL.md": "removed"} and set(kept) == {"e"}
    assert tree["skills/a/SKILL.md"] == "a0\n" and "skills/c/SKILL.md" not in tree
    assert tree["skills/b/SKILL.md"] == "b1\n" and tree["system_prompt.md"] == parent["system_prompt.md"]
    tree, files, kept = rollback_tree(parent, base, ["a", "e"], shared=True)
    assert files == {"skills/a/SKILL.md": "restored", "system_prompt.md": "restored"} and kept == {}
    assert tree == base.with_files({"skills/b/SKILL.md": "b1\n", "skills/c/SKILL.md": "c1\n"})


def test_rollback_of_a_type_split_off_an_edited_default_gives_it_the_baseline_default_text():
    """A type with a file of its own the baseline lacks (the type check split it off an edited default-strategy):
    removing the file would make it read the edited default, so it gets the default text it read at the baseline."""
    from harness.loop.certify import rollback_tree

    base = HarnessTree({"skills/a/SKILL.md": "a0\n", "skills/default-strategy/SKILL.md": "d0\n"})
    parent = base.with_files({"skills/default-strategy/SKILL.md": "d1\n", "skills/c/SKILL.md": "d0\n- c rule\n"})
    tree, files, kept = rollback_tree(parent, base, ["c"])
    assert files == {"skills/c/SKILL.md": "restored"} and kept == {}
    assert tree["skills/c/SKILL.md"] == "d0\n" and tree["skills/default-strategy/SKILL.md"] == "d1\n"


def test_type_topup_fills_each_changed_type_on_fresh_samples_and_leaves_the_e_process_alone(world_ctx):
    """Report seed 14 (type_regressions.md): the certificate stopped at 80 pairs, its -22-point type had 5 pairs, all
    ties, and was not flagged. The top-up gives every type the candidate changed `type_pairs` pairs in its row."""
    world = world_ctx["world"]
    base = world.base_harness()
    types = sorted(world.task_type_names)
    still = types[-1]  # the candidate leaves this type's harness as it was
    candidate = _with_rules(world, base, {t: "insight" for t in types[:-1] if world.rules_of(t, "insight")})
    changed = set(changed_types(candidate, base, types))
    assert changed and still not in changed
    before, _, _ = _certify(world_ctx, candidate, per_type="flag")
    want = 1 + max(t.pairs for t in before.attempts[0].per_task_type)  # more than any type had: every changed one is short
    after, seen, _ = _certify(world_ctx, candidate, per_type="flag", type_pairs=want)
    a, b = before.attempts[0], after.attempts[0]
    assert a.decision == b.decision == "certified"
    # the certificate itself (pairs, estimate, bounds, e-process) is the same: top-up pairs feed the per-type rows only
    assert (b.pairs, b.estimate, b.lower_bound, b.upper_bound, b.log_e) == (a.pairs, a.estimate, a.lower_bound, a.upper_bound, a.log_e)
    rows_a = {r.task_type: r.pairs for r in a.per_task_type}
    rows_b = {r.task_type: r.pairs for r in b.per_task_type}
    assert all(rows_b[t] == want for t in changed) and rows_b.get(still) == rows_a.get(still)
    added = sum(want - rows_a.get(t, 0) for t in changed)
    assert after.rollouts == before.rollouts + 2 * added and f"{added} top-up pairs" in b.reason
    topup = {i for i in seen["t_certify_candidate"] if i >= CERTIFY_INDEX + TOPUP_OFFSET}
    assert len(topup) == added and max(topup) < CERTIFY_INDEX + RECERTIFY_OFFSET  # fresh: never an attempt's index


def test_changed_types_are_all_types_when_a_shared_file_changed():
    base = HarnessTree({"system_prompt.md": "be brief\n", "skills/a/SKILL.md": "a0\n", "skills/default-strategy/SKILL.md": "d0\n"})
    assert changed_types(base.with_files({"skills/a/SKILL.md": "a1\n"}), base, ["a", "b"]) == ["a"]
    assert changed_types(base.with_files({"skills/default-strategy/SKILL.md": "d1\n"}), base, ["a", "b"]) == ["b"]
    assert changed_types(base.with_files({"system_prompt.md": "x\n"}), base, ["a", "b"]) == ["a", "b"]
    assert changed_types(base, base, ["a", "b"]) == []
