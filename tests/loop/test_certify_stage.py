"""The certify stage inside training (harness/loop/stages/certify.py): what is delivered, at which levels, and
that holdout, the report and a resume agree with it. A tiny sim run with `gate=accept_all` installs every edit, so
the final harness differs from the start; whether it certifies depends on the world, and both outcomes are checked
for consistency. The engine's statistics are tested in tests/kernel/test_certificate.py.
"""

from __future__ import annotations

import json

import pytest

from harness import workspace as wsp
from harness.contracts.certificate import read_certificate
from harness.loop.stages.certify import read_delivery
from harness.tree import HarnessTree
from tests.loop.conftest import make_runner, tiny_cfg

SETTINGS = ("gate=accept_all", "tracking=none", "train.early_stop_patience=5", "certify.max_pairs=60", "certify.block_size=20")


@pytest.fixture(scope="module")
def accept_all_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("certify_run")
    cfg = tiny_cfg(*SETTINGS)
    runner, counting, cache = make_runner(root, cfg)
    result = runner.train()
    cache.close()
    return {"root": root, "cfg": cfg, "result": result, "paths": runner.paths, "calls": counting.calls}


def test_certificate_levels_attempts_and_delivery_agree(accept_all_run):
    paths, cfg = accept_all_run["paths"], accept_all_run["cfg"]
    cert = read_certificate(paths.certify)
    alpha = float(cfg.certify.alpha)
    first = [a for a in cert.attempts if a.rollback is None]
    assert sum(a.alpha for a in first) <= alpha + 1e-12  # Bonferroni over the attempts
    assert cert.levels["attempts"] == {a.label: a.alpha for a in first} and cert.levels["total"] == alpha
    for a in cert.attempts:
        if a.rollback is not None:  # a rollback re-certification runs at its certified parent's level (fixed sequence)
            parent = next(p for p in first if p.label == a.rollback["of"])
            assert parent.decision == "certified" and a.alpha == parent.alpha
    cert_attempts = first
    assert cert.attempts[0].label == "final"
    assert [a.label for a in cert_attempts[1:]] == [f"epoch {e}" for e in range(int(cfg.train.epochs) - 1, 0, -1)][:len(cert_attempts) - 1]
    fingerprints = [a.fingerprint for a in cert.attempts]
    assert len(set(fingerprints)) == len(fingerprints)  # each fallback differs from the ones tried before it
    tried = [a for a in cert.attempts if a.decision != "skipped"]
    assert all(a.pairs <= int(cfg.certify.max_pairs) and a.rollouts <= 2 * a.pairs for a in tried)
    assert cert.population["pool"] == "test" and cert.population["n_questions"] == int(cfg.pools.test_size)
    # what certify delivers is what holdout delivers, and the certificate travels with it
    _, sv, pv = read_delivery(paths.certify)
    delivered = HarnessTree.load(paths.holdout / "delivered")
    assert delivered == HarnessTree.load(paths.certify / "delivered")
    ws = paths.slow(int(cfg.train.epochs)) / "workspace"
    if cert.chosen is None or cert.chosen.rollback is None:
        assert delivered == wsp.harness_view(ws, sv, pv)
    else:  # the workspace's harness with the rolled-back skill files put back to the start's
        view, start = wsp.harness_view(ws, sv, pv), wsp.harness_view(ws, "v0", "v0")
        changed = {p for p in set(view) | set(delivered) if view.get(p) != delivered.get(p)}
        assert changed == set(cert.chosen.rollback["files"]) and all(delivered.get(p) == start.get(p) for p in changed)
    assert read_certificate(paths.holdout) == cert
    holdout = json.loads((paths.holdout / "holdout.json").read_text())
    assert (holdout["delivered"]["skills_version"], holdout["delivered"]["prompts_version"]) == (sv, pv)
    if cert.chosen is not None and cert.chosen.rollback:  # a rollback was never evaluated on validation
        assert holdout["delivered"]["val_acc"] is None and holdout["delivered"]["best_epoch"] is None
    if cert.certified:
        chosen = cert.chosen
        assert chosen is not None and chosen.lower_bound is not None and chosen.lower_bound >= 0
        assert delivered.fingerprint == chosen.fingerprint
    else:
        assert (sv, pv) == ("v0", "v0") and cert.delivered == "base" and "delivering base" in cert.summary


def test_report_states_the_certificate(accept_all_run):
    from harness.pipeline.collect import RunLayout
    from harness.pipeline.report import make_report

    paths, cfg = accept_all_run["paths"], accept_all_run["cfg"]
    reports = paths.root / "reports"
    make_report(cfg, RunLayout.from_config(cfg, paths.root), reports, project_root=paths.root)
    cert = read_certificate(paths.certify)
    md = (reports / "report.md").read_text()
    assert "## Delivery certificate" in md and cert.summary in md
    metrics = json.loads((reports / "metrics.json").read_text())
    assert metrics["certify_certified"] == float(cert.certified)
    assert metrics["certify_rollouts"] == cert.rollouts


def test_a_certificate_written_before_skip_identical_still_reads(accept_all_run, tmp_path):
    """Files of the same format without session 17's fields (asked_questions, share, identical_task_types,
    identical_input) read with their defaults: every question was asked, no row is an identical-input one."""
    raw = json.loads((accept_all_run["paths"].certify / "certificate.json").read_text())
    assert "asked_questions" in raw["attempts"][0] and "asked_questions" in raw["population"]
    for attempt in raw["attempts"]:
        for key in ("asked_questions", "share", "identical_task_types"):
            attempt.pop(key)
        for row in attempt["per_task_type"]:
            row.pop("identical_input")
    (tmp_path / "certificate.json").write_text(json.dumps(raw))
    old = read_certificate(tmp_path)
    assert old.attempts[0].asked_questions is None and old.attempts[0].identical_task_types == []
    assert old.asked_line() is None and not any(r.identical_input for a in old.attempts for r in a.per_task_type)


def test_a_second_run_replays_the_certificate_for_free(accept_all_run, tmp_path):
    """Resume with nothing left to do: no stage runs, no provider call; the certificate is the same file."""
    cfg, root = accept_all_run["cfg"], accept_all_run["root"]
    runner, counting, cache = make_runner(root, cfg)
    before = (accept_all_run["paths"].certify / "certificate.json").read_bytes()
    runner.train()
    cache.close()
    assert counting.calls == 0
    assert (accept_all_run["paths"].certify / "certificate.json").read_bytes() == before


def test_certify_rerun_after_a_lost_output_pays_nothing(accept_all_run):
    """The certify stage re-run from scratch (its output removed, as after a kill) replays every rollout from the
    response cache: the same certificate, zero provider calls."""
    import shutil

    cfg, root, paths = accept_all_run["cfg"], accept_all_run["root"], accept_all_run["paths"]
    before = read_certificate(paths.certify)
    shutil.rmtree(paths.certify)
    shutil.rmtree(paths.holdout)
    runner, counting, cache = make_runner(root, cfg)
    runner.train()
    cache.close()
    assert counting.calls == 0
    assert read_certificate(paths.certify) == before


def test_the_dvc_stage_reads_only_its_declared_keys(accept_all_run, tmp_path):
    """Under DVC the stage sees the config through a KeyView of its PARAMS and LOCATIONS: with fallbacks to look up
    (2 epochs) it must not read an undeclared key, and it gives the in-process certificate (same draws, cached)."""
    from harness.compose import build_benchmark, build_provider
    from harness.config.key_view import KeyView
    from harness.llm.cache import CachedProvider, ResponseCache
    from harness.loop.context import make_context
    from harness.loop.stages.certify import stage_certify
    from stages.certify import LOCATIONS, PARAMS

    cfg, root, paths = accept_all_run["cfg"], accept_all_run["root"], accept_all_run["paths"]
    assert int(cfg.train.epochs) >= 2  # an earlier epoch exists: the fallback lookup runs
    bench = build_benchmark(cfg.benchmark, root)
    cache = ResponseCache(root / ".cache" / "llm")
    try:
        ctx = make_context(KeyView(cfg, (*PARAMS, *LOCATIONS), "certify"), root,
                           llm=CachedProvider(build_provider(cfg.llm, world=bench.world), cache), bench=bench)
        cert = stage_certify(ctx, paths.slow(int(cfg.train.epochs)), paths.pools, tmp_path / "certify")
    finally:
        cache.close()
    assert cert == read_certificate(paths.certify)


def test_holdout_figures_describe_the_delivered_tree_not_a_rolled_back_parent():
    """holdout.json's val_acc / best_epoch: the best pointer's when it is what is delivered; None for a per-type
    rollback of it (a different tree, never evaluated on validation) or for another harness (a fallback, the start)."""
    from harness.loop.stages.holdout import delivered_figures

    best = wsp.BestPointer(skills="v7", prompts="v2", val_acc=0.68, epoch=3)
    assert delivered_figures(best, "v7", "v2", rolled_back=False) == (0.68, 3)
    assert delivered_figures(best, "v7", "v2", rolled_back=True) == (None, None)
    assert delivered_figures(best, "v0", "v0", rolled_back=False) == (None, None)
    assert delivered_figures(None, "v7", "v2", rolled_back=False) == (None, None)


def test_certify_candidate_current_tests_the_harness_training_ended_with_first(accept_all_run, tmp_path):
    """certify.candidate=current: the first attempt is the last epoch's current harness (the workspace manifest's
    versions), labelled "current"; with a fallback the best pointer ("final") follows it when it differs."""
    from harness.compose import build_benchmark, build_provider
    from harness.llm.cache import CachedProvider, ResponseCache
    from harness.loop.context import make_context
    from harness.loop.stages.certify import stage_certify, training_candidates

    root, paths = accept_all_run["root"], accept_all_run["paths"]
    cfg = tiny_cfg(*SETTINGS, "certify.candidate=current", "certify.fallbacks=1")
    final_state = paths.slow(int(cfg.train.epochs))
    manifest, best = wsp.read_manifest(final_state / "workspace"), wsp.read_best(final_state / "workspace")
    bench = build_benchmark(cfg.benchmark, root)
    cache = ResponseCache(root / ".cache" / "llm")
    try:
        ctx = make_context(cfg, root, llm=CachedProvider(build_provider(cfg.llm, world=bench.world), cache), bench=bench)
        tried = training_candidates(ctx, final_state, 1, "current")
        best_first = training_candidates(ctx, final_state, 0, "best")
        cert = stage_certify(ctx, final_state, paths.pools, tmp_path / "certify")
    finally:
        cache.close()
    assert (tried[0].label, tried[0].skills_version, tried[0].prompts_version) == (
        "current", manifest.skills_version, manifest.prompts_version)
    assert best is not None and [c.label for c in best_first] == ["final"]
    assert (best_first[0].skills_version, best_first[0].prompts_version) == (best.skills, best.prompts)
    if (best.skills, best.prompts) != (manifest.skills_version, manifest.prompts_version):
        assert [c.label for c in tried] == ["current", "final"]
    assert cert.attempts[0].label == "current"
    assert (cert.attempts[0].skills_version, cert.attempts[0].prompts_version) == (manifest.skills_version, manifest.prompts_version)
