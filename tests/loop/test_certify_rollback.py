"""certify.per_type=rollback (harness/loop/certify.py): on a small simulated world, a candidate that helps every task
type but one, which a trap makes truly worse, is certified, flagged on that type, rolled back to the start's skill file
for it and certified once more on fresh sample indices at its parent's level; a candidate that helps every type is
certified with nothing rolled back. certify.type_pairs: a certified attempt's per-type rows are topped up on fresh
samples of each changed type, the e-process untouched. certify.skip_identical: only the questions whose input changed
are asked (one skill file: that type's; a shared file: all), an identical input is refused without pairs. The sim
provider reads the real prompts; the oracle gives the true per-type change.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest

from harness.config.load import load_config
from harness.contracts.solver import render_system_message, resolve_skill_file
from harness.identity import CERTIFY_INDEX
from harness.kernel.certificate import EXACT_ZERO
from harness.loop.certify import IDENTICAL_INPUT, RECERTIFY_OFFSET, TOPUP_OFFSET, Contender, changed_types, run_certificate
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


def _certify(ctx, candidate: HarnessTree, per_type: str = "rollback", asked: dict[str, set[str]] | None = None,
             **params_over):
    world, cfg = ctx["world"], ctx["cfg"]
    seen: dict[str, set[int]] = {}

    async def rollout(tree, items, run_id):  # records which sample indices (and questions) each arm was asked with
        seen.setdefault(run_id, set()).update(i for _, i in items)
        if asked is not None:
            asked.setdefault(run_id, set()).update(q.qid for q, _ in items)
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


def test_the_metrics_describe_the_delivered_rollback_as_the_summary_does(world_ctx):
    """The rollback asks fewer questions than its parent (the restored type reads identical input): every certify_*
    metric, asked share included, is the delivered rollback's, as the summary's figures, its "asked" line and the
    certificate file's population block are."""
    from harness.loop.certify import certificate_metrics

    world = world_ctx["world"]
    base = world.base_harness()
    types = list(world.task_type_names)
    bad = next(t for t in types if world.rules_of(t, "trap"))
    candidate = _with_rules(world, base, {**{t: "insight" for t in types if t != bad and world.rules_of(t, "insight")}, bad: "trap"})
    cert, _, _ = _certify(world_ctx, candidate, skip_identical=True)
    first, retry = cert.attempts[0], cert.attempts[-1]
    assert cert.chosen is retry and cert.described is retry and retry.share is not None and retry.share < first.share
    metrics = certificate_metrics(cert)
    assert metrics["certify_asked_share"] == retry.share == cert.population["asked_share"]
    # the JSON's population block says the same S; the first attempts' S stays under first_attempts
    assert cert.population["asked_questions"] == retry.asked_questions
    assert cert.population["identical_task_types"] == retry.identical_task_types != []
    assert cert.population["first_attempts"]["asked_share"] == first.share != retry.share
    assert (metrics["certify_pairs"], metrics["certify_lower_bound"]) == (retry.pairs, retry.lower_bound)
    assert f"{retry.pairs} pairs)" in cert.summary and cert.asked_line(retry) in cert.summary


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


def test_a_one_file_change_asks_only_the_questions_of_the_type_that_reads_it(world_ctx):
    """certify.skip_identical (default): the other types read byte-identical input, their difference is exactly 0, so
    only the changed type's questions are drawn; the estimate and bounds are in population units (x pi) and the other
    types' rows read 'identical input'. Off: every question is asked, as before."""
    from harness.sim.oracle import Oracle

    world = world_ctx["world"]
    base = world.base_harness()
    types = sorted(world.task_type_names)
    target = next(t for t in types if world.rules_of(t, "insight"))
    candidate = _with_rules(world, base, {target: "insight"})
    asked: dict[str, set[str]] = {}
    cert, _, params = _certify(world_ctx, candidate, per_type="flag", asked=asked)
    assert params.skip_identical
    own = {q.qid for q in world.questions if q.task_type == target}
    assert asked["t_certify_candidate"] <= own and asked["t_certify_base"] <= own  # no other question was asked
    a = cert.attempts[0]
    share = len(own) / len(world.questions)
    assert a.decision == "certified" and a.asked_questions == len(own) and a.share == pytest.approx(share)
    assert a.identical_task_types == [t for t in types if t != target]
    assert (cert.population["asked_questions"], cert.population["identical_task_types"]) == (len(own), a.identical_task_types)
    assert cert.population["n_questions"] == len(world.questions)  # the population is still the whole pool
    rows = {r.task_type: r for r in a.per_task_type}
    assert all(rows[t].identical_input and rows[t].pairs == 0 and rows[t].estimate == 0.0 and not rows[t].flagged
               for t in a.identical_task_types)
    assert not rows[target].identical_input and rows[target].pairs >= a.pairs
    # population units: the estimate is pi x the mean difference on the changed questions, the bounds hold Delta
    oracle = Oracle(world)
    all_qids = [q.qid for q in world.questions]
    delta = oracle.expected_accuracy(candidate, all_qids) - oracle.expected_accuracy(base, all_qids)
    if rows[target].pairs == a.pairs:  # no top-up: the row is the test's pairs, per changed question
        assert a.estimate == pytest.approx(share * rows[target].estimate)
    assert a.lower_bound <= delta <= a.upper_bound and a.upper_bound <= share
    other = len(world.questions) - len(own)
    assert f"asked {len(own)} of {len(world.questions)} test questions (the other {other} read identical input)" in cert.summary
    # off: every question is asked, every type is estimated (today's behaviour, for A/B)
    asked_off: dict[str, set[str]] = {}
    off, _, _ = _certify(world_ctx, candidate, per_type="flag", asked=asked_off, skip_identical=False)
    assert asked_off["t_certify_candidate"] - own and off.attempts[0].share == 1.0 and "asked" not in off.summary
    assert not any(r.identical_input for r in off.attempts[0].per_task_type)


def test_a_shared_file_change_asks_every_question(world_ctx):
    world = world_ctx["world"]
    base = world.base_harness()
    candidate = base.with_files({"system_prompt.md": base.get("system_prompt.md", "") + "\nThink step by step.\n"})
    asked: dict[str, set[str]] = {}
    cert, _, _ = _certify(world_ctx, candidate, per_type="flag", asked=asked, max_pairs=200)
    a = cert.attempts[0]
    assert a.pairs > 0 and a.share == 1.0 and a.identical_task_types == [] and cert.population["identical_task_types"] == []
    assert len({world.question(q).task_type for q in asked["t_certify_candidate"]}) == len(world.task_type_names)


def test_a_candidate_whose_input_is_identical_on_every_question_is_refused_without_pairs(world_ctx):
    """A file no question reads changed (a note beside a skill, a skill of a type the pool does not have): different
    fingerprint, identical input everywhere: not certified, plainly, at no cost."""
    world = world_ctx["world"]
    base = world.base_harness()
    candidate = base.with_files({"skills/not_in_the_pool/SKILL.md": "- a rule nobody reads\n"})
    assert candidate.fingerprint != base.fingerprint
    asked: dict[str, set[str]] = {}
    cert, _, _ = _certify(world_ctx, candidate, asked=asked)
    a = cert.attempts[0]
    assert not cert.certified and cert.delivered == "base" and cert.rollouts == 0 and asked == {}
    assert a.decision == "skipped" and a.pairs == 0 and a.asked_questions == 0 and a.share == 0.0
    assert cert.summary.startswith(f"not certified: {IDENTICAL_INPUT}")
    assert all(r.identical_input for r in a.per_task_type)


def test_a_candidate_whose_input_is_identical_on_every_question_is_certified_non_inferior_without_pairs(world_ctx):
    """With a margin ("not worse by more than m") the same candidate is certified at no cost: Delta = 0 exactly."""
    world = world_ctx["world"]
    base = world.base_harness()
    candidate = base.with_files({"skills/not_in_the_pool/SKILL.md": "- a rule nobody reads\n"})
    asked: dict[str, set[str]] = {}
    cert, _, _ = _certify(world_ctx, candidate, asked=asked, margin=0.02)
    a = cert.attempts[0]
    assert cert.certified and cert.delivered == "candidate" and cert.kind == "non_inferiority"
    assert cert.rollouts == 0 and asked == {} and len(cert.attempts) == 1
    assert (a.decision, a.pairs, a.asked_questions, a.share) == ("certified", 0, 0, 0.0)
    assert (a.estimate, a.lower_bound, a.upper_bound) == (0.0, 0.0, 0.0)
    assert cert.summary.startswith("certified not worse by more than 2.0 pts than base: candidate") and EXACT_ZERO in cert.summary
    assert all(r.identical_input and not r.flagged for r in a.per_task_type)


def test_changed_types_follow_the_rendered_system_message():
    """The rule (shared files, resolved skill file's path and text) and the solver's rendered input agree: a type the
    rule calls unchanged renders the same system message under both trees; a type that starts reading its own file
    (same text as the default it read) counts as changed, conservatively."""
    base = HarnessTree({"system_prompt.md": "be brief\n", "tools/calc.md": "adds\n", "skills/a/SKILL.md": "a0\n",
                        "skills/default-strategy/SKILL.md": "d0\n"})
    edits = [{"skills/a/SKILL.md": "a1\n"}, {"skills/default-strategy/SKILL.md": "d1\n"}, {"tools/calc.md": "adds well\n"},
             {"skills/b/SKILL.md": "d0\n"}, {"skills/a/notes.md": "x\n"}, {"README.md": "x\n"}]
    for edit in edits:
        tree = base.with_files(edit)
        changed = changed_types(tree, base, ["a", "b", "c"])
        for t in set("abc") - set(changed):
            assert render_system_message(tree, t) == render_system_message(base, t), (edit, t)
    assert changed_types(base.with_files({"skills/b/SKILL.md": "d0\n"}), base, ["a", "b"]) == ["b"]
    assert changed_types(base.with_files({"skills/a/notes.md": "x\n"}), base, ["a", "b"]) == []
    assert changed_types(base.with_files({"README.md": "x\n"}), base, ["a", "b"]) == ["a", "b"]  # outside skills/: all


def test_the_holdout_names_the_rolled_back_types_of_what_it_delivers(world_ctx):
    """`rolled_back_types` (the holdout stage's labels, the report's "delivered harness"): the trapped type after a
    rollback re-certification, nothing for a delivery without one."""
    from harness.loop.stages.holdout import rolled_back_types

    world = world_ctx["world"]
    base = world.base_harness()
    types = list(world.task_type_names)
    bad = next(t for t in types if world.rules_of(t, "trap"))
    candidate = _with_rules(world, base, {**{t: "insight" for t in types if t != bad and world.rules_of(t, "insight")}, bad: "trap"})
    assert rolled_back_types(_certify(world_ctx, candidate)[0]) == [bad]
    assert rolled_back_types(_certify(world_ctx, candidate, per_type="flag")[0]) == []
